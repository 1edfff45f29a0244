"""Markers in a recording: derived automatically from the scripted team's crash and new
incarnation (and agents starting to wait), added by hand with ``m`` (stored at the end of the
file: a reload has it), and ``{``/``}``/``M`` land on them in the replay console."""

from __future__ import annotations

import shutil

from test_record import recorded  # noqa: F401 - the module's recording fixture

from conftest import until
from meshview.record.markers import append_mark, auto_markers, clean_label
from meshview.record.replay import ReplaySession, load_recording


def _copy(recorded, tmp_path) -> str:  # noqa: F811
    path = str(tmp_path / "team.jsonl.gz")
    shutil.copy(recorded.path, path)
    return path


async def test_the_crash_and_the_incarnation_are_markers(recorded):  # noqa: F811
    rec = load_recording(recorded.path)
    marks = auto_markers(rec)
    kinds = {(m.kind, m.label.split()[0]) for m in marks}
    assert ("crash", "finn") in kinds and ("incarnation", "cleo:") in kinds
    assert [m.t for m in marks] == sorted(m.t for m in marks)
    assert all(rec.start <= m.t <= rec.end for m in marks)
    # the crash marker sits where the model derived the crash row
    crash = next(m for m in marks if m.kind == "crash")
    row = next(e for e in recorded.model.snapshot().feed
               if e.kind == "lifecycle" and e.lifecycle == "crash" and e.from_name == "finn")
    assert abs(crash.t - row.received) < 1000


async def test_a_hand_marker_is_stored_in_the_file(recorded, tmp_path):  # noqa: F811
    path = _copy(recorded, tmp_path)
    rec = load_recording(path)
    t = (rec.start + rec.end) / 2
    append_mark(path, t, "look \x1b[31mhere\x1b[0m\nplease")
    again = load_recording(path)
    assert again.damage is None and len(again.entries) == len(rec.entries)
    assert [(m.t, m.label) for m in again.marks] == [(t, clean_label("look \x1b[31mhere\x1b[0m\nplease"))]
    assert "\x1b" not in again.marks[0].label and "\n" not in again.marks[0].label


async def test_replay_keys_land_on_markers_and_m_adds_one(recorded, tmp_path):  # noqa: F811
    from cotal_tui.replay_app import ReplayApp
    from cotal_tui.screens.replay import MarkerList

    path = _copy(recorded, tmp_path)
    rec = load_recording(path)
    session = ReplaySession(rec, speed=0.0001)  # practically paused: the keys move it
    app = ReplayApp(session=session)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: session.markers_ready, 30.0, "the automatic markers")
        session.player.toggle_pause()
        ts = sorted({m.t for m in session.markers if m.t > session.replay.start + 1})  # one stop per instant
        assert len(ts) >= 2  # the crash and the new incarnation at least
        session.replay.seek(session.replay.start)
        await pilot.press("right_curly_bracket")
        assert session.replay.now == ts[0]
        await pilot.press("right_curly_bracket")
        assert session.replay.now == ts[1]
        await pilot.press("left_curly_bracket")
        assert session.replay.now == ts[0]
        # m: a label, Enter: stored in the file at the replay's time
        at = session.replay.now
        await pilot.press("m")
        await until(pilot, lambda: app.screen.query("#mark-label"), 5.0, "the label box")
        for ch in "deploy":
            await pilot.press(ch)
        await pilot.press("enter")
        await until(pilot, lambda: any(m.kind == "mark" for m in session.markers), 5.0, "the marker")
        assert load_recording(path).marks[0].label == "deploy"
        assert load_recording(path).marks[0].t == at
        # M lists them; Enter on the last one seeks there
        session.replay.seek(session.replay.start)
        await pilot.press("M")
        await until(pilot, lambda: isinstance(app.screen, MarkerList), 5.0, "the marker list")
        await pilot.press("end", "enter")
        await until(pilot, lambda: not isinstance(app.screen, MarkerList), 5.0, "the list to close")
        assert session.replay.now == session.markers[-1].t


