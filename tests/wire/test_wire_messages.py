"""Reader reject rules against every messages.json vector, plus hostile input and encoding."""

from __future__ import annotations

import base64
import hashlib
import json
import random
from pathlib import Path

import jsonschema
import msgspec
import pytest
from conftest import VECTORS, load_vectors

from meshview.wire.bounds import ID_BYTES, PARTS_MAX
from meshview.wire import (
    ArtifactPart,
    CotalMessage,
    DataPart,
    Delivery,
    EndpointRef,
    ExtensionPart,
    Rejection,
    TextPart,
    chat_subject,
    decode_delivery,
    encode_message,
    parts_to_text,
)

CASES = load_vectors("messages.json")
SCHEMA = json.loads((Path(VECTORS) / "cotal.schema.json").read_text())
ALICE = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice"
BOB = "u_bbbbbbbbbbbbbbbbbbbbbbbbbb.bob"
CHAT = f"cotal.main.chat.{ALICE}.team.backend"


def payload_bytes(case: dict) -> bytes:
    enc = case["payloadEncoding"]
    if enc == "json":
        return json.dumps(case["payload"]).encode()
    if enc == "raw-text":
        return case["payload"].encode()
    if enc == "base64":
        return base64.b64decode(case["payload"]["base64"])
    raise AssertionError(f"unknown payloadEncoding {enc}")


def test_vectors_loaded():
    assert len(CASES) >= 25


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_message_vector(case):
    exp = case["expect"]
    got = decode_delivery(case["subject"], payload_bytes(case))
    assert isinstance(got, Delivery) is exp["accept"], got
    if isinstance(got, Rejection):
        assert got.reason == exp["reason"]
        assert got.subject == case["subject"]
        if "terminate" in exp:
            assert got.terminate is exp["terminate"]
        assert exp["kind"] is None
        return
    assert exp["reason"] == "ok"
    assert got.kind == exp["kind"]
    assert got.sender == exp["sender"]
    target = exp.get("channel") or exp.get("recipient") or exp.get("role")
    assert got.target == target
    assert got.dedup_key == exp["dedupKey"]
    msg = got.message
    # the subject wins: one routing field, rewritten from the subject
    field = {"channel": "channel", "dm": "to", "anycast": "toService"}[got.kind]
    assert msg.routing == (field, target)
    assert msg.from_.id == got.sender
    if "mentions" in exp:
        assert msg.mentions == exp["mentions"]
    if "ignoredParts" in exp:
        ignored = [i for i, p in enumerate(msg.parts) if isinstance(p, ExtensionPart)]
        assert ignored == exp["ignoredParts"]
    if "artifactBytesBase64" in exp:
        (art,) = [p for p in msg.parts if isinstance(p, ArtifactPart)]
        raw = base64.b64decode(exp["artifactBytesBase64"])
        assert art.digest == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert len(msg.parts) == len(case["payload"]["parts"])


@pytest.mark.parametrize("case", [c for c in CASES if "schemaValid" in c["expect"]],
                         ids=lambda c: c["name"])
def test_schema_valid_flag(case):
    flag = case["expect"]["schemaValid"]
    if flag is None:  # not JSON at all: the schema has nothing to say
        with pytest.raises((ValueError, UnicodeDecodeError)):
            json.loads(payload_bytes(case).decode("utf-8"))
        return
    errors = list(jsonschema.Draft7Validator(SCHEMA).iter_errors(case["payload"]))
    assert (not errors) is flag


def test_data_values_survive_decode():
    case = next(c for c in CASES if c["name"] == "data-part-nested-json")
    got = decode_delivery(case["subject"], payload_bytes(case))
    datas = [p.data for p in got.message.parts if isinstance(p, DataPart)]
    assert datas == [p["data"] for p in case["payload"]["parts"] if p["kind"] == "data"]
    assert datas[1] is None


