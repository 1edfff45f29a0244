"""The roster says what each agent is doing, from its event frames (issue 37 item 5), on a real
broker: ``⚙ Bash · 12s`` while a run is open (the last tool started), ``✗ run failed 3m`` after a
``RUN_ERROR`` until the next ``RUN_STARTED``, and presence's activity and condition while the
agent waits. The agent card and a NEEDS-YOU card carry the same facts. A lying peer (frames on
its own subject naming another agent's channel and name) never changes that agent's row."""

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

ADA, BOB = "local.ada", "local.bob"


class Peer:
    """One agent publishing its frames on its own subject, seq counting from 1."""

    def __init__(self, nc, space: str, actor: str) -> None:
        self.nc, self.space, self.actor, self.seq = nc, space, actor, 0

    async def frame(self, run: str, events: list, *, channel_of: str | None = None,
                    name: str | None = None) -> None:
        """One frame; ``channel_of``/``name``: the channel and envelope name it claims (a
        lying peer names another agent's)."""
        self.seq += 1
        target = channel_of or self.actor
        m = {"id": str(uuid.uuid4()), "ts": now_ms(), "space": self.space,
             "from": {"id": f"local.{self.actor}", "name": name or self.actor},
             "channel": f"events.local.{target}",
             "parts": [{"kind": "ag-ui.frame", "protocol": "ag-ui/0.0.57", "threadId": "t1",
                        "runId": run, "epoch": "e1", "seq": self.seq, "events": events}]}
        subject = f"cotal.{self.space}.chat.local.{self.actor}.events.local.{target}"
        await self.nc.jetstream().publish(subject, json.dumps(m).encode(),
                                          headers={"Nats-Msg-Id": m["id"]})


def started(run: str, source: str = "human") -> dict:
    return {"type": "RUN_STARTED", "threadId": "t1", "runId": run, "cotal": {"turnSource": source}}


def tool(name: str, cid: str = "c1") -> dict:
    return {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": name}


def _console(app):
    from cotal_tui.screens.console import ConsoleScreen

    return next(s for s in reversed(app.screen_stack) if isinstance(s, ConsoleScreen))


def _roster(app):
    from widgets.roster import Roster

    return _console(app).query_one(Roster)


def _row(app, pid: str) -> str:
    """The roster's lines of ``pid``'s row, as plain text."""
    r = _roster(app)
    return "\n".join(t.plain for k, lines in r.build(r.content_width or 60) if k == pid
                     for t in lines)


async def test_roster_card_and_needs_you_say_what_the_frames_say(broker, nc, space, tmp_path,
                                                                 monkeypatch):
    from cotal_tui.app import CotalApp
    from widgets.needs_you import NeedsYouRail

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    args = argparse.Namespace(server=[broker.url], space=space, backfill=0, no_dms=False)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    ada, bob = Peer(nc, space, "ada"), Peer(nc, space, "bob")
    async with app.run_test(size=(160, 44)) as pilot:
        await until(pilot, lambda: session.started, what="session")
        await put_presence(nc, space, presence("ada", "working"))
        await put_presence(nc, space, presence("bob", "working"))
        await until(pilot, lambda: "bob" in _row(app, BOB) and "ada" in _row(app, ADA),
                    what="both rows")
        roster = _roster(app)
        # a run opens, a tool starts: the row says the last tool and its age
        await ada.frame("r1", [started("r1"), tool("Bash")])
        await until(pilot, lambda: "⚙ Bash · " in _row(app, ADA), what="ada's last tool")
        d = roster.doing(ADA)
        assert d is not None and (d.kind, d.name) == ("tool", "Bash")
        assert "⚙ Bash · " in screen_text(app)
        assert "running" not in _row(app, ADA)
        # the lying peer: its own subject, ada's channel and name, a failed run
        await bob.frame("rb", [started("rb"), tool("Evil"),
                               {"type": "RUN_ERROR", "message": "run failed"}],
                        channel_of="ada", name="ada")
        await until(pilot, lambda: "✗ run failed" in _row(app, BOB), what="bob's own row")
        assert "⚙ Bash · " in _row(app, ADA) and "Evil" not in _row(app, ADA)
        assert roster.doing(ADA) == d
        # the narrow roster's one line per seat says it too
        roster.set_wide(False)
        narrow = _row(app, ADA)
        assert "\n" not in narrow and "ada" in narrow and "⚙ Bash · " in narrow
        roster.set_wide(True)
        # the age ticks with the roster's clock
        first = _row(app, ADA)
        await until(pilot, lambda: _row(app, ADA) != first, timeout=5, what="the age moved")
        assert "⚙ Bash · " in _row(app, ADA)
        # the card's activity block: open run, turn source, last tool
        assert _console(app).open_agent(ADA)
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen", what="card")
        card = screen_text(app)
        assert "r1" in card and "human" in card and "last tool  ⚙ Bash" in card
        assert "1 run · 1 tool in the last hour · 1 frame" in card
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is _console(app), what="card closed")
        # the run fails: said until the next run starts
        await ada.frame("r1", [{"type": "RUN_ERROR", "message": "run failed"}])
        await until(pilot, lambda: "✗ run failed" in _row(app, ADA), what="ada's failure")
        assert "Bash" not in _row(app, ADA)
        await ada.frame("r2", [started("r2", "channel")])
        await until(pilot, lambda: "▸ run open" in _row(app, ADA), what="the next run")
        assert "failed" not in _row(app, ADA)
        await ada.frame("r2", [tool("Edit", "c2")])
        await until(pilot, lambda: "⚙ Edit · " in _row(app, ADA), what="the next tool")
        # waiting: presence's activity and condition win on the row...
        await put_presence(nc, space, presence(
            "ada", "waiting", activity="approve: rm -rf build",
            condition={"code": "approval", "source": "harness", "message": "may I?",
                       "since": now_ms()}))
        await until(pilot, lambda: "approve: rm -rf build" in _row(app, ADA), what="waiting")
        assert "⚙" not in _row(app, ADA) and roster.doing(ADA) is None
        # ...and NEEDS-YOU's card still says what the frames said last
        rail = _console(app).query_one(NeedsYouRail)
        await until(pilot, lambda: any("last tool ⚙ Edit" in t.plain
                                       for _, lines in rail.build(rail.content_width or 40)
                                       for t in lines), what="NEEDS-YOU's last tool")
        # ...and so does its triage card (frames are never what it "last said")
        from widgets.triage import TriageList

        assert app.open_triage(ADA)
        await until(pilot, lambda: type(app.screen).__name__ == "TriageScreen", what="triage")
        lst = app.screen.query_one(TriageList)
        await until(pilot, lambda: any("last tool ⚙ Edit" in t.plain for _, lines in
                                       lst.build(lst.content_width or 60) for t in lines),
                    what="the triage card's last tool")
        text = "\n".join(t.plain for _, lines in lst.build(lst.content_width or 60) for t in lines)
        assert "said nothing on the mesh" in text and "Evil" not in text
    await session.stop()


