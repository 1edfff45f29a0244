"""Neutralize untrusted wire text before it reaches a terminal or a log line.

Every string from the wire (names, roles, channels, message text, activity, condition
messages) may carry terminal control sequences or bidi overrides that rewrite what the
operator sees. They are escaped *visibly* (``\\x1b``, ``\\u202e``) so an attack shows up as
text instead of acting. JSON output does not use this: it keeps the exact text (JSON string
escaping already makes controls inert).
"""

from __future__ import annotations

import re
import unicodedata

# C0 (minus \n, handled per mode), DEL, C1.
_CONTROLS = [c for c in range(0x00, 0x20) if c != 0x0A] + [0x7F] + list(range(0x80, 0xA0))
# Bidi embeddings/overrides/isolates and marks that reorder what follows them.
_BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
# Invisible characters that can hide or join text in confusing ways.
_INVISIBLE = [0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD]
_LINE_SEPS = [0x2028, 0x2029, 0x0085]


def _esc(cp: int) -> str:
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


_TABLE: dict[int, str] = {cp: _esc(cp) for cp in (*_CONTROLS, *_BIDI, *_INVISIBLE)}
_TABLE[0x09] = " "  # a tab is harmless but breaks column layout: one space
_TABLE[0x0085] = "\n"  # NEL (C1) is a line break
_TABLE[0x2028] = "\n"
_TABLE[0x2029] = "\n"

_INLINE = dict(_TABLE)
_INLINE[0x0A] = "\\n"
_INLINE[0x0085] = "\\n"
_INLINE[0x2028] = "\\n"
_INLINE[0x2029] = "\\n"

_UNSAFE_RE = re.compile(
    "[" + "".join(re.escape(chr(c)) for c in sorted({*_TABLE, *_LINE_SEPS, 0x0A})) + "]"
)


def inline(s: object, limit: int | None = None) -> str:
    """One-line form for names, roles, channels, ids: every control escaped, newlines too."""
    if not isinstance(s, str):
        s = "" if s is None else str(s)
    if limit is not None and len(s) > limit:
        s = s[:limit] + "…"
    if _UNSAFE_RE.search(s) is None:
        return s
    return s.translate(_INLINE)


def text(s: object, indent: str = "    ") -> str:
    """Message body for a text line: controls escaped; each newline becomes a continuation
    line starting with ``indent`` (so one event never impersonates another line)."""
    if not isinstance(s, str):
        s = "" if s is None else str(s)
    if _UNSAFE_RE.search(s) is None:
        return s
    s = s.translate(_TABLE)
    if "\n" in s:
        s = s.replace("\r", "").replace("\n", "\n" + indent)
    return s


# ---- elision: bounded display of ids and labels, never cut mid-token -----------------------

ELLIPSIS = "…"


def _cw(ch: str) -> int:
    """Terminal cells of one character: 0 for combining marks, 2 for East Asian wide/full."""
    if ch < "\u0300":
        return 1
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def cells(s: str) -> int:
    """Display width of ``s`` in terminal cells (ASCII fast path)."""
    return len(s) if s.isascii() else sum(_cw(c) for c in s)


def _head_cells(s: str, n: int) -> str:
    out, w = [], 0
    for ch in s:
        cw = _cw(ch)
        if w + cw > n:
            break
        out.append(ch)
        w += cw
    return "".join(out)


def _tail_cells(s: str, n: int) -> str:
    out, w = [], 0
    for ch in reversed(s):
        cw = _cw(ch)
        if w + cw > n:
            break
        out.append(ch)
        w += cw
    return "".join(reversed(out))


def elide_middle(s: str, width: int, tail: int | None = None) -> str:
    """``s`` in at most ``width`` cells: the start, ``…``, the end (``tail`` cells of it,
    default half). Unchanged when it fits. Callers pass display-safe text."""
    if cells(s) <= width:
        return s
    if width <= 1:
        return ELLIPSIS if width == 1 else ""
    keep = width - 1
    t = keep // 2 if tail is None else max(0, min(keep, tail))
    return _head_cells(s, keep - t) + ELLIPSIS + _tail_cells(s, t)


def elide_id(pid: object, width: int = 24) -> str:
    """A principal (or message) id shown in at most ``width`` cells, controls escaped. Never cut
    at the end: the middle goes, and a principal keeps its whole actor (``u_abc….alice``) when
    it fits, since the actor is what tells two principals of one owner apart."""
    s = inline(pid)
    if cells(s) <= width:
        return s
    owner, dot, actor = s.partition(".")
    if dot and owner and actor and cells(actor) + 3 <= width:
        return _head_cells(owner, width - 2 - cells(actor)) + ELLIPSIS + "." + actor
    return elide_middle(s, width, tail=(width - 1) * 2 // 3)
