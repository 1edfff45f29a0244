"""The model's input seam: every reducer is a registered input, one tap sees every outermost
call (the recorder records through it), the observer's clocks-only presence path is an input
like the others, and nothing outside meshview/model/mesh.py wraps or replaces a model method."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from conftest import until
from meshview.model.inputs import INPUTS, InputCall
from meshview.model.mesh import MeshModel
from meshview.observe.observer import Observer, ObserverOptions
from meshview.record.record import Recorder, active_recorder
from meshview.record.replay import Replay, load_recording
from meshview.model.snapshot import PresenceRecord
from support.observer import now_ms, presence, put_presence
from meshview.wire.decode import Applied

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def _ops(path: str) -> list[str]:
    lines = gzip.decompress(Path(path).read_bytes()).decode().splitlines()
    return [json.loads(x)["op"] for x in lines if json.loads(x)["type"] == "in"]


def test_the_tap_sees_each_outermost_input_once_with_the_clock_held():
    c = Clock()
    m = MeshModel("main", clock=c)
    calls: list[InputCall] = []
    seen_clock: list[float] = []

    def tap(call: InputCall) -> None:
        calls.append(call)
        seen_clock.append(m.clock())  # the model's own clock is back after the call

    m.input_tap = tap
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=c.t, status="working"))
    # apply_presence calls watch_delivered (an input too): the tap sees one call
    assert [x.name for x in calls] == ["apply_presence"]
    assert calls[0].category == INPUTS["apply_presence"] == "presence"
    assert calls[0].t == T0 and calls[0].changed
    # an iterator argument is a list by the time anyone sees it, and the reducer got all of it
    c.t += 100
    m.presence_resync(iter(["a"]), received=c.t)
    assert calls[-1].name == "presence_resync" and calls[-1].args == (["a"],)
    assert m.peer("a").status == "working"
    # a duplicate message is still a call (the recorder decides not to write it)
    m.apply_message(Applied(kind="channel", id="x", ts=c.t, from_id="a", from_name="ada",
                            channel="general", text="hi"))
    m.apply_message(Applied(kind="channel", id="x", ts=c.t, from_id="a", from_name="ada",
                            channel="general", text="hi"))
    assert [x.result for x in calls[-2:]] == [True, False]
    assert seen_clock[-1] == c.t
    # forwards are not inputs: their inner calls are
    n = len(calls)
    m.apply_history([Applied(kind="channel", id="h1", ts=c.t - 10, from_id="a", from_name="ada",
                             channel="general", text="old")])
    assert [x.name for x in calls[n:]] == ["apply_message"]
    m.input_tap = None
    m.tick(c.t)
    assert calls[-1].name == "apply_message"


def test_apply_input_knows_only_the_inputs():
    m = MeshModel("main")
    m.apply_input("set_warning", ["careful"])
    assert m.status.warning == "careful"
    for bad in ("snapshot", "_touch", "clock", "nonsense"):
        try:
            m.apply_input(bad)
        except ValueError as e:
            assert "not a model input" in str(e)
        else:
            raise AssertionError(bad)


def test_the_recorder_records_through_the_tap_and_closing_untaps(tmp_path):
    c = Clock()
    m = MeshModel("main", clock=c)
    path = str(tmp_path / "r.jsonl.gz")
    r = Recorder(m, path)
    assert m.input_tap is not None and active_recorder(m) is r
    assert not any(name in vars(m) for name in INPUTS)  # no method rebound on the instance
    second = Recorder(m, str(tmp_path / "r2.jsonl.gz"))
    assert second.closed and "already recording" in (second.error or "")
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=c.t, status="working"), received=c.t)
    c.t += 50
    m.set_warning("one")
    r.close()
    assert m.input_tap is None and active_recorder(m) is None
    m.set_warning("after")  # not recorded
    assert _ops(path) == ["apply_presence", "set_warning"]
    # someone else's tap: a recorder refuses rather than replace it
    m.input_tap = lambda call: None
    third = Recorder(m, str(tmp_path / "r3.jsonl.gz"))
    assert third.closed and "tapped" in (third.error or "")


def test_a_quiet_input_is_recorded_only_when_it_changed_something(tmp_path):
    c = Clock()
    m = MeshModel("main", clock=c)
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=c.t, status="working"), received=c.t)
    path = str(tmp_path / "q.jsonl.gz")
    r = Recorder(m, path)
    c.t += 1000
    assert not m.refresh_clocks("nobody", c.t, None, None, None, received=c.t)  # declined
    assert m.refresh_clocks("a", c.t, None, None, None, received=c.t)
    r.close()
    assert _ops(path) == ["refresh_clocks"]
    replay = Replay(load_recording(path))
    replay.seek(replay.end)
    assert replay.model.peer("a") == m.peer("a")


async def test_the_observers_clocks_only_path_is_recorded_and_replays(broker, nc, space, tmp_path):
    """A heartbeat-only presence rewrite takes the clocks-only path while recording (it used to
    take the full one whenever a recorder had wrapped the model), and the replay ends the same."""
    model = MeshModel(space)
    path = str(tmp_path / "hb.jsonl.gz")
    rec = Recorder(model, path)
    obs = Observer(nc, space, model, options=ObserverOptions(backfill=0))
    ts = now_ms()
    await put_presence(nc, space, presence("ada", "working", ts=ts))
    await obs.start()
    try:
        await until(lambda: model.peer("local.ada") is not None, 10.0, "ada")
        for k in range(1, 4):
            await put_presence(nc, space, presence("ada", "working", ts=ts + k * 500))
            await until(lambda: model.peer("local.ada").ts == ts + k * 500, 10.0, "heartbeat")
    finally:
        await obs.stop()
        rec.close()
    assert rec.error is None
    ops = _ops(path)
    assert ops.count("refresh_clocks") >= 2, ops
    replay = Replay(load_recording(path))
    replay.seek(replay.end)
    assert replay.model.peer("local.ada") == model.peer("local.ada")


_ASSIGNS_METHOD = re.compile(
    r"setattr\(\s*[\w.]*model\b"  # setattr(model, ...) / setattr(self.model, ...)
    r"|\b(?:model|m)\.(?:" + "|".join(sorted(INPUTS)) + r")\s*=(?!=)"
    r"|__dict__\.pop\(")


def test_no_module_outside_the_model_rebinds_a_model_method():
    # restoring a checkpoint goes through MeshModel.restore (a declared ModelState): the state
    # codec sets no attribute of the model, so it is scanned like every other module
    offenders = []
    for path in sorted((ROOT / "meshview").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if _ASSIGNS_METHOD.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, offenders
    observer = (ROOT / "meshview" / "observe" / "observer.py").read_text()
    assert "vars(m" not in observer and "._refresh_clocks" not in observer
