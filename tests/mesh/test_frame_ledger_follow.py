"""Following the frame ledger without draining it (meshview/model/frames.py): ``version`` /
``changed_since`` (the roster reads only the agents whose frames moved), ``transitions_since``
(the ``--json`` run lines and the run alerts), ``notes_since`` (``frame-order`` lines); each
run's tool names; hour counts in the model's milliseconds. Every one bounded against a lying
peer, and keyed by the authenticated sender."""

from __future__ import annotations

import json
import tracemalloc

from meshview.model.frames import (
    CHANGES_KEPT,
    NAME_MEMO_CAP,
    TOOL_NAMES_CAP,
    TRANSITIONS_KEPT,
    FrameIn,
    FrameLedger,
)
from meshview.model.mesh import MeshModel
from meshview.record import statecodec
from meshview.wire.frames import AGUI_PROTOCOL

ADA, BOB = "local.ada", "local.bob"
T0 = 1_796_000_000_000.0  # epoch ms, as the model's clock


def fr(seq, events, *, sender=ADA, run="r1", at=T0, hist=False) -> FrameIn:
    return FrameIn(sender, f"{sender}/{seq}/{hist}", at, at, hist, AGUI_PROTOCOL, "t1", run,
                   "e1", seq, tuple(events))


def started(run="r1", source="human"):
    return {"type": "RUN_STARTED", "runId": run, "cotal": {"turnSource": source}}


def tool(name):
    return {"type": "TOOL_CALL_START", "toolCallName": name}


def test_changed_since_names_only_the_agents_whose_frames_moved():
    led = FrameLedger()
    v0 = led.version
    assert led.changed_since(v0) == set()
    led.admit(fr(1, [started()]))
    led.admit(fr(1, [started("rb")], sender=BOB, run="rb"))
    assert led.changed_since(v0) == {ADA, BOB}
    v1 = led.version
    led.admit(fr(2, [tool("Bash")]))
    assert led.changed_since(v1) == {ADA}
    assert led.admit(fr(2, [tool("Evil")])) == [] and led.changed_since(v1) == {ADA}  # dup
    v2 = led.version
    assert led.admit(fr(2, [tool("Evil")])) == [] and led.changed_since(v2) == set()
    # further back than it remembers: None (read them all), never a wrong "nothing"
    for i in range(CHANGES_KEPT + 10):
        led.admit(fr(3 + i, [], sender=BOB, run="rb"))
    assert led.changed_since(v1) is None
    assert led.changed_since(led.version - 1) == {BOB}


def test_transitions_carry_the_run_tools_and_who_began_it():
    led = FrameLedger()
    led.admit(fr(1, [started("r1", "channel"), tool("Read"), tool("Bash")]))
    led.admit(fr(2, [{"type": "RUN_FINISHED", "runId": "r1"}], at=T0 + 5))
    led.admit(fr(3, [started("r2")], run="r2", at=T0 + 6))
    led.admit(fr(4, [{"type": "RUN_ERROR", "message": "run failed"}], run="r2", at=T0 + 7))
    led.admit(fr(1, [started("h1")], sender=BOB, run="h1", hist=True))
    ts = led.transitions_since(0)
    assert [(t.agent, t.run_id, t.state, t.tools, t.tool_count, t.turn_source, t.historical)
            for t in ts] == [
        (ADA, "r1", "started", (), 0, "channel", False),
        (ADA, "r1", "finished", ("Read", "Bash"), 2, "channel", False),
        (ADA, "r2", "started", (), 0, "human", False),
        (ADA, "r2", "error", (), 0, "human", False),
        (BOB, "h1", "started", (), 0, "human", True)]
    assert led.transitions == 5 and led.transitions_since(4) == ts[4:]
    assert led.transitions_since(5) == []
    assert led.runs(ADA)[1].tool_names == ("Read", "Bash")


def test_a_lying_peer_floods_bounded_and_only_as_itself():
    led = FrameLedger()
    led.admit(fr(1, [started("r1"), tool("Bash")]))
    a = led.agent(ADA)
    n0 = led.transitions
    names = [tool(f"T{i}" * 30) for i in range(2 * NAME_MEMO_CAP)]
    for k in range(TRANSITIONS_KEPT):  # runs that start and fail, tools with fresh names
        led.admit(fr(1 + k, [started(f"x{k}"), *names[:40], {"type": "RUN_ERROR"}],
                     sender=BOB, run=f"x{k}"))
    led.admit(fr(9999, names, sender=BOB, run="big"))
    assert all(t.agent == BOB for t in led.transitions_since(n0))
    assert len(led.transitions_since(0)) == TRANSITIONS_KEPT  # the oldest fall off
    assert all(len(r.tool_names) <= TOOL_NAMES_CAP for r in led.runs(BOB))
    # fresh names forever: the name memo and the runs' names stay bounded
    def flood(lo: int, n: int) -> None:  # a new run per frame, a new tool name per frame
        for k in range(lo, lo + n):
            led.admit(fr(20_000 + k, [tool(f"N{k}-" + "z" * 50)], sender=BOB, run=f"n{k}"))

    flood(0, CHANGES_KEPT)  # every kept window full first
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    flood(CHANGES_KEPT, 10_000)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert grown < 150_000, grown
    assert led.agent(ADA) == a  # ada's facts never moved


def test_hour_counts_read_the_model_clock_in_ms():
    led = FrameLedger()
    led.admit(fr(1, [started("r1"), tool("Bash")]))
    a = led.agent(ADA, now=T0 + 59 * 60_000)
    assert (a.runs_hour, a.tools_hour) == (1, 1)
    assert led.agent(ADA, now=T0 + 61 * 60_000).runs_hour == 0


def test_notes_since_and_a_checkpoint_keeps_the_tool_names():
    m = MeshModel("s", clock=lambda: T0)
    led = m.frames
    led.admit(fr(1, [started("r1"), tool("Bash")]))
    led.admit(fr(4, [{"type": "RUN_FINISHED", "runId": "r1"}]))
    assert [(n.type, n.expected, n.got) for n in led.notes_since(0)] == [("gap", 2, 4)]
    assert led.notes_seen == 1 and led.notes_since(1) == []
    cp = statecodec.checkpoint(m)
    m2 = MeshModel("s", clock=lambda: T0)
    statecodec.restore(m2, json.loads(json.dumps(cp)))
    assert m2.frames.runs(ADA)[0].tool_names == ("Bash",)
    # a restored ledger starts its counters afresh: a follower sees it is new and reads from 0
    assert m2.frames is not led and m2.frames.transitions == 0
