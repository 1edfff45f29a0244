"""The ``:log`` lens (cotal_tui/screens/actionlog.py): newest first, and an outcome appended
later (sent -> acknowledged) replaces the shown one on the next re-read."""

from __future__ import annotations

from textual.app import App

from conftest import until
from cotal_tui.actionlog import ActionLog
from cotal_tui.screens.actionlog import ActionLogBody, ActionLogScreen


async def test_the_lens_shows_newest_first_and_follows_outcomes(tmp_path):
    path = tmp_path / "log" / "actions.jsonl"
    log = ActionLog(path)
    first = log.record("spawn", "ada", "requested")
    sent = log.record("send", "#general", "sent", message_id="m-1")

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(ActionLogScreen(path))

    app = Host()
    async with app.run_test(size=(120, 20)) as pilot:
        body = lambda: app.screen.query_one(ActionLogBody)  # noqa: E731
        await until(lambda: len(body().actions) == 2, timeout=5)
        assert [a.id for a in body().actions] == [sent, first]
        assert [a.outcome for a in body().actions] == ["sent", "requested"]
        log.settle(sent, "acknowledged", message_id="m-1")
        log.settle(first, "joined")
        await until(lambda: [a.outcome for a in body().actions] == ["acknowledged", "joined"],
                    timeout=5, what="the settled outcomes")
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, ActionLogScreen), timeout=3)


async def test_the_palette_opens_the_log(tmp_path, monkeypatch):
    from support.console import make_app, screen_text

    path = tmp_path / "actions.jsonl"
    monkeypatch.setenv("COTAL_ACTION_LOG", str(path))
    ActionLog(path).record("stop", "ada", "done")
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.press("colon")
        await until(pilot, lambda: type(app.screen).__name__ == "MeshPalette", 5.0, "the palette")
        await pilot.press(*"log")
        await until(pilot, lambda: "the action log" in screen_text(app), 5.0, "the log hit")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ActionLogScreen), 5.0, "the log")
        await until(lambda: [a.target for a in app.screen.query_one(ActionLogBody).actions] == ["ada"], 5.0)
