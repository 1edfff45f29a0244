"""The embedded attach screen against a real broker, a real demo manager and real ptys.

A recording program on the seat puts its tty in raw mode and appends every byte it reads to a
file, so the tests check what reached the pty itself, not what the UI believes it sent.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

import nats
import pytest
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.screens.attach import AttachScreen
from cotal_tui.seats import SeatSessions
from widgets.terminal_pane import TerminalPane
from conftest import until

RECORDER = textwrap.dedent("""
    import os, sys, tty
    tty.setraw(0)
    log = open(sys.argv[1], "ab", buffering=0)
    os.write(1, b"rec ready\\r\\n")
    while True:
        d = os.read(0, 4096)
        if not d:
            break
        log.write(d)
        os.write(1, b"got " + d.hex().encode() + b"\\r\\n")
""")


class ConsoleStub(App):
    """Stands in for the console: a base screen, ``a``/``p`` open the seat, default App bindings."""

    BINDINGS = [
        Binding("a", "open(False)", "attach"),
        Binding("p", "open(True)", "peek"),
        Binding("f5", "bell", priority=True),
    ]

    def __init__(self, sessions: SeatSessions, seat: str) -> None:
        super().__init__()
        self.sessions = sessions
        self.seat = seat

    def compose(self) -> ComposeResult:
        yield Static("console", id="console")

    def action_open(self, peek: bool) -> None:
        self.push_screen(AttachScreen(self.sessions, self.seat, peek=peek, size=(60, 12)))


@pytest.fixture
async def seats(nc, space, tmp_path):
    prog = tmp_path / "recorder.py"
    prog.write_text(RECORDER)
    log = tmp_path / "keys.bin"
    log.write_bytes(b"")
    specs = [
        SeatSpec(name="rec", principal_id="local.rec", cols=60, rows=12,
                 argv=[sys.executable, str(prog), str(log)]),
        SeatSpec(name="echo", principal_id="local.echo", kind="line", cols=60, rows=12),
    ]
    mgr = DemoManager(nc, space, specs, root=str(tmp_path))
    await mgr.start()
    url = nc.connected_url.geturl() if hasattr(nc.connected_url, "geturl") else str(nc.connected_url)
    sessions = SeatSessions(space, lambda: nats.connect(url, allow_reconnect=False))
    yield sessions, mgr, log
    await mgr.stop()


def screen_text(app) -> str:
    pane = app.screen.query_one(TerminalPane)
    return "\n".join(pane.content_text())


async def test_open_type_detach_reopen(seats):
    sessions, mgr, log = seats
    app = ConsoleStub(sessions, "echo")
    async with app.run_test(size=(70, 16)) as pilot:
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen), what="attach screen")
        await until(pilot, lambda: "echo>" in screen_text(app), what="snapshot")
        assert mgr.live_sessions == 1
        await pilot.press(*"hello", "enter")
        await until(pilot, lambda: "echo: hello" in screen_text(app), what="echo")
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: not isinstance(app.screen, AttachScreen), what="detach")
        assert app.query_one("#console")  # the console is back
        await until(pilot, lambda: mgr.live_sessions == 0, what="session handed back")
        # re-open: a fresh session repaints the same screen
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen) and "echo: hello" in screen_text(app),
                    what="re-open repaint")
        await pilot.press(*"again", "enter")
        await until(pilot, lambda: "echo: again" in screen_text(app), what="second echo")
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: not isinstance(app.screen, AttachScreen), what="second detach")
        await until(pilot, lambda: mgr.live_sessions == 0, what="second hand-back")


async def test_no_binding_swallows_keys_bytes_reach_the_pty(seats):
    sessions, mgr, log = seats
    app = ConsoleStub(sessions, "rec")
    async with app.run_test(size=(70, 16)) as pilot:
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen) and "rec ready" in screen_text(app),
                    what="attached")
        keys = ["ctrl+q", "ctrl+c", "ctrl+d", "ctrl+p", "tab", "f1", "f5", "f12", "up", "x"]
        want = b"\x11\x03\x04\x10\t\x1bOP\x1b[15~\x1b[24~\x1b[Ax"
        await pilot.press(*keys)
        await until(pilot, lambda: log.read_bytes() == want, what="keys at the pty")
        await pilot.press("escape")  # Esc alone reaches the program (at once: tests/console/test_detach_keys.py)
        await until(pilot, lambda: log.read_bytes() == want + b"\x1b", what="lone Esc at the pty")
        assert app.is_running and isinstance(app.screen, AttachScreen)
        await until(pilot, lambda: "got 1b" in screen_text(app), what="program output of Esc")
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: not isinstance(app.screen, AttachScreen), what="detach")
        assert log.read_bytes() == want + b"\x1b"  # the detach key itself never reached the pty


async def test_peek_sends_nothing_and_can_be_promoted(seats):
    sessions, mgr, log = seats
    app = ConsoleStub(sessions, "rec")
    async with app.run_test(size=(70, 16)) as pilot:
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen) and "rec ready" in screen_text(app),
                    what="peek repaint")
        written_before = mgr.seats["rec"].pty.bytes_out
        await pilot.press("x", "y", "ctrl+c", "enter", "up", "f5")
        await asyncio.sleep(0.5)
        assert log.read_bytes() == b""  # nothing reached the pty
        assert isinstance(app.screen, AttachScreen)
        assert mgr.seats["rec"].pty.bytes_out == written_before  # and the program printed nothing new
        assert mgr.seats["rec"].pty.cols == 60  # no resize either
        await pilot.press("a")  # promote the peek
        await until(pilot, lambda: app.screen.pane.interactive, what="promoted")
        await pilot.press("z")
        await until(pilot, lambda: log.read_bytes() == b"z", what="key after promotion")
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: not isinstance(app.screen, AttachScreen), what="detach")
        # a peek that is simply closed hands back too
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen) and mgr.live_sessions == 1, what="peek 2")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, AttachScreen) and mgr.live_sessions == 0,
                    what="peek closed")
        assert log.read_bytes() == b"z"


async def test_end_reasons_in_the_status_line(seats):
    sessions, mgr, log = seats
    app = ConsoleStub(sessions, "echo")
    async with app.run_test(size=(70, 16)) as pilot:
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen) and "echo>" in screen_text(app),
                    what="attached")
        await pilot.press(*"exit", "enter")
        status = lambda: app.screen.link.status  # noqa: E731
        await until(pilot, lambda: "[cotal: the program on seat echo exited]" in status(), what="end reason")
        pane = app.screen.pane
        assert not pane.interactive
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, AttachScreen), what="back")


async def test_unknown_seat_says_it_is_gone(seats):
    sessions, mgr, log = seats
    app = ConsoleStub(sessions, "nobody")
    async with app.run_test(size=(70, 16)) as pilot:
        await pilot.press("a")
        status = lambda: app.screen.link.status  # noqa: E731
        await until(pilot, lambda: isinstance(app.screen, AttachScreen) and "seat nobody is gone" in status(),
                    what="refusal")
