"""Activity frames leave the console's main feed: a real broker, a peer publishing ``ag-ui.frame``
messages on its event channel (``events.local.<actor>``). Hidden by default, counted as ``ev N``
in the status bar, brought back by ``E`` (remembered in ``[ui] show_events``); channel unread
counts and the agent card's recent traffic never count them."""

from __future__ import annotations

import argparse
import json
import uuid

from support.console import screen_text
from support.observer import now_ms, post, presence, put_presence

from conftest import until
from cotal_tui.keygate import TYPEAHEAD_S
from cotal_tui.cli.connection import target_from_args
from cotal_tui.cli.watch_console import session_options
from cotal_tui.session import LiveSession


def frame_msg(space: str, actor: str, run: str, events: list) -> dict:
    """One activity frame as a connector publishes it (events.md §2.1)."""
    return {"id": str(uuid.uuid4()), "ts": now_ms(), "space": space,
            "from": {"id": f"local.{actor}", "name": actor},
            "channel": f"events.local.{actor}",
            "parts": [{"kind": "ag-ui.frame", "protocol": "ag-ui/0.0.57", "threadId": "t1",
                       "runId": run, "epoch": "e1", "seq": 1, "events": events}]}


async def publish_frame(nc, space: str, actor: str, run: str, events: list) -> None:
    m = frame_msg(space, actor, run, events)
    await nc.jetstream().publish(f"cotal.{space}.chat.local.{actor}.events.local.{actor}",
                                 json.dumps(m).encode(), headers={"Nats-Msg-Id": m["id"]})


RUN = [{"type": "RUN_STARTED", "threadId": "t1", "runId": "run-frame-1"},
       {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "FrameTool"},
       {"type": "TOOL_CALL_END", "toolCallId": "c1"}]


def _console(app):
    from cotal_tui.screens.console import ConsoleScreen

    return next(s for s in reversed(app.screen_stack) if isinstance(s, ConsoleScreen))


def _feed_text(app) -> str:
    """What the screen shows inside the feed (the roster beside it names the agents' last tool
    on purpose: widgets/doing.py)."""
    from widgets.feed import FeedView

    r = _console(app).query_one(FeedView).region
    rows = screen_text(app).splitlines()[r.y:r.y + r.height]
    return "\n".join(row[r.x:r.x + r.width] for row in rows)


def _status(app) -> str:
    from widgets.status_bar import StatusBar

    return _console(app).query_one(StatusBar).left().plain


async def test_frames_hidden_counted_and_toggled_back(broker, nc, space, tmp_path, monkeypatch):
    from cotal_tui.app import CotalApp
    from widgets.channel_tabs import ChannelTabs
    from widgets.feed import FeedView

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    args = argparse.Namespace(server=[broker.url], space=space, backfill=50, no_dms=False)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: session.started, what="session")
        await put_presence(nc, space, presence("ada"))
        await until(pilot, lambda: session.model.peer("local.ada") is not None, what="ada")
        for _ in range(3):
            await publish_frame(nc, space, "ada", "run-frame-1", RUN)
        await post(nc, space, "ada", "general", "plain chat after frames")
        await until(pilot, lambda: session.model.event_rows == 3
                    and "plain chat after frames" in screen_text(app), what="rows")
        feed = _console(app).query_one(FeedView)
        # hidden from the feed, counted in the status bar
        assert not any(e.event for e in feed.visible_entries())
        assert any(e.text == "plain chat after frames" for e in feed.visible_entries())
        assert "FrameTool" not in _feed_text(app) and "events.local.ada" not in screen_text(app)
        await until(pilot, lambda: "ev 3" in _status(app), what="the ev counter")
        # frames are no channel: no tab, no unread; #general's unread is its one chat message
        snap = session.model.snapshot()
        assert [c.name for c in snap.channels] == ["general"]
        tabs = _console(app).query_one(ChannelTabs)
        assert tabs.unread("general") == 1
        # the agent card's recent traffic lists the chat message, not the frames
        assert _console(app).open_agent("local.ada")
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen", what="card")
        card = screen_text(app)
        traffic = card.split("recent traffic", 1)[1]  # (its activity block names the tool)
        assert "plain chat after frames" in traffic and "FrameTool" not in traffic
        assert "last tool  ⚙ FrameTool" in card.split("recent traffic", 1)[0]
        assert "events.local.ada" not in card
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is _console(app), what="card closed")
        # E brings them back (and saves it), the counter goes
        await pilot.press("E")
        await until(pilot, lambda: sum(e.event for e in feed.visible_entries()) == 3,
                    what="frames shown")
        await until(pilot, lambda: "FrameTool" in _feed_text(app), what="frame text")
        assert "ev 3" not in _status(app)
        assert "show_events = true" in (tmp_path / "config.toml").read_text()
        # a fourth frame while shown lands in the feed at once
        await publish_frame(nc, space, "ada", "run-frame-1", RUN[:1])
        await until(pilot, lambda: sum(e.event for e in feed.visible_entries()) == 4,
                    what="a live frame shown")
        # E again hides them; the counter counts every frame seen
        await pilot.press("E")
        await until(pilot, lambda: not any(e.event for e in feed.visible_entries()),
                    what="frames hidden again")
        await until(pilot, lambda: "ev 4" in _status(app), what="ev 4")
        assert "show_events = false" in (tmp_path / "config.toml").read_text()
        assert tabs.unread("general") == 1
    await session.stop()


