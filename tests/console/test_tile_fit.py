"""``:tile`` on a small terminal against a real manager: a pane smaller than its seat's screen
says it is cropped (and stops saying so once it fits), and fit-to-pane resizes the seat's pty
through the attach ``resize`` frame — the program itself sees the new size — and puts it back
on ``f`` again, on Esc, and when the console quits while tiled."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import nats
import pytest
from textual.app import App

from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.screens.help import HelpBody, HelpScreen
from cotal_tui.screens.tile import TileScreen
from cotal_tui.seats import SeatSessions
from widgets.tile_grid import TilePane
from conftest import until

# the program's own view of its terminal: every size it is given, logged and printed
SIZER = textwrap.dedent("""
    import os, signal, sys
    log = open(sys.argv[2], "a", buffering=1)
    def report(*_):
        c, r = os.get_terminal_size(0)
        log.write(f"{c}x{r}\\n")
        os.write(1, f"\\r\\n{sys.argv[1]} is {c}x{r}".encode())
    signal.signal(signal.SIGWINCH, report)
    report()
    while True:
        signal.pause()
""")

SEATS = {"big": (120, 40), "small": (30, 8)}


def seen(log) -> str:
    """The last size the program was told."""
    lines = log.read_text().split()
    return lines[-1] if lines else ""


async def test_the_mark_names_what_is_in_view_and_follows_the_remote_size():
    """No session: a lone pane (50×30 inside its border) and remote sizes set from outside."""
    class One(App):
        def compose(self):
            yield TilePane("solo", 80, 24)

    app = One()
    async with app.run_test(size=(52, 32)) as pilot:
        pane = app.query_one(TilePane)
        assert pane.size == (50, 30)
        await until(pilot, lambda: title(pane) == "solo · cropped 80×24 → 50×24", what="wide seat")
        pane.reset(40, 40)  # a fresh mirror at another size (a session opening): taller than the pane
        assert title(pane) == "solo · cropped 40×40 → 40×30"
        pane.resize_remote(50, 30)  # exactly the pane: no mark
        assert title(pane) == "solo" and not pane.has_class("-cropped")


CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def _no_mesh():
    raise AssertionError("the snapshot never connects")


class MarkedTile(TileScreen):
    """Recorded bytes, no sessions: alice (80×24) cropped in a 48×27 pane, bob fitted to his."""

    def start_sessions(self) -> None:
        alice, bob = self.panes
        alice.feed((CAPTURES / "vim_open.bin").read_bytes())
        bob.fitted_from = (120, 40)
        bob.reset(48, 27)
        bob.feed((CAPTURES / "ls_color.bin").read_bytes())
        for pane, link in self.links.items():  # as if both sessions had opened
            link.state = "open"
            self._status(pane, "")


class MarkedTileApp(App):
    def on_mount(self) -> None:
        sessions = SeatSessions("demo", _no_mesh, sizes={"alice": (80, 24), "bob": (120, 40)})
        self.push_screen(MarkedTile(sessions, ["alice", "bob"]))


async def _settle(pilot) -> None:
    for _ in range(200):
        await pilot.pause(0.02)
        if all(not p.frame_pending for p in pilot.app.screen.panes):
            break
    await pilot.pause()


def test_marked_tile_snapshot(snap_compare):
    """A 100-column terminal: the cropped pane's border says so, the fitted one what it was."""
    assert snap_compare(MarkedTileApp(), terminal_size=(100, 30), run_before=_settle)


@pytest.fixture
async def seats(nc, space, tmp_path):
    prog = tmp_path / "sizer.py"
    prog.write_text(SIZER)
    logs, specs = {}, []
    for name, (cols, rows) in SEATS.items():
        logs[name] = tmp_path / f"{name}.log"
        logs[name].write_text("")
        specs.append(SeatSpec(name=name, principal_id=f"local.{name}", cols=cols, rows=rows,
                              argv=[sys.executable, str(prog), name, str(logs[name])]))
    mgr = DemoManager(nc, space, specs, root=str(tmp_path))
    await mgr.start()
    url = nc.connected_url.geturl()
    sessions = SeatSessions(space, lambda: nats.connect(url, allow_reconnect=False), default_size=(80, 24),
                            sizes=dict(SEATS))
    await until(lambda: all(seen(logs[n]) == f"{c}x{r}" for n, (c, r) in SEATS.items()),
                what="the programs up at their own size")
    yield sessions, mgr, logs
    await mgr.stop()


async def open_tile(pilot, sessions, mgr) -> TileScreen:
    screen = TileScreen(sessions, list(SEATS))
    pilot.app.push_screen(screen)
    await until(pilot, lambda: mgr.live_sessions == 2, what="two sessions")
    big, small = screen.panes
    await until(pilot, lambda: big.remote_size == SEATS["big"] and small.remote_size == SEATS["small"],
                what="the panes at the seats' sizes")
    await until(pilot, lambda: "big is 120x40" in "\n".join(big.content_text()), what="big's screen")
    return screen


def title(pane: TilePane) -> str:
    return pane.border_title or ""


