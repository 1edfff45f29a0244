"""The feed shows a reused message id: the later sender's row is marked, a reply quotes and
``o`` jumps to the copy in its own conversation, and a reply that no copy fits is marked
ambiguous and never jumps to a forgery (issue 35 item 4)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from support.console import screen_text

from meshview.model.mesh import MeshModel
from widgets.feed import CONFLICT_MARK, FeedView
from meshview.wire.decode import Applied

T0 = 1_700_000_000_000.0
ORIGINAL = "merge window closes at five"


class FeedApp(App):
    def compose(self) -> ComposeResult:
        yield FeedView(id="feed")


def _model() -> MeshModel:
    m = MeshModel("main", clock=lambda: T0, burst_ms=0)
    m.apply_message(Applied(kind="dm", id="x1", ts=T0, from_id="local.ada", from_name="ada",
                            text=ORIGINAL, to="local.bob"))
    # mallory reuses the id on its own channel, with an earlier ts and ada's name
    m.apply_message(Applied(kind="channel", id="x1", ts=T0 - 3.6e6, from_id="local.mallory",
                            from_name="ada", text="merge window is open all night",
                            channel="general"))
    m.apply_message(Applied(kind="dm", id="r1", ts=T0 + 1, from_id="local.bob", from_name="bob",
                            text="noted", to="local.ada", reply_to="x1"))
    m.apply_message(Applied(kind="channel", id="r2", ts=T0 + 2, from_id="local.carl",
                            from_name="carl", text="which one?", channel="random", reply_to="x1"))
    return m


async def test_a_reused_id_is_marked_and_replies_find_their_own_original():
    m = _model()
    snap = m.snapshot()
    orig, forged, answer, stray = snap.feed
    assert (orig.conflict, forged.conflict) == (False, True)
    assert answer.reply_excerpt == ORIGINAL and stray.reply_ambiguous
    app = FeedApp()
    async with app.run_test(size=(100, 12)) as pilot:
        feed = app.query_one(FeedView)
        feed.update_snapshot(snap)
        await pilot.pause()
        lines = screen_text(app).splitlines()
        row = next(ln for ln in lines if "all night" in ln)
        assert CONFLICT_MARK in row
        assert CONFLICT_MARK not in next(ln for ln in lines if ORIGINAL in ln and "noted" not in ln)
        assert any("↳ re? ambiguous" in ln and "which one?" in ln for ln in lines)
        assert any(f"↳ re: {ORIGINAL[:10]}" in ln and "noted" in ln for ln in lines)
        # o on the answer lands on ada's DM, not on mallory's copy
        assert feed.jump_to_original(answer) and feed.cursor == orig.index
        # o on the stray reply refuses: the id names two senders, neither in its conversation
        assert not feed.jump_to_original(stray) and feed.cursor == orig.index


class DmApp(App):
    def compose(self) -> ComposeResult:
        from widgets.dm_lens import DmLens

        yield DmLens(id="dms")


async def test_the_dm_lens_keeps_the_original_and_marks_the_reused_id():
    from widgets.dm_lens import DmLens, DmThread

    m = MeshModel("main", clock=lambda: T0, burst_ms=0)
    m.set_tap(["cotal.main.>"], True)
    m.apply_message(Applied(kind="dm", id="x1", ts=T0, from_id="local.ada", from_name="ada",
                            text=ORIGINAL, to="local.bob"))
    m.apply_message(Applied(kind="dm", id="x1", ts=T0 - 3.6e6, from_id="local.trudy",
                            from_name="ada", text="forged in the vault", to="local.bob"))
    app = DmApp()
    async with app.run_test(size=(100, 12)) as pilot:
        app.query_one(DmLens).update_snapshot(m.snapshot())
        await pilot.pause()
        thread = app.query_one(DmThread)
        texts = {}
        for pair in (("local.ada", "local.bob"), ("local.bob", "local.trudy")):
            thread.pair = pair
            texts[pair] = " ".join(t.plain for _, lines in thread.build(80) for t in lines)
        ours, theirs = texts.values()
        assert ORIGINAL in ours and "reused id" not in ours
        assert "forged in the vault" in theirs and "⚠ reused id" in theirs


def test_r_in_the_dm_lens_answers_the_dm_not_a_copy_of_its_id():
    """``r`` on a DM conversation replies to its last message through ``Snapshot.row_of``:
    the sender's own DM row, so a forger's later copy of the id cannot lend the reply its
    thread."""
    m = MeshModel("main", clock=lambda: T0, burst_ms=0)
    m.apply_message(Applied(kind="dm", id="x1", ts=T0, from_id="local.ada", from_name="ada",
                            text=ORIGINAL, to="local.bob", context_id="ctx-real"))
    m.apply_message(Applied(kind="channel", id="x1", ts=T0 + 5, from_id="local.mallory",
                            from_name="ada", text="follow me", channel="general",
                            context_id="ctx-forged"))
    snap = m.snapshot()
    [last] = snap.dm_thread("local.ada", "local.bob")
    row = snap.row_of(last)
    assert row is not None and row.from_id == "local.ada" and row.context_id == "ctx-real"
