"""``:log``: the action log lens (cotal_tui/actionlog.py), newest first.

One row per action - when, what, target, outcome (the last one its lines say: ``sent`` becomes
``acknowledged``, a spawn's ``requested`` becomes ``joined`` / ``failed`` / ``uncertain``), the
message or goal id, the detail. The file is re-read once a second in a thread (never on the
event loop), so an outcome another process settled shows up too. Esc or q closes it.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen

from cotal_tui.actionlog import Action, actions_path, read_actions
from meshview.wire import sanitize
from widgets.line_list import Item, LineList

REFRESH_S = 1.0
SHOWN = 500  # rows shown (the newest)
OUTCOME_STYLE = {"acknowledged": "green", "joined": "green", "done": "green",
                 "failed": "bold red", "refused": "red", "uncertain": "yellow",
                 "sent": "cyan", "requested": "cyan"}


def action_line(a: Action) -> Text:
    """``12:03:44 spawn   logged1  joined  (goal …)`` - wire- and user-given text neutralised."""
    t = Text(time.strftime("%H:%M:%S", time.localtime(a.at / 1000.0)), style="dim")
    t.append(f" {a.what:<10} ", style="bold")
    t.append(sanitize.inline(a.target, 60))
    t.append("  ")
    t.append(sanitize.inline(a.outcome, 20), style=OUTCOME_STYLE.get(a.outcome, ""))
    if a.message_id:
        t.append(f"  msg {sanitize.inline(a.message_id, 40)}", style="dim")
    if a.goal_id:
        t.append(f"  goal {sanitize.inline(a.goal_id, 40)}", style="dim")
    if a.detail:
        t.append(f" - {sanitize.inline(a.detail, 200)}", style="dim")
    return t


class ActionLogBody(LineList):
    def __init__(self) -> None:
        super().__init__(id="actionlog-body")
        self.actions: list[Action] = []
        self.path: Path | None = None

    def build(self, width: int) -> list[Item]:
        if not self.actions:
            where = str(self.path) if self.path is not None else "$COTAL_HOME/log/actions.jsonl"
            return [("empty", [Text(f"no actions yet ({where})", style="dim")])]
        return [(a.id, [action_line(a)]) for a in self.actions[:SHOWN]]


class ActionLogScreen(ModalScreen[None]):
    """The lens; ``path``: another log than ``$COTAL_HOME/log/actions.jsonl`` (tests)."""

    DEFAULT_CSS = """
    ActionLogScreen { align: center middle; background: $background 60%; }
    ActionLogScreen #actionlog-body {
        width: 100%; max-width: 140; height: 100%; border: round $accent;
        border-title-color: $accent; border-title-style: bold;
        border-subtitle-color: $text-muted; padding: 0 1;
    }
    """
    BINDINGS = [Binding("escape,q", "dismiss", "close the action log", id="actionlog.close")]

    def __init__(self, path: Path | None = None) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        body = ActionLogBody()
        body.path = self.path or actions_path()
        body.border_title = "action log · newest first"
        body.border_subtitle = "j/k move · esc close"
        yield body

    def on_mount(self) -> None:
        self.reload()
        self.set_interval(REFRESH_S, self.reload, name="actionlog")

    @work(thread=True, exclusive=True, group="actionlog", exit_on_error=False)
    def reload(self) -> None:
        acts = read_actions(self.path)
        self.app.call_from_thread(self._show, acts)

    def _show(self, acts: list[Action]) -> None:
        body = self.query_one(ActionLogBody)
        if [(a.id, a.outcome) for a in acts] == [(a.id, a.outcome) for a in body.actions]:
            return
        body.actions = acts
        body.rebuild()
