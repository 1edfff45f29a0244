"""MeshView: the observer's state and its pure reducers.

No I/O and no clock of its own: every reducer takes receipt time from the injected ``clock``
(epoch milliseconds), so tests drive time by hand. Everything is bounded (feed ring, dedupe
set, DM log, topology, event queue). The observer feeds it decoded wire data through the
``apply_*``/``set_*`` methods; the UI reads :meth:`MeshModel.snapshot`, an immutable view made of
frozen dataclasses and tuples; the line stream drains :meth:`MeshModel.take_events`.

Contract for the console (names are stable):

* ``snapshot()`` -> :class:`Snapshot`; cheap to call repeatedly, rebuilt only after a change.
* Feed rows are addressed by *absolute index*: ``feed_base <= i < feed_end``;
  ``snapshot.entry(i)`` / ``model.entry(i)`` return a :class:`FeedEntry` whose ``index == i``.
  Old rows fall off the front (``feed_base`` grows); indices never shift.
* ``version`` increases on every change; ``dirty`` says a snapshot is due. The observer
  publishes at most one snapshot per ``BATCH_MS`` (75 ms) and one per second for ages.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence

import msgspec

Clock = Callable[[], float]
"""Returns the observer's wall clock in epoch milliseconds."""

Status = Literal["working", "waiting", "idle", "offline"]
FeedKind = Literal["channel", "dm", "anycast", "lifecycle"]
LifecycleKind = Literal["join", "offline", "crash", "incarnation", "manager-up", "manager-down"]
PresenceEventKind = Literal["join", "update", "offline", "incarnation"]
ConnectionState = Literal["connecting", "connected", "reconnecting", "stale", "closed"]
MembershipPill = Literal["live", "stale", "traffic-only", "unreadable"]

STATUS_ORDER: dict[str, int] = {"working": 0, "waiting": 1, "idle": 2, "offline": 3}
STATUSES: tuple[Status, ...] = ("working", "waiting", "idle", "offline")

PRESENCE_TTL_MS = 6000.0
BURST_MS = 400.0
BATCH_MS = 75.0
FEED_CAP = 10_000
# The ring is bounded in bytes as well as rows: any agent may send ~1 MiB messages, and 10,000
# of them would be ~10 GiB. A row keeps at most KEPT_TEXT characters (the line stream still
# gets the exact text: events carry the full row), and the oldest rows go once the kept text
# of the whole ring passes FEED_TEXT_BUDGET.
KEPT_TEXT = 64 * 1024
FEED_TEXT_BUDGET = 64 * 1024 * 1024
DM_LOG_CAP = 1000
RATE_BUCKETS = 15
RATE_BUCKET_MS = 4000.0
TOPO_RECENT_CAP = 2000
TOPO_EDGE_CAP = 4096
EVENT_QUEUE_CAP = 100_000
MEMBERSHIP_STALE_MS = 45_000.0


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class Condition:
    """``Presence.condition``: why a seat is blocked, as the harness reported it."""

    code: str
    source: str | None = None
    message: str | None = None
    since: float | None = None


@dataclass(frozen=True, slots=True)
class PresenceRecord:
    """One decoded, validated presence record (the observer converts wire structs to this)."""

    id: str
    name: str
    kind: str = "agent"  # "agent" | "endpoint"
    status: str = "idle"  # as reported: idle | waiting | working | offline
    ts: float = 0.0  # last heartbeat, peer clock, epoch ms
    role: str | None = None
    lifecycle_uid: str | None = None
    activity: str | None = None
    activity_since: float | None = None
    status_since: float | None = None
    active_at: float | None = None
    condition: Condition | None = None
    attention: str | None = None
    channel_modes: tuple[tuple[str, str], ...] = ()
    description: str | None = None
    tags: tuple[str, ...] = ()
    meta: tuple[tuple[str, str], ...] = ()
    environment: str | None = None


@dataclass(frozen=True, slots=True)
class ChannelSettings:
    """Registry config of one channel (``cotal_channels_<space>``), fields as on the wire."""

    replay: bool | None = None
    replay_window: str | None = None
    delivery_class: str | None = None
    description: str | None = None
    instructions: str | None = None


# --------------------------------------------------------------------------- outputs


@dataclass(frozen=True, slots=True)
class Peer:
    """A roster row. ``status`` is the derived status (offline when stale/deleted)."""

    id: str
    name: str
    kind: str
    status: Status
    reported_status: str
    ts: float  # last heartbeat (peer clock)
    seen_at: float  # receipt time of the last record that moved ts (observer clock)
    role: str | None = None
    lifecycle_uid: str | None = None
    activity: str | None = None
    activity_since: float | None = None
    status_since: float | None = None
    active_at: float | None = None
    condition: Condition | None = None
    attention: str | None = None
    channel_modes: tuple[tuple[str, str], ...] = ()
    description: str | None = None
    tags: tuple[str, ...] = ()
    meta: tuple[tuple[str, str], ...] = ()
    first_seen: float = 0.0
    offline_since: float | None = None
    offline_reason: str | None = None  # kv-delete | kv-purge | offline-record | stale | rebind
    incarnations: int = 1

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"


class FeedEntry(msgspec.Struct, frozen=True, gc=False):
    """One feed row. ``index`` is its absolute position in the feed ring.

    A frozen Struct the garbage collector never tracks (``gc=False``): the ring holds ~10k
    long-lived rows, and tracked rows made every full collection walk them all. Safe because a
    row holds only strings, numbers and tuples of untracked wire parts: it can't be in a cycle.

    ``kind`` is the authenticated delivery kind (from the subject) or ``lifecycle``.
    ``ts`` is the sender's stamp (earliest of a burst), ``received`` the observer's receipt
    time. ``count`` > 1 for a coalesced unicast burst (one row, several recipients).
    ``event`` marks rows on an agent event channel (``events.<owner>.<actor>``).
    For lifecycle rows ``lifecycle`` names the event and ``from_*`` is the peer concerned.
    Strings are raw wire text: sanitize before printing them to a terminal.
    """

    index: int
    id: str
    ts: float
    received: float
    kind: FeedKind
    from_id: str
    from_name: str
    from_role: str | None
    text: str
    channel: str | None = None
    to_ids: tuple[str, ...] = ()
    to_names: tuple[str, ...] = ()
    to_service: str | None = None
    parts: tuple[Any, ...] = ()
    count: int = 1
    historical: bool = False
    event: bool = False
    lifecycle: LifecycleKind | None = None
    ids: tuple[str, ...] = ()  # every message id folded into this row (bursts)


