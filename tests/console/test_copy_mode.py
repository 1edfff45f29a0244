"""Scrollback and copy mode in a terminal pane: what scrolled off is kept (bounded), PgUp in a
peek and the detach key then ``[`` in an attached pane enter copy mode, ``/`` finds a line 5,000
lines up and highlights it, ``y`` writes exactly the selection to ``$COTAL_HOME/clips``, the
clipboard (OSC 52) is touched only by ``Y``, the wheel on an alternate-screen program reaches it
as arrow keys, and a skipped flood is a marked gap in the history."""

from __future__ import annotations

from pathlib import Path

from textual import events

from attach.terminal.scrollback import Scrollback
from test_terminal_pane import PaneApp
from widgets.copy_mode import CopyMode
from widgets.terminal_pane import COPY_STYLES, PREFIX_S, WHEEL_LINES, TerminalPane
from conftest import until

NEEDLE = "NEEDLE-4711"


def _lines(n: int, needle_at: int | None = None) -> bytes:
    return b"".join((f"{NEEDLE} here\r\n" if i == needle_at else f"line {i:05d}\r\n").encode()
                    for i in range(n))


def _wheel(pane: TerminalPane, up: bool) -> None:
    cls = events.MouseScrollUp if up else events.MouseScrollDown
    pane._wheel(cls(pane, 2, 2, 0, -1 if up else 1, 0, False, False, False), -1 if up else 1)


def _row_text(pane: TerminalPane, y: int) -> str:
    return "".join(s.text for s in pane.render_line(y))


def test_history_is_bounded_in_lines_and_bytes_and_skips_the_alternate_screen():
    h = Scrollback(max_lines=100, max_bytes=10_000)
    pane_mirror = TerminalPane(40, 5).mirror
    pane_mirror.keep_history(h)
    pane_mirror.feed(_lines(500))
    assert len(h) == 100 and h.lines[-1] == "line 00495" and h.dropped == 396
    h2 = Scrollback(max_lines=10_000, max_bytes=2_000)
    for _ in range(1000):
        h2.push("x" * 99)
    assert h2.bytes <= 2_000 and len(h2) == 20
    n = len(h)
    pane_mirror.feed(b"\x1b[?1049h" + _lines(50) + b"\x1b[?1049l")
    assert len(h) == n  # a full-screen program's screen never enters the history


async def test_peek_pgup_search_5000_lines_up_highlights_the_match(tmp_path, monkeypatch):
    pane = TerminalPane(60, 20)  # read-only: a peek
    app = PaneApp(pane)
    async with app.run_test(size=(60, 20)) as pilot:
        pane.feed(_lines(6000, needle_at=6000 - 5000))
        await pilot.press("pageup")
        cm = pane.copy
        assert cm is not None and len(cm.lines) == 6000 - 19 + 20
        assert cm.top < len(cm.lines) - cm.height  # paged up
        assert "history from" in _row_text(pane, cm.height)  # the status row says where it starts
        await pilot.press("slash", *NEEDLE, "enter")
        await until(pilot, lambda: cm.match_i >= 0, 5.0, "the match")
        assert cm.lines[cm.row].startswith(NEEDLE) and cm.row == 1000
        y = cm.row - cm.top
        assert 0 <= y < cm.height
        strip = pane.render_line(y)
        hot = [s for s in strip if s.text.strip() and s.style and s.style.bgcolor is not None]
        assert any(NEEDLE[:4] in s.text or s.text in NEEDLE for s in hot)
        assert COPY_STYLES["current"].bgcolor in {s.style.bgcolor for s in hot}
        # new output while in copy mode never moves what is read
        top = cm.top
        pane.feed(_lines(100))
        await pilot.pause()
        assert pane.copy is cm and cm.top == top
        await pilot.press("q")
        assert pane.copy is None and "line 00099" in "\n".join(pane.content_text())


