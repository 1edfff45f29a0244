"""The model's value types: what the observer feeds in and what a snapshot hands out.

Everything here is immutable (frozen dataclasses, frozen msgspec Structs, tuples), so the UI
and the line stream can hold a :class:`Snapshot` or an event while the model moves on.
Strings are raw wire text: sanitize before printing them to a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, Mapping, Union

import msgspec

from meshview.model.feedring import FeedRows
from meshview.model.labels import EMPTY as NO_LABELS
from meshview.model.labels import Labels, Sender
from meshview.model.originals import entry_ref, pick
from meshview.wire.sanitize import elide_id
from meshview.wire import ChannelConfig, ChannelDefaults, Presence, bound_presence

if TYPE_CHECKING:
    from meshview.model.runs_state import RunEvent

Status = Literal["working", "waiting", "idle", "offline"]
FeedKind = Literal["channel", "dm", "anycast", "lifecycle"]
LifecycleKind = Literal["join", "offline", "crash", "incarnation", "manager-up", "manager-down"]
PresenceEventKind = Literal["join", "update", "offline", "incarnation"]
ConnectionState = Literal["connecting", "connected", "reconnecting", "stale", "closed"]
MembershipPill = Literal["live", "stale", "traffic-only", "unreadable"]

ID_CELLS = 24  # an unknown principal's id is shown in at most this many cells

STATUS_ORDER: dict[str, int] = {"working": 0, "waiting": 1, "idle": 2, "offline": 3}
STATUSES: tuple[Status, ...] = ("working", "waiting", "idle", "offline")


# --------------------------------------------------------------------------- inputs


class Condition(msgspec.Struct, frozen=True, gc=False):
    """``Presence.condition``: why a seat is blocked, as the harness reported it."""

    code: str
    source: str | None = None
    message: str | None = None
    since: float | None = None


class PresenceRecord(msgspec.Struct, frozen=True, gc=False):
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

    @classmethod
    def from_wire(cls, p: Presence) -> PresenceRecord:
        """The roster's copy of a wire record, every field bounded by the wire's byte bounds
        (``meshview.wire.bounds``: nobody may buy megabytes of our memory with one KV key).
        ``decode_presence`` has bounded (and counted) a decoded record already; this is a
        no-op check for one."""
        p = bound_presence(p)[0]
        card = p.card
        c = p.condition
        meta = card.meta or {}
        return cls(
            id=card.id, name=card.name, kind=card.kind, status=p.status,
            ts=float(p.ts), role=card.role, lifecycle_uid=p.lifecycleUid,
            activity=p.activity, activity_since=p.activitySince,
            status_since=p.statusSince, active_at=p.activeAt,
            condition=Condition(c.code, c.source, c.message, c.since)
            if c is not None else None,
            attention=p.attention,
            channel_modes=tuple(sorted((p.channelModes or {}).items())),
            description=card.description,
            tags=tuple(t for t in (card.tags or ()) if isinstance(t, str)),
            meta=tuple(sorted((k, v) for k, v in meta.items() if isinstance(v, str))),
            environment=p.environment,
        )


@dataclass(frozen=True, slots=True)
class ChannelSettings:
    """One channel's settings with snake-case fields: a registry entry built by hand (tests,
    replay), or the effective settings :meth:`MeshModel.effective` derives by the wire rules."""

    replay: bool | None = None
    replay_window: str | None = None
    delivery_class: str | None = None
    description: str | None = None
    instructions: str | None = None

    def config(self) -> ChannelConfig:
        """As the registry's wire record, the shape the ``meshview.wire`` rules read."""
        return ChannelConfig(self.replay, self.replay_window, self.delivery_class,
                             self.description, self.instructions)

    def defaults(self) -> ChannelDefaults:
        """As the registry's ``=defaults`` record."""
        return ChannelDefaults(self.replay, self.replay_window, self.delivery_class)


# --------------------------------------------------------------------------- outputs


