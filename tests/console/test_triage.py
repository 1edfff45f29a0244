"""The triage screen on the real thing: a real broker, a real DemoManager whose seat runs a line
program that asks ``Proceed? [y/N]`` (and heartbeats ``waiting`` on ``approval`` while it
waits), and the console's own ``LiveSession``.

The card shows the prompt from the seat's mirror (a peek opened for the visible card), ``y``
shows the exact bytes and sends nothing until Enter, the program prints what it read, the
agent leaves waiting and its card leaves; ``--read-only`` lists every action as unavailable.
"""

from __future__ import annotations

import argparse
import re

import pytest
from cotal_tui.cli.connection import target_from_args

from attach.terminal.mirror import Mirror
from cotal_tui.app import CotalApp
from cotal_tui.cli.watch_console import session_options
from cotal_tui.demo.asking import asking_seat
from cotal_tui.demo.manager import DemoManager
from cotal_tui.screens.triage import MAX_PEEKS, TriageScreen, key_label, shown_bytes
from cotal_tui.session import LiveSession
from widgets.triage import TriageList, excerpt_of
from conftest import until
from support.console import screen_text
from support.runhost import host  # noqa: F401 - the shared run-host fixture

SIZE = (120, 44)
NAME = "asker"


def seat_text(mgr: DemoManager, name: str = NAME) -> str:
    """What the seat's pty shows now (its own mirror's snapshot, replayed)."""
    m = Mirror(120, 32)
    m.feed(mgr.seats[name].pty.snapshot())
    return "\n".join(m.text_lines())


def cards_text(app) -> str:
    """The triage cards' lines ("" until the screen has composed them)."""
    lists = app.screen.query(TriageList) if isinstance(app.screen, TriageScreen) else []
    return "\n".join(lists.first().line_texts()) if lists else ""


def waiting(session) -> list[str]:
    return [n.name for n in session.model.snapshot().signals.needs_you]


@pytest.fixture
async def asking(broker, nc, space, tmp_path):
    seat = asking_seat(str(tmp_path), name=NAME, question="Proceed? [y/N] ", pause_s=600)
    mgr = DemoManager(nc, space, [seat], root=str(tmp_path))
    await mgr.start()
    yield mgr, broker, space
    await mgr.stop()


def make_session(nc, broker, space, **extra) -> LiveSession:
    args = argparse.Namespace(server=[broker.url], space=space, backfill=20, no_dms=False, **extra)
    return LiveSession(nc, target_from_args(args), space, session_options(args))


def test_bytes_are_shown_exactly():
    assert shown_bytes(b"y\r") == 'b"y\\r"'
    assert key_label(b"y\r") == "y⏎"
    assert key_label(b"\x1b") == "⎋"
    assert shown_bytes(b"\x1b[A") == 'b"\\x1b[A"'


def test_excerpt_ends_at_the_cursor_row():
    lines = ["a", "b", "Proceed? [y/N]", "", ""]
    assert excerpt_of(lines, 2, n=2) == ["b", "Proceed? [y/N]"]
    assert excerpt_of(lines, None) == ["a", "b", "Proceed? [y/N]"]



async def open_when_waiting(pilot, app, session, name: str, prompt: str | None = None) -> None:
    """The seat waits and a ps round has answered (the card can be managed): open triage, and
    with ``prompt`` wait until the card's terminal excerpt shows it."""
    await until(pilot, lambda: session.started and waiting(session) == [name], what="seat waiting",
                timeout=20)
    await until(pilot, lambda: app.console_screen().managed is not None
                and app.console_screen().managed.rounds, what="ps answered")
    app.open_triage()
    if prompt is not None:
        await until(pilot, lambda: f"│ {prompt}" in cards_text(app), what="prompt", timeout=15)

