"""A terminal's scrollback: the lines that scrolled off the top of its main screen, bounded.

The mirror (:mod:`attach.terminal.mirror`) hands each whole-screen row that leaves the top to
:meth:`Scrollback.push` (never on the alternate screen: full-screen programs have no
scrollback, and never inside a scroll region). Lines are kept as text, at most ``max_lines`` of
them and at most ``max_bytes`` of text, oldest dropped first. What the pane did not see is said
in the history itself — a line ``— 3.2 MB skipped —`` where a flood was skipped, ``— new session
19:02:11 —`` where a re-attach repainted — so scrolling back never pretends continuity.
``started`` says where the history starts (the time the pane first attached) for the pane's
header: a late attach has only what it saw since.

No Textual or Rich import (the attach layer).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Iterator
from functools import lru_cache
from operator import attrgetter
from typing import Protocol

DEFAULT_LINES = 10_000
DEFAULT_BYTES = 8 * 1024 * 1024
NOTE_PREFIX = "\u2014 "  # "— ": a line the history wrote itself (a gap, a new session)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


class Cell(Protocol):
    """A mirror cell: the text it shows."""

    @property
    def data(self) -> str: ...


class Row(Protocol):
    """A mirror row: column -> cell (pyte's ``StaticDefaultDict[int, Char]``: a missing column
    reads as the default cell)."""

    def __getitem__(self, column: int, /) -> Cell: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[int]: ...
    def values(self) -> Iterable[Cell]: ...


_DATA = attrgetter("data")


@lru_cache(maxsize=64)
def _columns(n: int) -> list[int]:
    return list(range(n))


def row_text(row: Row, cols: int) -> str:
    """The text of a row's first ``cols`` cells, trailing blanks cut. A row written left to
    right from column 0 (the usual line of output) is read in one pass in C; any other shape
    cell by cell. At 2 MB of log lines the cell-by-cell read was half of what a pane cost."""
    n = len(row)
    get = row.__getitem__
    if n <= cols and list(row) == _columns(n):  # columns 0..n-1, in order
        text = "".join(map(_DATA, row.values()))
        if n < cols and (blank := get(n).data) != " ":  # the rest read as the default cell
            text += blank * (cols - n)  # (blanks would be cut below anyway)
    else:
        text = "".join(get(x).data for x in range(cols))
    return text.rstrip()


class Scrollback:
    """Bounded lines of history (text), with the notes that mark gaps."""

    def __init__(self, max_lines: int = DEFAULT_LINES, max_bytes: int = DEFAULT_BYTES) -> None:
        self.max_lines = max(0, int(max_lines))
        self.max_bytes = max(0, int(max_bytes))
        self.lines: deque[str] = deque()
        self.bytes = 0
        self.dropped = 0  # lines forgotten to stay within the bounds
        self.pushed = 0  # lines ever pushed (notes included)
        self.started = time.time()
        self.notes: list[int] = []  # ``pushed`` ordinals of the notes (for tests)
        self.cols = 0  # the width of the rows pushed (for a block selection's right edge)

    def __len__(self) -> int:
        return len(self.lines)

    def push_row(self, row: Row | None, cols: int) -> None:
        """A mirror row (column -> cell with ``.data``) that scrolled off; ``None``: blank."""
        if self.max_lines == 0:
            return
        if row is None:
            text = ""
        else:
            text = row_text(row, cols)
        self.cols = cols
        self.push(text)

    def push(self, text: str) -> None:
        if self.max_lines == 0:
            return
        lines = self.lines
        lines.append(text)
        self.bytes += len(text) + 1
        self.pushed += 1
        while lines and (len(lines) > self.max_lines or self.bytes > self.max_bytes):
            self.bytes -= len(lines.popleft()) + 1
            self.dropped += 1

    def note(self, text: str) -> None:
        """A line of the history's own (a gap, a new session)."""
        self.push(NOTE_PREFIX + text + " \u2014")
        self.notes.append(self.pushed)

    def gap(self, skipped_bytes: int) -> None:
        if skipped_bytes > 0:
            self.note(f"{human_bytes(skipped_bytes)} skipped")

    def header(self, alt: bool = False) -> str:
        """Where this history starts, for the pane's copy-mode header."""
        if alt:
            return "full-screen program (alternate screen): no scrollback, this is the current screen"
        since = time.strftime("%H:%M:%S", time.localtime(self.started))
        lost = f", {self.dropped} older lines dropped (bound {self.max_lines} lines)" if self.dropped else ""
        return f"history from {since} (attached){lost}"
