"""A :class:`LineList` whose items are measured on every rebuild but built only when shown.

The roster holds every seat of a space (10,000 at scale); building each seat's rich lines on
every change costs far more than a frame. Here a rebuild only *measures* items (their line
counts, from cheap plain-text facts, and only for items whose data object changed since the
last measure), and an item's ``Text`` lines are made when a visible row, the cursor or a test
asks for them. ``_items``/``_lines``/``_starts`` keep the shapes :class:`LineList` reads, so
cursor, paging, scrolling and the Strip cache work unchanged.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Sequence
from itertools import accumulate, compress
from math import ceil
from operator import is_not, ne
from time import perf_counter
from typing import Any, Hashable, cast

from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.scrollbar import ScrollBar
from textual.strip import Strip

from widgets.line_list import LineList


STRIP_MEMO = 2048
SLICE_S = 0.004  # a slice of the ages' re-measure holds the loop at most this long
SLICE_GAP_S = 0.01  # ... and the loop runs at least this long between slices
# Off screen, a height measured at older ages (or before a clocks-only change) holds until
# the ages have moved this many times (a second each in the roster): then every item is owed
# a measure again. On screen, every item is measured at once, always. (A 10k roster measured
# in full each second was ~12 % of the console's busy time at 10k agents.)
AGES_REMEASURE_EVERY = 10


def drawn_thumb(bar: ScrollBar, virtual: int, position: float | None = None) -> tuple[int, int] | None:
    """Where ``bar`` draws its thumb over ``virtual`` rows scrolled to ``position`` (default:
    its own), in eighths of a cell (as :class:`textual.scrollbar.ScrollBarRender` computes it)."""
    size, window = bar.size.height, bar.window_size
    if not (size and window and virtual) or window >= virtual or size == virtual:
        return None
    thumb = max(1.0, window / (virtual / size))
    at = (size - thumb) * ((bar.position if position is None else position) / (virtual - window))
    start = int(at * 8)
    return start, start + ceil(thumb * 8)


class _Items(Sequence):
    """``(key, lines)`` per item; lines are built on first access (until the next rebuild)."""

    def __init__(self, owner: "LazyLineList") -> None:
        self._o = owner

    def __len__(self) -> int:
        return len(self._o._keys)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._o._keys[i], self._o._item_lines(i if i >= 0 else len(self) + i)


class _Lines(Sequence):
    """``(line, item index)`` per row, from the items' measured heights."""

    def __init__(self, owner: "LazyLineList", total: int) -> None:
        self._o, self._n = owner, total

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, row: Any) -> Any:
        if isinstance(row, slice):
            return [self[j] for j in range(*row.indices(self._n))]
        if row < 0:
            row += self._n
        if not 0 <= row < self._n:
            raise IndexError(row)
        o = self._o
        i = bisect_right(o._starts, row) - 1
        lines = o._item_lines(i)
        k = row - o._starts[i]
        return (lines[k] if k < len(lines) else Text("")), i


