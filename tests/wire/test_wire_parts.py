"""Parts as readable text (upstream core/src/parts.ts and the ag-ui.frame renderer's output),
through the decoder a live or backfilled message takes, and into the feed, --plain and --json."""

from __future__ import annotations

import io
import json

from meshview.model.mesh import MeshModel
from meshview.lines.stream import StreamWriter
from meshview.wire import (
    Delivery,
    ExtensionPart,
    chat_subject,
    decode_delivery,
    parts_to_text,
)
from meshview.wire.decode import Applied

ALICE = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice"
EVENTS = f"events.{ALICE}"


def frame(*events: dict) -> dict:
    return {"kind": "ag-ui.frame", "protocol": "ag-ui/0.0.57", "threadId": "t", "runId": "r",
            "epoch": "e", "seq": 1, "events": list(events)}


def decode(parts: list, channel: str = EVENTS) -> Delivery:
    body = {"id": "m1", "ts": 1710000000000, "space": "main",
            "from": {"id": ALICE, "name": "alice"}, "channel": channel, "parts": parts}
    got = decode_delivery(chat_subject("main", ALICE, channel), json.dumps(body).encode())
    assert isinstance(got, Delivery), got
    return got


def test_agui_frame_folds_into_readable_lines():
    run = frame(
        {"type": "RUN_STARTED", "runId": "r1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Looking at "},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "the tests."},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "REASONING_MESSAGE_START", "messageId": "k"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "k", "delta": "two\nlines"},
        {"type": "REASONING_MESSAGE_END", "messageId": "k"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "bash"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '{"cmd":'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '"pytest"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "TOOL_CALL_RESULT", "toolCallId": "c", "content": "3 passed\n- one warning"},
        {"type": "CUSTOM", "name": "checkpoint"},
        {"type": "STATE_DELTA"},
        {"type": "RUN_FINISHED", "runId": "r1", "outcome": {"type": "success"}},
        {"type": "RUN_ERROR", "code": "E42", "message": "boom"},
    )
    got = decode([run])
    assert got.message.parts[0] == ExtensionPart("ag-ui.frame", run["events"], 0, "ag-ui/0.0.57",
                                                 "t", "r", "e", 1)  # the envelope kept whole
    assert parts_to_text(got.message.parts).split("\n") == [
        "▸ run r1 started",
        "» Looking at the tests.",
        "(thinking) two",
        "  · lines",
        '⚙ bash({"cmd":"pytest"})',
        "  ↳ 3 passed",
        "  · - one warning",
        "• custom checkpoint",
        '• unrecognised event "STATE_DELTA"',
        "◂ run r1 finished (success)",
        "✗ run error [E42]: boom",
    ]


def test_agui_frame_unterminated_streams_are_flushed_and_marked():
    run = frame(
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "half a sent"},
        {"type": "TOOL_CALL_START", "toolCallId": "t", "toolCallName": "grep"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "t", "delta": "-r x"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "b", "delta": "hmm"},
        {"no": "type"}, "not an object",
    )
    assert parts_to_text(decode([run]).message.parts).split("\n") == [
        '• unrecognised event null', '• unrecognised event null',
        "» half a sent …", "(thinking) hmm …", "⚙ grep(-r x) …",
    ]


def test_agui_frame_without_events_and_unknown_extensions_are_named():
    got = decode([frame(), {"kind": "com.example.snapshot", "rev": 7},
                  {"kind": "ag-ui.frame"}])
    assert parts_to_text(got.message.parts) == (
        "[AG-UI frame carrying no events] "
        '[unrenderable part kind "com.example.snapshot" — no renderer for it on this surface] '
        "[AG-UI frame carrying no events]")


def test_markers_reach_the_feed_plain_and_json():
    """The observer's text for a row is what the feed, --plain and --json show: a message with
    an unknown extension kind, an empty data part and a non-string text is one row with
    markers, not a dropped message."""
    parts = [{"kind": "text", "text": "see"}, {"kind": "data"}, {"kind": "text", "text": 7},
             {"kind": "com.example.x"},
             {"kind": "artifact", "name": "log.txt", "mediaType": "text/plain",
              "digest": "sha256:" + "ab" * 32, "size": 12}]
    got = decode(parts, channel="general")
    m = MeshModel("main", record_events=True)
    m.apply_message(Applied(kind="channel", id=got.message.id, ts=got.message.ts, from_id=ALICE,
                            from_name="alice", text=parts_to_text(got.message.parts),
                            parts=got.message.parts, channel="general"))
    (row,) = m.snapshot().feed
    want = ('see [empty data part] [text part: text is a number, not a string] '
            '[unrenderable part kind "com.example.x" — no renderer for it on this surface] '
            '[artifact log.txt (text/plain, 12 bytes) sha256:' + "ab" * 32 + ']')
    assert row.text == want
    for mode in ("plain", "json"):
        out, err = io.StringIO(), io.StringIO()
        StreamWriter(mode, out, err, colour=False).write(m.take_events() or [row])
        line = out.getvalue().strip()
        if mode == "json":
            assert json.loads(line)["text"] == want
        else:
            assert line.endswith(want)
