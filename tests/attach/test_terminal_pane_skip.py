"""Skip-ahead in the attached pane: output that outruns the pane's parse budget is thrown away
through the protocol (credit withheld → the manager drops → ``drop`` + repaint), and the pane
still ends on the program's real final screen.

A real broker and DemoManager serve a program that floods far more than the pane may parse
(the budget is shrunk for the test, so skipping is certain rather than timing-dependent), then
draws a final screen in the alternate buffer and waits. The pane's screen is compared cell by
cell with the host mirror's, and its text with tmux fed the program's whole output.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import nats
import pytest
from textual.app import App, ComposeResult

from attach.session.client import AttachSession
from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.seats import PaneLink, SeatSessions
from widgets import terminal_pane
from widgets.terminal_pane import TerminalPane
from conftest import until
from test_mirror import Tmux

COLS, ROWS = 100, 30
PROGRAM = r"""
import os, sys, time, tty
if os.isatty(0):
    tty.setraw(0)
os.read(0, 1)  # the flood starts once the pane is attached and says so
w = sys.stdout.buffer
w.write(b"\x1b[?2004h")
for i in range(int(sys.argv[1])):
    w.write(b"\x1b[3%dm%07d\x1b[0m " % (i % 7 + 1, i) + b"flood " * 12 + b"\r\n")
w.write(b"last main line\r\n\x1b[?1049h\x1b[H\x1b[2J\x1b[1;33;44m FINAL \x1b[0m"
        b"\x1b[5;10Hdone \xe4\xb8\xad\xe6\x96\x87\x1b[7;3H\x1b[4munder\x1b[0m\x1b[12;40H")
w.flush()
if len(sys.argv) > 2:
    time.sleep(120)
"""


class PaneApp(App):
    def __init__(self, pane: TerminalPane) -> None:
        super().__init__()
        self.pane = pane

    def compose(self) -> ComposeResult:
        yield self.pane


def screen_of(m) -> dict:
    """What a viewer sees and what survives leaving the alternate screen."""
    s = m.screen
    main = s.main_buffer
    main_text = None
    if main is not None:
        main_text = ["".join(main[y][x].data for x in range(m.cols)).rstrip() for y in range(m.rows)]
    return {
        "runs": [m.runs(y) for y in range(m.rows)],
        "cursor": m.cursor, "alt": m.alt_screen, "paste": m.bracketed_paste, "main": main_text,
    }


@pytest.fixture
def tight_budget(monkeypatch):
    """The pane may parse for 2 % of each frame window: any flood outruns it."""
    monkeypatch.setattr(terminal_pane, "PARSE_BUDGET", terminal_pane._ParseBudget(share=0.02))


@pytest.mark.parametrize("lines, path", [
    (150_000, "drop"),  # ~13 MB: the manager's window fills, it drops, then `drop` + repaint
    (4_000, "quiet"),  # ~0.35 MB: over before the window fills; the pane asks for a repaint
])
async def test_flood_skips_ahead_and_ends_on_the_real_screen(broker, nc, space, tmp_path, tight_budget,
                                                             lines, path, monkeypatch):
    # every credit return outside a drop notice: how many received frames were still waiting to
    # be handed over (a full window's tail, sent before the manager blocked, must be skipped
    # first - released early, it reads as output after the credit and asks for a needless repaint)
    returns: list[tuple[bool, int]] = []
    in_notice = [False]
    real_release_all, real_notice = AttachSession.release_all, PaneLink._notice

    def release_all(self) -> None:
        rail = self.link.rail if self.link is not None else None
        returns.append((in_notice[0], len(rail._queue) if rail is not None else 0))
        real_release_all(self)

    def notice(self, n) -> None:
        in_notice[0] = True
        try:
            real_notice(self, n)
        finally:
            in_notice[0] = False

    monkeypatch.setattr(AttachSession, "release_all", release_all)
    monkeypatch.setattr(PaneLink, "_notice", notice)
    script = tmp_path / "flood.py"
    script.write_text(PROGRAM)
    spec = SeatSpec(name="flood", principal_id="local.flood", cols=COLS, rows=ROWS,
                    argv=[sys.executable, str(script), str(lines), "wait"])
    mgr = DemoManager(nc, space, [spec], root=str(tmp_path))
    await mgr.start()
    try:
        sessions = SeatSessions(space, lambda: nats.connect(broker.url, allow_reconnect=False),
                                default_size=(COLS, ROWS))
        pane = TerminalPane(COLS, ROWS, interactive=True)
        app = PaneApp(pane)
        async with app.run_test(size=(COLS, ROWS)) as pilot:
            link = PaneLink(sessions, "flood", pane, on_status=lambda _t: None)
            link.start()
            seat = mgr.seats["flood"].pty
            await until(pilot, lambda: link.state == "open" and pane.bytes_fed > 0, 30, what="attached")
            if path == "quiet":  # no parsing until the pane is behind: on a loaded box a slow
                terminal_pane.PARSE_BUDGET.share = 0.0  # flood could otherwise be parsed in time
            link.send(b"g")
            if path == "quiet":
                await until(pilot, lambda: link.skips > 0, 30, what="the pane skipping ahead")
                terminal_pane.PARSE_BUDGET.share = 0.02

            def settled() -> bool:
                return (pane.pending_bytes == 0 and not link.skipping and pane.mirror.alt_screen
                        and "FINAL" in "\n".join(pane.content_text()))

            await until(pilot, settled, 60, what="the final screen in the pane")
            host = seat.mirror  # the manager's screen: a snapshot ordered after every byte read
            await until(pilot, lambda: screen_of(pane.mirror) == screen_of(host), 30, what="pane == host")
            assert link.skips > 0 and pane.bytes_fed < seat.bytes_out  # it skipped, never parsed it all
            if path == "drop":
                assert link.session.bytes_dropped > 0
                skip_ends = [waiting for notice_, waiting in returns if not notice_]
                assert skip_ends, "the pane gave its credit back after a full window"
                assert skip_ends == [0] * len(skip_ends)  # the whole window was through first
            else:
                assert link.repaints > 0
            await link.close()
    finally:
        await mgr.stop()

    if shutil.which("tmux") is None:
        return
    out = subprocess.run([sys.executable, str(script), str(lines)], input=b"g", capture_output=True,
                         check=True).stdout
    t = Tmux(tmp_path, COLS, ROWS)
    try:
        t.feed(out)
        assert pane.content_text() == t.lines(ROWS)
        assert t.fmt("#{alternate_on}") == "1"
    finally:
        t.close()