def test_accepted_message_reencodes_schema_valid():
    for case in CASES:
        if not case["expect"]["accept"]:
            continue
        got = decode_delivery(case["subject"], payload_bytes(case))
        out = json.loads(encode_message(got.message))
        if not any(isinstance(p, ExtensionPart) for p in got.message.parts):
            jsonschema.validate(out, SCHEMA)


# ---- hand-built payloads ----------------------------------------------------------------

def envelope(**over) -> dict:
    base = {"id": "m1", "ts": 1710000000000, "space": "main",
            "from": {"id": ALICE, "name": "alice"}, "channel": "team.backend",
            "parts": [{"kind": "text", "text": "hi"}]}
    base.update(over)
    return {k: v for k, v in base.items() if v is not ...}


def dec(obj, subject=CHAT, **kw):
    return decode_delivery(subject, json.dumps(obj).encode(), **kw)


@pytest.mark.parametrize("over,reason", [
    ({"channel": ...}, "non-conformant-envelope"),
    ({"toService": "reviewer"}, "non-conformant-envelope"),
    ({"ts": "yesterday"}, "malformed-envelope"),
    ({"ts": ...}, "malformed-envelope"),
    ({"space": 3}, "malformed-envelope"),
    ({"from": {"id": ALICE}}, "malformed-envelope"),
    ({"from": {"id": ALICE, "name": 7}}, "malformed-envelope"),
    ({"from": ALICE}, "sender-mismatch"),
    ({"parts": ...}, "malformed-envelope"),
    ({"parts": {"kind": "text"}}, "malformed-envelope"),
    ({"parts": ["hi"]}, "malformed-envelope"),
    ({"parts": [{"text": "no kind"}]}, "malformed-envelope"),
    ({"parts": [{"kind": 3}]}, "malformed-envelope"),
    ({"parts": [{"kind": "artifact", "name": "a", "mediaType": "t/x", "digest": "sha256:" + "A" * 64, "size": 1}]}, "malformed-envelope"),
    ({"parts": [{"kind": "artifact", "name": "a", "mediaType": "t/x", "digest": "sha256:" + "a" * 64, "size": -1}]}, "malformed-envelope"),
    ({"parts": [{"kind": "artifact", "name": "a", "mediaType": "t/x", "digest": "sha256:" + "a" * 64, "size": 1.5}]}, "malformed-envelope"),
    ({"parts": [{"kind": "artifact", "name": "a", "mediaType": "t/x", "digest": "sha256:" + "a" * 64, "size": True}]}, "malformed-envelope"),
    ({"parts": [{"kind": ".com"}]}, "non-conformant-part-kind"),
    ({"parts": [{"kind": "Text", "text": "x"}]}, "non-conformant-part-kind"),
    ({"mentions": "bob"}, "malformed-envelope"),
    ({"channel": None}, "malformed-envelope"),
])
def test_envelope_shape_rejections(over, reason):
    got = dec(envelope(**over))
    assert isinstance(got, Rejection)
    assert got.reason == reason


@pytest.mark.parametrize("history", [False, True])
def test_part_without_data_is_kept_as_a_marker(history):
    """A legacy ``{"kind":"data"}`` (SPEC §5) no longer drops the message, live or backfilled:
    the part is kept, shown as ``[empty data part]``, and never confused with ``null``."""
    got = dec(envelope(parts=[{"kind": "text", "text": "report:"}, {"kind": "data"},
                              {"kind": "data", "data": None}]), history=history)
    assert isinstance(got, Delivery) and got.historical is history
    assert got.message.parts[1] == DataPart(msgspec.UNSET)
    assert parts_to_text(got.message.parts) == "report: [empty data part] null"


