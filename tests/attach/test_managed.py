"""Managed rows: the pure per-manager fold, and the ``ps`` poller against real managers."""

from __future__ import annotations

import asyncio
import json
import time

from attach.managed import ManagedFold, PsPoller, registered_instances
from conftest import until
from cotal_tui.demo.manager import DemoManager, SeatSpec
from meshview.wire.names import bucket_names
from attach.seat_text import detail_lines, marker, mesh_text, process_text


def row(name, rid, iid, **kw):
    r = {"name": name, "id": rid, "agent": "line", "space": "s", "mode": "pty", "status": "running",
         "uptimeMs": 12_600_000, "mesh": "working", "lifecycleUid": "u" * 26, "instanceId": iid}
    r.update(kw)
    return r


def test_fold_replaces_keeps_silent_and_drops_deregistered():
    f = ManagedFold()
    f.apply({"m1", "m2"}, {"m1": [row("a", "A1", "m1"), row("b", "B1", "m1", status="exited")],
                           "m2": [row("c", "C1", "m2", pid=42)]}, now=100.0)
    assert {s.name for s in f.seats()} == {"a", "b", "c"}
    assert f.for_peer("local.A1").name == "a"
    assert f.for_peer("local.C1").pid == 42
    # m2 stays registered but does not answer: its rows stay, labelled
    f.apply({"m1", "m2"}, {"m1": [row("a", "A1", "m1")]}, now=130.0)
    c = f.for_peer("local.C1")
    assert c is not None and c.silent and c.silent_since == 130.0
    assert marker(c, now=170.0) == "managed pty · manager silent 40s"
    assert {s.name for s in f.seats()} == {"a", "c"}  # m1's fresh answer replaced its rows
    # still silent next round: the silence keeps its start time
    f.apply({"m1", "m2"}, {"m1": [row("a", "A1", "m1")]}, now=140.0)
    assert f.for_peer("local.C1").silent_since == 130.0
    assert [st.instance_id for st in f.silent_managers()] == ["m2"]
    # deregistered: gone with its rows
    f.apply({"m1"}, {"m1": [row("a", "A1", "m1")]}, now=150.0)
    assert f.for_peer("local.C1") is None and "m2" not in f.managers
    # an answering manager wins over a silent one claiming the same agent
    f.apply({"m1", "m3"}, {"m3": [row("a", "A1", "m3")]}, now=160.0)
    assert f.for_peer("local.A1").instance_id == "m3"


def test_fold_ignores_malformed_rows():
    f = ManagedFold()
    f.apply({"m"}, {"m": [row("a", "A", "m"), {"name": 3}, "x", row("b", "owner1.actor1", "m", pid=-1)]}, now=1.0)
    assert [s.name for s in f.seats()] == ["a", "b"]
    assert f.for_peer("owner1.actor1").pid is None


def test_words_match_cotal_ps():
    f = ManagedFold()
    f.apply({"m"}, {"m": [row("a", "A", "m"), row("b", "B", "m", status="exited", uptimeMs=240_000, mesh="absent"),
                          row("c", "C", "m", meshView="stale"), row("d", "D", "m", mesh="offline")]}, now=1.0)
    a, b, c, d = (f.for_peer(f"local.{x}") for x in "ABCD")
    assert (process_text(a), mesh_text(a)) == ("running 3.5h", "mesh working")
    assert (process_text(b), mesh_text(b)) == ("exited after 4m", "not in roster")
    assert mesh_text(c) == "mesh unknown" and mesh_text(d) == "mesh offline"
    assert marker(b) == "managed pty · exited"
    lines = dict(detail_lines(a, "idle", now=1.0))
    assert lines["manager's view"] == "mesh working (roster says idle)"
    assert lines["process"] == "running 3.5h" and lines["runtime"].startswith("pty on manager m")


async def test_poller_against_real_managers(nc, space, tmp_path):
    m1 = DemoManager(nc, space, [SeatSpec(name="one", principal_id="local.one")], root=str(tmp_path / "a"))
    m2 = DemoManager(nc, space, [SeatSpec(name="two", principal_id="local.two")], root=str(tmp_path / "b"))
    await m1.start()
    await m2.start()
    updates = []
    poller = PsPoller(nc, space, period=0.2, deadline_ms=800, on_update=lambda f: updates.append(f.version))
    try:
        assert await registered_instances(nc, space) == {m1.instance_id, m2.instance_id}
        poller.start()
        deadline = time.monotonic() + 10
        while {s.name for s in poller.fold.seats()} != {"one", "two"}:
            assert time.monotonic() < deadline, "both managers' rows"
            await asyncio.sleep(0.05)
        one = poller.fold.for_peer("local.one")
        assert one.runtime == "pty" and one.process == "running" and one.pid and one.instance_id == m1.instance_id
        # m2 stops cleanly: a reference manager deregisters on a clean stop (status, then spec),
        # so its rows leave with it (a round already in flight may see it silent once; the next
        # round's frozen set no longer holds it)
        await m2.stop()
        while poller.fold.for_peer("local.two") is not None:
            assert time.monotonic() < deadline + 10, "dropped after the clean stop deregistered it"
            await asyncio.sleep(0.05)
        assert not poller.fold.for_peer("local.one").silent
        assert await registered_instances(nc, space) == {m1.instance_id}
        # a registration still saying ready whose host says nothing: expected, and labelled silent
        kv = await nc.jetstream().key_value(bucket_names(space).records)
        ghost = "g" * 26
        rev = await kv.put(f"svc.manager.{ghost}.spec", json.dumps({"endpoint": "manager"}).encode())
        await kv.put(f"svc.manager.{ghost}.status", json.dumps(
            {"epoch": 1, "state": "ready", "observedSpecRevision": rev}).encode())
        while ghost not in {st.instance_id for st in poller.fold.silent_managers()}:
            assert time.monotonic() < deadline + 20, "silent label"
            await asyncio.sleep(0.05)
        assert not poller.fold.for_peer("local.one").silent
        await kv.delete(f"svc.manager.{ghost}.status")
        await kv.delete(f"svc.manager.{ghost}.spec")
        while ghost in poller.fold.managers:
            assert time.monotonic() < deadline + 30, "dropped after deregistration"
            await asyncio.sleep(0.05)
        assert poller.max_in_flight == 1  # rounds never overlapped
        assert len(updates) >= 3
    finally:
        await poller.stop()
        await m1.stop()


async def test_stop_ends_the_poller_even_when_a_round_swallows_the_cancel():
    """A cancel lost mid-round (3.11's ``wait_for`` race, or a library catching it while it
    connects) left ``stop()`` awaiting a loop that never ended: a 300 s test-timeout hang."""
    from attach.managed import PsPoller

    class Stubborn(PsPoller):
        rounds = 0

        async def poll_once(self) -> None:
            self.rounds += 1
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                pass  # the lost cancel: the round ends as if nothing happened

    p = Stubborn(None, "s", period=0.01)
    p.start()
    await until(lambda: p.rounds >= 2, 5, "the poller to run")
    await asyncio.wait_for(p.stop(), 10)
    n = p.rounds
    await asyncio.sleep(0.1)
    assert p.rounds == n, "the poll went on after stop()"
