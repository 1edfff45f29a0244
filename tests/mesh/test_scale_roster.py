"""Correctness at 10,000 agents (bench/scale.py measures the speed; these prove the answers).

* the model: roster size, per-status counts, NEEDS-YOU set and stalest heartbeat equal a
  brute-force reading of every peer, through status churn, heartbeats and a crash;
* the observer's heartbeat fast path (the last applied record's bytes with other clock
  integers, ``wire.match_clocks``) leaves the model exactly as applying every record in full
  does;
* the console: the roster and the rail measure every item but build only what is shown; what
  they show equals a full build, before and after heartbeat-only and status changes, and j/k
  walk items.
"""

from __future__ import annotations

import json
import random

import msgspec
import pytest
from support.console import FixedClock, StaticSession, T0

from meshview.observe.kvwatch import KvEntry
from meshview.model.mesh import MeshModel
from meshview.model.snapshot import Condition, PresenceRecord
from meshview.wire import decode_presence
from conftest import until

N = 10_000


def record(i: int, status: str, ts: float, **kw) -> PresenceRecord:
    return PresenceRecord(
        id=f"local.a{i:05d}", name=f"a{i:05d}", kind="agent", status=status, ts=ts,
        role=("planner", "backend", "qa")[i % 3], lifecycle_uid=f"{i:026d}",
        status_since=kw.pop("status_since", ts), **kw)


def waiting(i: int, ts: float) -> PresenceRecord:
    return record(i, "waiting", ts, activity="blocked",
                  condition=Condition("input", "harness", f"which branch for a{i:05d}?", ts))


def brute(m: MeshModel) -> dict:
    """The roster's signals computed the slow, obvious way from every peer."""
    peers = [m.peer(p.id) for p in m.snapshot().agents]
    live = [p for p in peers if p.status != "offline"]
    stalest = min(live, key=lambda p: p.ts) if live else None
    return {
        "counts": {s: sum(1 for p in peers if p.status == s)
                   for s in ("working", "waiting", "idle", "offline")},
        "needs": sorted(p.id for p in peers if p.status == "waiting"),
        "stalest": stalest.ts if stalest else None,
        "order": sorted(peers, key=lambda p: ({"working": 0, "waiting": 1, "idle": 2,
                                               "offline": 3}[p.status], p.name.lower(), p.id)),
    }


def check(m: MeshModel, truth_waiting: set[str]) -> None:
    s = m.snapshot()
    b = brute(m)
    assert len(s.agents) == N
    assert dict(s.signals.counts) == b["counts"]
    assert sorted(n.id for n in s.signals.needs_you) == b["needs"] == sorted(truth_waiting)
    assert s.signals.stalest_live_ts == b["stalest"]
    assert list(s.agents) == b["order"]
    assert s.order == tuple(p.id for p in s.peers)


def test_model_at_10k_agents_counts_needs_you_and_order_through_churn():
    clk = FixedClock(T0)
    m = MeshModel("scale", clock=clk)
    rng = random.Random(5)
    wait = set(rng.sample(range(N), 500))
    for i in range(N):
        m.apply_presence(waiting(i, clk.t) if i in wait else record(i, ("working", "idle")[i % 2],
                                                                    clk.t))
    m.end_initial_load()
    check(m, {f"local.a{i:05d}" for i in wait})
    order = m.snapshot().order
    # heartbeat-only rounds keep the order token (same rows), and refresh every peer
    for _ in range(2):
        clk.advance(2000)
        for i in range(N):
            p = m.peer(f"local.a{i:05d}")
            assert m.refresh_clocks(p.id, clk.t, p.activity_since, p.status_since,
                                       p.active_at)
        assert m.snapshot().order is order
        check(m, {f"local.a{i:05d}" for i in wait})
    # churn: 300 leave waiting, 300 others start; 40 crash (heartbeats stop)
    clk.advance(2000)
    leave = set(rng.sample(sorted(wait), 300))
    join = set(rng.sample(sorted(set(range(N)) - wait), 300))
    wait = (wait - leave) | join
    crashed = set(rng.sample(sorted(set(range(N)) - wait), 40))
    for step in range(4):
        for i in range(N):
            if i in crashed and step > 0:
                continue
            m.apply_presence(waiting(i, clk.t) if i in wait else
                             record(i, ("working", "idle")[i % 2], clk.t))
        m.sweep()
        clk.advance(2000)
    m.sweep()
    s = m.snapshot()
    assert s.order is not order
    assert dict(s.signals.counts)["offline"] == len(crashed)
    assert {p.id for p in s.agents if p.status == "offline"} == {f"local.a{i:05d}" for i in crashed}
    check(m, {f"local.a{i:05d}" for i in wait})


