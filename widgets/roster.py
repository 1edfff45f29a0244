"""The roster: agents by status then name, endpoints dimmed below them.

Shape and colour for status; ``name/role`` in the name's stable colour; the harness tag from
``card.meta.connector``. On a wide panel each seat's facts (condition, ages) and activity wrap
onto indented rows; on a narrow one each seat is one line.
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding

from meshview.model import Peer, Snapshot
from widgets.line_list import Item, LineList
from widgets.presentation import (
    activity_line, harness_tag, join_wrapped, peer_facts, set_title, status_glyph, who,
)


class Roster(LineList):
    BINDINGS = [
        Binding("a", "attach", "attach", id="roster.attach"),
    ]
    empty_text = "no agents present yet"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.snap: Snapshot | None = None
        self.wide = True
        self._key: object = None

    def update_snapshot(self, snap: Snapshot) -> None:
        self.snap = snap
        n_ep = len(snap.endpoints)
        set_title(self, f"roster · {len(snap.agents)} agents" + (f" · {n_ep} ep" if n_ep else ""))
        key = (snap.agents, snap.endpoints, int(snap.now // 1000))
        if key != self._key:
            self._key = key
            self.rebuild()

    def set_wide(self, wide: bool) -> None:
        if wide != self.wide:
            self.wide = wide
            self.rebuild()

    def _head(self, p: Peer) -> Text:
        glyph, style = status_glyph(p.status)
        t = Text()
        if p.kind != "agent":
            t.append("⚙ ", style="dim")
        t.append(glyph + " ", style=style)
        t.append_text(who(p.name, p.role))
        tag = harness_tag(p.meta)
        if tag:
            t.append(f" {tag}", style="dim italic")
        if p.kind != "agent":
            t.stylize("dim")
        return t

    def build(self, width: int) -> list[Item]:
        snap = self.snap
        if snap is None:
            return []
        items: list[Item] = []
        now = snap.now
        for p in snap.peers:
            head = self._head(p)
            facts = peer_facts(p, now)
            act = activity_line(p, now)
            dim = p.kind != "agent" or p.status == "offline"
            if self.wide:
                lines = [head]
                for f in join_wrapped(facts, max(8, width - 4)):
                    lines.append(Text("   " + f, style="dim" if dim else ""))
                if act:
                    lines.append(Text("   " + act, style="italic dim"))
            else:
                line = head.copy()
                line.append("  " + facts[0], style="dim" if dim else "")
                if act:
                    line.append(" · " + act, style="italic dim")
                lines = [line]
            for t in lines:
                t.truncate(width, overflow="ellipsis")
            items.append((p.id, lines))
        return items

    def peer_at_cursor(self) -> Peer | None:
        if self.snap is None or self.cursor_key is None:
            return None
        return next((p for p in self.snap.peers if p.id == self.cursor_key), None)

    def action_attach(self) -> None:
        p = self.peer_at_cursor()
        say = getattr(self.app, "notify_line", self.app.notify)
        say("attach: coming with the attach pane" + (f" ({p.name})" if p else ""))
