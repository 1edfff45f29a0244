"""The terminal pane: dirty rows only, merged runs, colours, wide chars, crop/centre, key ownership."""

from __future__ import annotations

from pathlib import Path

from rich.color import Color
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.geometry import Region
from textual.widget import Widget

from attach.terminal.mirror import Mirror
from attach.terminal.keycodes import encode_key, encode_mouse, encode_paste
from widgets.terminal_pane import FLOOD_FRAME_S, FULL_FRAME_S, TerminalPane, rich_color
from conftest import until

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def capture(*names: str) -> bytes:
    return b"".join((CAPTURES / f"{n}.bin").read_bytes() for n in names)


class Sent(list):
    """The pane's link in these tests: what the pane sends, in order (no session behind it)."""

    def send(self, data: bytes) -> None:
        self.append(data)

    def parsed(self, nbytes: int) -> None:
        pass


class PaneApp(App):
    """Textual's default priority ``ctrl+q`` stays; more priority bindings are added on purpose."""

    BINDINGS = [
        Binding("f1", "bell", priority=True),
        Binding("escape", "bell", priority=True),
        Binding("tab", "bell", priority=True),
        Binding("ctrl+d", "bell", priority=True),
    ]

    def __init__(self, pane: TerminalPane) -> None:
        super().__init__()
        self.pane = pane
        self.sent = Sent()
        pane.bind_link(self.sent)
        self.detached = 0

    def compose(self) -> ComposeResult:
        yield self.pane

    def on_mount(self) -> None:
        self.pane.focus()

    def on_terminal_pane_detach(self, event: TerminalPane.Detach) -> None:
        self.detached += 1


async def settle(pilot, pane: TerminalPane) -> None:
    await pilot.pause(0.05)
    await until(pilot, lambda: not pane.frame_pending)
    await pilot.pause()


def test_colour_mapping():
    assert rich_color("default") is None
    assert rich_color("brown") == Color.parse("yellow")
    assert rich_color("brightblue") == Color.parse("bright_blue")
    assert rich_color("bfightmagenta") == Color.parse("bright_magenta")
    assert rich_color("ff8700") == Color.parse("#ff8700")


async def test_renders_the_mirror_and_merges_runs():
    pane = TerminalPane(40, 6)
    app = PaneApp(pane)
    async with app.run_test(size=(40, 6)) as pilot:
        pane.feed(b"plain \x1b[31mred red\x1b[0m \x1b[1;44mbold\x1b[0m \xe4\xb8\xad\xe6\x96\x87!")
        await settle(pilot, pane)
        strip = pane.render_line(0)
        assert strip.cell_length == 40
        assert strip.text.startswith("plain red red bold 中文!")
        segs = [s for s in strip if s.text]
        # plain / red run / space / bold-on-blue / rest: equal styles merged into single segments
        assert [s.text for s in segs][:4] == ["plain ", "red red", " ", "bold"]
        assert segs[1].style.color == Color.parse("red")
        assert segs[3].style.bold and segs[3].style.bgcolor == Color.parse("blue")
        # the wide pair counts two cells and the "" stub adds nothing
        assert strip.crop(19, 23).text == "中文"


async def test_only_dirty_rows_are_refreshed():
    pane = TerminalPane(30, 10)
    app = PaneApp(pane)
    async with app.run_test(size=(30, 10)) as pilot:
        for y in range(10):
            pane.feed(f"\x1b[{y + 1};1Hrow {y}".encode())
        await settle(pilot, pane)
        before = pane.rows_refreshed
        frames = pane.frames
        cached = {y: pane.cached_row(y) for y in range(10)}
        pane.feed(b"\x1b[4;1Hchanged")  # row 3 changes, cursor moves from row 9 to row 3
        await settle(pilot, pane)
        assert pane.frames == frames + 1
        assert pane.rows_refreshed - before == 2  # row 3 and the old cursor row 9
        assert pane.render_line(3).text.startswith("changed")
        for y in (0, 1, 2, 4, 5):  # untouched rows keep their cached Strip object
            assert pane.cached_row(y) is cached.get(y)


