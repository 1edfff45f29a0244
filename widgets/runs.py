"""Workflow runs on the Line API: the runs list, a run's journal, and the NEEDS-YOU run card.

Everything is read from :class:`~meshview.model.runs_state.RunsSnapshot` values; manager text (ids,
prompts, holders, step keys) is untrusted and escaped (``safe``). A step key is shown verbatim:
it is exactly what ``run-answer`` takes. ``released`` wears its own glyph and colour, never the
failure's.
"""

from __future__ import annotations

from typing import Hashable

from rich.text import Text
from textual.binding import Binding
from textual.message import Message

from meshview.model.runs_state import JournalRow, Pause, RunNeed, RunsSnapshot, RunView, short_run
from meshview.timefmt import age
from widgets.line_list import Item, LineList
from widgets.presentation import Look, clock, join_wrapped, look_of, safe, set_title, wrap_offsets

# state -> (glyph, look attribute); shape and colour, so it survives NO_COLOR
STATE_LOOK = {
    "running": ("▶", "working"),
    "completed": ("✓", "idle"),
    "failed": ("✗", "error"),
    "released": ("◌", "waiting"),  # the driver let go: no result, not a failure
    "revoked": ("⊘", "error"),
    "unchecked": ("?", "waiting"),
    "(no status)": ("·", "idle"),
}


def state_text(state: str, look: Look) -> Text:
    glyph, attr = STATE_LOOK.get(state, ("·", "idle"))
    return Text(f"{glyph} {safe(state, 16)}", style=getattr(look, attr))


def deadline_phrase(p: Pause, now: float) -> str | None:
    if p.deadline_at is None:
        return None
    left = p.deadline_at - now
    return f"deadline in {age(left)}" if left > 0 else f"deadline passed {age(-left)} ago"


def need_lines(n: RunNeed, width: int, look: Look) -> list[Text]:
    """``⏸ run-3f2a… approve: "ship release 1.8?" · deadline in 42m`` (wrapped to the rail),
    then the step key verbatim, who it escalates to, what happens on expiry, and the keys."""
    p = n.pause
    full = f"⏸ {short_run(safe(n.run_id, 40))} {safe(_step_name(p.step_key), 40)}: \"{safe(p.prompt, 200)}\""
    if n.deadline_in_ms is not None:
        full += f" · deadline in {age(n.deadline_in_ms)}"
    w = max(8, width)
    lines: list[Text] = []
    for i, (a, b) in enumerate(wrap_offsets(full, w, w - 2)[:4]):
        t = Text(("" if i == 0 else "  ") + full[a:b])
        if i == 0:
            t.stylize(look.waiting, 0, 1)
            t.stylize("bold", 2, 2 + len(short_run(safe(n.run_id, 40))))
        lines.append(t)
    facts = [safe(p.step_key, 120)]
    if p.addressee:
        facts.append(f"escalates to {safe(p.addressee, 40)}")
    if p.on_expiry:
        facts.append(f"on expiry {safe(p.on_expiry, 24)}")
    for f in join_wrapped(facts, max(8, width - 2)):
        lines.append(Text("  " + f, style="dim"))
    lines.append(Text("  r answer · enter journal", style="italic dim"))
    for t in lines:
        t.truncate(width, overflow="ellipsis")
    return lines


def _step_name(key: str) -> str:
    """``approve`` of ``/checkpoint:approve#0`` (a label only; the key itself is shown too)."""
    last = key.rsplit("/", 1)[-1]
    name = last.partition(":")[2] or last
    return name.partition("#")[0] or name


