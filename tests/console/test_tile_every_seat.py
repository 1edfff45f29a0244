"""``:tile`` without words: every managed seat (not only the agents working at that instant), up to
the cap, waiting ones first, each labelled by the peer bound to it by id (never by name), and
how many were left out past the cap."""

from __future__ import annotations

from attach.control.managed import ManagedFold
from cotal_tui.screens.tile import MAX_PANES, every_seat, tile_targets
from meshview.model.labels import Labels
from meshview.model.snapshot import Peer


def row(name: str, rid: str, iid: str, uid: str) -> dict:
    return {"name": name, "id": rid, "agent": "line", "space": "s", "mode": "pty", "status": "running",
            "uptimeMs": 1000, "mesh": "idle", "lifecycleUid": uid, "instanceId": iid}


def peer(pid: str, name: str, status: str, uid: str) -> Peer:
    return Peer(id=pid, name=name, kind="agent", status=status, reported_status=status, ts=0, seen_at=0,
                lifecycle_uid=uid)


def test_every_managed_seat_up_to_the_cap():
    n = MAX_PANES + 4
    uids = [f"{i:026d}" for i in range(n)]
    fold = ManagedFold()
    fold.apply({"m1", "m2"}, {"m1": [row(f"s{i:02d}", f"S{i}", "m1", uids[i]) for i in range(0, n, 2)],
                              "m2": [row(f"s{i:02d}", f"S{i}", "m2", uids[i]) for i in range(1, n, 2)]}, now=1.0)
    # nobody works: before, an idle team tiled only if nobody at all was working; now every seat
    status = {3: "waiting", 17: "waiting", 5: "working"}
    peers = [peer(f"local.S{i}", f"s{i:02d}", status.get(i, "idle"), uids[i]) for i in range(n)]
    # a peer that took seat s01's name but is not its principal is not that seat
    peers.append(peer("local.impostor", "s01", "waiting", "x" * 26))
    labels = Labels([(p.id, p.name, None) for p in peers])
    got, left = every_seat(peers, fold, labels)
    assert len(got) == MAX_PANES and left == 4
    assert [t.name for t in got[:3]] == ["s03", "s17", "s05"]  # waiting, then working, then idle
    assert {(t.name, t.instance_id) for t in got[:3]} == {("s03", "m2"), ("s17", "m2"), ("s05", "m2")}
    assert got[0].label == labels.label("local.S3")
    assert all(t.instance_id in ("m1", "m2") for t in got)
    # tile_targets without words is the same pick
    assert tile_targets(peers, fold, labels)[0] == got
    # a larger cap shows them all, none left out
    everything, none = every_seat(peers, fold, labels, cap=64)
    assert len(everything) == n and none == 0


def test_before_any_ps_answer_the_working_agents():
    peers = [peer("local.a", "a", "working", "a" * 26), peer("local.b", "b", "idle", "b" * 26)]
    got, left = every_seat(peers, ManagedFold(), Labels([(p.id, p.name, None) for p in peers]))
    assert [t.name for t in got] == ["a"] and left == 0
