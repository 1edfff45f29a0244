"""``cotal watch --json`` prints the frame ledger's ``run`` lines (one per run transition:
started, finished, error, with the run's tools) and ``frame-order`` lines (a skipped seq is a
``gap``); ``--plain`` prints the notice as one line. On a real broker, with a lying peer whose
frames (on its own subject) name another agent's channel and name: its runs are its own."""

from __future__ import annotations

import asyncio
import json
import uuid

from meshview.lines.stream import json_note, json_run, note_text
from meshview.model.frames import Note, Transition
from support.observer import now_ms, post, presence, put_presence
from support.watchproc import WatchProc

ADA, BOB = "local.ada", "local.bob"


async def frame(nc, space: str, actor: str, seq: int, run: str, events: list, *,
                claims: str | None = None) -> None:
    """One frame on ``actor``'s own subject; ``claims``: the agent whose channel and name it
    pretends to be."""
    target = claims or actor
    m = {"id": str(uuid.uuid4()), "ts": now_ms(), "space": space,
         "from": {"id": f"local.{actor}", "name": target}, "channel": f"events.local.{target}",
         "parts": [{"kind": "ag-ui.frame", "protocol": "ag-ui/0.0.57", "threadId": "t1",
                    "runId": run, "epoch": "e1", "seq": seq, "events": events}]}
    await nc.jetstream().publish(f"cotal.{space}.chat.local.{actor}.events.local.{target}",
                                 json.dumps(m).encode(), headers={"Nats-Msg-Id": m["id"]})


def started(run: str, source: str = "human") -> dict:
    return {"type": "RUN_STARTED", "threadId": "t1", "runId": run, "cotal": {"turnSource": source}}


def tool(name: str, cid: str) -> dict:
    return {"type": "TOOL_CALL_START", "toolCallId": cid, "toolCallName": name}


async def _synced(nc, space: str, procs: list[WatchProc]) -> None:
    for k in range(200):
        await post(nc, space, "ada", "general", f"sync-{k}")
        if all("sync-" in w.stdout_text for w in procs):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the watchers never went live: "
                         + " | ".join(w.stderr_text[-300:] for w in procs))


async def test_json_run_and_frame_order_lines_and_a_plain_notice(broker, nc, space):
    await put_presence(nc, space, presence("ada", "working"))
    base = ("--server", broker.url, "--space", space)
    js, plain = WatchProc.start("--json", *base), WatchProc.start("--plain", *base)
    try:
        await _synced(nc, space, [js, plain])
        await frame(nc, space, "ada", 1, "r1", [started("r1"), tool("Read", "c1")])
        await frame(nc, space, "ada", 2, "r1", [tool("Bash", "c2"),
                                                {"type": "RUN_FINISHED", "runId": "r1"}])
        # the lying peer: bob's subject, ada's channel and name, a run that fails
        await frame(nc, space, "bob", 1, "rb", [started("rb", "channel"), tool("Evil", "c9"),
                                                {"type": "RUN_ERROR", "message": "run failed"}],
                    claims="ada")
        await frame(nc, space, "ada", 3, "r2", [started("r2", "channel")])
        await frame(nc, space, "ada", 5, "r2", [{"type": "RUN_ERROR", "message": "run failed"}])
        await js.wait_for(lambda: len(js.objs("run")) >= 6 and js.objs("frame-order"), 20,
                          "the run and frame-order lines")
        await plain.wait_for(lambda: " notice " in plain.stdout_text, 20, "the plain notice")
    finally:
        js.stop()
        plain.stop()
    runs = [(o["agent"], o["runId"], o["state"], o["tools"], o["turnSource"])
            for o in js.objs("run")]
    assert [r for r in runs if r[0] == ADA] == [
        (ADA, "r1", "started", [], "human"),
        (ADA, "r1", "finished", ["Read", "Bash"], "human"),
        (ADA, "r2", "started", [], "channel"),
        (ADA, "r2", "error", [], "channel"),
    ]
    assert [r for r in runs if r[0] != ADA] == [
        (BOB, "rb", "started", [], "channel"), (BOB, "rb", "error", ["Evil"], "channel")]
    for o in js.objs("run"):
        assert o["source"] == "frames"
        assert isinstance(o["ts"], int) and o["toolCount"] == len(o["tools"])
        assert o["name"] == ("ada" if o["agent"] == ADA else None)  # the roster's, not a claim
    # the skipped seq 4: one gap, in the dashboard's words; nothing of bob's stream
    order = js.objs("frame-order")
    assert [(o["note"], o["agent"], o["epoch"], o["threadId"], o["expected"], o["got"],
             o["missing"]) for o in order] == [("gap", ADA, "e1", "t1", 4, 5, 1)]
    notice = [ln for ln in plain.stdout_text.splitlines() if " notice " in ln]
    assert len(notice) == 1 and notice[0].endswith(
        "notice  ada: 1 event frame missing (expected seq 4, got 5) [epoch e1 thread t1]"), notice
    assert not any(o.get("type") == "run" for o in (json.loads(ln) for ln in
                   plain.stdout_text.splitlines() if ln.startswith("{")))


def test_run_and_note_shapes_are_plain_json():
    """The shapes the README documents, for each notice type; a historical transition says so."""
    t = Transition(ADA, "r1", "finished", 1.7e12 + 0.5, True, None, ("Bash",), 3)
    assert json_run(t) == {"type": "run", "source": "frames", "agent": ADA, "name": None, "runId": "r1",
                           "state": "finished", "tools": ["Bash"], "toolCount": 3,
                           "turnSource": None, "ts": 1_700_000_000_000, "historical": True}
    texts = {n.type: json_note(n) for n in (
        Note("gap", ADA, "e", "t", 2, 5, 3), Note("boundary-hole", ADA, "e", "t", 2, 3, 1),
        Note("prefix-incomplete", ADA, "e", "t", got=40), Note("backfill-failed"))}
    assert texts["gap"]["text"] == "3 event frames missing (expected seq 2, got 5)"
    assert texts["prefix-incomplete"]["got"] == 40 and texts["prefix-incomplete"]["expected"] is None
    assert texts["backfill-failed"]["agent"] is None
    assert note_text(Note("backfill-failed")) == (
        "history unavailable, so ordering is based on live frames only")
    assert all(json.loads(json.dumps(o)) == o for o in texts.values())
