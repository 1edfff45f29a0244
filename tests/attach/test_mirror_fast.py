"""The fast mirror is the same screen: a differential test against bare pyte.

Two pairs are compared on the same input, cell by cell (character and every attribute), with
the cursor (position, pen, visibility), the dirty rows and the modes:

- :class:`attach.terminal.fast_screen.FastScreen` against ``pyte.Screen``, both behind a plain
  ``pyte.Stream``: the fast paths change nothing pyte would do, its quirks included;
- :class:`attach.terminal.mirror.Mirror` against the same mirror built on bare pyte (its extras over
  ``pyte.Screen`` and pyte's one-character-at-a-time feed loop), fed in chunks of every size so
  sequences split across feeds take the state machine.

Inputs: the recorded captures, plus seeded random streams of what stresses a terminal — wide
characters and combining marks, runs that wrap at (and wide characters that land on) the last
column, autowrap off, insert mode, scroll regions, the alternate screen, cursor movement, SGR,
erases, tabs, charsets, malformed and split sequences.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyte
import pytest

from attach.terminal import mirror as mirror_mod
from attach.terminal.fast_screen import FastScreen
from attach.terminal.mirror import Mirror

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
RECORDINGS = sorted(p.name[:-4] for p in CAPTURES.glob("*.bin"))
SEEDS = range(40)


# --------------------------------------------------------------------------- references


class RefScreen(mirror_mod._Extras):
    """The mirror's screen over bare pyte (no fast paths)."""


class RefStream(mirror_mod._Stream):
    """The mirror's stream with pyte's own feed loop: every non-text character through the
    parser generator, exceptions counted."""

    def feed(self, data: str) -> None:
        screen = self.listener
        draw = screen.draw
        match = self._text_pattern.match
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
                    except Exception:
                        screen.errors += 1
                    i = j
                else:
                    plain = False
            else:
                try:
                    plain = send(data[i])
                except Exception:
                    screen.errors += 1
                    self._initialize_parser()
                    send = self._parser.send
                    plain = self._taking_plain_text
                i += 1
        self._taking_plain_text = plain


class RefMirror(Mirror):
    _screen_cls = RefScreen
    _stream_cls = RefStream


def test_the_mirror_runs_on_the_fast_paths():
    m = Mirror(10, 3)
    assert isinstance(m.screen, FastScreen) and type(m.stream).feed is not RefStream.feed
    assert not isinstance(RefMirror(10, 3).screen, FastScreen)


# --------------------------------------------------------------------------- comparison


def screen_state(s: pyte.Screen) -> dict:
    """Everything observable, exactly: each non-empty row's cells as stored, the cursor, modes."""
    def rows(buf) -> dict:
        return {y: dict(line) for y, line in buf.items() if line}

    c = s.cursor
    out = {
        "buffer": rows(s.buffer),
        "cursor": (c.x, c.y, c.hidden, c.attrs),
        "dirty": set(s.dirty),
        "mode": set(s.mode),
        "margins": s.margins,
        "size": (s.columns, s.lines),
        "charsets": (s.charset, s.g0_charset is pyte.charsets.VT100_MAP, s.g1_charset is pyte.charsets.VT100_MAP),
        "tabstops": set(s.tabstops),
        "saved": [(p.cursor.x, p.cursor.y, p.cursor.attrs, p.origin, p.wrap) for p in s.savepoints],
        "title": (s.title, s.icon_name),
    }
    main = getattr(s, "main_buffer", None)
    if main is not None:
        out["main"] = rows(main)
    for extra in ("alt", "main_cursor", "mouse_tracking", "mouse_sgr", "bracketed_paste", "app_cursor",
                  "app_keypad", "focus_events", "synchronized", "last_char", "errors"):
        if hasattr(s, extra):
            out[extra] = getattr(s, extra)
    return out


def assert_same(a: pyte.Screen, b: pyte.Screen, where: str) -> None:
    sa, sb = screen_state(a), screen_state(b)
    if sa == sb:
        return
    for k in sa:
        if sa[k] != sb.get(k):
            if k in ("buffer", "main"):
                for y in sorted(set(sa[k]) | set(sb[k])):
                    ra, rb = sa[k].get(y, {}), sb[k].get(y, {})
                    if ra != rb:
                        xs = sorted(x for x in set(ra) | set(rb) if ra.get(x) != rb.get(x))
                        pytest.fail(f"{where}: {k} row {y} differs at x={xs[:8]}: "
                                    f"fast {[ra.get(x) for x in xs[:3]]} vs pyte {[rb.get(x) for x in xs[:3]]}")
            pytest.fail(f"{where}: {k} differs: fast {sa[k]!r} vs pyte {sb[k]!r}")


