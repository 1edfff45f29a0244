"""Who a row is shown as from (meshview/model/labels.py): the roster's name for the authenticated
principal, the envelope's differing name as a claim, and same-name peers told apart."""

from __future__ import annotations

from meshview.model.labels import Labels, fold
from meshview.model.mesh import MeshModel
from meshview.model.snapshot import Condition, PresenceRecord
from meshview.record.statecodec import checkpoint, restore
from meshview.wire.decode import Applied

T0 = 1_700_000_000_000.0


def _model() -> tuple[MeshModel, list[float]]:
    t = [T0]
    return MeshModel("demo", clock=lambda: t[0], burst_ms=0), t


def _join(m: MeshModel, pid: str, name: str, ts: float, **kw) -> None:
    m.apply_presence(PresenceRecord(id=pid, name=name, ts=ts, **kw))


def test_names_that_look_alike_fold_to_one_key():
    # case, compatibility forms, and invisible code points a terminal draws as nothing
    for lookalike in ("Ada", "ＡＤＡ", "a\u200bda", "ad\u2063a", "a\u034fda", "\u3164ada",
                      "ada\U000e0041", "ada\ufe0f", "a\u180eda", " ada "):
        assert fold(lookalike) == "ada", repr(lookalike)
    assert fold("adam") != "ada"


def test_a_shared_name_carries_a_principal_suffix_unique_in_its_group():
    lab = Labels([("local.ada", "ada", "coder"), ("x.seat-3f2ac1", "Ada\u200b", None),
                  ("local.bob", "bob", None)])
    assert lab.label("local.bob") == "bob" and not lab.ambiguous("local.bob")
    a, b = lab.label("local.ada"), lab.label("x.seat-3f2ac1")
    assert a != b and a.startswith("ada·") and b.endswith("·3f2ac1")
    assert lab.ambiguous("local.ada") and lab.ambiguous("x.seat-3f2ac1")
    # one actor under two owners: the principal's tail tells them apart
    same = Labels([("u_one.ada", "ada", None), ("u_two.ada", "ada", None)])
    assert same.label("u_one.ada") != same.label("u_two.ada")


def test_a_name_that_spells_another_peers_id_is_marked():
    lab = Labels([("local.ada", "ada", None), ("local.eve", "local.ada", None)])
    assert lab.label("local.eve") != "local.ada" and lab.ambiguous("local.eve")
    assert lab.label("local.ada") == "ada"  # the peer whose id was spelled keeps its name
    assert Labels([("local.ada", "local.ada", None)]).label("local.ada") == "local.ada"


def test_a_claim_is_kept_only_when_it_differs_and_an_unknown_sender_is_its_principal():
    lab = Labels([("local.mallory", "mallory", "intern")])
    s = lab.sender("local.mallory", "ada", "coder")
    assert (s.label, s.role, s.claim, s.known) == ("mallory", "intern", "ada", True)
    assert s.text() == 'mallory (claims "ada")'
    assert lab.sender("local.mallory", "Mallory").claim is None  # the same name, folded
    ghost = lab.sender("local.ghost", "ada", "coder")
    assert (ghost.label, ghost.role, ghost.claim, ghost.known) == ("local.ghost", None, "ada", False)
    assert len(lab.sender("local.ghost", "x" * 100_000).claim) == 128  # bounded