async def test_a_scrolled_row_keeps_its_strip_and_lines_match_textuals_own_pass():
    pane = TerminalPane(20, 5)
    app = PaneApp(pane)
    async with app.run_test(size=(24, 7)) as pilot:  # a row of margin above and below, 2 columns aside
        pane.feed(b"".join(b"\x1b[3%dmline %d\x1b[0m \x1b[1mbold\x1b[0m\r\n" % (31 + i, i) for i in range(4)))
        await settle(pilot, pane)
        whole = Region(0, 0, 24, 7)
        before = pane.render_lines(whole)
        pane.feed(b"line 4\r\n")  # the screen scrolls up one row
        await settle(pilot, pane)
        after = pane.render_lines(whole)
        assert after[1].text.startswith("  line 1 bold")
        # a row showing what the row below it showed a frame ago is that row's Strip (and the
        # line filters' and cuts' caches it carries), not a rebuilt one
        for y in (1, 2):
            assert after[y] is before[y + 1]
        # and every line is what Textual's own per-line pass makes of the pane's rows
        textual = Widget.render_lines(pane, whole)
        assert [list(s) for s in after] == [list(s) for s in textual]
        assert [list(s) for s in pane.render_lines(Region(3, 2, 10, 3))] == \
            [list(s) for s in Widget.render_lines(pane, Region(3, 2, 10, 3))]


async def test_a_flood_repaints_at_the_flood_rate():
    pane = TerminalPane(20, 5)
    app = PaneApp(pane)
    async with app.run_test(size=(20, 5)) as pilot:
        pane.feed(b"".join(b"fill %d\r\n" % i for i in range(8)))
        await settle(pilot, pane)

        pane.feed(b"a\r\nb\r\nc\r\n")  # scrolls three rows: every row changes, but it is readable
        pane.frame_now()
        assert pane.frame_gap == FULL_FRAME_S
        pane.feed(b"".join(b"flood %d\r\n" % i for i in range(50)))  # ten screens since the last frame
        pane.frame_now()
        assert pane.frame_gap == FLOOD_FRAME_S > FULL_FRAME_S
        pane.feed(b"d\r\n")
        pane.frame_now()
        assert pane.frame_gap == FULL_FRAME_S
        await settle(pilot, pane)
        assert pane.content_text()[-2] == "d"


async def test_many_chunks_coalesce_into_few_frames():
    pane = TerminalPane(80, 24)
    app = PaneApp(pane)
    async with app.run_test(size=(80, 24)) as pilot:
        for i in range(2000):
            pane.feed(f"line {i}\r\n".encode())
        await settle(pilot, pane)
        assert pane.frames <= 3
        assert pane.content_text()[-2] == "line 1999"


async def test_synchronized_output_holds_the_frame():
    pane = TerminalPane(20, 4)
    app = PaneApp(pane)
    async with app.run_test(size=(20, 4)) as pilot:
        pane.feed(b"\x1b[?2026hhalf")
        await pilot.pause(0.1)
        assert pane.frames == 0 and pane.frame_pending
        pane.feed(b" done\x1b[?2026l")
        await settle(pilot, pane)
        assert pane.frames == 1
        assert pane.render_line(0).text.startswith("half done")


async def test_alternate_screen_from_a_recorded_vim_session():
    pane = TerminalPane(80, 24)
    app = PaneApp(pane)
    async with app.run_test(size=(80, 24)) as pilot:
        pane.feed(capture("bash_prompt"))
        await settle(pilot, pane)
        main = [pane.render_line(y).text for y in range(24)]
        pane.feed(capture("vim_open"))
        await settle(pilot, pane)
        assert pane.mirror.alt_screen
        ref = Mirror(80, 24)
        ref.feed(capture("bash_prompt", "vim_open"))
        assert [pane.render_line(y).text.rstrip() for y in range(24)] == ref.text_lines()
        pane.feed(capture("vim_quit"))
        await settle(pilot, pane)
        assert not pane.mirror.alt_screen
        assert [pane.render_line(y).text for y in range(3)] != [""] * 3
        assert pane.render_line(0).text == main[0]


async def test_smaller_pane_crops_around_the_cursor_and_larger_centres():
    pane = TerminalPane(40, 20)
    app = PaneApp(pane)
    async with app.run_test(size=(30, 8)) as pilot:
        for y in range(20):
            pane.feed(f"\x1b[{y + 1};1H{y:02d}".encode() + b"." * 38)
        await settle(pilot, pane)
        # the cursor is on the last row: the view follows it (rows 12..19), starting at the right
        assert pane.render_line(7).text.startswith("..")  # cropped on the right edge
        assert pane.to_remote(0, 7) == (10, 19)
        pane.feed(b"\x1b[1;1H")
        await settle(pilot, pane)
        assert pane.render_line(0).text.startswith("00")
        assert pane.remote_size == (40, 20)  # never resized on its own
    pane2 = TerminalPane(10, 3)
    app2 = PaneApp(pane2)
    async with app2.run_test(size=(20, 7)) as pilot:
        pane2.feed(b"abcdefghij")
        await settle(pilot, pane2)
        assert pane2.render_line(0).text.strip() == ""  # top margin
        assert pane2.render_line(2).text == "     abcdefghij     "
        assert pane2.to_remote(5, 2) == (0, 0) and pane2.to_remote(0, 0) is None


