"""The one name resolver (meshview/resolve.py) and the verbs built on it, with lying peers:
a borrowed name, a lapsed namesake, a look-alike (case, width, invisible joiners), a name
that spells another peer's actor, and two managers claiming one seat."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from attach.managed import ManagedFold
from cotal_tui.cli.completion import seat_words
from cotal_tui.palette import parse_write
from meshview.connect import ConnectTarget
from meshview.participant import AmbiguousPeer, Participant, RosterEntry
from meshview.resolve import AmbiguousName, Candidate, UnknownName, candidates_of, fold, resolve


def peer(pid: str, name: str, status: str = "working", kind: str = "agent", uid: str | None = None):
    return SimpleNamespace(id=pid, name=name, status=status, kind=kind, role=None, lifecycle_uid=uid)


def test_an_id_always_works_and_beats_a_name_that_spells_it():
    rows = [peer("local.ada", "ada"), peer("local.mallory", "local.ada")]
    assert resolve("local.ada", candidates_of(rows)).id == "local.ada"
    assert resolve("@local.mallory", candidates_of(rows)).id == "local.mallory"


def test_a_live_and_an_offline_namesake_are_both_candidates():
    rows = [peer("local.ada", "ada", "offline"), peer("local.mallory", "ada", "working")]
    with pytest.raises(AmbiguousName) as e:
        resolve("ada", candidates_of(rows))
    assert e.value.ids == ["local.ada", "local.mallory"]
    msg = str(e.value)
    assert "local.ada" in msg and "local.mallory" in msg and "offline" in msg and "\n" not in msg


@pytest.mark.parametrize("look_alike", ["ADA", "\uff21da", "a\u200dda",
                                        "ada\u2061", "ada\ufe0f", "\u034fada", "ada\U000e0041"])
def test_look_alikes_fold_to_one_name(look_alike):
    assert fold(look_alike) == "ada"
    rows = [peer("local.ada", "ada"), peer("local.mallory", look_alike)]
    with pytest.raises(AmbiguousName):
        resolve("ada", candidates_of(rows))


def test_a_name_that_spells_another_peers_actor_is_ambiguous():
    rows = [peer("u_aaaaaaaaaaaaaaaaaaaaaaaaaa.ada", "Ada Lovelace"), peer("local.mallory", "ada")]
    with pytest.raises(AmbiguousName) as e:
        resolve("ada", candidates_of(rows))
    assert set(e.value.ids) == {"u_aaaaaaaaaaaaaaaaaaaaaaaaaa.ada", "local.mallory"}


def test_a_bare_id_is_matched_like_a_name():
    # a seat's row id on an open mesh is its bare actor, usually its name: another seat named
    # after it makes it ambiguous; the full principal still picks one
    cands = [Candidate("local.alice", "alice", where="manager m1"),
             Candidate("local.mallory", "alice", where="manager m2")]
    with pytest.raises(AmbiguousName):
        resolve("alice", cands, what="seat")
    assert resolve("local.alice", cands).where == "manager m1"


def test_unknown_and_unique():
    rows = [peer("local.ada", "ada", "offline")]
    assert resolve("ADA", candidates_of(rows)).id == "local.ada"  # a unique offline peer still resolves
    with pytest.raises(UnknownName):
        resolve("bram", candidates_of(rows))


def test_a_refusal_is_bounded_and_escaped():
    rows = [peer(f"local.m{i}", "ada\x1b[2J") for i in range(30)]
    with pytest.raises(AmbiguousName) as e:
        resolve("ada\x1b[2J", candidates_of(rows))
    msg = str(e.value)
    assert "\x1b" not in msg and "and 22 more" in msg and len(msg) < 2000


def test_seat_copies_on_two_managers_are_told_apart_by_instance():
    cands = [Candidate("local.AB", "w1", "running", "manager m1"),
             Candidate("local.AB", "w1", "running", "manager m2")]
    with pytest.raises(AmbiguousName) as e:
        resolve("local.AB", cands, what="seat")  # one id, two managers: the id alone does not pick
    assert "manager m1" in str(e.value) and "manager m2" in str(e.value)
    assert "manager instance" in str(e.value)


def test_the_participant_refuses_a_lapsed_name_with_a_live_namesake():
    rows = [RosterEntry("local.ada", "ada", "agent", "offline"),
            RosterEntry("local.mallory", "ada", "agent", "working")]
    p = Participant(ConnectTarget(("nats://127.0.0.1:1",), "main"), roster=lambda: rows, user="op")
    with pytest.raises(AmbiguousPeer) as e:
        p.resolve_agent("@ada")
    assert e.value.candidates == ["local.ada", "local.mallory"] and "nothing was sent" in str(e.value)
    assert p.resolve_agent("local.ada") == "local.ada"


def test_the_palette_dm_refuses_a_namesake():
    peers = [peer("local.ada", "ada"), peer("local.mallory", "Ada")]
    w = parse_write("dm", "@ada hello", peers, None)
    assert isinstance(w, str) and w.startswith("dm: ") and "local.mallory" in w and "local.ada" in w
    ok = parse_write("dm", "@local.ada hello", peers, None)
    assert not isinstance(ok, str) and ok.target.to == "local.ada"


def row(name, rid, iid, uid="u" * 26, **kw):
    r = {"name": name, "id": rid, "agent": "line", "space": "s", "mode": "pty", "status": "running",
         "uptimeMs": 1, "mesh": "working", "lifecycleUid": uid, "instanceId": iid}
    r.update(kw)
    return r


def test_a_seat_binds_by_principal_and_lifecycle_never_by_name():
    f = ManagedFold()
    f.apply({"m1"}, {"m1": [row("ada", "ada", "m1", uid="a" * 26)]}, now=1.0)
    # a namesake of another principal binds to nothing, however it calls itself
    assert f.for_peer("local.mallory") is None
    assert f.bind("local.mallory", "m" * 26).refusal("input", "ada").endswith(
        "is not a managed seat (no manager reports its id and lifecycle)")
    # the seat, this incarnation
    assert f.for_peer("local.ada", "a" * 26).instance_id == "m1"
    # the same principal, another incarnation (respawned, or a stale row): not bound
    assert f.for_peer("local.ada", "b" * 26) is None


def test_two_managers_claiming_one_seat_bind_to_neither():
    f = ManagedFold()
    f.apply({"m1", "m2"}, {"m1": [row("ada", "ada", "m1")], "m2": [row("ada", "ada", "m2")]}, now=1.0)
    b = f.bind("local.ada", "u" * 26)
    assert b.seat is None and b.ambiguous
    why = b.refusal("stop", "ada")
    assert "m1" in why and "m2" in why and "nothing was done" in why


def test_completion_offers_ids_for_a_shared_seat_name():
    r = lambda name, rid, iid: SimpleNamespace(name=name, id=rid, agent="line", process="running",
                                               instance_id=iid)
    words = seat_words([r("ada", "ADA1", "m1"), r("ada", "ADA2", "m2"), r("bram", "B", "m1"),
                        r("Ada", "bad id;rm -rf", "m3")])
    assert [w for w, _ in words] == ["ADA1", "ADA2", "bram"]
