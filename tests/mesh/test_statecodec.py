"""Checkpoints in the versioned state schema round-trip the whole model, and a recording made
before the schema existed (format 1: checkpoints of the model's attributes) still replays to
the same roster, NEEDS-YOU and feed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from meshview.model.mesh import MeshModel
from meshview.model.snapshot import Condition, PresenceRecord
from meshview.model.state import ModelState
from meshview.record.replay import Replay, load_recording
from meshview.record.statecodec import (
    STATE_VERSION,
    V1_FIELDS,
    checkpoint,
    encode_state,
    read_state,
    restore,
)
from meshview.wire import ChannelConfig
from meshview.wire.decode import Applied

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "recording-v1" / "team.jsonl.gz"
T0 = 1_700_000_000_000.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def _busy_model(c: Clock) -> MeshModel:
    """A model with something in every part of its state, an open DM burst and evicted rows."""
    m = MeshModel("main", clock=c, feed_cap=8)
    m.set_connection("connected")
    m.set_tap(["cotal.main.>"], True)
    m.set_channel_registry({"general": ChannelConfig(description="all")})
    m.set_retained_counts({"general": 2})
    m.set_membership({}, T0)
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=c.t, status="waiting",
                                    condition=Condition("approval", since=c.t)), received=c.t)
    m.apply_presence(PresenceRecord(id="b", name="bo", ts=c.t, status="working"), received=c.t)
    for i in range(12):
        c.t += 100
        m.apply_message(Applied(kind="channel", id=f"c{i}", ts=c.t, from_id="a", from_name="ada",
                                text=f"row {i}", channel="general", received=c.t))
    m.apply_message(Applied(kind="dm", id="d1", ts=c.t, from_id="a", from_name="ada", text="psst",
                            to="b", received=c.t, reply_to="c11"))
    m.apply_manager("m1", up=True, holder="a", runtime="tmux")
    m.apply_rejection("bad-json", "cotal.main.chat.general")
    m.set_listener_errors(1, "drain: ValueError: boom")
    return m


def test_a_checkpoint_names_its_schema_not_the_models_attributes():
    c = Clock()
    m = _busy_model(c)
    state = json.loads(json.dumps(checkpoint(m)))
    assert state["v"] == STATE_VERSION
    assert set(state) == {"v"} | {f.name for f in dataclasses.fields(ModelState)} - {"version"}
    assert not [k for k in state if k.startswith("_")]
    assert "FeedRing" not in json.dumps(state) and "DmRollup" not in json.dumps(state)
    other = MeshModel("main", clock=c, feed_cap=8)
    other.version = 500
    tap_calls = []
    other.input_tap = tap_calls.append
    restore(other, state)
    assert other.version == 501 and other.input_tap is not None  # the tap survives a restore
    assert other.feed_base == m.feed_base > 0 and other.feed_end == m.feed_end
    c.t += 1000
    m.tick(c.t)
    other.tick(c.t)  # the open DM burst came along and lands the same
    a, b = m.snapshot(), other.snapshot()
    assert tuple(a.feed) == tuple(b.feed) and a.feed[-1].text == "psst"
    assert a.agents == b.agents and a.signals == b.signals and a.status == b.status
    assert a.dms == b.dms and a.dm_log == b.dm_log and a.topology == b.topology
    assert a.channels == b.channels and a.rates == b.rates and a.managers == b.managers
    assert a.rejections == b.rejections and a.membership == b.membership
    assert b.status.listener_errors == 1
    # the dedupe index came along: a message already in the feed is still a duplicate
    assert not other.apply_message(Applied(kind="channel", id="c11", ts=c.t, from_id="a",
                                           from_name="ada", text="again", channel="general"))
    # and the restored state checkpoints to the same thing again
    assert checkpoint(other)["feed"] == checkpoint(m)["feed"]


def test_the_declared_state_survives_its_json_whole():
    """ModelState through the checkpoint's JSON and back is the same value, field by field."""
    c = Clock()
    m = _busy_model(c)
    st = m.state()
    back = read_state(json.loads(json.dumps(encode_state(st))), MeshModel("main").state())
    for f in dataclasses.fields(ModelState):
        assert getattr(back, f.name) == getattr(st, f.name), f.name
    assert back.bursts and back.roster.peers and back.rates.total == 13  # 12 rows and a DM


def test_a_checkpoint_from_a_newer_schema_is_refused():
    with pytest.raises(ValueError):
        restore(MeshModel("main"), {"v": STATE_VERSION + 1})