@dataclass(frozen=True, slots=True)
class PresenceEvent:
    """A presence transition for the line stream: join / update / offline / incarnation.

    Heartbeat-only rewrites never produce one. ``reason`` explains an offline
    (``kv-delete``, ``kv-purge``, ``offline-record``, ``stale``, ``rebind``).
    """

    event: PresenceEventKind
    peer: Peer
    received: float
    reason: str | None = None
    initial: bool = False  # part of the first roster load


@dataclass(frozen=True, slots=True)
class Rejected:
    """A wire input dropped by a reader rule; counted by reason, never carries the payload."""

    reason: str
    subject: str
    received: float


@dataclass(frozen=True, slots=True)
class StateEvent:
    """Connection or presence-view state changed."""

    connection: ConnectionState
    presence_view: str
    dm_visible: bool
    received: float
    detail: str | None = None
    lagging: bool = False  # the observer is behind and may drop (see ConnectionStatus)
    dropped: int = 0


ModelEvent = FeedEntry | PresenceEvent | Rejected | StateEvent


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """One channel tab. ``retained`` is the broker's stored count (None = unknown);
    ``arrivals`` counts live arrivals since start and only grows (unread badges)."""

    name: str
    retained: int | None
    arrivals: int
    registered: bool
    replay: bool  # effective: channel ?? defaults ?? True
    delivery_class: str  # effective: channel ?? defaults ?? "durable"
    replay_window: str | None  # effective: channel ?? defaults ?? None (= all retained)
    description: str | None = None
    instructions: str | None = None
    last_ts: float | None = None


@dataclass(frozen=True, slots=True)
class NeedsYou:
    """A waiting agent. Ages are None when the wire does not say (never guessed)."""

    id: str
    name: str
    role: str | None
    condition_code: str | None
    condition_message: str | None
    condition_age_ms: float | None  # now - condition.since
    status_age_ms: float | None  # now - statusSince
    heartbeat_age_ms: float  # now - ts
    activity: str | None


@dataclass(frozen=True, slots=True)
class Signals:
    counts: tuple[tuple[Status, int], ...]  # over agents only, in STATUSES order
    needs_you: tuple[NeedsYou, ...]  # ordered by name, then id
    stalest_live_ts: float | None  # min ts over non-offline agents
    stalest_live_id: str | None

    def count(self, status: Status) -> int:
        return dict(self.counts).get(status, 0)


@dataclass(frozen=True, slots=True)
class Rates:
    msgs_per_sec: float  # tap arrivals in the last second
    buckets: tuple[int, ...]  # 15 x 4 s arrival counts, oldest first (last 60 s)
    total: int  # live tap arrivals since start


@dataclass(frozen=True, slots=True)
class DmMessage:
    id: str
    ts: float
    from_id: str
    to_id: str
    text: str
    historical: bool


@dataclass(frozen=True, slots=True)
class DmConversation:
    """One conversation pair (ids sorted), only for pairs that actually talked."""

    a_id: str
    b_id: str
    a_name: str
    b_name: str
    count: int
    last_ts: float
    last_text: str


@dataclass(frozen=True, slots=True)
class Edge:
    """Topology fold input: sender -> target traffic. ``target`` is ``#channel``,
    a peer id (dm) or ``@role`` (anycast)."""

    from_id: str
    target: str
    kind: FeedKind
    count: int
    last_ts: float


class Hop(msgspec.Struct, frozen=True, gc=False):
    """One recent delivery for a swimlane: (ts, from, to, kind). Untracked by the collector
    like :class:`FeedEntry`: one is made per delivery and holds only strings and a float."""

    ts: float
    from_id: str
    to: str
    kind: FeedKind


@dataclass(frozen=True, slots=True)
class Topology:
    edges: tuple[Edge, ...]  # sorted by count desc
    recent: tuple[Hop, ...]  # oldest first, bounded


@dataclass(frozen=True, slots=True)
class MemberView:
    id: str
    live: tuple[str, ...]  # subscription patterns, wildcards kept
    durable: tuple[str, ...]
    observed_at: float | None


@dataclass(frozen=True, slots=True)
class Membership:
    """The four-state pill: ``unreadable`` wins; ``traffic-only`` when there is no daemon."""

    pill: MembershipPill
    reason: str | None
    feed_observed_at: float | None
    members: tuple[MemberView, ...]


@dataclass(frozen=True, slots=True)
class ManagerLease:
    instance_id: str
    holder: str | None
    runtime: str | None
    pid: int | None
    since: float | None
    up: bool
    changed_at: float


@dataclass(frozen=True, slots=True)
class ConnectionStatus:
    """Connection status bar data. ``server`` never contains credentials."""

    connection: ConnectionState
    space: str
    server: str
    dm_visible: bool
    presence_view: str  # "live" | "stale"
    tap: tuple[str, ...]
    error: str | None = None
    warning: str | None = None
    lagging: bool = False  # the observer's backlog is past its high-water mark
    dropped: int = 0  # tap messages dropped unapplied because the backlog was full (total)



