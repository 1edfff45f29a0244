"""The status bar: space, channel, agents, msg/s with a 60 s sparkline, connection state,
``chat-only``, rejections, then a notice or the context key hints."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from meshview.snapshot import Snapshot
from widgets.presentation import safe, sparkline

CONNECTION_LOOK = {
    "connecting": ("◌", "connecting", "yellow"),
    "connected": ("●", "connected", "green"),
    "reconnecting": ("◌", "reconnecting", "yellow"),
    "stale": ("◌", "stale", "yellow"),
    "closed": ("⨯", "closed", "red"),
}


class StatusBar(Widget):
    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text; }
    """
    NOTICE_SECONDS = 3.0

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snap: Snapshot | None = None
        self.channel: str | None = None
        self.hints: str = ""
        self.notice: str | None = None
        self.notice_error = False
        self._notice_timer = None
        self._key: object = None

    def update_snapshot(self, snap: Snapshot, channel: str | None) -> None:
        self.snap, self.channel = snap, channel
        key = (self._left_key(snap), channel)
        if key != self._key:
            self._key = key
            self.refresh()

    @staticmethod
    def _left_key(snap: Snapshot) -> tuple:
        st = snap.status
        return (st.space, st.connection, st.presence_view, st.dm_visible, st.error, st.warning,
                len(snap.agents), round(snap.rates.msgs_per_sec, 1), snap.rates.buckets,
                sum(n for _, n in snap.rejections), st.lagging, st.dropped)

    def set_hints(self, hints: str) -> None:
        if hints != self.hints:
            self.hints = hints
            self.refresh()

    def show_notice(self, text: str, *, error: bool = False, seconds: float | None = None) -> None:
        self.notice, self.notice_error = text, error
        if self._notice_timer is not None:
            self._notice_timer.stop()
        self._notice_timer = self.set_timer(seconds or self.NOTICE_SECONDS, self._clear_notice)
        self.refresh()

    def _clear_notice(self) -> None:
        self.notice = None
        self._notice_timer = None
        self.refresh()

    def left(self, compact: bool = False) -> Text:
        snap = self.snap
        t = Text(" ")
        if snap is None:
            t.append("◌ connecting…", style="yellow")
            return t
        st = snap.status
        conn = "stale" if st.connection == "connected" and st.presence_view == "stale" \
            else st.connection
        glyph, label, colour = CONNECTION_LOOK.get(conn, ("?", conn, "yellow"))
        t.append(glyph + " ", style=colour)
        t.append(safe(st.space, 32), style="bold")
        t.append(" · ", style="dim")
        t.append("#" + safe(self.channel, 32) if self.channel else "all")
        t.append(" · ", style="dim")
        t.append(f"{len(snap.agents)} agents")
        t.append(" · ", style="dim")
        t.append(f"{snap.rates.msgs_per_sec:.1f} msg/s ")
        t.append(sparkline(snap.rates.buckets, 15), style="cyan")
        t.append(" 60s", style="dim")
        if not (compact and conn == "connected"):
            t.append(" · ", style="dim")
            t.append(label, style=colour)
        if not st.dm_visible:
            t.append(" · ", style="dim")
            t.append("chat-only", style="magenta")
        rejected = sum(n for _, n in snap.rejections)
        if rejected:
            t.append(" · ", style="dim")
            t.append(f"! {rejected} rej" if compact else f"! {rejected} rejected", style="red")
        if st.lagging or st.dropped:  # the mesh outran us: say so, with what was shed
            t.append(" · ", style="dim")
            lag = "⚠ lagging" + (f" · {st.dropped} dropped" if st.dropped else "")
            t.append(lag if st.lagging else f"{st.dropped} dropped", style="yellow")
        return t

    def render(self) -> Text:
        width = self.size.width or 80
        t = self.left(compact=width < 100)
        snap = self.snap
        if self.notice:
            right = Text(self.notice, style="bold red" if self.notice_error else "bold cyan")
            if t.cell_len + right.cell_len + 2 > width:  # a notice outranks the facts
                t = self.left(compact=True)
                t.truncate(max(10, width - right.cell_len - 2), overflow="ellipsis")
        elif snap is not None and snap.status.error:
            right = Text("! " + safe(snap.status.error, 120), style="bold red")
        else:
            right = Text(self.hints, style="dim")
        room = width - t.cell_len - 2
        if room < 20 and not self.notice:
            right = Text("? help", style="dim")
        if room > 5:
            right.truncate(room, overflow="ellipsis")
            t.append(" " * max(2, room - right.cell_len + 1))
            t.append_text(right)
        t.truncate(width)
        return t