async def test_cursor_overlay_only_when_focused():
    pane = TerminalPane(10, 2)
    app = PaneApp(pane)
    async with app.run_test(size=(10, 2)) as pilot:
        pane.feed(b"ab")
        await settle(pilot, pane)
        s = list(pane.render_line(0).crop(2, 3))
        assert s[0].style.reverse
        pane.blur()
        await pilot.pause()
        s = list(pane.render_line(0).crop(2, 3))
        assert not s[0].style.reverse
        pane.focus()
        pane.feed(b"\x1b[?25l")  # the program hid its cursor
        await settle(pilot, pane)
        assert not list(pane.render_line(0).crop(2, 3))[0].style.reverse


async def test_interactive_pane_owns_every_key_including_priority_bindings():
    pane = TerminalPane(20, 4, interactive=True)
    app = PaneApp(pane)
    async with app.run_test(size=(20, 4)) as pilot:
        await pilot.press("ctrl+q", "ctrl+c", "ctrl+d", "ctrl+p", "tab", "f1", "f5", "up", "a", "A")
        await until(pilot, lambda: len(app.sent) == 10)
        assert app.sent == [b"\x11", b"\x03", b"\x04", b"\x10", b"\t", b"\x1bOP", b"\x1b[15~",
                            b"\x1b[A", b"a", b"A"]
        assert app.is_running  # ctrl+q did not quit
        pane.feed(b"\x1b[?1h")  # application cursor keys
        await pilot.press("up", "left")
        await until(pilot, lambda: len(app.sent) == 12)
        assert app.sent[-2:] == [b"\x1bOA", b"\x1bOD"]


async def test_escape_goes_to_the_program_at_once_and_only_ctrl_bracket_detaches():
    """The default: nothing is held. Esc, and Esc Esc, reach the program as typed."""
    pane = TerminalPane(20, 4, interactive=True)
    app = PaneApp(pane)
    async with app.run_test(size=(20, 4)) as pilot:
        await pilot.press("escape")
        assert app.sent == [b"\x1b"]  # in the same key dispatch: no timer, no window
        await pilot.press("escape", "escape", "x")
        assert app.sent == [b"\x1b"] * 3 + [b"x"]
        assert app.detached == 0
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: app.detached == 1)
        assert app.sent == [b"\x1b"] * 3 + [b"x"]  # the detach key itself is never sent


async def test_opted_in_esc_esc_holds_an_esc_for_its_window_and_detaches():
    from attach.terminal.detach import parse_detach_keys

    pane = TerminalPane(20, 4, interactive=True, detach=parse_detach_keys("ctrl-], esc esc"))
    app = PaneApp(pane)
    async with app.run_test(size=(20, 4)) as pilot:
        await pilot.press("escape")
        assert app.sent == []
        await until(pilot, lambda: app.sent == [b"\x1b"])
        await pilot.press("escape", "x")  # a key inside the window flushes the Esc first
        await until(pilot, lambda: b"".join(app.sent) == b"\x1b\x1bx")
        assert app.detached == 0
        await pilot.press("escape", "escape")
        await until(pilot, lambda: app.detached == 1)
        await pilot.pause(0.5)
        assert b"".join(app.sent) == b"\x1b\x1bx"
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: app.detached == 2)
        assert b"".join(app.sent) == b"\x1b\x1bx"


async def test_a_tmux_style_sequence_detaches_and_a_broken_one_is_typed():
    from attach.terminal.detach import parse_detach_keys

    pane = TerminalPane(20, 4, interactive=True, detach=parse_detach_keys("ctrl-b d"))
    app = PaneApp(pane)
    async with app.run_test(size=(20, 4)) as pilot:
        await pilot.press("ctrl+b", "x")  # not d: both go to the program, in order
        assert app.sent == [b"\x02x"]
        await pilot.press("escape", "ctrl+right_square_bracket")  # not detach keys here
        assert app.sent[1:] == [b"\x1b", b"\x1d"]
        await pilot.press("ctrl+b", "d")
        await until(pilot, lambda: app.detached == 1)
        assert len(app.sent) == 3


