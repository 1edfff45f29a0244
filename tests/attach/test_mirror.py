"""The headless terminal mirror against recorded captures, tmux as an independent terminal, and itself."""

from __future__ import annotations

import itertools
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attach.terminal.mirror import Cell, Mirror

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
CASES = {
    "ls_color": ["ls_color"],
    "colors_wide": ["colors_wide"],
    "bash_prompt": ["bash_prompt"],
    "vim_open": ["vim_open"],
    "vim_quit": ["vim_open", "vim_quit"],
    "less_open": ["less_open"],
    "less_quit": ["less_open", "less_quit"],
    "top": ["top"],
}


def capture(*names: str) -> bytes:
    return b"".join((CAPTURES / f"{n}.bin").read_bytes() for n in names)


def feed_chunked(m: Mirror, data: bytes, size: int) -> None:
    for i in range(0, len(data), size):
        m.feed(data[i : i + size])


def state(m: Mirror) -> dict:
    """Everything a snapshot must reproduce, as comparable data."""
    s = m.screen
    return {
        "rows": [m.row(y) for y in range(m.rows)],
        "cursor": m.cursor,
        "raw_x": s.cursor.x,
        "pen": s.cursor.attrs[1:],
        "alt": m.alt_screen,
        "modes": (m.bracketed_paste, m.mouse_tracking, m.mouse_sgr, m.app_cursor, m.app_keypad,
                  m.focus_events, m.autowrap),
        "title": m.title,
        "margins": s.margins,
    }


# --------------------------------------------------------------------------- tmux


class Tmux:
    """One tmux pane of a given size whose terminal we write to directly.

    The pane runs ``cat`` in raw mode into a file, so tmux's replies (to DSR 6n) land there:
    we send ``ESC[6n`` after our bytes and wait for its reply, which tmux only writes once it
    has processed everything before it.
    """

    _ids = itertools.count()

    def __init__(self, tmp: Path, cols: int = 80, rows: int = 24) -> None:
        self.sock = f"cotal-mirror-{os.getpid()}-{next(self._ids)}"
        self.replies = tmp / f"{self.sock}.replies"
        self.replies.touch()
        self.requests = 0
        self._tmux("new-session", "-d", "-x", str(cols), "-y", str(rows),
                   f"stty raw -echo; exec cat > {self.replies}", ";", "set-option", "-g", "status", "off")
        self._await(lambda: self.fmt("#{pane_width}x#{pane_height}") == f"{cols}x{rows}"
                    and "-echo" in self._stty())
        self.tty = self.fmt("#{pane_tty}")
        self.socket_path = self.fmt("#{socket_path}")

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", *args],
                              check=True, capture_output=True, text=True).stdout

    def _stty(self) -> str:
        tty = self.fmt("#{pane_tty}")
        return subprocess.run(["stty", "-a", "-F", tty], capture_output=True, text=True).stdout

    @staticmethod
    def _await(cond, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise TimeoutError("tmux condition not met")
            time.sleep(0.02)

    def fmt(self, f: str) -> str:
        return self._tmux("display-message", "-p", f).rstrip("\n")

    def feed(self, data: bytes) -> None:
        self.requests += data.count(b"\x1b[6n") + 1
        with open(self.tty, "wb", buffering=0) as t:
            for i in range(0, len(data), 4096):
                t.write(data[i : i + 4096])
            t.write(b"\x1b[6n")
        want = self.requests
        self._await(lambda: len(re.findall(rb"\x1b\[\d+;\d+R", self.replies.read_bytes())) >= want)

    def lines(self, rows: int) -> list[str]:
        out = self._tmux("capture-pane", "-p").split("\n")[:rows]
        return [line.rstrip() for line in out] + [""] * (rows - len(out))

    def facts(self) -> dict:
        keys = ("cursor_x", "cursor_y", "alternate_on", "cursor_flag", "keypad_cursor_flag", "keypad_flag",
                "mouse_standard_flag", "mouse_button_flag", "mouse_all_flag", "mouse_sgr_flag", "wrap_flag")
        vals = self.fmt("|".join(f"#{{{k}}}" for k in keys)).split("|")
        return dict(zip(keys, vals))

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.sock, "kill-server"], capture_output=True)
        Path(self.socket_path).unlink(missing_ok=True)


