"""Focus is unmistakable and comes back: the focused panel's title carries
a ``▶`` (so it survives NO_COLOR and any theme) and its rule turns heavy; ``h``/``l`` stop at
the edges; the search box, a lens, ``?`` and the composer hand focus back to the panel they
were opened from."""

from __future__ import annotations

from cotal_tui.cli.connection import target_from_args
from support.console import StaticSession, build_model, console, make_app, screen_text

from conftest import until
from cotal_tui.screens.console import FOCUS_MARK, ConsoleScreen

WIDE = (120, 40)


def marked(scr: ConsoleScreen) -> list[str]:
    return [w.id for w in scr._all_panels()
            if isinstance(w.border_title, str) and w.border_title.startswith(FOCUS_MARK)]


async def test_under_no_color_the_marker_is_the_focus(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("h")
        await until(pilot, lambda: f"{FOCUS_MARK}roster · 7 agents" in screen_text(app),
                    what="the marker, drawn without colour")
        assert screen_text(app).count("▶") == 1


async def test_the_focused_panel_alone_carries_the_marker():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        assert scr.focused.id == "feed" and marked(scr) == ["feed"]
        await pilot.press("h")
        await until(pilot, lambda: marked(scr) == ["roster"], what="the marker on the roster")
        assert f"{FOCUS_MARK}roster · 7 agents" in screen_text(app)
        assert screen_text(app).count("▶") == 1
        # a title that changes (the roster's count) keeps the marker
        from support.console import rec

        scr.session.model.apply_presence(rec("gus", "working", scr.session.model.clock()))
        await pilot.press("l", "l")
        await until(pilot, lambda: marked(scr) == ["rail"], what="the marker on the rail")
        assert "▶ NEEDS YOU · 2" in screen_text(app)
        # the focused rule is heavy, the others thin: shape, not only colour
        assert scr.query_one("#rail").styles.border_left[0] == "vkey"
        assert scr.query_one("#roster").styles.border_top[0] == "hkey"
        await pilot.press("h")
        assert scr.query_one("#feed").styles.border_top[0] == "heavy"


async def test_h_and_l_stop_at_the_edges():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        await pilot.press("h", "h", "h")
        assert scr.focused.id == "roster"
        await pilot.press("l", "l", "l", "l")
        assert scr.focused.id == "rail"
        await pilot.press("d")  # the DM lens: two panes, same rule
        await until(pilot, lambda: scr.focused is not None and scr.focused.id == "dm-peers")
        await pilot.press("h")
        assert scr.focused.id == "dm-peers"
        await pilot.press("l", "l")
        assert scr.focused.id == "dm-thread"


async def test_search_lens_and_help_give_focus_back_to_the_panel():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        await pilot.press("h")
        assert scr.focused.id == "roster"
        await pilot.press("slash")
        assert scr.focused.id == "search"
        await pilot.press("escape")
        assert scr.focused.id == "roster"
        await pilot.press("slash", "a", "enter")
        assert scr.focused.id == "roster"
        await pilot.press("escape")  # clears the kept query
        await pilot.press("d")
        await until(pilot, lambda: scr.focused.id == "dm-peers", what="the DM lens")
        await pilot.press("l")
        await pilot.press("escape", "escape")  # thread -> peers -> leave the lens
        await until(pilot, lambda: scr.lens == "body")
        assert scr.focused.id == "roster"
        await pilot.press("d")  # back in: the pane focus left there last
        await until(pilot, lambda: scr.lens == "dms")
        assert scr.focused.id == "dm-peers"
        await pilot.press("d")
        assert scr.focused.id == "roster"
        await pilot.press("l", "l", "question_mark")
        await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        await pilot.press("q")
        await until(pilot, lambda: app.screen is scr)
        assert scr.focused.id == "rail" and marked(scr) == ["rail"]


def operator_app(broker):
    """The demo model with an operator that may send (nothing is sent in these tests)."""
    import argparse

    from cotal_tui.app import CotalApp
    from cotal_tui.operator import Operator
    
    model, _ = build_model()
    session = StaticSession(model)
    target = target_from_args(argparse.Namespace(server=[broker.url], space="demo"))
    session.operator = Operator(target, "demo", name="opsy", read_only=None,  # type: ignore[attr-defined]
                                roster=lambda: model.snapshot().peers)
    return CotalApp(session=session)


async def test_the_composer_gives_focus_back_to_the_panel_it_came_from(broker):
    from widgets.composer import Composer

    app = operator_app(broker)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        composer = scr.query_one(Composer)
        for panel, keys in (("roster", ["h", "c"]), ("rail", ["l", "l", "r"]),
                            ("dm-peers", ["d", "c"])):
            await pilot.press(*keys)
            await until(pilot, lambda: composer.is_open, what=f"the composer from {panel}")
            assert marked(scr) == []  # the composer has focus, no panel claims it
            await pilot.press("escape")
            await until(pilot, lambda: not composer.is_open, what="the composer closed")
            assert scr.focused.id == panel, panel
            assert marked(scr) == [panel]
            if panel == "dm-peers":
                await pilot.press("d")
