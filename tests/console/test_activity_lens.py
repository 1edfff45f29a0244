"""The activity lens (issue 37 item 4) against a real broker: peers publish ``ag-ui.frame``
messages on their event channels (``events.local.<actor>``), some before the console starts
(only the lens's direct read of the agent's event subject brings those: the console's prefill
keeps event channels out). The lens opens from the roster key and the palette, shows runs newest
first with the upstream fold's text, Enter expands, a skipped seq puts the gap notice in its
header, a lying peer (B publishing on its own subject with channel ``events.<A>``) never shows in
A's lens, and a replay's lens reads the recording's frames."""

from __future__ import annotations

import argparse
import json
import uuid

from support.console import screen_text
from support.observer import now_ms, presence, put_presence

from conftest import until
from cotal_tui.cli.connection import target_from_args
from cotal_tui.cli.watch_console import session_options
from cotal_tui.session import LiveSession
from meshview.wire import ExtensionPart
from meshview.wire.parts import agui_frame_text

ADA, BRAM = "local.ada", "local.bram"


def frame_msg(space: str, sender: str, channel_of: str, run: str, seq: int, events: list,
              *, claim: str | None = None) -> dict:
    """One activity frame as a connector publishes it (events.md §2.1); ``claim`` is the name
    the payload says (a liar's), the subject says who really sent it."""
    return {"id": str(uuid.uuid4()), "ts": now_ms(), "space": space,
            "from": {"id": sender, "name": claim or sender.split(".")[1]},
            "channel": f"events.{channel_of}",
            "parts": [{"kind": "ag-ui.frame", "protocol": "ag-ui/0.0.57", "threadId": "t1",
                       "runId": run, "epoch": "e1", "seq": seq, "events": events}]}


async def publish(nc, space: str, sender: str, run: str, seq: int, events: list, *,
                  channel_of: str | None = None, claim: str | None = None) -> dict:
    """``sender`` publishes on its own subject, channel ``events.<channel_of>`` (its own by
    default: a liar names another agent's)."""
    m = frame_msg(space, sender, channel_of or sender, run, seq, events, claim=claim)
    await nc.jetstream().publish(f"cotal.{space}.chat.{sender}.events.{channel_of or sender}",
                                 json.dumps(m).encode(), headers={"Nats-Msg-Id": m["id"]})
    return m


def fold(events: list) -> str:
    """The upstream fold's text of a frame carrying ``events`` (what the lens must show)."""
    return agui_frame_text(ExtensionPart("ag-ui.frame", events=events))


