"""Subject parsing against every subjects.json vector, plus builders and sanitization."""

from __future__ import annotations

import pytest
from conftest import load_vectors

from meshview.wire.subjects import (
    chat_pattern,
    chat_subject,
    inst_subject,
    is_event_channel,
    is_principal_id,
    is_principal_owner,
    parse_subject,
    sanitize_channel,
    sanitize_token,
    subject_matches,
    svc_subject,
    tap_subjects,
)

CASES = load_vectors("subjects.json")
FIELDS = ("kind", "owner", "actor", "sender", "channel", "recipient", "role", "splits",
          "deliver", "reason", "rail", "publishable")

ALICE = "u_aaaaaaaaaaaaaaaaaaaaaaaaaa.alice"
BOB = "u_bbbbbbbbbbbbbbbbbbbbbbbbbb.bob"


def test_vectors_loaded():
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_subject_vector(case):
    got = parse_subject(case["subject"])
    exp = case["expect"]
    checked = 0
    for f in FIELDS:
        if f in exp:
            assert getattr(got, f) == exp[f], f
            checked += 1
    assert checked >= 6
    if got.splits:
        assert got.target == (exp.get("channel") or exp.get("recipient") or exp.get("role"))


@pytest.mark.parametrize("case", [c for c in CASES if c["expect"]["deliver"]],
                         ids=lambda c: c["name"])
def test_builders_round_trip_deliverable_vectors(case):
    p = parse_subject(case["subject"])
    if p.kind == "chat":
        built = chat_subject(p.space, p.sender, p.channel)
    elif p.kind == "inst":
        built = inst_subject(p.space, p.recipient, p.sender)
    else:
        built = svc_subject(p.space, p.role, p.sender)
    assert built == case["subject"]


def test_sanitize_token():
    assert sanitize_token("  my space!  ") == "my_space_"
    assert sanitize_token("") == "_"
    assert sanitize_token("a.b*c>d") == "a_b_c_d"
    assert sanitize_token("ops-team_1") == "ops-team_1"


def test_sanitize_channel_keeps_whole_segment_wildcards():
    assert sanitize_channel("team.backend") == "team.backend"
    assert sanitize_channel("..team..back end.") == "team.back_end"
    assert sanitize_channel("team.*") == "team.*"
    assert sanitize_channel("team.>") == "team.>"
    assert sanitize_channel("te*am.x>") == "te_am.x_"
    assert sanitize_channel("") == "_"
    with pytest.raises(ValueError):
        sanitize_channel("team.>.x")


def test_builders_fail_loud_on_identity_and_wildcards():
    with pytest.raises(ValueError):
        chat_subject("main", "u_aaaaaaaaaaaaaaaaaaaaaaaaaa.al-ice", "team")
    with pytest.raises(ValueError):
        chat_subject("main", "alice", "team")
    with pytest.raises(ValueError):
        chat_subject("main", ALICE, "team.*")
    with pytest.raises(ValueError):
        chat_subject("main", ALICE, "team.>")
    with pytest.raises(ValueError):
        chat_subject("main", ALICE, "x" * 5000)
    assert svc_subject("main", "*", ALICE) == f"cotal.main.svc._.{ALICE}"  # never a wildcard
    with pytest.raises(ValueError):
        inst_subject("main", "bob", ALICE)
    # route tokens and the space are sanitized, not refused
    assert chat_subject("my space", ALICE, "ops team") == f"cotal.my_space.chat.{ALICE}.ops_team"
    assert svc_subject("main", "code review", ALICE) == f"cotal.main.svc.code_review.{ALICE}"


def test_principal_owner_and_id():
    assert is_principal_owner("local")
    assert is_principal_owner("u_" + "a2" * 13)
    assert not is_principal_owner("p_" + "a" * 26)
    assert not is_principal_owner("u_" + "a" * 25)
    assert not is_principal_owner("Local")
    assert is_principal_id(ALICE) and is_principal_id("local.devbot")
    assert not is_principal_id("local")
    assert not is_principal_id("local.dev.bot")
    assert not is_principal_id("local.dev-bot")
    assert not is_principal_id("UAQGWOEVJKMIO4WXSYOTLARXYOZTCXFK67JASEH6AFFFYK6FOPSKQCAD.team")


def test_event_channel_shape():
    """Upstream's ``isEventChannel`` (events.md §1.1): two identity tokens after ``events.``,
    any owner; a platform ``p_`` owner and ``events.team.backend`` are event channels too."""
    assert is_event_channel(f"events.{ALICE}")
    assert is_event_channel("events.local.devbot")
    assert is_event_channel("events.team.backend")  # was chat before the parity fix
    assert is_event_channel("events.p_" + "a" * 26 + ".bot")
    assert is_event_channel("events.Team_1.x_2")
    assert not is_event_channel(f"events.{ALICE}.extra")
    assert not is_event_channel("events.standup")
    assert not is_event_channel("events.my-team.x")
    assert not is_event_channel("events.a.b.c")
    assert not is_event_channel("events..x")
    assert not is_event_channel("events.a.")
    assert not is_event_channel(f"news.{ALICE}")
    assert not is_event_channel("Events.local.devbot")


@pytest.mark.parametrize("subject,reason", [
    ("cotal.main.live.manager." + ALICE, "reserved-not-delivery"),
    ("cotal.main.wfj.run42", "reserved-not-delivery"),
    ("cotal.main.dinbox." + ALICE + ".k3q9m2x7v4b8n1c6z5w0r7t2y4", "reserved-not-delivery"),
    ("cotal.main.dlv." + ALICE + ".k3q9m2x7v4b8n1c6z5w0r7t2y4", "reserved-not-delivery"),
    ("cotal.main.epc.manager.x", "endpoint-rail-not-delivery"),
    ("$JS.API.STREAM.INFO.CHAT_main", "malformed-subject"),
    ("_INBOX.abc.def", "malformed-subject"),
    ("$SYS.REQ.SERVER.PING", "malformed-subject"),
    ("$O.x.y", "malformed-subject"),
    ("cotal.main.chat." + ALICE + "..backend", "malformed-subject"),
    ("cotal.main.chat." + ALICE + ".team.>.x", "malformed-subject"),
    ("cotal.main.chat." + ALICE + ".te\x1bam", "malformed-subject"),
    ("cotal.main.chat.u_aaaaaaaaaaaaaaaaaaaaaaaaaa.al-ice.team", "malformed-subject"),
    ("cotal.main.chat." + ALICE + "." + "x" * 4097, "malformed-subject"),
    ("", "malformed-subject"),
])
def test_non_deliveries(subject, reason):
    p = parse_subject(subject)
    assert p.reason == reason
    assert not p.deliver


def test_read_patterns_and_matching():
    assert tap_subjects("main", admin=False) == ["cotal.main.chat.>"]
    assert tap_subjects("main", admin=True) == [
        "cotal.main.chat.>", "cotal.main.inst.>", "cotal.main.svc.>"]
    pat = chat_pattern("main", "team.backend")
    assert pat == "cotal.main.chat.*.*.team.backend"
    assert subject_matches(pat, f"cotal.main.chat.{ALICE}.team.backend")
    assert not subject_matches(pat, f"cotal.main.chat.{ALICE}.team.backend.x")
    assert subject_matches("team.>", "team.backend.x")
    assert not subject_matches("team.>", "team")
