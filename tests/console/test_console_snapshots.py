"""SVG baselines of the console at 120×40 and 80×24 from deterministic model data (fixed
clock, UTC, no cursor blink, no animation). Update with ``pytest --snapshot-update``."""

from __future__ import annotations

import pytest
from support.console import make_app

from meshview.observe.spaces import SpaceInfo

SIZES = [pytest.param((120, 40), id="120x40"), pytest.param((80, 24), id="80x24")]


def _app(**kw):
    app = make_app(**kw)
    app.animation_level = "none"
    return app


@pytest.mark.parametrize("size", SIZES)
def test_main_view(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_dm_lens(snap_compare, size):
    assert snap_compare(_app(), press=["d"], terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_dm_lens_chat_only(snap_compare, size):
    assert snap_compare(_app(dm_visible=False), press=["d"], terminal_size=size)


@pytest.mark.parametrize("view", ["1", "2", "3"])
@pytest.mark.parametrize("size", SIZES)
def test_topology(snap_compare, size, view):
    assert snap_compare(_app(), press=["t", view], terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_needs_you(snap_compare, size):
    # wide: the rail column focused; narrow: the full-screen overlay
    press = ["n", "n"] if size[0] >= 100 else ["n"]
    assert snap_compare(_app(), press=press, terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare, size, monkeypatch):
    # the help's last line names the build; pinned so a version bump does not move the baseline
    import cotal_tui.screens.help as help_screen

    monkeypatch.setattr(help_screen, "version_line", lambda: "cotal-tui 0.1.0 (cotal-tui, the Python "
                        "terminal console; protocol 0.4, manager contract rev 21)")
    assert snap_compare(_app(), press=["question_mark"], terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_help_at_its_end(snap_compare, size, monkeypatch):
    """``G`` in help: the last section (terminal panes) and the build line on screen, END."""
    import cotal_tui.screens.help as help_screen

    monkeypatch.setattr(help_screen, "version_line", lambda: "cotal-tui 0.1.0 (cotal-tui, the Python "
                        "terminal console; protocol 0.4, manager contract rev 21)")
    assert snap_compare(_app(), press=["question_mark", "G"], terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_agent_detail_card(snap_compare, size):
    assert snap_compare(_app(), press=["h", "g", "enter"], terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_message_detail_card(snap_compare, size):
    assert snap_compare(_app(), press=["K", "enter"], terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_space_picker(snap_compare, size):
    from cotal_tui.app import CotalApp

    async def lister():
        return [SpaceInfo("alpha", 3, 2, 40), SpaceInfo("demo", 7, 3, 22),
                SpaceInfo("load-test", 0, 1, 1000)]

    app = CotalApp(list_spaces=lister, open_space=lambda s: None)
    app.animation_level = "none"

    async def settle(pilot):
        for _ in range(50):
            if "alpha" in "".join(app.screen.query_one("#space-list").line_texts()):
                break
            await pilot.pause(0.02)

    assert snap_compare(app, terminal_size=size, run_before=settle)
