"""``?`` help reads like ``less`` (issue 38 item 3): it scrolls by line, page and half page,
goes to either end, searches with ``/`` and ``n``/``N``, closes with ``q``/Esc only, and every
section can be brought on screen at 140×42 and 80×24."""

from __future__ import annotations

import pytest
from conftest import until
from support.console import make_app

SIZES = [(140, 42), (80, 24)]


async def open_help(pilot, app):
    from cotal_tui.screens.help import HelpScreen

    await pilot.pause()
    await pilot.press("question_mark")
    await until(pilot, lambda: isinstance(app.screen, HelpScreen)
                and app.screen.body.line_count > app.screen.body.page_height, what="help")
    return app.screen


@pytest.mark.parametrize("size", SIZES)
async def test_keys_move_the_page_and_the_footer_says_where(size):
    app = make_app()
    async with app.run_test(size=size) as pilot:
        help_ = await open_help(pilot, app)
        body = help_.body
        n, h = body.line_count, body.page_height
        assert body.top == 0
        assert help_.footer_text == f"help · lines 1-{h}/{n} · {h * 100 // n}% · / search · " \
                                    "q close"
        await pilot.press("j")
        assert body.top == 1 and f"lines 2-{h + 1}/{n}" in help_.footer_text
        await pilot.press("down", "down")
        assert body.top == 3
        await pilot.press("k", "up")
        assert body.top == 1
        await pilot.press("g")
        assert body.top == 0
        await pilot.press("k")  # nothing above the top
        assert body.top == 0
        await pilot.press("space")
        assert body.top == min(h, n - h)
        await pilot.press("b")
        assert body.top == 0
        await pilot.press("f")
        assert body.top == min(h, n - h)
        await pilot.press("pageup")
        assert body.top == 0
        await pilot.press("pagedown")
        assert body.top == min(h, n - h)
        await pilot.press("g", "d")
        assert body.top == min(h // 2, n - h)
        await pilot.press("u")
        assert body.top == 0
        await pilot.press("G")
        assert body.top == n - h and body.at_end
        assert body.visible_lines()[-1] == body.line_texts()[-1]
        assert f"lines {n - h + 1}-{n}/{n} · END" in help_.footer_text, help_.footer_text
        await pilot.press("home")
        assert body.top == 0 and "END" not in help_.footer_text
        await pilot.press("end")
        assert body.at_end
        await pilot.press("j", "space", "d")  # the last page stays the last page
        assert body.top == n - h
        await pilot.press("g")
        body.scroll_down(animate=False)  # what the mouse wheel does: the footer follows
        await until(pilot, lambda: body.top > 0 and f"lines {body.top + 1}-" in help_.footer_text,
                    what=lambda: help_.footer_text)


@pytest.mark.parametrize("size", SIZES)
async def test_every_section_can_be_brought_on_screen(size):
    """Paging down from the top shows every line once at least; the last section's last row
    (the terminal panes') and the build line are on the last page."""
    app = make_app()
    async with app.run_test(size=size) as pilot:
        help_ = await open_help(pilot, app)
        body = help_.body
        seen = set(range(body.top, body.top + len(body.visible_lines())))
        while not body.at_end:
            before = body.top
            await pilot.press("space")
            assert body.top > before, "space did not move before the end"
            seen |= set(range(body.top, body.top + len(body.visible_lines())))
        lines = body.line_texts()
        assert seen == set(range(len(lines)))
        for title in ("feed keys", "global keys", "terminal panes (attach, peek, tile)"):
            assert title in lines
        shown = body.visible_lines()
        copy_row = max(i for i, t in enumerate(lines) if t.strip().startswith("copy mode"))
        tail = lines[copy_row:lines.index("", copy_row)]  # the copy-mode row, wrapped
        assert tail and all(t in shown for t in tail), (tail, shown)
        assert "q back" in " ".join(tail)  # its last words: nothing was cut at the right
        assert shown[-1] == lines[-1] and "contract rev" in shown[-1]
        width = body.content_width
        assert all(len(t.rstrip()) <= width for t in lines), width  # wrapped, never cut


@pytest.mark.parametrize("size", SIZES)
async def test_search_marks_goes_and_walks_the_matches(size):
    app = make_app()
    async with app.run_test(size=size) as pilot:
        help_ = await open_help(pilot, app)
        body = help_.body
        await pilot.press("slash")
        assert help_.prompt == "" and app.focused is None and help_.footer_text.startswith("/")
        await pilot.press(*"cop")  # incremental: marked and gone to before Enter
        rows = [i for i, t in enumerate(body.line_texts()) if "cop" in t.lower()]
        assert len(rows) >= 2 and body.match_rows == rows
        assert body.current_match == rows[0]
        assert body.top <= rows[0] < body.top + body.page_height
        strip = body.render_line(rows[0] - body.top)
        marked = "".join(s.text for s in strip if s.style is not None and s.style.reverse)
        assert marked.lower() == "cop", marked
        await pilot.press("x", "backspace")  # Backspace takes back a letter
        assert help_.prompt == "cop" and help_.footer_text.startswith("/cop")
        await pilot.press("y", "enter")
        assert help_.prompt is None and body.search_text == "copy"
        rows = body.match_rows
        assert body.current_match == rows[0] and "Pattern" not in help_.footer_text
        await pilot.press("n")
        assert body.current_match == rows[1]
        assert body.top <= rows[1] < body.top + body.page_height
        await pilot.press("N")
        assert body.current_match == rows[0]
        await pilot.press("N")  # none above the first: said, the page stays
        assert body.current_match == rows[0]
        assert "Pattern not found above: copy" in help_.footer_text, help_.footer_text
        await pilot.press("j")  # a move clears the message
        assert "Pattern not found" not in help_.footer_text
        for _ in rows:
            await pilot.press("n")
        assert body.current_match == rows[-1] and "Pattern not found below" in help_.footer_text
        # smart case: an upper-case letter matches case
        await pilot.press("g", "slash", *"Copy", "enter")
        assert body.match_rows == [i for i, t in enumerate(body.line_texts()) if "Copy" in t]


async def test_a_search_that_finds_nothing_says_so_like_less():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        help_ = await open_help(pilot, app)
        body = help_.body
        await pilot.press("d")
        top = body.top
        await pilot.press("slash", *"zqxw")
        assert body.match_rows == [] and body.top == top
        await pilot.press("enter")
        assert "Pattern not found: zqxw" in help_.footer_text, help_.footer_text
        assert body.top == top and help_.prompt is None
        await pilot.press("n")
        assert "Pattern not found below: zqxw" in help_.footer_text


async def test_esc_clears_the_prompt_first_then_closes():
    from cotal_tui.screens.console import ConsoleScreen
    from cotal_tui.screens.help import HelpScreen

    app = make_app()
    async with app.run_test(size=(140, 42)) as pilot:
        help_ = await open_help(pilot, app)
        body = help_.body
        await pilot.press("slash", *"global", "enter")
        kept, top = body.match_rows, body.top
        assert kept
        await pilot.press("slash", *"feed")  # typed, not kept: q and n are letters here
        assert help_.prompt == "feed" and isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, HelpScreen) and help_.prompt is None
        assert body.search_text == "global" and body.match_rows == kept and body.top == top
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, ConsoleScreen), what="closed by esc")
        await open_help(pilot, app)
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConsoleScreen), what="closed by q")


