"""While a recording runs the status bar says so, with its size as it grows: ``● rec 2.1 MiB``; gone again when the recording stops."""

from __future__ import annotations

from support.console import make_app, pid

from conftest import until
from cotal_tui.recording import toggle_recording
from cotal_tui.screens.console import ConsoleScreen
from meshview.wire.decode import Applied


def bar_text(app) -> str:
    scr = next(s for s in reversed(app.screen_stack) if isinstance(s, ConsoleScreen))
    return scr.query_one("#status").left().plain


async def test_the_status_bar_shows_a_running_recording_and_its_size(tmp_path, monkeypatch):
    import os

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "● rec" not in bar_text(app)
        toggle_recording(app)  # what ``:record`` runs
        await until(pilot, lambda: "● rec " in bar_text(app), what="the rec badge")
        first = bar_text(app).split("● rec ")[1]
        model = app.screen.session.model
        for i in range(3000):  # enough incompressible text to move the size shown
            model.apply_message(Applied(kind="channel", id=f"r{i}", ts=model.clock(),
                                        from_id=pid("gus"),
                                        from_name="gus", from_role="qa", channel="general",
                                        text=os.urandom(48).hex()))
        await until(pilot, lambda: bar_text(app).split("● rec ")[-1] != first, 20,
                    what="the size to grow")
        toggle_recording(app)
        await until(pilot, lambda: "● rec" not in bar_text(app), what="the badge gone")