HIST = [  # ada's first run, published before the console starts
    [{"type": "RUN_STARTED", "threadId": "t1", "runId": "run-hist-1",
      "cotal": {"turnSource": "user"}}],
    [{"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "HistTool"},
     {"type": "TOOL_CALL_END", "toolCallId": "c1"}],
    [{"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
     {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "reading the history tests"},
     {"type": "TEXT_MESSAGE_END", "messageId": "m1"}],
    [{"type": "RUN_FINISHED", "threadId": "t1", "runId": "run-hist-1"}],
]
LIVE = [{"type": "RUN_STARTED", "threadId": "t1", "runId": "run-live-2"},
        {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "LiveTool"}]
FORGED = [{"type": "TEXT_MESSAGE_START", "messageId": "f1", "role": "assistant"},
          {"type": "TEXT_MESSAGE_CONTENT", "messageId": "f1", "delta": "FORGED BY BRAM"}]


def _lens(app):
    from cotal_tui.screens.activity import ActivityScreen

    s = app.screen
    return s if isinstance(s, ActivityScreen) and s.is_mounted else None


def _lines(app) -> list[str]:
    lens = _lens(app)
    return lens.runs_list.line_texts() if lens is not None else []


def _head(app) -> str:
    from textual.widgets import Static

    lens = _lens(app)
    if lens is None:
        return ""
    return str(lens.query_one("#activity-head", Static).render())


def _console(app):
    from cotal_tui.screens.console import ConsoleScreen

    return next(s for s in reversed(app.screen_stack) if isinstance(s, ConsoleScreen))


def _live(broker, nc, space) -> LiveSession:
    args = argparse.Namespace(server=[broker.url], space=space, backfill=50, no_dms=False)
    return LiveSession(nc, target_from_args(args), space, session_options(args))


async def _history(nc, space) -> None:
    await put_presence(nc, space, presence("ada"))
    await put_presence(nc, space, presence("bram"))
    for i, events in enumerate(HIST, 1):
        await publish(nc, space, ADA, "run-hist-1", i, events)
    # bram, on its own subject, names ada's event channel and ada's name in the payload
    await publish(nc, space, BRAM, "run-hist-1", 5, FORGED, channel_of=ADA, claim="ada")


async def test_roster_key_history_live_expand_gap_and_a_liar(broker, nc, space, tmp_path,
                                                               monkeypatch):
    from cotal_tui.app import CotalApp
    from widgets.roster import Roster

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    await _history(nc, space)
    session = _live(broker, nc, space)
    app = CotalApp(session=session)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: session.started, what="session")
        await until(pilot, lambda: session.model.peer(ADA) is not None
                    and session.model.peer(BRAM) is not None, what="ada and bram")
        # the console's prefill keeps event channels out: the history frames are not in the ring
        assert session.model.event_rows == 0
        roster = _console(app).query_one(Roster)
        roster.focus()
        await until(pilot, lambda: ADA in [k for k, _ in roster.items], what="ada's row")
        roster.select_key(ADA)
        await pilot.press("A")
        await until(pilot, lambda: _lens(app) is not None and _lens(app).agent_id == ADA,
                    what="ada's lens")
        lens = _lens(app)
        # the direct read brought the run published before the console started, collapsed
        await until(pilot, lambda: any("run run-hist-1" in x for x in _lines(app)),
                    what=lambda: f"the history run: {_lines(app)} / {_head(app)}")
        head = next(x for x in _lines(app) if "run-hist-1" in x)
        assert head.startswith("▸ run run-hist-1") and "user" in head
        assert "1 tool" in head and head.endswith("finished")
        assert not any("HistTool" in x for x in _lines(app))  # finished: collapsed
        # Enter expands it: the body is the upstream fold's exact text, then how it closed
        await pilot.press("enter")
        await until(pilot, lambda: any("HistTool" in x for x in _lines(app)), what="expanded")
        body = [x[2:] for x in _lines(app)[1:]]
        want = [line for events in HIST for line in fold(events).split("\n")]
        assert body == [*want, "◂ finished"]
        # a live run lands on top, open and expanded
        await publish(nc, space, ADA, "run-live-2", 5, LIVE)
        await until(pilot, lambda: lens.runs_list.runs and lens.runs_list.runs[0].run_id
                    == "run-live-2", what="the live run first")
        await until(pilot, lambda: any("LiveTool" in x for x in _lines(app)), what="live body")
        top = _lines(app)[0]
        assert top.startswith("▾ run run-live-2") and top.endswith("open")
        assert "event frame" not in _head(app)  # no gap yet
        # bram lies live too: on ada's channel, in ada's name
        await publish(nc, space, BRAM, "run-live-2", 6, FORGED, channel_of=ADA, claim="ada")
        # a skipped seq (ada's 6 never comes): the gap notice in the header
        await publish(nc, space, ADA, "run-live-2", 7, [{"type": "RUN_FINISHED",
                                                         "runId": "run-live-2"}])
        await until(pilot, lambda: "⚠ 1 event frame missing (1 break in the stream)" in _head(app),
                    what=lambda: _head(app))
        await until(pilot, lambda: "from other senders not shown" in _head(app), what="liar count")
        assert lens.frames is not None and lens.frames.dropped == 1
        text = "\n".join(_lines(app)) + screen_text(app)
        assert "FORGED" not in text
        assert all(r.frames == () or all(f.sender == ADA for f in r.frames)
                   for r in lens.runs_list.runs)
        # the model's own ledger put the liar's frames under bram, never ada
        assert session.model.frames.agent(BRAM) is not None
        # search: / finds the history run by its tool, n walks
        await pilot.press("slash")
        await pilot.press(*"HistTool")
        await pilot.press("enter")
        await until(pilot, lambda: lens.runs_list.run_at_cursor() == "run-hist-1", what="found")
        # A switches to every agent's line, Enter opens one
        await pilot.press("A")
        await until(pilot, lambda: lens.agent_id is None and lens.all_list.items, what="all")
        every = lens.all_list.line_texts()
        ada_line = next(x for x in every if x.startswith("ada"))
        assert "⚙ LiveTool" in ada_line
        await pilot.press("escape")
        await until(pilot, lambda: _lens(app) is None, what="closed")
    await session.stop()


async def test_palette_opens_one_agent_and_all(broker, nc, space, tmp_path, monkeypatch):
    from cotal_tui.app import CotalApp
    from cotal_tui.palette import activity_hit

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    await _history(nc, space)
    session = _live(broker, nc, space)
    app = CotalApp(session=session)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: session.started, what="session")
        await until(pilot, lambda: _console(app).snap is not None and any(
            p.id == ADA for p in _console(app).snap.peers), what="ada")
        # an unknown name is refused in a sentence, nothing opens
        said: list[str] = []
        hit = activity_hit(_console(app), "activity @nobody", lambda t, e: said.append(t))
        hit.command()
        assert said and "no agent named 'nobody'" in said[0] and _lens(app) is None
        await pilot.press("colon")
        await until(pilot, lambda: type(app.screen).__name__ == "MeshPalette", what="palette")
        await pilot.press(*"activity @ada")
        await until(pilot, lambda: "ada's runs" in screen_text(app), what="the hit")
        await pilot.press("enter")
        await until(pilot, lambda: _lens(app) is not None and _lens(app).agent_id == ADA,
                    what="ada's lens")
        await until(pilot, lambda: any("run-hist-1" in x for x in _lines(app)), what="history")
        await pilot.press("escape")
        await until(pilot, lambda: _lens(app) is None, what="closed")
        # ``activity`` alone: every agent (ada has frames in the model's ledger only once live)
        await publish(nc, space, ADA, "run-live-2", 5, LIVE)
        await until(pilot, lambda: session.model.frames.agent(ADA) is not None, what="live")
        await pilot.press("colon")
        await until(pilot, lambda: type(app.screen).__name__ == "MeshPalette", what="palette")
        await pilot.press(*"activity")
        await until(pilot, lambda: "what every agent is doing" in screen_text(app), what="row")
        await pilot.press("enter")
        await until(pilot, lambda: _lens(app) is not None and _lens(app).agent_id is None
                    and _lens(app).all_list.items, what="all agents")
        assert [k for k, _ in _lens(app).all_list.items] == [ADA]  # bram sent no own frames
        await pilot.press("enter")
        await until(pilot, lambda: _lens(app).agent_id == ADA, what="Enter opens ada")
        await until(pilot, lambda: any("run-live-2" in x for x in _lines(app)), what="runs")
    await session.stop()