@pytest.mark.parametrize("part,shown", [
    ({"kind": "text", "text": 3}, "[text part: text is a number, not a string]"),
    ({"kind": "text", "text": {"a": 1}}, "[text part: text is a object, not a string]"),
    ({"kind": "text"}, "[text part: no text]"),
])
def test_text_part_without_string_text_is_a_marker(part, shown):
    got = dec(envelope(parts=[{"kind": "text", "text": "before"}, part,
                              {"kind": "text", "text": "after"}]))
    assert isinstance(got, Delivery)
    assert parts_to_text(got.message.parts) == f"before {shown} after"
    with pytest.raises(ValueError):  # kept for the reader, never republished
        encode_message(got.message)


def test_legacy_view_part_kept_and_named():
    got = dec(envelope(parts=[{"kind": "view", "spec": {}}, {"kind": "text", "text": "x"}]))
    assert isinstance(got.message.parts[0], ExtensionPart)
    assert parts_to_text(got.message.parts) == (
        '[unrenderable part kind "view" — no renderer for it on this surface] x')


def test_subject_wins_for_anycast_and_strips_other_routing():
    subj = f"cotal.main.svc.reviewer.{ALICE}"
    got = dec(envelope(channel=..., toService="planner"), subject=subj)
    assert got.kind == "anycast" and got.target == "reviewer"
    assert (got.message.channel, got.message.to, got.message.toService) == (None, None, "reviewer")


def test_subject_rejections_never_read_payload():
    for subj, reason, term in [
        (f"cotal.main.chat.{ALICE}.team.*", "not-concrete", False),
        ("cotal.main.eps.manager.S.3.out", "malformed-subject", True),
        (f"cotal.main.chat.p_{'a' * 26}.x.team", "non-principal-owner", False),
    ]:
        got = decode_delivery(subj, b"\xff not even json")
        assert (got.reason, got.terminate) == (reason, term)


# ---- hostile input ------------------------------------------------------------------------

HOSTILE = [
    b"",
    b"\xff\xfe\xfd",
    b"\xc3\x28",
    b'{"id":"\xed\xa0\x80"}',
    b"NaN",
    b'{"id":"m","ts":NaN}',
    b'{"id":"m","ts":Infinity}',
    b"null", b"true", b"42", b'"str"', b"[]", b"[1,2]",
    b"[" * 10_000 + b"]" * 10_000,
    b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
    b"{" * 100_000,
    b'{"id":"m","ts":1e400}',
    b'{"id":"m","ts":123456789012345678901234567890123}',
    b'{"id":"m"' + b',"x":1' * 50_000 + b"}",
]


@pytest.mark.parametrize("payload", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_payload_is_a_rejection(payload):
    got = decode_delivery(CHAT, payload)
    assert isinstance(got, Rejection)
    assert got.reason in {"malformed-json", "malformed-envelope", "sender-mismatch"}


def test_deep_nesting_inside_data_part():
    deep = '{"kind":"data","data":' + "[" * 10_000 + "]" * 10_000 + "}"
    body = json.dumps(envelope(parts=[])).replace('"parts": []', f'"parts": [{deep}]')
    got = decode_delivery(CHAT, body.encode())
    assert isinstance(got, Rejection) and got.reason == "malformed-json"
    ok = "[" * 200 + "]" * 200  # reasonable depth is fine
    body = json.dumps(envelope(parts=[])).replace('"parts": []', f'"parts": [{{"kind":"data","data":{ok}}}]')
    assert isinstance(decode_delivery(CHAT, body.encode()), Delivery)


def test_huge_text_and_control_chars_accepted_verbatim():
    text = "A" * (1 << 20) + "\x00\x07\x1b[2J\x9b\r\u2028\ufeff"
    got = dec(envelope(parts=[{"kind": "text", "text": text}]))
    assert isinstance(got, Delivery)
    assert got.message.parts[0].text == text
    assert parts_to_text(got.message.parts) == text


def test_huge_id_and_many_parts_are_kept_bounded_and_said():
    got = dec(envelope(id="x" * (1 << 20), parts=[{"kind": "text", "text": "p"}] * 50_000))
    assert isinstance(got, Delivery)
    parts = got.message.parts
    assert len(parts) == PARTS_MAX + 1 and len(got.message.id.encode()) <= ID_BYTES
    assert parts_to_text(parts).endswith(f"[parts part: {50_000 - PARTS_MAX} more not kept]")
    assert set(got.cuts) == {"parts", "id"}


def test_hostile_subjects_never_raise():
    for subj in ["", ".", "..", "cotal", "cotal.", "cotal..chat", ">", "*", "cotal.*.>",
                 "cotal.main.chat." + ".".join(["a"] * 5000), "\x00" * 100, "cotal.main.chat.\udc80.x.y",
                 "cotal.main.inst." + ALICE + "." + ALICE + "\n"]:
        got = decode_delivery(subj, json.dumps(envelope()).encode())
        assert isinstance(got, Rejection)


def test_random_mutations_never_raise():
    rng = random.Random(1234)
    seeds = [json.dumps(c["payload"]).encode() for c in CASES if c["payloadEncoding"] == "json"]
    for _ in range(3000):
        b = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 8)):
            op = rng.random()
            i = rng.randrange(len(b))
            if op < 0.4:
                b[i] = rng.randrange(256)
            elif op < 0.7:
                del b[i:i + rng.randint(1, 20)]
            else:
                b[i:i] = rng.choice([b"{", b"[", b'"', b",", b"null", b"\\u0000", b"\xff"])
        got = decode_delivery(CHAT, bytes(b))
        assert isinstance(got, (Delivery, Rejection))


