"""Threads are visible: ``replyTo``, ``contextId`` and ``mentions`` reach the
model from a real broker, the feed marks a reply ``↳ re: <first words>`` (``↳ re: <elided id>``
when the original is not in the feed), ``o`` in the feed and Enter in a reply's card put the
cursor on the original, the card lists the three fields, ``--json`` prints them, and
recordings keep them."""

from __future__ import annotations

import json
import time

from support.console import StaticSession, screen_text
from support.observer import now_ms, post
from support.watchproc import WatchProc

from conftest import until
from meshview.model.mesh import MeshModel
from meshview.model.snapshot import PresenceRecord
from meshview.record.record import Recorder
from meshview.record.replay import Replay, load_recording
from meshview.wire.decode import Applied

ORIGINAL = "please review the parser change before lunch"


async def _reply(nc, space: str, sender: str, channel: str, text: str, *, reply_to: str,
                 context: str | None = None, mentions: list[str] | None = None) -> dict:
    m = {"id": f"r-{time.monotonic_ns()}", "ts": now_ms(), "space": space,
         "from": {"id": f"local.{sender}", "name": sender}, "channel": channel,
         "parts": [{"kind": "text", "text": text}], "replyTo": reply_to}
    if context:
        m["contextId"] = context
    if mentions:
        m["mentions"] = mentions
    await nc.jetstream().publish(f"cotal.{space}.chat.local.{sender}.{channel}",
                                 json.dumps(m).encode(), headers={"Nats-Msg-Id": m["id"]})
    return m


async def test_the_observer_and_json_lines_carry_the_thread(broker, nc, space):
    from test_observer import close, start_observer

    w = WatchProc.start("--json", "--server", broker.url, "--space", space)
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        await w.wait_for(lambda: [o for o in w.objs("state") if o.get("connection")], 20,
                         "watch connected")
        orig = await post(nc, space, "ada", "general", ORIGINAL)
        rep = await _reply(nc, space, "bob", "general", "done, looks good",
                           reply_to=orig["id"], context="review-42", mentions=["ada", "eve"])
        row = await until(lambda: next((e for e in model.snapshot().feed
                                        if e.id == rep["id"]), None), 10, "the reply row")
        assert row.reply_to == orig["id"] and row.wire_context_id == "review-42"
        assert row.mentions == ("ada", "eve") and row.reply_excerpt == ORIGINAL
        assert row.context_id == "review-42"  # the thread a reply to the reply joins
        plain = next(e for e in model.snapshot().feed if e.id == orig["id"])
        assert plain.reply_to is None and plain.wire_context_id is None and plain.mentions == ()

        msgs = await w.wait_for(lambda: [o for o in w.objs("message") if o["id"] == rep["id"]],
                                20, "the reply in --json")
        o = msgs[0]
        assert o["replyTo"] == orig["id"] and o["contextId"] == "review-42"
        assert o["mentions"] == ["ada", "eve"]
        first = [x for x in w.objs("message") if x["id"] == orig["id"]][0]
        assert "replyTo" not in first and "contextId" not in first and "mentions" not in first
    finally:
        w.stop()
        await close(obs)


def _thread_model(*, original_in_feed: bool = True) -> MeshModel:
    t = [1_700_000_000_000.0]

    def clock() -> float:
        return t[0]

    m = MeshModel("demo", clock=clock, burst_ms=0)
    for name in ("ada", "bob", "cleo"):  # on the roster: rows show the roster's names
        m.apply_presence(PresenceRecord(id=f"local.{name}", name=name, ts=t[0]))
    if original_in_feed:
        m.apply_message(Applied(kind="channel", id="orig-1", ts=t[0], from_id="local.ada",
                                from_name="ada", text=ORIGINAL, channel="general", received=t[0]))
    for i in range(60):  # the original scrolls out of view above the reply
        t[0] += 100
        m.apply_message(Applied(kind="channel", id=f"chat-{i}", ts=t[0], from_id="local.cleo",
                                from_name="cleo", text=f"chatter {i}", channel="general",
                                received=t[0]))
    t[0] += 100
    m.apply_message(Applied(kind="channel", id="reply-1", ts=t[0], from_id="local.bob",
                            from_name="bob",
                            text="done, looks good", channel="general", received=t[0],
                            reply_to="3f6c2a9e-5d1b-4c7e-9a10-2b8f0c4d7e11" if not original_in_feed
                            else "orig-1", wire_context_id="review-42", mentions=["ada"]))
    return m


