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


async def test_a_mesh_column_and_a_mesh_filter(tmp_path):
    """Two meshes' actions in one home: each row says its mesh; ``m`` shows one mesh, then the
    next, then all; a line from before meshes were logged reads ``-``; a hostile mesh name is text."""
    from cotal_tui.screens.actionlog import action_line

    path = tmp_path / "actions.jsonl"
    log = ActionLog(path)
    old = log.record("stop", "ada", "done")  # no mesh: an older line
    a = log.record("spawn", "w1", "requested", mesh="main")
    b = log.record("send", "#general", "sent", mesh="staging")
    c = log.record("stop", "w1", "done", mesh="main")
    evil = log.record("stop", "x", "done", mesh="ev\x1b]0;il\x07")

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(ActionLogScreen(path))

    app = Host()
    async with app.run_test(size=(120, 20)) as pilot:
        body = lambda: app.screen.query_one(ActionLogBody)  # noqa: E731
        await until(lambda: len(body().actions) == 5, timeout=5)
        assert [x.id for x in body().shown()] == [evil, c, b, a, old]
        assert [x.mesh for x in body().actions][1:] == ["main", "staging", "main", None]
        line = action_line(body().actions[1]).plain
        assert line.split()[1:4] == ["main", "stop", "w1"]
        assert action_line(body().actions[4]).plain.split()[1] == "-"
        assert "\x1b" not in action_line(body().actions[0]).plain
        seen = []
        for _ in range(5):
            await pilot.press("m")
            seen.append((body().mesh, [x.id for x in body().shown()]))
        assert seen[1] == ("main", [c, a])
        assert seen[2] == ("staging", [b])
        assert seen[3] == ("-", [old])
        assert seen[4] == (None, [evil, c, b, a, old])  # round to every mesh again
        assert "every mesh" in body().border_title


async def test_log_name_opens_it_filtered(tmp_path):
    path = tmp_path / "actions.jsonl"
    log = ActionLog(path)
    log.record("spawn", "w1", "requested", mesh="main")
    keep = log.record("send", "#general", "sent", mesh="staging")

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(ActionLogScreen(path, mesh="staging"))

    app = Host()
    async with app.run_test(size=(120, 20)):
        body = lambda: app.screen.query_one(ActionLogBody)  # noqa: E731
        await until(lambda: len(body().actions) == 2, timeout=5)
        assert [x.id for x in body().shown()] == [keep]
        assert "mesh staging" in body().border_title