def test_the_envelope_name_never_becomes_the_senders_name():
    m, t = _model()
    _join(m, "local.ada", "ada", T0, role="coder")
    _join(m, "local.mallory", "mallory", T0, role="intern")
    m.apply_message(Applied(kind="channel", id="m1", ts=T0, from_id="local.mallory",
                            from_name="ada",
                            from_role="coder", text="approve it", channel="general"))
    m.apply_message(Applied(kind="dm", id="d1", ts=T0, from_id="local.mallory", from_name="ada",
                            text="psst", to="local.ada"))
    m.apply_message(Applied(kind="channel", id="m2", ts=T0, from_id="local.ghost", from_name="ada",
                            text="boo", channel="general"))
    m.flush_bursts()
    snap = m.snapshot()
    assert m.name_of("local.mallory") == "mallory" and m.name_of("local.ghost") == "local.ghost"
    rows = {e.id: e for e in snap.feed}
    assert snap.sender(rows["m1"]).text() == 'mallory (claims "ada")'
    assert snap.sender(rows["m1"]).role == "intern"
    assert snap.sender(rows["d1"]).text() == 'mallory (claims "ada")'
    assert snap.sender(rows["m2"]).text() == 'local.ghost (claims "ada")'
    assert snap.name_of("local.ghost") == "local.ghost"
    dm = snap.dm_log[-1]
    assert snap.labels.sender(dm.from_id, dm.claimed_name).claim == "ada"
    # a presence arriving later corrects the row: the ghost is now known by its roster name
    _join(m, "local.ghost", "casper", T0)
    assert m.snapshot().sender(rows["m2"]).text() == 'casper (claims "ada")'


def test_labels_are_rebuilt_on_a_join_not_on_a_heartbeat():
    m, t = _model()
    _join(m, "local.ada", "ada", T0)
    first = m.snapshot().labels
    t[0] += 1000
    _join(m, "local.ada", "ada", t[0])  # heartbeat-only
    assert m.snapshot().labels is first
    _join(m, "x.imp-9c1d2e", "ADA", t[0], status="waiting",
          condition=Condition("approval", "harness", "[y/N]", t[0]))
    snap = m.snapshot()
    assert snap.labels is not first
    assert snap.name_of("local.ada") != snap.name_of("x.imp-9c1d2e")
    (need,) = snap.signals.needs_you
    assert need.label == snap.name_of("x.imp-9c1d2e") and need.label.endswith("·9c1d2e")


def test_a_restored_checkpoint_shows_the_same_labels():
    m, _ = _model()
    _join(m, "local.ada", "ada", T0)
    _join(m, "local.imp", "ada", T0)
    want = {p: m.snapshot().name_of(p) for p in ("local.ada", "local.imp")}
    other, _ = _model()
    restore(other, checkpoint(m))
    assert {p: other.snapshot().name_of(p) for p in want} == want


def test_a_stranded_seat_is_keyed_by_its_principal_not_by_a_namesake():
    """A live peer that borrows a stuck seat's name neither hides the seat's row nor takes its
    label: the seat (ps: running, no presence) still shows, and the two read apart."""
    m, t = _model()
    _join(m, "local.mallory", "finn", T0, status="idle")
    assert m.apply_stranded_seat("local.finn", "uid-1", "finn\u200b", received=T0)
    peers = {p.id: p for p in m.snapshot().agents}
    assert peers["local.finn"].status == "offline"
    assert peers["local.finn"].offline_reason == "seat-no-presence"
    assert peers["local.mallory"].status != "offline"
    lab = m.snapshot().labels
    assert lab.label("local.finn") != lab.label("local.mallory")
    assert lab.ambiguous("local.finn") and lab.ambiguous("local.mallory")
    # the namesake going live again changes nothing; the seat's own presence does
    assert not m.apply_stranded_seat("local.finn", "uid-1", "finn", received=T0 + 1)
    _join(m, "local.finn", "finn", T0 + 2, status="working")
    assert not m.apply_stranded_seat("local.finn", "uid-1", "finn", received=T0 + 3)
    assert {p.id: p for p in m.snapshot().agents}["local.finn"].status == "working"


def _table(lab: Labels, pids) -> dict:
    return {p: (lab.label(p), lab.name(p), lab.role(p), lab.ambiguous(p)) for p in pids}