async def test_a_read_only_pane_leaves_on_the_detach_key_and_sends_nothing():
    pane = TerminalPane(20, 4)
    app = PaneApp(pane)
    async with app.run_test(size=(20, 4)) as pilot:
        await pilot.press("x", "ctrl+right_square_bracket")
        await until(pilot, lambda: app.detached == 1)
        assert app.sent == []


async def test_read_only_pane_sends_nothing_and_leaves_bindings_alone():
    pane = TerminalPane(20, 4)
    app = PaneApp(pane)
    async with app.run_test(size=(20, 4)) as pilot:
        await pilot.press("a", "ctrl+c", "up", "f5")
        await pilot.paste("pasted") if hasattr(pilot, "paste") else None
        await pilot.pause(0.1)
        assert app.sent == []


async def test_paste_and_mouse_follow_the_program_modes():
    pane = TerminalPane(20, 4, interactive=True)
    app = PaneApp(pane)
    async with app.run_test(size=(20, 4)) as pilot:
        from textual import events

        pane.post_message(events.Paste("one\ntwo"))
        await until(pilot, lambda: len(app.sent) == 1)
        assert app.sent[-1] == b"one\rtwo"
        pane.feed(b"\x1b[?2004h")
        pane.post_message(events.Paste("x"))
        await until(pilot, lambda: len(app.sent) == 2)
        assert app.sent[-1] == b"\x1b[200~x\x1b[201~"
        await pilot.click(TerminalPane, offset=(3, 1))
        await pilot.pause(0.1)
        assert len(app.sent) == 2  # no tracking asked for: clicks stay local
        pane.feed(b"\x1b[?1000h\x1b[?1006h")
        await pilot.click(TerminalPane, offset=(3, 1))
        await until(pilot, lambda: len(app.sent) == 4)
        assert app.sent[2:] == [b"\x1b[<0;4;2M", b"\x1b[<0;4;2m"]


def test_key_encoding_table():
    assert encode_key("ctrl+right_square_bracket", None) == b"\x1d"
    assert encode_key("ctrl+@", None) == b"\x00"
    assert encode_key("ctrl+backslash", None) == b"\x1c"
    assert encode_key("alt+x", "x") == b"\x1bx"
    assert encode_key("ctrl+up", None) == b"\x1b[1;5A"
    assert encode_key("shift+f5", None) == b"\x1b[15;2~"
    assert encode_key("f13", None) == b"\x1b[1;2P"
    assert encode_key("shift+tab", None) == b"\x1b[Z"
    assert encode_key("enter", "\r") == b"\r"
    assert encode_key("backspace", "\x7f") == b"\x7f"
    assert encode_key("delete", None) == b"\x1b[3~"
    assert encode_key("ctrl+delete", None) == b"\x1b[3;5~"
    assert encode_key("space", " ") == b" "
    assert encode_key("home", None, app_cursor=True) == b"\x1bOH"
    assert encode_key("ü", "ü") == "ü".encode()
    assert encode_paste("a\r\nb", True) == b"\x1b[200~a\rb\x1b[201~"
    assert encode_paste("evil\x1b[201~rest", True) == b"\x1b[200~evilrest\x1b[201~"
    assert encode_mouse(0, 0, 0, press=True, wheel=-1) == b"\x1b[<64;1;1M"
    assert encode_mouse(1, 2, 3, press=True, sgr=False) == b"\x1b[M #$"


def test_textual_parser_round_trip_for_control_bytes():
    """Every C0 byte Textual parses comes back as the same byte (Ctrl-H/Backspace excepted)."""
    from textual._xterm_parser import XTermParser

    for b in [*range(0, 8), *range(9, 27), *range(28, 32), 0x7F]:
        p = XTermParser()
        events_ = list(p.feed(chr(b)))
        assert len(events_) == 1, b
        ev = events_[0]
        assert encode_key(ev.key, ev.character) == bytes([b]), (b, ev.key)
    for seq in ["\x1b[A", "\x1b[1;5C", "\x1b[3~", "\x1b[5;2~", "\x1bOP", "\x1b[15~", "\x1b[24~",
                "\x1b[Z", "\x1b[H", "\x1b[F"]:
        p = XTermParser()
        (ev,) = list(p.feed(seq))
        assert encode_key(ev.key, ev.character) == seq.encode(), seq
