"""The activity lens's lists (issue 37 item 4): one agent's runs, and every agent's line.

:class:`AgentRuns` draws one agent's runs from its :class:`~meshview.model.agent_activity.
AgentFrames`, newest first: a header per run (``▸ run <id> · <turn source> · <duration> ·
<N> tools · <outcome>``), finished runs collapsed, the open run expanded, Enter toggles one.
A run's body is the upstream fold's exact text (``agui_frame_text``) of each of its frames,
escaped for the terminal as the feed escapes a body. :class:`AllAgents` is one line per agent
from the model's frame ledger, the most recently active first.

Everything a peer sent (names, tool names, texts, ids) is escaped (``safe``/``safe_body``).
Both are Line-API lists: one widget, lines built once per change, only visible rows painted.
"""

from __future__ import annotations

from typing import Hashable, Iterable

from rich.text import Text

from meshview.model.frames import Activity, FrameIn, Run
from meshview.model.labels import Labels
from meshview.timefmt import age
from meshview.wire import ExtensionPart
from meshview.wire.parts import AGUI_FRAME_KIND, agui_frame_text
from widgets.line_list import Item, LineList
from widgets.presentation import Look, look_of, safe, safe_body, set_title

FOLD_CACHE = 1024  # frames whose folded lines are kept between rebuilds
TEXT_CELLS = 60  # of the last assistant text on an agent's line


def short_id(run_id: str) -> str:
    """A run id as a header shows it: its first 12 characters (escaped)."""
    s = safe(run_id, 40)
    return s if len(s) <= 12 else s[:12] + "…"


def fold_text(f: FrameIn) -> str:
    """The upstream fold of one frame (``agui_frame_text``), from the frame as the ledger
    keeps it."""
    part = ExtensionPart(AGUI_FRAME_KIND, events=list(f.events), protocol=f.protocol,
                         threadId=f.thread_id, runId=f.run_id, epoch=f.epoch, seq=f.seq)
    return agui_frame_text(part)


def run_duration(r: Run, now: float) -> str:
    start = r.started if r.started is not None else r.first_at
    end = r.ended if r.ended is not None and r.outcome != "open" else now
    return age(end - start)


def run_header(r: Run, now: float, expanded: bool) -> str:
    """``▸ run 3f2a… · user · 12s · 3 tools · finished`` (``▾`` when expanded)."""
    facts = [f"{'▾' if expanded else '▸'} run {short_id(r.run_id)}"]
    if r.turn_source:
        facts.append(safe(r.turn_source, 40))
    facts.append(run_duration(r, now))
    facts.append(f"{r.tools} tool{'' if r.tools == 1 else 's'}")
    facts.append({"open": "open", "finished": "finished", "error": "✗ failed",
                  "unclosed": "no close seen"}[r.outcome])
    return " · ".join(facts)


def _marked(line: str, query: str, style: str, mark: str) -> Text:
    t = Text(line, style=style)
    if query:
        low, q, i = line.casefold(), query.casefold(), 0
        while q and (i := low.find(q, i)) >= 0:
            t.stylize(mark, i, i + len(q))
            i += len(q)
    return t


