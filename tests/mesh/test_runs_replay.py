"""Workflow runs in the model: what the managers said is folded into rows and NEEDS-YOU pauses,
recorded like presence and messages, and a replay shows the run state the console saw then."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from meshview.model.mesh import MeshModel
from meshview.record.record import Recorder
from meshview.record.replay import Replay, load_recording
from meshview.model.runs_state import (
    AnswerInvalid, JournalRow, Pause, RunEvent, RunView, answer_value, as_needs_you,
)
from meshview.record.statecodec import checkpoint, restore

T0 = 1_700_000_000_000.0
RID = "run-" + "3f2a" * 8
IID = "m" * 26


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def row(state: str = "running", **kw) -> RunView:
    return RunView(run_id=kw.pop("run_id", RID), endpoint="manager", instance_id=IID, state=state,
                   holder="h1", epoch=1, journal_high=3, started_at=T0 - 60_000, **kw)


def pause(deadline_ms: float = 42 * 60_000, key: str = "/checkpoint:approve#0") -> Pause:
    return Pause(step_key=key, kind="checkpoint", prompt="ship release 1.8?", addressee="ops",
                 deadline_at=T0 + deadline_ms, on_expiry="fail")


JOURNAL = (JournalRow(n=0, kind="activation", holder="h1", epoch=1, replayed_to=0),
           JournalRow(n=1, kind="step", step_key="/checkpoint:approve#0", state="pending",
                      prompt="ship release 1.8?"))


def test_a_pause_is_a_needs_you_row_until_it_settles_expires_or_the_run_is_revoked():
    c = Clock()
    m = MeshModel("demo", clock=c, record_events=True)
    m.apply_run_rows(IID, (row(),))
    assert m.runs_view().needs == ()  # no run-status yet: nothing known to wait
    m.apply_run_status(IID, RID, JOURNAL, (pause(),))
    needs = m.runs_view().needs
    assert [n.pause.step_key for n in needs] == ["/checkpoint:approve#0"]
    assert needs[0].deadline_in_ms == 42 * 60_000
    # a second run, waiting with an earlier deadline, comes first (ordered by deadline)
    other = "run-" + "0b" * 16
    m.apply_run_rows(IID, (row(), row(run_id=other)))
    m.apply_run_status(IID, other, (), (pause(5 * 60_000, "/fanOut:lanes#0/b:1877/ask:opened#0"),))
    assert [n.run_id for n in m.runs_view().needs] == [other, RID]
    # the deadline passes on the model clock: that row leaves
    c.t += 6 * 60_000
    assert [n.run_id for n in m.runs_view().needs] == [RID]
    # the run is revoked (run-ps says so): nothing of it waits any more, even with a stale status
    m.apply_run_rows(IID, (row("revoked", revoked_by="op"), row(run_id=other)))
    assert m.runs_view().needs == ()
    events = [e for e in m.take_events() if isinstance(e, RunEvent)]
    assert [(e.kind, e.run_id == RID) for e in events][:2] == [("state", True), ("pause-open", True)]
    assert ("state", "revoked") in [(e.kind, e.state) for e in events]
    assert events[-1].as_json()["type"] == "run"


def test_released_is_its_own_state_and_a_settled_step_leaves():
    c = Clock()
    m = MeshModel("demo", clock=c, record_events=True)
    m.apply_run_rows(IID, (row(),))
    m.apply_run_status(IID, RID, JOURNAL, (pause(),))
    m.take_events()
    m.apply_run_status(IID, RID, JOURNAL, ())  # the step settled
    ev = [e for e in m.take_events() if isinstance(e, RunEvent)]
    assert [(e.kind, e.step_key) for e in ev] == [("pause-settled", "/checkpoint:approve#0")]
    assert ev[0].plain() == "run run-3f2a… settled /checkpoint:approve#0"
    m.apply_run_rows(IID, (row("released"),))
    assert m.runs_view().runs[0].state == "released"  # never failed


def test_run_inputs_record_and_replay_to_the_state_seen_then(tmp_path):
    c = Clock()
    m = MeshModel("demo", clock=c)
    path = str(tmp_path / "runs.jsonl.gz")
    rec = Recorder(m, path)
    c.t += 100
    m.apply_run_rows(IID, (row(),))
    c.t += 100
    m.apply_run_status(IID, RID, JOURNAL, (pause(),))
    mid = c.t
    c.t += 5_000
    m.apply_run_status(IID, RID, JOURNAL, ())
    m.apply_run_rows(IID, (row("completed"),))
    c.t += 100
    m.set_runs_silent(IID, "did not answer run-ps")
    rec.close()
    lines = [json.loads(x) for x in gzip.decompress(Path(path).read_bytes()).decode().splitlines()]
    ops = [x["op"] for x in lines if x["type"] == "in"]
    assert ops == ["apply_run_rows", "apply_run_status", "apply_run_status", "apply_run_rows",
                   "set_runs_silent"]
    replay = Replay(load_recording(path))
    replay.seek(mid)
    v = replay.model.runs_view()
    assert v.runs[0].state == "running" and [n.pause.prompt for n in v.needs] == ["ship release 1.8?"]
    replay.seek(replay.end)
    v = replay.model.runs_view()
    assert v.runs[0].state == "completed" and v.needs == ()
    assert [s.error for s in v.silent] == ["did not answer run-ps"]


def test_a_checkpoint_holds_the_runs():
    c = Clock()
    m = MeshModel("demo", clock=c)
    m.apply_run_rows(IID, (row(),))
    m.apply_run_status(IID, RID, JOURNAL, (pause(),))
    state = json.loads(json.dumps(checkpoint(m)))
    fresh = MeshModel("demo", clock=c)
    restore(fresh, state)
    assert fresh.runs_view().runs == m.runs_view().runs
    assert fresh.runs_view().needs == m.runs_view().needs


def test_answers_are_checked_before_they_are_sent():
    assert answer_value("yes", as_json=False) == "yes"  # a bare string is a JSON string
    assert answer_value('{"ok": true}', as_json=False) == '{"ok": true}'  # text is never parsed
    assert answer_value('{"ok": true}', as_json=True) == {"ok": True}
    schema = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}},
              "additionalProperties": False}
    for text, why in [("{", "not JSON"), ("[]", "must be a JSON object"),
                      ("{}", 'lacks the required field "ok"'), ('{"ok": 1}', "must be a JSON boolean"),
                      ('{"ok": true, "x": 1}', 'does not ask for: "x"')]:
        with pytest.raises(AnswerInvalid, match=why):
            answer_value(text, as_json=True, schema=schema)
    with pytest.raises(AnswerInvalid, match="empty"):
        answer_value("  ", as_json=False)
    # past the int-conversion digit limit json.loads raises a bare ValueError, not a parse error
    with pytest.raises(AnswerInvalid, match="not JSON: a number is too long"):
        answer_value("1" * 5000, as_json=True)


def test_a_run_pause_alerts_like_a_waiting_agent():
    from meshview.lines.notify import WaitingEpisodes

    c = Clock()
    m = MeshModel("demo", clock=c)
    m.apply_run_rows(IID, (row(),))
    m.apply_run_status(IID, RID, JOURNAL, (pause(),))
    ep = WaitingEpisodes("demo", settle_s=0)
    alerts = ep.update([as_needs_you(n) for n in m.runs_view().needs])
    assert [a.text() for a in alerts] == ["run-3f2a… needs you: checkpoint - ship release 1.8?"]
    assert ep.update([as_needs_you(n) for n in m.runs_view().needs]) == []  # once per episode
