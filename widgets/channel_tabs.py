"""Channel tabs: ``all`` plus one per channel, with arrival-based ``+N`` unread badges.

Badges count live arrivals since the tab was last viewed (the model's ``arrivals`` only
grows, so the per-sender retention cap cannot silence them). One row, scrolled so the active
tab is always visible.
"""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widget import Widget

from meshview.snapshot import ChannelInfo, Snapshot
from widgets.presentation import safe


class ChannelTabs(Widget):
    DEFAULT_CSS = """
    ChannelTabs { height: 1; background: $panel; }
    ChannelTabs > .tabs--active { background: $accent; color: $text; text-style: bold; }
    ChannelTabs > .tabs--unread { color: $warning; text-style: bold; }
    ChannelTabs > .tabs--count { color: $text-muted; }
    """
    COMPONENT_CLASSES = {"tabs--active", "tabs--unread", "tabs--count"}

    class Changed(Message):
        def __init__(self, tab: str | None) -> None:
            super().__init__()
            self.tab = tab

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.channels: tuple[ChannelInfo, ...] = ()
        self.active: str | None = None
        self._seen: dict[str, int] = {}  # channel -> arrivals when last viewed
        self._key: object = None

    @property
    def tabs(self) -> list[str | None]:
        return [None, *(c.name for c in self.channels)]

    def unread(self, channel: str) -> int:
        for c in self.channels:
            if c.name == channel:
                return max(0, c.arrivals - self._seen.get(channel, 0))
        return 0

    def update_snapshot(self, snap: Snapshot) -> None:
        self.channels = snap.channels
        if self.active is not None:
            names = {c.name for c in self.channels}
            if self.active not in names:  # deleted channel: back to all
                self.select(None)
                return
            for c in self.channels:
                if c.name == self.active:
                    self._seen[c.name] = c.arrivals
        key = tuple((c.name, c.retained, c.arrivals) for c in self.channels), self.active
        if key != self._key:
            self._key = key
            self.refresh()

    def select(self, tab: str | None) -> None:
        self.active = tab
        if tab is not None:
            for c in self.channels:
                if c.name == tab:
                    self._seen[tab] = c.arrivals
        self._key = None
        self.refresh()
        self.post_message(self.Changed(tab))

    def select_index(self, i: int) -> bool:
        tabs = self.tabs
        if 0 <= i < len(tabs):
            self.select(tabs[i])
            return True
        return False

    def step(self, delta: int) -> None:
        tabs = self.tabs
        i = tabs.index(self.active) if self.active in tabs else 0
        self.select(tabs[(i + delta) % len(tabs)])

    def _label(self, i: int, c: ChannelInfo | None) -> Text:
        """Tab ``i``'s label (``c`` None: the ``all`` tab)."""
        n = i + 1
        num = f"{n}:" if n <= 9 else ""
        tab = None if c is None else c.name
        t = Text()
        if c is None:
            t.append(f" {num}all ")
        else:
            t.append(f" {num}#{safe(c.name, 40)}")
            count = c.retained if c.retained is not None else c.arrivals
            t.append(f" {count}", self.get_component_rich_style("tabs--count")
                     if tab != self.active else None)
            # never more unread than there are
            unread = min(max(0, c.arrivals - self._seen.get(c.name, 0)), count)
            if unread and tab != self.active:
                t.append(f" +{unread}", self.get_component_rich_style("tabs--unread"))
            t.append(" ")
        if tab == self.active:
            t.stylize(self.get_component_rich_style("tabs--active"))
        return t

    def labels(self) -> list[Text]:
        return [self._label(i, c) for i, c in enumerate((None, *self.channels))]

    def render(self) -> Text:
        """The row: scrolled so the active tab shows, and only the labels that fit are built
        (at 100 channels the row holds a handful of them)."""
        entries = (None, *self.channels)
        width = self.size.width or 80
        active = next((i for i, c in enumerate(entries)
                       if (None if c is None else c.name) == self.active), 0)
        head = [self._label(i, c) for i, c in enumerate(entries[:active + 1])]
        lo, span = 0, sum(l.cell_len + 1 for l in head)
        while lo < active and span > width - 2:
            span -= head[lo].cell_len + 1
            lo += 1
        row = Text("‹" if lo else "", style="dim")
        for i in range(lo, len(entries)):
            t = head[i] if i <= active else self._label(i, entries[i])
            if row.cell_len + t.cell_len > width - 1:
                row.append("›", style="dim")
                break
            row.append_text(t)
            row.append(" ")
        return row