# --------------------------------------------------------------------------- generated streams

CJK = "中文字符日本語テキスト한국어"
EMOJI = "😀🎉🚀"
COMBINING = "\u0301\u0308\u0323\u20dd"
ZERO_WIDTH = "\u200b\u200d\ufe0f"
OTHER = "éßøΩЖ→█░─│╭"


def _text(r: random.Random, cols: int) -> str:
    kind = r.random()
    if kind < 0.35:
        return "".join(r.choice("abcdefghij klmnopqrstuvwxyz0123456789~!@#$%^&*()_+-=[]{}|;':\",./<>?")
                       for _ in range(r.choice((1, 3, 8, cols - 1, cols, cols + 1, 2 * cols + 3))))
    if kind < 0.5:
        return "".join(r.choice(CJK + EMOJI) for _ in range(r.randint(1, cols)))
    if kind < 0.6:
        return r.choice("aeiouAE中") + "".join(r.choice(COMBINING) for _ in range(r.randint(1, 2)))
    if kind < 0.7:  # mixed ascii / wide / accents / zero-width, the per-character path
        pool = "abc xyz" + CJK + OTHER + COMBINING + ZERO_WIDTH + EMOJI
        return "".join(r.choice(pool) for _ in range(r.randint(1, 2 * cols)))
    if kind < 0.8:  # land a wide character exactly on, or just past, the last column
        return f"\x1b[{r.randint(1, 3)};{cols - r.randint(0, 2)}H" + r.choice(CJK + EMOJI) + r.choice(("", "x", "yz"))
    if kind < 0.9:
        return "".join(r.choice(OTHER) for _ in range(r.randint(1, cols)))
    return "\x7f" + r.choice(("a", "\x00b"))  # DEL and NUL are not printed


def _sgr(r: random.Random) -> str:
    parts: list[str] = []
    for _ in range(r.randint(0, 4)):
        p = r.choice((0, 1, 3, 4, 5, 7, 9, 22, 23, 24, 25, 27, 29, 30, 31, 37, 39, 40, 44, 47, 49,
                      90, 93, 97, 100, 105, 107, 38, 48, 2, 8, 53))
        if p in (38, 48):
            parts += [str(p), "5", str(r.randint(0, 300))] if r.random() < 0.5 else \
                [str(p), "2", str(r.randint(0, 255)), str(r.randint(0, 255)), str(r.randint(0, 255))]
        else:
            parts.append(str(p))
    return "\x1b[" + ";".join(parts) + "m"


