"""Ids are never cut mid-token: a DM to a principal not on the roster shows
its id whole when it fits, else elided in the middle with ``…``, keeping the actor's end — in
the feed head, the ``--plain`` line and the snapshot's name lookup."""

from __future__ import annotations

from textual.app import App, ComposeResult

from meshview.model.mesh import MeshModel
from meshview.wire.sanitize import cells, elide_id, elide_middle
from meshview.lines.stream import TextRenderer
from widgets.feed import FeedView
from meshview.wire.decode import Applied

LONG = "u_" + "a" * 26 + ".first_agent"


def test_elide_id_keeps_the_actor_and_fits():
    assert elide_id("local.first-agent") == "local.first-agent"
    assert elide_id(LONG, 24) == "u_aaaaaaaaa….first_agent"
    for w in range(1, 40):
        s = elide_id(LONG, w)
        assert cells(s) <= w
        if w < len(LONG):
            assert "…" in s
        if w >= len(".first_agent") + 3:
            assert s.endswith(".first_agent") and s.startswith("u_")
    assert elide_id("x" * 40 + "\x1b", 10).count("…") == 1  # escaped before eliding
    assert cells(elide_middle("日本語のテキストです", 9)) <= 9


def _dm_model() -> MeshModel:
    m = MeshModel("main", burst_ms=0)
    m.apply_message(Applied(kind="dm", id="d1", ts=1_700_000_000_000.0, from_id="local.root",
                            from_name="root-console", from_role="operator", text="are you there",
                            to="local.first-agent"))
    m.apply_message(Applied(kind="dm", id="d2", ts=1_700_000_000_100.0, from_id="local.root",
                            from_name="root-console", from_role="operator", text="second", to=LONG))
    return m


def test_plain_lines_and_snapshot_names_never_cut_an_id():
    m = _dm_model()
    snap = m.snapshot()
    rows = {e.id: e for e in snap.feed}
    plain = TextRenderer(colour=False)
    assert "→ local.first-agent: are you there" in plain.message(rows["d1"])
    assert f"→ {LONG}: second" in plain.message(rows["d2"])  # room enough: whole
    assert snap.name_of("local.first-agent") == "local.first-agent"
    assert snap.name_of(LONG) == "u_aaaaaaaaa….first_agent"


class FeedApp(App):
    def compose(self) -> ComposeResult:
        yield FeedView(id="feed")


async def test_the_feed_head_shows_the_whole_id_or_elides_its_middle():
    m = _dm_model()
    snap = m.snapshot()
    app = FeedApp()
    async with app.run_test(size=(120, 20)):
        feed = app.query_one(FeedView)
        feed.update_snapshot(snap)
        d1, d2 = snap.feed
        first = "".join(s.text for s in feed.row_strips(d1.index, 100))
        assert "→ local.first-agent: are you there" in first
        second = "".join(s.text for s in feed.row_strips(d2.index, 100))
        assert "→ u_aaaaaaaaa….first_agent: second" in second