def test_refresh_clocks_declines_what_only_the_full_record_may_decide():
    clk = FixedClock(T0)
    m = MeshModel("scale", clock=clk)
    m.apply_presence(record(1, "working", clk.t))
    assert not m.refresh_clocks("local.a99999", clk.t, None, None, None)  # unknown
    assert not m.refresh_clocks("local.a00001", clk.t - 1, None, None, None)  # older
    clk.advance(7000)
    assert not m.refresh_clocks("local.a00001", clk.t - 6001, None, None, None)  # stale
    m.watch_delivered()  # the watch is alive (the deaf guard), so the sweep may judge
    m.sweep()
    assert m.peer("local.a00001").status == "offline"
    assert not m.refresh_clocks("local.a00001", clk.t, None, None, None)  # offline: rejoin
    assert m.peer("local.a00001").status == "offline"


def test_same_but_clocks_is_what_refresh_clocks_moves_and_nothing_else():
    """The roster's heartbeat test for its views: a peer after ``refresh_clocks`` reads the
    same but for its clocks; any other change (status, activity, condition) does not."""
    from meshview.model.roster import same_but_clocks

    clk = FixedClock(T0)
    m = MeshModel("scale", clock=clk)
    m.apply_presence(record(1, "working", clk.t, activity="lint"))
    a = m.peer("local.a00001")
    clk.advance(2000)
    assert m.refresh_clocks("local.a00001", clk.t, clk.t - 10, clk.t - 20, clk.t - 30)
    b = m.peer("local.a00001")
    assert b is not a and b.ts != a.ts and same_but_clocks(a, b)
    for change in (dict(status="idle"), dict(activity="review"), dict(activity=None),
                   dict(condition=Condition("input", "harness", "which?", clk.t))):
        clk.advance(2000)
        m.apply_presence(record(1, change.get("status", "working"), clk.t,
                                **{k: v for k, v in change.items() if k != "status"}
                                | ({} if "activity" in change else {"activity": "lint"})))
        c = m.peer("local.a00001")
        assert not same_but_clocks(b, c), change
        b = c
    assert not same_but_clocks(a, m.peer("local.a00001"))


# --------------------------------------------------------------------------- observer


def wire(i: int, status: str, ts: float, **extra) -> bytes:
    """Clocks as integers, as producers write them, but every tenth agent writes floats (the
    fast path cuts only integers: those records are decoded each time) and every seventh a
    float ``statusSince`` beside integer clocks (it is not cut, so it holds)."""
    num = float if i % 10 == 0 else int
    extra = {k: (float if k == "statusSince" and i % 7 == 3 else num)(v)
             if k in ("activeAt", "statusSince", "activitySince") else v
             for k, v in extra.items()}
    rec = {"card": {"id": f"local.a{i:05d}", "name": f"a{i:05d}", "kind": "agent",
                    "role": "qa", "meta": {"connector": "bench"}},
           "status": status, "ts": num(ts), "lifecycleUid": extra.pop("uid", f"{i:026d}"),
           **extra}
    return json.dumps(rec).encode()


