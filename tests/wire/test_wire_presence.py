"""Presence decisions against every presence.json vector, plus hostile values and helpers."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import msgspec
import pytest
from conftest import VECTORS, load_vectors

from meshview.wire import (
    PRESENCE_CANARY_KEY,
    AgentCard,
    ChannelConfig,
    ChannelDefaults,
    Presence,
    PresenceCondition,
    decode_channel_config,
    decode_channel_defaults,
    decode_membership,
    decode_presence,
    effective_class,
    effective_replay,
    effective_window_ms,
    encode_presence,
    is_heartbeat_only,
)

CASES = load_vectors("presence.json")
_SCHEMA = json.loads((Path(VECTORS) / "cotal.schema.json").read_text())
PRESENCE_SCHEMA = {**_SCHEMA, "$ref": "#/definitions/Presence"}
ALICE = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice"
NOW = 1710000600000


def value_bytes(case: dict) -> bytes | None:
    enc = case["payloadEncoding"]
    if enc == "none":
        return None
    if enc == "json":
        return json.dumps(case["value"]).encode()
    if enc == "raw-text":
        return case["value"].encode()
    raise AssertionError(enc)


def test_vectors_loaded():
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_presence_vector(case):
    exp = case["expect"]
    prev = msgspec.convert(case["previous"], Presence) if "previous" in case else None
    got = decode_presence(case["key"], case["operation"], value_bytes(case), case["now"], prev)
    assert got.action == exp["action"]
    assert got.derived_status == exp["derivedStatus"]
    assert got.reason == exp["reason"]
    assert (got.action in ("apply", "mark-offline")) is exp["accept"]
    if "newIncarnation" in exp:
        assert got.new_incarnation is exp["newIncarnation"]
    if "conditionCode" in exp:
        assert got.condition_code == exp["conditionCode"]
    if got.action == "apply":
        assert got.presence is not None and got.presence.card.id == case["key"]
    if got.action == "mark-offline":
        assert got.presence is not None and got.presence.status == "offline"
    if got.action in ("drop", "ignore"):
        assert got.presence is None


@pytest.mark.parametrize("case", [c for c in CASES if "schemaValid" in c["expect"]],
                         ids=lambda c: c["name"])
def test_schema_valid_flag(case):
    flag = case["expect"]["schemaValid"]
    if flag is None:  # delete/purge markers and the plain-text canary are not records
        assert case["payloadEncoding"] in ("none", "raw-text")
        return
    errors = list(jsonschema.Draft7Validator(PRESENCE_SCHEMA).iter_errors(case["value"]))
    assert (not errors) is flag


def record(**over) -> Presence:
    base = dict(card=AgentCard(id=ALICE, name="alice", kind="agent"), status="idle",
                ts=NOW - 1000, lifecycleUid="k3q9m2x7v4b8n1c6z5w0r7t2y4")
    base.update(over)
    return Presence(**base)


def put(p: Presence | bytes, key: str = ALICE, **kw):
    raw = p if isinstance(p, bytes) else encode_presence(p)
    return decode_presence(key, "PUT", raw, NOW, **kw)


@pytest.mark.parametrize("raw,reason", [
    (b"", "malformed-json"),
    (b"\xff\xfe", "malformed-json"),
    (b"[" * 10_000 + b"]" * 10_000, "malformed-json"),
    (b"NaN", "malformed-json"),
    (b"null", "malformed-record"),
    (b"[]", "malformed-record"),
    (b'{"card":{"id":"x"},"status":"idle","ts":1}', "malformed-record"),
    (b'{"status":"idle","ts":1}', "malformed-record"),
    (json.dumps({"card": {"id": ALICE, "name": "a", "kind": "agent"}, "status": "idle",
                 "ts": "now"}).encode(), "malformed-record"),
    (json.dumps({"card": {"id": ALICE, "name": "a", "kind": "agent"}, "status": "idle",
                 "ts": 1, "condition": "approval"}).encode(), "malformed-record"),
    (b'{"card":{"id":"' + b"\xe9" + b'"}}', "malformed-json"),
])
def test_hostile_values_drop(raw, reason):
    got = put(raw)
    assert (got.action, got.reason) == ("drop", reason)


def test_non_principal_key_dropped():
    nkey = "UAQGWOEVJKMIO4WXSYOTLARXYOZTCXFK67JASEH6AFFFYK6FOPSKQCAD.team"
    p = record(card=AgentCard(id=nkey, name="team", kind="agent"))
    assert put(p, key=nkey).reason == "non-principal-owner"


def test_reserved_and_unknown_operations():
    assert decode_presence(PRESENCE_CANARY_KEY, "DEL", None, NOW).action == "ignore"
    assert decode_presence("_cotal_other", "PUT", b"x", NOW).action == "ignore"
    assert decode_presence(ALICE, "FROB", b"{}", NOW).reason == "unknown-operation"
    got = decode_presence(ALICE, "DEL", None, NOW)  # unknown peer deleted: nothing to keep
    assert (got.action, got.presence) == ("mark-offline", None)


def test_mark_offline_drops_advisory_fields():
    prev = record(status="working", attention="focus", channelModes={"x": "muted"},
                  statusSince=NOW - 5000, activity="tests")
    got = decode_presence(ALICE, "PURGE", None, NOW, prev)
    p = got.presence
    assert (p.status, p.attention, p.channelModes, p.statusSince) == ("offline", None, None, None)
    assert p.activity == "tests" and p.card == prev.card


def test_ttl_is_configurable_and_future_ts_is_live():
    assert put(record(ts=NOW - 3000), ttl_ms=2000).derived_status == "offline"
    assert put(record(ts=NOW + 60_000)).derived_status == "idle"


def test_incarnation_needs_both_uids():
    assert not put(record(lifecycleUid=None), previous=record()).new_incarnation
    assert not put(record(), previous=record(lifecycleUid=None)).new_incarnation
    assert put(record(lifecycleUid="z" * 26), previous=record()).new_incarnation


def test_unknown_fields_ignored_and_reencode_is_schema_valid():
    raw = json.loads(encode_presence(record(condition=PresenceCondition("approval"))))
    raw["futureField"] = {"x": 1}
    raw["card"]["avatar"] = "a.png"
    got = put(json.dumps(raw).encode())
    assert got.action == "apply" and got.condition_code == "approval"
    jsonschema.validate(json.loads(encode_presence(got.presence)), PRESENCE_SCHEMA)


def test_card_fields_decode():
    card = {"id": ALICE, "name": "alice", "kind": "agent", "role": "reviewer",
            "skills": [{"id": "s1", "name": "Review", "description": "reads diffs"}],
            "tags": ["py"], "meta": {"model": "m", "com.example.x": {"y": 1}},
            "protocolVersion": "0.4"}
    got = put(json.dumps({"card": card, "status": "working", "ts": NOW}).encode())
    c = got.presence.card
    assert (c.role, c.skills[0].description, c.meta["model"], c.protocolVersion) == (
        "reviewer", "reads diffs", "m", "0.4")


def test_is_heartbeat_only():
    a = record()
    assert is_heartbeat_only(a, record(ts=NOW))
    assert not is_heartbeat_only(a, record(status="working"))
    assert not is_heartbeat_only(a, record(activity="x"))
    assert not is_heartbeat_only(a, record(attention="dnd"))
    assert not is_heartbeat_only(a, record(channelModes={"a": "quiet"}))
    assert not is_heartbeat_only(a, record(lifecycleUid="z" * 26))
    assert not is_heartbeat_only(a, record(condition=PresenceCondition("input")))


def test_encode_presence_refuses_bad_status():
    with pytest.raises(ValueError):
        encode_presence(record(status="sleeping"))


# ---- channel registry and membership -----------------------------------------------------

def test_channel_effective_rules():
    assert effective_replay(None, None) is True
    assert effective_replay(ChannelConfig(), ChannelDefaults(replay=False)) is False
    assert effective_replay(ChannelConfig(replay=True), ChannelDefaults(replay=False)) is True
    assert effective_class(None, None) == "durable"
    assert effective_class(ChannelConfig(), ChannelDefaults(deliveryClass="live")) == "live"
    assert effective_class(ChannelConfig(deliveryClass="durable"),
                           ChannelDefaults(deliveryClass="live")) == "durable"
    assert effective_window_ms(None, None) is None
    assert effective_window_ms(None, ChannelDefaults(replayWindow="24h")) == 86_400_000
    assert effective_window_ms(ChannelConfig(replayWindow="90s"),
                               ChannelDefaults(replayWindow="24h")) == 90_000
    assert effective_window_ms(ChannelConfig(replayWindow="2w"), None) is None


def test_registry_and_membership_decoders():
    cfg = decode_channel_config(b'{"replay":false,"replayWindow":"7d","deliveryClass":"live",'
                                b'"description":"d","instructions":"i","extra":1}')
    assert (cfg.replay, cfg.replayWindow, cfg.deliveryClass) == (False, "7d", "live")
    assert decode_channel_defaults(b'{"replay":true}').replay is True
    assert decode_channel_config(b"not json") is None
    assert decode_channel_config(b"[" * 10_000) is None
    assert decode_channel_config(None) is None
    m = decode_membership(b'{"live":["team.>"],"durable":["team.backend"],"observedAt":5}')
    assert (m.live, m.durable, m.observedAt) == (["team.>"], ["team.backend"], 5)
    assert decode_membership(b'{"live":3}') is None


# ---- the heartbeat fast path: clock_template / match_clocks against a full decode ----------

def _base_records() -> list[bytes]:
    card = {"id": ALICE, "name": "alice", "kind": "agent", "role": "qa"}
    rec = {"card": card, "status": "working", "ts": NOW, "statusSince": NOW - 5000,
           "activeAt": NOW - 100, "activity": "tests", "activitySince": NOW - 900}
    nested = {**{k: v for k, v in rec.items() if k != "activeAt"},
              "card": {**card, "meta": {"activeAt": 5}}}  # not a clock: stays in a segment
    return [
        msgspec.json.encode(rec),                                   # msgspec: no spaces
        json.dumps(rec).encode(),                                   # json.dumps: '"ts": 1'
        json.dumps({**rec, "ts": NOW + 0.5}).encode(),              # a float clock
        json.dumps({**rec, "activitySince": NOW - 0.5}).encode(),   # ... beside integers
        json.dumps({"card": card, "status": "idle", "ts": NOW}).encode(),  # ts only
        json.dumps(nested).encode(),                                # a nested key of a clock's name
        json.dumps({**rec, "activity": 'say "ts":1 and \\"ts\\":2'}).encode(),  # in a string
        b'{"ts":%d,"card":{"id":"%s","name":"a","kind":"agent"},"status":"idle","ts":%d}'
        % (NOW, ALICE.encode(), NOW),                               # a repeated key
        b'{"card":{"id":"%s","name":"a","kind":"agent"},"status":"idle","ts":1.71e12}'
        % ALICE.encode(),                                           # an exponent
        b'{"card":{"id":"%s","name":"a","kind":"agent","meta":{"ts":%d}},"status":"idle",'
        b'"\\u0074s":%d}' % (ALICE.encode(), NOW, NOW),              # an escaped key
    ]


def _mutations(raw: bytes, rng) -> list[bytes]:
    out = []
    digits = [i for i, c in enumerate(raw) if chr(c).isdigit()]
    for _ in range(40):
        i = rng.choice(digits)
        out.append(raw[:i] + str(rng.randrange(10)).encode() + raw[i + 1:])  # one digit
        j = rng.randrange(len(raw))
        out.append(raw[:j] + rng.choice([b"0", b"9", b"-", b".", b" ", b"e5", b"x", b'"'])
                   + raw[j:])  # an insertion anywhere
        out.append(raw[:j] + raw[j + 1:])  # a deletion anywhere
    for old, new in ((b"%d" % NOW, b"%d" % (NOW + 2000)), (b"%d" % NOW, b"0%d" % NOW),
                     (b"%d" % NOW, b"%d.25" % NOW), (b"%d" % NOW, b"-%d" % NOW),
                     (b"%d" % NOW, b"9" * 30), (b"working", b"idle"), (b"qa", b"qb")):
        out.append(raw.replace(old, new))
    return out


def test_the_clock_fast_path_agrees_with_a_full_decode():
    """Whatever bytes arrive, a match is a record that decodes, is heartbeat-only against the
    one the template was cut from, and has exactly the clocks the match read; records whose
    only change is a clock do match (the fast path is taken, not merely safe)."""
    import random

    from meshview.wire import clock_template, match_clocks
    from meshview.wire.presence import CLOCK_FIELDS

    rng = random.Random(5)
    matched = cut = 0
    for raw in _base_records():
        p = msgspec.json.decode(raw, type=Presence)
        t = clock_template(raw, p)
        if t is None:
            continue
        cut += 1
        assert match_clocks(t, raw) == [getattr(p, f) for f in CLOCK_FIELDS]
        for new in _mutations(raw, rng):
            got = match_clocks(t, new)
            try:
                q = msgspec.json.decode(new, type=Presence)
            except (msgspec.DecodeError, msgspec.ValidationError):
                assert got is None, new
                continue
            if got is None:
                continue
            matched += 1
            assert is_heartbeat_only(p, q), new
            want = [getattr(q, f) for f in CLOCK_FIELDS]
            assert got == want and [type(v) for v in got] == [type(v) for v in want], new
    assert cut == 7  # all but the repeated key, the exponent and the escaped key
    assert matched > 100


def test_a_clock_that_cannot_be_cut_safely_gets_no_template():
    from meshview.wire import clock_template

    recs = _base_records()
    for raw in (recs[7], recs[8], recs[9]):  # repeated key, exponent, escaped key
        assert clock_template(raw, msgspec.json.decode(raw, type=Presence)) is None, raw
    # a float clock, or a value that is not the bytes of the record given, is not cut
    for raw, p in ((recs[2], msgspec.json.decode(recs[2], type=Presence)),
                   (recs[0].replace(b"%d" % NOW, b"%d" % (NOW + 1)),
                    msgspec.json.decode(recs[0], type=Presence))):
        segments, fields, _, rest = clock_template(raw, p)
        assert rest is None
        assert 0 not in fields and len(segments) == len(fields) + 1
