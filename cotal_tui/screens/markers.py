"""The one-line label box for a marker (``m`` in the console and in a replay)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class MarkerLabel(ModalScreen["str | None"]):
    """``m``: a one-line label for a marker at the replay's time; Enter adds it, Esc cancels."""

    BINDINGS = [Binding("escape", "dismiss_none", "cancel", id="replay.mark-cancel")]
    DEFAULT_CSS = """
    MarkerLabel { align: center middle; }
    MarkerLabel > Vertical { width: 70; height: 5; border: round $accent; background: $panel; }
    """

    def __init__(self, at: str) -> None:
        super().__init__()
        self.at = at

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f" marker at {self.at} · Enter add · Esc cancel", markup=False)
            yield Input(placeholder="label", max_length=80, id="mark-label")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:  # noqa: D401 - both boxes
        self.dismiss(event.value)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class FindBox(MarkerLabel):
    """``/`` in a replay: a text to find in the recording (messages, presence, seat output)."""

    def __init__(self, last: str = "") -> None:
        super().__init__("")
        self.last = last

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(" find in the recording · Enter go (the same text again: the next match) · Esc cancel",
                         markup=False)
            yield Input(value=self.last, placeholder="text", max_length=200, id="find-text")