async def test_m_in_the_live_console_marks_the_running_recording(tmp_path):
    from support.console import make_app, screen_text

    from cotal_tui.screens.markers import MarkerLabel
    from meshview.record.record import Recorder

    app = make_app()
    model = app.session.model
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("m")  # not recording: a sentence, no box
        await until(pilot, lambda: "not recording" in screen_text(app), 5.0, "the sentence")
        assert not isinstance(app.screen, MarkerLabel)
        path = str(tmp_path / "live.jsonl.gz")
        rec = Recorder(model, path)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, MarkerLabel), 5.0, "the label box")
        await pilot.press(*"rollout", "enter")
        await until(pilot, lambda: not isinstance(app.screen, MarkerLabel), 5.0, "the box to close")
        rec.close()
    marks = load_recording(path).marks
    assert [m.label for m in marks] == ["rollout"]


def test_a_run_pause_opening_and_settling_are_markers(tmp_path):
    from test_runs_replay import IID, JOURNAL, RID, Clock, pause, row

    from meshview.model.mesh import MeshModel
    from meshview.record.record import Recorder

    c = Clock()
    m = MeshModel("demo", clock=c)
    path = str(tmp_path / "runs.jsonl.gz")
    rec = Recorder(m, path)
    c.t += 100
    m.apply_run_rows(IID, (row(),))
    c.t += 100
    m.apply_run_status(IID, RID, JOURNAL, (pause(),))
    opened = c.t
    c.t += 5_000
    m.apply_run_status(IID, RID, JOURNAL, ())
    settled = c.t
    rec.close()
    marks = [mk for mk in auto_markers(load_recording(path)) if mk.kind == "run"]
    assert [(mk.t, "waits at" in mk.label, "settled" in mk.label) for mk in marks] == [
        (opened, True, False), (settled, False, True)]
    assert all("/checkpoint:approve#0" in mk.label for mk in marks)


async def test_slash_in_a_replay_finds_text_and_jumps_to_its_time(recorded, tmp_path):  # noqa: F811
    from cotal_tui.replay_app import ReplayApp
    from cotal_tui.screens.markers import FindBox
    from meshview.record.recordtools import grep

    rec = load_recording(recorded.path)
    want = [m.t for m in grep(rec, "heartbeat lapsed")]
    assert want
    session = ReplaySession(rec, speed=0.0001)
    app = ReplayApp(session=session)
    async with app.run_test(size=(140, 40)) as pilot:
        session.player.toggle_pause()
        session.replay.seek(session.replay.start)
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FindBox), 5.0, "the find box")
        await pilot.press(*"heartbeat lapsed", "enter")
        await until(pilot, lambda: session.replay.now == want[0], 20.0, "the jump to the first match")
        # / again with the same text (prefilled): the next match, wrapping to the first
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FindBox), 5.0, "the find box again")
        await pilot.press("enter")
        nxt = want[1] if len(want) > 1 else want[0]
        await until(pilot, lambda: session.replay.now == nxt, 10.0, "the next match")
        await pilot.press("slash")
        await until(pilot, lambda: isinstance(app.screen, FindBox), 5.0, "the find box a third time")
        await pilot.press(*"-no-such-text-4711", "enter")
        await until(pilot, lambda: session.find_matches == [], 20.0, "the empty search")


async def test_an_operator_action_is_a_marker_of_the_running_recording(tmp_path, monkeypatch):
    """What the action log records while the console records becomes an ``action`` marker."""
    from support.console import StaticSession

    from cotal_tui.actionlog import LISTENERS, ActionLog
    from cotal_tui.recording import start_recording
    from meshview.model.mesh import MeshModel

    monkeypatch.setenv("COTAL_ACTION_LOG", str(tmp_path / "actions.jsonl"))
    session = StaticSession(MeshModel("demo"))
    path = str(tmp_path / "live.jsonl.gz")
    before = len(LISTENERS)
    rec = start_recording(session, path)
    assert rec.error is None and len(LISTENERS) == before + 1
    ActionLog().record("stop", "ada", "requested")
    await session.stop()  # the recording ends with the session, and stops listening
    assert len(LISTENERS) == before
    marks = load_recording(path).marks
    assert [(m.kind, m.label) for m in marks] == [("action", "stop ada")]
    ActionLog().record("stop", "bram", "requested")  # after the end: not in the file
    assert [m.label for m in load_recording(path).marks] == ["stop ada"]
