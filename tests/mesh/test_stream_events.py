"""``cotal watch --plain --events full|summary|off`` on a real broker: an agent's activity frames
(``ag-ui.frame`` on ``events.local.<actor>``) print as one summary line each by default, as the
whole fold with ``full``, not at all with ``off``; a lying peer's frame (thousands of tool names,
invisible and control characters) is still one bounded, escaped line."""

from __future__ import annotations

import asyncio
import json
import uuid

from meshview.lines.stream import TextRenderer
from meshview.model.labels import Labels
from meshview.model.snapshot import FeedEntry
from meshview.wire.messages import ExtensionPart
from support.observer import now_ms, post, presence, put_presence
from support.watchproc import WatchProc


def frame_msg(space: str, actor: str, run: str, events: list) -> dict:
    return {"id": str(uuid.uuid4()), "ts": now_ms(), "space": space,
            "from": {"id": f"local.{actor}", "name": actor}, "channel": f"events.local.{actor}",
            "parts": [{"kind": "ag-ui.frame", "protocol": "ag-ui/0.0.57", "threadId": "t1",
                       "runId": run, "epoch": "e1", "seq": 1, "events": events}]}


async def publish_frame(nc, space: str, actor: str, run: str, events: list) -> None:
    m = frame_msg(space, actor, run, events)
    data = json.dumps(m, separators=(",", ":"), ensure_ascii=False).encode()
    await nc.jetstream().publish(f"cotal.{space}.chat.local.{actor}.events.local.{actor}", data,
                                 headers={"Nats-Msg-Id": m["id"]})


RUN = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "runplain1234abcd"},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "Read"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"path": "a.py"}'},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "Bash"},
    {"type": "TOOL_CALL_END", "toolCallId": "c2"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Looking at the\nfailing "},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "test now"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "runplain1234abcd"},
]
FAILED = [{"type": "RUN_STARTED", "threadId": "t1", "runId": "runfail99"},
          {"type": "RUN_ERROR", "message": "boom", "code": "rate_limit"}]
HOSTILE_NAME = "x\u200b\u202e\x1b[2J\x07"
LYING = ([{"type": "TOOL_CALL_START", "toolCallName": HOSTILE_NAME * 3000}]
         + [{"type": "TOOL_CALL_START", "toolCallName": HOSTILE_NAME} for _ in range(10_000)]
         + [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "\u200b\x1b]52;c;x\x07" * 500}])


def _lines(w: WatchProc) -> list[str]:
    return w.stdout_text.splitlines()


async def _synced(nc, space: str, procs: list[WatchProc]) -> None:
    """Each watcher is live: it printed a chat message sent after it started (sent again until
    all have, so no message is lost to a subscription still being set up)."""
    for k in range(200):
        await post(nc, space, "ada", "general", f"sync-{k}")
        if all(any("sync-" in ln for ln in _lines(w)) for w in procs):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the watchers never went live: " + " | ".join(w.stderr_text[-300:] for w in procs))