@pytest.fixture
def tmux(tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: no independent terminal to compare against")
    panes: list[Tmux] = []

    def make(cols: int = 80, rows: int = 24) -> Tmux:
        panes.append(Tmux(tmp_path, cols, rows))
        return panes[-1]

    yield make
    for p in panes:
        p.close()


def mirror_facts(m: Mirror) -> dict:
    x, y, visible = m.cursor
    return {
        "cursor_x": str(x), "cursor_y": str(y), "alternate_on": str(int(m.alt_screen)),
        "cursor_flag": str(int(visible)), "keypad_cursor_flag": str(int(m.app_cursor)),
        "keypad_flag": str(int(m.app_keypad)),
        "mouse_standard_flag": str(int(m.mouse_tracking == 1000)),
        "mouse_button_flag": str(int(m.mouse_tracking == 1002)),
        "mouse_all_flag": str(int(m.mouse_tracking == 1003)),
        "mouse_sgr_flag": str(int(m.mouse_sgr)), "wrap_flag": str(int(m.autowrap)),
    }


def assert_same_as_tmux(m: Mirror, t: Tmux) -> None:
    assert m.text_lines() == t.lines(m.rows)
    facts = t.facts()
    facts["cursor_x"] = str(min(int(facts["cursor_x"]), m.cols - 1))  # tmux reports a pending wrap as x == cols
    assert mirror_facts(m) == facts


# --------------------------------------------------------------------------- captures vs tmux


@pytest.mark.parametrize("case", sorted(CASES))
def test_capture_matches_tmux(case, tmux):
    data = capture(*CASES[case])
    m = Mirror(80, 24)
    feed_chunked(m, data, 7)  # odd chunking: splits escapes and UTF-8 sequences
    whole = Mirror(80, 24)
    whole.feed(data)
    assert state(m) == state(whole)
    assert m.errors == 0
    t = tmux()
    t.feed(data)
    assert_same_as_tmux(m, t)


@pytest.mark.parametrize("prog", ["vim", "less"])
def test_late_attach_snapshot_in_tmux(prog, tmux):
    """A client attaching while the program is in the alt screen sees it, then the main screen on exit."""
    opened, quit_ = capture(f"{prog}_open"), capture(f"{prog}_quit")
    host = Mirror(80, 24)
    host.feed(capture("bash_prompt"))
    host.feed(opened)
    assert host.alt_screen

    direct, late = tmux(), tmux()
    direct.feed(capture("bash_prompt") + opened)
    late.feed(b"stale junk on the client's screen\r\n" * 30)
    late.feed(host.snapshot())
    assert_same_as_tmux(host, late)
    assert late.lines(24) == direct.lines(24)

    host.feed(quit_)
    direct.feed(quit_)
    late.feed(quit_)
    assert not host.alt_screen
    assert late.lines(24) == direct.lines(24)
    assert_same_as_tmux(host, late)
    assert "demo:~$ echo hello" in "\n".join(late.lines(24))


def test_snapshot_of_colours_in_tmux(tmux):
    """The snapshot of a coloured, wide-character screen renders identically in tmux (text and cursor)."""
    m = Mirror(80, 24)
    m.feed(capture("colors_wide"))
    t = tmux()
    t.feed(m.snapshot())
    assert_same_as_tmux(m, t)
    assert t.fmt("#{pane_title}") == m.title == "demo title"


# --------------------------------------------------------------------------- snapshot round trip


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("size", [(80, 24), (120, 32)])
def test_snapshot_roundtrip(case, size):
    m = Mirror(*size)
    m.feed(capture(*CASES[case]))
    copy = Mirror(*size)
    copy.feed(m.snapshot())
    assert state(copy) == state(m)
    assert copy.snapshot() == m.snapshot()  # deterministic, like the reference's repeat attach
    if m.alt_screen:
        m.feed(b"\x1b[?1049l")
        copy.feed(b"\x1b[?1049l")
        assert not copy.alt_screen
        assert state(copy) == state(m)


def test_snapshot_roundtrip_attributes_modes_pending_wrap():
    m = Mirror(20, 6)
    m.feed(b"\x1b]2;t\x07\x1b[1;3;4;5;7;9;38;2;1;2;3;48;5;200mA\x1b[0;91;105mB\x1b[0;33;44mC\x1b[0m")
    m.feed(b"\x1b[2;1H\x1b[41m\x1b[K\x1b[3;1H\xe4\xb8\xad\xf0\x9f\x98\x80x")
    m.feed(b"\x1b[?2004h\x1b[?1003h\x1b[?1006h\x1b[?1h\x1b=\x1b[?1004h\x1b[?7l\x1b[2;5r")
    m.feed(b"\x1b[4;1H" + b"z" * 20 + b"\x1b[32;1m\x1b[?25l")  # cursor left pending at the last column
    assert m.screen.cursor.x == 20
    main = state(m)
    m.feed(b"\x1b[?1049h\x1b[5;5Halt\x1b[35m")
    copy = Mirror(20, 6)
    copy.feed(m.snapshot())
    assert state(copy) == state(m)
    for x in (m, copy):
        x.feed(b"\x1b[?1049l")
    assert state(copy) == state(m)
    assert state(m)["rows"] == main["rows"]
    assert m.row(0)[0] == Cell("A", "010203", "ff00d7", True, True, True, True, True, True)
    assert m.row(0)[1] == Cell("B", "brightred", "brightmagenta")
    assert m.row(1)[10].bg == "red"


# --------------------------------------------------------------------------- alternate screen


@pytest.mark.parametrize("mode", [1049, 1047, 47])
def test_alt_screen_restores_main(mode):
    m = Mirror(20, 5)
    m.feed(b"main 1\r\nmain 2\x1b[3;4H")
    before, cursor = m.text_lines(), m.cursor
    m.take_dirty()
    m.feed(b"\x1b[?%dh" % mode)
    assert m.alt_screen and m.text_lines() == [""] * 5  # alt is cleared on enter
    assert m.take_dirty() == set(range(5))
    m.feed(b"\x1b[Hfull screen\x1b[5;10H")
    m.feed(b"\x1b[?%dl" % mode)
    assert not m.alt_screen
    assert m.text_lines() == before
    assert m.take_dirty() == set(range(5))
    if mode == 1049:
        assert m.cursor == cursor
    else:
        assert m.cursor == (9, 4, True)  # 1047/47 do not save the cursor


def test_alt_reenter_clears_and_resize_applies_to_both():
    m = Mirror(20, 6)
    m.feed(b"a\r\nb\r\nc\r\nd\r\ne\r\nprompt$ ")
    m.feed(b"\x1b[?1049hjunk\x1b[?1049h")
    assert m.text_lines() == [""] * 6
    m.resize(10, 4)
    assert len(m.row(0)) == 10
    m.feed(b"\x1b[?1049l")
    assert m.text_lines() == ["c", "d", "e", "prompt$"]  # top lines gave way, cursor line kept
    assert m.cursor == (8, 3, True)


# --------------------------------------------------------------------------- bytes, widths, dirty rows


def test_utf8_split_across_feeds_and_invalid_bytes():
    text = "héllo 中文 😀 ok".encode()
    m = Mirror(40, 3)
    for i in range(len(text)):
        m.feed(text[i : i + 1])
    assert m.text_lines()[0] == "héllo 中文 😀 ok"
    m.feed(b"\r\n\xff\xfe ok \xe4\xb8")
    m.feed(b"\r\nnext")
    assert m.text_lines()[1:] == ["\ufffd\ufffd ok \ufffd", "next"]


def test_fuzz_never_raises():
    rnd = random.Random(1234)
    m = Mirror(30, 8)
    alphabet = [b"\x1b", b"[", b"?", b";", b"1049", b"h", b"l", b"m", b"5", b"38:2", b"\xe4", b"\xb8", b"\xad",
                b"\xff", b"P", b"\\", b"\x07", b"]", b"H", b"J", b"K", b"b", b"S", b"T", b">", b"x", b"\r\n", b"9999"]
    for _ in range(3000):
        m.feed(b"".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 20))))
        m.take_dirty()
        if rnd.random() < 0.01:
            m.resize(rnd.randint(1, 40), rnd.randint(1, 10))
    assert all(len(m.row(y)) == m.cols for y in range(m.rows))
    copy = Mirror(m.cols, m.rows)
    copy.feed(m.snapshot())
    assert copy.text_lines() == m.text_lines()


