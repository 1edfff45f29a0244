"""NEEDS YOU as a full-screen overlay on narrow terminals (the rail has no room there)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen

from meshview.model.snapshot import Snapshot
from widgets.line_list import LineList
from widgets.needs_you import NeedsYouRail

if TYPE_CHECKING:
    from cotal_tui.screens.console import ConsoleScreen


class NeedsYouScreen(ModalScreen[None]):
    CSS_PATH = "needs_you.tcss"
    BINDINGS = [
        Binding("escape,n,q", "close", "close", id="needs-you.close"),
    ]

    def __init__(self, console: ConsoleScreen) -> None:
        super().__init__()
        self.console = console

    def compose(self) -> ComposeResult:
        yield NeedsYouRail(id="needs-you-overlay")

    def on_mount(self) -> None:
        rail = self.query_one(NeedsYouRail)
        if self.console.snap is not None:
            rail.update_snapshot(self.console.snap)
        rail.border_subtitle = "enter detail · esc close"
        rail.focus()

    def update_snapshot(self, snap: Snapshot) -> None:
        self.query_one(NeedsYouRail).update_snapshot(snap)

    def action_close(self) -> None:
        self.dismiss()

    @on(LineList.Selected)
    def _open(self, event: LineList.Selected) -> None:
        self.dismiss()
        self.console.open_agent(str(event.key))
