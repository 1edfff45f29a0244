"""Workflow runs in the console, against the demo's run host on a real broker (the manager's
run-ps/run-status/run-answer through attach/control/runs.py, polled by attach/control/runs_poll.py): a waiting
checkpoint appears in NEEDS-YOU, ``r`` answers it from the rail, the row leaves and the run
completes; the runs lens and the journal show it with the step key verbatim; a second answer to
the settled step is the manager's refusal, in its words; an open mesh's refusal is said by name;
``released`` never renders as failed; the poll keeps one call in flight per manager."""

from __future__ import annotations

import dataclasses

import nats

from conftest import until
from cotal_tui.app import CotalApp
from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.screens.runs import AnswerScreen, JournalScreen, RunsScreen
from meshview.link.connect import ConnectTarget
from meshview.model.mesh import MeshModel
from meshview.model.runs_state import RunView
from support.console import StaticSession
from widgets.needs_you import NeedsYouRail
from widgets.runs import JournalView, RunsList
from support.runhost import host  # noqa: F401 - the shared run-host fixture

STEP = "/checkpoint:approve#0"


def console(broker, space: str) -> tuple[CotalApp, StaticSession]:
    model = MeshModel(space, server=broker.url)
    model.set_connection("connected")
    session = StaticSession(model, space=space, target=ConnectTarget((broker.url,), space, timeout=3))
    return CotalApp(session=session), session


async def test_a_waiting_checkpoint_is_answered_from_needs_you_and_leaves(broker, space, host):
    app, session = console(broker, space)
    async with app.run_test(size=(140, 40)) as pilot:
        rail = app.screen.query_one(NeedsYouRail)
        await until(pilot, lambda: rail.runs is not None and rail.runs.needs, 20, "a run in NEEDS-YOU")
        [need] = rail.runs.needs
        assert need.pause.step_key == STEP and need.pause.prompt == "ship release 1.8?"
        text = " ".join(" ".join(x.split()) for x in rail.line_texts())  # the rail wraps the card
        assert '⏸ run-' in text and 'approve: "ship release 1.8?" · deadline in ' in text
        assert STEP in text
        assert rail.border_title.endswith("NEEDS YOU · 1")  # the run (no agent waits here)


async def test_answer_from_the_rail_then_journal_then_refusal(broker, space, host):
    app, session = console(broker, space)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = app.screen
        rail = screen.query_one(NeedsYouRail)
        await until(pilot, lambda: rail.runs is not None and rail.runs.needs, 20, "a run in NEEDS-YOU")
        before = session.model.runs_view().runs[0]
        rail.focus()
        rail.action_edge(0)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, AnswerScreen), 5, "the answer composer")
        composer = app.screen
        assert composer.step_key == STEP and not composer.amend
        await pilot.press("y", "e", "s", "enter")
        await until(pilot, lambda: app.screen is screen, 10, "the composer closed after the answer")
        assert composer.result is not None and len(composer.result.answer_id) == 43
        await until(pilot, lambda: not session.model.runs_view().needs, 15, "the row left NEEDS-YOU")
        await until(pilot, lambda: session.model.runs_view().runs[0].state == "completed", 15, "completed")
        await until(pilot, lambda: not rail.runs.needs, 5, "the rail redrawn")
        assert "⏸" not in "\n".join(rail.line_texts())
        # the runs lens, then the journal: the step key verbatim, its outcome, the answer
        screen.query_one("#feed").focus()
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen), 5, "the runs lens")
        runs = app.screen.query_one(RunsList)
        await until(pilot, lambda: "✓ completed" in "\n".join(runs.line_texts()), 5, "the run row")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, JournalScreen), 5, "the journal")
        journal = app.screen.query_one(JournalView)

        def shown() -> str:
            return "\n".join(journal.line_texts())

        await until(pilot, lambda: STEP in shown() and "answered by local." in shown(), 15, "the settled step")
        assert shown().splitlines()[0].startswith(f"run {before.run_id} on manager: completed, holder ")
        assert "activation  holder=" in shown() and "/step:publish#0" in shown()
        # a second answer to the step (a composer opened on what the view said before): the
        # manager's refusal, in its words, shown in the composer, which stays open
        app.push_screen(AnswerScreen(session, app.runs, before, STEP, before.pauses[0], None))
        await until(pilot, lambda: isinstance(app.screen, AnswerScreen), 5, "the stale composer")
        await pilot.press("y", "enter")
        await until(pilot, lambda: app.screen.error and app.screen.error.startswith("not-found: ")
                    and "no open checkpoint" in app.screen.error, 10,
                    "the refusal")
        await pilot.press("escape")
        # an answered step offers an amendment, naming the answer it supersedes
        journal.select_key(("step", STEP))
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AnswerScreen), 5, "the amend composer")
        assert app.screen.amend and app.screen.supersedes
        await pilot.press("escape")


async def test_the_poll_keeps_one_call_in_flight_per_manager(broker, space, host):
    from attach.control.runs_poll import RunsPoller, target_client

    model = MeshModel(space)
    inner = target_client(ConnectTarget((broker.url,), space, timeout=3), space)
    live = {"now": 0, "max": 0}

    class Counting:
        async def instances(self):
            return await inner.instances()

        async def ps(self, iid):
            return await self._count(inner.ps(iid))

        async def status(self, iid, rid):
            return await self._count(inner.status(iid, rid))

        async def _count(self, aw):
            live["now"] += 1
            live["max"] = max(live["max"], live["now"])
            try:
                return await aw
            finally:
                live["now"] -= 1

    p = RunsPoller(Counting(), model, period=0.05)
    p.start()
    try:
        for _ in range(4):
            p.poke()
        await until(lambda: p.rounds >= 4 and model.runs_view().needs, 20, "four rounds")
    finally:
        await p.stop()
    assert live["max"] == 1


