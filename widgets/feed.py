"""The feed: a Line-API view over the model's feed ring (no widget per row).

Rows are addressed by the model's absolute index. Each drain appends the new rows that pass
the filter (tab, ``/`` query, lifecycle and activity-frame toggles), drops evicted ones from the front, and keeps
per-row heights so wrapping never needs a full re-layout. Only visible rows are rendered;
their Strips are cached by (index, width, cursor). The view follows the tail only while
parked at the bottom and otherwise shows ``↓N more · G to follow``. A row's height and its
rendering come from one rule (:func:`layout_rows`), so no text is ever laid out below the rows
shown. A reply starts with ``↳ re: <first words of the original>``; ``o`` jumps to it. A long
body folds past :attr:`FeedView.max_lines` to ``… +38 lines · Enter`` (widgets/fold.py).

Size: over 500 lines because the Line-API view with its strip cache, filters, cursor and tail-
follow is one widget whose parts share the row index.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache
from itertools import accumulate
from types import EllipsisType

from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar
from textual.strip import Strip

from meshview.wire.sanitize import elide_id
from meshview.model.snapshot import FeedEntry, Snapshot
from widgets.lazy_list import drawn_thumb
from widgets.fold import BODY_CAP, DEFAULT_MAX_LINES, TailCounter, body_cap, fold_label
from widgets.notice import say_line
from widgets.presentation import (
    clock, follow_theme, look_of, safe, safe_body, set_title, wrap_offsets,
)

INDENT = 9  # continuation lines align under the name, clear of the time column
CACHE_ROWS = 160  # > two screens of rows; each cached Strip drags ~7 tracked FIFOCaches along
#: Long rows whose layout (safe body lines and wrap) is kept across repaints, cursor moves and
#: filters: a row is wrapped once per width, so a key after a 1 MB line costs what one after
#: a short line does. Short rows are laid out faster than a cache lookup would save.
LAYOUT_ROWS = 64
LAYOUT_MIN_CHARS = 256

LIFECYCLE_GLYPH = {
    "join": ("+", "feed--join"), "offline": ("−", "feed--offline"),
    "crash": ("✖", "feed--crash"), "incarnation": ("↻", "feed--incarnation"),
    "manager-up": ("▲", "feed--manager"), "manager-down": ("▼", "feed--manager"),
}


def _head_key(e: FeedEntry, snap: Snapshot) -> tuple:
    """What a row's head shows: its sender as the roster knows it (label, role, the envelope's
    differing name as a claim: meshview/model/labels.py), resolved now, so a presence arriving after
    the row corrects it; a recipient with no roster entry is its id, marked so the head
    elides it as one."""
    label, role, claim, _ = snap.sender(e)
    lab = snap.labels.label
    names = tuple(lab(i) or "\0" + i for i in e.to_ids)
    return (e.kind, label, role, claim, e.channel, e.to_service, names,
            e.count, e.historical, e.event, e.lifecycle)


def _who(label: str, role: str | None, claim: str | None) -> list[tuple[str, str]]:
    parts = [(safe(label, 48), "name:" + label)]
    if role:
        parts.append(("/" + safe(role, 32), "dim"))
    if claim is not None:  # the envelope said another name: shown, never believed
        parts.append((f' (claims "{safe(claim, 48)}")', "italic"))
    return parts


@lru_cache(maxsize=8192)
def _head_rest(key: tuple) -> tuple[tuple[str, str], ...]:
    """Everything after the time column; identical for most rows of a sender, so cached."""
    kind, label, role, claim, channel, to_service, names, count, hist, event, lifecycle = key
    parts: list[tuple[str, str]] = []
    if hist:
        parts.append(("↺ ", "hist"))
    if kind == "lifecycle":
        glyph, cls = LIFECYCLE_GLYPH.get(lifecycle or "", ("•", "feed--manager"))
        parts.append((glyph + " ", cls))
        parts.extend(_who(label, role, None))
        parts.append((" ", ""))
        return tuple(parts)
    parts.extend(_who(label, role, claim))
    parts.append((" → ", "dim"))
    if kind == "channel":
        parts.append(("#" + safe(channel, 64), "channel"))
        if event:
            parts.append((" ev", "dim"))
    elif kind == "anycast":
        parts.append(("@" + safe(to_service, 64), "service"))
    else:
        for k, n in enumerate(names[:6]):
            if k:
                parts.append((", ", "dim"))
            if n.startswith("\0"):  # no name known: the id, elided in the middle
                parts.append((elide_id(n[1:], ID_CELLS), "dim"))
            else:
                parts.append((safe(n, 48), "name:" + n))
        if len(names) > 6:
            parts.append((f", …+{len(names) - 6}", "dim"))
        if count > 1:
            parts.append((f" ({count}×)", "dim"))
    parts.append((": ", "dim"))
    return tuple(parts)


@lru_cache(maxsize=8192)
def _head_rest_len(key: tuple) -> int:
    return sum(cell_len(s) for s, _ in _head_rest(key))


MIN_FIRST = 12  # the body shares the head's row only when this many cells are left beside it
ID_CELLS = 24  # an unknown recipient's id in the head (elided in the middle)
EXCERPT_CELLS = 24  # the original's first words in a thread marker
CONFLICT_MARK = "⚠ reused id"  # a row whose id another sender used first (both are shown)

# One display row of a feed row: the head's characters ``[hs, he)`` (none when equal), else
# ``indent`` spaces, then body line ``li``'s characters ``[s, t)`` (none when ``li`` < 0). The
# fold line (``li`` = :data:`FOLD`) says ``… +s lines · Enter`` (``+≈`` when ``t``).
Row = tuple[int, int, int, int, int, int]
FOLD = -2


def one_row(head_cells: int, body_cells: int, width: int) -> bool:
    """A one-line body fits beside the head: the whole row is one row."""
    return width - head_cells >= MIN_FIRST and body_cells <= width - head_cells


def layout_rows(head: str, lines: list[str], width: int) -> list[Row]:
    """The one rule for a feed row's rows, so its height and its rendering never disagree.

    The body shares the head's row when at least :data:`MIN_FIRST` cells are left beside it;
    otherwise the head has its own row(s), wrapped when it is wider than the panel, and the
    body starts below. Continuation rows are indented under the name when the panel leaves a
    useful width, else start at column 0. Every row fits ``width`` cells (a lone wide
    character in a one-cell panel is the only exception), so no text is ever cut off."""
    width = max(1, width)
    hl = cell_len(head)
    indent = INDENT if width >= INDENT + MIN_FIRST else 0
    rest = width - indent
    nh = len(head)
    if len(lines) == 1 and one_row(hl, cell_len(lines[0]), width):
        return [(0, nh, 0, 0, 0, len(lines[0]))]
    rows: list[Row] = []
    if width - hl >= MIN_FIRST:
        first = width - hl
        for k, (s, t) in enumerate(wrap_offsets(lines[0], first, rest)):
            rows.append((0, nh, 0, 0, s, t) if k == 0 else (0, 0, indent, 0, s, t))
        start = 1
    else:
        spans = [(0, nh)] if hl <= width else wrap_offsets(head, width, width)
        rows.extend((hs, he, 0, -1, 0, 0) for hs, he in spans)
        start = 0
        if lines == [""]:
            return rows  # nothing to show below the head
    for li in range(start, len(lines)):
        line = lines[li]
        if len(line) <= rest and line.isascii():  # fits: one row (a body of many short lines)
            rows.append((0, 0, indent, li, 0, len(line)))
            continue
        for s, t in wrap_offsets(line, rest, rest):
            rows.append((0, 0, indent, li, s, t))
    return rows


def fold_rows(rows: list[Row], max_lines: int, width: int, more: int = 0,
              approx: bool = False) -> list[Row]:
    """``rows`` (:func:`layout_rows`) with at most ``max_lines`` body rows, then one fold row
    counting the hidden ones and ``more`` (rows of text not laid out; ``approx``: an estimate).
    A body one row too long is shown whole: the fold line would hide nothing. 0: never fold."""
    if max_lines <= 0:
        return rows
    body = 0
    for k, r in enumerate(rows):
        if r[3] >= 0:
            body += 1
            if body > max_lines:
                hidden = len(rows) - k + more
                if hidden <= 1 and not approx:
                    return rows
                indent = INDENT if width >= INDENT + MIN_FIRST else 0
                return [*rows[:k], (0, 0, indent, FOLD, hidden, int(approx))]
    if more:
        indent = INDENT if width >= INDENT + MIN_FIRST else 0
        return [*rows, (0, 0, indent, FOLD, more, int(approx))]
    return rows


class _RowStrips:
    """One feed row's display rows as Strips, each drawn on first use and kept."""

    __slots__ = ("_strips", "_draw")

    def __init__(self, n: int, draw: Callable[[int], Strip]) -> None:
        self._strips: list[Strip | None] = [None] * n
        self._draw = draw

    def __len__(self) -> int:
        return len(self._strips)

    def __getitem__(self, k: int) -> Strip:
        s = self._strips[k]
        if s is None:
            s = self._strips[k] = self._draw(k)
        return s


