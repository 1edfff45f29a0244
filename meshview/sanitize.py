"""Neutralize untrusted wire text before it reaches a terminal or a log line.

Every string from the wire (names, roles, channels, message text, activity, condition
messages) may carry terminal control sequences or bidi overrides that rewrite what the
operator sees. They are escaped *visibly* (``\\x1b``, ``\\u202e``) so an attack shows up as
text instead of acting. JSON output does not use this: it keeps the exact text (JSON string
escaping already makes controls inert).
"""

from __future__ import annotations

import bisect
import re
import unicodedata

# What is escaped is a Unicode property, not a hand list: C0/DEL/C1, every
# Default_Ignorable_Code_Point (ZW*, bidi marks, Hangul fillers, U+034F, U+180E, U+2061-2064,
# tags, variation selectors...), every format character (Cf: bidi overrides and isolates), line
# and paragraph separators, private-use (the operator's font decides what it looks like), and
# unassigned and surrogate code points. Python's unicodedata has no DICP, so the `regex`
# package (its own, newer UCD) reads the properties; see _unsafe_set().
RULE = (r"\x00-\x1f\x7f-\x9f\p{Default_Ignorable_Code_Point}\p{Cf}\p{Zl}\p{Zp}"
        r"\p{Co}\p{Cn}\p{Cs}")

# how some of them are shown instead of escaped
_TEXT_AS = {0x09: " ", 0x0A: "\n", 0x0085: "\n", 0x2028: "\n", 0x2029: "\n"}
_INLINE_AS = {0x09: " ", 0x0A: "\\n", 0x0085: "\\n", 0x2028: "\\n", 0x2029: "\\n"}

_ASCII_INLINE = re.compile(r"[\x00-\x1f\x7f]")


def _esc(cp: int) -> str:
    if cp < 0x100:
        return f"\\x{cp:02x}"
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


class _UnsafeSet:
    """The rule as a fast test: ``suspect`` finds every unsafe BMP character exactly (the
    stdlib compiles a BMP class to one bitmap lookup per character) plus any astral one, which
    a bisect over the astral ranges settles (emoji are astral and safe)."""

    def __init__(self, ranges: list[tuple[int, int]], printable: list[int]):
        bmp = [(a, min(b, 0xFFFF)) for a, b in ranges if a <= 0xFFFF]
        astral = [(max(a, 0x10000), b) for a, b in ranges if b > 0xFFFF]
        body = "".join(_cls(a) if a == b else f"{_cls(a)}-{_cls(b)}" for a, b in bmp)
        self.suspect = re.compile(f"[{body}]|[\\U00010000-\\U0010ffff]")  # two classes: the BMP one stays a bitmap
        self.starts = [a for a, _ in astral]
        self.ends = [b for _, b in astral]
        # str.isprintable() (C speed) already rejects Cc/Cf/Cs/Co/Cn/Zl/Zp; these are the
        # unsafe ones it passes (default-ignorables of other categories: U+034F, Hangul
        # fillers, variation selectors...), so printable text needs only this small search
        runs: list[tuple[int, int]] = []
        for cp in printable:
            if runs and runs[-1][1] == cp - 1:
                runs[-1] = (runs[-1][0], cp)
            else:
                runs.append((cp, cp))
        body = "".join(_cls(a) if a == b else f"{_cls(a)}-{_cls(b)}" for a, b in runs)
        self.printable_unsafe = re.compile(f"[{body}]" if body else "(?!)")

    def safe(self, s: str) -> bool:
        """No character of ``s`` is unsafe (the fast test for non-ASCII text)."""
        if s.isprintable():
            return self.printable_unsafe.search(s) is None
        m = self.suspect.search(s)
        while m is not None:
            cp = ord(m.group())
            if cp <= 0xFFFF or self.astral_unsafe(cp):
                return False
            m = self.suspect.search(s, m.end())
        return True

    def astral_unsafe(self, cp: int) -> bool:
        i = bisect.bisect_right(self.starts, cp) - 1
        return i >= 0 and cp <= self.ends[i]


def _cls(cp: int) -> str:
    return f"\\U{cp:08x}"


_UNSAFE: _UnsafeSet | None = None


def _unsafe_set() -> _UnsafeSet:
    """Built once, on the first non-ASCII string (~50 ms): every code point is matched against
    the complement of the rule, whose few hundred runs give the unsafe ranges."""
    global _UNSAFE
    if _UNSAFE is None:
        import array

        import regex

        every = array.array("I", range(0x110000)).tobytes().decode("utf-32-le", "surrogatepass")
        ranges, at = [], 0
        for m in regex.finditer(f"[^{RULE}]+", every):
            if m.start() > at:
                ranges.append((at, m.start() - 1))
            at = m.end()
        if at < 0x110000:
            ranges.append((at, 0x10FFFF))
        invisible = regex.finditer(r"[\p{Default_Ignorable_Code_Point}\p{Cf}\p{Zl}\p{Zp}]", every)
        printable = [m.start() for m in invisible if m.group().isprintable()]
        _UNSAFE = _UnsafeSet(ranges, printable)
    return _UNSAFE


def is_unsafe(ch: str) -> bool:
    """Whether one character is escaped when shown."""
    cp = ord(ch)
    if cp < 0x80:
        return cp < 0x20 or cp == 0x7F
    u = _unsafe_set()
    return u.astral_unsafe(cp) if cp > 0xFFFF else u.suspect.match(ch) is not None


def _escape(s: str, pattern: re.Pattern, shown_as: dict[int, str]) -> str:
    out, last = [], 0
    u = _UNSAFE
    for m in pattern.finditer(s):
        cp = ord(m.group())
        if cp > 0xFFFF and not u.astral_unsafe(cp):  # type: ignore[union-attr]
            continue
        out.append(s[last:m.start()])
        out.append(shown_as.get(cp) or _esc(cp))
        last = m.end()
    if not out:
        return s
    out.append(s[last:])
    return "".join(out)


def inline(s: object, limit: int | None = None) -> str:
    """One-line form for names, roles, channels, ids: every control and invisible escaped,
    newlines too."""
    if not isinstance(s, str):
        s = "" if s is None else str(s)
    if limit is not None and len(s) > limit:
        s = s[:limit] + "…"
    if s.isascii():
        if s.isprintable():  # the common case, at C speed
            return s
        return _escape(s, _ASCII_INLINE, _INLINE_AS)
    u = _unsafe_set()
    if u.safe(s):
        return s
    return _escape(s, u.suspect, _INLINE_AS)


def text(s: object, indent: str = "    ") -> str:
    """Message body for a text line: controls and invisibles escaped; each newline becomes a
    continuation line starting with ``indent`` (so one event never impersonates another line)."""
    if not isinstance(s, str):
        s = "" if s is None else str(s)
    if s.isascii():
        if s.isprintable():
            return s
        s = _escape(s, _ASCII_INLINE, _TEXT_AS)
    else:
        u = _unsafe_set()
        if u.safe(s):
            return s
        s = _escape(s, u.suspect, _TEXT_AS)
    if "\n" in s:
        s = s.replace("\n", "\n" + indent)
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
