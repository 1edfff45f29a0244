"""The roster (wire.md §4): a component the model holds (:class:`Roster`), owning its rows,
their order and its ``state()`` / ``from_state()``, as the feed ring and the DM roll-up do.

Which entries are live, stale or heartbeat-only is decided by the ``meshview.wire`` rules
(``is_stale``, ``is_heartbeat_only``); this module only folds their answers into roster rows,
presence events and lifecycle feed rows. The model registers the inputs and hands each its
receipt time; the roster never reads a clock.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, Sequence, TypeGuard

from msgspec.structs import replace as restruct  # a Peer is a Struct: built in C, ~40x faster

from meshview.model.labels import Labels
from meshview.model.snapshot import (
    STATUS_ORDER,
    LifecycleKind,
    ModelEvent,
    Peer,
    PresenceEvent,
    PresenceEventKind,
    PresenceRecord,
    Status,
)
from meshview.model.state import RosterState
from meshview.wire import (
    AgentCard,
    Presence,
    PresenceCondition,
    is_heartbeat_only,
    is_stale,
)
from meshview.wire.bounds import LIVE_PEERS_BYTES, LIVE_PEERS_MAX, SLIM_BYTES, clip_opt

if TYPE_CHECKING:
    from meshview.model.snapshot import FeedEntry
    from meshview.model.stalled import StallTracker


def as_presence(p: Peer) -> Presence:
    """A roster row as the wire record it shows, for the wire's presence rules."""
    c = p.condition
    return Presence(
        card=AgentCard(id=p.id, name=p.name, kind=p.kind, role=p.role,
                       description=p.description, tags=list(p.tags) or None,
                       meta=dict(p.meta) or None),
        status=p.status, ts=p.ts, lifecycleUid=p.lifecycle_uid, activity=p.activity,
        activitySince=p.activity_since, statusSince=p.status_since, activeAt=p.active_at,
        condition=PresenceCondition(c.code, c.source, c.message, c.since) if c else None,
        attention=p.attention, channelModes=dict(p.channel_modes) or None,
    )


#: Offline peers kept in the roster, the latest to go offline first: past this the oldest are
#: forgotten. A departed row is for a glance at who was here lately; in open mode any client
#: may write any number of presence keys, and every one of them lapses into an offline row
#: (100k of them held 612 MB). 2000 covers every departure of a busy day on a large team,
#: and at the wire's bounds an offline row is at most ~32 KB: under 64 MB for all of them.
OFFLINE_CAP = 2000
#: changes the labels take by copy (:meth:`Roster.labels`) before they are built anew instead:
#: bounds what a flood of keys holds between two reads of the labels
LABEL_OPS_MAX = 1024

#: What a roster row holds beside its strings (the struct, its entries in the roster's dicts,
#: sort and labels, the stalled verdict's facts), in bytes: :func:`row_bytes`'s constant.
ROW_BASE_BYTES = 1200
_STR_BYTES = 50  # a str object's own overhead


def row_bytes(p: Peer | PresenceRecord) -> int:
    """What a row of ``p`` holds, estimated from its strings (within a factor of ~1.5 of what
    tracemalloc sees): the unit of the live rows' byte budget (bounds.LIVE_PEERS_BYTES)."""
    n = ROW_BASE_BYTES + len(p.id) + len(p.name)
    for v in (p.role, p.lifecycle_uid, p.activity, p.description, p.attention):
        if v is not None:
            n += _STR_BYTES + len(v)
    c = p.condition
    if c is not None:
        n += 3 * _STR_BYTES + len(c.code) + len(c.source or "") + len(c.message or "")
    if p.tags:
        n += sum(map(len, p.tags)) + _STR_BYTES * len(p.tags)
    for pairs in (p.meta, p.channel_modes):
        if pairs:
            n += sum(len(k) + len(v) for k, v in pairs) + 2 * _STR_BYTES * len(pairs)
    return n


def slim(p: Peer) -> Peer:
    """``p`` as the byte budget keeps it: the card's decorations dropped, activity and the
    condition's message cut to :data:`SLIM_BYTES`; what the roster and NEEDS-YOU show stays."""
    c = p.condition
    if c is not None and c.message is not None:
        c = restruct(c, message=clip_opt(c.message, SLIM_BYTES))
    return restruct(p, description=None, tags=(), meta=(), channel_modes=(),
                    activity=clip_opt(p.activity, SLIM_BYTES), condition=c)