async def test_yank_writes_exactly_the_selection_and_only_Y_touches_the_clipboard(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    pane = TerminalPane(40, 10)
    pane.clip_name = "ada"
    yanked: list[TerminalPane.Yanked] = []

    class YankApp(PaneApp):
        def on_terminal_pane_yanked(self, event: TerminalPane.Yanked) -> None:
            yanked.append(event)

    app = YankApp(pane)
    clip: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", lambda text: clip.append(text))
    async with app.run_test(size=(40, 10)) as pilot:
        pane.feed(_lines(50))
        await pilot.press("pageup")
        cm = pane.copy
        cm.row, cm.col = 10, 0
        cm._keep_visible()
        await pilot.press("v", "j", "j", "y")
        await until(pilot, lambda: yanked, 5.0, "the yank")
        path = Path(yanked[0].path)
        assert path.parent == tmp_path / "clips" and path.name.startswith("ada-")
        assert path.read_text() == "line 00010\nline 00011\nline 00012\n"
        assert path.stat().st_mode & 0o777 == 0o600
        assert clip == []  # y never drives the clipboard
        # a block: columns 5..9 of two lines, to the clipboard too (Y: the explicit request)
        cm.row, cm.col = 20, 5
        await pilot.press("ctrl+v", "j", "l", "l", "l", "l", "Y")
        await until(pilot, lambda: len(yanked) == 2, 5.0, "the second yank")
        assert clip == ["00020\n00021"] and Path(yanked[1].path).read_text() == "00020\n00021\n"


async def test_detach_key_then_bracket_is_copy_mode_and_alone_it_detaches():
    pane = TerminalPane(40, 8, interactive=True)
    app = PaneApp(pane)
    async with app.run_test(size=(40, 8)) as pilot:
        pane.feed(_lines(30))
        await pilot.press("ctrl+right_square_bracket", "left_square_bracket")
        assert pane.copy is not None and app.detached == 0 and app.sent == []
        await pilot.press("k", "q")  # keys in copy mode never reach the program
        assert pane.copy is None and app.sent == []
        await pilot.press("ctrl+right_square_bracket")
        await pilot.pause(PREFIX_S + 0.1)
        await until(pilot, lambda: app.detached == 1, 2.0, "the detach")
        assert app.sent == []


async def test_wheel_on_an_alternate_screen_sends_arrows_and_on_a_shell_scrolls_back():
    pane = TerminalPane(40, 8, interactive=True)
    app = PaneApp(pane)
    async with app.run_test(size=(40, 8)) as pilot:
        pane.feed(_lines(30) + b"\x1b[?1049h")  # a full-screen program, no mouse reporting
        _wheel(pane, up=True)
        _wheel(pane, up=False)
        await pilot.pause()
        assert app.sent == [b"\x1b[A" * 3, b"\x1b[B" * 3] and pane.copy is None
        pane.feed(b"\x1b[?1h")  # application cursor keys: the arrows follow the mode
        _wheel(pane, up=True)
        await pilot.pause()
        assert app.sent[-1] == b"\x1bOA" * 3
        pane.feed(b"\x1b[?1000h\x1b[?1006h")  # it asked for the mouse: the wheel is forwarded
        _wheel(pane, up=True)
        await pilot.pause()
        assert app.sent[-1].startswith(b"\x1b[<64;")
        pane.feed(b"\x1b[?1000l\x1b[?1049l")  # back on the shell: the wheel scrolls back
        n = len(app.sent)
        at = len(pane.history.lines) + pane.mirror.cursor[1]  # the cursor's line in copy mode
        _wheel(pane, up=True)
        assert pane.copy is not None and len(app.sent) == n
        assert pane.copy.row == at - WHEEL_LINES  # one notch: three lines up from the cursor


async def test_copy_mode_on_an_alternate_screen_says_there_is_no_scrollback():
    pane = TerminalPane(40, 8)
    app = PaneApp(pane)
    async with app.run_test(size=(40, 8)) as pilot:
        pane.feed(_lines(30) + b"\x1b[?1049h\x1b[Hfull screen")
        await pilot.press("pageup")
        cm = pane.copy
        assert cm.alt and len(cm.lines) == 8 and cm.lines[0] == "full screen"
        assert "no scrollback" in cm.message


def test_a_skipped_flood_and_a_new_session_are_marked_in_the_history():
    pane = TerminalPane(40, 5)
    pane.feed(_lines(20))
    pane._pending.append(b"x" * 3_200_000)
    pane._pending_bytes = 3_200_000
    assert pane.drop_pending() == 3_200_000
    assert pane.history.lines[-1] == "\u2014 3.2 MB skipped \u2014"
    pane.reset()
    assert pane.history.lines[-1].startswith("\u2014 new session ")
    pane.feed(_lines(10))
    assert pane.history.lines[-1].startswith("line ")  # the new mirror still keeps history


def test_search_is_sliced_and_smartcase():
    cm = CopyMode.open([f"row {i}" for i in range(10_000)] + ["Mixed Case"], [], 10, header="", alt=False,
                       cursor_row=0)
    cm.start_search("row 99", True)
    slices = 0
    while not cm.search_slice(2000):
        slices += 1
    assert slices >= 4 and len(cm.matches) == 111 and cm.match_i >= 0  # 99, 990-999, 9900-9999
    cm.start_search("mixed", True)
    while not cm.search_slice():
        pass
    assert len(cm.matches) == 1
    cm.start_search("Mixed", True)
    while not cm.search_slice():
        pass
    assert len(cm.matches) == 1
    cm.start_search("MIXED", True)
    while not cm.search_slice():
        pass
    assert cm.matches == [] and "not found" in cm.message