async def test_a_refused_history_read_is_said_and_the_lens_stays_live(broker, nc, space,
                                                                       tmp_path, monkeypatch):
    """A session whose read is refused (a scoped credential): the header says why, the
    ``backfill-failed`` notice is there, live frames still draw."""
    from cotal_tui.app import CotalApp
    from meshview.model.agent_activity import ActivityRead

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    await put_presence(nc, space, presence("ada"))

    class Refused(LiveSession):
        async def read_activity(self, agent_id: str, limit: int) -> ActivityRead:
            return ActivityRead(error=f"this credential cannot read events.{agent_id} history "
                                      "(permissions violation)")

    args = argparse.Namespace(server=[broker.url], space=space, backfill=50, no_dms=False)
    session = Refused(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: session.started and session.model.peer(ADA) is not None,
                    what="ada")
        _console(app).open_activity(ADA)
        await until(pilot, lambda: "cannot read events.local.ada history" in _head(app),
                    what=lambda: _head(app))
        assert "history unavailable, so ordering is based on live frames only" in _head(app)
        await publish(nc, space, ADA, "run-live-2", 1, LIVE)
        await until(pilot, lambda: any("LiveTool" in x for x in _lines(app)), what="live")
    await session.stop()


async def test_replay_lens_reads_the_recordings_frames(broker, nc, space, tmp_path, monkeypatch):
    """A recording of a live space replays into the lens: the replay session's read answers
    from the frames the recording played, and the liar's stays out."""
    from cotal_tui.replay_app import ReplayApp
    from meshview.record.record import Recorder
    from meshview.record.replay import ReplaySession, load_recording

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    live = _live(broker, nc, space)
    await live.start()
    path = tmp_path / "r.jsonl.gz"
    rec = Recorder(live.model, str(path))
    try:
        await put_presence(nc, space, presence("ada"))
        await put_presence(nc, space, presence("bram"))
        for i, events in enumerate(HIST, 1):
            await publish(nc, space, ADA, "run-hist-1", i, events)
        await publish(nc, space, BRAM, "run-hist-1", 5, FORGED, channel_of=ADA, claim="ada")
        await until(lambda: live.model.event_rows == 5, what="the frames recorded")
    finally:
        rec.close()
        await live.stop()
    session = ReplaySession(load_recording(str(path)), speed=1000)
    app = ReplayApp(session=session)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: session.replay.at_end, what="the end of the replay")
        await until(pilot, lambda: _console(app).snap is not None
                    and _console(app).snap.feed_end == live.model.feed_end, what="the rows")
        assert _console(app).open_activity(ADA)
        await until(pilot, lambda: any("run-hist-1" in x for x in _lines(app)),
                    what=lambda: f"{_lines(app)} / {_head(app)}")
        lens = _lens(app)
        assert lens.frames is not None and lens.frames.phase == "settled"
        r = lens.runs_list.runs[0]
        assert r.outcome == "finished" and len(r.frames) == len(HIST)  # each once (ring + read)
        await pilot.press("enter")
        await until(pilot, lambda: any("HistTool" in x for x in _lines(app)), what="expanded")
        assert not any("FORGED" in x for x in _lines(app))
        assert lens.frames.dropped == 1  # the liar's row in the ring, counted, not drawn