async def test_heartbeat_fast_path_leaves_the_model_as_full_application_does(nc):
    """Two models fed the same presence entries: one through the observer (fast path for
    heartbeat-only records), one by applying every record in full (the path before it)."""
    from meshview.observe.observer import Observer

    clk_a, clk_b = FixedClock(T0), FixedClock(T0)
    a = MeshModel("scale", clock=clk_a, record_events=True)
    b = MeshModel("scale", clock=clk_b, record_events=True)
    obs = Observer(nc, "scale", a)  # not started: entries are handed to it as the watch would
    fast: list[str] = []  # keys the fast path moved (its only way into the model)
    real_refresh = a.refresh_clocks
    a.refresh_clocks = lambda pid, *r, **k: (fast.append(pid), real_refresh(pid, *r, **k))[1]

    def feed(key: str, value: bytes | None, op: str = "PUT") -> None:
        obs.feed_presence(KvEntry(key, value or b"", op, 0))
        d = decode_presence(key, op, value, int(clk_b.t), None, ttl_ms=int(b.ttl_ms))
        if d.action == "mark-offline":
            b.apply_presence_delete(key, purge=op == "PURGE")
        elif d.action == "apply":
            b.apply_presence(PresenceRecord.from_wire(d.presence))
        else:
            b.watch_delivered()

    def tick(ms: float) -> None:
        for c in (clk_a, clk_b):
            c.advance(ms)
        a.sweep()
        b.sweep()

    n = 300
    rng = random.Random(11)
    status = {i: rng.choice(["working", "idle", "waiting"]) for i in range(n)}
    since = {i: T0 for i in range(n)}
    uid = {i: f"{i:026d}" for i in range(n)}
    for rnd in range(12):
        t = clk_a.t
        for i in range(n):
            r = rng.random()
            if rnd == 0 or r > 0.2:
                pass  # a plain heartbeat
            elif r < 0.05:
                status[i] = rng.choice(["working", "idle", "waiting"])
                since[i] = t
            elif r < 0.07:
                feed(f"local.a{i:05d}", None, rng.choice(["DEL", "PURGE"]))
                continue
            elif r < 0.09:
                feed(f"local.a{i:05d}", wire(i, "offline", t, uid=uid[i]))
                continue
            elif r < 0.11:
                feed(f"local.a{i:05d}", wire(i, status[i], t - 7000, uid=uid[i]))  # stale
                continue
            elif r < 0.12:
                uid[i] = f"{rnd:04d}{i:022d}"  # a new incarnation
            elif r < 0.14 and rnd:
                continue  # silent this round (the sweep may call it)
            extra = {"statusSince": since[i], "activeAt": t - rng.randrange(3000)}
            if status[i] == "waiting":
                extra["condition"] = {"code": "input", "since": since[i]}
            if i % 7 == 0:
                extra["activity"] = f"task {rnd // 4}"
                extra["activitySince"] = t - 500
            feed(f"local.a{i:05d}", wire(i, status[i], t, uid=uid[i], **extra))
            if i % 50 == 0:  # a replayed record (same ts) and an older one
                feed(f"local.a{i:05d}", wire(i, status[i], t, uid=uid[i], **extra))
                feed(f"local.a{i:05d}", wire(i, status[i], t - 1500, uid=uid[i], **extra))
        tick(rng.choice([1500, 2000, 2500, 7000 if rnd == 6 else 2000]))
    sa, sb = a.snapshot(), b.snapshot()
    assert sa.agents == sb.agents and sa.signals == sb.signals
    assert [e for e in a.take_events()] == [e for e in b.take_events()]
    assert [(r.kind, r.from_id, r.text) for r in sa.feed] == \
        [(r.kind, r.from_id, r.text) for r in sb.feed]
    assert len(obs._clock_templates) > n // 2  # the fast path was taken
    assert len(fast) > 5 * n  # ... for most heartbeats, over 12 rounds


# --------------------------------------------------------------------------- console


def big_model() -> tuple[MeshModel, FixedClock, set[int]]:
    clk = FixedClock(T0)
    m = MeshModel("scale", clock=clk, server="nats://127.0.0.1:4222")
    m.set_connection("connected")
    rng = random.Random(3)
    wait = set(rng.sample(range(N), 500))
    for i in range(N):
        m.apply_presence(waiting(i, clk.t) if i in wait else
                         record(i, ("working", "idle")[i % 2], clk.t,
                                activity=f"task {i % 5}" if i % 4 == 0 else None))
    m.end_initial_load()
    clk.advance(1500)
    return m, clk, wait


async def settled(pilot, w) -> None:
    """Off-screen items whose data changed keep their last height until a slice measures
    them (widgets/lazy_list.py): equal to a full build once no measure is owed."""
    await until(pilot, lambda: not w.owed_measures, what="the owed measures")


def lazy_equals_full(w) -> None:
    full = [t.plain for _, lines in w.build(w.content_width) for t in lines]
    assert w.line_texts() == full
    assert [k for k, _ in w.items] == [k for k, _ in w.build(w.content_width)]