class RunsList(LineList):
    """Every run the managers report, newest first. Enter opens the journal, ``r`` answers the
    run's first open pause."""

    BINDINGS = [
        Binding("r", "answer", "answer the run's open pause", id="runs.answer"),
        Binding("f5", "refresh_runs", "ask the managers now", id="runs.refresh", show=False),
    ]
    empty_text = "no runs reported yet"

    class Answer(Message):
        def __init__(self, run_id: str, instance_id: str) -> None:
            super().__init__()
            self.run_id = run_id
            self.instance_id = instance_id

    class Refresh(Message):
        pass

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.view: RunsSnapshot | None = None
        self._key: object = None

    def update_runs(self, view: RunsSnapshot) -> None:
        self.view = view
        n = len(view.runs)
        set_title(self, f"runs · {n}" if n else "runs")
        key = (view.runs, view.managers, view.unavailable, int(view.now // 1000))
        if key != self._key:
            self._key = key
            if view.unavailable and not view.runs:
                self.empty_text = view.unavailable
            elif not view.polled:
                self.empty_text = "asking the managers for runs…"
            elif view.silent and not view.runs:
                m = view.silent[0]
                self.empty_text = (f"no runs: manager {safe(m.instance_id[:12], 12)} did not answer run-ps"
                                   f" ({safe(m.error or 'silent', 240)})")
            else:
                self.empty_text = "no runs reported"
            self.rebuild()

    def build(self, width: int) -> list[Item]:
        view = self.view
        if view is None:
            return []
        look = look_of(self)
        return [(r.key, self.lines_of(r, view.now, width, look)) for r in view.runs]

    @staticmethod
    def lines_of(r: RunView, now: float, width: int, look: Look) -> list[Text]:
        head = state_text(r.state, look)
        head.append("  ")
        head.append(safe(r.run_id, 40), style="bold")
        facts = []
        if r.holder:
            facts.append(f"holder {safe(r.holder, 40)}")
        if r.epoch is not None:
            facts.append(f"epoch {r.epoch}")
        if r.journal_high is not None:
            facts.append(f"journal {r.journal_high}")
        if r.started_at is not None:
            facts.append(age(now - r.started_at))
        open_ = len(r.pauses) if r.state == "running" else 0
        lines = [head, Text("  " + " · ".join(facts or ["(no status)"]), style="dim")]
        if open_:
            lines[0].append(f"  ⏸ {open_} waiting", style=look.waiting)
        if r.forked_from:
            lines.append(Text("  forked from " + safe(r.forked_from, 120), style="dim"))
        if r.revoked_by:
            lines.append(Text("  revoked by " + safe(r.revoked_by, 60), style=look.error))
        for t in lines:
            t.truncate(width, overflow="ellipsis")
        return lines

    def current(self) -> RunView | None:
        if self.view is None or self.cursor_key is None:
            return None
        return next((r for r in self.view.runs if r.key == self.cursor_key), None)

    def action_answer(self) -> None:
        r = self.current()
        if r is not None:
            self.post_message(self.Answer(r.run_id, r.instance_id))

    def action_refresh_runs(self) -> None:
        self.post_message(self.Refresh())


class JournalView(LineList):
    """One run's journal (``run-status``): activations and steps in journal order, the step keys
    verbatim, outcomes and timing, and each open pause with its prompt, addressee, deadline and
    what happens on expiry. ``a`` answers the pause (or amends the answered step) under the
    cursor."""

    BINDINGS = [
        Binding("a", "answer", "answer (or amend) the step under the cursor", id="journal.answer"),
    ]
    empty_text = "asking the manager for the journal…"

    class Answer(Message):
        def __init__(self, step_key: str | None) -> None:
            super().__init__()
            self.step_key = step_key

    def __init__(self, run_id: str, instance_id: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.run_id = run_id
        self.instance_id = instance_id
        self.run: RunView | None = None
        self.now = 0.0
        self._key: object = None

    def update_runs(self, view: RunsSnapshot) -> None:
        self.run = next((r for r in view.runs if r.key == (self.instance_id, self.run_id)), None)
        self.now = view.now
        set_title(self, f"journal · {self.run_id}")
        key = (self.run, int(view.now // 1000))
        if key != self._key:
            self._key = key
            if self.run is None:
                self.empty_text = "this run is no longer reported by its manager"
            elif self.run.status_error and self.run.journal is None:
                self.empty_text = self.run.status_error
            self.rebuild()

    def header(self) -> str:
        r = self.run
        if r is None:
            return f"run {self.run_id}"
        return (f"run {r.run_id} on {r.endpoint}: {r.state}, holder {r.holder or '-'}, "
                f"epoch {r.epoch if r.epoch is not None else '-'}")

    def build(self, width: int) -> list[Item]:
        r = self.run
        if r is None:
            return []
        look = look_of(self)
        items: list[Item] = [("header", [Text(safe(self.header(), 300), style="bold")]
                              + ([Text("! " + safe(r.status_error, 200), style=look.error)]
                                 if r.status_error else []))]
        if r.journal is None:
            items.append(("wait", [Text("asking the manager for the journal…", style="dim italic")]))
            return items
        pauses = {p.step_key: p for p in r.pauses} if r.state == "running" else {}
        for row in r.journal:
            key: Hashable = ("step", row.step_key) if row.kind == "step" else ("act", row.n)
            items.append((key, self.row_lines(row, pauses.get(row.step_key or ""), width, look)))
        return items

    def row_lines(self, row: JournalRow, pause: Pause | None, width: int, look: Look) -> list[Text]:
        if row.kind == "activation":
            t = Text(f"#{row.n}  activation  holder={safe(row.holder or '-', 40)} "
                     f"epoch={row.epoch if row.epoch is not None else '-'} "
                     f"replayedTo={row.replayed_to if row.replayed_to is not None else '-'}", style="dim")
            t.truncate(width, overflow="ellipsis")
            return [t]
        head = Text(f"#{row.n}  step  ")
        head.append(safe(row.step_key or "?", 200), style="bold")  # verbatim (escaped only)
        outcome = row.outcome or row.state or "?"
        style = look.waiting if row.state == "pending" else (
            look.error if row.error_code or outcome in ("failed", "expired") else "")
        head.append("  " + safe(outcome, 40), style=style)
        lines = [head]
        timing = []
        if row.started_at is not None:
            timing.append("at " + clock(row.started_at))
        if row.started_at is not None and row.ended_at is not None:
            timing.append(f"took {age(row.ended_at - row.started_at)}")
        if row.error_code:
            timing.append(f"error {safe(row.error_code, 16)}")
        if timing:
            lines.append(Text("     " + " · ".join(timing), style="dim"))
        if pause is not None:
            asks = Text("     asks  ", style=look.waiting)
            asks.append('"' + safe(pause.prompt, 300) + '"')
            if pause.addressee:
                asks.append(f"  (escalates to {safe(pause.addressee, 40)})", style="dim")
            lines.append(asks)
            facts = [f for f in (deadline_phrase(pause, self.now),
                                 f"on expiry {safe(pause.on_expiry, 24)}" if pause.on_expiry else None,
                                 "a answer") if f]
            lines.append(Text("     " + " · ".join(facts), style=look.waiting))
        elif row.answer_id:
            by = f" by {safe(row.answer_by, 40)}" if row.answer_by else ""
            more = f" · {row.amendments} amendment{'s' if row.amendments != 1 else ''}" if row.amendments else ""
            lines.append(Text(f"     answered{by} (answer {safe(row.answer_id[:12], 12)}…){more} · a amend",
                              style="dim"))
        for t in lines:
            t.truncate(width, overflow="ellipsis")
        return lines

    def current_step(self) -> str | None:
        k = self.cursor_key
        return k[1] if isinstance(k, tuple) and k and k[0] == "step" else None

    def action_answer(self) -> None:
        self.post_message(self.Answer(self.current_step()))
