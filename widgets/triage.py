"""The triage list: one card per waiting agent and per waiting run step, on the Line API.

Every card has a line budget (condition message, the last thing said, the terminal excerpt),
so a long message or a tall terminal never pushes the other cards away, and every wire or
terminal string passes :func:`~widgets.presentation.safe` before it reaches the chrome. The
screen (cotal_tui/screens/triage.py) owns the data and the sessions; this only draws it and
says which cards are on screen (the screen keeps a peek open only for those).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from rich.text import Text
from textual.binding import Binding

from meshview.model.runs_state import RunNeed
from widgets.line_list import Item, LineList
from widgets.presentation import age, look_of, safe, who, wrap_offsets
from widgets.runs import need_lines

MESSAGE_LINES = 3  # the condition's message
SAID_LINES = 2  # the last thing the agent said on the mesh
EXCERPT_LINES = 6  # the terminal excerpt


@dataclass(frozen=True)
class Action:
    """One of a card's actions: its key, its label, and why it cannot run (None: it can)."""

    key: str
    label: str
    why: str | None = None


@dataclass
class AgentCard:
    """A waiting agent as the triage screen shows it (ages in ms, None when the wire is silent)."""

    peer_id: str
    name: str
    role: str | None
    code: str | None
    message: str | None
    condition_age_ms: float | None
    waited_ms: float | None
    said: str | None = None  # the last thing it said on the mesh (raw wire text)
    said_age_ms: float | None = None
    managed: bool = False
    excerpt: list[str] | None = None  # the bottom / cursor lines of its screen (plain text)
    excerpt_note: str = ""  # "opening peek…", "peek ended", "not shown: …"
    answer_note: str = ""  # "answered 3s ago by you — waiting for the agent to leave waiting"
    viewers: str = ""  # "2 viewers: you, alice" when someone else is on the seat (the ledger)
    label: str = ""  # the name as shown: with a principal suffix when another peer shares it
    doing: str = ""  # what its event frames said last (widgets/doing.py): "last tool ⚙ Bash 12s ago"
    doing_failed: bool = False  # ... that its last run failed

    @property
    def key(self) -> Hashable:
        return ("agent", self.peer_id)


@dataclass
class RunCard:
    need: RunNeed

    @property
    def key(self) -> Hashable:
        return self.need.key


Card = AgentCard | RunCard


def excerpt_of(lines: list[str], cursor_row: int | None, n: int = EXCERPT_LINES) -> list[str]:
    """The lines of a screen worth showing: those ending at the cursor's row (where a prompt
    waits), else the last non-blank ones; at most ``n``, trailing blank lines dropped."""
    if not lines:
        return []
    end = len(lines)
    if cursor_row is not None and 0 <= cursor_row < len(lines):
        end = cursor_row + 1
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    return lines[max(0, end - n):end]


@dataclass
class TriageState:
    """What the list draws: the cards in order, the actions of the selected card."""

    cards: list[Card] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    action_index: int = 0


