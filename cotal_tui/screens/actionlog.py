"""``:log``: the action log lens (cotal_tui/actionlog.py), newest first.

One row per action - when, the mesh (space) it was done on, what, target, outcome (the last one its lines say: ``sent`` becomes
``acknowledged``, a spawn's ``requested`` becomes ``joined`` / ``failed`` / ``uncertain``), the
message or goal id, the detail. The file is re-read once a second in a thread (never on the
event loop), so an outcome another process settled shows up too. ``m`` filters by mesh (every
mesh the log names in turn, then all again); ``:log NAME`` opens it filtered. Esc or q closes it.
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
MESH_CELLS = 12  # the mesh column's width
NO_MESH = "-"  # a line written before actions named their mesh
OUTCOME_STYLE = {"acknowledged": "green", "joined": "green", "done": "green",
                 "failed": "bold red", "refused": "red", "uncertain": "yellow",
                 "sent": "cyan", "requested": "cyan"}


def mesh_of(a: Action) -> str:
    """The mesh column's text: the space, terminal-safe, or ``-``."""
    return sanitize.inline(a.mesh, 64) if a.mesh else NO_MESH


def action_line(a: Action) -> Text:
    """``12:03:44 main         spawn      logged1  joined  (goal …)`` - wire- and user-given text
    neutralised."""
    t = Text(time.strftime("%H:%M:%S", time.localtime(a.at / 1000.0)), style="dim")
    mesh = mesh_of(a)
    if len(mesh) > MESH_CELLS:
        mesh = mesh[:MESH_CELLS - 1] + "…"
    t.append(f" {mesh:<{MESH_CELLS}}", style="cyan")
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
        self.mesh: str | None = None  # show only this mesh's actions (None: every mesh)

    def shown(self) -> list[Action]:
        """The actions the filter lets through, newest first."""
        if self.mesh is None:
            return self.actions
        return [a for a in self.actions if mesh_of(a) == self.mesh]

    def meshes(self) -> list[str]:
        """Every mesh the log names, in order of first appearance (newest first)."""
        return list(dict.fromkeys(mesh_of(a) for a in self.actions))

    def build(self, width: int) -> list[Item]:
        acts = self.shown()
        if not acts:
            where = str(self.path) if self.path is not None else "$COTAL_HOME/log/actions.jsonl"
            said = f"no actions on mesh {sanitize.inline(self.mesh, 64)} " if self.mesh else "no actions yet "
            return [("empty", [Text(f"{said}({where})", style="dim")])]
        return [(a.id, [action_line(a)]) for a in acts[:SHOWN]]


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
    BINDINGS = [Binding("escape,q", "dismiss", "close the action log", id="actionlog.close"),
                Binding("m", "next_mesh", "filter by mesh: each mesh in turn, then all", id="actionlog.mesh")]

    def __init__(self, path: Path | None = None, mesh: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.mesh = mesh

    def compose(self) -> ComposeResult:
        body = ActionLogBody()
        body.path = self.path or actions_path()
        body.mesh = self.mesh
        self._titles(body)
        yield body

    def _titles(self, body: ActionLogBody) -> None:
        which = "every mesh" if body.mesh is None else f"mesh {sanitize.inline(body.mesh, 64)}"
        body.border_title = f"action log · {which} · newest first"
        body.border_subtitle = "j/k move · m mesh filter · esc close"

    def action_next_mesh(self) -> None:
        """``m``: the next mesh the log names, after the last one every mesh again."""
        body = self.query_one(ActionLogBody)
        meshes = body.meshes()
        if body.mesh is None:
            body.mesh = meshes[0] if meshes else None
        else:
            i = meshes.index(body.mesh) + 1 if body.mesh in meshes else len(meshes)
            body.mesh = meshes[i] if i < len(meshes) else None
        self.mesh = body.mesh
        self._titles(body)
        body.rebuild()

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