async def test_other_keys_do_nothing():
    from cotal_tui.screens.help import HelpScreen

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        help_ = await open_help(pilot, app)
        await pilot.press("j", "j")
        footer = help_.footer_text
        # keys the console binds (x the DM lens, t topology, : the palette, R runs) and others
        await pilot.press("x", "z", "t", "colon", "R", "question_mark", "enter", "1", "tab",
                          "left", "h")
        await pilot.pause()
        assert app.screen is help_ and isinstance(app.screen, HelpScreen)
        assert help_.body.top == 2 and help_.footer_text == footer


async def test_the_pager_keys_follow_the_keymap():
    """help.* ids are remappable like every binding (and `cotal config` lists them); a remap
    onto a key the pager keeps is dropped by the keymap check."""
    from cotal_tui.cli.config import known_bindings
    from cotal_tui.keymap import check_bindings

    ids = {b.id for b in known_bindings() if b.owner == "HelpScreen"}
    assert {"help.down", "help.up", "help.page-down", "help.page-up", "help.half-down",
            "help.half-up", "help.top", "help.end", "help.search", "help.next", "help.prev",
            "help.close"} <= ids
    good, problems = check_bindings({"help.down": "q"}, known_bindings())
    assert good == {} and "q is already help.close in HelpScreen" in problems[0], problems

    app = make_app(keymap={"help.down": "e", "help.search": "s"})
    async with app.run_test(size=(80, 24)) as pilot:
        help_ = await open_help(pilot, app)
        await pilot.press("e")
        assert help_.body.top == 1
        await pilot.press("j")  # remapped away
        assert help_.body.top == 1
        assert help_.footer_text.endswith("s search · q close"), help_.footer_text
        await pilot.press("s")
        assert help_.prompt == ""


