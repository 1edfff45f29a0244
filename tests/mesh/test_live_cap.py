"""Live presence keys are capped (issue 35 item 5): in open mode any client may write any
number of presence keys. Past the cap a new key is refused and counted; a peer already shown is
never pushed out, and room comes back as rows go offline."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Callable

from conftest import until
from support.observer import Heartbeat, now_ms, presence

from meshview.link.connect import ConnectTarget, connect
from meshview.model.mesh import MeshModel
from meshview.model.roster import OFFLINE_CAP
from meshview.model.snapshot import PresenceEvent, PresenceRecord
from meshview.observe.observer import Observer, ObserverOptions
from meshview.wire.bounds import LIVE_PEERS_MAX
from meshview.wire.names import bucket_names

T0 = 1_700_000_000_000.0
REFUSED = "presence:live-cap"


def rec(pid: str, t: float, status: str = "working", **kw) -> PresenceRecord:
    return PresenceRecord(id=f"local.{pid}", name=pid, status=status, ts=t, role="backend",
                          lifecycle_uid=(pid * 26)[:26], activity="editing src/app.py", **kw)


def grown_by(flood: Callable[[MeshModel], object], t: list[float]) -> tuple[MeshModel, int]:
    """A model with ten real agents working, then ``flood`` on it: the model and the bytes its
    traced memory grew by (after a snapshot and a collection, so only what is kept counts)."""
    m = MeshModel("s", clock=lambda: t[0])
    for i in range(10):
        m.apply_presence(rec(f"real{i}", t[0]))
    m.snapshot()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        flood(m)
        m.snapshot()
        gc.collect()
        return m, tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()


def live(m: MeshModel) -> list[str]:
    return [p.id for p in m.snapshot().peers if p.status != "offline"]


def test_the_default_cap_is_well_above_the_10k_agent_benchmark():
    assert LIVE_PEERS_MAX >= 2 * 10_000
    assert MeshModel().live_cap == LIVE_PEERS_MAX


def test_at_the_cap_every_agent_shows_and_one_more_key_is_refused():
    """scale.py-style: exactly ``cap`` agents all show; the next new key is refused, counted."""
    t = [T0]
    cap = 500
    m = MeshModel("s", clock=lambda: t[0], live_cap=cap)
    for i in range(cap):
        m.apply_presence(rec(f"a{i:05d}", t[0]))
    assert len(live(m)) == cap == m.roster.live_count()
    assert m.rejection_count(REFUSED) == 0
    m.apply_presence(rec("late", t[0]))
    assert m.peer("local.late") is None
    assert m.name_of("local.late") == "local.late"  # a refused key keeps nothing, not even a name
    assert len(live(m)) == cap
    assert m.rejection_count(REFUSED) == 1


def test_a_flood_of_keys_never_pushes_out_real_agents_and_room_comes_back():
    t = [T0]
    cap = 100
    m = MeshModel("s", clock=lambda: t[0], live_cap=cap, record_events=True)
    real = [f"real{i}" for i in range(10)]
    for r in real:
        m.apply_presence(rec(r, t[0]))
    m.end_initial_load()
    m.take_events()
    for i in range(1000):  # a lying peer: 1000 distinct keys
        m.apply_presence(rec(f"x{i:05d}", t[0], status="idle"))
    assert m.roster.live_count() == cap
    assert m.rejection_count(REFUSED) == 1000 - (cap - len(real))
    assert all(m.peer(f"local.{r}").status == "working" for r in real)
    assert m.peer("local.x00999") is None
    # nothing about the real agents changed: no offline event for any of them
    evs = m.take_events()
    assert not [e for e in evs if isinstance(e, PresenceEvent) and e.peer.id.startswith("local.real")]
    # a real agent already shown keeps updating at the cap
    t[0] += 1000
    m.apply_presence(rec("real3", t[0], status="waiting"))
    assert m.peer("local.real3").status == "waiting"
    # a peer already shown that went offline comes back live, even at the cap
    m.apply_presence_delete("local.real4")
    for i in range(80, 86):  # room: six of the flood leave ...
        m.apply_presence_delete(f"local.x{i:05d}")
    m.apply_presence(rec(f"x{cap + 500:05d}", t[0]))  # ... so a new key gets in again
    assert m.peer(f"local.x{cap + 500:05d}").status == "working"
    m.apply_presence(rec("real4", t[0] + 1))
    assert m.peer("local.real4").status == "working"
    assert m.roster.live_count() == 90 - 6 + 1 + 10
    # the roster never holds more than both caps together, whatever the order of rows
    assert len(m.snapshot().peers) <= cap + OFFLINE_CAP


def test_the_cap_holds_across_a_checkpoint():
    from meshview.record.statecodec import checkpoint, restore

    t = [T0]
    m = MeshModel("s", clock=lambda: t[0], live_cap=20)
    for i in range(30):
        m.apply_presence(rec(f"a{i:02d}", t[0]))
    m2 = MeshModel("s", clock=lambda: t[0], live_cap=20)
    restore(m2, checkpoint(m))
    assert m2.roster.live_count() == 20
    m2.apply_presence(rec("more", t[0]))
    assert m2.peer("local.more") is None
    assert m2.rejection_count(REFUSED) == 11


def test_100k_distinct_keys_stay_bounded_in_memory():
    """The issue's probe (100k keys held 262k rows, 612 MB) through the model's input: the
    roster holds at most the cap, the real agents stay, and the model's traced memory growth
    stays under 60 MB (35 MB measured at the 20k cap; 179 MB and 100k rows uncapped)."""
    t = [T0]

    def flood(m: MeshModel) -> None:
        for i in range(100_000):
            m.apply_presence(rec(f"mallory{i:06d}", t[0], status="idle",
                                 description="d" * 200))
            if i % 20_000 == 0:
                m.snapshot()

    m, grown = grown_by(flood, t)
    assert m.roster.live_count() == LIVE_PEERS_MAX
    assert len(m.snapshot().peers) == LIVE_PEERS_MAX
    assert m.rejection_count(REFUSED) == 100_000 - (LIVE_PEERS_MAX - 10)
    assert all(m.peer(f"local.real{i}").status == "working" for i in range(10))
    assert grown < 60 * 2**20, grown


async def test_a_lying_peer_floods_presence_keys_on_a_real_broker(broker, nc, space):
    """A real broker, the observer's own watch: a peer writes 400 distinct keys beside 5 real
    agents heartbeating; with a cap of 60 the roster holds 60 live rows, the real agents stay
    live, and the refusals are counted by name."""
    cap = 60
    onc, target = await connect(ConnectTarget((broker.url,), space, timeout=3))
    model = MeshModel(space, record_events=True, live_cap=cap)
    obs = Observer(onc, space, model, has_credential=target.has_credential,
                   options=ObserverOptions(backfill=0))
    await obs.start()
    hb = Heartbeat(nc, space, period=1.0)
    try:
        for i in range(5):
            hb.add(f"real{i}", status="working")
        await hb.beat()
        hb.start()
        await until(lambda: all(model.peer(f"local.real{i}") for i in range(5)),
                    what="the real agents")
        kv = await nc.jetstream().key_value(bucket_names(space).presence)
        n = 400
        for i in range(n):
            r = presence(f"m{i:04d}", "idle", ts=now_ms())
            await kv.put(r["card"]["id"], json.dumps(r).encode())
        await until(lambda: model.rejection_count(REFUSED) >= n - (cap - 5),
                    what="the refusals counted")
        assert model.roster.live_count() == cap
        assert all(model.peer(f"local.real{i}").status == "working" for i in range(5))
        assert model.peer(f"local.m{n - 1:04d}") is None
        # the flood keeps heartbeating nothing: its rows go stale and offline, room comes back
        await until(lambda: model.roster.live_count() == 5, timeout=model.ttl_ms / 1000 + 10,
                    what="the flood's rows stale")
        r = presence("newcomer", "working", ts=now_ms())
        await kv.put(r["card"]["id"], json.dumps(r).encode())
        await until(lambda: (p := model.peer("local.newcomer")) and p.status == "working",
                    what="a new key admitted again")
        assert all(model.peer(f"local.real{i}").status == "working" for i in range(5))
    finally:
        await hb.stop()
        await obs.stop()
        await onc.close()


def max_card(i: int, t: float) -> PresenceRecord:
    """A card at every byte bound the wire keeps whole (~34 KB a row in full)."""
    from meshview.model.snapshot import Condition
    from meshview.wire import bounds as B

    return PresenceRecord(
        id=f"local.x{i:06d}", name="N" * (B.NAME_BYTES - 10) + str(i), role="R" * B.ROLE_BYTES,
        status="working", ts=t, lifecycle_uid="u" * B.ID_BYTES,
        activity="A" * B.ACTIVITY_BYTES, description="D" * B.DESCRIPTION_BYTES,
        condition=Condition("c" * 64, "s" * 64, "M" * B.CONDITION_BYTES, t),
        tags=tuple(f"{j:03d}" + "t" * (B.TAG_BYTES - 3) for j in range(B.TAGS_MAX)),
        meta=tuple((f"{j:03d}" + "k" * (B.TAG_BYTES - 3), "v" * B.META_BYTES)
                   for j in range(B.META_MAX)))


def test_rows_at_every_byte_bound_are_kept_slim_past_the_byte_budget():
    """Cards at every wire bound are ~34 KB a row: 20k of them would hold ~680 MB under the
    count cap alone. Past the live rows' byte budget a row is kept slim (counted as the cut
    ``presence:budget``): 8000 such keys grow the model by under 120 MB (99 MB measured;
    ~280 MB in full),
    every one shown with its status, and an agent already shown keeps updating."""
    from meshview.model.roster import row_bytes
    from meshview.wire.bounds import LIVE_PEERS_BYTES

    t = [T0]
    m, grown = grown_by(lambda m: [m.apply_presence(max_card(i, t[0])) for i in range(8000)], t)
    assert m.roster.live_count() == 8010  # nobody refused: slim rows still fit
    assert m.cut_count("presence:budget") > 5000
    full = [p for p in m.snapshot().peers if p.meta]
    assert len(full) * row_bytes(full[0]) <= LIVE_PEERS_BYTES
    slim_row = m.peer("local.x007999")
    assert slim_row.status == "working" and slim_row.meta == () and slim_row.description is None
    assert len(slim_row.activity.encode()) <= 256 and slim_row.condition.code == "c" * 64
    assert grown < 120 * 2**20, grown
    # an agent already shown still moves (kept slim while the budget is spent)
    t[0] += 1000
    m.apply_presence(rec("real3", t[0], status="waiting"))
    assert m.peer("local.real3").status == "waiting"
    assert m.roster.live_bytes() == sum(row_bytes(p) for p in m.snapshot().peers
                                         if p.status != "offline")


def test_the_live_byte_sum_follows_rows_going_offline_and_a_checkpoint():
    from meshview.model.roster import row_bytes
    from meshview.record.statecodec import checkpoint, restore

    t = [T0]
    m = MeshModel("s", clock=lambda: t[0])
    for i in range(50):
        m.apply_presence(max_card(i, t[0]))
    for i in range(0, 50, 2):
        m.apply_presence_delete(f"local.x{i:06d}")

    def truth(mm: MeshModel) -> int:
        return sum(row_bytes(p) for p in mm.snapshot().peers if p.status != "offline")

    assert m.roster.live_bytes() == truth(m) > 0
    m2 = MeshModel("s", clock=lambda: t[0])
    restore(m2, checkpoint(m))
    assert m2.roster.live_bytes() == truth(m2) == truth(m)
    m2.apply_presence(max_card(0, t[0] + 1))
    assert m2.roster.live_bytes() == truth(m2)


async def test_clock_templates_are_bounded_in_bytes(nc):
    """The observer keeps, per live key, its last record cut around the clocks (the fast
    heartbeat path): at most LAST_PRESENCE_TOTAL bytes of them, so 4000 keys of 15 KB records
    grow observer and model by under 110 MB (85 MB measured; 150 MB with no total bound, and
    20k keys would hold ~500 MB of templates)."""
    import msgspec

    from meshview.observe.kvwatch import KvEntry
    from meshview.observe.observer import LAST_PRESENCE_TOTAL

    t = [T0]
    m = MeshModel("s", clock=lambda: t[0])
    obs = Observer(nc, "s", m)  # not started: entries are handed to it as the watch would

    def card(i: int) -> bytes:
        return msgspec.json.encode({
            "card": {"id": f"local.k{i:05d}", "name": f"k{i:05d}", "kind": "agent",
                     "meta": {f"m{j:02d}": f"{i:05d}" + "v" * 240 for j in range(30)},
                     "description": "d" * 700},
            "status": "working", "ts": int(t[0]), "lifecycleUid": "a" * 26,
            "activity": "A" * 1900, "condition": {"code": "c", "message": "M" * 4000}})

    assert 12_000 < len(card(0)) < 16 * 1024
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(4000):
            obs.feed_presence(KvEntry(f"local.k{i:05d}", card(i), "PUT", 0))
        m.snapshot()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert m.roster.live_count() == 4000
    assert grown < 110 * 2**20, (grown, LAST_PRESENCE_TOTAL)
    # the fast path still serves a heartbeat of a key whose template is kept
    t[0] += 2000
    obs.feed_presence(KvEntry("local.k03999", card(3999).replace(
        str(int(T0)).encode(), str(int(t[0])).encode()), "PUT", 0))
    assert m.peer("local.k03999").ts == t[0]


async def test_a_refused_keys_heartbeats_are_refused_undecoded_and_counted_exactly(nc):
    """Past the cap (30k agents on a 20k cap), a refused key's heartbeat that only moves its
    clocks is matched against its last record's template and refused as ``apply_presence``
    would refuse it (no decode, no ``apply_presence`` input), each one counted. A record that
    says more is decoded in full; a stale one is taken as ``apply_presence`` takes it; and the
    key is admitted by its next heartbeat once room comes back. The stream says the refusal
    once, not once a heartbeat (a line per refused heartbeat was ~8k JSON lines a second at
    30k agents): a repeat is counted but emits no event."""
    from meshview.model.snapshot import Rejected
    from meshview.observe.kvwatch import KvEntry

    t = [T0]
    m = MeshModel("s", clock=lambda: t[0], live_cap=2, record_events=True)

    def said() -> list[str]:
        return [e.subject for e in m.take_events() if isinstance(e, Rejected)]

    obs = Observer(nc, "s", m)  # not started: entries are handed to it as the watch would
    calls: list[str] = []
    m.input_tap = lambda c: calls.append(c.name)

    def put(name: str, ts: float, status: str = "working") -> None:
        r = presence(name, status, ts=int(ts))
        obs.feed_presence(KvEntry(r["card"]["id"], json.dumps(r).encode(), "PUT", 0))

    put("a", t[0])
    put("b", t[0])
    put("late", t[0])
    assert m.peer("local.late") is None and m.rejection_count(REFUSED) == 1
    assert said() == ["local.late"]
    for k in range(3):  # clock-only heartbeats: matched, refused, counted, never decoded
        t[0] += 2000
        calls.clear()
        put("late", t[0])
        assert m.rejection_count(REFUSED) == 2 + k
        assert "apply_presence" not in calls and "apply_rejection" in calls
        assert said() == []  # counted, not said again
    assert m.peer("local.late") is None and m.roster.live_count() == 2
    put("late", t[0], status="waiting")  # says more than its clocks: decoded in full, refused
    assert m.rejection_count(REFUSED) == 5 and m.peer("local.late") is None
    assert said() == ["local.late"]  # a new record refused: said
    put("late", t[0] - m.ttl_ms - 1000, status="waiting")  # stale: recorded quietly offline
    assert m.rejection_count(REFUSED) == 5
    assert m.peer("local.late").status == "offline"
    # room comes back: b leaves; the refused key's next heartbeat is admitted, not refused
    obs.feed_presence(KvEntry("local.b", b"", "DEL", 0))
    t[0] += 2000
    put("late", t[0], status="waiting")
    assert m.peer("local.late").status == "waiting"
    assert m.rejection_count(REFUSED) == 5 and m.roster.live_count() == 2


async def test_a_forgotten_peer_refused_on_its_return_is_said_once(nc, monkeypatch):
    """A peer swept offline and then forgotten (past OFFLINE_CAP) keeps the observer's clock
    template of its last accepted record. Back with a clocks-only heartbeat while the cap is
    full, it is refused: that refusal was never said, so it is said (one rejected event), and
    only its later heartbeats are the silent repeats."""
    from meshview.model import roster as roster_mod
    from meshview.model.snapshot import Rejected
    from meshview.observe.kvwatch import KvEntry

    monkeypatch.setattr(roster_mod, "OFFLINE_CAP", 0)  # an offline row is forgotten at once
    t = [T0]
    m = MeshModel("s", clock=lambda: t[0], live_cap=2, record_events=True)
    obs = Observer(nc, "s", m)

    def put(name: str) -> None:
        r = presence(name, "working", ts=int(t[0]))
        obs.feed_presence(KvEntry(r["card"]["id"], json.dumps(r).encode(), "PUT", 0))

    put("a")
    put("x")
    t[0] += m.ttl_ms + 1000
    m.watch_delivered(t[0])  # (the watch still delivers: a and x alone are stale)
    m.sweep(t[0])  # a goes offline, then x, and a (the first offline) is forgotten
    assert m.peer("local.a") is None
    put("b")
    put("c")  # the cap is full
    assert m.roster.live_count() == 2, m.roster.live_count()
    m.take_events()
    for _ in range(3):
        t[0] += 2000
        put("a")  # clocks only, against its old record
    said = [e.subject for e in m.take_events() if isinstance(e, Rejected)]
    assert said == ["local.a"] and m.rejection_count(REFUSED) == 3
