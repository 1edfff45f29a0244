"""An ``ag-ui.frame`` kept whole (issue 37 items 1, 2, 9): its envelope and unknown event keys
through the real decoder, the fold's parity with upstream (``agui-render.ts``: fallbacks only for
absent or non-string fields, no line starting with payload), the protocol-skew line, the official
AG-UI vocabulary (``ag_ui.core``) and hand-written 0.0.57-shape frames, a lying peer's frame, and
the frame's way out through ``--json`` and a recording."""

from __future__ import annotations

import gzip
import io
import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from ag_ui import core as agui

from conftest import until
from support.observer import close, now_ms, start_observer

from meshview.lines.stream import StreamWriter, json_message
from meshview.model.mesh import MeshModel
from meshview.record.record import Recorder
from meshview.record.replay import Replay, load_recording
from meshview.wire import bounds as B
from meshview.wire import sanitize
from meshview.wire.decode import MALFORMED_JSON, Delivery, Rejection, decode_delivery
from meshview.wire.frames import AGUI_PROTOCOL, FIRST_SEQ, MAX_SEQ
from meshview.wire.messages import ExtensionPart
from meshview.wire.parts import AGUI_FRAME_KIND, line_start_safe, parts_to_text, skew_line
from meshview.wire.subjects import chat_subject

ALICE = "local.alice"
EVENTS = f"events.{ALICE}"
T0 = 1_700_000_000_000


def envelope(*events: Any, **over: Any) -> dict[str, Any]:
    part = {"kind": AGUI_FRAME_KIND, "protocol": AGUI_PROTOCOL, "threadId": "th-1",
            "runId": "run-1", "epoch": "ep-1", "seq": 7, "events": list(events)}
    part.update(over)
    return {"id": "f1", "ts": T0, "space": "main", "from": {"id": ALICE, "name": "alice"},
            "channel": EVENTS, "parts": [{k: v for k, v in part.items() if v is not _ABSENT}]}


_ABSENT = object()


def decoded(body: dict[str, Any] | bytes) -> Delivery:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    got = decode_delivery(chat_subject("main", ALICE, EVENTS), raw)
    assert type(got) is Delivery, got
    return got


def frame_of(d: Delivery) -> ExtensionPart:
    (p,) = d.message.parts
    assert type(p) is ExtensionPart
    return p


def text_of(*events: Any, **over: Any) -> str:
    return parts_to_text(decoded(envelope(*events, **over)).message.parts)


def lines_of(text: str) -> list[str]:
    """Every line a reader may see: split at each break a terminal or Markdown shows."""
    return re.split("\r\n|[\n\r\x85\u2028\u2029]", text)


# ---- the envelope ------------------------------------------------------------------------------

def test_the_envelope_is_kept_and_the_pinned_constants_are_upstreams():
    assert (AGUI_PROTOCOL, FIRST_SEQ, MAX_SEQ) == ("ag-ui/0.0.57", 1, 2**53 - 1)
    p = frame_of(decoded(envelope({"type": "RUN_STARTED", "runId": "run-1"})))
    assert (p.protocol, p.threadId, p.runId, p.epoch, p.seq) == (
        AGUI_PROTOCOL, "th-1", "run-1", "ep-1", 7)


def test_an_envelope_without_fields_or_events_still_decodes_with_none():
    body = envelope(protocol=_ABSENT, threadId=_ABSENT, runId=_ABSENT, epoch=_ABSENT,
                    seq=_ABSENT, events=_ABSENT)
    p = frame_of(decoded(body))
    assert (p.protocol, p.threadId, p.runId, p.epoch, p.seq, p.events) == (None,) * 6
    assert parts_to_text([p]) == "[AG-UI frame carrying no events]"


@pytest.mark.parametrize("seq,kept", [
    (0, 0), (FIRST_SEQ, 1), (MAX_SEQ, MAX_SEQ), (MAX_SEQ + 1, None), (-1, None),
    (10**30, None), (True, None), (False, None), (1.0, None), ("1", None), (None, None),
    ([1], None), ({"n": 1}, None),
])
def test_seq_is_kept_only_as_a_safe_non_negative_integer(seq, kept):
    got = frame_of(decoded(envelope({"type": "RUN_STARTED"}, seq=seq))).seq
    assert got == kept and type(got) is type(kept)


