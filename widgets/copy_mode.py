"""Copy mode's state for a terminal pane: a frozen view of history + screen, a cursor, a
selection and a search — pure logic, drawn by :class:`widgets.terminal_pane.TerminalPane`.

Entered from a pane (PgUp or the wheel in a peek, the detach key then ``[`` in an attached pane),
it holds the lines as they were at entry (``history`` lines then the screen's), so output that
keeps arriving never moves what the operator reads; leaving it shows the live tail again.

Keys are the ones tmux's and less's users expect: ``j``/``k``/arrows move, PgUp/PgDn, ``ctrl+u``/
``ctrl+d`` half pages, ``g``/``G`` top/bottom, ``0``/``$`` line start/end, ``/`` and ``?`` search
forward/back (``n``/``N`` next/previous), ``v`` selects lines, ``ctrl+v`` a block, ``y`` yanks
(the selection, else the cursor line) to a file, ``Y`` also to the system clipboard (OSC 52:
only on that explicit key — the mesh never drives the clipboard), ``q``/Esc back to live.

Searching is budgeted: :meth:`CopyMode.search_slice` scans a bounded number of lines per call
and the pane yields to the event loop between calls.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

SEARCH_SLICE = 2000  # lines scanned per call before the pane yields to the loop


@dataclass
class Selection:
    kind: str  # "line" | "block"
    row: int
    col: int


@dataclass
class CopyMode:
    lines: list[str]
    height: int  # rows of the view (the status row excluded)
    header: str = ""
    alt: bool = False
    row: int = 0  # cursor line (index into lines)
    col: int = 0
    top: int = 0  # first line shown
    sel: Selection | None = None
    query: str = ""
    forward: bool = True
    matches: list[tuple[int, int]] = field(default_factory=list)  # (line, column), in order
    match_i: int = -1
    prompt: str | None = None  # "/" or "?" while the query is typed
    typed: str = ""
    message: str = ""
    _scan: int = 0  # next line the running search scans
    searching: bool = False

    @classmethod
    def open(cls, history: list[str], screen: list[str], height: int, *, header: str,
             alt: bool, cursor_row: int) -> "CopyMode":
        lines = list(history) + list(screen)
        cm = cls(lines, max(1, height), header=header, alt=alt)
        cm.row = max(0, min(len(lines) - 1, len(history) + cursor_row))
        cm.top = max(0, len(lines) - cm.height)
        cm._keep_visible()
        cm.message = header
        return cm

    # -- moving ----------------------------------------------------------------------------

    def _keep_visible(self) -> None:
        n = len(self.lines)
        self.row = max(0, min(self.row, n - 1))
        if self.row < self.top:
            self.top = self.row
        elif self.row >= self.top + self.height:
            self.top = self.row - self.height + 1
        self.top = max(0, min(self.top, max(0, n - self.height)))
        self.col = max(0, self.col)

    def move(self, dy: int) -> None:
        self.row += dy
        self._keep_visible()

    def move_x(self, dx: int) -> None:
        self.col = max(0, self.col + dx)

    def page(self, pages: float) -> None:
        step = max(1, int(self.height * abs(pages)))
        d = step if pages > 0 else -step
        self.top = max(0, min(self.top + d, max(0, len(self.lines) - self.height)))
        self.row += d
        self._keep_visible()

    def to_top(self) -> None:
        self.row = 0
        self._keep_visible()

    def to_bottom(self) -> None:
        self.row = len(self.lines) - 1
        self._keep_visible()

    def line_start(self) -> None:
        self.col = 0

    def line_end(self) -> None:
        self.col = max(0, len(self.lines[self.row]) - 1) if self.lines else 0

    # -- selection and yank ----------------------------------------------------------------

    def toggle_select(self, kind: str) -> None:
        if self.sel is not None and self.sel.kind == kind:
            self.sel = None
        else:
            self.sel = Selection(kind, self.row, self.col)

    def selected_rows(self) -> tuple[int, int]:
        if self.sel is None:
            return self.row, self.row
        return min(self.sel.row, self.row), max(self.sel.row, self.row)

    def selected_cols(self) -> tuple[int, int] | None:
        """A block selection's columns (inclusive), or None for lines."""
        if self.sel is None or self.sel.kind != "block":
            return None
        return min(self.sel.col, self.col), max(self.sel.col, self.col)

    def selected_text(self) -> str:
        """The selection (lines, or a block's columns), else the cursor's line; trailing
        spaces of each line trimmed, lines joined with newlines."""
        a, b = self.selected_rows()
        cols = self.selected_cols()
        out = []
        for line in self.lines[a:b + 1]:
            out.append((line[cols[0]:cols[1] + 1] if cols else line).rstrip())
        return "\n".join(out)

    def in_selection(self, row: int, x: int) -> bool:
        if self.sel is None:
            return False
        a, b = self.selected_rows()
        if not a <= row <= b:
            return False
        cols = self.selected_cols()
        return cols is None or cols[0] <= x <= cols[1]

    # -- search ----------------------------------------------------------------------------

    def start_search(self, query: str, forward: bool) -> None:
        self.query, self.forward = query, forward
        self.matches, self.match_i = [], -1
        self._scan = 0
        self.searching = bool(query)
        if not query:
            self.message = "empty search"

    def search_slice(self, budget: int = SEARCH_SLICE) -> bool:
        """Scan up to ``budget`` more lines for the query (case-insensitive unless it has
        capitals, as in less/vim smartcase); True when the scan is complete."""
        if not self.searching:
            return True
        q = self.query
        fold = q == q.lower()
        if fold:
            q = q.lower()
        lines, end = self.lines, min(len(self.lines), self._scan + budget)
        found = self.matches
        for i in range(self._scan, end):
            line = lines[i].lower() if fold else lines[i]
            j = line.find(q)
            while j >= 0:
                found.append((i, j))
                j = line.find(q, j + 1)
        self._scan = end
        if end >= len(lines):
            self.searching = False
            self._jump(self.forward, from_cursor=True)
            return True
        return False

    def _jump(self, forward: bool, *, from_cursor: bool = False) -> None:
        m = self.matches
        if not m:
            self.message = f"not found: {self.query}"
            self.match_i = -1
            return
        here = (self.row, self.col if not from_cursor else (self.col - 1 if forward else self.col + 1))
        if forward:
            i = next((k for k, p in enumerate(m) if p > here), None)
            wrapped = i is None
            i = 0 if i is None else i
        else:
            i = next((k for k in range(len(m) - 1, -1, -1) if m[k] < here), None)
            wrapped = i is None
            i = len(m) - 1 if i is None else i
        self.match_i = i
        self.row, self.col = m[i]
        self._keep_visible()
        # the match mid-view, as less does
        self.top = max(0, min(self.row - self.height // 2, max(0, len(self.lines) - self.height)))
        wrap = " (wrapped)" if wrapped and not from_cursor else ""
        self.message = f"match {i + 1}/{len(m)}: {self.query}{wrap}"

    def next_match(self, reverse: bool = False) -> None:
        if not self.query:
            self.message = "no search yet: / or ?"
            return
        if self.searching:
            self.message = "searching…"
            return
        self._jump(self.forward != reverse)

    def match_kinds(self, row: int, width: int) -> list[int]:
        """Per column of ``row`` (up to ``width``): 0 no match, 1 a match, 2 the current match.
        One pass over the row's matches (found by bisection), not one per column."""
        kinds = [0] * width
        if not self.matches or not self.query:
            return kinds
        n = len(self.query)
        m = self.matches
        i = bisect.bisect_left(m, (row, -1))
        while i < len(m) and m[i][0] == row:
            kind = 2 if i == self.match_i else 1
            for x in range(m[i][1], min(width, m[i][1] + n)):
                kinds[x] = max(kinds[x], kind)
            i += 1
        return kinds

    def status(self) -> str:
        if self.prompt is not None:
            return f"{self.prompt}{self.typed}"
        sel = f"  {self.sel.kind} select" if self.sel else ""
        where = f"line {self.row + 1}/{len(self.lines)}"
        return (f" COPY  {where}{sel}  {self.message}  ·  / ? search  n N  v ^v select  y yank  "
                "Y clipboard  q back")