class LazyLineList(LineList):
    """Subclasses implement :meth:`source` (``(key, data)`` per item, in order),
    :meth:`measure` (how many lines :meth:`lines_of` will give; at least 1) and
    :meth:`lines_of`, and :meth:`epoch` (a value that changes whenever *every* measure may have
    changed, e.g. the second the ages are computed at). A data object is measured again only
    when it is not the same object as last time or the epoch moved."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._keys: list[Hashable] = []
        self._data: list[Any] = []
        self._built: dict[int, list[Text]] = {}
        self._mdata: dict[Hashable, Any] = {}  # the data object each key was last measured for
        self._mh: dict[Hashable, int] = {}  # ... and the height it measured
        self._index: dict[Hashable, int] = {}  # key -> item index in the current order
        self._epoch: Any = None
        self._ages: Any = None
        # keys whose height is owed: measured before the ages last moved, or whose data object
        # changed off screen (measured in slices, keeping their last height until then)
        self._stale: deque[Hashable] = deque()
        self._owed: set[Hashable] = set()  # ... the same keys, once each
        self._slicing = False
        self._order: tuple | None = None
        self._ages_moves = 0
        self._strips: dict[tuple, Strip] = {}  # rendered lines by content (see _strip)
        self._heights: list[int] = []
        # True: a shown item whose new data differs only in its clocks (see clocks_only: a
        # heartbeat's "seen 0s") keeps the lines it shows until the ages next move, as every
        # other age on screen does; between two seconds such a drain paints nothing
        self.hold_clocks = False

    # -- for tests and diagnostics ---------------------------------------------------------

    @property
    def item_heights(self) -> Sequence[int]:
        """Each item's measured height in rows (read-only; what tests and diagnostics read)."""
        return self._heights

    @property
    def owed_measures(self) -> int:
        """How many items still owe a measure (paid in slices); 0 once the list is exact."""
        return len(self._stale)

    @property
    def built_items(self) -> int:
        """How many items have their lines built since the last rebuild (only those shown)."""
        return len(self._built)

    def drop_paint_caches(self, *, keep_lines: bool = False) -> None:
        """Forget what was painted, so the next paint is one from nothing (a test compares the
        two); ``keep_lines`` keeps the list's own row cache, as a focus change's repaint does."""
        self._styles_cache.clear()
        if not keep_lines:
            self._cache.clear()
            self._strips.clear()

    # -- for subclasses ------------------------------------------------------------------

    def source(self) -> Sequence[tuple[Hashable, Any]]:  # pragma: no cover - subclasses
        return ()

    def epoch(self) -> Any:
        return None

    def ages(self) -> Any:
        """A value that moves when the clock the items' text reads moves (the second ages are
        stamped at). Every item may read differently then, but its height rarely changes: the
        shown items are measured again at once, the rest in slices every
        :data:`AGES_REMEASURE_EVERY` moves (see ``_measure_slice``)."""
        return None

    def clocks_only(self, old: Any, new: Any) -> bool:
        """True when ``new`` differs from ``old`` only in what the ages read (a heartbeat's
        clocks): off screen it keeps the height it had, as after an ages move."""
        return False

    def prepare(self) -> None:
        """Called before every full rebuild (and :meth:`build`): per-rebuild lookups."""

    def measure(self, data: Any, width: int) -> int:  # pragma: no cover - subclasses
        return 1

    def lines_of(self, data: Any, width: int) -> list[Text]:  # pragma: no cover - subclasses
        return [Text("")]

    def order(self) -> tuple | None:
        """The items' keys, as one tuple object that stays the same object while the items
        keep their order (None: no such token, every rebuild is a full one)."""
        return None

    def data(self) -> Sequence[Any]:
        """The items' data objects in :meth:`order`'s order (read when ``order()`` is used)."""
        return [d for _, d in self.source()]

    def build(self, width: int) -> list[tuple[Hashable, list[Text]]]:
        """Every item built (what a plain :class:`LineList` would hold): tests, small lists."""
        self.prepare()
        return [(k, self.lines_of(d, width)) for k, d in self.source()]

    # -- the lazy rebuild ----------------------------------------------------------------

    def rebuild(self) -> None:
        """Take the subclass's items. Only items whose data object changed are measured (the
        walk over 10k items is done by ``map`` in C): new ones now, known ones on screen now
        and the rest in slices, keeping their last height until then (at 10k agents ~2,000
        heartbeats land between two drains); a new :meth:`epoch` or width measures every item;
        new :meth:`ages` alone measure the shown items now and the rest in slices."""
        width = self.content_width
        epoch = (self.epoch(), width)
        ages = self.ages()
        order = self.order()
        if order is not None and order is self._order and epoch == self._epoch:
            if ages != self._ages:
                self._ages_moved(ages, width)
            self._refresh_changed(width)
            return
        # what each row on screen shows now: after the rebuild only rows that show something
        # else are painted again (a re-sort off screen, at 10k rows the usual case, paints none;
        # a new second of the ages, only the rows whose text it changed)
        same_look = epoch == self._epoch and width == self._built_width
        before = self._screen_rows() if same_look else None
        hold = self._hold()
        prior, aged = self._built, ages != self._ages  # the lines they read; a new second?
        self._order = order
        self._built_width = width
        self.prepare()
        if order is not None:
            keys, data = list(order), list(self.data())
        else:
            src = self.source()
            keys, data = [k for k, _ in src], [d for _, d in src]
        if epoch != self._epoch:  # everything may measure differently: measure everything
            self._mdata, self._mh = {}, {}
            self._owe(None)
            self._ages = ages
        elif ages != self._ages:
            self._ages = ages
            if self._ages_move():
                self._owe(keys)  # measured again in slices; the shown ones below
        self._epoch = epoch
        mdata, mh = self._mdata, self._mh
        heights = list(map(mh.get, keys))
        measure, clocks_only = self.measure, self.clocks_only
        clocked: set[int] = set()
        for i in compress(range(len(keys)), map(is_not, data, map(mdata.get, keys))):
            d, k = data[i], keys[i]
            if heights[i] is not None:  # known: it keeps that height until a slice measures it
                if clocks_only(mdata[k], d):
                    mdata[k] = d  # as an ages move: off screen its height holds
                    clocked.add(i)
                else:
                    self._owe_one(k)  # (the shown ones are measured below, at once)
                continue
            h = heights[i] = max(1, measure(d, width))
            mdata[k], mh[k] = d, h
        # every height is known now: a None (never measured) was measured in the loop above
        known = cast("list[int]", heights)
        if len(mdata) > 2 * len(keys) + 64:  # keys that left, forgotten (bounded)
            self._mdata, self._mh = dict(zip(keys, data)), dict(zip(keys, known))
        self._keys, self._data, self._heights = keys, data, known
        self._index = dict(zip(keys, range(len(keys))))
        self._built = {}
        self._starts = [0, *accumulate(known)][:-1] if known else []
        total = sum(known)
        self._items = _Items(self)
        if not keys and self.empty_text:
            self._lines = [(Text(self.empty_text, style="dim italic"), -1)]
            total = 1
        else:
            self._lines = _Lines(self, total)
        cache, self._cache = self._cache, {}
        moved = False
        at = self._index.get(self.cursor_key)
        if at is not None:
            if at != self._cursor:
                self._cursor = at
                moved = True  # re-sorted under the cursor: it stays on its item
        else:
            self._cursor = min(self._cursor, max(0, len(keys) - 1))
            self.cursor_key = keys[self._cursor] if keys else None
        top = self.scroll_offset.y
        quiet = self._set_total(width, total, quiet=before is not None)
        to = self._held_top(hold, top, moved)
        if to != top:
            if quiet:
                self._scroll_quietly(to)  # the rows that show something else are painted below
            else:
                self.scroll_to(y=to, animate=False, force=True)
        relaid = False
        if self._stale:
            relaid = self._remeasure(self._shown(), width)  # laid out and painted if it moved
            self._start_slices()
        elif clocked:  # only those on screen: measured at once
            relaid = self._remeasure([i for i in self._shown() if i in clocked], width)
        if relaid and moved and hold[1]:
            self.scroll_to_cursor()  # a height on screen changed too: the cursor still shows
        if quiet and before is not None and not relaid and self.scroll_offset.y == to:
            self._repaint_rows(before, prior, aged, cache, top)
        else:
            self.refresh()

    def _hold(self) -> tuple[tuple[Hashable, int] | None, bool]:
        """What a rebuild holds in place: the item kept on its screen row with its first
        row's offset from the top of the view — the cursor's when it is on screen, else the
        top row's (None: not laid out, or the view is at the top, where new rows above show
        as they come: the rule of a browser's scroll anchoring) — and whether the cursor is on
        screen (only then does the view follow it when a re-sort moves it away)."""
        top = self.scroll_offset.y
        if not self._starts or not self.is_mounted:
            return None, False
        rows = self.scrollable_content_region.height or self.size.height or 1
        cur = self._cursor
        shown = 0 <= cur < len(self._starts) and top <= self._starts[cur] < top + rows
        if top <= 0:
            return None, shown
        if shown:
            return (self._keys[cur], self._starts[cur] - top), True
        i = max(0, bisect_right(self._starts, top) - 1)
        return (self._keys[i], self._starts[i] - top), False

    def _held_top(self, hold: tuple[tuple[Hashable, int] | None, bool], top: int,
                  moved: bool) -> int:
        """Where the view's top goes after a rebuild: where it keeps the held item on its row
        (rows above the screen that came, went or changed height move it by as much), then,
        if a re-sort moved the cursor that was on screen, just far enough to show it."""
        anchor, cursor_shown = hold
        to = top
        if anchor is not None and (i := self._index.get(anchor[0])) is not None:
            to = self._starts[i] - anchor[1]
        to = max(0, min(to, len(self._lines) - (self.scrollable_content_region.height or 1)))
        if moved and cursor_shown and self._starts:
            i = min(self._cursor, len(self._starts) - 1)
            start = self._starts[i]
            end = self._starts[i + 1] if i + 1 < len(self._starts) else len(self._lines)
            height = self.scrollable_content_region.height or 1
            if start < to:
                to = start
            elif end > to + height:
                to = min(start, end - height)
        return max(0, to)

    def _screen_rows(self) -> list[tuple] | None:
        """``(key, data, line, cursor?, item)`` of every row on screen (None: nothing laid out
        yet)."""
        if not self.is_mounted or not self._starts or not isinstance(self._lines, _Lines):
            return None
        top = self.scroll_offset.y
        rows = self.scrollable_content_region.height or self.size.height
        if rows <= 0:
            return None
        starts, keys, data, cur = self._starts, self._keys, self._data, self._cursor
        out: list[tuple] = []
        i = max(0, bisect_right(starts, top) - 1)
        for row in range(top, min(top + rows, len(self._lines))):
            while i + 1 < len(starts) and starts[i + 1] <= row:
                i += 1
            out.append((keys[i], data[i], row - starts[i], i == cur, i))
        return out

    def _set_total(self, width: int, total: int, *, quiet: bool) -> bool:
        """The scroll extent is now ``total`` rows. When ``quiet`` may be, without a layout
        pass (True) if the scrollbar neither comes nor goes: only its thumb moves, and the
        rows on screen are painted by the caller. A layout would repaint the whole list."""
        size = Size(width, total)
        old = self.virtual_size
        view = self.container_size.height
        if size == old:
            return quiet
        if (not quiet or not view or old.width != width
                or (old.height > view) != (total > view)):
            self.virtual_size = size
            return False
        self.set_reactive(LazyLineList.virtual_size, size)
        bar = self.vertical_scrollbar if self.show_vertical_scrollbar else None
        if bar is not None and drawn_thumb(bar, old.height) == drawn_thumb(bar, total):
            # the thumb is drawn the same (at 10k rows a few lines more or less move it by
            # far less than the eighth of a cell it is drawn in): no paint of the bar, whose
            # height is the whole list's and so is every row's
            bar.set_reactive(ScrollBar.window_virtual_size, total)
            self.scroll_y = self.validate_scroll_y(self.scroll_y)
            return True
        self._scroll_update(size)
        return True

    def _repaint_rows(self, before: list[tuple], prior: dict[int, list[Text]], aged: bool,
                      cache: dict[int, Strip], was: int) -> None:
        """Paint again only the rows on screen that show another item, line of it or cursor
        state than before the rebuild (when the view's top was ``was``), or another text (a
        new data object, or a new second of the ages, that reads the same is not painted);
        the others keep their rendered lines."""
        top = self.scroll_offset.y
        after = self._screen_rows() or []
        changed: list[int] = []
        for r in range(max(len(before), len(after))):
            a = before[r] if r < len(before) else None
            b = after[r] if r < len(after) else None
            if (a is None or b is None or a[0] != b[0] or a[2] != b[2] or a[3] != b[3]
                    or (aged or a[1] is not b[1])
                    and not self._reads_the_same(prior.get(a[4]), b[4], a[2])):
                changed.append(r)
            elif (strip := cache.get(was + r)) is not None:
                self._cache[top + r] = strip
        if len(changed) > len(after) // 2:
            self.refresh()  # most of the screen: one full paint
            return
        run: list[int] = []
        for r in changed + [-2]:
            if run and r != run[-1] + 1:
                self.refresh_lines(top + run[0], len(run))
                run = []
            run.append(r)

    def _shown(self) -> list[int]:
        """The items on screen now (and the cursor's), by the current heights."""
        if not self._starts:
            return []
        top = self.scroll_offset.y
        rows = self.scrollable_content_region.height or self.size.height or 1
        lo = max(0, bisect_right(self._starts, top) - 1)
        hi = bisect_right(self._starts, top + rows)
        out = list(range(lo, min(hi, len(self._starts))))
        if 0 <= self._cursor < len(self._starts) and self._cursor not in out:
            out.append(self._cursor)
        return out

    def _ages_moved(self, ages: Any, width: int) -> None:
        """Same items, same order, the ages' second moved: any item may read differently, so
        no built line holds; the shown items are measured again now, the rest in slices, and
        only the rows on screen whose text changed are painted again."""
        self._ages = ages
        before, prior, cache = self._screen_rows(), self._built, self._cache
        self._built, self._cache = {}, {}
        if self._ages_move():
            self._owe(self._keys)
        top = self.scroll_offset.y
        relaid = self._remeasure(self._shown(), width)
        self._start_slices()
        if before is None or relaid or self.scroll_offset.y != top:
            self.refresh()
        else:
            self._repaint_rows(before, prior, True, cache, top)

    def _remeasure(self, items: Sequence[int], width: int) -> bool:
        """Measure these items again (their built lines go) and lay the rows out again if a
        height changed (True; rows above the screen that moved scroll the view by as much:
        what is shown stays put)."""
        keys, data, heights, mh, mdata = self._keys, self._data, self._heights, self._mh, self._mdata
        shown = self._shown()
        top = min(shown) if shown else 0
        shift, moved = 0, False
        for i in items:
            d, k = data[i], keys[i]
            h = max(1, self.measure(d, width))
            mdata[k], mh[k] = d, h
            self._built.pop(i, None)
            if h != heights[i]:
                if i < top:
                    shift += h - heights[i]
                heights[i] = h
                moved = True
        if moved:
            self._relayout(width, shift, everything=True)
        return moved

    def _relayout(self, width: int, shift: int = 0, *, everything: bool = False) -> None:
        """Lay the rows out again from the heights. Rows above the screen that grew or shrank
        by ``shift`` scroll the view by as much, so what is on screen stays put; unless
        ``everything`` (shown items changed), rows on screen keep their cached lines."""
        heights = self._heights
        self._starts = [0, *accumulate(heights)][:-1] if heights else []
        total = sum(heights)
        self._lines = _Lines(self, total)
        self._set_total(width, total, quiet=True)  # what moved on screen is painted below
        if shift and not everything and self._shift_quietly(shift):
            return
        if everything or shift:
            self._cache.clear()
        if shift:
            self.scroll_to(y=max(0, self.scroll_offset.y + shift), animate=False, force=True)
        if everything or shift:
            self.refresh()

    def _shift_quietly(self, shift: int) -> bool:
        """Scroll by ``shift`` rows with no paint, as rows above the screen grew or shrank by
        as much: every row on screen shows what it showed, so its rendered line moves with it
        (a heartbeat-era roster re-lays out off screen about once a second; each of those was a
        whole panel and its scrollbar painted again). False when the view cannot move by
        exactly ``shift`` (at an end) or the list is not laid out: the caller scrolls and
        paints."""
        y = self.scroll_offset.y + shift
        if not self.is_mounted or y < 0 or y > self.max_scroll_y:
            return False
        self._cache = {row + shift: strip for row, strip in self._cache.items()}
        self._scroll_quietly(y)
        return True

    def _scroll_quietly(self, y: int) -> None:
        """Scroll to ``y`` painting nothing of the list (the caller knows what on screen
        changed); the bar is painted only if its thumb moved."""
        self.set_reactive(LazyLineList.scroll_y, float(y))
        self.set_reactive(LazyLineList.scroll_target_y, float(y))
        bar = self.vertical_scrollbar if self.show_vertical_scrollbar else None
        if bar is not None:
            if drawn_thumb(bar, self.virtual_size.height, y) == drawn_thumb(bar, self.virtual_size.height):
                bar.set_reactive(ScrollBar.position, float(y))
            else:
                bar.position = float(y)  # the thumb moved: the bar alone is painted

    def _ages_move(self) -> bool:
        """Count an ages move; True when this one owes every item a measure again."""
        self._ages_moves += 1
        return self._ages_moves % AGES_REMEASURE_EVERY == 0

    def _owe(self, keys: Sequence[Hashable] | None) -> None:
        """Every one of ``keys`` is owed a measure (None: none is)."""
        self._stale = deque(keys or ())
        self._owed = set(self._stale)

    def _owe_one(self, key: Hashable) -> None:
        """``key`` is owed a measure too (once, however often its data changes meanwhile)."""
        if key not in self._owed:
            self._owed.add(key)
            self._stale.append(key)

    def _start_slices(self) -> None:
        if not self._slicing and self._stale:
            self._slicing = True
            self.set_timer(SLICE_GAP_S, self._measure_slice)

    def _measure_slice(self) -> None:
        """Measure stale items for at most ``SLICE_S``, then give the loop back: the ages'
        re-measure of a 10k roster is a few ms at a time, never one long stall. A height that
        changed off screen waits in ``_mh`` and all of them are laid out once, when the queue
        is done (or by the next full rebuild): one layout a second, not one per slice."""
        self._slicing = False
        stale, index = self._stale, self._index
        if not stale or not self.is_mounted:
            return
        end = perf_counter() + SLICE_S
        width = self._built_width
        keys, data, heights, mh, mdata = self._keys, self._data, self._heights, self._mh, self._mdata
        measure = self.measure
        shown = set(self._shown())
        on_screen: list[int] = []
        n = 0
        owed = self._owed
        while stale:
            k = stale.popleft()
            owed.discard(k)
            i = index.get(k)
            if i is None:
                continue
            if i in shown:
                on_screen.append(i)  # measured below, laid out at once if it moved
                continue
            d, k = data[i], keys[i]
            mh[k], mdata[k] = max(1, measure(d, width)), d
            n += 1
            if n % 32 == 0 and perf_counter() > end:
                break
        if on_screen:
            self._remeasure(on_screen, width)  # shown rows are exact at once
        if not stale:
            new = cast("list[int]", list(map(mh.get, keys)))  # nothing stale: every key measured
            if new != heights:
                top = min(shown) if shown else 0
                shift = sum(new[:top]) - sum(heights[:top])
                self._heights = new
                for i in compress(range(len(new)), map(ne, new, heights)):
                    self._built.pop(i, None)
                self._relayout(width, shift)
        self._start_slices()

    def _refresh_changed(self, width: int) -> None:
        """Same items in the same order: measure again only the items whose data object was
        replaced, and repaint only the rows they cover on screen (all rows when a height
        changed, since everything below moves)."""
        data = self.data()
        old = self._data
        if len(data) != len(old):  # an order token that lied: be safe
            self._order = None
            self.rebuild()
            return
        changed = list(compress(range(len(data)), map(is_not, data, old)))
        if not changed:
            return
        self._data = list(data)
        shown = set(self._shown())
        keys, mdata, clocks_only = self._keys, self._mdata, self.clocks_only
        held: set[int] = set()
        for i in changed:  # off screen: measured in slices, keeping its height until then
            k = keys[i]
            if i in shown:
                if self.hold_clocks and k in mdata and clocks_only(mdata[k], data[i]):
                    mdata[k] = data[i]  # on screen, a clocks-only change waits for the ages
                    held.add(i)  # (its built lines stay; they are read again when they move)
                continue
            self._built.pop(i, None)  # its lines are built from the new data when asked for
            if k in mdata and clocks_only(mdata[k], data[i]):
                mdata[k] = data[i]  # as an ages move: its height holds
            else:
                self._owe_one(k)
        changed = [i for i in changed if i in shown and i not in held]
        self._start_slices()
        prior = {i: self._built.get(i) for i in changed}  # the lines they read
        if self._remeasure(changed, width):
            return
        heights = self._heights
        top = self.scroll_offset.y
        bottom = top + (self.scrollable_content_region.height or self.size.height or 1)
        starts, cache = self._starts, self._cache
        for i in changed:
            if all(self._reads_the_same(prior[i], i, k) for k in range(heights[i])):
                continue  # a new data object that reads as the last (a heartbeat): no paint
            a, b = starts[i], starts[i] + heights[i]
            for row in range(a, b):
                cache.pop(row, None)
            if a < bottom and b > top:
                self.refresh_lines(max(a, top), min(b, bottom) - max(a, top))

    def _strip(self, text: Text, cursor: Style | None, width: int, base: Style) -> Strip:
        """As :meth:`LineList._strip`, memoised by a line's content: a rebuild (rows re-sorted,
        ages re-stamped) repaints what moved without rendering again the lines that read
        exactly as before."""
        key = (text.plain, tuple(text.spans), text.style, width, cursor, base)
        strip = self._strips.get(key)
        if strip is None:
            strip = super()._strip(text, cursor, width, base)
            if len(self._strips) >= STRIP_MEMO:
                self._strips.clear()  # bounded: a few screens' worth of distinct lines
            self._strips[key] = strip
        return strip

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def on_theme_changed(self) -> None:
        self._epoch = self._order = None  # every item built again, in the new colours
        self._strips.clear()
        self.rebuild()

    def _move_to(self, index: int) -> None:
        """As :meth:`LineList._move_to`, but only the rows of the item the cursor leaves and the
        one it lands on are repainted (the rest of the Strip cache stays valid, scrolled or not):
        a j/k on a full roster is two items' rows, not a whole panel."""
        if not self._items:
            return
        index = max(0, min(len(self._items) - 1, index))
        old = self._cursor
        self._cursor = index
        self.cursor_key = self._keys[index]
        for i in {old, index}:
            if 0 <= i < len(self._starts):
                a = self._starts[i]
                for row in range(a, a + self._heights[i]):
                    self._cache.pop(row, None)
        start = self._starts[index]
        end = start + self._heights[index]
        height = self.scrollable_content_region.height or 1
        top = self.scroll_offset.y
        if start < top:
            self.scroll_to(y=start, animate=False, force=True)
            self.refresh()
        elif end > top + height:
            self.scroll_to(y=min(start, end - height), animate=False, force=True)
            self.refresh()
        else:
            for i in {old, index}:
                if 0 <= i < len(self._starts):
                    self.refresh_lines(self._starts[i], self._heights[i])
        self.on_cursor_moved()

    def _reads_the_same(self, old: list[Text] | None, i: int, line: int) -> bool:
        """Line ``line`` of item ``i`` as built now is ``old[line]``, to the cell."""
        if old is None or line >= len(old):
            return False
        new = self._item_lines(i)
        if line >= len(new):
            return False
        a, b = old[line], new[line]
        return a.plain == b.plain and a.spans == b.spans and a.style == b.style

    def _item_lines(self, i: int) -> list[Text]:
        lines = self._built.get(i)
        if lines is None:
            lines = self.lines_of(self._data[i], self._built_width) or [Text("")]
            self._built[i] = lines
        return lines
