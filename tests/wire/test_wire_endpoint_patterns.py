"""The endpoint-plane patterns a permission list grants, built by the wire (no row spelled in auth)."""

from __future__ import annotations

import pytest

from meshview.link import auth
from meshview.wire.endpoint import (
    Caller,
    SubjectError,
    eps_subject,
    goal_pattern,
    reply_filter,
    reply_pattern,
    reply_subject,
    request_pattern,
    request_subject,
)
from meshview.wire.subjects import pattern_channel, rail_pattern, subject_matches

C = Caller("local", "UABC", "a" * 26)
NONCE = "n" * 22


def test_request_patterns_admit_exactly_the_callers_requests():
    one = request_pattern("main", "manager", "ps", C, route="one")
    assert one == "cotal.main.ep.one.manager.ps.local.UABC." + "a" * 26 + ".*"
    assert subject_matches(one, request_subject("main", "manager", "ps", C, NONCE))
    other = Caller("local", "UXYZ", "a" * 26)
    assert not subject_matches(one, request_subject("main", "manager", "ps", other, NONCE))
    inst = request_pattern("main", "manager", "ps", C, route="inst")
    assert subject_matches(inst, request_subject("main", "manager", "ps", C, NONCE, route="inst",
                                                 instance_id="b" * 26))
    anyp = request_pattern("main", "manager", "attach", C, route="one", mode="any")
    assert anyp == "cotal.main.ep.one.manager.attach.any.*.local.UABC." + "a" * 26 + ".*"


def test_reply_and_goal_patterns_cover_every_instance_and_epoch():
    got = reply_subject("main", "manager", "c" * 26, 7, C, NONCE)
    assert subject_matches(reply_pattern("main", C), got)
    assert subject_matches(reply_filter("main", "manager", C, NONCE), got)
    assert not subject_matches(reply_filter("main", "manager", C, "m" * 22), got)
    assert goal_pattern("main", "manager", C) == "cotal.main.epe.manager.*.*.goal.local.UABC." + "a" * 26 + ".>"


def test_the_self_form_grants_only_the_callers_own_target():
    """``run-answer`` is targeted with modes ["self"] (contract rev 16+): the pattern has the
    ``self`` token and no target tokens, so it admits exactly the caller's self-targeted form."""
    from meshview.wire.endpoint import AuthzTarget

    pat = request_pattern("main", "manager", "run-answer", C, route="one", mode="self")
    assert pat == "cotal.main.ep.one.manager.run-answer.self.local.UABC." + "a" * 26 + ".*"
    assert subject_matches(pat, request_subject("main", "manager", "run-answer", C, NONCE,
                                                target=AuthzTarget("self")))
    assert not subject_matches(pat, request_subject("main", "manager", "run-answer", C, NONCE,
                                                    target=AuthzTarget("any", "local")))


@pytest.mark.parametrize("bad", [
    dict(route="nope"), dict(mode="handle"), dict(mode="unknown"),
])
def test_a_pattern_that_would_grant_something_else_is_refused(bad):
    with pytest.raises(SubjectError):
        request_pattern("main", "manager", "ps", C, **{"route": "one", **bad})


def test_one_session_rail_builder_with_the_stricter_rules():
    assert eps_subject("main", "manager", "sid_-1", 0, "out") == "cotal.main.eps.manager.sid_-1.0.out"
    for args in [("a.b", 1, "in"), ("x", -1, "in"), ("x", True, "in"), ("", 1, "in"), ("a#b", 1, "in"),
                 ("x", 1, "sideways")]:
        with pytest.raises(SubjectError):
            eps_subject("main", "manager", *args)
    with pytest.raises(auth.AuthError):  # the credential side says it in its own sentence
        auth.session_caller_permissions("main", ("manager", "a#b", 1), "UABC")


def test_rail_patterns_and_the_channel_a_chat_read_names():
    assert rail_pattern("my space", "epc") == "cotal.my_space.epc.>"
    with pytest.raises(ValueError):
        rail_pattern("main", "chat")
    assert pattern_channel("cotal.main.chat.*.*.team.backend") == "team.backend"
    assert pattern_channel("cotal.main.chat.>") == ">"
    assert pattern_channel("cotal.main.inst.>") is None