async def test_show_events_in_config_starts_with_frames_shown(broker, nc, space, tmp_path,
                                                               monkeypatch):
    from cotal_tui.app import CotalApp
    from widgets.feed import FeedView

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text("[ui]\nshow_events = true\n")
    args = argparse.Namespace(server=[broker.url], space=space, backfill=50, no_dms=False)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: session.started, what="session")
        await put_presence(nc, space, presence("ada"))
        await publish_frame(nc, space, "ada", "run-frame-2", RUN)
        feed = _console(app).query_one(FeedView)
        await until(pilot, lambda: any(e.event for e in feed.visible_entries()), what="frame")
        assert feed.show_events and "ev 1" not in _status(app)
        # the palette's rows
        _console(app).set_events(False)
        await until(pilot, lambda: "ev 1" in _status(app), what="ev 1")
        assert not any(e.event for e in feed.visible_entries())
        # the key is in ? help
        await pilot.press("question_mark")
        await until(pilot, lambda: "activity frames in the feed (events on/off)"
                    in screen_text(app), what="the E row in help")
    await session.stop()


def test_the_counter_is_compact():
    from widgets.status_bar import compact_count

    assert [compact_count(n) for n in (0, 7, 999, 1000, 1234, 9949, 12_345, 999_499, 1_250_000)] \
        == ["0", "7", "999", "1.0k", "1.2k", "9.9k", "12k", "999k", "1.2M"]


async def test_ev_counts_the_models_frames_compactly(tmp_path, monkeypatch):
    """1,234 frames through the model's input: ``ev 1.2k`` while hidden, gone once shown."""
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    from support.console import make_app
    from meshview.wire.decode import Applied
    from widgets.status_bar import StatusBar

    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        screen = _console(app)
        bar = screen.query_one(StatusBar)
        assert " ev " not in bar.left().plain  # none seen: no counter at all
        model = screen.session.model
        for i in range(1234):
            model.apply_message(Applied(kind="channel", id=f"f{i}", ts=model.clock(),
                                        from_id="local.ada", from_name="ada", from_role=None,
                                        text="▸ run r started", channel="events.local.ada",
                                        event=True))
        assert model.event_rows == 1234
        await until(pilot, lambda: "· ev 1.2k" in screen_text(app), what="ev 1.2k")
        screen.set_events(True)
        await until(pilot, lambda: "ev 1.2k" not in screen_text(app), what="ev gone")


async def test_palette_events_on_and_off(tmp_path, monkeypatch):
    """``:events on`` / ``:events off`` in the palette: the feed follows and the choice is saved."""
    from support.console import make_app
    from widgets.feed import FeedView

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        feed = _console(app).query_one(FeedView)
        assert feed.show_events is False
        await pilot.press("colon", *"events on")
        await until(pilot, lambda: "show the agents' activity frames" in screen_text(app),
                    what="the events on row")
        await pilot.press("enter")
        await until(pilot, lambda: feed.show_events, what="shown")
        assert "show_events = true" in (tmp_path / "config.toml").read_text()
        await pilot.pause(TYPEAHEAD_S)  # keys typed ahead of a notice are dropped
        await pilot.press("colon", *"events off")
        await until(pilot, lambda: "hide the activity frames" in screen_text(app),
                    what="the events off row")
        await pilot.press("enter")
        await until(pilot, lambda: not feed.show_events, what="hidden")
        assert "show_events = false" in (tmp_path / "config.toml").read_text()