async def test_triage_answers_a_seat_in_place(asking, nc, tmp_path, monkeypatch):
    from cotal_tui.actionlog import read_actions

    log = tmp_path / "actions.jsonl"
    monkeypatch.setenv("COTAL_ACTION_LOG", str(log))
    mgr, broker, space = asking
    session = make_session(nc, broker, space)
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: session.started and waiting(session) == [NAME], what="seat waiting",
                        timeout=20)
            n = session.model.snapshot().signals.needs_you[0]
            assert n.condition_code == "approval"
            await until(pilot, lambda: app.console_screen().managed is not None
                        and app.console_screen().managed.rounds, what="ps answered")
            await pilot.press("T")
            await until(pilot, lambda: isinstance(app.screen, TriageScreen), what="triage open")
            scr = app.screen
            # the prompt, from the peek's mirror, on the card
            await until(pilot, lambda: "│ Proceed? [y/N]" in cards_text(app), what="prompt on the card",
                        timeout=15)
            assert "approval" in cards_text(app)
            assert 1 <= len(scr.peeks) <= MAX_PEEKS
            # y asks first, with the exact bytes; nothing reaches the pty before Enter
            await pilot.press("y")
            confirm = str(scr.query_one("#triage-confirm").render())
            assert 'b"y\\r"' in confirm and "Enter send" in confirm
            assert "read:" not in seat_text(mgr)
            await pilot.press("enter")
            await until(pilot, lambda: "read: 'y'" in seat_text(mgr), what="the program read y", timeout=10)
            assert "migration applied" in seat_text(mgr)
            # the action log holds the answer and its outcome, never the bytes typed
            await until(lambda: [(a.what, a.target, a.outcome) for a in read_actions(log)]
                        == [("answer", NAME, "done")], 10, "the logged answer")
            assert [a.mesh for a in read_actions(log)] == [space]  # :log's mesh column
            assert '"y' not in log.read_text()
            # the agent leaves waiting, and its card leaves
            await until(pilot, lambda: waiting(session) == [], what="left waiting", timeout=10)
            await until(pilot, lambda: NAME not in cards_text(app), what="card gone")
            await until(pilot, lambda: not scr.peeks, what="peek closed")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, TriageScreen), what="back")
    finally:
        await session.stop()


async def test_escape_cancels_and_nothing_is_sent(asking, nc):
    mgr, broker, space = asking
    session = make_session(nc, broker, space)
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await open_when_waiting(pilot, app, session, NAME, prompt="Proceed? [y/N]")
            await pilot.press("n")
            assert app.screen.pending is not None
            await pilot.press("escape")
            assert app.screen.pending is None and isinstance(app.screen, TriageScreen)
            await pilot.pause(0.5)
            assert "read:" not in seat_text(mgr) and waiting(session) == [NAME]
    finally:
        await session.stop()


async def test_read_only_lists_every_action_unavailable(asking, nc):
    mgr, broker, space = asking
    session = make_session(nc, broker, space, read_only=True)
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await open_when_waiting(pilot, app, session, NAME, prompt="Proceed? [y/N]")
            scr = app.screen
            card = scr.query_one(TriageList).selected()
            acts = scr.actions_for(card)
            typed = [a for a in acts if a.key in ("y", "n", "⏎", "⎋", "1-9", "i", "r", "D")]
            assert typed and all(a.why and "read-only" in a.why for a in typed)
            assert "unavailable - read-only" in cards_text(app)
            await pilot.press("y")
            assert scr.pending is None
            await pilot.pause(0.5)
            assert "read:" not in seat_text(mgr)
    finally:
        await session.stop()


async def test_an_answer_that_does_not_unblock_says_so(asking, nc, monkeypatch):
    """Esc reaches the pty but a cooked-mode line program reads no line: the card says it was
    answered, then (after the settle period, shortened here) that the agent is still waiting."""
    import cotal_tui.screens.triage as triage

    monkeypatch.setattr(triage, "SETTLE_S", 1.5)
    mgr, broker, space = asking
    session = make_session(nc, broker, space)
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await open_when_waiting(pilot, app, session, NAME, prompt="Proceed? [y/N]")
            scr = app.screen
            for _ in range(3):  # Tab to the Esc action: y, n, Enter, Esc
                await pilot.press("tab")
            await pilot.press("enter")
            assert 'b"\\x1b"' in str(scr.query_one("#triage-confirm").render())
            await pilot.press("enter")
            await until(pilot, lambda: "waiting for the agent to leave waiting" in cards_text(app),
                        what="answered note")
            await until(pilot, lambda: "still waiting after" in cards_text(app), what="settle note", timeout=10)
            assert waiting(session) == [NAME] and "read:" not in seat_text(mgr)
            # D asks first, like the roster's stop; n cancels and the seat keeps running
            await pilot.press("D")
            await until(pilot, lambda: type(app.screen).__name__ == "StopConfirm", what="stop confirm")
            await pilot.press("n")
            await until(pilot, lambda: app.screen is scr, what="back on triage")
            assert mgr.seats[NAME].pty.running
    finally:
        await session.stop()