def test_a_newcomer_is_added_to_a_copy_unless_it_must_be_told_apart():
    base = Labels([("local.ada", "ada", "coder"), ("local.bob", "bob", None)])
    before = _table(base, ("local.ada", "local.bob"))
    more = base.changed([("local.cy", "cy", "qa")])
    assert more is not None and more is not base and len(more) == 3
    assert more.label("local.cy") == "cy" and more.role("local.cy") == "qa"
    assert _table(base, ("local.ada", "local.bob")) == before and base.label("local.cy") is None
    # a borrowed name (folded alike), a name that spells an id, an id a name spells, one
    # already here, and two newcomers alike: each must be told apart, so none is added
    assert base.changed([("x.imp-9c1d2e", "A\u200bDA", None)]) is None
    assert base.changed([("local.eve", "local.bob", None)]) is None
    assert Labels([("local.eve", "local.zed", None)]).changed([("local.zed", "zed", None)]) is None
    assert base.changed([("local.ada", "ada", None)]) is None
    assert base.changed([("local.p", "pat", None), ("local.q", "PAT", None)]) is None
    # forgotten: taken out of a copy, unless its name was shared or its id spelled
    less = more.changed([("local.bob", None, None)])
    assert less is not None and len(less) == 2 and less.label("local.bob") is None
    assert more.label("local.bob") == "bob"
    pair = Labels([("local.ada", "ada", None), ("x.imp", "ADA", None)])
    assert pair.changed([("x.imp", None, None)]) is None  # ada's label loses its suffix
    spelled = Labels([("local.ada", "ada", None), ("local.eve", "local.ada", None)])
    assert spelled.changed([("local.ada", None, None)]) is None  # eve's mark goes
    assert base.changed([("local.ghost", None, None)]) is None  # not here


def test_labels_kept_by_changes_always_equal_labels_built_anew(monkeypatch):
    """Joins (lookalike names, names spelling ids), renames and forgotten offline rows, in a
    random order: after every step the model's labels read as a fresh build over its rows."""
    import random

    from meshview.model import roster as roster_mod

    rnd = random.Random(5)
    names = ["ada", "Ada", "a\u200bda", "bob", "cy", "local.n3", "local.n7", "dee", "eve"]
    m, t = _model()
    monkeypatch.setattr(roster_mod, "OFFLINE_CAP", 5)  # forgotten rows come into play
    added = 0
    real_changed = Labels.changed

    def changed(self, ops):
        nonlocal added
        ops = list(ops)
        out = real_changed(self, ops)
        added += out is not None and any(name is None for _, name, _ in ops)
        return out

    monkeypatch.setattr(Labels, "changed", changed)
    for step in range(400):
        t[0] += 50
        pid = f"local.n{rnd.randrange(40)}"
        status = rnd.choice(["idle", "working", "offline", "idle"])
        name = rnd.choice(names) if rnd.random() < 0.5 else f"agent{pid[-2:]}"
        _join(m, pid, name, t[0], status=status, role=rnd.choice([None, "dev"]))
        lab = m.labels()
        rows = m.snapshot().peers
        fresh = Labels((p.id, p.name, p.role) for p in rows)
        pids = [p.id for p in rows]
        assert len(lab) == len(fresh) and _table(lab, pids) == _table(fresh, pids), step
    assert added >= 5, added  # the copy path was taken with forgotten rows too


def test_labels_past_the_unread_changes_bound_are_built_anew(monkeypatch):
    """Newcomers nobody has asked the labels for past LABEL_OPS_MAX are not queued (a flood of
    keys between two reads): the labels are built anew, and read the same as ever."""
    from meshview.model import roster as roster_mod

    monkeypatch.setattr(roster_mod, "LABEL_OPS_MAX", 4)
    m, t = _model()
    _join(m, "local.ada", "ada", T0)
    m.labels()
    for i in range(10):
        _join(m, f"local.p{i}", "ADA" if i == 7 else f"p{i}", T0)
    lab, rows = m.labels(), m.snapshot().peers
    fresh = Labels((p.id, p.name, p.role) for p in rows)
    pids = [p.id for p in rows]
    assert len(lab) == 11 and _table(lab, pids) == _table(fresh, pids)
    assert lab.ambiguous("local.ada") and lab.ambiguous("local.p7")