@pytest.mark.parametrize("field", ["protocol", "threadId", "runId", "epoch"])
def test_envelope_ids_are_strings_bounded_and_their_cut_counted(field):
    for wrong in (7, True, None, ["x"], {"a": "b"}):
        assert getattr(frame_of(decoded(envelope(seq=1, **{field: wrong}))), field) is None
    d = decoded(envelope({"type": "RUN_STARTED"}, **{field: "é" * 100_000}))
    v = getattr(frame_of(d), field)
    assert len(v.encode()) <= B.ID_BYTES and v.endswith("é…") and field in d.cuts
    ok = decoded(envelope(**{field: "x" * 128}))
    assert getattr(frame_of(ok), field) == "x" * 128 and field not in ok.cuts


def test_a_seq_too_long_for_json_numbers_is_a_named_rejection():
    raw = json.dumps(envelope({"type": "RUN_STARTED"})).encode().replace(
        b'"seq": 7', b'"seq": ' + b"9" * 5000)
    got = decode_delivery(chat_subject("main", ALICE, EVENTS), raw)
    assert type(got) is Rejection and got.reason == MALFORMED_JSON


# ---- unknown event keys ------------------------------------------------------------------------

COTAL = {"turnSource": "human", "tsSource": "arrival", "runIdSource": "connector",
         "usage": {"inputTokens": 12, "outputTokens": 3, "costUsd": 0.01}}


def test_unknown_event_keys_are_kept_as_sent():
    events = [{"type": "RUN_STARTED", "threadId": "th-1", "runId": "run-1", "parentRunId": "p",
               "timestamp": T0, "cotal": COTAL, "rawEvent": {"x": [1, 2]}},
              {"type": "STEP_STARTED", "stepName": "plan", "timestamp": T0},
              {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}]
    assert frame_of(decoded(envelope(*events))).events == events


def test_an_oversized_event_keeps_its_read_fields_and_unknown_keys_within_budget():
    """One event past the frame's budget: what the fold reads is kept whole, small unknown keys
    are kept whole in wire order, a megabyte unknown key is cut within half the budget, and
    the events after it still render."""
    huge = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hello",
            "cotal": COTAL, "junk": "j" * 1_000_000, "timestamp": T0, "role": "assistant"}
    d = decoded(envelope({"type": "TEXT_MESSAGE_START", "messageId": "m"}, huge,
                         {"type": "TEXT_MESSAGE_END", "messageId": "m"},
                         {"type": "CUSTOM", "name": "after"}))
    p = frame_of(d)
    ev = p.events[1]
    assert list(ev) == ["type", "messageId", "delta", "cotal", "junk", "timestamp", "role"]
    assert ev["cotal"] == COTAL and ev["timestamp"] == T0 and ev["role"] == "assistant"
    assert ev["junk"].endswith("j…") and len(ev["junk"]) <= B.AGUI_FRAME_BYTES // 2
    assert len(msgspec.json.encode(p.events)) <= B.AGUI_FRAME_BYTES
    assert "events" in d.cuts and p.dropped == 0
    assert parts_to_text([p]) == "» hello\n• custom after"


def test_an_unknown_value_that_does_not_fit_is_dropped_and_counted():
    nested = {"deep": ["x" * 1000] * 200}  # 200 KB, not a string: kept whole or not at all
    d = decoded(envelope({"type": "CUSTOM", "name": "n", "value": nested, "cotal": COTAL}))
    (ev,) = frame_of(d).events
    assert ev == {"type": "CUSTOM", "name": "n", "cotal": COTAL} and "events" in d.cuts


# ---- fold parity -------------------------------------------------------------------------------