class Peer(msgspec.Struct, frozen=True, gc=False):
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
    # | absent (gone before the observer started: known from retained messages or records)
    # | seat-no-presence (a managed seat ps reports running while its agent has no presence)
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
    context_id: str | None = None  # the thread a reply to this row joins (wire.reply_context)
    # the envelope's threading fields as sent (None / () when absent; bounded by the model)
    reply_to: str | None = None  # ``replyTo``: the id of the message this row answers
    wire_context_id: str | None = None  # ``contextId`` as the sender wrote it
    mentions: tuple[str, ...] = ()  # ``mentions``: lowercased peer names
    # the first line of the original's text when it was in the feed as this reply landed
    # (None: it was not, so only its id can be shown); fixed at arrival so a row's height
    # never changes under the view
    reply_excerpt: str | None = None
    # ``replyTo`` names copies by several senders and none fits this reply (meshview/model/originals.py)
    reply_ambiguous: bool = False
    # this row reuses an id another sender used first (by stream order): both rows are kept
    conflict: bool = False


class PresenceEvent(msgspec.Struct, frozen=True, gc=False):
    """A presence transition for the line stream: join / update / offline / incarnation.

    Heartbeat-only rewrites never produce one. ``reason`` explains an offline
    (``kv-delete``, ``kv-purge``, ``offline-record``, ``stale``, ``rebind``, ``absent``).
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
    listener_errors: int = 0  # see ConnectionStatus
    listener_error: str | None = None


#: what ``take_events`` hands out; a run's events too (RunEvent imports this module, hence the name)
ModelEvent = Union[FeedEntry, PresenceEvent, Rejected, StateEvent, "RunEvent"]


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """One channel tab. ``retained`` is the broker's stored count at its last poll plus the
    live arrivals since that poll (None = unknown); ``arrivals`` counts live arrivals since
    start and only grows (unread badges)."""

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


class NeedsYou(msgspec.Struct, frozen=True, gc=False):
    """A waiting agent. Ages are None when the wire does not say (never guessed). A Struct:
    every snapshot builds one per waiting agent (500 at 10k agents), ~10x cheaper than a
    frozen dataclass."""

    id: str
    name: str
    role: str | None
    condition_code: str | None
    condition_message: str | None
    condition_age_ms: float | None  # now - condition.since
    status_age_ms: float | None  # now - statusSince
    heartbeat_age_ms: float  # now - ts
    activity: str | None
    label: str = ""  # the name as shown (meshview/model/labels.py): suffixed when another peer shares it


_TS = attrgetter("ts")


@dataclass(frozen=True, slots=True)
class Signals:
    counts: tuple[tuple[Status, int], ...]  # over agents only, in STATUSES order
    needs_you: tuple[NeedsYou, ...]  # ordered by name, then id
    # the agents that are not offline, by status block in roster order: the stalest live
    # heartbeat is found in them when first asked for (at 10k agents a scan of 10k rows, on
    # every snapshot, for a status bar drawn once a second when busy)
    live: tuple[tuple[Peer, ...], ...] = ()
    _stalest: list = field(default_factory=list, repr=False, compare=False)

    def count(self, status: Status) -> int:
        return dict(self.counts).get(status, 0)

    def _stalest_live(self) -> Peer | None:
        if not self._stalest:
            self._stalest.append(min(chain.from_iterable(self.live), key=_TS, default=None))
        return self._stalest[0]

    @property
    def stalest_live_ts(self) -> float | None:
        """The oldest heartbeat (``ts``) among agents that are not offline (the first such
        agent in roster order on a tie)."""
        p = self._stalest_live()
        return p.ts if p is not None else None

    @property
    def stalest_live_id(self) -> str | None:
        p = self._stalest_live()
        return p.id if p is not None else None


@dataclass(frozen=True, slots=True)
class Rates:
    msgs_per_sec: float  # chat/DM/anycast deliveries per second, mean of the last 10 s
    buckets: tuple[int, ...]  # 15 x 4 s delivery counts, oldest first (last 60 s)
    total: int  # live deliveries since start (event channels, rails, rejections excluded)


@dataclass(frozen=True, slots=True)
class DmMessage:
    id: str
    ts: float
    from_id: str
    to_id: str
    text: str
    historical: bool
    claimed_name: str = ""  # the envelope's ``from.name`` (a claim: see Snapshot.sender)
    conflict: bool = False  # the id was used first by another sender (both are kept)


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


class Edge(msgspec.Struct, frozen=True, gc=False):
    """One hop-log edge: sender -> target traffic. ``target`` is ``#channel``,
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


_COUNT = attrgetter("count")