def _control(r: random.Random, cols: int, rows: int) -> str:
    k = r.randint(0, 40)
    n = r.randint(0, max(cols, rows) + 3)
    y, x = r.randint(0, rows + 2), r.randint(0, cols + 2)
    return [
        lambda: f"\x1b[{y};{x}H", lambda: f"\x1b[{y}H", lambda: "\x1b[H", lambda: f"\x1b[{n}A",
        lambda: f"\x1b[{n}B", lambda: f"\x1b[{n}C", lambda: f"\x1b[{n}D", lambda: f"\x1b[{x}G",
        lambda: f"\x1b[{y}d", lambda: f"\x1b[{r.randint(0, 3)}J", lambda: f"\x1b[{r.choice((0, 1, 2))}K",
        lambda: f"\x1b[{n}@", lambda: f"\x1b[{n}P", lambda: f"\x1b[{n}X", lambda: f"\x1b[{n}L",
        lambda: f"\x1b[{n}M", lambda: _sgr(r), lambda: _sgr(r), lambda: _sgr(r),
        lambda: f"\x1b[{r.randint(1, rows)};{r.randint(1, rows)}r", lambda: "\x1b[r",
        lambda: r.choice(("\x1b[4h", "\x1b[4l", "\x1b[20h", "\x1b[20l")),
        lambda: r.choice(("\x1b[?7l", "\x1b[?7h", "\x1b[?6h", "\x1b[?6l", "\x1b[?25l", "\x1b[?25h")),
        lambda: r.choice(("\x1b[?1049h", "\x1b[?1049l", "\x1b[?47h", "\x1b[?47l", "\x1b[?1047h", "\x1b[?1047l")),
        lambda: r.choice(("\x1b[?2004h", "\x1b[?1000h", "\x1b[?1006h", "\x1b[?1h", "\x1b=", "\x1b>", "\x1b[?2026h")),
        lambda: r.choice(("\r", "\n", "\r\n", "\r\n", "\t", "\x08", "\x0b", "\x0c", "\x07", "\x0e", "\x0f")),
        lambda: r.choice(("\x1b7", "\x1b8", "\x1b[s", "\x1b[u", "\x1bD", "\x1bE", "\x1bM", "\x1bH", "\x1b[g", "\x1b[3g")),
        lambda: r.choice(("\x1b(0", "\x1b(B", "\x1b)0", "\x1b)B")),
        lambda: f"\x1b[{n}S", lambda: f"\x1b[{n}T", lambda: f"\x1b[{r.randint(0, 5)}b",
        lambda: "\x1b]2;title " + str(n) + "\x07", lambda: "\x1b]0;both\x1b\\",
        lambda: f"\x1b[{y}\r;{x}H",  # a control inside a CSI: executed, then the CSI goes on
        lambda: f"\x1b[{n};{n};{n}K",  # too many parameters for EL: pyte raises, counted
        lambda: r.choice(("\x1b[?5h", "\x1b[?5l", "\x1b[5J", "\x1b[3K", "\x1b[?4m", "\x1b[>4;2m")),
        lambda: "\x1b#8" if r.random() < 0.1 else "\x1b[0m",
        lambda: f"\x1b[{'9' * r.randint(4, 7)}C", lambda: "\x1b[1;2;3;4;5;6;7;8;9;10m",
        lambda: "\x9b1;2H" if r.random() < 0.5 else "\x1bc" if r.random() < 0.1 else "\x1b[m",
        lambda: r.choice(("\x1b[", "\x1b", "\x1b[1;", "\x1b(")),  # cut short by whatever follows
    ][k]()


def generated(seed: int, cols: int, rows: int, n: int = 600) -> str:
    r = random.Random(seed)
    return "".join(_text(r, cols) if r.random() < 0.5 else _control(r, cols, rows) for _ in range(n))


# --------------------------------------------------------------------------- FastScreen vs pyte.Screen


def _bare_pair(cols: int, rows: int):
    fast, ref = FastScreen(cols, rows), pyte.Screen(cols, rows)
    return (fast, pyte.Stream(fast)), (ref, pyte.Stream(ref))


def _feed_both(pairs, text: str, step: int, where: str) -> None:
    (fast, fs), (ref, rs) = pairs
    for i in range(0, len(text), step):
        piece = text[i:i + step]
        errs = []
        for stream in (fs, rs):
            try:
                stream.feed(piece)
                errs.append(None)
            except Exception as e:  # bare pyte raises on some input; the fast screen must too
                errs.append(type(e))
        assert errs[0] == errs[1], f"{where} @{i}: fast raised {errs[0]}, pyte {errs[1]}"
        assert_same(fast, ref, f"{where} @{i}")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("size", [(20, 6), (80, 24)])
def test_fast_screen_equals_pyte_on_generated_streams(seed, size):
    text = generated(seed, *size)
    _feed_both(_bare_pair(*size), text, random.Random(seed).choice((1, 7, 64, 1000)), f"seed {seed} {size}")


@pytest.mark.parametrize("name", RECORDINGS)
def test_fast_screen_equals_pyte_on_recordings(name):
    text = (CAPTURES / f"{name}.bin").read_bytes().decode("utf-8", "replace")
    for size in ((80, 24), (40, 10)):
        _feed_both(_bare_pair(*size), text, 97, f"{name} {size}")


# --------------------------------------------------------------------------- Mirror vs Mirror on bare pyte


def _mirror_pair(cols: int, rows: int) -> tuple[Mirror, Mirror]:
    return Mirror(cols, rows), RefMirror(cols, rows)


def assert_mirrors_same(fast: Mirror, ref: Mirror, where: str) -> None:
    assert_same(fast.screen, ref.screen, where)
    assert fast.take_dirty() == ref.take_dirty(), where
    assert [fast.row(y) for y in range(fast.rows)] == [ref.row(y) for y in range(ref.rows)], where
    assert fast.cursor == ref.cursor and fast.snapshot() == ref.snapshot(), where


