"""The tiles row: agent counts by status (shape and colour) and the stalest live heartbeat.

"Stalest live heartbeat" is what the wire can say (``Presence.ts`` is the last heartbeat, not
when a status began), so no blocked duration is invented here. Its age moves with the clock (and
whose it is, with every heartbeat): it is read at the first snapshot of each model second, the
counts at every snapshot, and the row repaints only when its text changes.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from meshview.model.snapshot import STATUSES, Snapshot
from widgets.presentation import STATUS_GLYPH, age, follow_theme, look_of, safe


class Tiles(Widget):
    DEFAULT_CSS = """
    Tiles { height: 1; background: $surface; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._snap: Snapshot | None = None
        self._plain = ""
        self._sec: int | None = None
        self._stalest: tuple[str, str] | None = None  # (age, name) as of the second's first snapshot
        self.renders = 0  # times the row was drawn (tests count the frames that repaint it)

    def on_mount(self) -> None:
        follow_theme(self)

    @property
    def snap(self) -> Snapshot | None:
        """The snapshot last drawn (read-only; what tests and diagnostics read)."""
        return self._snap

    def update_snapshot(self, snap: Snapshot, *, hold: bool = True) -> None:
        """Follow ``snap``; ``hold`` False: read the stalest heartbeat now, whatever the second."""
        self._snap = snap
        sec = int(snap.now // 1000)
        live = snap.signals.stalest_live_ts is not None
        if not hold or sec != self._sec or live != (self._stalest is not None):
            self._sec = sec
            self._stalest = self._stalest_of(snap)
        plain = self._line(snap).plain
        if plain != self._plain:
            self._plain = plain
            self.refresh()

    def _line(self, snap: Snapshot) -> Text:
        look = look_of(self)
        t = Text()
        for s in STATUSES:
            n = snap.signals.count(s)
            t.append(f"{STATUS_GLYPH[s]} {n} {s}", style=look.status(s) if n else "dim")
            t.append("   ")
        stalest = self._stalest
        if stalest is not None:
            t.append("stalest live heartbeat ", style="dim")
            t.append(stalest[0], style="bold")
            if stalest[1]:
                t.append(f" ({stalest[1]})", style="dim")
        else:
            t.append("no live agents", style="dim")
        return t

    @staticmethod
    def _stalest_of(snap: Snapshot) -> tuple[str, str] | None:
        ts = snap.signals.stalest_live_ts
        if ts is None:
            return None
        sid = snap.signals.stalest_live_id
        return age(snap.now - ts), safe(snap.name_of(sid), 24) if sid else ""

    def render(self) -> Text:
        self.renders += 1
        return self._line(self._snap) if self._snap is not None else Text()