class TriageList(LineList, inherit_bindings=False):
    """The cards; ``j``/``k`` walk cards (the screen binds the answer keys)."""

    BINDINGS = [
        Binding("down,j", "cursor(1)", "next card", id="triage.down"),
        Binding("up,k", "cursor(-1)", "previous card", id="triage.up"),
        Binding("pagedown", "page(1)", "page down", id="triage.page-down", show=False),
        Binding("pageup", "page(-1)", "page up", id="triage.page-up", show=False),
        Binding("home,g", "edge(0)", "first", id="triage.first", show=False),
        Binding("end,G", "edge(1)", "last", id="triage.last", show=False),
    ]
    empty_text = "nobody is waiting - all clear ✓"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.state = TriageState()
        self._signature: object = None

    def show(self, state: TriageState) -> None:
        """Draw ``state``; a rebuild only when what it draws changed."""
        self.state = state
        sig = (self.content_width, tuple(repr(c) for c in state.cards), tuple(state.actions),
               state.action_index, self.cursor_key)
        if sig != self._signature:
            self._signature = sig
            self.rebuild()

    def on_cursor_moved(self) -> None:
        self._signature = None  # the selected card's actions move with it

    def selected(self) -> Card | None:
        k = self.cursor_key
        return next((c for c in self.state.cards if c.key == k), None)

    def visible_keys(self) -> set[Hashable]:
        """Keys of the cards with at least one row on screen."""
        if not self._items or not self._starts:
            return set()
        top = self.scroll_offset.y
        bottom = top + max(1, self.scrollable_content_region.height or self.size.height or 1)
        out = set()
        for i, (key, _lines) in enumerate(self._items):
            start = self._starts[i]
            end = self._starts[i + 1] if i + 1 < len(self._starts) else len(self._lines)
            if end > top and start < bottom:
                out.add(key)
        return out

    def build(self, width: int) -> list[Item]:
        look = look_of(self)
        out: list[Item] = []
        selected = self.cursor_key
        for c in self.state.cards:
            lines = need_lines(c.need, width, look) if isinstance(c, RunCard) else self._agent(c, width)
            if c.key == selected or (selected is None and not out):
                lines = lines + self._actions(width)
            lines.append(Text(""))
            for t in lines:
                t.truncate(width, overflow="ellipsis")
            out.append((c.key, lines))
        return out

    def _agent(self, c: AgentCard, width: int) -> list[Text]:
        look = look_of(self)
        w = max(8, width - 4)
        head = Text()
        head.append("◐ ", style=look.waiting)
        head.append_text(who(c.label or c.name, c.role, look))
        if c.waited_ms is not None:
            head.append(f"  waiting {age(c.waited_ms)}", style="dim")
        if c.managed:
            head.append("  managed pty", style="dim")
        lines = [head]
        cond = Text("  ")
        cond.append(safe(c.code, 24) if c.code else "no condition stated", style=look.waiting)
        if c.condition_age_ms is not None:
            cond.append(f" since {age(c.condition_age_ms)} ago", style="dim")
        lines.append(cond)
        if c.message:
            msg = safe(c.message, 400)
            for s, e in wrap_offsets(msg, w, w)[:MESSAGE_LINES]:
                lines.append(Text("  " + msg[s:e]))
        if c.said:
            said = safe(c.said, 300)
            when = f" ({age(c.said_age_ms)} ago)" if c.said_age_ms is not None else ""
            label = f"  last said{when}: "
            wrapped = wrap_offsets(said, max(8, width - len(label)), w)[:SAID_LINES]
            for i, (s, e) in enumerate(wrapped):
                lines.append(Text((label if i == 0 else "    ") + said[s:e], style="italic"))
        else:
            lines.append(Text("  said nothing on the mesh since the console started", style="dim italic"))
        if c.doing:
            lines.append(Text("  " + c.doing, style=f"bold {look.error}" if c.doing_failed else "dim"))
        if c.excerpt is not None:
            lines.append(Text("  ┌ terminal" + (f" · {c.excerpt_note}" if c.excerpt_note else ""), style="dim"))
            for row in c.excerpt[-EXCERPT_LINES:]:
                lines.append(Text("  │ " + safe(row, width)))
        elif c.excerpt_note:
            lines.append(Text(f"  terminal: {c.excerpt_note}", style="dim"))
        if c.viewers:  # someone else is on this seat: they may answer it too
            lines.append(Text("  also here: " + safe(c.viewers, width), style="bold yellow"))
        if c.answer_note:
            lines.append(Text("  " + c.answer_note, style="bold"))
        return lines

    def _actions(self, width: int) -> list[Text]:
        acts = self.state.actions
        if not acts:
            return []
        row = Text("  ")
        lines = [row]
        unavailable = [a for a in acts if a.why]
        for i, a in enumerate(acts):
            style = "reverse" if i == self.state.action_index else ("dim strike" if a.why else "")
            label = f"[{a.key}] {a.label}"
            if row.cell_len > 2 and row.cell_len + len(label) > width:
                row = Text("  ")  # the actions wrap, never cut
                lines.append(row)
            row.append(label, style=style)
            row.append("  ")
        whys = sorted({a.why for a in unavailable if a.why})
        for why in whys[:2]:
            lines.append(Text(f"  unavailable - {safe(why, 200)}", style="dim"))
        return lines