def test_wide_chars_take_two_cells():
    m = Mirror(10, 2)
    m.feed("中a😀".encode())
    row = m.row(0)
    assert [c.char for c in row[:5]] == ["中", "", "a", "😀", ""]
    assert m.cursor[:2] == (5, 0)
    m.feed(b"\x1b[1;2Hx")  # overwrite the second half: the orphaned first half becomes a space
    assert [c.char for c in m.row(0)[:3]] == [" ", "x", "a"]


def test_wide_char_at_last_column_wraps_whole():
    m = Mirror(10, 3)
    m.feed("123456789中".encode())
    assert m.text_lines()[:2] == ["123456789", "中"]
    assert [c.char for c in m.row(1)[:2]] == ["中", ""]


def test_resize_grow_and_shrink():
    m = Mirror(10, 3)
    m.feed(b"0123456789\r\nline2")
    m.take_dirty()
    m.resize(5, 3)
    assert m.take_dirty() == {0, 1, 2}
    assert (m.cols, m.rows) == (5, 3)
    assert m.text_lines() == ["01234", "line2", ""]
    assert m.cursor[0] == 4
    m.resize(12, 5)
    assert all(len(m.row(y)) == 12 for y in range(5))
    m.feed(b"\r\n\tX")
    assert m.text_lines()[2] == "        X"


