"""Headless terminal mirror: pyte behind a small adapter.

The attach host feeds a pty's output here; the attach pane reads dirty rows and cells from it;
a late attach gets ``snapshot()`` — ANSI bytes that rebuild the screen, both buffers, cursor and
modes in a fresh terminal of the same size.

pyte (0.8.2) is kept as the parser and cell store, and this module fills its gaps:

- the alternate screen (DECSET 1049/1047/47), which pyte does not have;
- modes pyte parses but does not model (mouse, SGR mouse, bracketed paste, DECCKM, keypad, focus,
  synchronized output), tracked in ``set_mode``/``reset_mode`` so chunk boundaries do not matter;
- a pre-filter for input pyte misreads: ``CSI > / = / <`` sequences (``ESC[>4;2m`` would turn on
  underline), DCS/APC/PM/SOS strings (pyte draws their payload as text), colon sub-parameter and
  underline-colour SGRs, and stray C0/C1 controls (pyte's ``draw`` stops the whole text run at one);
- REP, SU/SD, SCOSC/SCORC and DEC line drawing (ncurses emits these for xterm-256color);
- a resize that keeps the cursor's line on screen, for both buffers;
- parser exceptions (pyte raises on some malformed CSIs) are counted, never raised.

Speed: the screen is :class:`~attach.terminal.fast_screen.FastScreen` (pyte with fast paths, the same
state) and the feed loop dispatches common controls and CSIs without stepping pyte's parser
generator per character: 2.4–6× bare pyte on recorded output (``bench/mirror.py``).

Size: over 500 lines because the adapter, its parser fixes and the ANSI snapshot serializer are
one contract (a snapshot must rebuild exactly the state the parser built); the pyte fast paths
live apart, in ``fast_screen.py``.
"""

from __future__ import annotations

import codecs
import re
from collections import defaultdict
from collections.abc import Generator
from dataclasses import dataclass
from itertools import compress, groupby, islice, repeat
from operator import is_not, itemgetter
from typing import TYPE_CHECKING, Any, Callable

import pyte
from pyte import charsets as _cs
from pyte import modes as _mo
from pyte.graphics import FG_BG_256 as _PALETTE
from pyte.screens import Char, Margins, StaticDefaultDict
from wcwidth import wcwidth

from attach.terminal.fast_screen import FastScreen

#: a screen buffer as pyte keeps it: row -> (column -> cell)
_Buffer = dict[int, StaticDefaultDict[int, Char]]

if TYPE_CHECKING:
    from attach.terminal.scrollback import Scrollback

__all__ = ["Cell", "Mirror"]


@dataclass(frozen=True, slots=True)
class Cell:
    """One screen cell. ``fg``/``bg``: "default", a pyte colour name or 6-hex "rrggbb".

    A wide character occupies two cells; the second has ``char == ""``.
    """

    char: str
    fg: str
    bg: str
    bold: bool = False
    italics: bool = False
    underscore: bool = False
    reverse: bool = False
    strikethrough: bool = False
    blink: bool = False


_BLANK = Char(" ", "default", "default")
_DATA = itemgetter(0)
_ATTRS = itemgetter(1, 2, 3, 4, 5, 6, 7, 8)  # a Char's attributes, in pyte's order
_ALT_MODES = (1049, 1047, 47)
_MOUSE_MODES = (1000, 1002, 1003)


class _StyleCache(dict):
    """A renderer's style per cell (attributes looked up once per distinct character + pen)."""

    def __init__(self, style_of: Callable[[tuple], Any] | None = None) -> None:
        super().__init__()
        self.style_of = style_of

    def __missing__(self, ch: Char) -> Any:
        style_of = self.style_of
        assert style_of is not None  # styled_runs sets it before the first lookup
        s = self[ch] = style_of(_ATTRS(ch))
        return s


def _is_wide(data: str) -> bool:
    return data >= "\u1100" and wcwidth(data[0]) == 2


# --------------------------------------------------------------------------- screen