@pytest.mark.parametrize("event,line", [
    ({"type": "RUN_STARTED", "runId": ""}, "▸ run  started"),
    ({"type": "RUN_STARTED"}, "▸ run ? started"),
    ({"type": "RUN_STARTED", "runId": 5}, "▸ run ? started"),
    ({"type": "RUN_FINISHED", "runId": "", "outcome": {"type": ""}}, "◂ run  finished"),
    ({"type": "RUN_FINISHED", "runId": None}, "◂ run ? finished"),
    ({"type": "RUN_ERROR", "message": ""}, "✗ run error: "),
    ({"type": "RUN_ERROR", "code": "", "message": None}, "✗ run error: (no message)"),
    ({"type": "TOOL_CALL_RESULT", "content": ""}, "  ↳ "),
    ({"type": "TOOL_CALL_RESULT", "content": [{"type": "text"}]}, "  ↳ (no content)"),
    ({"type": "CUSTOM", "name": ""}, "• custom "),
    ({"type": "CUSTOM"}, "• custom (unnamed)"),
    ({"type": "TOOL_CALL_END", "toolCallId": "never-started"}, "⚙ ?()"),
])
def test_fallbacks_stand_in_only_for_absent_or_non_string_fields(event, line):
    assert text_of(event) == line


def test_an_empty_tool_name_renders_empty_ended_or_not():
    """Claude's mapper sends ``toolCallName: ""`` for a nameless tool_use (events.md §6)."""
    start = {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": ""}
    assert text_of(start, {"type": "TOOL_CALL_END", "toolCallId": "c"}) == "⚙ ()"
    assert text_of(start) == "⚙ () …"
    assert text_of({**start, "toolCallName": 3}) == "⚙ ?() …"


def test_the_predicate_is_upstreams_line_start_safe():
    unsafe = ["- x", "* x", "+ x", "> q", "| t", "# h", "#", "-", "   - x", "1. x", "12) x",
              "   3. x", "    code", "     x", "    "]
    safe = ["▸ run r started", "  · - x", "  ↳ - x", "» # h", "#tag", "-x", "1.x", "1x",
            "(thinking) > q", "⚙ Bash()", "• custom x", "[AG-UI frame carrying no events]", ""]
    assert [x for x in unsafe if line_start_safe(x)] == []
    assert [x for x in safe if not line_start_safe(x)] == []


MARKDOWN = "- item\n# head\n    code\n1. one\r> quote\r\n| t |\u2028+ plus\x85   * star\u2029#"


def test_no_line_starts_with_payload_whatever_the_payload_opens():
    """Every payload field carries each Markdown block opener after every line break a reader
    shows: every emitted line still starts with the fold's own glyph."""
    events = [
        {"type": "RUN_STARTED", "runId": MARKDOWN},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": MARKDOWN},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "k", "delta": MARKDOWN},
        {"type": "REASONING_MESSAGE_END", "messageId": "k"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": MARKDOWN},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": MARKDOWN},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "TOOL_CALL_RESULT", "content": MARKDOWN},
        {"type": "CUSTOM", "name": MARKDOWN},
        {"type": "RUN_ERROR", "code": MARKDOWN, "message": MARKDOWN},
        {"type": MARKDOWN},
        {"type": "RUN_FINISHED", "runId": MARKDOWN, "outcome": {"type": MARKDOWN}},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "open", "delta": MARKDOWN},
        {"type": "TOOL_CALL_START", "toolCallId": "open", "toolCallName": MARKDOWN},
    ]
    text = text_of(*events, protocol=MARKDOWN)
    lines = lines_of(text)
    assert len(lines) > 100 and [x for x in lines if not line_start_safe(x)] == []
    assert lines_of(sanitize.text(text, indent="")) == lines  # what the terminal shows, too


# ---- protocol skew -----------------------------------------------------------------------------

def test_a_frame_of_another_protocol_renders_flagged_on_one_first_line():
    run = ({"type": "RUN_STARTED", "runId": "r"}, {"type": "RUN_FINISHED", "runId": "r"})
    assert text_of(*run) == "▸ run r started\n◂ run r finished"
    assert text_of(*run, protocol=_ABSENT) == "▸ run r started\n◂ run r finished"
    assert text_of(*run, protocol=7) == "▸ run r started\n◂ run r finished"  # not a string
    assert text_of(*run, protocol="ag-ui/0.1.0").split("\n") == [
        "• protocol skew: ag-ui/0.1.0 (this console reads ag-ui/0.0.57)",
        "▸ run r started", "◂ run r finished"]
    assert skew_line("x") == "• protocol skew: x (this console reads ag-ui/0.0.57)"
    assert text_of(protocol="v2").split("\n") == [skew_line("v2"),
                                                 "[AG-UI frame carrying no events]"]
    assert text_of({"type": "TEXT_MESSAGE_START"}, protocol="").split("\n") == [
        skew_line(""), "[AG-UI frame with 1 event(s) and nothing to show]"]
    # a protocol that is itself hostile stays one glyph line plus prefixed continuations
    lines = text_of(*run, protocol="v9\n- list\u202e").split("\n")
    assert lines[:2] == ["• protocol skew: v9", "  · - list\u202e (this console reads ag-ui/0.0.57)"]
    assert "\\u202e" in sanitize.text("\n".join(lines), indent="")