FLOOD_PROGRAM = (
    "import json, os, sys, time\n"
    "p = os.environ['COTAL_SEAT_CONDITION']\n"
    "json.dump({'code': 'approval', 'message': 'flooding', 'since': int(time.time() * 1000)}, open(p, 'w'))\n"
    "w = sys.stdout\n"
    "i = 0\n"
    "while True:\n"
    "    i += 1\n"
    "    w.write('flood line %08d ' % i + 'x' * 80 + '\\n')\n"
)


async def test_a_flooding_seat_does_not_slow_the_screen(broker, nc, space, tmp_path):
    """A waiting seat that writes as fast as it can: its card's excerpt keeps moving (the pane's
    parse budget and skip-ahead), and the console's loop stays responsive."""
    import asyncio
    import sys as _sys

    from cotal_tui.demo.manager import SeatSpec

    spec = SeatSpec(name="flood", principal_id="local.flood", argv=[_sys.executable, "-c", FLOOD_PROGRAM],
                    presence=True, condition_file=str(tmp_path / "flood.condition"))
    mgr = DemoManager(nc, space, [spec], root=str(tmp_path))
    await mgr.start()
    session = make_session(nc, broker, space)
    app = CotalApp(session=session)
    late: list[float] = []
    try:
        async with app.run_test(size=SIZE) as pilot:
            await open_when_waiting(pilot, app, session, "flood")
            await until(pilot, lambda: "│ flood line" in cards_text(app), what="the flood on the card", timeout=15)
            stop = asyncio.Event()

            async def sleeper() -> None:
                loop = asyncio.get_running_loop()
                while not stop.is_set():
                    t0 = loop.time()
                    await asyncio.sleep(0.005)
                    late.append(loop.time() - t0 - 0.005)

            task = asyncio.get_running_loop().create_task(sleeper())
            seen: set[str] = set()

            def moved() -> bool:
                seen.update(re.findall(r"│ flood line (\d+)", cards_text(app)))
                return len(seen) >= 2 * 6  # two different screenfuls of the flood at least

            # (a loaded 2-core box parses the flood slowly: the excerpt moves, just later)
            await until(pilot, moved, what="the excerpt moving", timeout=40)
            await pilot.pause(2.0)
            stop.set()
            await task
            # the loop stays responsive while the flood is parsed (worst-case lateness is the
            # bench's to measure, bench/triage.py: one stall on a loaded CI box is not the flood)
            assert sorted(late)[int(0.9 * (len(late) - 1))] < 0.05
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, TriageScreen), what="back", timeout=5)
    finally:
        await session.stop()
        await mgr.stop()


async def test_a_run_card_opens_the_run_answer_composer(broker, space, host):  # noqa: F811
    from cotal_tui.screens.runs import AnswerScreen
    from meshview.link.connect import ConnectTarget
    from meshview.model.mesh import MeshModel
    from support.console import StaticSession

    model = MeshModel(space, server=broker.url)
    model.set_connection("connected")
    session = StaticSession(model, space=space, target=ConnectTarget((broker.url,), space, timeout=3))
    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: model.runs_view().needs, 20, "a run waiting")
        await pilot.press("T")
        await until(pilot, lambda: "ship release 1.8?" in cards_text(app), what="the run's card")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AnswerScreen), 5, "the answer composer")


