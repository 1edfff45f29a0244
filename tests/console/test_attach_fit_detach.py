"""Issue 38 items 4 and 5 in the console, against a real broker, a real demo manager and real
ptys: Esc reaches a seat running ``cat -v`` at once and Esc Esc is the program's (``^[^[``)
unless opted in; Ctrl-] leaves the pane, a peek and a tile; ``a`` fits the seat to the pane and
gives it its size back on detach (the size the host's pty reports); a shared seat, or fitting
turned off, is cropped and the title says ``cropped 120×32 → W×H``."""

from __future__ import annotations

import sys
import textwrap
import time

import nats
import pytest
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from attach.terminal.detach import ESC_WINDOW_S, parse_detach_keys
from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.screens.attach import AttachScreen
from cotal_tui.screens.tile import TileScreen
from cotal_tui.seats import SeatSessions
from widgets.terminal_pane import TerminalPane
from conftest import until

CAT_V = ["sh", "-c", "stty raw -echo; echo cat-ready; exec cat -v"]
SIZER = textwrap.dedent("""
    import os, signal, sys
    def report(*_):
        c, r = os.get_terminal_size(0)
        os.write(1, f"\\r\\nsizer is {c}x{r}".encode())
    signal.signal(signal.SIGWINCH, report)
    report()
    while True:
        signal.pause()
""")


class Console(App):
    """``a`` attaches, ``p`` peeks, ``t`` tiles, with the screen's own options."""

    BINDINGS = [Binding("a", "open(False)"), Binding("p", "open(True)"), Binding("t", "tile")]

    def __init__(self, sessions: SeatSessions, seat: str, **kw) -> None:
        super().__init__()
        self.sessions, self.seat, self.kw = sessions, seat, kw

    def compose(self) -> ComposeResult:
        yield Static("console", id="console")

    def action_open(self, peek: bool) -> None:
        self.push_screen(AttachScreen(self.sessions, self.seat, peek=peek, **self.kw))

    def action_tile(self) -> None:
        self.push_screen(TileScreen(self.sessions, [self.seat], detach=self.kw.get("detach")))


@pytest.fixture
async def seats(nc, space, tmp_path):
    prog = tmp_path / "sizer.py"
    prog.write_text(SIZER)
    mgr = DemoManager(nc, space, [SeatSpec("catv", "local.catv", argv=CAT_V),
                                  SeatSpec("sizer", "local.sizer", argv=[sys.executable, str(prog)])],
                      root=str(tmp_path))
    await mgr.start()
    url = nc.connected_url.geturl()
    sessions = SeatSessions(space, lambda: nats.connect(url, allow_reconnect=False))
    yield sessions, mgr
    await mgr.stop()


def pane_text(app) -> str:
    return "\n".join(app.screen.query_one(TerminalPane).content_text())


def title(app) -> str:
    return str(app.screen.query_one("#attach-title", Static).render())


def pty_size(mgr, name) -> tuple[int, int]:
    pty = mgr.seats[name].pty
    return pty.cols, pty.rows


async def attached(pilot, app, key="a", text="cat-ready"):
    await pilot.press(key)
    await until(pilot, lambda: isinstance(app.screen, AttachScreen) and text in pane_text(app),
                what=lambda: f"the seat's screen; saw {pane_text(app)!r}" if isinstance(app.screen, AttachScreen)
                else "the attach screen")
    return app.screen


async def test_esc_reaches_cat_v_at_once_and_esc_esc_is_the_programs(seats):
    sessions, mgr = seats
    app = Console(sessions, "catv")
    async with app.run_test(size=(100, 30)) as pilot:
        await attached(pilot, app)
        t0 = time.monotonic()
        await pilot.press("escape")
        await until(pilot, lambda: "^[" in pane_text(app), 5.0, "cat -v printing the Esc")
        took = time.monotonic() - t0
        print(f"console pane: Esc at the seat and back in {took * 1000:.0f} ms")
        assert took < ESC_WINDOW_S, f"Esc took {took:.3f}s: held like a detach key"
        await pilot.press("escape", "escape")
        await until(pilot, lambda: "^[^[^[" in pane_text(app), 5.0, "Esc Esc at the seat")
        assert isinstance(app.screen, AttachScreen)  # and nothing detached
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: not isinstance(app.screen, AttachScreen), what="Ctrl-] detach")
        await until(pilot, lambda: mgr.live_sessions == 0, what="session handed back")


async def test_opted_in_esc_esc_detaches_and_a_lone_esc_still_arrives(seats):
    sessions, mgr = seats
    app = Console(sessions, "catv", detach=parse_detach_keys("ctrl-], esc esc"))
    async with app.run_test(size=(100, 30)) as pilot:
        scr = await attached(pilot, app)
        assert "Ctrl-] or Esc Esc detaches" in title(app)
        await pilot.press("escape")
        await until(pilot, lambda: "^[" in pane_text(app), 5.0, "a lone Esc after its window")
        await pilot.press("escape", "escape")
        await until(pilot, lambda: app.screen is not scr, what="Esc Esc detach")
        await until(pilot, lambda: mgr.live_sessions == 0, what="session handed back")
        assert "^[^[" not in "\n".join(scr.pane.content_text())