# ---- encoding and rendering -------------------------------------------------------------

def test_encode_message_roundtrip_and_from_rename():
    msg = CotalMessage(id="1", ts=1710000000000, space="main",
                       from_=EndpointRef(ALICE, "alice"), channel="team.backend",
                       parts=[TextPart("hi"), DataPart({"a": [1, None]}),
                              ArtifactPart("r.md", "text/markdown", "sha256:" + "0" * 64, 2048)])
    raw = encode_message(msg)
    obj = json.loads(raw)
    assert obj["from"] == {"id": ALICE, "name": "alice"}
    assert "to" not in obj and "toService" not in obj and "mentions" not in obj
    assert obj["parts"][0] == {"kind": "text", "text": "hi"}
    jsonschema.validate(obj, SCHEMA)
    got = decode_delivery(chat_subject("main", ALICE, "team.backend"), raw)
    assert got.message == msg


@pytest.mark.parametrize("bad", [
    dict(channel=None),
    dict(to=BOB),
    dict(ts=float("nan")),
    dict(parts=[DataPart(float("inf"))]),
    dict(parts=[DataPart({"a": [float("nan")]})]),
    dict(parts=[DataPart({1: "x"})]),
    dict(parts=[ArtifactPart("a", "b", "sha256:xyz", 1)]),
    dict(parts=[ExtensionPart("image")]),
])
def test_encode_message_refuses_nonconformant(bad):
    base = dict(id="1", ts=1, space="main", from_=EndpointRef(ALICE, "alice"),
                channel="team", parts=[TextPart("x")])
    base.update(bad)
    with pytest.raises((ValueError, TypeError, msgspec.EncodeError)):
        encode_message(CotalMessage(**base))


def test_parts_to_text():
    """Upstream ``partText``/``partsToText``: no part renders as nothing, the artifact shows
    its digest, an extension kind with no renderer is named, parts are space-joined."""
    parts = [TextPart("hello"), DataPart({"pr": 42, "ok": True}), DataPart(None),
             ExtensionPart("com.example.snapshot"),
             ArtifactPart("review-notes.md", "text/markdown", "sha256:" + "0" * 64, 2048)]
    assert parts_to_text(parts) == (
        'hello {"pr":42,"ok":true} null '
        '[unrenderable part kind "com.example.snapshot" — no renderer for it on this surface] '
        '[artifact review-notes.md (text/markdown, 2048 bytes) sha256:' + "0" * 64 + ']')
    assert parts_to_text([]) == ""