async def test_dont_ask_again_for_y_n_holds_for_the_session(broker, nc, space, tmp_path):
    seat = asking_seat(str(tmp_path), name=NAME, question="Proceed? [y/N] ", pause_s=0.5)
    mgr = DemoManager(nc, space, [seat], root=str(tmp_path))
    await mgr.start()
    session = make_session(nc, broker, space)
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await open_when_waiting(pilot, app, session, NAME, prompt="Proceed? [y/N]")
            await pilot.press("y")
            assert app.screen.pending is not None
            await pilot.press("exclamation_mark")  # send, and stop asking for y/n
            await until(pilot, lambda: seat_text(mgr).count("read: 'y'") == 1, what="first y", timeout=10)
            await pilot.press("escape")  # leave; the choice belongs to the console session
            await until(pilot, lambda: not isinstance(app.screen, TriageScreen), what="back")
            await until(pilot, lambda: waiting(session) == [NAME] and "next migration" in seat_text(mgr),
                        what="asking again", timeout=15)
            app.open_triage()
            await until(pilot, lambda: f"{NAME}/" in cards_text(app), what="the card again", timeout=10)
            await pilot.press("y")
            assert app.screen.pending is None  # no question this time
            await until(pilot, lambda: seat_text(mgr).count("read: 'y'") == 2, what="second y", timeout=10)
    finally:
        await session.stop()
        await mgr.stop()


async def test_enter_on_a_needs_you_agent_opens_triage_on_it():
    from support.console import make_app, pid

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("n")  # the NEEDS-YOU rail: bram, then dax
        await pilot.press("j", "enter")
        await until(pilot, lambda: isinstance(app.screen, TriageScreen), what="triage")
        await until(pilot, lambda: app.screen.query_one(TriageList).cursor_key == ("agent", pid("dax")),
                    what="the cursor on dax")
        text = cards_text(app)
        assert "which branch should the hotfix target?" in text
        # a mesh-only agent: no terminal, and the terminal actions say why
        assert "not a managed seat" in text


async def test_peek_full_screen_from_a_card_and_back(asking, nc):
    """``p``: the seat's terminal full screen (read-only); the card's excerpt session is handed
    back meanwhile, and opens again on the way back."""
    from cotal_tui.screens.attach import AttachScreen

    mgr, broker, space = asking
    session = make_session(nc, broker, space)
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await open_when_waiting(pilot, app, session, NAME, prompt="Proceed? [y/N]")
            scr = app.screen
            await pilot.press("p")
            await until(pilot, lambda: isinstance(app.screen, AttachScreen) and app.screen.peek, what="peek")
            await until(pilot, lambda: not scr.peeks, what="the excerpt handed back")
            await until(pilot, lambda: mgr.live_sessions == 1, what="one session on the manager")
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is scr and len(scr.peeks) == 1, what="back, excerpt again")
            assert "read:" not in seat_text(mgr)  # a peek never types
    finally:
        await session.stop()


async def test_another_operator_on_the_seat_shows_on_its_card(asking, nc, monkeypatch):
    """A second console's session on the waiting seat (from the manager's session ledger) is
    named on the card, so two operators do not answer the same prompt unknowingly; it leaves
    when that session closes."""
    import nats as _nats

    from attach.session.client import AttachSession
    from cotal_tui.screens.triage import TriageScreen as _T
    from meshview.wire.endpoint import Caller

    monkeypatch.setattr(_T, "VIEWERS_S", 0.3)
    mgr, broker, space = asking
    session = make_session(nc, broker, space)
    app = CotalApp(session=session)
    nc_b = await _nats.connect(broker.url)
    other = AttachSession(space, NAME, nc=nc_b, caller=Caller("local", "ops2", Caller.fresh().uid),
                          reconnect=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await open_when_waiting(pilot, app, session, NAME, prompt="Proceed? [y/N]")
            assert "also here" not in cards_text(app)  # alone on it: nothing said
            await other.open()
            await until(pilot, lambda: "also here: 2 viewers: you, ops2" in cards_text(app),
                        what="the other viewer", timeout=15)
            await other.close()
            await until(pilot, lambda: "also here" not in cards_text(app), what="the viewer gone", timeout=15)
            # back on, and this time the other operator answers: the card goes, and says why
            other = AttachSession(space, NAME, nc=nc_b, caller=Caller("local", "ops2", Caller.fresh().uid),
                                  reconnect=False)
            await other.open()
            await until(pilot, lambda: "also here" in cards_text(app), what="the other viewer again", timeout=15)
            await other.send_keys(b"y\r")
            await until(pilot, lambda: "read: 'y'" in seat_text(mgr), what="their answer", timeout=15)
            await until(pilot, lambda: "answered elsewhere" in screen_text(app), what="the notice", timeout=15)
            await other.close()
    finally:
        await session.stop()
        await nc_b.close()