def thread_marker(e: FeedEntry) -> str:
    """``↳ re: <first words of the original>``, or ``↳ re: <elided id>`` when the original
    was not in the feed as the reply landed; ``↳ re? ambiguous <elided id>`` when the id names
    several senders' messages and none is in the reply's conversation (meshview/model/originals.py)."""
    if e.reply_ambiguous:
        return "↳ re? ambiguous " + elide_id(e.reply_to or "", 16)
    words = _first_words(safe(e.reply_excerpt or "", 200), EXCERPT_CELLS)
    return "↳ re: " + (words or elide_id(e.reply_to or "", 16))


def _first_words(text: str, cells: int) -> str:
    text = " ".join(text.split())
    if cell_len(text) <= cells:
        return text
    out = ""
    for w in text.split(" "):
        cand = (out + " " + w) if out else w
        if cell_len(cand) > cells - 1:
            break
        out = cand
    if not out:  # one long word: as much of it as fits
        out = text
        while out and cell_len(out) > cells - 1:
            out = out[:-1]
    return out + "…"


def entry_matches(e: FeedEntry, query: str, snap: Snapshot | None = None) -> bool:
    """``/`` search over sender (as shown, and the envelope's claim), role, channel, service,
    targets and text (case-folded)."""
    q = query.casefold()
    for field in (e.from_name, e.from_role, e.channel, e.to_service, e.text):
        if field and q in field.casefold():
            return True
    if snap is not None:
        shown = snap.sender(e)
        if q in shown.label.casefold() or (shown.role and q in shown.role.casefold()):
            return True
        if any(q in snap.name_of(t).casefold() for t in e.to_ids):
            return True
    return any(q in n.casefold() for n in e.to_names)