@pytest.mark.parametrize("size", [(160, 48), (90, 30)])  # wide (wrapped facts) and narrow
async def test_console_roster_and_rail_at_10k_show_what_a_full_build_shows(size):
    from cotal_tui.app import CotalApp
    from widgets.needs_you import NeedsYouRail
    from widgets.roster import Roster

    m, clk, wait = big_model()
    app = CotalApp(session=StaticSession(m, space="scale"))
    async with app.run_test(size=size) as pilot:
        roster = app.screen.query_one(Roster)
        await until(pilot, lambda: len(roster.items) == N, what="10k roster rows")
        assert roster.built_items < 200  # only what was shown (and the cursor) was built
        await settled(pilot, roster)
        lazy_equals_full(roster)
        rail = app.screen.query_one(NeedsYouRail)
        if rail.display:
            assert {k for k, _ in rail.items} == {f"local.a{i:05d}" for i in wait}
            await settled(pilot, rail)
            lazy_equals_full(rail)
        # heartbeat-only: same rows, refreshed records
        order = m.snapshot().order
        for i in range(0, N, 3):
            p = m.peer(f"local.a{i:05d}")
            m.refresh_clocks(p.id, clk.t, p.activity_since, p.status_since, p.active_at)
        assert m.snapshot().order is order
        await until(pilot, lambda: app.screen.snap.version == m.version, what="drained")
        await settled(pilot, roster)
        # on screen a heartbeat's clocks (``seen 0s``) wait for the ages' next move, as every
        # other age there does (widgets/lazy_list.py ``hold_clocks``): the shown rows still
        # read their last second; the model's next second, with any change, shows them all
        full = [t.plain for _, lines in roster.build(roster.content_width) for t in lines]
        assert roster.line_texts() != full
        clk.advance(1000)
        p = m.peer("local.a00001")
        m.refresh_clocks(p.id, clk.t, p.activity_since, p.status_since, p.active_at)
        await until(pilot, lambda: app.screen.snap.version == m.version, what="drained")
        await settled(pilot, roster)
        lazy_equals_full(roster)
        # held again (a heartbeat on screen), and a peer on screen borrows another's name and
        # role in the same second: no clocks-only change, it is told apart at once (labels by
        # principal, never by name)
        p = m.peer("local.a00004")
        clk.advance(10)
        m.refresh_clocks(p.id, clk.t, p.activity_since, p.status_since, p.active_at)
        borrowed = msgspec.structs.replace(record(2, "working", clk.t), name="a00000",
                                           role="planner")
        m.apply_presence(borrowed)
        await until(pilot, lambda: app.screen.snap.version == m.version, what="drained")
        await settled(pilot, roster)
        lazy_equals_full(roster)
        names = {k: lines[0].plain.split()[1] for k, lines in roster.items
                 if k in ("local.a00000", "local.a00002")}
        assert names["local.a00000"] != names["local.a00002"], names
        assert all(n.startswith("a00000") for n in names.values()), names
        # status churn: rows re-sort
        clk.advance(300)
        for i in range(0, 400):
            if i in wait:
                m.apply_presence(record(i, "working", clk.t))
            else:
                m.apply_presence(waiting(i, clk.t))
        wait ^= set(range(400))
        await until(pilot, lambda: app.screen.snap.version == m.version, what="drained")
        await settled(pilot, roster)
        lazy_equals_full(roster)
        if rail.display:
            assert {k for k, _ in rail.items} == {f"local.a{i:05d}" for i in wait}
            await settled(pilot, rail)
            lazy_equals_full(rail)
        # j/k walk items, and the cursor item is the one shown highlighted
        roster.focus()
        await pilot.pause()
        start = roster.cursor_index
        await pilot.press("j", "j", "j", "k")
        assert roster.cursor_index == start + 2
        assert roster.cursor_key == roster.items[start + 2][0]
        assert roster.peer_at_cursor().id == roster.cursor_key
        # the rows kept in the Strip cache across cursor moves are what a fresh paint draws
        # (the highlight left the old item and is on the new one)
        await pilot.press(*"j" * 30, *"k" * 7)
        rows = range(roster.scrollable_content_region.height)
        kept = [list(roster.render_line(y)) for y in rows]
        roster.drop_paint_caches()
        assert kept == [list(roster.render_line(y)) for y in rows]
