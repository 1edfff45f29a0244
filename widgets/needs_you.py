"""NEEDS YOU: workflow runs waiting at a checkpoint or an ask (by deadline), then agents
blocked on input, approval or a peer (by name).

Cards say what the wire says: the condition code and message, how long the condition and the
status have held (only when stamped), the heartbeat age, and the activity. A run's card is its
open pause: the prompt, the step key, who it escalates to and the deadline; ``r`` answers it and
Enter opens the run's journal. A run row leaves when the step settles, the deadline passes or
the run is revoked (meshview/model/runs_state.py decides; this only shows it).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.message import Message

from meshview.model.runs_state import RunNeed, RunsSnapshot
from meshview.model.snapshot import NeedsYou, Snapshot
from widgets.doing import Doing, HoldsModel, OverConsole, doing_of, doing_text, ledger_of
from widgets.lazy_list import LazyLineList
from widgets.notice import say_line
from widgets.roster import Roster
from widgets.presentation import age, join_wrapped, look_of, safe, set_title, who, wrap_offsets
from widgets.runs import need_lines


def _shown(n: NeedsYou) -> tuple:
    """A card's fields but its ages (which read in whole seconds, with the clock)."""
    return (n.id, n.name, n.label, n.role, n.condition_code, n.condition_message, n.activity,
            n.condition_age_ms is None, n.status_age_ms is None)