# ---- the official vocabulary -------------------------------------------------------------------

FOLDED = {"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "TEXT_MESSAGE_START",
          "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "REASONING_MESSAGE_START",
          "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "TOOL_CALL_START",
          "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "CUSTOM"}

# the required fields of each official model (snake names), and a few optional ones a producer
# sets; a type the SDK gains later fails the lookup below, by name
SDK_FIELDS: dict[str, dict[str, Any]] = {
    "TEXT_MESSAGE_START": {"message_id": "m", "role": "assistant"},
    "TEXT_MESSAGE_CONTENT": {"message_id": "m", "delta": "- hi\n# there"},
    "TEXT_MESSAGE_END": {"message_id": "m"},
    "TEXT_MESSAGE_CHUNK": {"message_id": "m", "delta": "chunk"},
    "TOOL_CALL_START": {"tool_call_id": "c", "tool_call_name": "Bash"},
    "TOOL_CALL_ARGS": {"tool_call_id": "c", "delta": '{"cmd":"ls"}'},
    "TOOL_CALL_END": {"tool_call_id": "c"},
    "TOOL_CALL_CHUNK": {"tool_call_id": "c", "delta": "x"},
    "TOOL_CALL_RESULT": {"message_id": "r", "tool_call_id": "c", "content": "ok\n- done"},
    "STATE_SNAPSHOT": {"snapshot": {"a": 1}},
    "STATE_DELTA": {"delta": [{"op": "add", "path": "/a", "value": 1}]},
    "MESSAGES_SNAPSHOT": {"messages": [{"id": "u", "role": "user", "content": "hi"}]},
    "ACTIVITY_SNAPSHOT": {"message_id": "a", "activity_type": "plan", "content": {"s": 1}},
    "ACTIVITY_DELTA": {"message_id": "a", "activity_type": "plan",
                       "patch": [{"op": "remove", "path": "/s"}]},
    "RAW": {"event": {"native": True}},
    "CUSTOM": {"name": "checkpoint", "value": {"n": 1}},
    "RUN_STARTED": {"thread_id": "th-1", "run_id": "run-1"},
    "RUN_FINISHED": {"thread_id": "th-1", "run_id": "run-1"},
    "RUN_ERROR": {"message": "run failed"},
    "STEP_STARTED": {"step_name": "plan"},
    "STEP_FINISHED": {"step_name": "plan"},
    "REASONING_START": {"message_id": "k"},
    "REASONING_MESSAGE_START": {"message_id": "k", "role": "reasoning"},
    "REASONING_MESSAGE_CONTENT": {"message_id": "k", "delta": "> hmm"},
    "REASONING_MESSAGE_END": {"message_id": "k"},
    "REASONING_MESSAGE_CHUNK": {"message_id": "k", "delta": "hm"},
    "REASONING_END": {"message_id": "k"},
    "REASONING_ENCRYPTED_VALUE": {"subtype": "message", "entity_id": "k",
                                  "encrypted_value": "opaque"},
    "SUBAGENT_STARTED": {"subagent_run_id": "s", "name": "helper"},
    "SUBAGENT_FINISHED": {"subagent_run_id": "s"},
    "SUBAGENT_ERROR": {"subagent_run_id": "s", "message": "failed"},
}


def sdk_event(t: agui.EventType, **extra: Any) -> dict[str, Any]:
    """One official event as a producer puts it on the wire (camelCase, no nulls)."""
    cls = getattr(agui, "".join(w.capitalize() for w in t.value.split("_")) + "Event")
    ev = cls(**SDK_FIELDS[t.value], **extra)
    return ev.model_dump(by_alias=True, exclude_none=True, mode="json")


@pytest.mark.parametrize("t", list(agui.EventType), ids=lambda t: t.value)
def test_every_official_type_is_folded_or_named_and_every_line_is_safe(t):
    ev = sdk_event(t, cotal={"turnSource": "human"})
    assert ev["type"] == t.value and ev["cotal"] == {"turnSource": "human"}
    d = decoded(envelope(ev))
    assert frame_of(d).events == [ev]  # kept as sent, unknown keys and all
    text = parts_to_text(d.message.parts)
    if t.value in FOLDED:
        assert "unrecognised" not in text, text
    else:
        assert text == f'• unrecognised event "{t.value}"'
    assert [x for x in lines_of(text) if not line_start_safe(x)] == []


def test_an_official_run_folds_as_upstream_draws_it():
    E = agui.EventType
    seq = [sdk_event(E.RUN_STARTED, cotal={"turnSource": "channel"}),
           sdk_event(E.REASONING_MESSAGE_START), sdk_event(E.REASONING_MESSAGE_CONTENT),
           sdk_event(E.REASONING_MESSAGE_END),
           sdk_event(E.TEXT_MESSAGE_START), sdk_event(E.TEXT_MESSAGE_CONTENT),
           sdk_event(E.TEXT_MESSAGE_END),
           sdk_event(E.TOOL_CALL_START), sdk_event(E.TOOL_CALL_ARGS), sdk_event(E.TOOL_CALL_END),
           sdk_event(E.TOOL_CALL_RESULT), sdk_event(E.CUSTOM),
           sdk_event(E.RUN_FINISHED, outcome={"type": "success"}),
           sdk_event(E.RUN_ERROR, code="E1")]
    assert seq[-2]["outcome"] == {"type": "success"}
    assert text_of(*seq).split("\n") == [
        "▸ run run-1 started", "(thinking) > hmm", "» - hi", "» # there",
        '⚙ Bash({"cmd":"ls"})', "  ↳ ok", "  · - done", "• custom checkpoint",
        "◂ run run-1 finished (success)", "✗ run error [E1]: run failed"]


# Cotal pins ag-ui 0.0.57 (events.md §7.12); the Python SDK is newer: THINKING_* exist only in
# 0.0.57 (deprecated there), and a 0.0.57 writer's frame is what the wire carries.
CLAUDE_TURN_0057 = [
    {"type": "RUN_STARTED", "threadId": "sess-1", "runId": "r-1", "timestamp": T0,
     "cotal": {"turnSource": "human", "runIdSource": "connector", "tsSource": "arrival"}},
    {"type": "TEXT_MESSAGE_START", "messageId": "u1#0", "role": "user", "timestamp": T0},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "u1#0", "delta": "run the tests"},
    {"type": "TEXT_MESSAGE_END", "messageId": "u1#0"},
    {"type": "THINKING_START", "title": "plan"},
    {"type": "THINKING_TEXT_MESSAGE_START"},
    {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": "tests first"},
    {"type": "THINKING_TEXT_MESSAGE_END"},
    {"type": "THINKING_END"},
    {"type": "TOOL_CALL_START", "toolCallId": "t1", "toolCallName": "",
     "parentMessageId": "a1#1", "cotal": {"providerMessageId": "msg_1"}},
    {"type": "TOOL_CALL_END", "toolCallId": "t1"},
    {"type": "TOOL_CALL_START", "toolCallId": "t2", "toolCallName": "Bash"},
    {"type": "TOOL_CALL_END", "toolCallId": "t2"},
    {"type": "RUN_FINISHED", "threadId": "sess-1", "runId": "r-1",
     "cotal": {"stopReason": "end_turn", "usage": {"inputTokens": 5}}},
]


def test_a_0057_shape_claude_turn_folds_with_its_thinking_events_named():
    d = decoded(envelope(*CLAUDE_TURN_0057, threadId="sess-1", runId="r-1", seq=FIRST_SEQ))
    assert frame_of(d).events == CLAUDE_TURN_0057
    assert parts_to_text(d.message.parts).split("\n") == [
        "▸ run r-1 started", "» run the tests",
        '• unrecognised event "THINKING_START"',
        '• unrecognised event "THINKING_TEXT_MESSAGE_START"',
        '• unrecognised event "THINKING_TEXT_MESSAGE_CONTENT"',
        '• unrecognised event "THINKING_TEXT_MESSAGE_END"',
        '• unrecognised event "THINKING_END"',
        "⚙ ()", "⚙ Bash()", "◂ run r-1 finished"]


def test_a_0057_close_frame_and_null_elements():
    assert text_of({"type": "RUN_ERROR", "message": "run failed"}, None, 3, "RUN_STARTED",
                   {"type": None}, {}) == "\n".join([
        "✗ run error: run failed", "• unrecognised event null", "• unrecognised event null",
        "• unrecognised event null", "• unrecognised event null", "• unrecognised event null"])


# ---- a lying peer ------------------------------------------------------------------------------

def test_a_hostile_frame_is_bounded_named_and_never_a_traceback():
    invisible = "Ba\u200bsh\u202e\x1b[31m"
    events: list[Any] = [{"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": invisible},
                         {"type": "TOOL_CALL_END", "toolCallId": "c"},
                         {"type": "CUSTOM", "name": "n", "x" * 1_000_000: 1, "y": "z" * 1_000_000}]
    events += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "d"}] * 10_000
    for seq, epoch in ((2**64, 5), (-5, ["e"]), (True, {"e": 1}), (MAX_SEQ + 1, None)):
        d = decoded(envelope(*events, seq=seq, epoch=epoch))
        p = frame_of(d)
        assert p.seq is None and p.epoch is None
        assert len(p.events) <= B.AGUI_EVENTS_MAX and p.dropped == len(events) - len(p.events)
        assert len(msgspec.json.encode(p.events)) <= B.AGUI_FRAME_BYTES
        assert "events" in d.cuts
        assert p.events[0]["toolCallName"] == invisible  # kept exact (``--json``)
        assert "x" * 1_000_000 not in p.events[2]  # a megabyte key does not fit: dropped
        text = parts_to_text(d.message.parts)
        lines = text.split("\n")
        assert lines[0] == f"⚙ {invisible}()" and lines[1] == "• custom n"
        assert lines[-1] == f"• {p.dropped} more events not shown"
        shown = sanitize.text(text, indent="")
        assert "\\u200b" in shown and "\\u202e" in shown and "\x1b" not in shown
        assert [x for x in lines_of(text) if not line_start_safe(x)] == []