ROSTER_SORTS = ("status", "name", "role", "activity")  # the console's ``s`` cycles these
# the roster's rows: ``auto`` is dense whenever the full rows would not fit (the console's L cycles)
ROSTER_LAYOUTS = ("auto", "dense", "full")


def _is_status(s: str) -> TypeGuard[Status]:
    return s in STATUS_ORDER


def _order_key(p: Peer) -> tuple:
    """A row's place in the roster: agents first, then by status block, name, id."""
    return (p.kind != "agent", STATUS_ORDER.get(p.status, 9), p.name.lower(), p.id)


def last_active(p: Peer) -> float:
    """When the peer last did something, as its presence says (0: never said)."""
    return max(p.active_at or 0.0, p.activity_since or 0.0)


_SORT_KEYS: dict[str, Callable[[Peer], tuple]] = {
    "status": lambda p: (STATUS_ORDER.get(p.status, 9), p.name.lower(), p.id),
    "name": lambda p: (p.name.lower(), p.id),
    "role": lambda p: (p.role is None, (p.role or "").lower(), p.name.lower(), p.id),
    "activity": lambda p: (-last_active(p), p.name.lower(), p.id),
}


def sort_peers(peers: Iterable[Peer], by: str) -> tuple[Peer, ...]:
    """Roster rows in the order ``by`` names: agents first, then endpoints, each sorted.

    ``status`` is the model's own order (it reshuffles as statuses change); ``name`` and
    ``role`` hold still while the same seats are present."""
    key = _SORT_KEYS[by]
    rows = sorted(peers, key=lambda p: (p.kind != "agent", key(p)))
    return tuple(rows)


def same_but_clocks(old: Peer, new: Peer) -> bool:
    """``new`` is ``old`` with only the clocks a heartbeat moves (:meth:`Roster.
    refresh_clocks`) changed: what a view shows of it differs only in ages."""
    return old is new or (old.id == new.id and restruct(
        new, ts=old.ts, seen_at=old.seen_at, activity_since=old.activity_since,
        status_since=old.status_since, active_at=old.active_at) == old)


class RosterHost(Protocol):
    """What a :class:`Roster` needs of the model that holds it: the change counter, the event
    queue, the feed (lifecycle rows) and the connection status's presence view."""

    @property
    def presence_view(self) -> str: ...
    def _touch(self) -> None: ...
    def _emit(self, ev: ModelEvent) -> None: ...
    def _append(self, **kw: Any) -> FeedEntry: ...
    def _presence_view_to(self, view: str) -> None: ...
    def apply_rejection(self, reason: str, subject: str) -> None: ...
    def note_cuts(self, fields: Sequence[str]) -> None: ...