def _frames_app():
    """The demo space (fixed clock) with ada's frames applied through the model's input: a
    failed run, an open one, and a skipped seq; bram's frames on its own channel."""
    from support.console import make_app

    from meshview.wire import decode_delivery

    app = make_app()
    app.animation_level = "none"
    m = app.session.model
    t0 = app.clock.t - 90_000

    def put(sender: str, run: str, seq: int, events: list, dt: float) -> None:
        body = frame_msg("demo", sender, sender, run, seq, events)
        body["ts"] = int(t0 + dt)
        body["id"] = f"{sender}-{seq}"
        d = decode_delivery(f"cotal.demo.chat.{sender}.events.{sender}", json.dumps(body).encode())
        assert not isinstance(d, type(None)) and hasattr(d, "applied"), d
        m.apply_message(d.applied(received=t0 + dt))

    put(ADA, "run-a1", 1, [{"type": "RUN_STARTED", "threadId": "t1", "runId": "run-a1",
                            "cotal": {"turnSource": "user"}}], 0)
    put(ADA, "run-a1", 2, HIST[1], 2_000)
    put(ADA, "run-a1", 3, [{"type": "RUN_ERROR", "message": "rate limited"}], 9_000)
    put(ADA, "run-b2", 4, [{"type": "RUN_STARTED", "threadId": "t1", "runId": "run-b2",
                            "cotal": {"turnSource": "mention"}}], 30_000)
    put(ADA, "run-b2", 6, HIST[2] + [{"type": "TOOL_CALL_START", "toolCallId": "c9",
                                      "toolCallName": "Bash"}], 60_000)
    put(BRAM, "run-live-2", 1, LIVE, 70_000)
    return app


def test_activity_lens_snapshot(snap_compare):
    async def open_lens(pilot):
        from cotal_tui.screens.console import ConsoleScreen

        console = pilot.app.screen
        assert isinstance(console, ConsoleScreen)
        console.open_activity(ADA)
        await until(pilot, lambda: _lens(pilot.app) is not None
                    and _lens(pilot.app).frames.phase == "settled", what="the lens settled")

    assert snap_compare(_frames_app(), run_before=open_lens, terminal_size=(120, 40))


async def test_the_agent_card_and_a_triage_card_open_the_lens():
    """``A`` on an agent card, and on a triage card, opens that agent's lens; ``A`` on the
    console with no agent panel focused opens every agent's."""
    app = _frames_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        console = _console(app)
        assert console.open_agent(ADA)
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen", what="card")
        await pilot.press("A")
        await until(pilot, lambda: _lens(app) is not None and _lens(app).agent_id == ADA,
                    what="ada's lens from the card")
        await until(pilot, lambda: any("run-b2" in x for x in _lines(app)), what="ada's runs")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is console, what="back")
        # the feed has focus: A opens every agent's line
        await pilot.press("A")
        await until(pilot, lambda: _lens(app) is not None and _lens(app).agent_id is None
                    and _lens(app).all_list.items, what="all agents")
        assert {k for k, _ in _lens(app).all_list.items} == {ADA, BRAM}
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is console, what="back")
        # a triage card: the waiting agent under the cursor
        await pilot.press("T")
        await until(pilot, lambda: type(app.screen).__name__ == "TriageScreen", what="triage")
        from widgets.triage import TriageList

        card = app.screen.query_one(TriageList).selected()
        assert card is not None and card.peer_id == BRAM  # bram waits (the demo space)
        await pilot.press("A")
        await until(pilot, lambda: _lens(app) is not None and _lens(app).agent_id == card.peer_id,
                    what="the waiting agent's lens")
        await until(pilot, lambda: _lines(app)[:1] == ["▾ run run-live-2 · 20s · 1 tool · open"],
                    what=lambda: str(_lines(app)))
