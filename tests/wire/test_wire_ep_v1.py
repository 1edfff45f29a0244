"""The versioned endpoint rail ``ep.v1`` (§13.2, §13.15): every request and reply form with ``v1``
after ``ep`` and the issued ``<generation>`` between ``<uid>`` and ``<nonce>``; the legacy rail
unchanged beside it, and the conformance vectors' endpoint subjects parsed and rebuilt."""

from __future__ import annotations

import pytest
from conftest import load_vectors

from meshview.wire.endpoint import (
    ANY_GENERATION,
    AuthzTarget,
    Caller,
    SubjectError,
    parse_reply,
    parse_request,
    reply_filter,
    reply_pattern,
    reply_subject,
    request_pattern,
    request_subject,
    serve_filter,
)
from meshview.wire.subjects import subject_matches

UID = "k3q9m2x7v4b8n1c6z5w0r7t2y4"
ALICE = Caller("u_aaaaaaaaaaaaaaaaaaaaaaaaaa", "alice", UID)
GEN = "0f" * 16
NONCE = "Nc_7f3a9d2e1b4c8a6f0e5d3c2b"
IID = "m4n8q2s6u0w4y8a2c6e0g4i8k2"
VECTORS = {c["name"]: c for c in load_vectors("subjects.json")}


def test_the_vector_v1_class_request_parses_and_rebuilds():
    subject = VECTORS["ep-v1-class-request"]["subject"]
    got = parse_request(subject)
    assert got is not None
    assert (got.route, got.endpoint, got.command, got.target) == ("one", "manager", "describe", None)
    assert got.caller == ALICE and got.nonce == NONCE and got.generation == GEN
    assert request_subject("main", "manager", "describe", ALICE, NONCE, generation=got.generation) == subject
    assert len(subject.split(".")) == 12  # §13.2: the versioned forms are 12-17 tokens


@pytest.mark.parametrize("name", ["ep-class-request", "ep-instance-request"])
def test_the_vector_legacy_requests_carry_no_generation(name):
    subject = VECTORS[name]["subject"]
    got = parse_request(subject)
    assert got is not None and got.generation is None
    rebuilt = request_subject("main", got.endpoint, got.command, got.caller, got.nonce, route=got.route,
                              instance_id=got.instance_id, target=got.target)
    assert rebuilt == subject


def test_the_vector_legacy_reply_and_its_v1_twin():
    legacy = VECTORS["ep-reply"]["subject"]
    got = parse_reply(legacy)
    assert got is not None and got.generation is None and (got.instance_id, got.epoch) == (IID, 3)
    v1 = reply_subject("main", "manager", IID, 3, ALICE, NONCE, generation=GEN)
    assert v1 == legacy.replace(".ep.reply.", ".ep.v1.reply.").replace(f".{NONCE}", f".{GEN}.{NONCE}")
    back = parse_reply(v1)
    assert back is not None and back.generation == GEN and back.caller == ALICE and back.nonce == NONCE
    assert len(v1.split(".")) == 13  # 11 + the ``v1`` token + the generation


@pytest.mark.parametrize("kw,target,extra", [
    ({}, None, 0),
    ({}, AuthzTarget("self"), 1),
    ({}, AuthzTarget("owner", "u_aaaaaaaaaaaaaaaaaaaaaaaaaa"), 2),
    ({}, AuthzTarget("exact", "local", "ada", "b" * 26), 4),
    ({"route": "all"}, None, 0),
    ({"route": "inst", "instance_id": IID}, None, 1),
    ({"route": "inst", "instance_id": IID}, AuthzTarget("any", "local"), 3),
])
def test_every_request_form_round_trips_with_the_rail_token_and_the_generation(kw, target, extra):
    legacy = request_subject("main", "manager", "ps", ALICE, NONCE, target=target, **kw)
    v1 = request_subject("main", "manager", "ps", ALICE, NONCE, target=target, generation=GEN, **kw)
    assert v1.startswith("cotal.main.ep.v1.") and len(v1.split(".")) == len(legacy.split(".")) + 2 == 12 + extra
    assert v1.endswith(f".{UID}.{GEN}.{NONCE}")
    got = parse_request(v1)
    assert got is not None and got.generation == GEN and got.target == target and got.caller == ALICE
    assert got.route == kw.get("route", "one") and got.instance_id == kw.get("instance_id")
    assert parse_request(legacy).generation is None