# ---- --json and recordings ---------------------------------------------------------------------

def _row(d: Delivery) -> tuple[MeshModel, Any]:
    m = MeshModel("main", clock=lambda: T0 / 1000)
    assert m.apply_message(d.applied(T0))
    (row,) = [e for e in m.snapshot().feed if e.kind == "channel"]
    return m, row


def test_json_prints_the_whole_frame_and_its_chain():
    events = [{"type": "RUN_STARTED", "runId": "run-1", "cotal": COTAL, "timestamp": T0}]
    _, row = _row(decoded(envelope(*events)))
    o = json.loads(json.dumps(json_message(row)))
    assert o["event"] is True and o["text"] == "▸ run run-1 started"
    assert o["parts"] == [{"kind": AGUI_FRAME_KIND, "protocol": AGUI_PROTOCOL, "threadId": "th-1",
                           "runId": "run-1", "epoch": "ep-1", "seq": 7, "events": events}]
    assert o["chain"] == [ALICE, "ep-1", "th-1"]
    # no seq: no chain, and a field the frame lacked is null
    _, bare = _row(decoded(envelope(*events, seq=-1, epoch=_ABSENT)))
    o = json_message(bare)
    assert "chain" not in o and o["parts"][0]["seq"] is None and o["parts"][0]["epoch"] is None
    # what the StreamWriter prints is that line
    out = io.StringIO()
    StreamWriter("json", out, io.StringIO(), colour=False).write([row])
    assert json.loads(out.getvalue())["chain"] == [ALICE, "ep-1", "th-1"]