def _app(model: MeshModel):
    from cotal_tui.app import CotalApp

    return CotalApp(session=StaticSession(model))


async def test_the_feed_marks_a_reply_and_o_jumps_to_the_original():
    from widgets.feed import FeedView

    app = _app(_thread_model())
    async with app.run_test(size=(120, 40)) as pilot:
        feed = app.screen.query_one(FeedView)
        await until(pilot, lambda: "done, looks good" in screen_text(app), 10, "reply shown")
        assert "bob → #general: ↳ re: please review the… ·" in screen_text(app)
        reply = feed.selected_entry()
        assert reply is not None and reply.id == "reply-1"
        assert "ada → #general: please review" not in screen_text(app)  # scrolled away
        await pilot.press("o")
        await until(pilot, lambda: feed.cursor is not None, 5, "cursor moved")
        assert feed.selected_entry().id == "orig-1"
        assert not feed.follow
        # the original is on screen, selected
        await until(pilot, lambda: "ada → #general: please review" in screen_text(app), 5,
                    "the original scrolled into view")


async def test_enter_opens_the_card_with_the_thread_and_enter_again_jumps():
    from cotal_tui.screens.detail import DetailScreen
    from widgets.feed import FeedView

    app = _app(_thread_model())
    async with app.run_test(size=(120, 40)) as pilot:
        feed = app.screen.query_one(FeedView)
        await until(pilot, lambda: "done, looks good" in screen_text(app), 10, "reply shown")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), 5, "card open")
        card = screen_text(app)
        assert "replyTo  orig-1" in card and "(ada: please review the parser" in card
        assert "enter jumps to it" in card
        assert "contextId  review-42" in card and "mentions  @ada" in card
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, DetailScreen), 5, "card closed")
        await until(pilot, lambda: feed.cursor is not None, 5, "cursor on the original")
        assert feed.selected_entry().id == "orig-1"
        # Enter on a row that answers nothing still opens its card
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), 5, "card again")
        assert "replyTo  -" in screen_text(app)


async def test_a_reply_whose_original_is_gone_shows_its_elided_id():
    from widgets.feed import FeedView

    app = _app(_thread_model(original_in_feed=False))
    async with app.run_test(size=(120, 40)) as pilot:
        feed = app.screen.query_one(FeedView)
        await until(pilot, lambda: "done, looks good" in screen_text(app), 10, "reply shown")
        assert "bob → #general: ↳ re: 3f6c2…8f0c4d7e11 ·" in screen_text(app)
        await pilot.press("o")
        await pilot.pause()
        assert feed.selected_entry().id == "reply-1"  # nowhere to go: the cursor stays


def test_recordings_keep_the_thread(tmp_path):
    t = [1_700_000_000_000.0]
    m = MeshModel("main", clock=lambda: t[0])
    path = str(tmp_path / "r.gz")
    r = Recorder(m, path, checkpoint_s=0.001)
    m.apply_message(Applied(kind="channel", id="o1", ts=t[0], from_id="local.a", from_name="a",
                            text="first words here", channel="general", received=t[0]))
    t[0] += 100
    m.apply_message(Applied(kind="channel", id="r1", ts=t[0], from_id="local.b", from_name="b",
                            text="answer", channel="general", received=t[0], reply_to="o1",
                            wire_context_id="ctx", mentions=["a"]))
    t[0] += 100
    m.apply_message(Applied(kind="dm", id="d1", ts=t[0], from_id="local.b", from_name="b",
                            text="psst",
                            to="local.a", received=t[0], reply_to="o1", mentions=["a"]))
    t[0] += 1000
    m.tick(t[0])
    r.close()
    replay = Replay(load_recording(path))
    replay.seek(replay.end)
    got = {e.id: e for e in replay.model.snapshot().feed}
    assert got["r1"].reply_to == "o1" and got["r1"].wire_context_id == "ctx"
    assert got["r1"].mentions == ("a",) and got["r1"].reply_excerpt == "first words here"
    assert got["d1"].reply_to == "o1" and got["d1"].mentions == ("a",)
    assert tuple(replay.model.snapshot().feed) == tuple(m.snapshot().feed)