def test_dirty_rows_minimal():
    m = Mirror(20, 6)
    m.feed(b"one\r\ntwo\r\nthree")
    m.take_dirty()
    m.feed(b"!")
    assert m.take_dirty() == {2}
    m.feed(b"\x1b[2;2Hw")  # change on row 1; the cursor also left row 2
    assert m.take_dirty() == {1, 2}
    m.feed(b"x")
    assert m.take_dirty() == {1}
    assert m.take_dirty() == set()
    m.feed(b"\x1b[6;1H\n")  # scroll moves every row
    assert m.take_dirty() == set(range(6))


# --------------------------------------------------------------------------- modes and what pyte misreads


def test_scrolled_counts_the_lines_scrolled_off():
    m = Mirror(10, 3)
    m.feed(b"a\r\nb\r\n")  # down to the last row: nothing scrolled yet
    assert m.scrolled == 0
    m.feed(b"c\r\nd\r\ne\r\n")  # three line feeds on the last row
    assert m.scrolled == 3
    m.feed(b"\x1b[1;2r\x1b[2;1H\n\n")  # inside a two-row scroll region, at its bottom
    assert m.scrolled == 5
    assert m.text_lines()[:2] == ["", ""]


def test_modes_tracked_across_chunk_boundaries():
    m = Mirror()
    m.feed(b"\x1b[?20")
    m.feed(b"04h\x1b[?10")
    m.feed(b"02;1006h\x1b")
    m.feed(b"[?1h")
    assert (m.bracketed_paste, m.mouse_tracking, m.mouse_sgr, m.app_cursor) == (True, 1002, True, True)
    m.feed(b"\x1b[?1003h")
    assert m.mouse_tracking == 1003
    m.feed(b"\x1b[?1000l\x1b[?2004l\x1b[?1l\x1b[?25l")
    assert (m.bracketed_paste, m.mouse_tracking, m.app_cursor, m.cursor[2]) == (False, None, False, False)


def test_prefilter_fixes_pyte_misreads():
    m = Mirror(30, 4)
    m.feed(b"\x1b[>4;2m\x1b[>c\x1b[=5u\x1b[?u\x1b[!pA")  # XTMODKEYS, DA2, kitty kbd, DECSTR: no effect
    assert m.row(0)[0] == Cell("A", "default", "default")
    m.feed(b"\x1bP$q q")
    m.feed(b"\x1b\\B\x1b_apc payload\x07C")  # DCS/APC payloads never drawn, even split
    m.feed(b"\x1b[38:2::10:20:30;4:3mD\x1b[4:0;58;5;9mE\x1b[0m")
    m.feed(b"F\x01\x02G\xc2\x85H")  # stray C0/C1 controls do not truncate the run
    m.feed(b"\r\nab\x1b[3b|")  # REP
    assert m.text_lines()[:2] == ["ABCDEFGH", "abbbb|"]
    row = m.row(0)
    assert (row[3].fg, row[3].underscore) == ("0a141e", True)
    assert (row[4].fg, row[4].underscore, row[4].blink) == ("0a141e", False, False)
    m.feed(b"\x1b[?4m\x1b[H\x1b[S")  # XTQMODKEYS (pyte would raise), then SU scrolls up
    assert m.text_lines()[:2] == ["abbbb|", ""]
    m.feed(b"\x1b[2T")
    assert m.text_lines()[:4] == ["", "", "abbbb|", ""]
    assert m.errors == 0


def test_line_drawing_charset():
    m = Mirror(10, 2)
    m.feed(b"\x1b(0lqqk\x1b(B ok")
    assert m.text_lines()[0] == "┌──┐ ok"


def test_attach_does_not_import_textual_or_rich():
    code = "import sys, attach.terminal.mirror; print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual','rich')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2]).stdout
    assert out.strip() == "[]"