def test_help_on_the_roster_says_last_tool_not_running():
    from cotal_tui.screens.help import HelpBody

    def text(panel: str) -> str:
        return "\n".join(t.plain for _, lines in HelpBody(panel, [], []).build(120) for t in lines)

    roster = text("roster")
    assert "⚙ Bash · 12s" in roster and "last tool, not running" in roster
    assert "✗ run failed 3m" in roster
    assert "⚙ Bash" not in text("feed")  # the legend goes with the roster's keys only


def test_what_a_row_says_from_the_facts():
    """The rules of widgets/doing.py on the ledger's facts: the open run's last tool (not one
    from an earlier run), a failure until the next run starts, presence first while waiting,
    nothing for an agent offline or gone idle after its last frame."""
    from meshview.model.frames import FrameIn, FrameLedger
    from meshview.model.snapshot import Condition, Peer as Row
    from widgets.doing import Doing, doing_of, doing_text, on_row

    led = FrameLedger()
    t0 = 1_796_000_000_000.0

    def admit(seq, run, events, at):
        led.admit(FrameIn(ADA, f"m{seq}", at, at, False, "ag-ui/0.0.57", "t1", run, "e1", seq,
                          tuple(events)))

    admit(1, "r1", [started("r1"), tool("Bash")], t0)
    assert doing_of(led.agent(ADA)) == Doing("tool", "Bash", t0)
    assert doing_text(Doing("tool", "Bash", t0), t0 + 12_000) == "⚙ Bash · 12s"
    admit(2, "r1", [{"type": "RUN_FINISHED", "runId": "r1"}], t0 + 1000)
    assert doing_of(led.agent(ADA)) is None  # a closed run says nothing about now
    admit(3, "r2", [started("r2")], t0 + 2000)
    assert doing_of(led.agent(ADA)) == Doing("run", None, t0 + 2000)  # Bash was r1's
    assert doing_text(Doing("run", None, t0), t0 + 40_000) == "▸ run open · 40s"
    admit(4, "r2", [{"type": "RUN_ERROR", "message": "run failed"}], t0 + 3000)
    failed = doing_of(led.agent(ADA))
    assert failed == Doing("failed", None, t0 + 3000)
    assert doing_text(failed, t0 + 3000 + 180_000) == "✗ run failed 3m"
    assert doing_text(failed, t0 + 3000, card=True) == "✗ last run failed 0s ago"
    admit(5, "r3", [started("r3")], t0 + 4000)
    assert doing_of(led.agent(ADA)).kind == "run"  # cleared by the next run
    bash = Doing("tool", "Bash\x1b[2J", t0)
    assert "\x1b" not in doing_text(bash, t0)

    def row(status, **kw):
        return Row(ADA, "ada", "agent", status, status, t0, t0, **kw)

    assert on_row(bash, row("working")) == bash
    assert on_row(bash, row("offline")) is None
    assert on_row(bash, row("waiting")) == bash  # presence says nothing more
    assert on_row(bash, row("waiting", activity="approve rm?")) is None
    assert on_row(bash, row("waiting", condition=Condition("input", "harness", None, t0))) is None
    assert on_row(bash, row("idle", status_since=t0 - 1)) == bash
    assert on_row(bash, row("idle", status_since=t0 + 5)) is None  # idle since its last frame
    assert on_row(failed, row("idle", status_since=t0 + 9_000)) == failed
