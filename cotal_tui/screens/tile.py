"""``:tile``: the live terminals of several seats at once, each read-only until promoted.

Every pane has its own session (a peek: ``ready`` and nothing else). Enter or ``a`` promotes the
focused pane to interactive in place; its escape hatch (Ctrl-] or Esc Esc) demotes it again.
Esc on the grid closes the tile and hands every session back.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Iterable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from cotal_tui.screens.attach import hold_escape
from cotal_tui.seats import PaneLink, SeatSessions, detach_byte_from_env
from widgets.terminal_pane import TerminalPane
from widgets.tile_grid import TileGrid, TilePane

MAX_PANES = 16


def tile_names(peers: Iterable, managed_names: Iterable[str] | None = None,
               chosen: Iterable[str] | None = None) -> list[str]:
    """The seats to tile: the chosen names, else every working agent (that a manager hosts)."""
    if chosen:
        return list(dict.fromkeys(chosen))[:MAX_PANES]
    hosted = set(managed_names) if managed_names is not None else None
    out = [p.name for p in peers
           if getattr(p, "kind", "agent") == "agent" and getattr(p, "status", "") == "working"
           and (hosted is None or p.name in hosted)]
    return out[:MAX_PANES]


class TileScreen(Screen[None]):
    CSS_PATH = str(Path(__file__).with_name("tile.tcss"))
    BINDINGS = [
        Binding("escape", "leave", "close the tile", id="tile.back"),
        Binding("enter,a", "promote", "attach to the focused pane", id="tile.promote"),
        Binding("right,l,tab", "step(1)", "next pane", id="tile.next"),
        Binding("left,h,shift+tab", "step(-1)", "previous pane", id="tile.prev"),
        Binding("down,j", "step_row(1)", "pane below", id="tile.down", show=False),
        Binding("up,k", "step_row(-1)", "pane above", id="tile.up", show=False),
    ]

    def __init__(self, sessions: SeatSessions, names: list[str], *,
                 detach_byte: int | None = None) -> None:
        super().__init__()
        self.sessions = sessions
        self.names = list(names)[:MAX_PANES]
        self.detach_byte = detach_byte_from_env() if detach_byte is None else detach_byte
        self.panes: list[TilePane] = []
        self.links: dict[TilePane, PaneLink] = {}
        for i, name in enumerate(self.names):
            cols, rows = sessions.sizes.get(name) or sessions.default_size
            pane = TilePane(name, cols, rows, detach_byte=self.detach_byte, id=f"tile-{i}")
            self.panes.append(pane)
            self.links[pane] = PaneLink(sessions, name, pane, on_status=lambda t, p=pane: p.set_status(t))
        self._leaving = False

    def compose(self) -> ComposeResult:
        yield Static(f" tile · {len(self.names)} seats · enter attach · ←→ move · esc close",
                     id="tile-title", markup=False)
        with TileGrid(id="tile-grid"):
            yield from self.panes

    def on_mount(self) -> None:
        if self.panes:
            self.panes[0].focus()
        self.start_sessions()

    def start_sessions(self) -> None:
        for link in self.links.values():
            link.start()

    # -- panes ------------------------------------------------------------------------

    def _focused_index(self) -> int:
        f = self.focused
        return self.panes.index(f) if f in self.panes else 0

    def action_step(self, delta: int) -> None:
        if self.panes:
            self.panes[(self._focused_index() + delta) % len(self.panes)].focus()

    def action_step_row(self, delta: int) -> None:
        grid = self.query_one(TileGrid)
        cols = grid.styles.grid_size_columns or 1
        i = self._focused_index() + delta * cols
        if 0 <= i < len(self.panes):
            self.panes[i].focus()

    def action_promote(self) -> None:
        if not self.panes:
            return
        pane = self.panes[self._focused_index()]
        link = self.links[pane]
        if link.state in ("open", "reconnecting") and not pane.interactive:
            for other in self.panes:  # one interactive pane at a time
                if other.interactive:
                    self._demote(other)
            pane.interactive = True
            pane.set_status(link.status)
            pane.focus()

    def _demote(self, pane: TilePane) -> None:
        pane.interactive = False
        pane.set_status(self.links[pane].status)

    @on(TerminalPane.Send)
    def _on_pane_send(self, event: TerminalPane.Send) -> None:
        event.stop()
        link = self.links.get(event.pane)  # type: ignore[arg-type]
        if link is not None:
            link.send(event.data)

    @on(TerminalPane.Detach)
    def _on_pane_detach(self, event: TerminalPane.Detach) -> None:
        event.stop()
        if isinstance(event.pane, TilePane):
            self._demote(event.pane)

    async def action_leave(self) -> None:
        if self._leaving:
            return
        self._leaving = True
        await self.close_all()
        if self.app.screen is self:
            hold_escape(self.app)  # after the hand-back: Escs queued meanwhile land in the window
            self.app.pop_screen()

    async def close_all(self) -> None:
        await asyncio.gather(*(link.close() for link in self.links.values()), return_exceptions=True)

    async def on_unmount(self) -> None:
        await self.close_all()
