"""The status bar's link state: never cut, at any width; the spaces
overview shows the live link instead of ``◌ connecting…`` forever."""

from __future__ import annotations

import pytest
from conftest import until
from support.console import make_app, screen_text

from meshview.observe.spaces import SpaceInfo


def status_line(app) -> str:
    return screen_text(app).rstrip("\n").splitlines()[-1]


@pytest.mark.parametrize("width", [60, 80, 100, 120])
async def test_link_state_is_never_cut_hints_go_first(width):
    app = make_app()
    async with app.run_test(size=(width, 24)) as pilot:
        await pilot.pause()
        line = status_line(app)
        assert "● demo" in line and " connected" in line, line
        assert "? help" in line, line  # the hints shrink to this before any link state goes
        from cotal_tui.screens.console import ConsoleScreen

        model = next(s for s in app.screen_stack if isinstance(s, ConsoleScreen)).session.model
        model.set_connection("reconnecting")
        await until(pilot, lambda: "reconnecting" in status_line(app), what=status_line(app))
        assert "◌ demo" in status_line(app)
        model.set_backlog(lagging=True, dropped=7)
        await until(pilot, lambda: "⚠ lagging · 7 dropped" in status_line(app))
        assert "reconnecting" in status_line(app)


async def test_a_notice_never_cuts_the_link_state():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.notify_line("a fairly long notice about something that just happened here")
        await until(pilot, lambda: "just happened" in status_line(app))
        assert " connected" in status_line(app)


class Lister:
    """What run_console hands the overview: the listing plus the link it lists over."""

    server = "nats://127.0.0.1:4222"

    def __init__(self) -> None:
        self.state = "connected"

    async def __call__(self):
        return [SpaceInfo("alpha", 3, 2, 40), SpaceInfo("demo", 7, 3, 22)]

    def link(self) -> str:
        return self.state


async def test_spaces_overview_shows_the_live_link():
    from cotal_tui.app import CotalApp

    lister = Lister()
    app = CotalApp(list_spaces=lister, open_space=lambda s: None)
    async with app.run_test(size=(100, 24)) as pilot:
        await until(pilot, lambda: "alpha" in screen_text(app), what="space rows")
        await until(pilot, lambda: "● connected" in status_line(app), what=status_line(app))
        assert "connecting…" not in status_line(app)
        assert "nats://127.0.0.1:4222" in status_line(app) and "2 spaces" in status_line(app)
        lister.state = "reconnecting"
        await until(pilot, lambda: "◌ reconnecting" in status_line(app), timeout=5)
        await pilot.press("q")


async def test_spaces_overview_with_a_plain_lister_says_connected_once_listed():
    from cotal_tui.app import CotalApp

    async def lister():
        return [SpaceInfo("alpha", 3, 2, 40)]

    app = CotalApp(list_spaces=lister, open_space=lambda s: None)
    async with app.run_test(size=(100, 24)) as pilot:
        await until(pilot, lambda: "● connected" in status_line(app), what=status_line(app))
        assert "1 space" in status_line(app)
        await pilot.press("q")


@pytest.mark.parametrize("width", [80, 120])
async def test_internal_errors_are_counted_on_the_bar_and_said_in_help(width):
    """A listener that raised (stream, notifier, chat) shows as a shape, not only a colour:
    ``⚠ N internal …`` beside the link, the last error in full on the tooltip and in help."""
    from rich.text import Text

    from cotal_tui.screens.console import ConsoleScreen
    from cotal_tui.screens.help import HelpBody
    from widgets.status_bar import StatusBar

    app = make_app()
    async with app.run_test(size=(width, 24)) as pilot:
        await pilot.pause()
        assert "internal" not in status_line(app)
        screen = next(s for s in app.screen_stack if isinstance(s, ConsoleScreen))
        bar = screen.query_one(StatusBar)
        assert bar.tooltip is None
        screen.session.model.set_listener_errors(2, "drain: ValueError: [boom]")
        await until(pilot, lambda: "⚠ 2 internal" in status_line(app), what=status_line(app))
        line = status_line(app)
        assert " connected" in line and "● demo" in line, line  # the link is still never cut
        if width >= 100:
            assert "⚠ 2 internal errors" in line, line
        assert isinstance(bar.tooltip, Text) and "drain: ValueError: [boom]" in bar.tooltip.plain
        await pilot.press("question_mark")
        await until(pilot, lambda: app.screen.query(HelpBody), what="the help screen")
        assert "⚠ 2 internal errors" in screen_text(app) and "drain: ValueError" in screen_text(app)