@pytest.mark.parametrize("bad", ["0F" * 16, "0f" * 15, "0f" * 17, "g" * 32, "*", ""])
def test_a_bad_generation_fails_loud_when_built_and_is_not_ours_when_parsed(bad):
    with pytest.raises(SubjectError, match="generation"):
        request_subject("main", "manager", "ps", ALICE, NONCE, generation=bad)
    with pytest.raises(SubjectError, match="generation"):
        reply_subject("main", "manager", IID, 1, ALICE, NONCE, generation=bad)
    with pytest.raises(SubjectError, match="generation"):
        reply_filter("main", "manager", ALICE, NONCE, generation=bad)
    if bad and "." not in bad:
        req = f"cotal.main.ep.v1.one.manager.ps.{ALICE.owner}.alice.{UID}.{bad}.{NONCE}"
        assert parse_request(req) is None
        rep = f"cotal.main.ep.v1.reply.manager.{IID}.1.{ALICE.owner}.alice.{UID}.{bad}.{NONCE}"
        assert parse_reply(rep) is None


def test_the_rails_are_disjoint_by_arity():
    # a legacy-shaped tail under ep.v1 (no generation) and a v1 tail under the legacy rail are nobody's
    assert parse_request(f"cotal.main.ep.v1.one.manager.ps.local.alice.{UID}.{NONCE}") is None
    assert parse_request(f"cotal.main.ep.one.manager.ps.local.alice.{UID}.{GEN}.{NONCE}") is None
    assert parse_reply(f"cotal.main.ep.v1.reply.manager.{IID}.1.local.alice.{UID}.{NONCE}") is None
    assert parse_reply(f"cotal.main.ep.reply.manager.{IID}.1.local.alice.{UID}.{GEN}.{NONCE}") is None


def test_filters_and_patterns_cover_the_v1_rail_and_only_it():
    req = request_subject("main", "manager", "ps", ALICE, NONCE, generation=GEN)
    legacy_req = request_subject("main", "manager", "ps", ALICE, NONCE)
    rep = reply_subject("main", "manager", IID, 2, ALICE, NONCE, generation=GEN)
    legacy_rep = reply_subject("main", "manager", IID, 2, ALICE, NONCE)
    # the caller's exact reply rail
    filt = reply_filter("main", "manager", ALICE, NONCE, generation=GEN)
    assert subject_matches(filt, rep) and not subject_matches(filt, legacy_rep)
    assert not subject_matches(reply_filter("main", "manager", ALICE, NONCE), rep)
    # a responder's serve subscription: the whole v1 route, whatever the generation
    sf = serve_filter("main", "one", "manager", generation=ANY_GENERATION)
    assert sf == "cotal.main.ep.v1.one.manager.>"
    assert serve_filter("main", "one", "manager", generation=GEN) == sf
    assert subject_matches(sf, req) and not subject_matches(sf, legacy_req)
    assert not subject_matches(serve_filter("main", "one", "manager"), req)
    inst = serve_filter("main", "inst", "manager", IID, generation=ANY_GENERATION)
    assert inst == f"cotal.main.ep.v1.inst.manager.{IID}.>"
    # permission rows: a literal generation pins it, ANY_GENERATION does not
    pinned = request_pattern("main", "manager", "ps", ALICE, route="one", generation=GEN)
    assert pinned == f"cotal.main.ep.v1.one.manager.ps.{ALICE.owner}.alice.{UID}.{GEN}.*"
    assert subject_matches(pinned, req)
    other_gen = request_subject("main", "manager", "ps", ALICE, NONCE, generation="1" * 32)
    assert not subject_matches(pinned, other_gen)
    assert subject_matches(request_pattern("main", "manager", "ps", ALICE, route="one",
                                           generation=ANY_GENERATION), other_gen)
    assert not subject_matches(request_pattern("main", "manager", "ps", ALICE, route="one"), req)
    anyp = request_pattern("main", "manager", "attach", ALICE, route="inst", mode="any", generation=GEN)
    assert subject_matches(anyp, request_subject("main", "manager", "attach", ALICE, NONCE, route="inst",
                                                 instance_id=IID, target=AuthzTarget("any", "local"),
                                                 generation=GEN))
    rp = reply_pattern("main", ALICE, generation=GEN)
    assert rp == f"cotal.main.ep.v1.reply.*.*.*.{ALICE.owner}.alice.{UID}.{GEN}.*"
    assert subject_matches(rp, rep) and not subject_matches(rp, legacy_rep)
    assert not subject_matches(reply_pattern("main", ALICE), rep)
    with pytest.raises(SubjectError, match="generation"):
        reply_pattern("main", ALICE, generation="nope")