async def test_an_open_mesh_says_why_it_lists_no_run(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    m = DemoManager(c, space, [SeatSpec("near", "local.near")], root=str(tmp_path / "m"), run_mesh="open")
    await m.start()
    try:
        app, session = console(broker, space)
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("R")
            await until(pilot, lambda: isinstance(app.screen, RunsScreen), 5, "the runs lens")
            runs = app.screen.query_one(RunsList)
            await until(pilot, lambda: "open mesh" in "\n".join(runs.line_texts()), 20, "the reason")
    finally:
        await m.stop()
        await c.close()


async def test_released_is_never_shown_as_failed():
    from widgets.presentation import COTAL_DARK_LOOK
    from widgets.runs import state_text

    model = MeshModel("demo")
    rid = "run-" + "ab" * 16
    model.apply_run_rows("i" * 26, (RunView(rid, "manager", "i" * 26, "released", epoch=2),
                                    RunView("run-" + "cd" * 16, "manager", "i" * 26, "failed")))
    released, failed = (state_text(s, COTAL_DARK_LOOK) for s in ("released", "failed"))
    assert released.plain == "◌ released" and failed.plain == "✗ failed"
    assert released.style != failed.style
    view = model.runs_view()
    lines = RunsList.lines_of(view.run(rid), view.now, 100, COTAL_DARK_LOOK)
    assert "failed" not in lines[0].plain and "released" in lines[0].plain
    assert dataclasses.replace(view.run(rid), state="released").state == "released"


async def test_the_palette_and_the_narrow_overlay_show_runs():
    from support.console import make_app
    from cotal_tui.screens.needs_you import NeedsYouScreen
    from meshview.model.runs_state import Pause

    app = make_app()
    m = app.session.model
    rid = "run-" + "3f2a" * 8
    m.apply_run_rows("i" * 26, (RunView(rid, "manager", "i" * 26, "running", epoch=1),))
    m.apply_run_status("i" * 26, rid, (), (Pause(STEP, "checkpoint", "ship release 1.8?",
                                                 deadline_at=app.clock.t + 60_000),))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("n")  # narrow: NEEDS-YOU is an overlay
        await until(pilot, lambda: isinstance(app.screen, NeedsYouScreen), 5, "the overlay")
        rail = app.screen.query_one(NeedsYouRail)
        assert rail.runs is not None and [n.run_id for n in rail.runs.needs] == [rid]
        assert "⏸ run-3f2a…" in rail.line_texts()[0]
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, AnswerScreen), 5, "the composer")
        assert app.screen.step_key == STEP
        await pilot.press("escape", "escape")
        await until(pilot, lambda: not isinstance(app.screen, (AnswerScreen, NeedsYouScreen)), 5, "back")
        await pilot.press("colon", *"runs")
        await pilot.pause(0.2)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen), 5, "the runs lens from the palette")


async def test_a_silent_manager_is_said_and_asked_less_often(broker, space, host):
    from attach.control.runs_poll import RunsPoller, target_client
    from cotal_tui.screens.runs import runs_note
    from widgets.status_bar import StatusBar

    model = MeshModel(space)
    inner = target_client(ConnectTarget((broker.url,), space, timeout=3), space)
    asked = []

    class Silent:  # the real registry; a manager whose run-ps never comes back
        async def instances(self):
            return await inner.instances()

        async def ps(self, iid):
            asked.append(iid)
            raise TimeoutError

        async def status(self, iid, rid):  # pragma: no cover - never reached
            raise AssertionError

    p = RunsPoller(Silent(), model, period=0.02, max_period=10)
    p.start()
    try:
        await until(lambda: p.rounds >= 12, 20, "a dozen rounds")
    finally:
        await p.stop()
    assert 1 <= len(asked) <= 6, asked  # backed off: 0.02, 0.04, 0.08 … not once per round
    view = model.runs_view()
    assert [m.error for m in view.silent] == ["did not answer run-ps"]
    assert runs_note(view) == "runs: 1 manager did not answer"
    # the console's status bar says it
    app, session = console(broker, space)
    session.model.set_runs_silent(host.instance_id, "did not answer run-ps")
    session.target = None  # nothing polls: the note is the model's
    async with app.run_test(size=(140, 40)) as pilot:
        bar = app.screen.query_one(StatusBar)
        await until(pilot, lambda: bar.runs == "runs: 1 manager did not answer", 5, "the note")
        assert "⚠ runs: 1 manager did not answer" in bar.left().plain


async def test_an_expired_deadline_leaves_the_rail(broker, space, host):
    app, session = console(broker, space)
    async with app.run_test(size=(140, 40)) as pilot:
        run_id = await host.run_host.start_bundled("expiring")  # a 3 s deadline, fails on expiry
        rail = app.screen.query_one(NeedsYouRail)
        await until(pilot, lambda: rail.runs is not None and run_id in {n.run_id for n in rail.runs.needs},
                    20, "the expiring run in NEEDS-YOU")
        await until(pilot, lambda: run_id not in {n.run_id for n in rail.runs.needs}, 20, "it left on expiry")
        assert len(rail.runs.needs) == 1  # the checklist still waits
        await until(pilot, lambda: session.model.runs_view().run(run_id).state == "failed", 20, "failed")