async def test_ctrl_bracket_leaves_a_peek_and_a_tile(seats):
    sessions, mgr = seats
    app = Console(sessions, "catv")
    async with app.run_test(size=(100, 30)) as pilot:
        await attached(pilot, app, "p")
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: not isinstance(app.screen, AttachScreen), what="peek left")
        await until(pilot, lambda: mgr.live_sessions == 0, what="peek handed back")
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TileScreen), what="tile")
        tile = app.screen
        await until(pilot, lambda: tile.links[tile.panes[0]].state == "open", what="tile pane open")
        await pilot.press("enter")
        await until(pilot, lambda: tile.panes[0].interactive, what="promoted")
        await pilot.press("ctrl+right_square_bracket")  # an attached tile pane: read-only again
        await until(pilot, lambda: not tile.panes[0].interactive, what="demoted")
        assert app.screen is tile
        await pilot.press("ctrl+right_square_bracket")  # a read-only one: the tile closes
        await until(pilot, lambda: app.screen is not tile, what="tile closed")
        await until(pilot, lambda: mgr.live_sessions == 0, what="tile handed back")


async def test_attach_fits_the_seat_and_detach_gives_its_size_back(seats):
    sessions, mgr = seats
    app = Console(sessions, "sizer", fit=True)
    async with app.run_test(size=(80, 24)) as pilot:
        assert pty_size(mgr, "sizer") == (120, 32)
        scr = await attached(pilot, app, text="sizer is")
        w, h = scr.pane.size
        assert (w, h) == (80, 22)
        await until(pilot, lambda: pty_size(mgr, "sizer") == (80, 22), what="the seat fitted")
        await until(pilot, lambda: "sizer is 80x22" in pane_text(app), what="the program told")
        assert scr.pane.remote_size == (80, 22) and "fitted 80×22" in title(app)
        assert "cropped" not in title(app)
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: not isinstance(app.screen, AttachScreen), what="detach")
        await until(pilot, lambda: mgr.live_sessions == 0, what="handed back")
        assert pty_size(mgr, "sizer") == (120, 32)  # its own size, before the hand-back


async def test_fit_off_is_cropped_and_says_so_and_the_prefix_f_fits(seats):
    sessions, mgr = seats
    app = Console(sessions, "sizer", fit=False)
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await attached(pilot, app, text="sizer is")
        await until(pilot, lambda: "cropped 120×32 → 80×22" in title(app), what="the crop named")
        assert pty_size(mgr, "sizer") == (120, 32) and scr.link.fitted_from is None
        await pilot.press("ctrl+right_square_bracket", "f")  # the detach key then f: fit on
        await until(pilot, lambda: pty_size(mgr, "sizer") == (80, 22), what="fitted by f")
        await until(pilot, lambda: "fitted 80×22" in title(app), what="title after f")
        assert isinstance(app.screen, AttachScreen)  # the prefix did not detach
        await pilot.press("ctrl+right_square_bracket", "f")  # and off: its size back
        await until(pilot, lambda: pty_size(mgr, "sizer") == (120, 32), what="unfitted by f")
        await until(pilot, lambda: "cropped 120×32 → 80×22" in title(app), what="cropped again")
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: mgr.live_sessions == 0, what="handed back")


async def test_a_shared_seat_is_not_resized_and_the_title_says_cropped(seats):
    sessions, mgr = seats
    other = sessions.session("sizer", on_output=lambda b: None, on_notice=lambda n: None)
    await other.open()  # someone else is on the seat
    try:
        app = Console(sessions, "sizer", fit=True)
        async with app.run_test(size=(80, 24)) as pilot:
            scr = await attached(pilot, app, text="sizer is")
            await until(pilot, lambda: scr.shared, what="the other viewer seen in the ledger")
            await until(pilot, lambda: "cropped 120×32 → 80×22" in title(app), what="the crop named")
            assert "2 viewers" in title(app)
            assert pty_size(mgr, "sizer") == (120, 32) and scr.link.fitted_from is None
            await pilot.press("ctrl+right_square_bracket")
            await until(pilot, lambda: not isinstance(app.screen, AttachScreen), what="detach")
        assert pty_size(mgr, "sizer") == (120, 32)
    finally:
        await other.close()


async def test_a_fitted_seat_follows_the_terminal_and_f_in_a_peek_turns_fitting_on(seats):
    sessions, mgr = seats
    app = Console(sessions, "sizer", fit=False)
    async with app.run_test(size=(80, 24)) as pilot:
        scr = await attached(pilot, app, key="p", text="sizer is")
        await pilot.press("f")  # a peek never resizes; f only says what attaching will do
        await until(pilot, lambda: scr.fit_on and "fit on" in scr.query_one("#attach-status", Static)
                    .render().plain, what="fit on, said")
        assert pty_size(mgr, "sizer") == (120, 32)
        await pilot.press("a")  # promoted: now the seat is fitted
        await until(pilot, lambda: pty_size(mgr, "sizer") == (80, 22), what="fitted on promote")
        await pilot.resize_terminal(70, 20)  # the seat follows the pane once resizing settles
        await until(pilot, lambda: pty_size(mgr, "sizer") == (70, 18), what="followed the terminal")
        await until(pilot, lambda: "fitted 70×18" in title(app), what="title after the resize")
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: mgr.live_sessions == 0, what="handed back")
        assert pty_size(mgr, "sizer") == (120, 32)  # the size it had before any fit
