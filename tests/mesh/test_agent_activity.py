"""The activity lens's frames of one agent (meshview/model/agent_activity.py): ring rows and a
history read each counted once, only the agent's own frames on its own channel, bounded under
a flood, and following the ring costs the new rows only."""

from __future__ import annotations

import json

import pytest

from meshview.model.agent_activity import (
    KEEP_FRAMES, SEEN_CAP, ActivityRead, AgentFrames, frames_of,
)
from meshview.model.mesh import MeshModel
from meshview.wire import Delivery, decode_delivery

ADA, BRAM = "local.ada", "local.bram"
T0 = 1_700_000_000_000.0


def delivery(sender: str, channel_of: str, mid: str, run: str, seq: int | None,
             events: list, *, history: bool = False) -> Delivery:
    part: dict = {"kind": "ag-ui.frame", "protocol": "ag-ui/0.0.57", "threadId": "t1",
                  "runId": run, "epoch": "e1", "events": events}
    if seq is not None:
        part["seq"] = seq
    body = {"id": mid, "ts": T0, "space": "demo",
            "from": {"id": sender, "name": "ada"},  # bram says it is ada: only the subject counts
            "channel": f"events.{channel_of}", "parts": [part]}
    d = decode_delivery(f"cotal.demo.chat.{sender}.events.{channel_of}",
                        json.dumps(body).encode(), history=history)
    assert type(d) is Delivery, d
    return d


def model() -> MeshModel:
    return MeshModel("demo", clock=lambda: T0)


def tool(name: str) -> list:
    return [{"type": "TOOL_CALL_START", "toolCallId": name, "toolCallName": name}]


def test_ring_and_read_each_once_and_only_the_agents_own():
    m = model()
    for i in range(1, 4):
        m.apply_message(delivery(ADA, ADA, f"a{i}", "r1", i, tool(f"T{i}")).applied(received=T0 + i))
    m.apply_message(delivery(BRAM, ADA, "b1", "r1", 4, tool("LIE")).applied(received=T0 + 4))
    af = AgentFrames(ADA)
    snap = m.snapshot()
    af.follow(snap.feed, snap.feed_base)
    assert af.dropped == 1 and af.phase == "reading" and af.runs() == []  # held until settle
    # the read returns the same three (and bram's, which frames_of drops by sender)
    rows = [delivery(s, ADA, mid, "r1", q, tool(n), history=True).applied(received=T0 + q)
            for s, mid, q, n in ((ADA, "a1", 1, "T1"), (ADA, "a2", 2, "T2"), (ADA, "a3", 3, "T3"),
                                 (BRAM, "b1", 4, "LIE"))]
    read = frames_of(rows, ADA, 300)
    assert [f.msg_id for f in read] == ["a1", "a2", "a3"] and all(f.historical for f in read)
    af.settle(ActivityRead(read))
    (run,) = af.runs()
    assert [f.msg_id for f in run.frames] == ["a1", "a2", "a3"] and run.tools == 3
    assert af.banner() == [] and af.phase == "settled"
    # a read slipped in by another sender is refused by the lens as well
    af2 = AgentFrames(ADA)
    af2.settle(ActivityRead(frames_of(rows, BRAM, 300)))
    assert af2.runs() == [] and af2.dropped == 0  # frames_of(…, BRAM) holds none on ada's channel


def test_frames_without_seq_are_deduped_by_id():
    m = model()
    m.apply_message(delivery(ADA, ADA, "x1", "r1", None, tool("T")).applied(received=T0))
    af = AgentFrames(ADA)
    snap = m.snapshot()
    af.follow(snap.feed, snap.feed_base)
    af.settle(ActivityRead(frames_of([delivery(ADA, ADA, "x1", "r1", None, tool("T"),
                                               history=True).applied()], ADA, 10)))
    (run,) = af.runs()
    assert len(run.frames) == 1


def test_a_refused_read_settles_live_only():
    af = AgentFrames(ADA)
    af.settle(ActivityRead(error="this credential cannot read events.local.ada history"))
    assert af.phase == "failed" and "cannot read" in (af.error or "")
    assert af.banner() == ["history unavailable, so ordering is based on live frames only"]
    m = model()
    m.apply_message(delivery(ADA, ADA, "a1", "r1", 1, tool("T")).applied())
    snap = m.snapshot()
    af.follow(snap.feed, snap.feed_base)
    assert [r.run_id for r in af.runs()] == ["r1"]


def test_a_flood_stays_bounded_and_following_reads_new_rows_only():
    m = model()
    n = 3 * KEEP_FRAMES
    for i in range(n):
        m.apply_message(delivery(ADA, ADA, f"f{i}", f"r{i // 10}", None, tool("T")).applied())
    af = AgentFrames(ADA)
    snap = m.snapshot()
    assert af.follow(snap.feed, snap.feed_base) == n
    af.settle(ActivityRead())
    kept = sum(len(r.frames) for r in af.runs())
    assert kept <= KEEP_FRAMES and len(af.runs()) <= 32
    assert af.follow(snap.feed, snap.feed_base) == 0  # nothing new: nothing read
    m.apply_message(delivery(ADA, ADA, "new", "rN", None, tool("T")).applied())
    snap = m.snapshot()
    assert af.follow(snap.feed, snap.feed_base) == 1
    assert af.runs()[0].run_id == "rN"
    # ids remembered for the seq-less dedupe are capped too
    for i in range(SEEN_CAP + 50):
        m.apply_message(delivery(ADA, ADA, f"g{i}", "rG", None, []).applied())
    snap = m.snapshot()
    af.follow(snap.feed, snap.feed_base)
    assert af.seen_ids() <= SEEN_CAP


def test_not_an_agent_id():
    with pytest.raises(ValueError):
        AgentFrames("not a principal")
    assert frames_of([], "nope", 10) == ()


def test_event_channel_is_the_wire_rule():
    from meshview.wire import event_channel, is_event_channel

    assert event_channel(ADA) == "events.local.ada" and is_event_channel(event_channel(ADA))
    for bad in ("ada", "local.ada.x", "local.a-b", "", "local."):
        with pytest.raises(ValueError):
            event_channel(bad)