async def test_plain_events_summary_full_and_off(broker, nc, space):
    await put_presence(nc, space, presence("ada"))
    base = ("--plain", "--server", broker.url, "--space", space)
    summary = WatchProc.start(*base)  # the default
    full = WatchProc.start(*base, "--events", "full")
    off = WatchProc.start(*base, "--events", "off")
    procs = [summary, full, off]
    try:
        await _synced(nc, space, procs)
        await publish_frame(nc, space, "ada", "runplain1234abcd", RUN)
        await publish_frame(nc, space, "ada", "runfail99", FAILED)
        await publish_frame(nc, space, "ada", "\x1b[31m\u202e" * 50, LYING)
        await post(nc, space, "ada", "general", "after the frames")
        for w in procs:
            await w.wait_for(lambda w=w: any("after the frames" in ln for ln in _lines(w)), 20,
                             "the chat line after the frames")

        # summary: one line per frame, nothing else of the frames
        lines = _lines(summary)
        ev = [ln for ln in lines if " event   ada" in ln]
        assert len(ev) == 3, lines
        assert ev[0].endswith("event   ada · run runplain: ▸ run started · ⚙ Read, Bash · "
                              "» Looking at the failing test now · ◂ finished"), ev[0]
        assert ev[1].endswith("· run runfail9: ▸ run started · ✗ run failed"), ev[1]
        lying = ev[2]
        assert len(lying) < 1500, len(lying)
        assert "\x1b" not in lying and "\u202e" not in lying and "\u200b" not in lying
        assert "\x07" not in lying and "\\u202e" in lying  # escaped, visibly
        assert "⚙ " in lying and " +" in lying  # the names past the first few are counted
        assert not any("[event]" in ln or "events.local.ada" in ln for ln in lines)
        assert not any(ln.startswith(" " * 9) for ln in lines)  # no folded continuation lines

        # full: the multi-line fold under a [event] head, as before
        text = full.stdout_text
        assert "→ #events.local.ada [event]: ▸ run runplain1234abcd started" in text
        assert "⚙ Read({\"path\": \"a.py\"})" in text and "» Looking at the" in text
        assert "◂ run runplain1234abcd finished" in text and "✗ run error [rate_limit]: boom" in text
        assert not any(" event   ada" in ln for ln in _lines(full))

        # off: no frame at all, the chat still there
        text = off.stdout_text
        assert "after the frames" in text
        assert "[event]" not in text and " event   " not in text and "Read" not in text
    finally:
        for w in procs:
            w.stop()


def test_a_backfilled_frame_is_one_history_line():
    """A frame from history (``--backfill``) is one line too: sent time, ``history``, marked as an
    event; ``off`` prints nothing, ``full`` the fold."""
    part = ExtensionPart("ag-ui.frame", RUN, runId="runhist-0001")
    ts = 1_700_000_000_000.0
    e = FeedEntry(0, "m1", ts, ts + 5_000, "channel", "local.ada", "ada", None,
                  "▸ run runhist-0001 started\n⚙ Read()", channel="events.local.ada",
                  parts=(part,), historical=True, event=True)
    line = TextRenderer(False).message(e, Labels([("local.ada", "ada", None)]))
    assert line is not None and "\n" not in line
    assert " history ada [event] · run runhist-: ▸ run started · ⚙ Read, Bash" in line
    assert TextRenderer(False, "off").message(e) is None
    folded = TextRenderer(False, "full").message(e)
    assert folded is not None and "[event]: ▸ run runhist-0001 started\n" in folded


async def test_events_flag_takes_three_values(broker, space):
    w = WatchProc.start("--plain", "--events", "some", "--server", broker.url, "--space", space)
    rc = w.wait_exit(20)
    assert rc == 2 and "--events" in w.stderr_text and "summary" in w.stderr_text


def test_replay_plain_events_on_an_old_recording():
    """``cotal replay --plain`` takes ``--events`` too; a frame recorded without its parts (the
    format-2 fixture's ``tool: make`` on ``events.local.ada``) summarises as its text's first
    words, and the old recording still loads and replays whole."""
    import subprocess
    import sys

    from support.watchproc import ROOT

    fixture = str(ROOT / "tests" / "fixtures" / "recording-v2" / "team.jsonl.gz")

    def replay(*flags: str) -> str:
        p = subprocess.run([sys.executable, "-m", "cotal_tui.cli", "replay", fixture, "--plain",
                            "--speed", "0", *flags], cwd=str(ROOT), capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        return p.stdout

    summary, full, off = replay(), replay("--events", "full"), replay("--events", "off")
    assert [ln[9:] for ln in summary.splitlines() if " event " in ln] == ["event   ada/dev: tool: make"]
    assert "→ #events.local.ada [event]: tool: make" in full
    assert "tool: make" not in off and "events.local.ada" not in off
    # everything else is the same in the three
    rest = [ln for ln in summary.splitlines() if "tool: make" not in ln]
    assert rest == [ln for ln in off.splitlines()] and len(rest) > 3
