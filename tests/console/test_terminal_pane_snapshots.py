"""SVG snapshots of the attach screen and a four-pane tile, fed recorded pty bytes (fixed size,
no session, no blink: the pane's cursor is a steady reverse cell)."""

from __future__ import annotations

from pathlib import Path

from textual.app import App

from cotal_tui.screens.attach import AttachScreen
from cotal_tui.seats import SeatSessions
from cotal_tui.screens.tile import TileScreen

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def capture(*names: str) -> bytes:
    return b"".join((CAPTURES / f"{n}.bin").read_bytes() for n in names)


def _no_mesh():
    raise AssertionError("snapshots never connect")


SESSIONS = SeatSessions("demo", _no_mesh, default_size=(80, 24))


class RecordedAttach(AttachScreen):
    def start_session(self) -> None:  # no session: recorded bytes
        self.pane.feed(capture("bash_prompt", "vim_open"))
        self.link.state = "open"
        self._status("[cotal: 1843 bytes dropped - backpressure]")


class RecordedTile(TileScreen):
    FEEDS = {"alice": ("vim_open",), "bob": ("top",), "carol": ("ls_color",), "dave": ("colors_wide",)}

    def start_sessions(self) -> None:  # no sessions: recorded bytes
        for pane in self.panes:
            pane.feed(capture(*self.FEEDS[pane.seat]))
            pane.set_status("")
        self.panes[1].interactive = True
        self.panes[1].set_status("")


class AttachApp(App):
    def on_mount(self) -> None:
        self.push_screen(RecordedAttach(SESSIONS, "alice", size=(80, 24)))


class TileApp(App):
    def on_mount(self) -> None:
        self.push_screen(RecordedTile(SESSIONS, ["alice", "bob", "carol", "dave"]))


async def _settle(pilot) -> None:
    screen = pilot.app.screen
    panes = getattr(screen, "panes", None) or [screen.pane]
    for _ in range(200):
        await pilot.pause(0.02)
        if all(not p.frame_pending for p in panes):
            break
    await pilot.pause()


def test_attach_screen_snapshot(snap_compare):
    assert snap_compare(AttachApp(), terminal_size=(90, 28), run_before=_settle)


def test_tile_of_four_snapshot(snap_compare):
    assert snap_compare(TileApp(), terminal_size=(164, 52), run_before=_settle)
