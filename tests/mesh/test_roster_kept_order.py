"""The roster's kept state equals the obvious computation, through random churn.

The model keeps three things between calls so a 10k-agent roster costs little per heartbeat:
the sorted order (only rows whose place moved are re-placed), the live rows' receipt times with
a lower bound of them (the sweep's deaf guard), and the earliest time an agent could newly
stall (the once-a-second check). Each must answer exactly what a full recomputation answers:
random presence records, heartbeats, deletes, renames, kinds, clocks set back, sweeps, graces
and checkpoint restores, checked after every step against a brute-force reading.
"""

from __future__ import annotations

import random

import pytest

from meshview.record import statecodec
from meshview.model.mesh import MeshModel
from meshview.model.snapshot import PresenceRecord
from meshview.wire import is_stale

ORDER = {"working": 0, "waiting": 1, "idle": 2, "offline": 3}


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def full_order(m: MeshModel) -> tuple[str, ...]:
    peers = [m.peer(pid) for pid in m.roster.peers]
    rows = sorted(peers, key=lambda p: (p.kind != "agent", ORDER[p.status], p.name.lower(), p.id))
    return tuple(p.id for p in rows)


def due_stale(m: MeshModel, now: float) -> set[str]:
    """Who the sweep must take offline now, by the rule read over every row."""
    wl, ttl = m.roster.watch_last, m.ttl_ms
    if wl is None:
        return set()
    return {p.id for p in m.roster.peers.values()
            if wl - p.seen_at >= ttl and p.status != "offline"
            and is_stale(p.ts, now, ttl, p.seen_at)}


def step(m: MeshModel, clock: Clock, rng: random.Random, n: int) -> None:
    i = rng.randrange(n)
    pid = f"local.p{i:03d}"
    held = m.peer(pid)
    op = rng.random()
    clock.t += rng.choice((0.0, 5.0, 300.0, 2500.0, 7000.0, -400.0))  # and now and then back
    if op < 0.45:
        m.apply_presence(PresenceRecord(
            id=pid, name=rng.choice((f"n{i:03d}", f"N{i:03d}", f"z{i:03d}", "same")),
            kind=rng.choice(("agent", "agent", "agent", "endpoint")),
            status=rng.choice(("working", "waiting", "idle", "offline", "busy")),
            ts=clock.t + rng.choice((0.0, -100.0, -8000.0))))
    elif op < 0.75 and held is not None:
        m.refresh_clocks(pid, held.ts + rng.choice((0.0, 1000.0, 2000.0)), None, None,
                         rng.choice((None, clock.t)))
    elif op < 0.82:
        m.apply_presence_delete(pid, purge=rng.random() < 0.5)
    elif op < 0.92:
        expect = due_stale(m, clock.t)
        before = {p.id for p in m.roster.peers.values() if p.status == "offline"}
        m.sweep(clock.t)
        went = {p.id for p in m.roster.peers.values() if p.status == "offline"} - before
        assert went == expect
    elif op < 0.96:
        m.grace(clock.t)
    else:  # a checkpoint restored into the model: the kept state starts again from the rows
        statecodec.restore(m, statecodec.checkpoint(m))


@pytest.mark.parametrize("seed", range(6))
def test_kept_order_and_sweep_bound_match_a_full_recomputation(seed: int) -> None:
    rng = random.Random(seed)
    clock = Clock()
    m = MeshModel("s", clock=clock, ttl_ms=6000)
    for k in range(1500):
        step(m, clock, rng, 60)
        snap = m.snapshot()
        assert snap.order == full_order(m), f"step {k}"
        assert tuple(p.id for p in snap.agents) + tuple(p.id for p in snap.endpoints) == snap.order
        spans = m.roster.spans  # the status blocks among agents
        for status, (lo, hi) in spans.items():
            assert {p.status for p in snap.agents[lo:hi]} == {status}
        assert sum(hi - lo for lo, hi in spans.values()) == len(snap.agents)
        if m.roster.live_seen is not None:
            live = {pid: p.seen_at for pid, p in m.roster.peers.items() if p.status != "offline"}
            assert m.roster.live_seen == live
            assert all(m.roster.live_floor <= t for t in live.values())


def test_the_stall_check_skips_rows_only_while_nobody_can_be_due() -> None:
    """The once-a-second check walks the roster only when an agent could have newly stalled;
    between walks it re-judges the stalled ones. Its answers equal a full verdict each time."""
    clock = Clock()
    m = MeshModel("s", clock=clock, stall_ms=60_000.0)
    for i in range(40):
        m.apply_presence(PresenceRecord(id=f"local.s{i:02d}", name=f"s{i:02d}",
                                        status="working", ts=clock.t))
        clock.t += 1500.0  # their quiet starts spread over a minute
    walked = []
    real = m._next_stall
    m._next_stall = lambda now, ids: walked.append(now) or real(now, ids)  # type: ignore
    rng = random.Random(3)
    for _ in range(400):
        clock.t += 1000.0
        if rng.random() < 0.2:  # one of them says something new (its presence fact moves)
            i = rng.randrange(40)
            m.apply_presence(PresenceRecord(id=f"local.s{i:02d}", name=f"s{i:02d}",
                                            status=rng.choice(("working", "idle")), ts=clock.t,
                                            activity=str(rng.random())))
        m.tick(clock.t)
        assert m.stalled_ids == frozenset(m.stalled(now=clock.t))
    assert 0 < len(walked) < 300  # it skipped most walks, and still walked when one was due