@pytest.mark.slow
async def test_a_cropped_pane_says_so_and_stops_when_it_fits(seats):
    sessions, mgr, _ = seats
    app = App()
    async with app.run_test(size=(100, 30)) as pilot:  # a 100-column terminal, two panes of 48×27
        screen = await open_tile(pilot, sessions, mgr)
        big, small = screen.panes
        assert big.size == (48, 27)
        await until(pilot, lambda: title(big) == "big · cropped 120×40 → 48×27", what="big marked")
        assert big.has_class("-cropped")
        assert title(small) == "small" and not small.has_class("-cropped")  # 30×8 fits: no mark
        await pilot.resize_terminal(100, 20)  # the mark follows the pane's size
        await until(pilot, lambda: title(big) == f"big · cropped 120×40 → 48×{big.size.height}"
                    and big.size.height < 27, what="mark after a shrink")
        await pilot.resize_terminal(260, 50)  # 128×47 panes: the whole screen fits
        await until(pilot, lambda: title(big) == "big" and not big.has_class("-cropped"),
                    what="the mark gone once it fits")
        await pilot.press("escape")
        await until(pilot, lambda: mgr.live_sessions == 0, what="sessions handed back")


@pytest.mark.slow
async def test_fit_resizes_the_seat_and_f_again_restores_it(seats):
    sessions, mgr, logs = seats
    app = App()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_tile(pilot, sessions, mgr)
        big, small = screen.panes
        assert app.focused is big
        await pilot.press("f")
        await until(pilot, lambda: seen(logs["big"]) == "48x27", what="big's program told 48x27")
        assert (mgr.seats["big"].pty.cols, mgr.seats["big"].pty.rows) == (48, 27)
        assert big.remote_size == (48, 27) and not big.has_class("-cropped")
        assert title(big) == "big · fitted 48×27 · was 120×40"
        # the repaint after the resize: the pane shows the program's screen at the new size
        await until(pilot, lambda: "big is 48x27" in "\n".join(big.content_text()), what="repainted")
        assert seen(logs["small"]) == "30x8"  # only the focused seat
        await pilot.press("f")
        await until(pilot, lambda: seen(logs["big"]) == "120x40", what="big restored")
        assert big.remote_size == (120, 40)
        await until(pilot, lambda: title(big) == "big · cropped 120×40 → 48×27", what="cropped again")
        assert screen.links[big].session.size is None  # a reconnect would not re-impose a fit
        await pilot.press("escape")
        await until(pilot, lambda: mgr.live_sessions == 0, what="sessions handed back")
    assert seen(logs["big"]) == "120x40"


@pytest.mark.slow
async def test_fit_all_follows_the_terminal_and_esc_restores_every_seat(seats):
    sessions, mgr, logs = seats
    app = App()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_tile(pilot, sessions, mgr)
        await pilot.press("F")
        await until(pilot, lambda: seen(logs["big"]) == "48x27" and seen(logs["small"]) == "48x27",
                    what="both seats fitted")
        await pilot.resize_terminal(120, 24)  # the grid reflows: fitted seats follow their panes
        sizes = lambda: [f"{p.size.width}x{p.size.height}" for p in screen.panes]  # noqa: E731
        await until(pilot, lambda: [seen(logs[n]) for n in SEATS] == sizes() != ["48x27"] * 2,
                    what="seats following the panes")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is not screen, what="tile closed")
        await until(pilot, lambda: mgr.live_sessions == 0, what="sessions handed back")
        assert [seen(logs[n]) for n in SEATS] == ["120x40", "30x8"]  # restored before the close
        assert [(mgr.seats[n].pty.cols, mgr.seats[n].pty.rows) for n in SEATS] == list(SEATS.values())


@pytest.mark.slow
async def test_quitting_while_fitted_restores_the_seat(seats):
    sessions, mgr, logs = seats
    app = App()
    async with app.run_test(size=(100, 30)) as pilot:
        await open_tile(pilot, sessions, mgr)
        await pilot.press("f")
        await until(pilot, lambda: seen(logs["big"]) == "48x27", what="fitted")
        app.exit()  # the console quits with the tile up
    await until(lambda: seen(logs["big"]) == "120x40", what="restored on quit")
    await until(lambda: mgr.live_sessions == 0, what="sessions handed back")


@pytest.mark.slow
async def test_the_tile_lists_its_keys_in_help(seats):
    sessions, mgr, _ = seats
    app = App()
    async with app.run_test(size=(100, 30)) as pilot:
        await open_tile(pilot, sessions, mgr)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        text = "\n".join(line.plain for _, lines in app.screen.query_one(HelpBody).build(80)
                         for line in lines)
        assert "fit the focused seat to its pane" in text and "fit every seat" in text
        await pilot.press("q")  # q closes help (other keys do nothing there)
        await pilot.press("escape")
        await until(pilot, lambda: mgr.live_sessions == 0, what="sessions handed back")


@pytest.mark.slow
async def test_fit_on_a_pane_with_no_session_says_why(seats):
    sessions, mgr, logs = seats
    app = App()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = TileScreen(sessions, ["big", "ghost"])
        app.push_screen(screen)
        ghost = screen.panes[1]
        await until(pilot, lambda: screen.links[ghost].state == "ended", what="ghost refused")
        await until(pilot, lambda: mgr.live_sessions == 1, what="big's session")
        await pilot.press("right", "f")
        await until(pilot, lambda: any("fit: ghost is not connected - nothing to resize" in n.message
                                       for n in app._notifications), what="the notice")
        assert ghost.fitted_from is None and title(ghost) == "ghost"
        assert seen(logs["big"]) == "120x40"  # the other seat untouched
        await pilot.press("escape")
        await until(pilot, lambda: mgr.live_sessions == 0, what="sessions handed back")
