"""The hints name the detach key the panes really use (``COTAL_DETACH_KEY``), not always Ctrl-]."""

from __future__ import annotations

from textual.app import App

from cotal_tui.screens.tile import TileScreen
from cotal_tui.seats import SeatSessions


async def _never() -> None:
    raise OSError("no mesh in this test")


async def test_a_promoted_tile_pane_names_the_configured_detach_key(monkeypatch):
    monkeypatch.setenv("COTAL_DETACH_KEY", "ctrl-b")
    app = App()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = TileScreen(SeatSessions("demo", _never), ["alice"])
        await app.push_screen(screen)
        await pilot.pause()
        pane = screen.panes[0]
        assert pane.detach_byte == 0x02
        pane.interactive = True
        pane.set_status("")
        assert pane.border_subtitle == "attached · Ctrl-B releases"
    monkeypatch.delenv("COTAL_DETACH_KEY")
    assert TileScreen(SeatSessions("demo", _never), ["bob"]).panes[0].detach_byte == 0x1D