def test_json_keeps_a_cut_frames_dropped_count():
    many = [{"type": "CUSTOM", "name": "n"}] * (B.AGUI_EVENTS_MAX + 5)
    _, row = _row(decoded(envelope(*many)))
    (part,) = json_message(row)["parts"]
    assert part["dropped"] == 5 and len(part["events"]) == B.AGUI_EVENTS_MAX


def test_a_recording_keeps_the_whole_frame_and_replay_re_renders_it(tmp_path):
    t = [T0 / 1000]
    m = MeshModel("main", clock=lambda: t[0])
    path = str(tmp_path / "r.jsonl.gz")
    r = Recorder(m, path)
    weird = {"type": "CUSTOM", "name": "n", "$o": "meshview.x:Y", "$u": 0, "cotal": COTAL}
    d = decoded(envelope({"type": "RUN_STARTED", "runId": "run-1"}, weird, protocol="ag-ui/9"))
    assert m.apply_message(d.applied(T0))
    r.close()
    replay = Replay(load_recording(path))
    replay.seek(replay.end)
    assert replay.damage is None
    (row,) = [e for e in replay.model.snapshot().feed if e.kind == "channel"]
    (p,) = row.parts
    assert p == frame_of(d) and p.events[1] == weird  # ``$`` keys are data, not tags
    assert (p.protocol, p.seq, p.epoch, p.threadId) == ("ag-ui/9", 7, "ep-1", "th-1")
    assert parts_to_text(row.parts) == row.text == "\n".join(
        [skew_line("ag-ui/9"), "▸ run run-1 started", "• custom n"])
    assert json_message(row)["chain"] == [ALICE, "ep-1", "th-1"]

    # the same recording as a build of before the envelope wrote it: the part without its
    # five fields replays with seq unknown (no chain), and renders as before
    lines = [json.loads(x) for x in gzip.decompress(Path(path).read_bytes()).splitlines()]
    for line in lines:
        if line.get("op") == "apply_message":
            (part,) = line["a"][0]["f"]["parts"]
            for k in ("protocol", "threadId", "runId", "epoch", "seq"):
                del part["f"][k]
            line["a"][0]["f"]["text"] = "▸ run run-1 started\n• custom n"
    old = tmp_path / "old.jsonl.gz"
    old.write_bytes(gzip.compress(b"".join(json.dumps(x).encode() + b"\n" for x in lines)))
    replay = Replay(load_recording(str(old)))
    replay.seek(replay.end)
    assert replay.damage is None
    (row,) = [e for e in replay.model.snapshot().feed if e.kind == "channel"]
    (p,) = row.parts
    assert (p.protocol, p.threadId, p.runId, p.epoch, p.seq) == (None,) * 5
    assert parts_to_text(row.parts) == row.text and "chain" not in json_message(row)