def test_a_format_1_recording_replays():
    """tests/fixtures/recording-v1/team.jsonl.gz: made by the recorder of before the schema
    (make_recording.py beside it says how); its checkpoints are the model's attributes."""
    rec = load_recording(str(FIXTURE))
    assert rec.header["version"] == 1 and rec.damage is None
    assert all("v" not in state and "_ring" in state for _, _, state in rec.checkpoints)
    assert set(rec.checkpoints[0][2]) - {"dirty"} == set(V1_FIELDS)  # every attribute it had is known
    assert len(rec.checkpoints) == 3 and rec.seats == ["ada"]
    replay = Replay(rec)

    replay.seek(rec.start + 3500)
    s = replay.model.snapshot()
    assert [(p.name, p.status) for p in s.agents] == [("ada", "working"), ("cy", "working"),
                                                     ("bo", "idle")]
    assert [e.text for e in s.feed if e.kind == "channel"] == ["earlier, on general",
                                                              "starting the build"]
    assert not s.signals.needs_you

    replay.seek(rec.start + 6500)  # from the checkpoint at 5 s
    s = replay.model.snapshot()
    assert [(p.name, p.status) for p in s.agents] == [("cy", "working"), ("ada", "waiting"),
                                                     ("bo", "idle")]
    assert [(n.name, n.condition_code) for n in s.signals.needs_you] == [("ada", "approval")]
    dm = [e for e in s.feed if e.kind == "dm"]
    assert [(e.text, e.count) for e in dm] == [("can you review?", 2)]
    reply = [e for e in s.feed if e.text == "on it"][0]
    assert reply.reply_excerpt == "starting the build" and reply.mentions == ("local.ada",)
    assert [m.instance_id for m in s.managers] == ["mgr1"]

    replay.seek(replay.end)  # from the checkpoint at 10 s
    s = replay.model.snapshot()
    assert [(p.name, p.status, p.offline_reason) for p in s.agents] == [
        ("ada", "waiting", None), ("bo", "idle", None), ("cy", "offline", "stale")]
    assert [e.lifecycle for e in s.feed if e.kind == "lifecycle"] == [
        "join", "join", "join", "manager-up", "crash"]
    assert s.feed[-1].text == "approve my push please"
    assert [(c.name, c.retained, c.arrivals) for c in s.channels] == [("build", 2, 1),
                                                                     ("general", 5, 2)]
    assert s.status.connection == "connected" and s.status.warning == "history: slow"
    assert s.status.listener_errors == 0  # a field the old checkpoint never had: its default
    assert [(d.a_name, d.b_name, d.count) for d in s.dms] == [("ada", "cy", 1), ("bo", "cy", 1)]
    assert replay.event_number() == (14, 14)
    assert replay.seat_stream("ada") is not None

    # seeking back restores an old checkpoint and ends in the same place again
    end = s
    replay.seek(replay.start)
    replay.seek(replay.end)
    again = replay.model.snapshot()
    assert tuple(again.feed) == tuple(end.feed) and again.agents == end.agents


FIXTURE_V2 = FIXTURE.parents[1] / "recording-v2-premove"


def _summary():
    import importlib.util

    spec = importlib.util.spec_from_file_location("recording_v2_summary",
                                                  FIXTURE_V2 / "summary.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.summary


def test_a_schema_2_recording_replays_to_what_the_live_model_showed():
    """tests/fixtures/recording-v2-premove/team.jsonl.gz: made by the recorder of before issue 36 (state
    schema 2, classes named by their modules of before the folders; make_recording.py beside
    it says how). Seeking to each moment the generator looked at, forwards and back, shows the
    roster, feed, DMs, channels and runs its live model showed then (expected.json)."""
    summary = _summary()
    expected = json.loads((FIXTURE_V2 / "expected.json").read_text())
    rec = load_recording(str(FIXTURE_V2 / "team.jsonl.gz"))
    assert rec.header["version"] == 2 and rec.damage is None
    assert [state["v"] for _, _, state in rec.checkpoints] == [2] * 5
    assert "meshview.snapshot:FeedEntry" in json.dumps(rec.checkpoints[-1][2])  # pre-move names
    assert rec.checkpoints[1][2]["bursts"]  # a DM burst open across the 5 s checkpoint
    replay = Replay(rec)
    moments = sorted(expected, key=float)
    # forwards from the first checkpoint by its inputs, then back: each seek back restores the
    # nearest checkpoint before it
    for t in (*moments, *reversed(moments)):
        replay.seek(rec.start + float(t))
        assert summary(replay.model.snapshot(), replay.model.runs_view()) == expected[t], t