class NeedsYouRail(LazyLineList):
    """Blocked agents are the ones an operator steps into: ``a``/``p`` work here as on the
    roster (the console screen opens the seat); on a run's card ``r`` answers and Enter opens
    its journal; Enter on an agent opens triage on it (the App handles :class:`AnswerRun` /
    :class:`OpenRun` / :class:`OpenTriage`)."""

    BINDINGS = [
        Binding("a", "attach", "attach", id="needs.attach"),
        Binding("p", "peek", "peek", id="needs.peek"),
        Binding("r", "answer_run", "answer the run's checkpoint", id="needs.answer-run"),
    ]
    empty_text = "nothing waiting - all clear ✓"

    class AnswerRun(Message):
        """``r`` on a run's card: open the answer composer for that step."""

        def __init__(self, run_id: str, instance_id: str, step_key: str) -> None:
            super().__init__()
            self.run_id, self.instance_id, self.step_key = run_id, instance_id, step_key

    class OpenTriage(Message):
        """Enter on an agent's card: the triage screen, on that agent."""

        def __init__(self, peer_id: str) -> None:
            super().__init__()
            self.peer_id = peer_id

    class OpenRun(Message):
        """Enter on a run's card: open its journal."""

        def __init__(self, run_id: str, instance_id: str) -> None:
            super().__init__()
            self.run_id, self.instance_id = run_id, instance_id

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.snap: Snapshot | None = None
        self.runs: RunsSnapshot | None = None
        self._key: object = None
        self._doing: dict[str, Doing] = {}  # what the frames said last, per waiting agent

    def update_snapshot(self, snap: Snapshot, runs: RunsSnapshot | None = None, *,
                        ages: bool = True) -> None:
        """Show ``snap``; ``ages`` False rebuilds the cards only when one reads differently
        but for its ages (the console's drains while keys come)."""
        self.snap = snap
        if runs is None:
            screen = self.screen if self.is_attached else None
            if isinstance(screen, OverConsole) and isinstance(screen.console, HoldsModel):
                screen = screen.console
            if isinstance(screen, HoldsModel):
                runs = screen.model.runs_view()
        self.runs = runs
        needs = runs.needs if runs is not None else ()
        n = len(snap.signals.needs_you) + len(needs)
        set_title(self, f"NEEDS YOU · {n}" if n else "NEEDS YOU")
        # what its frames said last (the last tool, a failed run): a soft signal beside the
        # condition, which is what the agent waits on
        ledger = ledger_of(self)
        doing: dict[str, Doing] = {}
        if ledger is not None:
            for w in snap.signals.needs_you:
                d = doing_of(ledger.agent(w.id))
                if d is not None:
                    doing[w.id] = d
        self._doing = doing
        # what the cards show: ages at the second, so a snapshot that only moved the clock
        # (every one, at 10k agents) rebuilds nothing until the second turns; no cards, no
        # ages: an empty rail is not drawn again each second
        cards = bool(snap.signals.needs_you or needs)
        held = self._key[2] if not ages and isinstance(self._key, tuple) else None
        key = (tuple(map(_shown, snap.signals.needs_you)), needs,
               (held if held is not None else int(snap.now // 1000)) if cards else None,
               tuple(doing.items()))
        if key != self._key:
            self._key = key
            self.rebuild()

    def epoch(self) -> object:
        """The cards with a line of what the frames said: heights move with that set."""
        return tuple(self._doing)

    def ages(self) -> object:
        """The second the cards' ages read at (every snapshot builds its cards anew: at 10k
        agents ~500 of them each second, which only the ages tell apart)."""
        return int(self.snap.now // 1000) if self.snap is not None else None

    def clocks_only(self, old: Any, new: Any) -> bool:
        """A card that reads as before but for its ages: off screen it keeps its height
        until the ages' re-measure (a wrapped age can take one more row, rarely)."""
        return type(old) is NeedsYou and type(new) is NeedsYou and _shown(old) == _shown(new)

    def source(self) -> list[tuple[Any, NeedsYou | RunNeed]]:
        out: list[tuple[Any, NeedsYou | RunNeed]] = []
        if self.runs is not None:
            out += [(r.key, r) for r in self.runs.needs]
        if self.snap is not None:
            out += [(n.id, n) for n in self.snap.signals.needs_you]
        return out

    def run_need(self) -> RunNeed | None:
        """The run card under the cursor, if the cursor is on one."""
        k = self.cursor_key
        if self.runs is None or not (isinstance(k, tuple) and k and k[0] == "run"):
            return None
        return next((r for r in self.runs.needs if r.key == k), None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "answer_run":
            return self.run_need() is not None  # on an agent, r is the console's reply
        return True

    def action_answer_run(self) -> None:
        r = self.run_need()
        if r is not None:
            self.post_message(self.AnswerRun(r.run_id, r.instance_id, r.pause.step_key))

    def action_select(self) -> None:
        r = self.run_need()
        if r is not None:
            self.post_message(self.OpenRun(r.run_id, r.instance_id))
            return
        k = self.cursor_key
        if k is not None and not isinstance(k, tuple):
            self.post_message(self.OpenTriage(str(k)))
            return
        super().action_select()

    @staticmethod
    def _facts(n: NeedsYou) -> list[str]:
        facts = []
        if n.condition_code:
            held = f" for {age(n.condition_age_ms)}" if n.condition_age_ms is not None else ""
            facts.append(f"{safe(n.condition_code, 24)}{held}")
        if n.status_age_ms is not None:
            facts.append(f"waiting {age(n.status_age_ms)}")
        return facts

    def measure(self, n: NeedsYou | RunNeed, width: int) -> int:
        """``len(lines_of(n, width))`` without building any ``Text``."""
        if isinstance(n, RunNeed):
            return len(need_lines(n, width, look_of(self)))  # a handful of short lines
        w = max(8, width - 2)
        rows = 2 + len(join_wrapped(self._facts(n), w))
        if n.condition_message:
            rows += len(wrap_offsets(safe(n.condition_message, 400), w, w)[:5])
        if n.id in self._doing:
            rows += 1
        return rows

    def lines_of(self, n: NeedsYou | RunNeed, width: int) -> list[Text]:
        look = look_of(self)
        if isinstance(n, RunNeed):
            return need_lines(n, width, look)
        head = Text()
        head.append("◐ ", style=look.waiting)
        head.append_text(who(n.label or n.name, n.role, look))
        head.append(f"  seen {age(n.heartbeat_age_ms)}", style="dim")
        lines = [head]
        for f in join_wrapped(self._facts(n), max(8, width - 2)):
            lines.append(Text("  " + f, style=look.waiting))
        if n.condition_message:
            msg = safe(n.condition_message, 400)
            for s, e in wrap_offsets(msg, max(8, width - 2), max(8, width - 2))[:5]:
                lines.append(Text("  " + msg[s:e]))
        lines.append(Text("  " + (safe(n.activity, 200) if n.activity else "waiting for input"),
                          style="italic dim"))
        d = self._doing.get(n.id)
        if d is not None and self.snap is not None:
            lines.append(Text("  " + doing_text(d, self.snap.now, card=True),
                              style=look.error if d.kind == "failed" else "dim"))
        for t in lines:
            t.truncate(width, overflow="ellipsis")
        return lines

    def action_attach(self) -> None:
        self._open(peek=False)

    def action_peek(self) -> None:
        self._open(peek=True)

    def _open(self, *, peek: bool) -> None:
        n = None
        if self.snap is not None and self.cursor_key is not None and not isinstance(self.cursor_key, tuple):
            n = next((x for x in self.snap.signals.needs_you if x.id == self.cursor_key), None)
        if n is None:
            say_line(self, f"{'peek' if peek else 'attach'}: nobody waiting under the cursor")
            return
        self.post_message(Roster.OpenSeat(n.name, peek, n.id))
