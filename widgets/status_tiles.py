"""The tiles row: agent counts by status (shape and colour) and the stalest live heartbeat.

"Stalest live heartbeat" is what the wire can say (``Presence.ts`` is the last heartbeat, not
when a status began), so no blocked duration is invented here.
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

    def on_mount(self) -> None:
        follow_theme(self)

    @property
    def snap(self) -> Snapshot | None:
        """The snapshot last drawn (read-only; what tests and diagnostics read)."""
        return self._snap

    def update_snapshot(self, snap: Snapshot) -> None:
        self._snap = snap
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
        ts = snap.signals.stalest_live_ts
        if ts is not None:
            t.append("stalest live heartbeat ", style="dim")
            t.append(age(snap.now - ts), style="bold")
            sid = snap.signals.stalest_live_id
            if sid:
                t.append(f" ({safe(snap.name_of(sid), 24)})", style="dim")
        else:
            t.append("no live agents", style="dim")
        return t

    def render(self) -> Text:
        return self._line(self._snap) if self._snap is not None else Text()