class FeedView(ScrollView, can_focus=True, inherit_bindings=False):
    """Messages and lifecycle rows of the active tab."""

    DEFAULT_CSS = """
    FeedView {
        background: $surface;
        overflow-x: hidden;
        overflow-y: scroll;
        scrollbar-size-vertical: 1;
    }
    FeedView > .feed--time { color: $text-muted; }
    FeedView > .feed--channel { color: $secondary; }
    FeedView > .feed--service { color: $accent; }
    FeedView > .feed--cursor { background: $boost; }
    FeedView:focus > .feed--cursor { background: $accent 30%; }
    FeedView > .feed--more { background: $warning 25%; color: $text; text-style: bold; }
    FeedView > .feed--join { color: $success; text-style: italic; }
    FeedView > .feed--offline { color: $text-muted; text-style: italic; }
    FeedView > .feed--crash { color: $error; text-style: italic bold; }
    FeedView > .feed--incarnation { color: $secondary; text-style: italic; }
    FeedView > .feed--manager { color: $accent; text-style: italic; }
    FeedView > .feed--hist { color: $text-disabled; }
    """
    COMPONENT_CLASSES = {
        "feed--time", "feed--channel", "feed--service", "feed--cursor", "feed--more",
        "feed--join", "feed--offline", "feed--crash", "feed--incarnation", "feed--manager",
        "feed--hist",
    }
    BINDINGS = [
        Binding("down,j", "move(1)", "next msg", id="feed.down", show=False),
        Binding("up,k", "move(-1)", "previous msg", id="feed.up", show=False),
        Binding("right_curly_bracket,J", "move(1)", "next message", id="feed.next", show=False),
        Binding("left_curly_bracket,K", "move(-1)", "previous message", id="feed.prev",
                show=False),
        Binding("ctrl+d", "half(1)", "half page down", id="feed.half-down", show=False),
        Binding("ctrl+u", "half(-1)", "half page up", id="feed.half-up", show=False),
        Binding("pagedown", "page(1)", "page down", id="feed.page-down", show=False),
        Binding("pageup", "page(-1)", "page up", id="feed.page-up", show=False),
        Binding("home,g", "top", "oldest", id="feed.top", show=False),
        Binding("end,G", "follow", "newest / follow", id="feed.follow"),
        Binding("enter", "open", "detail", id="feed.open"),
        Binding("o", "original", "jump to the original (↳ re:)", id="feed.original"),
        Binding("L", "toggle_lifecycle", "lifecycle rows", id="feed.lifecycle"),
    ]

    class Open(Message):
        """Enter on a row: the screen opens its detail card."""

        def __init__(self, entry: FeedEntry) -> None:
            super().__init__()
            self.entry = entry

    follow: var[bool] = var(True)
    show_lifecycle: var[bool] = var(True)
    #: agents' activity frames (event-channel rows): activity, not conversation, so hidden
    #: unless asked for (the console's E key, ``[ui] show_events``)
    show_events: var[bool] = var(False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._snap: Snapshot | None = None
        self.tab: str | None = None  # None = all, else a channel name
        self.filter_text = ""  # the ``/`` search (not ``query``: that is Textual's DOM query)
        self._rows: list[int] = []
        self._heights: list[int] = []
        self._starts: list[int] = [0]
        self._end = 0  # absolute index processed up to
        self._width = 0
        self._bar_quiet = False  # (see _moved)
        self._cache: OrderedDict[tuple[int, int, bool], _RowStrips] = OrderedDict()
        self._layouts: OrderedDict[tuple[int, int], tuple] = OrderedDict()  # (LAYOUT_ROWS)
        self.cursor: int | None = None
        self._styles: dict[str, object] = {}
        self._max_lines = DEFAULT_MAX_LINES
        self._tails = TailCounter()

    # -- filtering and layout ----------------------------------------------------------

    def _passes(self, e: FeedEntry) -> bool:
        if e.event and not self.show_events:
            return False
        if e.kind == "lifecycle":
            if not self.show_lifecycle or self.tab is not None:
                return False
        elif self.tab is not None and (e.kind != "channel" or e.channel != self.tab):
            return False
        return not self.filter_text or entry_matches(e, self.filter_text, self._snap)

    def _head(self, e: FeedEntry) -> list[tuple[str, str]]:
        """Head parts as (text, style); plain text sums exactly to the rendered head."""
        assert self._snap is not None
        return [(clock(e.ts) + " ", "time"), *_head_rest(_head_key(e, self._snap))]

    def _body(self, e: FeedEntry, cap: int = BODY_CAP, cut: str = "…") -> tuple[list[str], int]:
        """Display lines of a row's body (its first ``cap`` characters, then ``cut``) and how
        many leading cells of line 0 are the thread marker (``↳ re: …``, dim)."""
        body = e.text if len(e.text) <= cap else e.text[:cap] + cut
        lines = safe_body(body)
        if e.kind == "lifecycle" or not (e.reply_to or e.conflict):
            return lines, 0
        mark = " · ".join(m for m in (CONFLICT_MARK if e.conflict else "",
                                      thread_marker(e) if e.reply_to else "") if m)
        lines[0] = mark + (" · " + lines[0] if lines[0] else "")
        return lines, len(mark)

    def _layout(self, e: FeedEntry, width: int) -> tuple[list[tuple[str, str]], list[str], int,
                                                         list[Row]]:
        """Head parts, body lines, marker length and the rows (:func:`layout_rows`); a long
        row's are kept (:data:`LAYOUT_ROWS`) while its row and head stay the same."""
        head = self._head(e)
        head_s = "".join(s for s, _ in head)
        n = self._max_lines
        if len(e.text) < LAYOUT_MIN_CHARS:
            lines, mark = self._body(e)
            return head, lines, mark, fold_rows(layout_rows(head_s, lines, width), n, width)
        key = (e.index, width)
        kept = self._layouts.get(key)
        if kept is not None and kept[0] is e and kept[1] == head_s:
            self._layouts.move_to_end(key)
            return head, kept[2], kept[3], kept[4]
        if n <= 0:
            lines, mark = self._body(e)
            rows = layout_rows(head_s, lines, width)
        else:  # folded: the first few kB laid out exactly, the rest counted (widgets/fold.py)
            cap = body_cap(n, width)
            lines, mark = self._body(e, cap, "")
            more = 0
            if len(e.text) > cap:
                rest = width - (INDENT if width >= INDENT + MIN_FIRST else 0)
                more = self._tails.rows(e.index, e.text, cap, rest)
            rows = fold_rows(layout_rows(head_s, lines, width), n, width, more, more > 0)
        self._layouts[key] = (e, head_s, lines, mark, rows)
        if len(self._layouts) > LAYOUT_ROWS:
            self._layouts.popitem(last=False)
        return head, lines, mark, rows

    def _height(self, e: FeedEntry, width: int) -> int:
        # fast path, the first case of layout_rows: one short printable ASCII line beside
        # the head (most rows); the head's width is cached. safe_body leaves such a line as is.
        text, snap = e.text, self._snap
        assert snap is not None
        if (not e.reply_to and not e.conflict and len(text) < width and text.isascii()
                and text.isprintable()
                and one_row(9 + _head_rest_len(_head_key(e, snap)), len(text), width)):
            return 1
        return len(self._layout(e, width)[3])

    def _recount(self) -> None:
        self._starts = [0, *accumulate(self._heights)]
        self._set_virtual(Size(self._width, self._starts[-1]))
        where = "#" + self.tab if self.tab else "all"
        title = f"feed · {where} · {len(self._rows)}"
        if self.filter_text:
            title += f" · /{self.filter_text}"
        if not self.show_lifecycle:
            title += " · lifecycle hidden"
        set_title(self, title)

    def _refilter(self) -> None:
        """Rebuild the visible row list from the whole ring (tab, query or width change)."""
        self._rows, self._heights = [], []
        self._cache.clear()
        snap = self._snap
        width = self._width
        if snap is not None:
            for e in snap.feed:
                if self._passes(e):
                    self._rows.append(e.index)
                    self._heights.append(self._height(e, width))
            self._end = snap.feed_end
        if self.cursor is not None and self.cursor not in set(self._rows[-5000:]):
            self.cursor = None
        self._recount()

    # -- public API ----------------------------------------------------------------------

    @property
    def snap(self) -> Snapshot | None:
        """The snapshot last drawn (read-only; what tests and diagnostics read)."""
        return self._snap

    def update_snapshot(self, snap: Snapshot) -> None:
        """Apply one drained snapshot: drop evicted rows, append new ones, keep the view."""
        prev = self._snap
        self._snap = snap
        if self._width <= 0:
            return  # laid out on first resize
        if prev is None or snap.feed_base > self._end or snap.feed_end < self._end:
            self._refilter()
            self._after_change(0)
            return
        removed_lines = 0
        k = bisect_left(self._rows, snap.feed_base)
        if k:
            removed_lines = sum(self._heights[:k])
            del self._rows[:k]
            del self._heights[:k]
            if self.cursor is not None and self.cursor < snap.feed_base:
                self.cursor = None
        start = max(self._end, snap.feed_base)
        width = self._width
        rows, heights, passes, height = self._rows, self._heights, self._passes, self._height
        had = len(rows)
        for e in snap.feed.since(start):
            if passes(e):
                rows.append(e.index)
                heights.append(height(e, width))
        self._end = snap.feed_end
        relabeled = prev.labels is not snap.labels and self._relabel(snap, prev)
        if k or len(rows) != had or relabeled:  # rows in other channels only: nothing moved
            self._moved(removed_lines)

    def _moved(self, removed_lines: int) -> None:
        """Rows came or went: measure and scroll again, with the scrollbar painted only if its
        thumb is drawn elsewhere after all of it (a followed feed adds rows and scrolls by the
        same lines, and over a long feed that moves the thumb by less than the eighth of a cell
        it is drawn in; each paint of the bar cost ~1.2 ms, a fifth of a small team's paint)."""
        bar = self._quiet_bar()
        before = None if bar is None else drawn_thumb(bar, self.virtual_size.height)
        self._bar_quiet = bar is not None
        try:
            self._recount()
            self._after_change(removed_lines)
        finally:
            self._bar_quiet = False
        if bar is not None and drawn_thumb(bar, self.virtual_size.height) != before:
            bar.refresh()

    def _quiet_bar(self) -> ScrollBar | None:
        """The vertical scrollbar, when it alone is shown (what :meth:`_moved` may keep still)."""
        if not self.is_mounted or not self.container_size:
            return None
        if not self.show_vertical_scrollbar or self.show_horizontal_scrollbar:
            return None
        return self.vertical_scrollbar

    def _relabel(self, snap: Snapshot, prev: Snapshot) -> bool:
        """A roster name changed (a join, a rename, a second ``ada``): the rows from or to a
        principal whose label moved are drawn again, and measured again (a longer label may
        wrap). True when one was."""
        changed = snap.labels.diff(prev.labels)
        if not changed:
            return False
        self._cache.clear()
        heights, width, entry = self._heights, self._width, snap.entry
        hit = False
        for k, i in enumerate(self._rows):
            e = entry(i)
            if e.from_id in changed or (e.to_ids and not changed.isdisjoint(e.to_ids)):
                heights[k] = self._height(e, width)
                hit = True
        return hit

    def _set_virtual(self, size: Size) -> None:
        """Grow the scroll extent without a layout pass: the scrollbar is always shown
        (``overflow-y: scroll``), so only its thumb moves. A layout per drain would repaint
        the whole screen at flood rates."""
        if size == self.virtual_size:
            return
        if not self.is_mounted or not self.container_size:
            self.virtual_size = size
            return
        self.set_reactive(FeedView.virtual_size, size)
        if self._bar_quiet:  # (see _moved) the bar's extent without a paint of it
            bar = self.vertical_scrollbar
            bar.set_reactive(ScrollBar.window_virtual_size, size.height)
            bar.set_reactive(ScrollBar.window_size,
                             self.container_size.height - self.scrollbar_size_horizontal)
            self.scroll_y = self.validate_scroll_y(self.scroll_y)
        else:
            self._scroll_update(size)
        self.refresh()

    def _after_change(self, removed_lines: int) -> None:
        if self.follow:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)
        elif removed_lines:
            self.scroll_to(y=max(0, self.scroll_y - removed_lines), animate=False,
                           immediate=True, force=True)
        self.refresh()

    def set_filter(self, *, tab: str | None | EllipsisType = ..., query: str | None = None) -> None:
        """Change tab and/or query (``...``: the tab as it is; None is the all tab); jumps to the
        newest row."""
        if tab is not ...:
            self.tab = tab
        if query is not None:
            self.filter_text = query
        self.cursor = None
        self.follow = True
        self._refilter()
        self._after_change(0)

    def watch_show_lifecycle(self, _old: bool, _new: bool) -> None:
        self._toggled()

    def watch_show_events(self, _old: bool, _new: bool) -> None:
        self._toggled()

    def _toggled(self) -> None:
        """Rows come and go under the selection: it stays on its row (or, when that row was a
        hidden lifecycle or frame row, the nearest older row still shown) and in view, so Enter
        opens what the user sees selected."""
        if self._snap is None or not self._width:
            return
        selected, following = self.cursor, self.follow
        self._refilter()
        if selected is None or following:
            self._after_change(0)
            return
        self.follow = False  # a clamped scroll inside the refilter may have claimed the tail
        rows = self._rows
        if not rows:
            self.cursor = None
            self._after_change(0)
            return
        k = bisect_right(rows, selected) - 1  # the row itself, else the nearest older one
        k = max(0, k)
        self.cursor = rows[k]
        self._cache.clear()
        self._reveal(k)
        self.refresh()

    @property
    def max_lines(self) -> int:
        """Body lines a row shows before it folds (``[feed] max_lines``; 0: never)."""
        return self._max_lines

    @max_lines.setter
    def max_lines(self, n: int) -> None:
        n = max(0, int(n))
        if n != self._max_lines:
            self._max_lines = n
            self._layouts.clear()
            if self._snap is not None and self._width:
                self._refilter()
                self._after_change(0)

    @property
    def rows(self) -> list[int]:
        """Absolute indices of the visible (filtered) rows, oldest first."""
        return list(self._rows)

    # -- for tests and diagnostics

    def row_start(self, k: int) -> int:
        """The first display row of the ``k``-th visible row (see :attr:`rows`)."""
        return self._starts[k]

    def head_text(self, e: FeedEntry) -> str:
        """Row ``e``'s head (time, sender, target) as plain text."""
        return "".join(s for s, _ in self._head(e))

    def row_height(self, e: FeedEntry, width: int) -> int:
        """How many display rows ``e`` takes at ``width`` (the layout's measure)."""
        return self._height(e, width)

    def row_strips(self, index: int, width: int, cursor: bool = False) -> list[Strip]:
        """What feed row ``index`` paints at ``width``, one Strip per display row."""
        return self._render_row(index, width, cursor)

    def visible_entries(self) -> list[FeedEntry]:
        snap = self._snap
        return [snap.entry(i) for i in self._rows] if snap else []

    @property
    def more_below(self) -> int:
        """Rows that start below the viewport (the ``↓N more`` count)."""
        bottom = round(self.scroll_y) + self.scrollable_content_region.height
        return len(self._rows) - bisect_left(self._starts, bottom, hi=len(self._rows))

    # -- scrolling and follow --------------------------------------------------------------

    def on_resize(self) -> None:
        w = max(1, self.scrollable_content_region.width)
        if w != self._width:
            self._width = w
            self._refilter()
        self._after_change(0)

    def watch_scroll_y(self, old: float, new: float) -> None:
        if self._bar_quiet:  # (see _moved) the thumb's place without a paint of the bar
            bar = self.vertical_scrollbar
            bar.set_reactive(ScrollBar.position, bar.validate_position(new))
            if round(old) != round(new):
                self.refresh(self.size.region)
        else:
            super().watch_scroll_y(old, new)
        at_end = round(new) >= self.max_scroll_y
        if not at_end:
            self.follow = False
        elif self.cursor is None:
            self.follow = True
        self.refresh()

    def watch_follow(self, _old: bool, _new: bool) -> None:
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._styles.clear()

    def on_mount(self) -> None:
        follow_theme(self, self._retheme)  # name colours come from the theme's Look

    def _retheme(self) -> None:
        self._cache.clear()
        self._styles.clear()
        self.refresh()

    # -- rendering -----------------------------------------------------------------------

    def _style(self, key: str):
        """Component styles resolved once per style change (they are costly to compute)."""
        hit = self._styles.get(key)
        if hit is not None:
            return hit
        if key == "base":
            value = self.rich_style
        elif key in ("time", "channel", "service", "hist", "cursor", "more"):
            value = self.get_component_rich_style("feed--" + key)
        elif key.startswith("feed--"):
            value = self.get_component_rich_style(key)
        elif key.startswith("name:"):
            return look_of(self).name(key[5:])
        else:
            return key
        self._styles[key] = value
        return value

    def _render_row(self, index: int, width: int, cursor: bool) -> list[Strip]:
        """Every display row of feed row ``index`` as Strips."""
        rows = self._row_strips(index, width, cursor)
        return [rows[k] for k in range(len(rows))]

    def _row_strips(self, index: int, width: int, cursor: bool) -> _RowStrips:
        """Feed row ``index``'s display rows, each drawn when first asked for: a row taller
        than the screen (a long line) costs the rows on screen, not all of its rows."""
        key = (index, width, cursor)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        assert self._snap is not None
        e = self._snap.entry(index)
        head, lines, mark, rows = self._layout(e, width)
        base = self._style("base")
        head_text = Text(style=base)
        for s, st in head:
            head_text.append(s, self._style(st) if st else None)
        body_style = self._style(LIFECYCLE_GLYPH.get(e.lifecycle or "", ("", "feed--manager"))[1]) \
            if e.kind == "lifecycle" else None
        if e.historical and body_style is None:
            body_style = "dim"
        console = self.app.console
        cur = self._style("cursor") if cursor else None

        def draw(k: int) -> Strip:
            hs, he, indent, li, s, t = rows[k]
            row = head_text[hs:he] if he > hs else Text(" " * indent, style=base)
            if li == FOLD:
                row.append(fold_label(s, bool(t), width - indent), style="dim")
            elif li >= 0:
                piece = Text(lines[li][s:t], style=body_style or "")
                if li == 0 and s < mark:
                    piece.stylize("dim", 0, mark - s)
                row.append_text(piece)
            pad = width - row.cell_len
            if pad > 0:
                row.append(" " * pad)
            elif pad < 0:
                row.truncate(width)
            if cur is not None:
                row.stylize(cur)
            # the base style under every segment: a segment without one breaks Textual's
            # monochrome filter (NO_COLOR) and would paint no background
            return Strip(Segment.apply_style(row.render(console, end=""), base), width)

        strips = _RowStrips(len(rows), draw)
        self._cache[key] = strips
        if len(self._cache) > CACHE_ROWS:
            self._cache.popitem(last=False)
        return strips

    def render_line(self, y: int) -> Strip:
        width = self._width or self.size.width
        height = self.scrollable_content_region.height
        if not self.follow and y == height - 1 and self._rows:
            more = self.more_below
            if more:
                label = Text(f" ↓{more} more · G to follow ")
                return Strip(list(label.render(self.app.console, end=""))).crop_extend(
                    0, width, None).apply_style(self._style("more"))
        line = round(self.scroll_y) + y
        if line >= self._starts[-1] or not self._rows:
            if not self._rows and y == 0:
                msg = "no messages match the search" if self.filter_text else "no messages yet"
                return Strip(list(Text(msg, style="dim italic").render(self.app.console, end=""))
                             ).crop_extend(0, width, None).apply_style(self.rich_style)
            return Strip.blank(width, self._style("base"))
        k = bisect_right(self._starts, line, hi=len(self._rows)) - 1
        index = self._rows[k]
        strips = self._row_strips(index, width, index == self.cursor)
        sub = line - self._starts[k]
        return strips[sub] if sub < len(strips) else Strip.blank(width, self._style("base"))

    # -- actions -------------------------------------------------------------------------

    def _reveal(self, k: int) -> None:
        top = round(self.scroll_y)
        height = self.scrollable_content_region.height or 1
        s, t = self._starts[k], self._starts[k + 1]
        if s < top:
            self.scroll_to(y=s, animate=False, immediate=True, force=True)
        elif t > top + height - 1:
            self.scroll_to(y=min(self.max_scroll_y, t - height + 1), animate=False,
                           immediate=True, force=True)

    def action_move(self, delta: int) -> None:
        if not self._rows:
            return
        last = len(self._rows) - 1
        if self.cursor is None or self.cursor not in self._rows:
            k = last
        else:
            k = self._rows.index(self.cursor)
            if delta > 0 and k == last:
                self.action_follow()
                return
            k = max(0, min(last, k + delta))
        self.follow = False
        self.cursor = self._rows[k]
        self._cache.clear()
        self._reveal(k)
        self.refresh()

    def action_half(self, direction: int) -> None:
        h = max(1, self.scrollable_content_region.height // 2)
        self.scroll_to(y=self.scroll_y + direction * h, animate=False, immediate=True, force=True)

    def action_page(self, direction: int) -> None:
        h = max(1, self.scrollable_content_region.height - 1)
        self.scroll_to(y=self.scroll_y + direction * h, animate=False, immediate=True, force=True)

    def action_top(self) -> None:
        self.follow = False
        self.scroll_to(y=0, animate=False, immediate=True, force=True)
        if self._rows:
            self.cursor = self._rows[0]
            self._cache.clear()
        self.refresh()

    def action_follow(self) -> None:
        self.cursor = None
        self._cache.clear()
        self.follow = True
        self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)
        self.refresh()

    def selected_entry(self) -> FeedEntry | None:
        """The row under the cursor, else the newest row shown; None on an empty feed."""
        if not self._rows or self._snap is None:
            return None
        index = self.cursor if self.cursor is not None else self._rows[-1]
        try:
            return self._snap.entry(index)
        except IndexError:
            return None

    def action_open(self) -> None:
        if not self._rows or self._snap is None:
            return
        index = self.cursor if self.cursor is not None else self._rows[-1]
        try:
            self.post_message(self.Open(self._snap.entry(index)))
        except IndexError:
            pass

    def find_original(self, e: FeedEntry) -> tuple[int | None, bool]:
        """The absolute index of the row ``e`` answers (``replyTo``: the first copy that fits,
        meshview/model/originals.py), and whether that row passes the current filter (tab, search,
        lifecycle)."""
        snap = self._snap
        row = snap.original_of(e) if snap is not None else None
        if row is None:
            return None, False
        return row.index, self._passes(row)

    def jump_to_original(self, e: FeedEntry) -> bool:
        """Move the cursor to the original of reply ``e`` and show it; says why when it can't."""
        if not e.reply_to:
            say_line(self, "this row answers no message (no ↳ re:)")
            return False
        index, shown = self.find_original(e)
        if index is None:
            snap = self._snap
            if snap is not None and snap.original_ambiguous(e):
                say_line(self, f"the id {elide_id(e.reply_to, 24)} names messages of several "
                               "senders, none in this reply's conversation: not jumping")
                return False
            say_line(self, f"the original {elide_id(e.reply_to, 24)} is no longer in the feed")
            return False
        if not shown:
            say_line(self, "the original is hidden by the current tab, search or lifecycle filter")
            return False
        k = bisect_left(self._rows, index)
        if k >= len(self._rows) or self._rows[k] != index:
            say_line(self, "the original is hidden by the current tab, search or lifecycle filter")
            return False
        self.follow = False
        self.cursor = index
        self._cache.clear()
        self._reveal(k)
        self.refresh()
        return True

    def action_original(self) -> None:
        e = self.selected_entry()
        if e is not None:
            self.jump_to_original(e)

    def action_toggle_lifecycle(self) -> None:
        self.show_lifecycle = not self.show_lifecycle
        say_line(self, f"lifecycle rows {'shown' if self.show_lifecycle else 'hidden'}")
