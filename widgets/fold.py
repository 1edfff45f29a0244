"""Long message bodies fold: a feed-like row shows at most ``max_lines`` body lines, then one
dim line ``… +38 lines · Enter`` (the detail card shows it all).

The count is of wrapped display lines at the row's width. It is exact for the part of a body
the feed lays out (:func:`body_cap`: a few screens of text); what lies beyond is counted
cheaply, without wrapping it (line breaks, then each line's cells over the width; word wrap
may take a few more rows), and the line then says ``+≈``. That count is width-independent work
done once per body, so a resize or a repaint of a 64 kB body (the most the ring keeps) costs
what its first few kB do, however hostile: one line of 100k characters, 50k newlines,
controls, invisibles, wide characters.
"""

from __future__ import annotations

import re
from collections import Counter, OrderedDict
from collections.abc import Hashable

from rich.cells import cell_len

from meshview.wire import sanitize

#: body lines a row shows before it folds: a short paragraph or a handful of list items reads
#: whole, while a team of forty still gets ~5 rows on a 42-row screen when each says a lot
DEFAULT_MAX_LINES = 6
MAX_LINES_LIMIT = 1000  # ``[feed] max_lines`` above this is refused (a screen is < 1000 rows)
#: at least this much of a body is laid out exactly (the feed's old cap on a row's body)
BODY_CAP = 4000
#: the wire's line breaks as ``sanitize.text`` keeps them (the others are escaped inline)
_BREAKS = re.compile("[\n\x85\u2028\u2029]")
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # shown as \xNN: four cells each
#: characters of a tail measured; a longer one is counted in proportion (a flood of 64 kB
#: bodies of invisibles then costs ~4 ms a row, not ~20)
TAIL_SAMPLE = 16 * 1024
TAIL_ROWS = 1024  # bodies whose tail widths a view keeps: the ring holds at most 1024 full ones


def body_cap(max_lines: int, width: int) -> int:
    """How many characters of a body are laid out exactly: enough for ``max_lines`` + 1 rows
    at ``width`` (a row holds at most ``width`` characters of printable text) and never less
    than :data:`BODY_CAP`."""
    return max(BODY_CAP, (max_lines + 2) * max(1, width))


def fold_label(hidden: int, approx: bool, room: int | None = None) -> str:
    """``… +38 lines · Enter`` (``+≈`` when the count is an estimate); the key hint goes
    first when ``room`` cells are too few, so the count is never cut."""
    said = f"… +{'≈' if approx else ''}{hidden} line{'' if hidden == 1 else 's'}"
    return said if room is not None and len(said) + 8 > room else said + " · Enter"


def line_cells(tail: str) -> Counter[int]:
    """How many lines of a tail have each width in cells, as shown (controls and invisibles
    escaped: :func:`meshview.wire.sanitize.text`). A multiset: a 64 kB text has at most ~360
    distinct line widths."""
    if tail.isascii() and tail.replace("\n", "").isprintable():  # the common case, at C speed
        return Counter(map(len, tail.split("\n")))
    out: Counter[int] = Counter()
    for line in _BREAKS.split(tail):
        if line.isascii():
            n = len(line)
            if not line.isprintable():
                n += 3 * len(_ASCII_CONTROL.findall(line))
            out[n] += 1
        else:  # invisibles, bidi and C1 controls are shown escaped: measured as shown
            out[cell_len(sanitize.text(line, indent=""))] += 1
    return out


class TailCounter:
    """Counts the rows of bodies' tails (the part after what is laid out) without wrapping:
    each line takes ``ceil(cells / width)`` rows, at least one; past :data:`TAIL_SAMPLE`
    characters in proportion. Word wrap can take a few more, so the fold line says ``≈``. The per-line widths of the last :data:`TAIL_ROWS` bodies are
    kept as a multiset of line widths, so a resize costs a few hundred integers per row, not its
    text."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Hashable, tuple[str, int, Counter[int], float]] = OrderedDict()

    def rows(self, key: Hashable, text: str, start: int, width: int) -> int:
        """Rows of ``text[start:]`` at ``width``; ``key`` names the body (a feed index, a DM's
        sender and id)."""
        hit = self._kept.get(key)
        if hit is not None and hit[0] is text and hit[1] == start:
            self._kept.move_to_end(key)
            cells, scale = hit[2], hit[3]
        else:
            sample = text[start:start + TAIL_SAMPLE]
            cells = line_cells(sample)
            scale = (len(text) - start) / max(1, len(sample))
            self._kept[key] = (text, start, cells, scale)
            if len(self._kept) > TAIL_ROWS:
                self._kept.popitem(last=False)
        w = max(1, width)
        return round(sum(((c + w - 1) // w or 1) * k for c, k in cells.items()) * scale)