class AgentRuns(LineList):
    """One agent's runs, newest first; Enter on a run expands or collapses it."""

    empty_text = "reading this agent's activity…"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.runs: list[Run] = []
        self.now = 0.0
        self.expanded: dict[str, bool] = {}  # run id -> the operator's choice (Enter)
        self.search_text = ""
        self._folds: dict[str, list[str]] = {}

    def show(self, runs: list[Run], now: float, *, empty: str | None = None) -> None:
        self.runs, self.now = runs, now
        n = len(runs)
        set_title(self, f"runs · {n}" if n else "runs")
        if empty is not None:
            self.empty_text = empty
        self.rebuild()

    def is_expanded(self, r: Run) -> bool:
        return self.expanded.get(r.run_id, r.outcome == "open")

    def toggle(self, run_id: str) -> None:
        r = next((x for x in self.runs if x.run_id == run_id), None)
        if r is not None:
            self.expanded[run_id] = not self.is_expanded(r)
            self.rebuild()

    def set_query(self, query: str) -> None:
        self.search_text = query
        self.rebuild()

    def _fold(self, f: FrameIn) -> list[str]:
        key = f.msg_id or str(id(f))
        lines = self._folds.get(key)
        if lines is None:
            lines = self._folds[key] = safe_body(fold_text(f))
            if len(self._folds) > FOLD_CACHE:
                del self._folds[next(iter(self._folds))]
        return lines

    def body(self, r: Run) -> list[str]:
        """The run's body lines: each frame's fold, then how it closed."""
        out = [line for f in r.frames for line in self._fold(f)]
        if r.outcome == "finished":
            out.append("◂ finished")
        elif r.outcome == "error":
            out.append("✗ run failed")
        elif r.outcome == "unclosed":
            out.append("… no close seen: a newer run started first")
        return out

    def matches(self, r: Run) -> bool:
        q = self.search_text.casefold()
        return bool(q) and (q in run_header(r, self.now, False).casefold()
                            or any(q in line.casefold() for line in self.body(r)))

    def build(self, width: int) -> list[Item]:
        look = look_of(self)
        items: list[Item] = []
        mark = "reverse"
        for r in self.runs:
            open_ = self.is_expanded(r)
            style = (look.error if r.outcome == "error" else look.working if r.outcome == "open"
                     else "")
            head = _marked(run_header(r, self.now, open_), self.search_text, f"bold {style}".strip(), mark)
            lines = [head]
            if open_:
                if not r.frames:
                    lines.append(Text("  (no frames of this run kept: named by another run's frame, or fell off)",
                                      style="dim italic"))
                for line in self.body(r):
                    lines.append(_marked("  " + line, self.search_text,
                                         look.error if line == "✗ run failed" else "", mark))
            for t in lines:
                t.truncate(width, overflow="ellipsis")
            items.append((("run", r.run_id), lines))
        return items

    def run_at_cursor(self) -> str | None:
        k = self.cursor_key
        return k[1] if isinstance(k, tuple) and len(k) == 2 and k[0] == "run" else None

    def find(self, delta: int) -> bool:
        """Put the cursor on the next (``delta`` > 0) or previous run matching the query,
        expanded; wraps around. False when none matches."""
        n = len(self.runs)
        if not n or not self.search_text:
            return False
        for step in range(1, n + 1):
            i = (self.cursor_index + delta * step) % n
            r = self.runs[i]
            if self.matches(r):
                self.expanded[r.run_id] = True
                self.rebuild()
                self.move_cursor(i)
                return True
        return False


def agent_line(a: Activity, name: str, now: float, width: int, look: Look) -> Text:
    """``ada · open 12s · ⚙ Bash · 12s · "reading the tests" · 4 runs/h``."""
    t = Text()
    t.append(safe(name, 40), style="bold")
    if a.run_id is not None:
        t.append(" · ")
        t.append(f"open {age(now - (a.run_started or a.last_at))}", style=look.working)
    elif a.error_at is not None and (a.finished_at is None or a.error_at >= a.finished_at):
        t.append(" · ")
        t.append(f"✗ failed {age(now - a.error_at)} ago", style=look.error)
    elif a.finished_at is not None:
        t.append(f" · finished {age(now - a.finished_at)} ago", style="dim")
    if a.tool is not None and a.tool_at is not None:
        t.append(f" · ⚙ {safe(a.tool, 40)} · {age(now - a.tool_at)}")
    if a.text:
        snippet = safe(a.text.replace("\n", " "), TEXT_CELLS)
        t.append(f' · "{snippet}"', style="italic")
    t.append(f" · {a.runs_hour} run{'' if a.runs_hour == 1 else 's'}/h", style="dim")
    if a.faulted:
        t.append(" · frames missing", style=look.waiting)
    t.truncate(width, overflow="ellipsis")
    return t


class AllAgents(LineList):
    """Every agent's activity on one line each, the most recently active first; Enter opens
    that agent's lens."""

    empty_text = "no agent has published activity frames yet"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.agents: list[Activity] = []
        self.labels: Labels | None = None
        self.now = 0.0
        self._key: Hashable = None

    def show(self, agents: Iterable[Activity], labels: Labels, now: float) -> None:
        self.agents = list(agents)
        self.labels, self.now = labels, now
        key = (tuple(self.agents), id(labels), int(now // 1000))
        if key != self._key:
            self._key = key
            n = len(self.agents)
            set_title(self, f"activity · {n} agent{'' if n == 1 else 's'}")
            self.rebuild()

    def name_of(self, pid: str) -> str:
        return self.labels.shown(pid) if self.labels is not None else pid

    def build(self, width: int) -> list[Item]:
        look = look_of(self)
        return [(a.agent, [agent_line(a, self.name_of(a.agent), self.now, width, look)])
                for a in self.agents]

