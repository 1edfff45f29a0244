"""MeshModel reducers with a hand-driven clock (no I/O)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Sequence

import pytest

from meshview.model.mesh import MeshModel
from meshview.model.snapshot import Condition, PresenceEvent, PresenceRecord
from meshview.wire.decode import Applied


class Clock:
    def __init__(self, t: float = 1_700_000_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, ms: float) -> None:
        self.t += ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def m(clock: Clock) -> MeshModel:
    return MeshModel("main", clock=clock, record_events=True)


def rec(pid: str, name: str, clock: Clock, **kw) -> PresenceRecord:
    kw.setdefault("ts", clock())
    return PresenceRecord(id=pid, name=name, **kw)


def msg(m: MeshModel, mid: str, **kw) -> bool:
    base = dict(kind="channel", id=mid, ts=m.clock(), from_id="local.a", from_name="a",
                text="hi", channel="general")
    base.update(kw)
    return m.apply_message(Applied(**base))


def presence_events(m: MeshModel) -> list[tuple[str, str]]:
    return [(e.event, e.peer.name) for e in m.take_events() if isinstance(e, PresenceEvent)]


def test_roster_split_and_sort(m, clock):
    m.apply_presence(rec("local.z", "zed", clock, status="idle"))
    m.apply_presence(rec("local.b", "bob", clock, status="waiting"))
    m.apply_presence(rec("local.a", "amy", clock, status="working"))
    m.apply_presence(rec("local.o", "obs", clock, status="idle", kind="endpoint"))
    m.apply_presence(rec("local.c", "cat", clock, status="offline"))
    s = m.snapshot()
    assert [p.name for p in s.agents] == ["amy", "bob", "zed", "cat"]
    assert [p.name for p in s.endpoints] == ["obs"]
    assert s.signals.count("working") == 1 and s.signals.count("offline") == 1
    assert s.signals.count("idle") == 1  # the endpoint is not counted


def test_snapshot_is_immutable_and_cached(m, clock):
    msg(m, "1")
    s = m.snapshot()
    assert m.snapshot() is s
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.version = 99  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.names["x"] = "y"  # type: ignore[index]
    assert isinstance(s.feed, Sequence) and isinstance(s.agents, tuple)
    with pytest.raises(TypeError):
        s.feed[0] = s.feed[0]  # type: ignore[index]
    assert not hasattr(s.feed, "append")
    msg(m, "2")
    assert m.snapshot() is not s and m.snapshot().version > s.version


def test_feed_ring_absolute_indices(clock):
    m = MeshModel("main", clock=clock, feed_cap=5)
    for i in range(12):
        msg(m, f"id{i}", text=f"t{i}")
    assert (m.feed_base, m.feed_len, m.feed_end) == (7, 5, 12)
    s = m.snapshot()
    assert s.entry(7).text == "t7" and s.entry(11).index == 11
    with pytest.raises(IndexError):
        s.entry(6)
    # evicted ids leave the dedupe set (bounded), live ones still dedupe
    assert not m.seen("id0") and m.seen("id11")
    assert msg(m, "id11") is False


def test_dedupe_across_history_and_live(m, clock):
    n = m.apply_history([Applied(kind="channel", id="h1", ts=clock() - 10, from_id="local.a",
                                 from_name="a", text="old", channel="general"),
                         Applied(kind="channel", id="h0", ts=clock() - 20, from_id="local.a",
                                 from_name="a", text="older", channel="general")])
    assert n == 2
    assert msg(m, "h1") is False  # live copy of a prefilled row
    assert msg(m, "") is True and msg(m, "") is True  # empty id never dedupes
    s = m.snapshot()
    # history lands in the order given (stream order), never re-sorted by the senders' ts
    assert [e.text for e in s.feed[:2]] == ["old", "older"]
    assert all(e.historical for e in s.feed[:2]) and not s.feed[2].historical
    # history does not count as live arrivals
    assert s.channels[0].arrivals == 2


def test_unicast_burst_coalescing(m, clock):
    m.apply_presence(rec("local.b", "bob", clock))
    m.apply_presence(rec("local.c", "carol", clock))
    for i, to in enumerate(["local.b", "local.c", "local.d"]):
        m.apply_message(Applied(kind="dm", id=f"d{i}", ts=clock() + i, from_id="local.a",
                                from_name="a", text="same", to=to))
        clock.advance(100)
    m.apply_message(Applied(kind="dm", id="x", ts=clock(), from_id="local.a", from_name="a",
                            text="different", to="local.b"))
    assert not [e for e in m.snapshot().feed if e.kind == "dm"]  # window still open
    clock.advance(401)
    m.tick()
    dms = [e for e in m.snapshot().feed if e.kind == "dm"]
    assert len(dms) == 2
    burst = dms[0]
    assert burst.count == 3 and burst.id == "d0"
    assert burst.to_names == ("bob", "carol", "local.d")
    assert burst.ts == clock.t - 401 - 300  # earliest ts
    assert m.seen("d2")


def test_dm_rollup(m, clock):
    for i, (f, t) in enumerate([("local.a", "local.b"), ("local.b", "local.a"),
                                ("local.a", "local.c"), ("local.a", "local.a")]):
        m.apply_message(Applied(kind="dm", id=f"m{i}", ts=clock() + i, from_id=f, from_name=f[-1],
                                text=f"t{i}", to=t))
    s = m.snapshot()
    pairs = {(c.a_id, c.b_id): c.count for c in s.dms}
    assert pairs == {("local.a", "local.b"): 2, ("local.a", "local.c"): 1}  # self-DM skipped
    assert s.dms[0].b_id == "local.c"  # newest first
    assert [d.id for d in s.dm_thread("local.b", "local.a")] == ["m0", "m1"]


def test_needs_you_and_stalest(m, clock):
    since = clock() - 180_000
    m.apply_presence(rec("local.w", "walt", clock, status="waiting",
                         condition=Condition("approval", since=since), status_since=since))
    m.apply_presence(rec("local.a", "amy", clock, status="waiting"))
    m.apply_presence(rec("local.x", "xav", clock, status="working", ts=clock() - 3000))
    s = m.snapshot()
    assert [n.name for n in s.signals.needs_you] == ["amy", "walt"]
    walt = s.signals.needs_you[1]
    assert walt.condition_code == "approval" and walt.condition_age_ms == 180_000
    assert s.signals.needs_you[0].condition_age_ms is None  # never guessed
    assert s.signals.stalest_live_id == "local.x"


def test_needs_you_is_in_name_order_through_case_ties_and_renames(m, clock):
    """NEEDS-YOU is ordered by (name, case-insensitive, then id): the roster's order within
    its waiting block, which the snapshot reuses instead of sorting again."""
    names = {"local.b": "bob", "local.a2": "Alice", "local.c": "carol", "local.a1": "alice",
             "local.z": "Zed"}
    for pid, name in names.items():
        m.apply_presence(rec(pid, name, clock, status="waiting"))
    m.apply_presence(rec("local.y", "aaron", clock, status="working"))  # not waiting

    def order():
        return [n.id for n in m.snapshot().signals.needs_you]

    def want():
        return [pid for _, pid in sorted((n.lower(), pid) for pid, n in names.items())]

    assert order() == want() == ["local.a1", "local.a2", "local.b", "local.c", "local.z"]
    names["local.z"] = "Adam"  # a rename moves it
    m.apply_presence(rec("local.z", "Adam", clock, status="waiting"))
    assert order() == want()
    m.apply_presence(rec("local.y", "aaron", clock, status="waiting"))  # joins the block
    names["local.y"] = "aaron"
    assert order() == want() and order()[0] == "local.y"


def test_heartbeat_only_is_not_an_event(m, clock):
    m.apply_presence(rec("local.a", "amy", clock, status="working", activity="x", lifecycle_uid="u1" * 13))
    clock.advance(2000)
    m.apply_presence(rec("local.a", "amy", clock, status="working", activity="x", lifecycle_uid="u1" * 13))
    clock.advance(2000)
    m.apply_presence(rec("local.a", "amy", clock, status="idle", lifecycle_uid="u1" * 13))
    assert presence_events(m) == [("join", "amy"), ("update", "amy")]
    assert m.snapshot().agents[0].ts == clock()


def test_new_incarnation(m, clock):
    m.apply_presence(rec("local.a", "amy", clock, lifecycle_uid="a" * 26))
    clock.advance(2000)
    m.apply_presence(rec("local.a", "amy", clock, lifecycle_uid="b" * 26))
    assert presence_events(m) == [("join", "amy"), ("incarnation", "amy")]
    life = [e.lifecycle for e in m.snapshot().feed if e.kind == "lifecycle"]
    assert life == ["join", "incarnation"]
    assert m.snapshot().agents[0].incarnations == 2


def test_offline_rules(m, clock):
    m.apply_presence(rec("local.a", "amy", clock))
    m.apply_presence(rec("local.b", "bob", clock))
    m.apply_presence(rec("local.c", "cat", clock))
    # rule 1: delete/purge; rule 2: offline record
    m.apply_presence_delete("local.a")
    m.apply_presence(rec("local.b", "bob", clock, status="offline"))
    # rule 3: stale on arrival, unknown -> quietly offline
    m.apply_presence(rec("local.q", "quiet", clock, ts=clock() - 7000))
    s = m.snapshot()
    st = {p.name: (p.status, p.offline_reason) for p in s.agents}
    assert st["amy"] == ("offline", "kv-delete") and st["bob"] == ("offline", "offline-record")
    assert st["quiet"] == ("offline", "stale")
    ev = presence_events(m)
    assert ("offline", "amy") in ev and ("offline", "bob") in ev
    assert not any(n == "quiet" for _, n in ev)  # quiet: no event


def test_sweep_with_deaf_guard(m, clock):
    m.apply_presence(rec("local.c", "cat", clock))
    # the watch goes silent: no peer is judged, the view goes stale instead (rule 5)
    clock.advance(7000)
    assert m.sweep() is True
    assert m.snapshot().agents[0].status == "idle"
    assert m.presence_view == "stale"
    # someone else heartbeats >= ttl after cat's record: now cat is stale (rule 4)
    m.apply_presence(rec("local.d", "dan", clock))
    assert m.presence_view == "live"
    m.sweep()
    st = {p.name: (p.status, p.offline_reason) for p in m.snapshot().agents}
    assert st["cat"] == ("offline", "stale") and st["dan"][0] == "idle"
    assert ("offline", "cat") in presence_events(m)
    assert [e.lifecycle for e in m.snapshot().feed if e.kind == "lifecycle"][-1] == "crash"


def test_stale_record_for_known_peer_waits_for_sweep(m, clock):
    m.apply_presence(rec("local.c", "cat", clock))
    clock.advance(6500)
    m.apply_presence(rec("local.c", "cat", clock, ts=clock() - 6500))  # replayed old record
    assert m.snapshot().agents[0].status == "idle"
    m.sweep()
    assert m.snapshot().agents[0].status == "offline"


def test_grace_after_reconnect(m, clock):
    m.apply_presence(rec("local.c", "cat", clock))
    clock.advance(8000)
    m.grace()
    m.watch_delivered()
    m.sweep()
    assert m.snapshot().agents[0].status == "idle"  # gets a ttl to heartbeat again


def test_resync_marks_absent_peers(m, clock):
    m.apply_presence(rec("local.a", "amy", clock))
    m.apply_presence(rec("local.b", "bob", clock))
    m.presence_resync({"local.a"})
    st = {p.name: p.status for p in m.snapshot().agents}
    assert st == {"amy": "idle", "bob": "offline"}


def test_rates_buckets(m, clock):
    m.snapshot()  # the rate is measured from here
    for _ in range(3):
        msg(m, "")
    s = m.snapshot()
    assert s.rates.buckets[-1] == 3 and s.rates.msgs_per_sec == 3 and len(s.rates.buckets) == 15
    clock.advance(4000)
    m.tick()
    msg(m, "")
    s = m.snapshot()
    assert s.rates.buckets[-2:] == (3, 1) and s.rates.msgs_per_sec == 1  # 4 over 4 s
    clock.advance(61_000)
    m.tick()
    assert sum(m.snapshot().rates.buckets) == 0
    assert m.snapshot().rates.msgs_per_sec == 0


def test_rate_is_smooth_under_sparse_traffic(m, clock):
    """One message every 1.5 s reads as a steady ~0.7 msg/s, not 0.0 / 1.0 by turns: the rate is the mean of the last 10 s."""
    m.snapshot()
    seen = []
    for step in range(160):  # 40 s in 250 ms ticks
        if step % 6 == 0:
            msg(m, f"s{step}")
        clock.advance(250)
        m.tick()
        if step >= 48:  # past the first 12 s
            seen.append(round(m.snapshot().rates.msgs_per_sec, 1))
    assert min(seen) >= 0.6 and max(seen) <= 0.8, sorted(set(seen))


def test_rate_counts_deliveries_not_event_channels(m, clock):
    m.snapshot()
    msg(m, "c1")
    msg(m, "d1", kind="dm", to="local.b", channel=None)
    msg(m, "a1", kind="anycast", to_service="reviewer", channel=None)
    msg(m, "e1", channel="events.local.a", event=True)
    msg(m, "h1", historical=True)
    m.flush_bursts()
    s = m.snapshot()
    assert s.rates.total == 3 and s.rates.buckets[-1] == 3


def test_channels_registry_counts_and_events(m, clock):
    from meshview.model.snapshot import ChannelSettings

    m.set_channel_registry({"team.backend": ChannelSettings(replay=False)},
                           ChannelSettings(delivery_class="live"))
    m.set_retained_counts({"general": 1000})
    msg(m, "1", channel="general")
    msg(m, "2", channel="fresh")
    msg(m, "3", channel="events.local.bot", event=True)
    s = m.snapshot()
    ch = {c.name: c for c in s.channels}
    assert set(ch) == {"general", "fresh", "team.backend"}
    # the poll's count plus what arrived since it (the tab total never lags its badge)
    assert ch["general"].retained == 1001 and ch["general"].arrivals == 1
    assert ch["fresh"].retained == 1 and ch["fresh"].arrivals == 1
    assert ch["team.backend"].replay is False and ch["team.backend"].delivery_class == "live"
    assert ch["general"].delivery_class == "live" and ch["general"].replay is True
    ev = [e for e in s.feed if e.event]
    assert len(ev) == 1 and ev[0].channel == "events.local.bot"


def test_topology_and_rejections(m, clock):
    msg(m, "1", channel="general")
    msg(m, "2", channel="general")
    m.apply_message(Applied(kind="anycast", id="3", ts=clock(), from_id="local.a", from_name="a",
                            text="t", to_service="reviewer"))
    m.apply_rejection("sender-mismatch", "cotal.main.chat.local.x.general")
    m.apply_rejection("sender-mismatch", "cotal.main.chat.local.x.general")
    m.apply_rejection("malformed-json", "cotal.main.chat.local.x.general")
    s = m.snapshot()
    assert s.topology.edges[0].target == "#general" and s.topology.edges[0].count == 2
    assert [(h.to, h.kind) for h in s.topology.recent] == [
        ("#general", "channel"), ("#general", "channel"), ("@reviewer", "anycast")]
    assert dict(s.rejections) == {"malformed-json": 1, "sender-mismatch": 2}


def test_topology_edges_sort_by_count_then_least_recently_used_and_stay_the_snapshots(m, clock):
    for i, ch in enumerate(["a", "b", "c", "b", "d", "a", "e"]):
        msg(m, f"t{i}", channel=ch)
    s = m.snapshot()
    # a and b twice (a used last), then c, d, e once each in the order they were last used
    assert [(e.target, e.count) for e in s.topology.edges] == [
        ("#b", 2), ("#a", 2), ("#c", 1), ("#d", 1), ("#e", 1)]
    msg(m, "t9", channel="c")  # later traffic moves the model's edges, not this snapshot's
    msg(m, "t10", channel="c")
    assert [(e.target, e.count) for e in s.topology.edges][0] == ("#b", 2)
    assert [(e.target, e.count) for e in m.snapshot().topology.edges][:2] == [("#c", 3), ("#b", 2)]


def test_membership_pill(m, clock):
    from meshview.model.snapshot import MemberView

    assert m.snapshot().membership.pill == "traffic-only"
    m.set_membership({"local.a": MemberView("local.a", ("team.>",), (), clock())}, clock())
    assert m.snapshot().membership.pill == "live"
    clock.advance(46_000)
    m.tick()
    assert m.snapshot().membership.pill == "stale"
    m.set_membership_unreadable("watch: denied")
    snap = m.snapshot()
    assert snap.membership.pill == "unreadable" and snap.status.error is None
    m.set_membership(None, None)
    assert m.snapshot().membership.pill == "traffic-only"


def test_manager_lifecycle(m, clock):
    m.apply_manager("abc123", up=True, holder="local.mgr", runtime="pty")
    m.apply_manager("abc123", up=True, holder="local.mgr", runtime="pty")  # renewal
    m.apply_manager("abc123", up=False)
    life = [e.lifecycle for e in m.snapshot().feed if e.kind == "lifecycle"]
    assert life == ["manager-up", "manager-down"]
    assert m.snapshot().managers[0].up is False


def test_meshview_imports_no_ui():
    code = ("import sys, meshview.model.mesh, meshview.observe.observer, meshview.lines.stream, meshview.link.connect, "
            "meshview.wire.sanitize, meshview.model.snapshot, meshview.model.feedring, meshview.model.roster, "
            "meshview.model.traffic, meshview.observe.history, meshview.observe.kvwatch; bad=[m for m in sys.modules if m.split('.')[0] in "
            "('textual','rich')]; print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("kind", ["channel", "anycast"])
def test_a_landed_row_holds_every_field_it_was_given(m, clock, kind):
    """The channel/anycast row is built positionally (the hot path): each field lands in its
    own slot, threaded or not, equal to the same row built by keyword."""
    from meshview.model.snapshot import FeedEntry

    m.apply_message(Applied(kind="channel", id="orig", ts=1.0, from_id="local.a", from_name="a",
                            text="the original\nsecond line", channel="general"))
    route = {"channel": "ops"} if kind == "channel" else {"to_service": "review"}
    for mid, thread in (("plain", {}), ("threaded", {
            "reply_to": "orig", "wire_context_id": "ctx-1", "mentions": ["bram", "cy"]})):
        assert m.apply_message(Applied(kind=kind, id=mid, ts=2.0, from_id="local.ada",
                                       from_name="ada",
                                       from_role="lead", text="hello", parts=[{"kind": "text"}],
                                       received=5.0, context_id="ctx-9", **route, **thread))
        row = m.snapshot().feed[-1]
        want = FeedEntry(
            index=row.index, id=mid, ts=2.0, received=5.0, kind=kind, from_id="local.ada",
            from_name="ada", from_role="lead", text="hello", parts=({"kind": "text"},),
            ids=(mid,), context_id="ctx-9", channel=route.get("channel"),
            to_service=route.get("to_service"), reply_to=thread.get("reply_to"),
            wire_context_id=thread.get("wire_context_id"),
            mentions=tuple(thread.get("mentions", ())),
            reply_excerpt="the original" if thread else None)
        assert row == want