def _feed_mirrors(pair, data: bytes, sizes, r: random.Random, where: str) -> None:
    fast, ref = pair
    i = 0
    while i < len(data):
        step = r.choice(sizes)
        for m in pair:
            m.feed(data[i:i + step])
        i += step
        assert_same(fast.screen, ref.screen, f"{where} @{i}")
    assert_mirrors_same(fast, ref, where)


@pytest.mark.parametrize("name", RECORDINGS)
@pytest.mark.parametrize("sizes", [(1,), (3, 5, 7), (4096,)])
def test_mirror_equals_bare_pyte_mirror_on_recordings(name, sizes):
    data = (CAPTURES / f"{name}.bin").read_bytes()
    _feed_mirrors(_mirror_pair(80, 24), data, sizes, random.Random(1), name)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("size", [(20, 6), (80, 24)])
def test_mirror_equals_bare_pyte_mirror_on_generated_streams(seed, size):
    data = generated(seed, *size).encode("utf-8")
    r = random.Random(seed)
    _feed_mirrors(_mirror_pair(*size), data, (1, 2, 5, 31, 200, 4096), r, f"seed {seed} {size}")
    fast, ref = _mirror_pair(*size)  # and the same bytes in one feed
    fast.feed(data)
    ref.feed(data)
    assert_mirrors_same(fast, ref, f"seed {seed} {size} whole")


def test_wrap_at_the_last_column_is_pending_like_pyte():
    for autowrap in ("\x1b[?7h", "\x1b[?7l"):
        for text in ("x" * 10, "x" * 11, "x" * 25, "ab中", "abcdefgh中", "abcdefghi中z", "\x1b[1;10H中"):
            fast, ref = _mirror_pair(10, 3)
            for m in (fast, ref):
                m.feed((autowrap + text).encode())
            assert_mirrors_same(fast, ref, repr(autowrap + text))


def _runs_from_cells(m: Mirror, y: int) -> list[tuple[str, tuple]]:
    out: list[tuple[str, tuple]] = []
    for c in m.row(y):
        key = (c.fg, "bfightmagenta" if c.bg == "brightmagenta" else c.bg, c.bold, c.italics, c.underscore,
               c.strikethrough, c.reverse, c.blink)
        if out and out[-1][1] == key:
            out[-1] = (out[-1][0] + c.char, key)
        else:
            out.append((c.char, key))
    return out


def _norm_runs(runs: list[tuple[str, tuple]]) -> list[tuple[str, tuple]]:
    out: list[tuple[str, tuple]] = []
    for text, key in runs:
        if out and out[-1][1] == key:
            out[-1] = (out[-1][0] + text, key)
        elif text or not out:
            out.append((text, key))
    return [(t, k) for t, k in out if t]


@pytest.mark.parametrize("seed", range(12))
def test_runs_are_the_rows_cells_merged(seed):
    """What the pane draws (``Mirror.runs``) is exactly the row's cells, equal attributes merged."""
    m = Mirror(30, 8)
    m.feed(generated(seed, 30, 8).encode())
    for y in range(m.rows):
        assert _norm_runs(m.runs(y)) == _norm_runs(_runs_from_cells(m, y)), y


@pytest.mark.parametrize("seed", range(12))
def test_styled_runs_are_the_runs_styled(seed):
    """The pane's fast path (``styled_runs``) draws exactly what ``runs`` describes."""
    styles: dict[tuple, object] = {}
    style_of = lambda attrs: styles.setdefault(attrs, object())  # noqa: E731
    m = Mirror(30, 8)
    m.feed(generated(seed, 30, 8).encode())
    for y in range(m.rows):
        got = [(t, k) for t, k in m.styled_runs(y, style_of, None) if t]
        want = [(t, styles.setdefault(a, object())) for t, a in _norm_runs(m.runs(y))]
        merged: list = []
        for t, k in got:
            if merged and merged[-1][1] is k:
                merged[-1] = (merged[-1][0] + t, k)
            else:
                merged.append((t, k))
        assert merged == want, y


