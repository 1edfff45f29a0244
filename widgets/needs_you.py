"""NEEDS YOU: agents blocked on input, approval or a peer, ordered by name.

Cards say what the wire says: the condition code and message, how long the condition and the
status have held (only when stamped), the heartbeat age, and the activity.
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding

from meshview.snapshot import NeedsYou, Snapshot
from widgets.lazy_list import LazyLineList
from widgets.notice import say_line
from widgets.roster import Roster
from widgets.presentation import age, join_wrapped, look_of, safe, set_title, who, wrap_offsets


class NeedsYouRail(LazyLineList):
    """Blocked agents are the ones an operator steps into: ``a``/``p`` work here as on the
    roster (the console screen opens the seat)."""

    BINDINGS = [
        Binding("a", "attach", "attach", id="needs.attach"),
        Binding("p", "peek", "peek", id="needs.peek"),
    ]
    empty_text = "nothing waiting - all clear ✓"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.snap: Snapshot | None = None
        self._key: object = None

    def update_snapshot(self, snap: Snapshot) -> None:
        self.snap = snap
        n = len(snap.signals.needs_you)
        set_title(self, f"NEEDS YOU · {n}" if n else "NEEDS YOU")
        key = (snap.signals.needs_you, int(snap.now // 1000))
        if key != self._key:
            self._key = key
            self.rebuild()

    def source(self) -> list[tuple[str, NeedsYou]]:
        return [] if self.snap is None else [(n.id, n) for n in self.snap.signals.needs_you]

    @staticmethod
    def _facts(n: NeedsYou) -> list[str]:
        facts = []
        if n.condition_code:
            held = f" for {age(n.condition_age_ms)}" if n.condition_age_ms is not None else ""
            facts.append(f"{safe(n.condition_code, 24)}{held}")
        if n.status_age_ms is not None:
            facts.append(f"waiting {age(n.status_age_ms)}")
        return facts

    def measure(self, n: NeedsYou, width: int) -> int:
        """``len(lines_of(n, width))`` without building any ``Text``."""
        w = max(8, width - 2)
        rows = 2 + len(join_wrapped(self._facts(n), w))
        if n.condition_message:
            rows += len(wrap_offsets(safe(n.condition_message, 400), w, w)[:5])
        return rows

    def lines_of(self, n: NeedsYou, width: int) -> list[Text]:
        look = look_of(self)
        head = Text()
        head.append("◐ ", style=look.waiting)
        head.append_text(who(n.name, n.role, look))
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
        for t in lines:
            t.truncate(width, overflow="ellipsis")
        return lines

    def action_attach(self) -> None:
        self._open(peek=False)

    def action_peek(self) -> None:
        self._open(peek=True)

    def _open(self, *, peek: bool) -> None:
        n = None
        if self.snap is not None and self.cursor_key is not None:
            n = next((x for x in self.snap.signals.needs_you if x.id == self.cursor_key), None)
        if n is None:
            say_line(self, f"{'peek' if peek else 'attach'}: nobody waiting under the cursor")
            return
        self.post_message(Roster.OpenSeat(n.name, peek))
