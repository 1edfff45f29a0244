"""A Line-API list of multi-line items with a cursor: the base of the roster, rail and panes.

Subclasses implement :meth:`build` (width -> items of pre-wrapped ``Text`` lines); the list
keeps the cursor on the same item key across rebuilds, renders only visible rows, and caches
Strips by row until the next rebuild or style change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Hashable

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from widgets.presentation import follow_theme

Item = tuple[Hashable, list[Text]]


class LineList(ScrollView, can_focus=True, inherit_bindings=False):
    """Items of one or more lines; ``j``/``k`` walk items, Enter selects one."""

    DEFAULT_CSS = """
    LineList {
        padding-right: 1;
        background: $surface;
        overflow-x: hidden;
        scrollbar-size-vertical: 1;
    }
    LineList > .line-list--cursor { background: $boost; }
    LineList:focus > .line-list--cursor { background: $accent 35%; }
    """
    COMPONENT_CLASSES = {"line-list--cursor"}
    BINDINGS = [
        Binding("down,j", "cursor(1)", "next", id="list.down", show=False),
        Binding("up,k", "cursor(-1)", "previous", id="list.up", show=False),
        Binding("pagedown", "page(1)", "page down", id="list.page-down", show=False),
        Binding("pageup", "page(-1)", "page up", id="list.page-up", show=False),
        Binding("home,g", "edge(0)", "first", id="list.first", show=False),
        Binding("end,G", "edge(1)", "last", id="list.last", show=False),
        Binding("enter", "select", "open", id="list.select"),
    ]

    class Selected(Message):
        """Enter on an item (``key`` as given by :meth:`build`)."""

        def __init__(self, widget: "LineList", key: Hashable) -> None:
            super().__init__()
            self.widget = widget
            self.key = key

        @property
        def control(self) -> "LineList":
            return self.widget

    show_cursor = True
    empty_text = ""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        # sequences, not lists: the lazy list (lazy_list.py) builds them on access
        self._items: Sequence[Item] = []
        self._lines: Sequence[tuple[Text, int]] = []  # (line, item index)
        self._starts: list[int] = []
        self._cache: dict[int, Strip] = {}
        self.cursor_key: Hashable | None = None
        self._cursor = 0
        self._built_width = -1

    # -- content -------------------------------------------------------------------------

    def build(self, width: int) -> list[Item]:  # pragma: no cover - subclasses
        return []

    @property
    def content_width(self) -> int:
        return max(1, self.scrollable_content_region.width or self.size.width or 1)

    def rebuild(self) -> None:
        """Recompute items at the current width (call after the data changed)."""
        width = self.content_width
        self._built_width = width
        items = self.build(width)
        self._items = items
        lines: list[tuple[Text, int]] = []
        starts: list[int] = []
        for i, (_key, item_lines) in enumerate(items):
            starts.append(len(lines))
            for t in item_lines or [Text("")]:
                lines.append((t, i))
        if not items and self.empty_text:
            lines.append((Text(self.empty_text, style="dim italic"), -1))
        self._lines = lines
        self._starts = starts
        self._cache.clear()
        # keep the cursor on the same item
        keys = [k for k, _ in items]
        if self.cursor_key in keys:
            self._cursor = keys.index(self.cursor_key)
        else:
            self._cursor = min(self._cursor, max(0, len(items) - 1))
            self.cursor_key = keys[self._cursor] if keys else None
        self.virtual_size = Size(width, len(lines))
        self.refresh()

    @property
    def items(self) -> Sequence[Item]:
        return self._items

    def line_texts(self) -> list[str]:
        """Plain text of every line (tests and tmux-free assertions)."""
        return [t.plain for t, _ in self._lines]

    def on_resize(self) -> None:
        self._rewrap()

    def watch_show_vertical_scrollbar(self, _old: bool, _new: bool) -> None:
        # The scrollbar came or went without a resize: the lines were wrapped and cut for the
        # other width, so wrap them again once the layout settles (one rebuild; the new width
        # cannot bring the scrollbar back: narrower only adds lines, wider only removes them).
        self.call_after_refresh(self._rewrap)

    def _rewrap(self) -> None:
        if self.content_width != self._built_width:
            self.rebuild()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def on_mount(self) -> None:
        # Items are Text built with the theme's colours (presentation.look_of): a new theme
        # builds them again, even when no CSS value of this widget changed.
        follow_theme(self, self.on_theme_changed)

    def on_theme_changed(self) -> None:
        self.rebuild()

    # -- rendering -----------------------------------------------------------------------

    _paint_base: Style | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        # one paint reads the widget's style once, not once per line (``rich_style`` walks
        # every ancestor's styles: at 10k agents a tenth of a roster paint)
        self._paint_base = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._paint_base = None

    def render_line(self, y: int) -> Strip:
        row = self.scroll_offset.y + y
        strip = self._cache.get(row)
        if strip is not None:
            return strip
        width = self.size.width
        base = self._paint_base or self.rich_style
        if row >= len(self._lines):
            return Strip.blank(width, base)
        text, item = self._lines[row]
        cursor = (self.get_component_rich_style("line-list--cursor")
                  if self.show_cursor and item == self._cursor and self._items else None)
        strip = self._cache[row] = self._strip(text, cursor, width, base)
        return strip

    def _strip(self, text: Text, cursor: Style | None, width: int, base: Style) -> Strip:
        """One line: ``text`` cropped to ``width``, the ``cursor`` style over it, then ``base``."""
        strip = Strip(list(text.render(self.app.console, end=""))).crop_extend(0, width, None)
        if cursor is not None:
            strip = strip.apply_style(cursor)
        return strip.apply_style(base)

    # -- cursor --------------------------------------------------------------------------

    def _move_to(self, index: int) -> None:
        if not self._items:
            return
        index = max(0, min(len(self._items) - 1, index))
        self._cursor = index
        self.cursor_key = self._items[index][0]
        self._cache.clear()
        self.scroll_to_cursor()
        self.refresh()
        self.on_cursor_moved()

    def scroll_to_cursor(self) -> None:
        """Scroll just enough for the cursor's item to show (after a re-sort moved it)."""
        if not self._items or not self._starts:
            return
        i = min(self._cursor, len(self._starts) - 1)
        start = self._starts[i]
        end = self._starts[i + 1] if i + 1 < len(self._starts) else len(self._lines)
        height = self.scrollable_content_region.height or 1
        top = self.scroll_offset.y
        if start < top:
            self.scroll_to(y=start, animate=False, force=True)
        elif end > top + height:
            self.scroll_to(y=min(start, end - height), animate=False, force=True)

    def on_cursor_moved(self) -> None:
        """Hook for panes that follow the cursor."""

    def action_cursor(self, delta: int) -> None:
        self._move_to(self._cursor + delta)

    def action_page(self, direction: int) -> None:
        height = max(1, (self.scrollable_content_region.height or 2) - 1)
        target_line = self._starts[self._cursor] + direction * height if self._starts else 0
        idx = self._cursor
        for i, s in enumerate(self._starts):
            if (direction > 0 and s <= target_line) or (direction < 0 and s <= max(0, target_line)):
                idx = i
        self._move_to(idx)

    def action_edge(self, last: int) -> None:
        self._move_to(len(self._items) - 1 if last else 0)

    def action_select(self) -> None:
        if self._items:
            self.post_message(self.Selected(self, self._items[self._cursor][0]))

    @property
    def cursor_index(self) -> int:
        return self._cursor

    @property
    def item_starts(self) -> Sequence[int]:
        """The first row of each item (read-only; what tests and diagnostics read)."""
        return self._starts

    def move_cursor(self, index: int) -> None:
        """Put the cursor on item ``index``, as keys do (clamped; scrolls to show it)."""
        self._move_to(index)

    def select_key(self, key: Any) -> None:
        for i, (k, _) in enumerate(self._items):
            if k == key:
                self._move_to(i)
                return