@dataclass(frozen=True, slots=True)
class Topology:
    # every edge, least recently used first: what ``edges`` sorts when read (a snapshot is
    # taken up to 30 times a second and at 4096 edges the sort was a fifth of its time; the
    # lens folds ``recent`` and nothing on the screen reads the sorted edges)
    lru: tuple[Edge, ...]
    recent: tuple[Hop, ...]  # oldest first, bounded

    @property
    def edges(self) -> tuple[Edge, ...]:
        """By count, most first; equal counts least recently used first."""
        return tuple(sorted(self.lru, key=_COUNT, reverse=True))


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
    listener_errors: int = 0  # times an observer listener (stream, notifier, chat) raised
    listener_error: str | None = None  # the last of them, one line


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
    # ``peers``' ids in order: the same tuple object from one snapshot to the next until the
    # roster re-sorts, so a view can tell "same rows, some records refreshed" at a glance
    order: tuple[str, ...] = field(repr=False, default=())
    # principal -> display label from the roster, disambiguated (meshview/model/labels.py); the same
    # object from one snapshot to the next until a roster name or role changes
    labels: Labels = field(repr=False, default=NO_LABELS)
    # wire fields cut to their byte bounds (meshview/wire/bounds.py), field -> count, by field
    cuts: tuple[tuple[str, int], ...] = ()

    @property
    def feed_len(self) -> int:
        return len(self.feed)

    @property
    def feed_end(self) -> int:
        return self.feed_base + len(self.feed)

    def entry(self, i: int) -> FeedEntry:
        """Feed row at absolute index ``i`` (IndexError when evicted or not yet there)."""
        return self.feed.at(i)

    def original_of(self, e: FeedEntry) -> FeedEntry | None:
        """The row reply ``e`` answers (``replyTo``), when it is still in this feed window: the
        first copy before ``e`` whose kind, sender and conversation fit (None as well when the
        id names copies by several senders and none fits: :meth:`original_ambiguous`)."""
        return self._original(e)[0]

    def original_ambiguous(self, e: FeedEntry) -> bool:
        """True when reply ``e``'s ``replyTo`` names rows of several senders, none fitting."""
        return self._original(e)[1]

    def _original(self, e: FeedEntry) -> tuple[FeedEntry | None, bool]:
        target = e.reply_to
        if not target:
            return None, False
        copies = [(entry_ref(r), r) for r in self.feed if r.index < e.index and target in r.ids]
        return pick(entry_ref(e), copies)

    def row_of(self, m: DmMessage) -> FeedEntry | None:
        """The feed row holding DM ``m``: its sender's DM with that id (another sender may
        have reused the id), newest first; None when it left the feed."""
        if not m.id:
            return None
        return next((e for e in reversed(self.feed)
                     if e.kind == "dm" and e.from_id == m.from_id and m.id in e.ids), None)

    def name_of(self, pid: str) -> str:
        """A peer's label (its roster name, disambiguated when shared), else its id elided in
        the middle (never cut mid-token)."""
        return self.labels.label(pid) or self.names.get(pid) or elide_id(pid, ID_CELLS)

    def sender(self, e: FeedEntry) -> Sender:
        """Who row ``e`` is shown as from: the roster's label and role for its authenticated
        sender, and the envelope's differing name as a claim (meshview/model/labels.py)."""
        if e.kind == "lifecycle" and self.labels.label(e.from_id) is None:
            return Sender(e.from_name, e.from_role, None, False)  # ours (a manager's lease)
        return self.labels.sender(e.from_id, e.from_name, e.from_role)

    def dm_thread(self, a: str, b: str) -> tuple[DmMessage, ...]:
        """Messages between two peers (either direction), oldest first."""
        pair = {a, b}
        return tuple(m for m in self.dm_log if {m.from_id, m.to_id} == pair)

    @property
    def peers(self) -> tuple[Peer, ...]:
        return self.agents + self.endpoints


class ReadOnlyNames(dict):
    """A dict copy that refuses mutation (the snapshot's id -> name map)."""

    def _ro(self, *a: Any, **k: Any) -> None:
        raise TypeError("snapshot mappings are read-only")

    # one refusal for every mutator, whatever its signature: typeshed's differ from ``_ro``'s
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _ro  # type: ignore[assignment]
