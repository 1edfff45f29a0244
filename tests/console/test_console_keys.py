"""Keys that go where they say: ``n`` goes to NEEDS YOU (opening the
rail when hidden) and ``N`` hides it, both listed in ``?``; in the DM lens ``c`` and ``r``
continue the selected conversation instead of refusing or posting to ``#general``."""

from __future__ import annotations

from support.console import console, make_app

from conftest import until
from test_console_focus import operator_app

WIDE = (120, 40)


async def test_n_goes_to_the_rail_and_N_hides_it():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        rail = scr.query_one("#rail")
        await pilot.press("h")
        await pilot.press("n")
        assert rail.display and scr.focused is rail
        await pilot.press("n")  # again: still there, still focused (never a hide)
        assert rail.display and scr.focused is rail
        await pilot.press("N")
        assert not rail.display and scr.focused.id == "roster"  # back where focus came from
        await pilot.press("n")  # hidden: n opens it and goes there
        assert rail.display and scr.focused is rail
        await pilot.press("N", "N")
        assert rail.display
        await pilot.press("question_mark")
        await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        body = app.screen.query_one("#help-body").line_texts()
        assert any(ln.split()[:1] == ["N"] and "hide / show the NEEDS-YOU rail" in ln
                   for ln in body), body
        assert any(ln.split()[:1] == ["n"] and "go to NEEDS YOU" in ln for ln in body), body


async def test_N_on_a_narrow_terminal_says_why():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("N")
        assert "needs a wide terminal" in (app.last_notice or "")


async def test_dm_lens_c_and_r_continue_the_selected_conversation(broker):
    from widgets.composer import Composer

    app = operator_app(broker)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        composer = scr.query_one(Composer)
        await pilot.press("d")
        await until(pilot, lambda: scr.focused.id == "dm-peers", what="the DM lens")
        peers = scr.query_one("#dm-peers")
        kind, first = peers.cursor_key
        assert kind == "peer"
        name = scr.snap.name_of(first)
        await pilot.press("c")
        await until(pilot, lambda: composer.is_open, what="the composer")
        assert composer.target.kind == "dm" and composer.target.to == first
        assert composer.target.label.startswith(f"@{name}")
        await pilot.press("escape")
        await until(pilot, lambda: not composer.is_open)
        # a conversation row: the other side of it, and r answers their last message
        await pilot.press("j")
        kind, owner, other = peers.cursor_key
        assert kind == "conv" and owner == first
        await pilot.press("l", "r")  # from the thread pane too
        await until(pilot, lambda: composer.is_open, what="the reply composer")
        t = composer.target
        assert t.kind == "dm" and t.to == other
        last = [m for m in scr.snap.dm_thread(owner, other) if m.from_id == other]
        if last:
            assert t.reply_to == last[-1].id
        await pilot.press("escape")
        await until(pilot, lambda: not composer.is_open)
        assert scr.focused.id == "dm-thread"
