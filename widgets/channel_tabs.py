"""Channel tabs: ``all`` plus one per channel, with arrival-based ``+N`` unread badges.

Badges count live arrivals since the tab was last viewed (the model's ``arrivals`` only
grows, so the per-sender retention cap cannot silence them). One row, scrolled so the active
tab is always visible. Only the tabs that fit around the active one are laid out; the rest
are grouped into counts at either end (``‹12`` / ``9950 more›``), so 10k channels cost what
10 do: any peer may post to any number of channels.

The counts and badges move with every message (20 msgs/s repainted the row on most frames): the
row draws the channels as of the first snapshot of each model second, the same snapshot the
status bar reads msg/s and its sparkline from, and repaints only when the row it would draw
differs from the one drawn. A channel that comes or goes, or a tab selected, is drawn at once;
:attr:`ChannelTabs.channels` (what keys and unread counts use) is always the latest snapshot's.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import attrgetter

from rich.text import Text
from textual.message import Message
from textual.widget import Widget

from meshview.model.snapshot import ChannelInfo, Snapshot
from widgets.presentation import safe


_NAME = attrgetter("name")
#: Past this many tabs the ones cut off are counted at the row's ends, not just marked.
GROUP_AT = 100


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
        self._channels: tuple[ChannelInfo, ...] = ()
        self._shown: tuple[ChannelInfo, ...] = ()  # the channels the row draws (see above)
        self._second: int | None = None  # the model second ``_shown`` was read in
        self.active: str | None = None
        self._seen: dict[str, int] = {}  # channel -> arrivals when last viewed
        self._drawn: Text | None = None  # the row the last render drew
        self.renders = 0  # times the row was drawn (tests count the frames that repaint it)

    @property
    def channels(self) -> tuple[ChannelInfo, ...]:
        return self._channels

    @channels.setter
    def channels(self, channels: tuple[ChannelInfo, ...]) -> None:
        self._channels = self._shown = channels

    @property
    def tabs(self) -> list[str | None]:
        return [None, *(c.name for c in self.channels)]

    def _where(self, channel: str | None, chs: tuple[ChannelInfo, ...] | None = None) -> int | None:
        """``channel``'s place in ``chs`` (default ``channels``: the model's, sorted by name):
        a bisection, so a snapshot costs the same with 10k channels as with 10."""
        if channel is None:
            return None
        if chs is None:
            chs = self._channels
        i = bisect_left(chs, channel, key=_NAME)
        return i if i < len(chs) and chs[i].name == channel else None

    def _info(self, channel: str | None) -> ChannelInfo | None:
        i = self._where(channel)
        return None if i is None else self._channels[i]

    def unread(self, channel: str) -> int:
        c = self._info(channel)
        return 0 if c is None else max(0, c.arrivals - self._seen.get(channel, 0))

    def update_snapshot(self, snap: Snapshot, *, hold: bool = True) -> None:
        """Follow ``snap``; ``hold`` False: draw its counts now, whatever the second."""
        if snap.channels is not self._channels:  # (the model keeps the tuple while no
            self._channels = snap.channels  # channel changed)
            if self.active is not None:
                c = self._info(self.active)
                if c is None:  # deleted channel: back to all
                    self.select(None)
                    return
                self._seen[c.name] = c.arrivals
        if self._shown is self._channels:
            return  # drawn as they are
        second = int(snap.now // 1000)
        if hold and second == self._second and len(snap.channels) == len(self._shown):
            return  # the counts are read again when the second turns
        self._second, self._shown = second, snap.channels
        if self._drawn is None or self._row() != self._drawn:
            self.refresh()

    def select(self, tab: str | None) -> None:
        self.active = tab
        self._shown = self._channels  # the operator's own move: drawn as the mesh is now
        c = self._info(tab)
        if c is not None:
            self._seen[c.name] = c.arrivals
        self.refresh()
        self.post_message(self.Changed(tab))

    def select_index(self, i: int) -> bool:
        tabs = self.tabs
        if 0 <= i < len(tabs):
            self.select(tabs[i])
            return True
        return False

    def step(self, delta: int) -> None:
        n = len(self.channels) + 1
        at = self._where(self.active)
        i = 0 if at is None else at + 1
        j = (i + delta) % n
        self.select(None if j == 0 else self.channels[j - 1].name)

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
        return [self._label(i, c) for i, c in enumerate((None, *self._shown))]

    def render(self) -> Text:
        self.renders += 1
        self._drawn = self._row()
        return self._drawn.copy()  # kept as drawn, whatever the paint does with it

    def _row(self) -> Text:
        """The row: scrolled so the active tab shows, laid out outwards from it; only the
        labels that fit are built. Past :data:`GROUP_AT` tabs the ones cut off are counted at
        either end, never built."""
        entries = (None, *self._shown)
        n = len(entries)
        width = self.size.width or 80
        at = self._where(self.active, self._shown)
        active = 0 if at is None else at + 1
        grouped = n > GROUP_AT
        right = len(f"{n} more›") if grouped else 1  # the right mark at its widest
        room = width - 2 - (len(f"‹{n} ") + right if grouped else 0)
        labels = {active: self._label(active, entries[active])}
        lo, span = active, labels[active].cell_len + 1
        while lo > 0:  # as many tabs before the active one as fit beside it
            t = self._label(lo - 1, entries[lo - 1])
            if span + t.cell_len + 1 > room:
                break
            labels[lo - 1] = t
            span += t.cell_len + 1
            lo -= 1
        mark = (f"‹{lo} " if grouped else "‹") if lo else ""
        row = Text(mark, style="dim")
        limit = width - right if grouped else width - 1
        for i in range(lo, n):
            t = labels.get(i) or self._label(i, entries[i])
            if row.cell_len + t.cell_len > limit:
                row.append(f"{n - i} more›" if grouped else "›", style="dim")
                break
            row.append_text(t)
            row.append(" ")
        return row