class Roster:
    """The roster: one row per principal heard on the presence bucket (or remembered), the
    names the space knows, and the order the snapshot shows them in. Its reducers (wire.md §4)
    take the receipt time from the model (``now``), which registers them as inputs; what they
    do beyond the roster (events, lifecycle rows, the presence view) goes through ``host``.

    The attributes without an underscore are what the model reads (never writes); the kept
    sort, the live and offline rows and the labels are derived and start afresh on a restore.
    """

    def __init__(self, host: RosterHost, ttl_ms: float, stall: StallTracker,
                 live_cap: int = LIVE_PEERS_MAX) -> None:
        self.ttl_ms = ttl_ms
        self.live_cap = live_cap  # live rows held: past it a new key is refused (bounds.py)
        self.live_budget = LIVE_PEERS_BYTES  # their row_bytes: past it rows are kept slim
        self._host = host
        self._stall = stall
        # the host's own bound methods, held once: the reducers call them per record
        self._touch, self._emit, self._append = host._touch, host._emit, host._append
        self.peers: dict[str, Peer] = {}
        self.names: dict[str, str] = {}  # principal -> roster name (presence, absent)
        self.watch_last: float | None = None  # receipt time of the last watch delivery
        self.initial_load = True
        # the order as last sorted (``order``): the snapshot's agents, endpoints, ``order``
        # and the status blocks among the agents (status -> [lo, hi) in ``agent_ids``)
        self._changed = True  # due for a sort
        self.agent_ids: tuple[str, ...] = ()
        self.endpoint_ids: tuple[str, ...] = ()
        self.peer_ids: tuple[str, ...] = ()
        self.spans: dict[str, tuple[int, int]] = {}
        # the sorted order kept between sorts: each row's key, the keys in order (None: sort
        # everything next time), and the rows whose key may have moved since
        self._sort_keys: dict[str, tuple] = {}
        self._sorted: list[tuple] | None = None
        self._resort: set[str] = set()
        # the live rows' ``seen_at`` (the sweep's deaf guard) and a lower bound of them; None:
        # derive it from the rows
        self.live_seen: dict[str, float] | None = None
        self.live_floor = float("inf")
        # the offline rows, the first to go offline first (OFFLINE_CAP); None: derive it
        self._offline: dict[str, None] | None = None
        # the live rows' row_bytes and their sum (the byte budget); None: derive from the rows
        self._weights: dict[str, int] | None = None
        self._live_bytes = 0
        self._labels: Labels | None = None  # built from the rows when asked (None: stale)
        # newcomers (pid, name, role) and forgotten rows (pid, None, None) since, in order
        self._label_ops: list[tuple[str, str | None, str | None]] = []

    def state(self) -> RosterState:
        """The roster as a checkpoint holds it (rows are immutable and shared)."""
        return RosterState(dict(self.peers), dict(self.names), self._changed,
                           self.agent_ids, self.endpoint_ids, self.peer_ids,
                           dict(self.spans), self.watch_last, self.initial_load)

    @classmethod
    def from_state(cls, st: RosterState, host: RosterHost, ttl_ms: float,
                   stall: StallTracker, live_cap: int = LIVE_PEERS_MAX) -> Roster:
        """A roster put back; what is derived from it (the kept sort, the live and offline
        rows, labels) starts afresh, as in a new model."""
        r = cls(host, ttl_ms, stall, live_cap)
        r.peers, r.names = dict(st.peers), dict(st.names)
        r._changed = st.changed
        r.agent_ids, r.endpoint_ids = st.agent_ids, st.endpoint_ids
        r.peer_ids, r.spans = st.peer_ids, dict(st.spans)
        r.watch_last, r.initial_load = st.watch_last, st.initial_load
        return r

    def name_of(self, pid: str) -> str:
        """A peer's roster name, else its whole id (display code elides it, never this)."""
        return self.names.get(pid) or pid

    def live_refusal(self, pid: str, ts: float, now: float) -> str | None:
        """The reason a live (not offline) record of ``pid`` stamped ``ts`` would be refused
        now, else None: a key the roster does not hold, fresh, with :attr:`live_cap` live rows
        held already (``presence:live-cap``). A query: :meth:`apply_presence` refuses by it,
        and the observer asks it before decoding a refused key's heartbeat again."""
        if (pid not in self.peers and not is_stale(ts, now, self.ttl_ms)
                and self.live_count() >= self.live_cap):
            return "presence:live-cap"
        return None

    def live_count(self) -> int:
        """How many rows are live (not offline): what :attr:`live_cap` bounds."""
        off = self._offline
        if off is None:
            off = self._offline = self._offline_order()
        return len(self.peers) - len(off)

    def live_bytes(self) -> int:
        """The live rows' :func:`row_bytes`, summed: what :attr:`live_budget` bounds."""
        if self._weights is None:
            self._weights = {pid: row_bytes(p) for pid, p in self.peers.items()
                             if p.status != "offline"}
            self._live_bytes = sum(self._weights.values())
        return self._live_bytes

    def labels(self) -> Labels:
        """Principal -> display label from the rows (meshview/model/labels.py), rebuilt only
        after a roster name or role changed."""
        lab, ops = self._labels, self._label_ops
        if ops:  # only newcomers and forgotten rows since: a copy, unless a name is shared
            self._label_ops = []
            lab = self._labels = lab.changed(ops) if lab is not None else None
        if lab is None or len(lab) != len(self.peers):
            lab = self._labels = Labels((p.id, p.name, p.role) for p in self.peers.values())
        return lab

    def order(self) -> None:
        """Bring the roster order up to date: agents then endpoints, each by status block
        (working, waiting, idle, offline), name and id. Only rows whose key moved are taken out
        and put back (a status change among 10k rows costs a bisection, not a sort); a status
        changes only through ``_set_peer``, so the blocks hold until the next call."""
        if not self._changed:
            return
        keys, srt, peers = self._sort_keys, self._sorted, self.peers
        if srt is None or len(self._resort) > len(srt) // 8:
            keys = self._sort_keys = {pid: _order_key(p) for pid, p in peers.items()}
            srt = self._sorted = sorted(keys.values())
        else:
            for pid in self._resort:
                new, old = _order_key(peers[pid]), keys.get(pid)
                if new == old:
                    continue
                if old is not None:
                    del srt[bisect_left(srt, old)]
                insort(srt, new)
                keys[pid] = new
        self._resort.clear()
        ids = [k[3] for k in srt]
        n = bisect_left(srt, (True,))  # the first endpoint
        self.agent_ids, self.endpoint_ids = tuple(ids[:n]), tuple(ids[n:])
        self.peer_ids = tuple(ids)
        spans: dict[str, tuple[int, int]] = {}
        for status, o in STATUS_ORDER.items():  # in block order
            lo, hi = bisect_left(srt, (False, o)), bisect_left(srt, (False, o + 1))
            if hi > lo:
                spans[status] = (lo, hi)
        self.spans = spans
        self._changed = False

    # ------------------------------------------------------------------ reducers

    def watch_delivered(self, now: float) -> None:
        """The presence watch delivered something (any key, incl. ignored ones)."""
        self.watch_last = now
        if self._host.presence_view != "live":
            self._host._presence_view_to("live")

    def apply_presence(self, rec: PresenceRecord, now: float) -> None:
        """Apply a validated presence PUT (key == card.id already checked by the caller).

        Rules (wire.md §4): ``status: offline`` -> offline; ``ts`` older than ttl on arrival
        -> unknown peer recorded quietly offline, known peer kept as is (the sweep decides);
        changed ``lifecycleUid`` -> new-incarnation event; heartbeat-only rewrites update ts
        but emit nothing. A live record of a key the roster does not hold, with
        :attr:`live_cap` live rows held already, is refused (``presence:live-cap``): a flood
        of keys never pushes out a peer already shown, and never grows the roster.
        """
        self.watch_delivered(now)
        prev = self.peers.get(rec.id)
        if prev is not None and (not rec.name.strip() or (rec.status == "offline" and rec.role is None)):
            # a record with no name (a harness's bare offline record) keeps the name this
            # principal's own presence gave it, and an offline one its role: an agent that
            # left is shown as who it was, not by its id
            rec = restruct(rec, name=rec.name if rec.name.strip() else prev.name,
                           role=prev.role if rec.status == "offline" and rec.role is None else rec.role)
        stale = is_stale(rec.ts, now, self.ttl_ms)
        if prev is None and rec.status != "offline":
            refused = self.live_refusal(rec.id, rec.ts, now)
            if refused is not None:
                self._host.apply_rejection(refused, rec.id)
                return
        self.names[rec.id] = rec.name
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
        status: Status = rec.status if _is_status(rec.status) else "idle"
        new = self._fit(self._make_peer(rec, now, prev, status, None))
        c = new.condition  # the stalled verdict's presence fact: what a heartbeat never moves
        self._stall.presence(rec.id, now, (rec.status, new.activity, rec.activity_since,
                                           rec.status_since, c.code if c else None,
                                           c.message if c else None, c.since if c else None),
                             rec.active_at, rec.role)
        if prev is None or prev.status == "offline":
            incarnation = (
                prev is not None and rec.lifecycle_uid is not None
                and prev.lifecycle_uid is not None and rec.lifecycle_uid != prev.lifecycle_uid
            )
            if incarnation and prev is not None:  # ``incarnation`` implies a prev (for mypy)
                new = restruct(new, incarnations=prev.incarnations + 1)
            self._set_peer(new)
            if incarnation:  # back from offline as a new instance: one event, not two
                self.presence_event("incarnation", new, now)
                self._lifecycle("incarnation", new, now, "new incarnation")
            else:
                self.presence_event("join", new, now)
                self._lifecycle("join", new, now, "joined")
            return
        if rec.lifecycle_uid and prev.lifecycle_uid and rec.lifecycle_uid != prev.lifecycle_uid:
            new = restruct(new, incarnations=prev.incarnations + 1)
            self._set_peer(new)
            self.presence_event("incarnation", new, now)
            self._lifecycle("incarnation", new, now, "new incarnation")
            return
        if is_heartbeat_only(as_presence(prev), as_presence(new)):
            # ts/ages move; no event. Keep the roster order cache (status unchanged).
            self._put_peer(new)
            self._touch()
            return
        self._set_peer(new)
        self.presence_event("update", new, now)

    def refresh_clocks(self, pid: str, ts: float, activity_since: float | None,
                       status_since: float | None, active_at: float | None, now: float) -> bool:
        """A heartbeat-only rewrite (the caller judged it so with ``is_heartbeat_only`` against
        the last record it applied for this key): only the clocks move, as
        :meth:`apply_presence` would move them, without rebuilding the record. False (nothing
        done) unless the peer is live, the record fresh and not older than the one held; the
        caller then applies the full record. The observer's path for the common case at scale;
        an input like any other, so a recording holds it and a replay applies it."""
        prev = self.peers.get(pid)
        if (prev is None or prev.status == "offline" or ts < prev.ts
                or is_stale(ts, now, self.ttl_ms)):
            return False
        # the hot path at scale (5k calls a second at 10k agents): ``watch_delivered`` and
        # ``_put_peer`` written out, as each of them would do it here
        self.watch_last = now
        if self._host.presence_view != "live":
            self._host._presence_view_to("live")
        if active_at is not None:
            self._stall.active_at(pid, now, active_at)
        seen = prev.seen_at if ts == prev.ts else now
        self.peers[pid] = restruct(prev, ts=ts, seen_at=seen, activity_since=activity_since,
                                    status_since=status_since, active_at=active_at)
        if self.live_seen is not None:
            self.live_seen[pid] = seen  # the peer is live (checked above)
            if seen < self.live_floor:  # a clock set back (a test's, a replay's)
                self.live_floor = seen
        self._touch()
        return True

    def apply_presence_delete(self, pid: str, purge: bool, now: float) -> None:
        """KV DEL/PURGE on a presence key -> that peer offline (kept in the roster)."""
        self.watch_delivered(now)
        self._mark_offline(pid, "kv-purge" if purge else "kv-delete", now)

    def presence_resync(self, present: Iterable[str], now: float) -> None:
        """A rebound watch finished its initial state: peers absent from it are gone
        (an empty bucket means nobody present)."""
        keep = set(present)
        for pid, p in list(self.peers.items()):
            if pid not in keep and p.status != "offline":
                self._mark_offline(pid, "stale", now)

    def apply_absent(self, pid: str, name: str, role: str | None, last_ts: float | None,
                     now: float) -> bool:
        """A principal the space remembers (its retained messages, its lifecycle head) with no
        presence: an agent that left before we started. It joins the roster offline (reason
        ``absent``) and the line stream hears one quiet offline event, as a console that saw it
        go would show it. No feed row: nobody saw it happen. False when it is known already."""
        if pid in self.peers:
            return False
        self.names.setdefault(pid, name)
        p = Peer(id=pid, name=name, kind="agent", status="offline", reported_status="offline",
                 ts=last_ts if last_ts is not None else 0.0, seen_at=now, role=role,
                 first_seen=now, offline_reason="absent")
        self._set_peer(p)
        self.presence_event("offline", p, now, "absent")
        return True

    def apply_stranded_seat(self, pid: str, uid: str | None, name: str, now: float) -> bool:
        """A managed seat its manager's ``ps`` reports running while its agent has no presence
        (mesh ``absent``): a stuck agent, so never invisible. It joins the roster offline
        (reason ``seat-no-presence``), keyed by the row's principal and lifecycle uid, never by
        its name. False when the principal is live on the roster (its presence speaks for it)
        or already shown so for that lifecycle."""
        prev = self.peers.get(pid)
        if prev is not None and (prev.status != "offline" or (
                prev.offline_reason == "seat-no-presence" and prev.lifecycle_uid == uid)):
            return False
        name, uid = name[:64], uid[:64] if uid else None  # bounded: the row is the manager's word
        self.names.setdefault(pid, name)
        p = Peer(id=pid, name=prev.name if prev is not None else name, kind="agent",
                 status="offline", reported_status="offline",
                 ts=prev.ts if prev is not None else 0.0, seen_at=now,
                 role=prev.role if prev is not None else None, lifecycle_uid=uid,
                 first_seen=prev.first_seen if prev is not None else now,
                 offline_since=now, offline_reason="seat-no-presence")
        self._set_peer(p)
        if prev is None:
            self.presence_event("offline", p, now, "seat-no-presence")
        return True

    def grace(self, now: float) -> None:
        """After a reconnect: every live peer gets one ttl to heartbeat again before the
        sweep may call it stale (its silence was ours, not its)."""
        for p in self.peers.values():
            if p.status != "offline" and p.seen_at < now:
                self._put_peer(restruct(p, seen_at=now))

    def end_initial_load(self) -> None:
        """The first watch snapshot is complete: later joins are live events."""
        self.initial_load = False

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

    def _fit(self, new: Peer) -> Peer:
        """``new`` (a live row), slim when in full it would take the live rows past the byte
        budget (counted: the cut ``presence:budget``). Never a refusal: a slim row is small
        (names, ids, status, activity and condition cut), so slim rows are bounded by the count
        cap, and a flood of large cards cannot keep a new agent out."""
        total, wts = self.live_bytes(), self._weights  # (live_bytes derives the weights)
        if total - (wts.get(new.id, 0) if wts else 0) + row_bytes(new) <= self.live_budget:
            return new
        self._host.note_cuts(("presence:budget",))
        return slim(new)

    def _label_op(self, op: tuple[str, str | None, str | None]) -> None:
        """One more change for :meth:`labels` to apply; past ``LABEL_OPS_MAX`` of them unasked
        (a flood of keys nobody has drawn yet) the labels are built anew instead, when asked."""
        if len(self._label_ops) >= LABEL_OPS_MAX:
            self._labels, self._label_ops = None, []
        else:
            self._label_ops.append(op)

    def _put_peer(self, p: Peer) -> None:
        """Every roster row is written here (``_set_peer`` when its place may move)."""
        old = self.peers.get(p.id)
        if old is None:
            if self._labels is not None:  # a newcomer: added to the labels when next asked
                self._label_op((p.id, p.name, p.role))
        elif old.name != p.name or old.role != p.role:
            self._labels = None  # who is shown as whom changed (meshview/model/labels.py)
            self._label_ops = []
        self.peers[p.id] = p
        wts = self._weights
        if wts is not None:
            if p.status != "offline":
                w = row_bytes(p)
                self._live_bytes += w - wts.get(p.id, 0)
                wts[p.id] = w
            elif p.id in wts:
                self._live_bytes -= wts.pop(p.id)
        live = self.live_seen
        if live is not None:
            if p.status != "offline":
                live[p.id] = p.seen_at
                if p.seen_at < self.live_floor:
                    self.live_floor = p.seen_at
            else:
                live.pop(p.id, None)
        off = self._offline
        if off is None:
            off = self._offline = self._offline_order()
        if p.status == "offline":
            if p.id not in off:
                off[p.id] = None
                if len(off) > OFFLINE_CAP:
                    self._prune_offline(off, p.id)
        elif off:
            off.pop(p.id, None)

    def _offline_order(self) -> dict[str, None]:
        """The offline rows, the earliest to go offline first (rebuilt after a restore)."""
        rows = sorted((p.offline_since or 0.0, k, pid) for k, (pid, p)
                      in enumerate(self.peers.items()) if p.status == "offline")
        return {pid: None for _, _, pid in rows}

    def _prune_offline(self, off: dict[str, None], keep: str) -> None:
        """Forget the offline rows that went offline first, past :data:`OFFLINE_CAP` (never
        ``keep``, the row being written). A later record of the key is a new peer's join."""
        gone = []
        while len(off) > OFFLINE_CAP:
            pid = next(iter(off))
            if pid == keep:
                break
            del off[pid]
            gone.append(pid)
        srt, keys = self._sorted, self._sort_keys
        for pid in gone:
            if self._labels is not None:  # forgotten: taken out of the labels when next asked
                self._label_op((pid, None, None))
            self.peers.pop(pid, None)
            self.names.pop(pid, None)
            self._resort.discard(pid)
            key = keys.pop(pid, None)
            if key is not None and srt is not None:
                at = bisect_left(srt, key)
                if at < len(srt) and srt[at] == key:
                    del srt[at]
        self._stall.forget(gone)
        self._changed = True

    def _set_peer(self, p: Peer) -> None:
        prev = self.peers.get(p.id)
        self._put_peer(p)
        if prev is None or prev.status != p.status or prev.name != p.name or prev.kind != p.kind:
            self._resort.add(p.id)  # its place in the roster may move
            self._changed = True
        self._touch()

    def _mark_offline(
        self, pid: str, reason: str, now: float, rec: PresenceRecord | None = None
    ) -> None:
        prev = self.peers.get(pid)
        if rec is not None:
            p = self._make_peer(rec, now, prev, "offline", reason)
        elif prev is not None:
            p = restruct(
                prev, status="offline", offline_since=now, offline_reason=reason,
                attention=None, channel_modes=(),
            )
        else:
            return  # a delete for a key we never saw: nothing to show
        if prev is not None and prev.status == "offline":
            if rec is not None:
                self._set_peer(restruct(p, offline_since=prev.offline_since,
                                        offline_reason=prev.offline_reason))
            return
        if prev is None:
            self._set_peer(p)  # first sighting already offline: quiet
            return
        self._set_peer(p)
        self.presence_event("offline", p, now, reason)
        if reason in ("stale", "rebind"):
            self._lifecycle("crash", p, now, "heartbeat lapsed (crash detected)")
        else:
            self._lifecycle("offline", p, now, "went offline")

    def presence_event(
        self, kind: PresenceEventKind, p: Peer, now: float, reason: str | None = None
    ) -> None:
        initial = self.initial_load or reason == "absent"
        self._emit(PresenceEvent(kind, p, now, reason, initial))

    def _lifecycle(self, kind: LifecycleKind, p: Peer, now: float, text: str) -> None:
        self._append(
            id="", ts=now, received=now, kind="lifecycle", from_id=p.id, from_name=p.name,
            from_role=p.role, text=text, lifecycle=kind, historical=self.initial_load,
        )

    def sweep(self, now: float) -> bool:
        """Rules 4–5: stale peers go offline (deaf-observer guard); a watch silent for a
        whole ttl marks the view stale. Returns True when the caller should rebind the
        presence watch (view just went stale)."""
        wl = self.watch_last
        if wl is not None:
            # the deaf guard first: a peer heard from within a ttl of the watch's last delivery
            # is not stale. The live rows' receipt times are kept apart with a lower bound of
            # them (a receipt time only grows while a peer is live), so with everyone heard
            # lately (the common case) a sweep over 10k peers is one subtraction
            ttl, peers, live = self.ttl_ms, self.peers, self.live_seen
            if live is None:
                live = self.live_seen = {pid: p.seen_at for pid, p in peers.items()
                                          if p.status != "offline"}
                self.live_floor = min(live.values(), default=float("inf"))
            if wl - self.live_floor >= ttl:
                self.live_floor = min(live.values(), default=float("inf"))  # the bound, made exact
            if wl - self.live_floor >= ttl:  # someone may be stale: look (in the rows' order)
                gone = [pid for pid, p in peers.items()
                        if wl - p.seen_at >= ttl and p.status != "offline"
                        and is_stale(p.ts, now, ttl, p.seen_at)]
                for pid in gone:
                    self._mark_offline(pid, "stale", now)
        if wl is not None and now - wl > self.ttl_ms and self._host.presence_view != "stale":
            self._host._presence_view_to("stale")
            return True
        return False