@pytest.mark.parametrize("fixture", ["recording-v1", "recording-v2", "recording-v2-premove"])
def test_old_recordings_still_load_and_replay(fixture):
    path = Path(__file__).resolve().parents[1] / "fixtures" / fixture / "team.jsonl.gz"
    replay = Replay(load_recording(str(path)))
    replay.seek(replay.end)
    assert replay.damage is None
    feed = replay.model.snapshot().feed
    assert any(e.kind == "channel" for e in feed)
    for e in feed:  # every part (none is a frame yet) renders, and no row claims a chain
        assert "chain" not in json_message(e)


# ---- over a real broker ------------------------------------------------------------------------

async def test_a_frame_over_the_broker_reaches_the_model_whole(broker, nc, space):
    """A live frame published on an event channel with a non-``local``/``u_`` owner token
    (upstream's classifier): the model's row is an event row holding the whole part."""
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        channel = "events.team.alice"
        body = envelope({"type": "RUN_STARTED", "runId": "run-1", "cotal": COTAL},
                        protocol="ag-ui/0.0.58")
        body.update(id="live-frame", ts=now_ms(), space=space, channel=channel)
        await nc.publish(chat_subject(space, ALICE, channel), json.dumps(body).encode())
        await until(lambda: any(e.id == "live-frame" for e in model.snapshot().feed),
                    what="the frame row")
        (row,) = [e for e in model.snapshot().feed if e.id == "live-frame"]
        assert row.event and row.channel == channel
        (p,) = row.parts
        assert (p.protocol, p.threadId, p.runId, p.epoch, p.seq) == (
            "ag-ui/0.0.58", "th-1", "run-1", "ep-1", 7)
        assert p.events[0]["cotal"] == COTAL
        assert row.text.split("\n") == [skew_line("ag-ui/0.0.58"), "▸ run run-1 started"]
    finally:
        await close(obs)