@pytest.mark.parametrize("seed", range(12))
def test_styled_runs_of_a_window_are_that_window(seed):
    """A cropped view's rows (``styled_runs`` with a column window) are the full row's cells
    between those columns; a row whose wide pairs a window could split answers None."""
    styles: dict[tuple, object] = {}
    style_of = lambda attrs: styles.setdefault(attrs, object())  # noqa: E731
    m = Mirror(30, 8)
    m.feed(generated(seed, 30, 8).encode())
    r = random.Random(seed)
    for y in range(m.rows):
        cells = [(c.char, styles.setdefault(_key(c), object())) for c in m.row(y)]
        for _ in range(5):
            a = r.randint(0, 29)
            b = r.randint(a + 1, 30)
            got = m.styled_runs(y, style_of, None, a, b)
            if got is None:  # only when a stored cell in the window is not one narrow character
                raw = [m.screen.buffer[y][x].data for x in range(a, b)]
                assert any(len(c) != 1 or c >= "\u1100" for c in raw), (y, a, b)
                continue
            assert _merged(got) == _merged(cells[a:b]), (y, a, b)


def _merged(runs) -> list:
    out: list = []
    for t, k in runs:
        if out and out[-1][1] is k:
            out[-1] = (out[-1][0] + t, k)
        elif t:
            out.append((t, k))
    return out


def _key(c) -> tuple:
    bg = "bfightmagenta" if c.bg == "brightmagenta" else c.bg
    return (c.fg, bg, c.bold, c.italics, c.underscore, c.strikethrough, c.reverse, c.blink)


@pytest.mark.parametrize("seed", range(10))
def test_clear_is_a_fresh_mirror(seed):
    """``Mirror.clear`` (the pane's reset before a repaint) leaves nothing behind."""
    size = (20, 6) if seed % 2 else (80, 24)
    used, fresh = Mirror(*size), Mirror(*size)
    used.feed(generated(seed, *size).encode() + b"\x1b[?1049h\x1b[5;3r\x1b7\x1bP unterminated")
    used.take_dirty()
    used.clear()
    assert_mirrors_same(used, fresh, "cleared")
    later = generated(seed + 1000, *size).encode()
    used.feed(later)
    fresh.feed(later)
    assert_mirrors_same(used, fresh, "cleared, then fed")


# --------------------------------------------------------------------------- scrollback rows


def _cell_by_cell(row, cols: int) -> str:
    """A row's text the obvious way: every column read, a missing one as the default cell."""
    return "".join(row[x].data for x in range(cols)).rstrip()


@pytest.mark.parametrize("seed", range(12))
def test_scrollback_reads_every_row_shape_as_cell_by_cell(seed):
    """``row_text`` (one pass in C for a row written left to right from column 0) reads every
    row the stress streams and recordings leave — sparse, out of order, wide characters, erased,
    wider than the screen after a resize — as reading each cell does; and the history a mirror
    keeps equals one kept cell by cell."""
    from attach.terminal.scrollback import Scrollback, row_text

    class CellByCell(Scrollback):
        def push_row(self, row, cols: int) -> None:
            self.push("" if row is None else _cell_by_cell(row, cols))

    r = random.Random(seed)
    cols, rows = r.choice(((20, 6), (80, 24), (132, 10)))
    datas = [generated(seed, cols, rows).encode()]
    datas += [(CAPTURES / f"{n}.bin").read_bytes() for n in RECORDINGS]
    fast_rows = shapes = 0
    for data in datas:
        m, ref = Mirror(cols, rows), Mirror(cols, rows)
        history, expected = Scrollback(), CellByCell()
        m.keep_history(history)
        ref.keep_history(expected)
        for i in range(0, len(data), 257):
            for mirror in (m, ref):
                mirror.feed(data[i:i + 257])
            if r.random() < 0.05:  # rows wider than the screen, then narrower ones
                width = r.choice((cols // 2, cols, cols + 7))
                m.resize(width, rows)
                ref.resize(width, rows)
            for row in m.screen.buffer.values():
                width = m.cols
                assert row_text(row, width) == _cell_by_cell(row, width)
                fast_rows += list(row) == list(range(len(row))) and len(row) <= width
                shapes += 1
        assert list(history.lines) == list(expected.lines)
    assert 0 < fast_rows < shapes  # both ways were taken
    dotted = pyte.screens.StaticDefaultDict(pyte.screens.Char("."))  # a default that shows
    dotted.update({0: pyte.screens.Char("a"), 1: pyte.screens.Char("b")})
    assert row_text(dotted, 5) == _cell_by_cell(dotted, 5) == "ab..."