class FeedRows(Sequence):
    """An immutable window ``[base, end)`` over the model's append-only feed buffer.

    Taking one is O(1): the model only ever appends past ``end`` to the list it shares, and
    when it compacts it starts a new list instead of shrinking the shared one. So rows a
    snapshot handed out never change and never move. ``rows[k]`` is the row at absolute index
    ``base + k``; slices return tuples."""

    __slots__ = ("_buf", "_off", "_base", "_end")

    def __init__(self, buf: list[FeedEntry], off: int, base: int, end: int) -> None:
        self._buf, self._off, self._base, self._end = buf, off, base, end

    def __len__(self) -> int:
        return self._end - self._base

    def __getitem__(self, k: Any) -> Any:
        n = self._end - self._base
        if isinstance(k, slice):
            start = self._base - self._off
            return tuple(self._buf[start + j] for j in range(*k.indices(n)))
        if k < 0:
            k += n
        if k < 0 or k >= n:
            raise IndexError(k)
        return self._buf[self._base - self._off + k]

    def __iter__(self) -> Iterator[FeedEntry]:
        return islice(self._buf, self._base - self._off, self._end - self._off)

    def __reversed__(self) -> Iterator[FeedEntry]:
        lo = self._base - self._off
        return (self._buf[j] for j in range(self._end - self._off - 1, lo - 1, -1))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (FeedRows, tuple, list)):
            return len(self) == len(other) and all(a is b or a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FeedRows(base={self._base}, end={self._end})"

    def at(self, i: int) -> FeedEntry:
        """The row at absolute index ``i`` (IndexError when outside ``[base, end)``)."""
        if i < self._base or i >= self._end:
            raise IndexError(i)
        return self._buf[i - self._off]

    def since(self, i: int) -> Iterator[FeedEntry]:
        """Rows from absolute index ``max(i, base)`` to the end, oldest first."""
        return islice(self._buf, max(i, self._base) - self._off, self._end - self._off)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Immutable view of the model at ``now``. Feed rows by absolute index."""

    version: int
    now: float
    status: ConnectionStatus
    agents: tuple[Peer, ...]  # kind == agent, by status then name
    endpoints: tuple[Peer, ...]  # everything else, same order
    channels: tuple[ChannelInfo, ...]  # by name, event channels excluded
    feed: FeedRows  # oldest first; feed[k].index == feed_base + k (immutable view)
    feed_base: int
    signals: Signals
    rates: Rates
    dms: tuple[DmConversation, ...]  # newest first
    dm_log: tuple[DmMessage, ...]  # oldest first, bounded (DM_LOG_CAP)
    topology: Topology
    rejections: tuple[tuple[str, int], ...]  # reason -> count, by reason
    membership: Membership
    managers: tuple[ManagerLease, ...]
    names: Mapping[str, str] = field(repr=False, default_factory=dict)  # id -> name (read-only)

    @property
    def feed_len(self) -> int:
        return len(self.feed)

    @property
    def feed_end(self) -> int:
        return self.feed_base + len(self.feed)

    def entry(self, i: int) -> FeedEntry:
        """Feed row at absolute index ``i`` (IndexError when evicted or not yet there)."""
        return self.feed.at(i)

    def name_of(self, pid: str) -> str:
        return self.names.get(pid) or pid[:8]

    def dm_thread(self, a: str, b: str) -> tuple[DmMessage, ...]:
        """Messages between two peers (either direction), oldest first."""
        pair = {a, b}
        return tuple(m for m in self.dm_log if {m.from_id, m.to_id} == pair)

    @property
    def peers(self) -> tuple[Peer, ...]:
        return self.agents + self.endpoints


# --------------------------------------------------------------------------- internal state


@dataclass(slots=True)
class _Burst:
    first_id: str
    ts: float
    received: float
    from_id: str
    from_name: str
    from_role: str | None
    text: str
    parts: tuple[Any, ...]
    historical: bool
    to_ids: list[str]
    ids: list[str]
    opened: float  # clock time the window opened


@dataclass(slots=True)
class _Conv:
    count: int
    last_ts: float
    last_text: str


def _role_of(p: Peer | None) -> str | None:
    return p.role if p else None


class MeshModel:
    """The MeshView state machine. Single-threaded: call from one event loop.

    ``feed_cap`` bounds the feed ring (and the dedupe set with it); ``ttl_ms`` is the
    presence liveness window; ``record_events`` keeps a queue for :meth:`take_events`
    (the line stream); the console leaves it off.
    """

    def __init__(
        self,
        space: str = "main",
        *,
        clock: Clock | None = None,
        feed_cap: int = FEED_CAP,
        ttl_ms: float = PRESENCE_TTL_MS,
        burst_ms: float = BURST_MS,
        record_events: bool = False,
        dm_log_cap: int = DM_LOG_CAP,
        server: str = "",
    ) -> None:
        self.space = space
        self.clock: Clock = clock or (lambda: time.time() * 1000.0)
        self.feed_cap = max(1, int(feed_cap))
        self.ttl_ms = float(ttl_ms)
        self.burst_ms = float(burst_ms)
        self.record_events = record_events

        self.version = 0
        self.dirty = True
        self._snap: Snapshot | None = None

        # feed ring addressed by absolute index: an append-only list shared with snapshots
        # (``_buf[0]`` is absolute index ``_buf_off``); rows before ``_feed_base`` are evicted
        # and dropped from memory when the list is compacted (a new list, never in place)
        self._buf: list[FeedEntry] = []
        self._buf_off = 0
        self._feed_base = 0
        self._compact_at = max(1024, self.feed_cap // 4)
        self._text_bytes = 0  # characters of text kept by the live rows
        self._seen: dict[str, int] = {}  # message id -> absolute index of its row
        self._bursts: dict[tuple[str, str], _Burst] = {}

        # roster
        self._peers: dict[str, Peer] = {}
        self._roster_changed = True
        self._agents: tuple[Peer, ...] = ()
        self._endpoints: tuple[Peer, ...] = ()
        self._names: dict[str, str] = {}
        self._watch_last: float | None = None  # receipt time of the last watch delivery
        self._initial_load = True

        # channels
        self._registry: dict[str, ChannelSettings] = {}
        self._defaults = ChannelSettings()
        self._retained: dict[str, int] = {}
        self._arrivals: dict[str, int] = {}
        self._chan_last: dict[str, float] = {}

        # DMs
        self._dm_log: deque[DmMessage] = deque(maxlen=dm_log_cap)
        self._convs: dict[tuple[str, str], _Conv] = {}
        self._dm_seen: set[str] = set()

        # rates
        self._buckets: deque[int] = deque([0] * RATE_BUCKETS, maxlen=RATE_BUCKETS)
        self._bucket_start: float | None = None
        self._recent: deque[float] = deque()  # arrival times within the last second
        self._total = 0

        # topology
        self._edges: OrderedDict[tuple[str, str, str], list] = OrderedDict()
        self._hops: deque[Hop] = deque(maxlen=TOPO_RECENT_CAP)

        # rejections
        self._rejections: dict[str, int] = {}

        # membership / managers
        self._membership_members: dict[str, MemberView] = {}
        self._membership_feed_at: float | None = None
        self._membership_read = False  # a read has completed
        self._membership_unreadable: str | None = None
        self._managers: dict[str, ManagerLease] = {}

        # connection
        self._status = ConnectionStatus(
            connection="connecting", space=space, server=server, dm_visible=False,
            presence_view="live", tap=(),
        )

        self._events: deque[ModelEvent] = deque(maxlen=EVENT_QUEUE_CAP)
        self.events_dropped = 0

    # ------------------------------------------------------------------ plumbing

    def _touch(self) -> None:
        self.version += 1
        self.dirty = True
        self._snap = None

    def _emit(self, ev: ModelEvent) -> None:
        if self.record_events:
            if len(self._events) == self._events.maxlen:
                self.events_dropped += 1
            self._events.append(ev)

    def take_events(self) -> list[ModelEvent]:
        """Events since the last call, in order (only when ``record_events``)."""
        out = list(self._events)
        self._events.clear()
        return out

    # ------------------------------------------------------------------ feed ring

    @property
    def feed_base(self) -> int:
        return self._feed_base

    @property
    def feed_len(self) -> int:
        return self._buf_off + len(self._buf) - self._feed_base

    @property
    def feed_end(self) -> int:
        return self._buf_off + len(self._buf)

    def entry(self, i: int) -> FeedEntry:
        if i < self._feed_base or i >= self._buf_off + len(self._buf):
            raise IndexError(i)
        return self._buf[i - self._buf_off]

    def _append(self, **kw: Any) -> FeedEntry:
        buf = self._buf
        e = FeedEntry(index=self._buf_off + len(buf), **kw)
        self._emit(e)  # the line stream gets the row as it came (exact text)
        if len(e.text) > KEPT_TEXT:
            more = len(e.text) - KEPT_TEXT
            e = msgspec.structs.replace(
                e, text=e.text[:KEPT_TEXT] + f"\n… [{more} more characters not kept]", parts=())
        buf.append(e)
        self._text_bytes += len(e.text)
        seen = self._seen
        for mid in e.ids:
            if mid:
                seen[mid] = e.index
        end = e.index + 1
        while end - self._feed_base > self.feed_cap or (
                self._text_bytes > FEED_TEXT_BUDGET and end - self._feed_base > 1):
            old = buf[self._feed_base - self._buf_off]
            self._feed_base += 1
            self._text_bytes -= len(old.text)
            for mid in old.ids:
                if seen.get(mid) == old.index:
                    del seen[mid]
        if self._feed_base - self._buf_off >= self._compact_at:
            # a fresh list: snapshots keep the old one, which nobody appends to again
            self._buf = buf[self._feed_base - self._buf_off:]
            self._buf_off = self._feed_base
        self._touch()
        return e

    def seen(self, message_id: str) -> bool:
        """True if a non-empty id is already in the feed (or in an open burst)."""
        return bool(message_id) and message_id in self._seen

    def name_of(self, pid: str) -> str:
        return self._names.get(pid) or pid[:8]

    # ------------------------------------------------------------------ messages

    def apply_message(
        self,
        *,
        kind: Literal["channel", "dm", "anycast"],
        id: str,
        ts: float,
        from_id: str,
        from_name: str,
        from_role: str | None = None,
        text: str = "",
        parts: Sequence[Any] = (),
        channel: str | None = None,
        to: str | None = None,
        to_service: str | None = None,
        historical: bool = False,
        event: bool = False,
        received: float | None = None,
    ) -> bool:
        """Apply one validated delivery. Returns False for a duplicate id (dropped).

        Channel rows land at once; unicast rows open/extend a ``burst_ms`` window keyed by
        sender + text and land as one row when :meth:`tick` flushes it. History rows
        (``historical=True``) should be applied oldest-first before live rows
        (:meth:`apply_history` sorts and does that).
        """
        now = self.clock() if received is None else received
        if id and id in self._seen:
            return False
        if from_name:
            self._names[from_id] = from_name
        if not historical:
            self._count_arrival(now)
        parts_t = tuple(parts)
        if kind == "dm":
            to_id = to or ""
            self._log_dm(id, ts, from_id, to_id, text, historical)
            self._hop(ts, from_id, to_id, "dm", historical)
            key = (from_id, text)
            b = self._bursts.get(key)
            if b is not None and now - b.opened <= self.burst_ms and b.historical == historical:
                if to_id not in b.to_ids:
                    b.to_ids.append(to_id)
                b.ids.append(id)
                b.ts = min(b.ts, ts)
                if id:
                    self._seen[id] = -1
                return True
            if b is not None:
                self._flush_burst(key)
            self._bursts[key] = _Burst(
                first_id=id, ts=ts, received=now, from_id=from_id, from_name=from_name,
                from_role=from_role, text=text, parts=parts_t, historical=historical,
                to_ids=[to_id], ids=[id], opened=now,
            )
            if id:
                self._seen[id] = -1  # pending burst
            if historical or self.burst_ms <= 0:
                self._flush_burst(key)  # history is settled / coalescing off: no window
            return True
        if kind == "channel" and channel is not None:
            if not event:
                if not historical:
                    self._arrivals[channel] = self._arrivals.get(channel, 0) + 1
                    if channel not in self._retained and channel not in self._registry:
                        self._retained[channel] = 1
                    self._roster_changed = True  # channel list changes
                last = self._chan_last.get(channel)
                if last is None or ts > last:
                    self._chan_last[channel] = ts
            self._hop(ts, from_id, "#" + channel, "channel", historical)
        elif kind == "anycast":
            self._hop(ts, from_id, "@" + (to_service or ""), "anycast", historical)
        self._append(
            id=id, ts=ts, received=now, kind=kind, from_id=from_id, from_name=from_name,
            from_role=from_role, text=text, channel=channel, to_service=to_service,
            parts=parts_t, historical=historical, event=event, ids=(id,),
        )
        return True

    def apply_history(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Apply a prefill batch: rows are ``apply_message`` kwargs; sorted by ts, marked
        historical, deduped. Returns the number of rows that landed."""
        n = 0
        for r in sorted(rows, key=lambda r: r["ts"]):
            if self.apply_message(**{**r, "historical": True}):
                n += 1
        return n

    def _flush_burst(self, key: tuple[str, str]) -> None:
        b = self._bursts.pop(key)
        to_names = tuple(self.name_of(t) for t in b.to_ids)
        self._append(
            id=b.first_id, ts=b.ts, received=b.received, kind="dm", from_id=b.from_id,
            from_name=b.from_name, from_role=b.from_role, text=b.text,
            to_ids=tuple(b.to_ids), to_names=to_names, parts=b.parts, count=len(b.to_ids),
            historical=b.historical, ids=tuple(b.ids),
        )

    def flush_bursts(self) -> None:
        """Land every open unicast burst now (shutdown, tests)."""
        for key in list(self._bursts):
            self._flush_burst(key)

    def _log_dm(self, mid: str, ts: float, f: str, t: str, text: str, hist: bool) -> None:
        if mid:
            if mid in self._dm_seen:
                return
            if len(self._dm_seen) > 4 * (self._dm_log.maxlen or DM_LOG_CAP):
                self._dm_seen = {m.id for m in self._dm_log}
            self._dm_seen.add(mid)
        if len(text) > KEPT_TEXT:
            text = text[:KEPT_TEXT] + f"\n… [{len(text) - KEPT_TEXT} more characters not kept]"
        self._dm_log.append(DmMessage(mid, ts, f, t, text, hist))
        if f == t:
            return  # self-DMs are skipped in the roll-up
        pair = (f, t) if f < t else (t, f)
        c = self._convs.get(pair)
        if c is None:
            self._convs[pair] = _Conv(1, ts, text)
        else:
            c.count += 1
            if ts >= c.last_ts:
                c.last_ts, c.last_text = ts, text
        if len(self._convs) > 4096:  # bound: drop the stalest conversation
            stalest = min(self._convs, key=lambda k: self._convs[k].last_ts)
            del self._convs[stalest]

    def _hop(self, ts: float, f: str, to: str, kind: FeedKind, historical: bool) -> None:
        key = (f, to, kind)
        e = self._edges.get(key)
        if e is None:
            self._edges[key] = [1, ts]
            if len(self._edges) > TOPO_EDGE_CAP:
                self._edges.popitem(last=False)
        else:
            e[0] += 1
            if ts > e[1]:
                e[1] = ts
            self._edges.move_to_end(key)
        if not historical:
            self._hops.append(Hop(ts, f, to, kind))

    # ------------------------------------------------------------------ rates

    def _roll(self, now: float) -> None:
        if self._bucket_start is None:
            self._bucket_start = now
            return
        steps = int((now - self._bucket_start) // RATE_BUCKET_MS)
        if steps > 0:
            for _ in range(min(steps, RATE_BUCKETS)):
                self._buckets.append(0)
            self._bucket_start += steps * RATE_BUCKET_MS
        cut = now - 1000.0
        r = self._recent
        while r and r[0] <= cut:
            r.popleft()

    def _count_arrival(self, now: float) -> None:
        self._roll(now)
        self._buckets[-1] += 1
        self._total += 1
        if len(self._recent) < 100_000:
            self._recent.append(now)

    def count_tap(self, n: int = 1) -> None:
        """Count tapped frames that are not feed rows (they still move the rate)."""
        now = self.clock()
        for _ in range(n):
            self._count_arrival(now)

    # ------------------------------------------------------------------ rejections

    def apply_rejection(self, reason: str, subject: str) -> None:
        self._rejections[reason] = self._rejections.get(reason, 0) + 1
        self._emit(Rejected(reason, subject, self.clock()))
        self._touch()

    def rejection_count(self, reason: str | None = None) -> int:
        if reason is None:
            return sum(self._rejections.values())
        return self._rejections.get(reason, 0)

    # ------------------------------------------------------------------ presence

    def peer(self, pid: str) -> Peer | None:
        return self._peers.get(pid)

    def watch_delivered(self, received: float | None = None) -> None:
        """The presence watch delivered something (any key, incl. ignored ones)."""
        now = self.clock() if received is None else received
        self._watch_last = now
        if self._status.presence_view != "live":
            self._status = replace(self._status, presence_view="live")
            self._emit_state()
            self._touch()

    def apply_presence(self, rec: PresenceRecord, *, received: float | None = None) -> None:
        """Apply a validated presence PUT (key == card.id already checked by the caller).

        Rules (wire.md §4): ``status: offline`` -> offline; ``ts`` older than ttl on arrival
        -> unknown peer recorded quietly offline, known peer kept as is (the sweep decides);
        changed ``lifecycleUid`` -> new-incarnation event; heartbeat-only rewrites update ts
        but emit nothing.
        """
        now = self.clock() if received is None else received
        self.watch_delivered(now)
        self._names[rec.id] = rec.name
        prev = self._peers.get(rec.id)
        stale = now - rec.ts > self.ttl_ms
        if rec.status == "offline":
            self._mark_offline(rec.id, "offline-record", now, rec=rec)
            return
        if stale:
            if prev is None:
                self._set_peer(self._make_peer(rec, now, None, "offline", "stale"))
                return
            return  # known: keep last-known, the sweep decides (with the deaf guard)
        if prev is not None and rec.ts < prev.ts and prev.status != "offline":
            return  # an older record than the one we hold (rebind replay)
        status: Status = rec.status if rec.status in STATUS_ORDER else "idle"  # type: ignore
        new = self._make_peer(rec, now, prev, status, None)
        if prev is None or prev.status == "offline":
            incarnation = (
                prev is not None and rec.lifecycle_uid is not None
                and prev.lifecycle_uid is not None and rec.lifecycle_uid != prev.lifecycle_uid
            )
            if incarnation:
                new = replace(new, incarnations=prev.incarnations + 1)
            self._set_peer(new)
            if incarnation:  # back from offline as a new instance: one event, not two
                self._presence_event("incarnation", new, now)
                self._lifecycle("incarnation", new, now, "new incarnation")
            else:
                self._presence_event("join", new, now)
                self._lifecycle("join", new, now, "joined")
            return
        if rec.lifecycle_uid and prev.lifecycle_uid and rec.lifecycle_uid != prev.lifecycle_uid:
            new = replace(new, incarnations=prev.incarnations + 1)
            self._set_peer(new)
            self._presence_event("incarnation", new, now)
            self._lifecycle("incarnation", new, now, "new incarnation")
            return
        if _heartbeat_only(prev, new):
            # ts/ages move; no event. Keep the roster order cache (status unchanged).
            self._peers[rec.id] = new
            self._touch()
            return
        self._set_peer(new)
        self._presence_event("update", new, now)

    def apply_presence_delete(
        self, pid: str, *, purge: bool = False, received: float | None = None
    ) -> None:
        """KV DEL/PURGE on a presence key -> that peer offline (kept in the roster)."""
        now = self.clock() if received is None else received
        self.watch_delivered(now)
        self._mark_offline(pid, "kv-purge" if purge else "kv-delete", now)

    def presence_resync(self, present: Iterable[str], *, received: float | None = None) -> None:
        """A rebound watch finished its initial state: peers absent from it are gone
        (an empty bucket means nobody present)."""
        now = self.clock() if received is None else received
        keep = set(present)
        for pid, p in list(self._peers.items()):
            if pid not in keep and p.status != "offline":
                self._mark_offline(pid, "stale", now)

    def grace(self, now: float | None = None) -> None:
        """After a reconnect: every live peer gets one ttl to heartbeat again before the
        sweep may call it stale (its silence was ours, not its)."""
        now = self.clock() if now is None else now
        for pid, p in self._peers.items():
            if p.status != "offline" and p.seen_at < now:
                self._peers[pid] = replace(p, seen_at=now)

    def end_initial_load(self) -> None:
        """The first watch snapshot is complete: later joins are live events."""
        self._initial_load = False

    def _make_peer(
        self, rec: PresenceRecord, now: float, prev: Peer | None, status: Status,
        reason: str | None,
    ) -> Peer:
        seen_at = now
        if prev is not None and rec.ts == prev.ts:
            seen_at = prev.seen_at  # a replayed record does not refresh liveness
        return Peer(
            id=rec.id, name=rec.name, kind=rec.kind or "agent", status=status,
            reported_status=rec.status, ts=rec.ts, seen_at=seen_at, role=rec.role,
            lifecycle_uid=rec.lifecycle_uid, activity=rec.activity,
            activity_since=rec.activity_since, status_since=rec.status_since,
            active_at=rec.active_at, condition=rec.condition,
            attention=None if status == "offline" else rec.attention,
            channel_modes=() if status == "offline" else rec.channel_modes,
            description=rec.description, tags=rec.tags, meta=rec.meta,
            first_seen=prev.first_seen if prev else now,
            offline_since=now if status == "offline" else None,
            offline_reason=reason if status == "offline" else None,
            incarnations=prev.incarnations if prev else 1,
        )

    def _set_peer(self, p: Peer) -> None:
        self._peers[p.id] = p
        self._roster_changed = True
        self._touch()

    def _mark_offline(
        self, pid: str, reason: str, now: float, rec: PresenceRecord | None = None
    ) -> None:
        prev = self._peers.get(pid)
        if rec is not None:
            p = self._make_peer(rec, now, prev, "offline", reason)
        elif prev is not None:
            p = replace(
                prev, status="offline", offline_since=now, offline_reason=reason,
                attention=None, channel_modes=(),
            )
        else:
            return  # a delete for a key we never saw: nothing to show
        if prev is not None and prev.status == "offline":
            if rec is not None:
                self._peers[pid] = replace(p, offline_since=prev.offline_since,
                                           offline_reason=prev.offline_reason)
            return
        if prev is None:
            self._set_peer(p)  # first sighting already offline: quiet
            return
        self._set_peer(p)
        self._presence_event("offline", p, now, reason)
        if reason in ("stale", "rebind"):
            self._lifecycle("crash", p, now, "heartbeat lapsed (crash detected)")
        else:
            self._lifecycle("offline", p, now, "went offline")

    def _presence_event(
        self, kind: PresenceEventKind, p: Peer, now: float, reason: str | None = None
    ) -> None:
        self._emit(PresenceEvent(kind, p, now, reason, self._initial_load))

    def _lifecycle(self, kind: LifecycleKind, p: Peer, now: float, text: str) -> None:
        self._append(
            id="", ts=now, received=now, kind="lifecycle", from_id=p.id, from_name=p.name,
            from_role=p.role, text=text, lifecycle=kind, historical=self._initial_load,
        )

    def sweep(self, now: float | None = None) -> bool:
        """Rules 4–5: stale peers go offline (deaf-observer guard); a watch silent for a
        whole ttl marks the view stale. Returns True when the caller should rebind the
        presence watch (view just went stale)."""
        now = self.clock() if now is None else now
        wl = self._watch_last
        for pid, p in list(self._peers.items()):
            if p.status == "offline":
                continue
            if now - p.ts > self.ttl_ms and wl is not None and wl - p.seen_at >= self.ttl_ms:
                self._mark_offline(pid, "stale", now)
        if wl is not None and now - wl > self.ttl_ms and self._status.presence_view != "stale":
            self._status = replace(self._status, presence_view="stale")
            self._emit_state()
            self._touch()
            return True
        return False

    @property
    def presence_view(self) -> str:
        return self._status.presence_view

    # ------------------------------------------------------------------ channels

    def set_channel_registry(
        self, configs: Mapping[str, ChannelSettings], defaults: ChannelSettings | None = None
    ) -> None:
        """Replace the registry view (keys minus ``=defaults``, already filtered)."""
        self._registry = dict(configs)
        if defaults is not None:
            self._defaults = defaults
        self._roster_changed = True
        self._touch()

    def set_retained_counts(self, counts: Mapping[str, int]) -> None:
        """Per-channel stored counts from ``STREAM.INFO`` (event channels already removed).
        Rebuilt on every poll, so deleted channels disappear."""
        self._retained = dict(counts)
        for ch in list(self._arrivals):
            if ch not in counts and ch not in self._registry:
                pass  # live-only channel keeps its tab until a poll drops its arrivals
        self._roster_changed = True
        self._touch()

    def effective(self, channel: str) -> ChannelSettings:
        c = self._registry.get(channel) or ChannelSettings()
        d = self._defaults
        return ChannelSettings(
            replay=c.replay if c.replay is not None else (d.replay if d.replay is not None else True),
            replay_window=c.replay_window or d.replay_window,
            delivery_class=c.delivery_class or d.delivery_class or "durable",
            description=c.description,
            instructions=c.instructions,
        )

    def _channels(self) -> tuple[ChannelInfo, ...]:
        names = set(self._retained) | set(self._registry) | set(self._arrivals)
        out = []
        for ch in sorted(names):
            eff = self.effective(ch)
            out.append(ChannelInfo(
                name=ch, retained=self._retained.get(ch), arrivals=self._arrivals.get(ch, 0),
                registered=ch in self._registry, replay=bool(eff.replay),
                delivery_class=eff.delivery_class or "durable", replay_window=eff.replay_window,
                description=eff.description, instructions=eff.instructions,
                last_ts=self._chan_last.get(ch),
            ))
        return tuple(out)

    # ------------------------------------------------------------------ membership, managers

    def set_membership(
        self, members: Mapping[str, MemberView] | None, feed_observed_at: float | None
    ) -> None:
        """A successful membership read (None members = bucket missing: no daemon)."""
        self._membership_members = dict(members or {})
        self._membership_feed_at = feed_observed_at
        self._membership_read = True
        self._membership_unreadable = None
        self._touch()

    def set_membership_unreadable(self, reason: str) -> None:
        """A failed read keeps the last snapshot; never touches the connection error."""
        self._membership_unreadable = reason
        self._touch()

    def _membership(self, now: float) -> Membership:
        members = tuple(self._membership_members[k] for k in sorted(self._membership_members))
        if self._membership_unreadable:
            pill: MembershipPill = "unreadable"
        elif not self._membership_read or self._membership_feed_at is None:
            pill = "traffic-only"
        elif now - self._membership_feed_at > MEMBERSHIP_STALE_MS:
            pill = "stale"
        else:
            pill = "live"
        return Membership(pill, self._membership_unreadable, self._membership_feed_at, members)

    def apply_manager(
        self, instance_id: str, *, up: bool, holder: str | None = None,
        runtime: str | None = None, pid: int | None = None, since: float | None = None,
    ) -> None:
        """A manager lease appeared/renewed (up) or was deleted/expired (down)."""
        now = self.clock()
        prev = self._managers.get(instance_id)
        if prev is not None and prev.up == up:
            if up:
                self._managers[instance_id] = replace(
                    prev, holder=holder, runtime=runtime, pid=pid, since=since)
            return
        if prev is None and not up:
            return
        lease = ManagerLease(instance_id, holder or (prev.holder if prev else None),
                             runtime or (prev.runtime if prev else None),
                             pid if pid is not None else (prev.pid if prev else None),
                             since if since is not None else (prev.since if prev else None),
                             up, now)
        self._managers[instance_id] = lease
        holder_id = lease.holder or instance_id
        self._append(
            id="", ts=now, received=now, kind="lifecycle", from_id=holder_id,
            from_name=self._names.get(holder_id, f"manager {instance_id[:8]}"),
            from_role="manager",
            text=f"manager {instance_id[:12]} {'up' if up else 'down'}"
            + (f" ({lease.runtime})" if lease.runtime else ""),
            lifecycle="manager-up" if up else "manager-down",
            historical=self._initial_load and up,
        )

    def manager_resync(self, present: Iterable[str]) -> None:
        keep = set(present)
        for iid, m in list(self._managers.items()):
            if m.up and iid not in keep:
                self.apply_manager(iid, up=False)

    # ------------------------------------------------------------------ connection

    def set_connection(
        self, state: ConnectionState, *, detail: str | None = None,
        error: str | None = None, warning: str | None = None,
    ) -> None:
        if state == self._status.connection and error is None and warning is None:
            return
        self._status = replace(
            self._status, connection=state,
            error=error if error is not None else (None if state == "connected" else self._status.error),
            warning=warning if warning is not None else self._status.warning,
        )
        self._emit_state(detail)
        self._touch()

    def set_tap(self, subjects: Sequence[str], dm_visible: bool) -> None:
        self._status = replace(self._status, tap=tuple(subjects), dm_visible=dm_visible)
        self._emit_state("tap")
        self._touch()

    def set_backlog(self, *, lagging: bool, dropped: int = 0) -> None:
        """The observer's ingest state: ``lagging`` while its backlog is past the high-water
        mark, ``dropped`` more tap messages thrown away unapplied because it was full. Both
        land in :attr:`ConnectionStatus` (and a ``StateEvent`` for the line stream)."""
        st = self._status
        if lagging == st.lagging and dropped <= 0:
            return
        self._status = replace(st, lagging=lagging, dropped=st.dropped + max(0, dropped))
        if lagging != st.lagging:
            self._emit_state(f"lagging, {self._status.dropped} dropped" if lagging
                             else f"caught up, {self._status.dropped} dropped")
        self._touch()

    def set_server(self, server: str) -> None:
        self._status = replace(self._status, server=server)
        self._touch()

    def set_warning(self, warning: str | None) -> None:
        self._status = replace(self._status, warning=warning)
        self._touch()

    @property
    def status(self) -> ConnectionStatus:
        return self._status

    def _emit_state(self, detail: str | None = None) -> None:
        s = self._status
        self._emit(StateEvent(s.connection, s.presence_view, s.dm_visible, self.clock(), detail,
                              s.lagging, s.dropped))

    # ------------------------------------------------------------------ time

    def tick(self, now: float | None = None) -> None:
        """Advance time: flush due bursts, roll rate buckets, run the presence sweep.
        The observer calls it every ~75 ms; it marks the model dirty once a second so ages
        refresh."""
        now = self.clock() if now is None else now
        for key, b in list(self._bursts.items()):
            if now - b.opened > self.burst_ms:
                self._flush_burst(key)
        before = (tuple(self._buckets), len(self._recent))
        self._roll(now)
        if (tuple(self._buckets), len(self._recent)) != before:
            self._touch()
        if self._snap is not None and now - self._snap.now >= 1000.0:
            self._touch()

    # ------------------------------------------------------------------ snapshot

    def _roster(self) -> None:
        if not self._roster_changed:
            return
        key = lambda p: (STATUS_ORDER.get(p.status, 9), p.name.lower(), p.id)  # noqa: E731
        peers = sorted(self._peers.values(), key=key)
        self._agents = tuple(p for p in peers if p.kind == "agent")
        self._endpoints = tuple(p for p in peers if p.kind != "agent")
        self._roster_changed = False

    def snapshot(self) -> Snapshot:
        """The current state as an immutable :class:`Snapshot` (cached until a change)."""
        if self._snap is not None:
            return self._snap
        now = self.clock()
        self._roll(now)
        self._roster()
        # heartbeat-only rewrites replace Peer objects without re-sorting: refresh them
        agents = tuple(self._peers[p.id] for p in self._agents)
        endpoints = tuple(self._peers[p.id] for p in self._endpoints)

        counts = {s: 0 for s in STATUSES}
        needs: list[NeedsYou] = []
        stalest: Peer | None = None
        for p in agents:
            counts[p.status] += 1
            if p.status == "offline":
                continue
            if stalest is None or p.ts < stalest.ts:
                stalest = p
            if p.status == "waiting":
                c = p.condition
                needs.append(NeedsYou(
                    id=p.id, name=p.name, role=p.role,
                    condition_code=c.code if c else None,
                    condition_message=c.message if c else None,
                    condition_age_ms=max(0.0, now - c.since) if c and c.since else None,
                    status_age_ms=max(0.0, now - p.status_since) if p.status_since else None,
                    heartbeat_age_ms=max(0.0, now - p.ts), activity=p.activity,
                ))
        needs.sort(key=lambda n: (n.name.lower(), n.id))
        signals = Signals(
            counts=tuple((s, counts[s]) for s in STATUSES), needs_you=tuple(needs),
            stalest_live_ts=stalest.ts if stalest else None,
            stalest_live_id=stalest.id if stalest else None,
        )
        rates = Rates(msgs_per_sec=float(len(self._recent)), buckets=tuple(self._buckets),
                      total=self._total)
        convs = sorted(self._convs.items(), key=lambda kv: -kv[1].last_ts)
        dms = tuple(
            DmConversation(a, b, self.name_of(a), self.name_of(b), c.count, c.last_ts, c.last_text)
            for (a, b), c in convs
        )
        edges = tuple(sorted(
            (Edge(f, t, k, v[0], v[1]) for (f, t, k), v in self._edges.items()),  # type: ignore[arg-type]
            key=lambda e: -e.count,
        ))
        snap = Snapshot(
            version=self.version, now=now, status=self._status, agents=agents,
            endpoints=endpoints, channels=self._channels(),
            feed=FeedRows(self._buf, self._buf_off, self._feed_base, self.feed_end),
            feed_base=self._feed_base, signals=signals, rates=rates, dms=dms,
            dm_log=tuple(self._dm_log), topology=Topology(edges, tuple(self._hops)),
            rejections=tuple(sorted(self._rejections.items())),
            membership=self._membership(now),
            managers=tuple(self._managers[k] for k in sorted(self._managers)),
            names=_ReadOnly(dict(self._names)),
        )
        self._snap = snap
        self.dirty = False
        return snap


class _ReadOnly(dict):
    """A dict copy that refuses mutation (snapshot name map)."""

    def _ro(self, *a: Any, **k: Any) -> None:
        raise TypeError("snapshot mappings are read-only")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _ro  # type: ignore


def _heartbeat_only(prev: Peer, new: Peer) -> bool:
    """Same status/activity/condition/attention/channelModes/lifecycleUid: not an event."""
    return (
        prev.status == new.status
        and prev.activity == new.activity
        and prev.attention == new.attention
        and prev.channel_modes == new.channel_modes
        and prev.lifecycle_uid == new.lifecycle_uid
        and (prev.condition.code if prev.condition else None)
        == (new.condition.code if new.condition else None)
        and prev.name == new.name
        and prev.role == new.role
    )