async def test_help_lists_bindings_added_to_any_widget():
    """The content comes from the live bindings: a widget class (as the roster's filter or the
    feed's fold will be) with a new binding shows in help, with its keymap remap."""
    from textual.app import App, ComposeResult
    from textual.binding import Binding
    from textual.screen import Screen
    from textual.widgets import Static

    from cotal_tui.screens.help import HelpBody, HelpScreen, describe_bindings

    class Probe(Static, can_focus=True):
        BINDINGS = [Binding("F", "fold", "fold the thread (a key added later)", id="probe.fold")]

    class Main(Screen):
        BINDINGS = [Binding("question_mark", "help", "help", id="probe.help"),
                    Binding("P", "pin", "pin an agent (another later key)", id="probe.pin")]

        def compose(self) -> ComposeResult:
            yield Probe("probe")

        def action_help(self) -> None:
            self.app.push_screen(HelpScreen(*describe_bindings(self)))

    class ProbeApp(App):
        def on_mount(self) -> None:
            self.set_keymap({"probe.fold": "ctrl+f"})
            self.push_screen(Main())

    app = ProbeApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.focused, Probe), what="probe focused")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        lines = app.screen.query_one(HelpBody).line_texts()
        assert "Probe keys" in lines
        assert any(t.split()[:1] == ["^f"] and "fold the thread" in t for t in lines), lines
        assert any(t.split()[:1] == ["P"] and "pin an agent" in t for t in lines), lines


def test_long_rows_wrap_under_their_description():
    from rich.cells import cell_len
    from rich.text import Text

    from cotal_tui.screens.help import HelpBody, wrap

    parts = wrap(Text("alpha beta gamma delta"), 11, 2)
    assert [p.plain for p in parts] == ["alpha beta ", "  gamma ", "  delta"]
    assert [p.plain for p in wrap(Text("abcdefghij"), 4)] == ["abcd", "efgh", "ij"]
    # wide characters and one word longer than a line (a peer's name in a problem line)
    wide = "名" * 13 + " " + "x" * 30
    parts = wrap(Text(wide), 9, 2)
    assert all(cell_len(p.plain) <= 9 for p in parts), [p.plain for p in parts]
    assert parts[0].plain + "".join(p.plain[2:] for p in parts[1:]) == wide
    long = "word " * 40
    [(_, lines)] = HelpBody("feed", [("j", long)], [("q", "quit")]).build(60)
    rows = [t.plain for t in lines if "word" in t.plain]
    assert len(rows) > 1 and all(len(r.rstrip()) <= 60 for r in rows)
    assert " ".join(r.split(maxsplit=1)[-1] if i == 0 else r for i, r in enumerate(rows)).split() \
        == long.split()  # every word once, none cut


async def test_in_a_replay_space_pages_the_help_not_the_replay():
    """The replay's keys (Space, ←/→, [ ]) take priority on its own screen only: over it, help
    pages with Space and the replay stays as it was."""
    from pathlib import Path

    from cotal_tui.replay_app import ReplayApp
    from cotal_tui.screens.help import HelpScreen
    from meshview.record.replay import ReplaySession, load_recording

    rec = load_recording(str(Path(__file__).resolve().parents[1] / "fixtures" / "recording-v2"
                             / "team.jsonl.gz"))
    session = ReplaySession(rec, speed=0.0001)
    app = ReplayApp(session=session)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.screen.is_mounted and "replay" in type(app.screen).__name__
                    .lower(), what="the replay console")
        paused = session.player.paused
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        body = app.screen.body
        await until(pilot, lambda: body.line_count > body.page_height, what="help built")
        await pilot.press("space")
        assert body.top == min(body.page_height, body.line_count - body.page_height)
        assert session.player.paused == paused
        await pilot.press("q")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen), what="help closed")
