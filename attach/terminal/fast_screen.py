"""A pyte ``Screen`` with fast paths for what a pty mostly sends, and the same screen state.

pyte spends ~1 µs per printed character (a namedtuple ``_replace`` and a ``wcwidth`` call each)
and rebuilds its attributes on every SGR. Profiled on recorded ``ls -laR`` and vim sessions,
``draw`` was 80 % of the time, then ``index`` (scrolling), ``select_graphic_rendition`` and the
erases. :class:`FastScreen` overrides exactly those, each with pyte 0.8.2's semantics:

- ``draw``: a run of printable ASCII is written a line at a time (``dict.update`` with shared,
  cached ``Char`` cells; namedtuples are immutable, so sharing is safe), wrapping where pyte
  wraps; anything else (wide, combining, unprintable, insert mode) takes a per-character loop
  that copies pyte's, with cached widths and cells — including its quirk of dropping the rest of
  the run at the first character it cannot print;
- ``index``: the scroll moves rows with one ``dict.update`` instead of a Python loop, and the
  row scrolled off is emptied and reused as the new bottom row (a flood no longer makes a
  garbage-collected dict per line: those pushed the console into frequent full collections);
- ``select_graphic_rendition``: memoised on (pen, parameters, DECSCNM);
- ``erase_in_line`` / ``erase_in_display``: ``dict.update`` over the same cells pyte touches.

``tests/test_mirror_fast.py`` feeds recordings and generated streams to this and to bare pyte
and compares every cell, the cursor and the dirty rows.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

import pyte
from pyte import charsets as _cs
from pyte import modes as _mo
from pyte.screens import Char, StaticDefaultDict
from wcwidth import wcwidth

__all__ = ["FastScreen"]

_DECAWM, _IRM, _DECSCNM = _mo.DECAWM, _mo.IRM, _mo.DECSCNM
_IDENTITY = _cs.LAT1_MAP  # translate() with it changes nothing
_SGR_CACHE_MAX = 4096
_CELL_CACHES_MAX = 512
_ASCII_RUN = re.compile(r"[ -~]+")
_OTHER_RUN = re.compile(r"[^ -~]+")


class _Widths(dict):
    def __missing__(self, ch: str) -> int:
        w = self[ch] = wcwidth(ch)
        return w


_WIDTH = _Widths()


class _Cells(dict):
    """``attrs._replace(data=ch)`` for one pen, memoised per character."""

    __slots__ = ("attrs",)

    def __init__(self, attrs: Char) -> None:
        super().__init__()
        self.attrs = attrs

    def __missing__(self, ch: str) -> Char:
        c = self[ch] = self.attrs._replace(data=ch)
        return c


def _printable_ascii(s: str) -> bool:
    return s.isascii() and s.isprintable()


class FastScreen(pyte.Screen):
    """``pyte.Screen`` with fast paths; every cell, the cursor and ``dirty`` end as pyte's would."""

    def __init__(self, columns: int, lines: int) -> None:
        self.scrolled = 0  # lines scrolled off the top by ``index`` (a renderer's flood gauge)
        # a callable given each whole-screen row that scrolls off the top (scrollback), or None
        self.on_scroll_off: Callable[[StaticDefaultDict[int, Char] | None], None] | None = None
        self._cells_for: dict[Char, _Cells] = {}
        self._cells: _Cells | None = None
        self._sgr: dict[tuple, Char] = {}
        super().__init__(columns, lines)

    def _pen_cells(self, attrs: Char) -> _Cells:
        cells = self._cells
        if cells is None or cells.attrs is not attrs:
            cells = self._cells_for.get(attrs)
            if cells is None:
                if len(self._cells_for) >= _CELL_CACHES_MAX:
                    self._cells_for.clear()
                cells = self._cells_for[attrs] = _Cells(attrs)
            self._cells = cells
        return cells

    # ------------------------------------------------------------------ text

    def draw(self, data: str) -> None:
        table = self.g1_charset if self.charset else self.g0_charset
        if table is not _IDENTITY:
            data = data.translate(table)
        cursor = self.cursor
        x = cursor.x
        n = len(data)
        if x + n <= self.columns and data.isascii() and data.isprintable() and _IRM not in self.mode:
            # the commonest case, inline: it fits on the line, so no wrap either way
            cells = self._cells
            if cells is None or cells.attrs is not cursor.attrs:
                cells = self._pen_cells(cursor.attrs)
            self.buffer[cursor.y].update(zip(range(x, x + n), map(cells.__getitem__, data)))
            cursor.x = x + n
            self.dirty.add(cursor.y)
            return
        if not data:
            pass
        elif _IRM in self.mode or cursor.x > self.columns:
            self._draw_chars(data)
        elif _printable_ascii(data):
            self._draw_ascii(data)
        elif len(data) < 48:
            self._draw_chars(data)
        else:
            i, n = 0, len(data)
            ascii_run, other_run = _ASCII_RUN.match, _OTHER_RUN.match
            while i < n:
                m = ascii_run(data, i)
                if m is not None:
                    i = m.end()
                    self._draw_ascii(m.group())
                    continue
                m = other_run(data, i)
                assert m is not None  # data[i] is no printable ASCII: it starts an other run
                i = m.end()
                if not self._draw_chars(m.group()):
                    break  # pyte stops the whole run at a character it cannot print
        self.dirty.add(cursor.y)

    def _draw_ascii(self, data: str) -> None:
        """Width-1 characters only, not in insert mode, cursor.x <= columns."""
        cursor = self.cursor
        columns = self.columns
        cells = self._pen_cells(cursor.attrs)
        x = cursor.x
        n = len(data)
        if _DECAWM not in self.mode:
            line = self.buffer[cursor.y]
            if x == columns:
                x -= 1
            k = min(n, columns - x)
            line.update(zip(range(x, x + k), map(cells.__getitem__, data[:k])))
            if k < n:  # the rest lands, one over the other, in the last column
                line[columns - 1] = cells[data[-1]]
            cursor.x = min(x + k, columns) if k == n else columns
            return
        i = 0
        while i < n:
            if x == columns:
                self.dirty.add(cursor.y)
                cursor.x = x
                self.carriage_return()
                self.linefeed()
                x = cursor.x
            k = min(n - i, columns - x)
            line = self.buffer[cursor.y]
            if k == 1:
                line[x] = cells[data[i]]
            else:
                line.update(zip(range(x, x + k), map(cells.__getitem__, data[i:i + k])))
            x += k
            i += k
        cursor.x = x

    def _draw_chars(self, data: str) -> bool:
        """pyte's per-character loop (the cursor column kept in a local); False where pyte
        would ``break``."""
        cursor = self.cursor
        columns = self.columns
        mode = self.mode
        autowrap = _DECAWM in mode
        insert = _IRM in mode
        widths = _WIDTH
        cells = self._pen_cells(cursor.attrs)
        x = cursor.x
        line = self.buffer[cursor.y]
        for char in data:
            w = widths[char]
            if x == columns:
                if autowrap:
                    self.dirty.add(cursor.y)
                    cursor.x = x
                    self.carriage_return()
                    self.linefeed()
                    x = cursor.x
                    line = self.buffer[cursor.y]
                elif w > 0:
                    x -= w
            if insert and w > 0:
                cursor.x = x
                self.insert_characters(w)
                line = self.buffer[cursor.y]
            if w == 1:
                line[x] = cells[char]
            elif w == 2:
                line[x] = cells[char]
                if x + 1 < columns:
                    line[x + 1] = cells[""]
            elif w == 0 and unicodedata.combining(char):
                if x:
                    last = line[x - 1]
                    line[x - 1] = last._replace(data=unicodedata.normalize("NFC", last.data + char))
                elif cursor.y:
                    prev = self.buffer[cursor.y - 1]
                    last = prev[columns - 1]
                    prev[columns - 1] = last._replace(data=unicodedata.normalize("NFC", last.data + char))
            else:
                cursor.x = x
                return False
            if w > 0:
                x = min(x + w, columns)
        cursor.x = x
        return True

    # ------------------------------------------------------------------ scrolling

    def index(self) -> None:
        margins = self.margins
        top, bottom = (0, self.lines - 1) if margins is None else margins
        if self.cursor.y == bottom:
            self.scrolled += 1
            self.dirty.update(range(self.lines))
            buf = self.buffer
            gone = buf.get(top)
            if top == 0 and self.on_scroll_off is not None:
                self.on_scroll_off(gone)
            # the same sequence of reads and writes as pyte's loop (a missing row is created)
            buf.update(zip(range(top, bottom), map(buf.__getitem__, range(top + 1, bottom + 1))))
            if gone is not None and gone.default == self.default_char:
                gone.clear()  # the row scrolled off comes back as the new blank bottom row:
                buf[bottom] = gone  # the same empty line pyte would make, without a new object
            else:
                buf.pop(bottom, None)
        else:
            self.cursor_down()

    # ------------------------------------------------------------------ attributes

    def select_graphic_rendition(self, *attrs: int) -> None:
        key = (self.cursor.attrs, attrs, _DECSCNM in self.mode)
        hit = self._sgr.get(key)
        if hit is not None:
            self.cursor.attrs = hit
            return
        super().select_graphic_rendition(*attrs)
        if len(self._sgr) >= _SGR_CACHE_MAX:
            self._sgr.clear()
        self._sgr[key] = self.cursor.attrs

    # ------------------------------------------------------------------ erasing

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        cursor = self.cursor
        if how == 0:
            interval = range(cursor.x, self.columns)
        elif how == 1:
            interval = range(cursor.x + 1)
        elif how == 2:
            interval = range(self.columns)
        else:
            super().erase_in_line(how, private)  # pyte raises here; keep its behaviour
            return
        self.dirty.add(cursor.y)
        self.buffer[cursor.y].update(dict.fromkeys(interval, cursor.attrs))

    def erase_in_display(self, how: int = 0, *args: object, **kwargs: object) -> None:
        if how == 0:
            interval = range(self.cursor.y + 1, self.lines)
        elif how == 1:
            interval = range(self.cursor.y)
        elif how in (2, 3):
            interval = range(self.lines)
        else:
            super().erase_in_display(how, *args, **kwargs)
            return
        self.dirty.update(interval)
        attrs = self.cursor.attrs
        buf = self.buffer
        for y in interval:
            line = buf[y]
            if line:
                line.update(dict.fromkeys(line, attrs))
        if how == 0 or how == 1:
            self.erase_in_line(how)