class _Extras(pyte.Screen):
    """pyte Screen with an alternate buffer, extra modes and a few missing controls."""

    def __init__(self, columns: int, lines: int) -> None:
        self._init_extra()
        super().__init__(columns, lines)
        self.errors = 0

    def _init_extra(self) -> None:
        self.alt = False
        self.main_buffer: _Buffer | None = None  # the main buffer while the alt one is shown
        self.main_cursor: tuple[int, int, Char] | None = None  # saved by 1049
        self.mouse_tracking: int | None = None
        self.mouse_sgr = False
        self.bracketed_paste = False
        self.app_cursor = False
        self.app_keypad = False
        self.focus_events = False
        self.synchronized = False
        self.last_char = ""

    def _new_buffer(self) -> _Buffer:
        return defaultdict(lambda: StaticDefaultDict(self.default_char))

    def reset(self) -> None:
        self._init_extra()
        super().reset()

    # -- text

    def draw(self, data: str) -> None:
        if data.isascii() or self.cursor.x + 2 * len(data) < self.columns - 1 or _mo.DECAWM not in self.mode:
            super().draw(data)  # no wide character in this run can land on the last column
        else:
            self._draw_wide_aware(data)
        self.last_char = data[-1]

    def _draw_wide_aware(self, data: str) -> None:
        """A wide character that does not fit in the last column wraps whole, as in xterm and tmux."""
        cols = self.columns
        x = self.cursor.x
        start = 0
        for i, ch in enumerate(data):
            w = wcwidth(ch)
            if w <= 0:
                continue
            if x >= cols:
                x = 0
            if w == 2 and x == cols - 1 and cols > 1:
                super().draw(data[start:i])
                self.cursor.x = cols  # pending wrap: the character goes to the next line
                start, x = i, 0
            x = min(x + w, cols)
        super().draw(data[start:])

    def repeat_char(self, count: int | None = None, *_a: object, **kw: object) -> None:
        """REP (CSI n b): repeat the last graphic character."""
        if self.last_char and not kw.get("private"):
            self.draw(self.last_char * min(count or 1, self.columns * self.lines))

    # -- scrolling (SU/SD), pyte lacks them

    def _scroll(self, count: int | None, up: bool) -> None:
        top, bottom = self.margins or Margins(0, self.lines - 1)
        n = min(count or 1, bottom - top + 1)
        buf = self.buffer
        rows = [buf.pop(y, None) for y in range(top, bottom + 1)]
        blank: list[StaticDefaultDict[int, Char] | None] = [None] * n
        rows = rows[n:] + blank if up else blank + rows[: len(rows) - n]
        for i, line in enumerate(rows):
            if line is not None:
                buf[top + i] = line
        self.dirty.update(range(top, bottom + 1))

    def scroll_up(self, count: int | None = None, *_a: object, **kw: object) -> None:
        if not kw.get("private"):
            self._scroll(count, up=True)

    def scroll_down(self, count: int | None = None, *_a: object, **kw: object) -> None:
        if not kw.get("private"):
            self._scroll(count, up=False)

    def save_cursor_csi(self, *_a: object, **kw: object) -> None:
        if not kw.get("private"):  # CSI ? Pm s is XTSAVE, not SCOSC
            self.save_cursor()

    def restore_cursor_csi(self, *_a: object, **kw: object) -> None:
        if not kw.get("private"):
            self.restore_cursor()

    def keypad_application(self) -> None:
        self.app_keypad = True

    def keypad_numeric(self) -> None:
        self.app_keypad = False

    # -- modes

    def set_mode(self, *modes: int, **kwargs: object) -> None:
        if kwargs.get("private"):
            rest = [m for m in modes if not self._private_mode(m, True)]
            if rest:
                super().set_mode(*rest, private=True)
        else:
            super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: object) -> None:
        if kwargs.get("private"):
            rest = [m for m in modes if not self._private_mode(m, False)]
            if rest:
                super().reset_mode(*rest, private=True)
        else:
            super().reset_mode(*modes, **kwargs)

    def _private_mode(self, m: int, on: bool) -> bool:
        """Handle a private mode pyte does not model; True if consumed."""
        if m in _ALT_MODES:
            self._enter_alt(m) if on else self._leave_alt(m)
        elif m in _MOUSE_MODES:
            # xterm and tmux: one tracking level at a time; resetting any of them turns it off
            self.mouse_tracking = m if on else None
        elif m == 1006:
            self.mouse_sgr = on
        elif m == 2004:
            self.bracketed_paste = on
        elif m == 1:
            self.app_cursor = on
        elif m == 1004:
            self.focus_events = on
        elif m == 2026:
            self.synchronized = on
        elif m in (3, 5):
            pass  # DECCOLM would resize to 132 columns, DECSCNM rewrites cells: both ignored
        else:
            return False
        return True

    def _enter_alt(self, m: int) -> None:
        if m == 1049 and not self.alt:
            c = self.cursor
            self.main_cursor = (c.x, c.y, c.attrs)
        if not self.alt:
            self.alt = True
            self.main_buffer = self.buffer
            if m != 1049:
                self.main_cursor = None
        self.buffer = self._new_buffer()
        self.dirty.update(range(self.lines))

    def _leave_alt(self, m: int) -> None:
        if not self.alt or self.main_buffer is None:  # (alt always saved the main buffer)
            return
        self.alt = False
        self.buffer = self.main_buffer
        self.main_buffer = None
        if m == 1049 and self.main_cursor is not None:
            x, y, attrs = self.main_cursor
            self.cursor.x, self.cursor.y, self.cursor.attrs = min(x, self.columns), y, attrs
            self.ensure_vbounds()
        self.main_cursor = None
        self.dirty.update(range(self.lines))

    # -- resize

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        """Resize both buffers; on shrink, drop top lines only as needed to keep the cursor's line."""
        lines = lines or self.lines
        columns = columns or self.columns
        if lines == self.lines and columns == self.columns:
            return
        c = self.cursor
        shift = max(0, c.y - (lines - 1))
        self._fit(self.buffer, lines, columns, shift)
        c.y -= shift
        c.x = min(c.x, columns - 1)
        if self.main_buffer is not None:
            mshift = 0
            if self.main_cursor is not None:
                x, y, attrs = self.main_cursor
                mshift = max(0, y - (lines - 1))
                self.main_cursor = (min(x, columns - 1), y - mshift, attrs)
            self._fit(self.main_buffer, lines, columns, mshift)
        old_cols = self.columns
        self.lines, self.columns = lines, columns
        self.margins = None
        self.tabstops = {t for t in self.tabstops if t < columns} | set(range(8 * (old_cols // 8 + 1), columns, 8))
        self.savepoints = []
        self.dirty.update(range(lines))

    def _fit(self, buf: dict, lines: int, columns: int, shift: int) -> None:
        if shift:
            moved = {y - shift: line for y, line in buf.items() if y >= shift}
            buf.clear()
            buf.update(moved)
        for y in [y for y in buf if y >= lines]:
            del buf[y]
        if columns < self.columns:
            for line in buf.values():
                for x in [x for x in line if x >= columns]:
                    del line[x]


class _Screen(_Extras, FastScreen):
    """The mirror's screen: the extras above over pyte with its fast paths (same state)."""


# --------------------------------------------------------------------------- stream


class _Stream(pyte.Stream):
    """pyte Stream with the extra controls wired in and a feed loop that never raises."""

    # pyte types these Optional (a stream may be built without a screen); this one always has
    # its screen, and the parser that comes with it
    listener: _Screen
    _parser: Generator[bool | None, str, None]

    csi = {
        **pyte.Stream.csi,
        "S": "scroll_up",
        "T": "scroll_down",
        "b": "repeat_char",
        "s": "save_cursor_csi",
        "u": "restore_cursor_csi",
    }
    escape = {**pyte.Stream.escape, "=": "keypad_application", ">": "keypad_numeric"}
    events = frozenset(
        pyte.Stream.events
        | {"scroll_up", "scroll_down", "repeat_char", "save_cursor_csi", "restore_cursor_csi"}
        | {"keypad_application", "keypad_numeric"}
    )

    def __init__(self, screen: _Screen) -> None:
        super().__init__(screen)
        # We decode UTF-8 ourselves, so the parser may honour ESC ( 0 (DEC line drawing), as tmux does.
        self.use_utf8 = False
        # The parser's own dispatch, bound once: the feed loop calls these directly for the
        # controls and sequences that make up most of a pty's output (see ``feed``).
        self._basic_fn = {c: getattr(screen, name) for c, name in self.basic.items()}
        self._escape_fn = {c: getattr(screen, name) for c, name in self.escape.items()}
        self._csi_fn = {c: getattr(screen, name) for c, name in self.csi.items()}
        self._parsed: dict[str, tuple] = {}  # CSI text → (method, params, private)

    def _parse_csi(self, m: re.Match) -> tuple:
        """As pyte's state machine reads a CSI: each parameter an int (empty → 0) capped at 9999."""
        fn = self._csi_fn.get(m.group(3), self.listener.debug)
        return fn, tuple(min(int(p or 0), 9999) for p in m.group(2).split(";")), bool(m.group(1))

    def feed(self, data: str) -> None:
        """pyte's feed loop, never raising, with fast paths taken only where the parser is idle
        (``plain``): a C0 control, ``ESC <c>``, ``ESC ( <c>`` and ``CSI [?] <digits;> <final>``
        are dispatched as pyte's state machine would, without a generator step per character.
        Anything else (OSC, C1, controls inside a CSI, split sequences) goes to the machine."""
        screen = self.listener
        draw = screen.draw
        match = self._text_pattern.match
        csi_match = _CSI.match
        basic_fn, escape_fn = self._basic_fn, self._escape_fn
        parsed = self._parsed
        if len(parsed) > 4096:
            parsed.clear()
        plain = self._taking_plain_text
        send = self._parser.send
        i, n = 0, len(data)
        while i < n:
            if plain:
                m = match(data, i)
                if m:
                    j = m.end()
                    try:
                        draw(data[i:j])
                    except Exception:  # noqa: BLE001 - a malformed sequence is counted in screen.errors
                        screen.errors += 1
                    i = j
                    continue
                c = data[i]
                fn = basic_fn.get(c)
                if fn is not None:
                    i += 1
                    try:
                        fn()
                    except Exception:  # noqa: BLE001 - a malformed sequence is counted in screen.errors
                        screen.errors += 1
                    continue
                if c == "\x1b" and i + 1 < n:
                    c2 = data[i + 1]
                    if c2 == "[":
                        m = csi_match(data, i)
                        if m:
                            i = m.end()
                            seq = m.group()
                            call = parsed.get(seq)
                            if call is None:
                                call = parsed[seq] = self._parse_csi(m)
                            fn, params, private = call
                            try:
                                if private:
                                    fn(*params, private=True)
                                else:
                                    fn(*params)
                            except Exception:  # noqa: BLE001 - a malformed sequence is counted in screen.errors
                                screen.errors += 1
                            continue
                    elif c2 in escape_fn:
                        i += 2
                        try:
                            escape_fn[c2]()
                        except Exception:  # noqa: BLE001 - a malformed sequence is counted in screen.errors
                            screen.errors += 1
                        continue
                    elif (c2 == "(" or c2 == ")") and i + 2 < n:
                        code = data[i + 2]
                        i += 3
                        try:
                            screen.define_charset(code, mode=c2)
                        except Exception:  # noqa: BLE001 - a malformed sequence is counted in screen.errors
                            screen.errors += 1
                        continue
                plain = False  # the state machine takes this character
            else:
                try:
                    plain = send(data[i])
                except Exception:  # noqa: BLE001 - a malformed sequence is counted in screen.errors
                    screen.errors += 1
                    self._initialize_parser()
                    send = self._parser.send
                    plain = self._taking_plain_text
                i += 1
        self._taking_plain_text = plain


# A complete CSI the parser would read as: optional leading "?", decimal parameters, one final.
_CSI = re.compile(r"\x1b\[(\?)?([0-9;]*)([@-~])")


# Sequences fixed before pyte sees them (group 1: an unterminated string's trailing ESC,
# group 2: an SGR parameter list to rewrite).
_FIX = re.compile(
    r"\x1b\[[<=>][0-?]*[ -/]*[@-~]"
    r"|\x1b\[[0-?]*[ -/]+[@-~]"
    r"|\x1b\[\?[0-9;]*m"
    r"|\x1b[P^_X](?:[^\x1b\x07]|\x1b[^\\])*(?:\x1b\\|\x07|(\x1b?)\Z)"
    r"|\x1b\[((?:[0-9;]*;)?58;[0-9;:]*|[0-9;]*:[0-9;:]*)m"
    r"|[\x00-\x06\x10-\x17\x19\x1c-\x1f\x80-\x9a\x9c\x9e\x9f]"
)
_INCOMPLETE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*)?")
_STRING_END = re.compile(r"\x1b\\|\x07")


def _rewrite_sgr(params: str) -> str:
    """Colon sub-parameters → semicolon forms pyte reads; underline colour (58) dropped."""
    out: list[str] = []
    parts = params.split(";")
    i = 0
    while i < len(parts):
        p = parts[i]
        i += 1
        if ":" in p:
            sub = p.split(":")
            code = sub[0]
            if code in ("38", "48") and len(sub) >= 3:
                if sub[1] == "5":
                    out += [code, "5", sub[2] or "0"]
                elif sub[1] == "2":
                    rgb = sub[3:6] if len(sub) >= 6 else sub[2:5]
                    out += [code, "2", *[v or "0" for v in rgb]]
            elif code == "4":
                out.append("24" if sub[1:2] == ["0"] else "4")
            elif code not in ("58", ""):
                out.append(code)
        elif p in ("38", "48", "58"):
            kind = parts[i] if i < len(parts) else ""
            take = 2 if kind == "5" else 4 if kind == "2" else 0
            if p != "58":
                out += [p, *parts[i : i + take]]
            i += take
        else:
            out.append(p)
    return "\x1b[" + ";".join(out) + "m" if out else ""


# --------------------------------------------------------------------------- serializer helpers

_SGR_CACHE: dict[tuple, str] = {}
_NAMED = {n: i for i, n in enumerate(("black", "red", "green", "brown", "blue", "magenta", "cyan", "white"))}
_HEX_TO_256 = {h: i for i, h in reversed(list(enumerate(_PALETTE)))}
for _i in range(16, 256):  # identical rgb: prefer the fixed cube/grey entry over the themable 0-15
    _HEX_TO_256[_PALETTE[_i]] = _i


def _colour(c: str, base: int) -> list[str]:
    if c == "default":
        return []
    if c.startswith("bright") or c == "bfightmagenta":  # pyte's typo for SGR 105
        return [str(base + 60 + _NAMED[c[6:] if c != "bfightmagenta" else "magenta"])]
    if c in _NAMED:
        return [str(base + _NAMED[c])]
    idx = _HEX_TO_256.get(c)
    if idx is not None:
        return [str(base + 8), "5", str(idx)]
    try:
        r, g, b = int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)
    except ValueError:
        return []
    return [str(base + 8), "2", str(r), str(g), str(b)]


def _sgr(ch: Char) -> str:
    key = ch[1:]
    s = _SGR_CACHE.get(key)
    if s is None:
        fg, bg, bold, italics, underscore, strike, reverse, blink = key
        p = ["0", *_colour(fg, 30), *_colour(bg, 40)]
        for flag, code in ((bold, "1"), (italics, "3"), (underscore, "4"), (blink, "5"), (reverse, "7"), (strike, "9")):
            if flag:
                p.append(code)
        s = _SGR_CACHE[key] = "\x1b[" + ";".join(p) + "m"
    return s


def _norm(line: StaticDefaultDict, cols: int) -> list[Char]:
    """A row as exactly ``cols`` Chars, wide pairs consistent (orphan halves become spaces)."""
    row = [line[x] for x in range(cols)]
    for x, ch in enumerate(row):
        d = ch.data
        if d == "":
            if x == 0 or not row[x - 1].data or not _is_wide(row[x - 1].data):
                row[x] = ch._replace(data=" ")
        elif d >= "\u1100" and x + 1 < cols and row[x + 1].data != "" and _is_wide(d):
            row[x] = ch._replace(data=" ")
    return row


def _paint(out: list[str], buf: dict, cols: int, rows: int) -> None:
    pen = None
    for y in range(rows):
        line = buf.get(y)
        if not line:
            continue
        row = _norm(line, cols)
        last = cols - 1
        while last >= 0 and row[last] == _BLANK:
            last -= 1
        if last < 0:
            continue
        out.append(f"\x1b[{y + 1}H")
        for x in range(last + 1):
            ch = row[x]
            if not ch.data:
                continue
            s = _sgr(ch)
            if s is not pen:
                out.append(s)
                pen = s
            out.append(ch.data)
    out.append("\x1b[0m")


def _place_cursor(out: list[str], buf: dict, x: int, y: int, cols: int, top: int = 0) -> None:
    """Move to (x, y); x == cols (wrap pending) is rebuilt by rewriting the row's last cell."""
    if x < cols:
        out.append(f"\x1b[{y - top + 1};{x + 1}H")
        return
    row = _norm(buf[y], cols)
    x = cols - 1
    if not row[x].data and cols > 1:
        x -= 1
    out.append(f"\x1b[{y - top + 1};{x + 1}H{_sgr(row[x])}{row[x].data or ' '}")


def _clean_title(t: str) -> str:
    return "".join(ch for ch in t if ch >= " " and not "\x7f" <= ch <= "\x9f")


# --------------------------------------------------------------------------- the adapter


class Mirror:
    """A headless terminal of ``cols`` × ``rows``: feed pty bytes, read rows, take a snapshot."""

    _screen_cls: type[_Screen] = _Screen
    _stream_cls: type[_Stream] = _Stream

    def __init__(self, cols: int = 80, rows: int = 24) -> None:
        self._screen = self._screen_cls(cols, rows)
        self._stream = self._stream_cls(self._screen)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._carry = ""  # an incomplete ESC / CSI held for the next feed
        self._in_string = False  # inside a DCS/APC/PM/SOS string being discarded
        self._string_esc = False  # ... whose last chunk ended in ESC
        self._cell_cache: dict[Char, Cell] = {}
        self._styles = _StyleCache()
        self._styles_token: object = None
        self._last_cursor = (0, 0, True)
        self._screen.dirty.clear()
        self._screen.dirty.update(range(rows))

    @property
    def screen(self) -> _Screen:
        """The emulator's screen (read-only; what tests and diagnostics read: cells, cursor)."""
        return self._screen

    @property
    def stream(self) -> _Stream:
        """The parser feeding :attr:`screen` (read-only; tests check which one runs)."""
        return self._stream

    # -- size

    @property
    def cols(self) -> int:
        return self._screen.columns

    @property
    def rows(self) -> int:
        return self._screen.lines

    def resize(self, cols: int, rows: int) -> None:
        if cols > 0 and rows > 0:
            self._screen.resize(rows, cols)

    def keep_history(self, history: "Scrollback | None") -> None:
        """Hand every main-screen row that scrolls off the top to ``history`` (None: stop)."""
        s = self._screen
        if history is None:
            s.on_scroll_off = None
            return

        def off(row: StaticDefaultDict[int, Char] | None) -> None:
            if not s.alt:  # a full-screen program's alternate screen has no scrollback
                history.push_row(row, s.columns)

        s.on_scroll_off = off

    def clear(self) -> None:
        """Forget everything: the state of a fresh mirror of this size (a repaint follows), the
        objects kept — a pane repainting many times a second under a flood makes no garbage."""
        s = self._screen
        s.reset()  # RIS: buffers, modes, cursor, margins, charsets, tabstops, title, our extras
        s.savepoints = []
        s.errors = 0
        s.dirty.clear()
        s.dirty.update(range(s.lines))
        self._stream._initialize_parser()
        self._decoder.reset()
        self._carry = ""
        self._in_string = self._string_esc = False
        self._last_cursor = (0, 0, True)

    # -- input

    def feed(self, data: bytes) -> None:
        text = self._carry + self._decoder.decode(data)
        self._carry = ""
        if self._in_string:
            if self._string_esc and text.startswith("\\"):
                text = text[1:]
            else:
                m = _STRING_END.search(text)
                if m is None:
                    self._string_esc = text.endswith("\x1b")
                    return
                text = text[m.end() :]
            self._in_string = self._string_esc = False
        n = len(text)
        k = text.rfind("\x1b", max(0, n - 256))
        if k >= 0 and _INCOMPLETE.fullmatch(text, k):
            self._carry = text[k:]
            text = text[:k]
        text = _FIX.sub(self._fix, text)
        if text:
            self._stream.feed(text)

    def _fix(self, m: re.Match) -> str:
        if m.group(2) is not None:
            return _rewrite_sgr(m.group(2))
        if m.group(1) is not None:  # a string left unterminated at the end of this chunk
            self._in_string = True
            self._string_esc = m.group(1) == "\x1b"
        return ""

    # -- reading

    def take_dirty(self) -> set[int]:
        """Rows changed since the last call, plus the old and new cursor rows if the cursor moved."""
        s = self._screen
        rows = s.lines
        d = {y for y in s.dirty if y < rows}
        s.dirty.clear()
        cur = self.cursor
        if cur != self._last_cursor:
            if self._last_cursor[1] < rows:
                d.add(self._last_cursor[1])
            d.add(cur[1])
            self._last_cursor = cur
        return d

    def row(self, y: int) -> list[Cell]:
        cache = self._cell_cache
        if len(cache) > 8192:
            cache.clear()
        out = []
        for ch in _norm(self._screen.buffer[y], self.cols):
            c = cache.get(ch)
            if c is None:
                bg = "brightmagenta" if ch.bg == "bfightmagenta" else ch.bg
                c = cache[ch] = Cell(
                    ch.data, ch.fg, bg, ch.bold, ch.italics, ch.underscore, ch.reverse, ch.strikethrough, ch.blink
                )
            out.append(c)
        return out

    def runs(self, y: int) -> list[tuple[str, tuple]]:
        """Row ``y`` as runs of equal attributes, for a renderer: ``(text, attrs)`` with attrs
        ``(fg, bg, bold, italics, underscore, strikethrough, reverse, blink)`` (pyte's order);
        the runs span exactly ``cols`` cells (wide pairs made consistent, stubs dropped)."""
        cols = self.cols
        line = self._screen.buffer.get(y)
        if not line:
            return [(" " * cols, _ATTRS(self._screen.default_char))]
        row = list(map(line.__getitem__, range(cols)))
        text = "".join(map(_DATA, row))
        if len(text) != cols or (text and max(text) >= "\u1100"):
            row = _norm(line, cols)  # wide characters or stubs: pair them up first
        return [("".join(map(_DATA, g)), k) for k, g in groupby(row, _ATTRS)]

    def styled_runs(self, y: int, style_of: Callable[[tuple], Any], token: object = None,
                    start: int = 0, end: int | None = None) -> list[tuple[str, Any]] | None:
        """Row ``y``, columns ``start``..``end``, as ``(text, style)`` runs; ``style_of(attrs)``
        gives a renderer's style for :meth:`runs`' attributes (asked once per distinct cell;
        equal styles must be the same object). Pass a new ``token`` when ``style_of``'s answers
        change. ``None`` when the row holds wide characters and a window was asked for (a
        renderer then crops :meth:`runs` itself, so a pair is never cut in half)."""
        cache = self._styles
        if token is not self._styles_token or cache.style_of is not style_of or len(cache) > 16384:
            cache.clear()
            cache.style_of, self._styles_token = style_of, token
        cols = self.cols
        end = cols if end is None else min(end, cols)
        width = end - start
        line = self._screen.buffer.get(y)
        if not line:
            return [(" " * width, style_of(_ATTRS(self._screen.default_char)))]
        row = list(map(line.get, range(start, end), repeat(line.default, width)))
        text = "".join(map(_DATA, row))
        if len(text) != width or max(text) >= "\u1100":  # wide characters or stubs: the slow way
            if width != cols:
                return None
            return [(t, style_of(k)) for t, k in self.runs(y)]
        styles = list(map(cache.__getitem__, row))
        cuts = [0, *compress(range(1, width), map(is_not, styles, islice(styles, 1, None))), width]
        return [(text[a:b], styles[a]) for a, b in zip(cuts, islice(cuts, 1, None))]

    def text_lines(self) -> list[str]:
        cols = self.cols
        buf = self._screen.buffer
        return ["".join(ch.data for ch in _norm(buf[y], cols)).rstrip() for y in range(self.rows)]

    @property
    def cursor(self) -> tuple[int, int, bool]:
        c = self._screen.cursor
        return min(c.x, self.cols - 1), c.y, not c.hidden

    @property
    def alt_screen(self) -> bool:
        return self._screen.alt

    @property
    def bracketed_paste(self) -> bool:
        return self._screen.bracketed_paste

    @property
    def mouse_tracking(self) -> int | None:
        return self._screen.mouse_tracking

    @property
    def mouse_sgr(self) -> bool:
        return self._screen.mouse_sgr

    @property
    def app_cursor(self) -> bool:
        return self._screen.app_cursor

    @property
    def app_keypad(self) -> bool:
        return self._screen.app_keypad

    @property
    def focus_events(self) -> bool:
        return self._screen.focus_events

    @property
    def scrolled(self) -> int:
        """Lines scrolled up by line feeds so far (a renderer compares it between frames: more
        than a screenful since the last one is a flood nobody can read at full frame rate)."""
        return self._screen.scrolled

    @property
    def synchronized(self) -> bool:
        """Mode 2026 is set: the program is mid-frame; a renderer may hold its tick."""
        return self._screen.synchronized

    @property
    def autowrap(self) -> bool:
        return _mo.DECAWM in self._screen.mode

    @property
    def title(self) -> str:
        return self._screen.title

    @property
    def errors(self) -> int:
        """Malformed sequences pyte raised on (counted and skipped)."""
        return self._screen.errors

    # -- snapshot

    def snapshot(self) -> bytes:
        """ANSI that rebuilds this screen (and the main buffer under an alternate one), cursor and modes."""
        s = self._screen
        cols, rows = s.columns, s.lines
        # ?1049l first: a repaint may land on a terminal (or mirror) that is in its alternate
        # screen, and must rebuild the main screen under it too
        out = ["\x1b[?1049l\x1b[0m\x1b[?25l\x1b[r\x1b[?6l\x1b[?7h\x1b[4l\x1b[20l\x1b(B\x0f\x1b[H\x1b[2J"]
        if s.alt and s.main_buffer is not None:  # (alt always saved the main buffer)
            _paint(out, s.main_buffer, cols, rows)
            if s.main_cursor is not None:
                x, y, attrs = s.main_cursor
                _place_cursor(out, s.main_buffer, x, y, cols)
                out.append(f"{_sgr(attrs)}\x1b[?1049h\x1b[0m")
            else:
                out.append("\x1b[?1047h")
        _paint(out, s.buffer, cols, rows)

        c = s.cursor
        if s.margins is not None:
            out.append(f"\x1b[{s.margins.top + 1};{s.margins.bottom + 1}r")
        top = 0
        if _mo.DECOM in s.mode:
            out.append("\x1b[?6h")
            top = s.margins.top if s.margins is not None else 0
        _place_cursor(out, s.buffer, c.x, c.y, cols, top)
        out.append(_sgr(c.attrs))
        if s.g0_charset is _cs.VT100_MAP:
            out.append("\x1b(0")
        out.append("\x1b)0" if s.g1_charset is _cs.VT100_MAP else "\x1b)B")
        if s.charset == 1:
            out.append("\x0e")
        if _mo.IRM in s.mode:
            out.append("\x1b[4h")
        if _mo.LNM in s.mode:
            out.append("\x1b[20h")
        out.append("\x1b[?7h" if _mo.DECAWM in s.mode else "\x1b[?7l")
        out.append("\x1b[?1h" if s.app_cursor else "\x1b[?1l")
        out.append("\x1b=" if s.app_keypad else "\x1b>")
        out.append("\x1b[?2004h" if s.bracketed_paste else "\x1b[?2004l")
        out.append(f"\x1b[?{s.mouse_tracking}h" if s.mouse_tracking else "\x1b[?1000l\x1b[?1002l\x1b[?1003l")
        out.append("\x1b[?1006h" if s.mouse_sgr else "\x1b[?1006l")
        out.append("\x1b[?1004h" if s.focus_events else "\x1b[?1004l")
        if s.title:
            out.append(f"\x1b]2;{_clean_title(s.title)}\x07")
        out.append("\x1b[?25l" if c.hidden else "\x1b[?25h")
        return "".join(out).encode("utf-8", "replace")
