"""MeshView: the observer's state and its pure reducers.

A coordinator over components that each own their state and its ``state()`` /
``from_state()``: the feed ring (feedring.py), the roster (roster.py), the channel list
(channels.py), the runs fold (runs_state.py), the DM roll-up and hop log (traffic.py), the
rates (rates.py). The model registers every input (each a short delegate where a component
does the work), hands each its receipt time, and keeps what they share: one version, dirty
flag, snapshot cache and event queue; the message reducer and bursts, membership, managers,
the connection status and the stalled check live here still.

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
* ``version`` increases on every change: the console polls it (~30 times a second) and takes
  a snapshot when it moved. ``dirty`` says something changed since the last snapshot or
  observer publish: the observer runs its listeners (line stream, notifier, chat) at most once
  per ``BATCH_MS`` (75 ms) while it is set, and :meth:`tick` sets it once a second for ages.
* Inputs (meshview/model/inputs.py): every reducer that changes the state is registered with
  ``@model_input``; ``input_tap`` (the recorder's) sees each outermost input call, and
  :meth:`MeshModel.apply_input` applies one by name (a replay). Reads are listed in
  :data:`READS`, methods that only call inputs in :data:`FORWARDS`.
* State (meshview/model/state.py): :meth:`MeshModel.state` hands out the declared
  :class:`~meshview.model.state.ModelState` a checkpoint holds, :meth:`MeshModel.restore` puts
  one back (a replay); nothing outside reads or sets the model's attributes. Its components
  (``roster``, ``channels``, ``runs``) are changed only by its inputs; views read the snapshot.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import replace
from typing import Any, Callable, Iterable, Mapping, Sequence

from msgspec.structs import replace as struct_replace

from meshview.model.channels import CHANNELS_CAP as CHANNELS_CAP  # (its old home: tests import it here)
from meshview.model.channels import Channels
from meshview.model.feedring import DUPLICATE, FeedRing
from meshview.model.frames import FrameIn, FrameLedger
from meshview.model.inputs import INPUTS, InputCall, InputTap, model_input, settle, untapped
from meshview.model.labels import Labels
from meshview.model.originals import Ref, entry_ref, pick
from meshview.model.rates import RateMeter
from meshview.model.roster import Roster
from meshview.model.runs_state import JournalRow, Pause, Runs, RunsSnapshot, RunView
from meshview.model.stalled import DEFAULT_STALL_MINUTES, Stalled, StallTracker, verdict
from meshview.model.snapshot import (
    STATUSES,
    ChannelSettings,
    ConnectionState,
    ConnectionStatus,
    FeedEntry,
    ManagerLease,
    MemberView,
    ModelEvent,
    NeedsYou,
    Peer,
    PresenceRecord,
    Rates,
    ReadOnlyNames,
    Rejected,
    Signals,
    Snapshot,
    StateEvent,
)
from meshview.model.state import Burst, MembershipState, ModelState
from meshview.model.traffic import DM_LOG_CAP, DmRollup, HopLog
from meshview.wire import (
    PRESENCE_TTL_MS,
    Applied,
    ChannelConfig,
    ChannelDefaults,
)
from meshview.wire.bounds import LIVE_PEERS_MAX

Clock = Callable[[], float]
"""Returns the observer's wall clock in epoch milliseconds."""

BURST_MS = 400.0
BATCH_MS = 75.0
FEED_CAP = 10_000
EVENT_QUEUE_CAP = 100_000
THREAD_ID_CAP = 512  # ``replyTo`` / ``contextId`` kept per row (ids are unbounded on the wire)
MENTIONS_CAP = 32
EXCERPT_CAP = 200  # characters of the original kept on a reply row
_THREAD_FIELDS = ("reply_to", "wire_context_id", "mentions", "reply_excerpt", "reply_ambiguous")
#: FeedEntry's threading fields in order: reply_to, wire_context_id, mentions, excerpt, ambiguous
_Thread = tuple[str | None, str | None, tuple[str, ...], str | None, bool]
_NO_THREAD: _Thread = (None, None, (), None, False)  # a message that names no thread: FeedEntry's defaults

# Public methods that are not inputs: reads, forwards (they only call inputs, each of which
# is an input call of its own), and what a replay calls besides inputs (a checkpoint put back;
# the model marked changed when only the replay's clock moved). tests/mesh/test_record.py
# fails on a public method in none of INPUTS, READS, FORWARDS and REPLAYS, so a new reducer
# cannot silently go unrecorded.
READS = frozenset({
    "snapshot", "take_events", "entry", "seen", "name_of", "peer", "effective",
    "replay_floor", "rejection_count", "runs_view", "stalled", "cut_count", "labels", "state",
    "pending_events",
})
FORWARDS = frozenset({"apply_history", "manager_resync", "apply_input"})
REPLAYS = frozenset({"restore", "touch"})


_Burst = Burst  # (the name the message reducer builds one by)


class MeshModel:
    """The MeshView state machine. Single-threaded: call from one event loop.

    ``feed_cap`` bounds the feed ring (and the dedupe set with it); ``ttl_ms`` is the
    presence liveness window; ``record_events`` keeps a queue for :meth:`take_events`
    (the line stream); the console leaves it off. ``live_cap`` bounds the live roster rows
    (a new key past it is refused, ``presence:live-cap``).
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
        stall_ms: float = DEFAULT_STALL_MINUTES * 60_000.0,
        live_cap: int = LIVE_PEERS_MAX,
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

        self._ring = FeedRing(self.feed_cap)  # rows by absolute index, and the dedupe index
        self._bursts: dict[tuple[str, str], Burst] = {}
        #: event-channel rows (agent activity frames) that landed in the feed: the console's
        #: ``ev N`` while it hides them. Not checkpointed: a restore counts the ring's.
        self.event_rows = 0

        # the stalled verdict's facts (meshview/model/stalled.py); not checkpointed: a replay that
        # seeks rebuilds them from the inputs after the checkpoint
        self.stall_ms = float(stall_ms)
        self._stall = StallTracker()
        self._stalled_ids: frozenset[str] = frozenset()
        self._stall_checked = 0.0
        self._stall_due = 0.0  # no agent can newly stall before this (model clock)

        # the roster (meshview/model/roster.py): its rows, names and order; read it through the
        # model's reads (``peer``, ``labels``, ``snapshot``), never set it
        self.live_cap = int(live_cap)  # live roster rows held (meshview/wire/bounds.py)
        self.roster = Roster(self, self.ttl_ms, self._stall, self.live_cap)

        # the channel list (meshview/model/channels.py); a channel message counts through its
        # own method
        self.channels = Channels()
        self._heard: Callable[[str, float, bool], None] = self.channels.heard

        self._dms = DmRollup(dm_log_cap)
        self._topology = HopLog()
        self._channel_nodes: dict[str, str] = {}  # channel -> its topology node (bounded)
        # every agent's event frames: ordering notes and activity facts (read-only for views)
        self.frames = FrameLedger()

        # rates (meshview/model/rates.py); a delivery counts through the meter's own method
        self._rates = RateMeter()
        self._count_arrival: Callable[[float], None] = self._rates.count

        # rejections, and the wire fields cut to their byte bounds (meshview/wire/bounds.py)
        self._rejections: dict[str, int] = {}
        self._cuts: dict[str, int] = {}

        # membership / managers
        self._membership = MembershipState()
        self._managers: dict[str, ManagerLease] = {}
        # workflow runs, as the managers' run-ps/run-status last said (meshview/model/runs_state.py)
        self.runs = Runs(self._emit)

        # connection
        self._status = ConnectionStatus(
            connection="connecting", space=space, server=server, dm_visible=False,
            presence_view="live", tap=(),
        )

        self._events: deque[ModelEvent] = deque(maxlen=EVENT_QUEUE_CAP)
        self.events_dropped = 0

        self._input_tap: InputTap | None = None
        self.input_tap = None  # sees every outermost input call (a recorder)
        self._in_input = False  # a tapped input call is running (inner inputs are part of it)

    @property
    def input_tap(self) -> InputTap | None:
        return self._input_tap

    @input_tap.setter
    def input_tap(self, tap: InputTap | None) -> None:
        self._input_tap = tap
        untapped(self, tap is not None)

    # ------------------------------------------------------------------ inputs

    def _tapped_input(self, name: str, fn: Callable[..., Any], args: tuple[Any, ...],
                      kw: dict[str, Any]) -> Any:
        """An input call while ``input_tap`` is set. Only the outermost call reaches the tap (a
        reducer calling another is one input), and the clock reads the call's receipt time
        throughout it, so the same call replays identically. A call that raises is not tapped."""
        tap = self._input_tap
        if self._in_input or tap is None:
            return fn(self, *args, **kw)
        if args:
            args = tuple(map(settle, args))
        if kw:
            kw = {k: settle(v) for k, v in kw.items()}
        clock = self.clock
        t = clock()
        before = self.version
        self._in_input = True
        self.clock = lambda: t
        try:
            result = fn(self, *args, **kw)
        finally:
            self.clock = clock
            self._in_input = False
        tap(InputCall(name, INPUTS[name], args, kw, t, result, self.version != before))
        return result

    def apply_input(self, name: str, args: Sequence[Any] = (),
                    kw: Mapping[str, Any] | None = None) -> Any:
        """Apply the input ``name`` (a recorded one): only names in ``INPUTS`` are accepted."""
        if name not in INPUTS:
            raise ValueError(f"not a model input: {name!r}")
        return getattr(self, name)(*args, **(kw or {}))

    # ------------------------------------------------------------------ plumbing

    def _touch(self) -> None:
        self.version += 1
        self.dirty = True
        self._snap = None

    def touch(self) -> None:
        """Mark the model changed though no input came: a replay whose clock moved, so the
        ages a view shows move with it (not recorded: a replay only)."""
        self._touch()

    # ------------------------------------------------------------------ state

    def state(self) -> ModelState:
        """The model's state as a declared value (meshview/model/state.py): what a checkpoint
        holds. Containers are copied; rows and records are immutable and shared."""
        m = self._membership
        return ModelState(
            space=self.space, feed_cap=self.feed_cap, ttl_ms=self.ttl_ms,
            burst_ms=self.burst_ms, changes=self.version, feed=self._ring.state(),
            bursts=[replace(b, to_ids=list(b.to_ids), ids=list(b.ids))
                    for b in self._bursts.values()],
            roster=self.roster.state(), channels=self.channels.state(), dms=self._dms.state(),
            topology=self._topology.state(), rates=self._rates.state(),
            rejections=dict(self._rejections), cuts=dict(self._cuts),
            membership=MembershipState(dict(m.members), m.feed_at, m.read, m.unreadable),
            managers=dict(self._managers), status=self._status, runs=self.runs.state(),
            frames=self.frames.state(),
        )

    def restore(self, st: ModelState) -> None:
        """Put ``st`` back in place of the model's state (a replay seeking to a checkpoint).
        ``version`` only grows, so a console holding the model sees the change; the clock, the
        input tap and the stalled verdict's facts stay as they are."""
        prev = self.version
        self.space, self.feed_cap = st.space, st.feed_cap
        self.ttl_ms, self.burst_ms = st.ttl_ms, st.burst_ms
        self._ring = FeedRing.from_state(st.feed)
        self.event_rows = sum(1 for e in self._ring.rows() if e.event)
        self._bursts = {(b.from_id, b.text): replace(b, to_ids=list(b.to_ids), ids=list(b.ids))
                        for b in st.bursts}
        self.roster = Roster.from_state(st.roster, self, st.ttl_ms, self._stall, self.live_cap)
        self.channels = Channels.from_state(st.channels)
        self._heard = self.channels.heard
        self._dms = DmRollup.from_state(st.dms)
        self._topology = HopLog.from_state(st.topology)
        self._rates = RateMeter.from_state(st.rates)
        self._count_arrival = self._rates.count
        self._rejections, self._cuts = dict(st.rejections), dict(st.cuts)
        m = st.membership
        self._membership = MembershipState(dict(m.members), m.feed_at, m.read, m.unreadable)
        self._managers = dict(st.managers)
        self._status = st.status
        self.runs = Runs.from_state(st.runs, self._emit)
        self.frames = FrameLedger.from_state(st.frames) if st.frames else FrameLedger()
        self.version = max(prev, st.changes) + 1
        self.dirty = True
        self._snap = None
        self._events.clear()

    def _emit(self, ev: ModelEvent) -> None:
        if self.record_events:
            if len(self._events) == self._events.maxlen:
                self.events_dropped += 1
            self._events.append(ev)

    def pending_events(self) -> list[ModelEvent]:
        """The events :meth:`take_events` would return, left in place (tests read them)."""
        return list(self._events)

    def take_events(self) -> list[ModelEvent]:
        """Events since the last call, in order (only when ``record_events``)."""
        out = list(self._events)
        self._events.clear()
        return out

    # ------------------------------------------------------------------ feed ring

    @property
    def feed_base(self) -> int:
        return self._ring.base

    @property
    def feed_len(self) -> int:
        return len(self._ring)

    @property
    def feed_end(self) -> int:
        return self._ring.end

    def entry(self, i: int) -> FeedEntry:
        return self._ring.at(i)

    def _append(self, **kw: Any) -> FeedEntry:
        return self._land(FeedEntry(index=self._ring.end, **kw))

    def _land(self, e: FeedEntry) -> FeedEntry:
        if self.record_events:  # (checked here too: a row lands per delivery)
            self._emit(e)  # the line stream gets the row as it came (exact text)
        e = self._ring.push(e)
        self.version += 1  # ``_touch``, inlined: a row lands per delivery
        self.dirty = True
        self._snap = None
        return e

    def seen(self, message_id: str) -> bool:
        """True if a non-empty id is already in the feed (or in an open burst)."""
        return self._ring.seen(message_id)

    def name_of(self, pid: str) -> str:
        """A peer's roster name, else its whole id (display code elides it, never this)."""
        return self.roster.name_of(pid)

    def labels(self) -> Labels:
        """Principal -> display label from the roster (meshview/model/labels.py), rebuilt only after
        a roster name or role changed."""
        return self.roster.labels()

    # ------------------------------------------------------------------ messages

    @model_input("message")
    def apply_message(self, d: Applied) -> bool:
        """Apply one validated delivery (``Delivery.applied``, meshview/wire/decode.py).
        Returns False for a duplicate (dropped): the same sender's id again. An id another
        sender used first lands as a row marked ``conflict``.

        Channel rows land at once; unicast rows open/extend a ``burst_ms`` window keyed by
        sender + text and land as one row when :meth:`tick` flushes it. History rows
        (``historical=True``) should be applied in stream order before live rows
        (:meth:`apply_history`).
        """
        # fields read once each, into locals where used more than once (the hot path)
        id = d.id
        from_id = d.from_id
        received = d.received
        now = self.clock() if received is None else received
        conflict = False
        if id:
            seen = self._ring.check(id, from_id)
            if seen:
                if seen == DUPLICATE:
                    return False
                conflict = True
        # the envelope's name and role are the sender's claim, never its identity: kept on the
        # row (bounded by the wire's decode, meshview/wire/bounds.py) and shown against the
        # roster's entry for ``from_id`` (meshview/model/labels.py)
        kind, ts, historical, event = d.kind, d.ts, d.historical, d.event
        to, to_service, channel = d.to, d.to_service, d.channel
        if event:
            self.event_rows += 1
        elif not historical:
            self._count_arrival(now)  # msg/s: chat, DM and anycast deliveries only
            self._stall.message(now, kind, from_id, to, to_service)
        parts_t = tuple(d.parts)
        reply_to, wire_context_id, mentions = d.reply_to, d.wire_context_id, d.mentions
        thread = (_NO_THREAD if not (reply_to or wire_context_id or mentions) else
                  self._thread(reply_to, wire_context_id, mentions,
                               Ref(kind, from_id, channel if kind == "channel" else to_service,
                                   (to,) if kind == "dm" and to else ())))
        if kind == "dm":
            to_id = to or ""
            text, from_name = d.text, d.from_name
            self._dms.add(id, ts, from_id, to_id, text, historical, from_name, conflict)
            self._topology.hop(ts, from_id, to_id, "dm", historical)
            key = (from_id, text)
            b = self._bursts.get(key)
            if b is not None and now - b.opened <= self.burst_ms and b.historical == historical:
                if to_id not in b.to_ids:
                    b.to_ids.append(to_id)
                b.ids.append(id)
                b.ts = min(b.ts, ts)
                b.conflict = b.conflict or conflict
                self._ring.hold(id, from_id)
                return True
            if b is not None:
                self._flush_burst(key)
            self._bursts[key] = _Burst(
                first_id=id, ts=ts, received=now, from_id=from_id, from_name=from_name,
                from_role=d.from_role, text=text, parts=parts_t, historical=historical,
                to_ids=[to_id], ids=[id], opened=now, context_id=d.context_id, thread=thread,
                conflict=conflict,
            )
            self._ring.hold(id, from_id)  # pending burst
            if historical or self.burst_ms <= 0:
                self._flush_burst(key)  # history is settled / coalescing off: no window
            return True
        if kind == "channel" and channel is not None:
            if not event:
                self._heard(channel, ts, historical)
                node = self._channel_nodes.get(channel)
                if node is None:  # one ``#channel`` string per channel, its hash kept
                    if len(self._channel_nodes) >= CHANNELS_CAP:
                        self._channel_nodes.clear()
                    node = self._channel_nodes[channel] = "#" + channel
                self._topology.hop(ts, from_id, node, "channel", historical)
            else:  # an agent's event frame: the ledger's, never a topology hop
                f = FrameIn.of(d, now)
                if f is not None:
                    self.frames.admit(f)
        elif kind == "anycast":
            self._topology.hop(ts, from_id, "@" + (to_service or ""), "anycast", historical)
        # the row built positionally (FeedEntry's field order): the 5k-rows-a-second path
        self._land(FeedEntry(
            self._ring.end, id, ts, now, kind, from_id, d.from_name, d.from_role, d.text, channel,
            (), (), to_service, parts_t, 1, historical, event, None, (id,), d.context_id, *thread,
            conflict,
        ))
        return True

    def _thread(self, reply_to: Any, wire_context_id: Any, mentions: Any,
                me: Ref) -> _Thread:
        """The envelope's threading fields, bounded, plus the first line of the original
        reply ``me`` answers when it is in the feed now (``FeedEntry.reply_excerpt``): the
        first copy by stream order that fits (meshview/model/originals.py), and whether the id names
        copies of several senders none of which fits (``reply_ambiguous``)."""
        reply = reply_to[:THREAD_ID_CAP] if isinstance(reply_to, str) and reply_to else None
        ctx = (wire_context_id[:THREAD_ID_CAP]
               if isinstance(wire_context_id, str) and wire_context_id else None)
        ment = tuple(m[:128] for m in list(mentions or ())[:MENTIONS_CAP] if isinstance(m, str))
        excerpt, ambiguous = None, False
        if reply is not None:
            ring = self._ring
            at, ambiguous = pick(me, [(entry_ref(ring.at(i)), i) for i in ring.copies(reply)])
            if at is not None:
                first = ring.at(at).text.lstrip().split("\n", 1)[0]
                excerpt = first[:EXCERPT_CAP]
        return reply, ctx, ment, excerpt, ambiguous

    def apply_history(self, rows: Iterable[Applied]) -> int:
        """Apply a prefill batch, already in stream order (meshview/observe/history.py: never
        sorted by the senders' own ``ts``), marked historical, deduped. Returns the number of
        rows that landed."""
        n = 0
        for r in rows:
            if self.apply_message(r if r.historical else struct_replace(r, historical=True)):
                n += 1
        return n

    def _flush_burst(self, key: tuple[str, str]) -> None:
        b = self._bursts.pop(key)
        to_names = tuple(self.name_of(t) for t in b.to_ids)
        self._append(
            id=b.first_id, ts=b.ts, received=b.received, kind="dm", from_id=b.from_id,
            from_name=b.from_name, from_role=b.from_role, text=b.text,
            to_ids=tuple(b.to_ids), to_names=to_names, parts=b.parts, count=len(b.to_ids),
            historical=b.historical, ids=tuple(b.ids), context_id=b.context_id,
            **dict(zip(_THREAD_FIELDS, b.thread)), conflict=b.conflict,
        )

    @model_input("message")
    def flush_bursts(self) -> None:
        """Land every open unicast burst now (shutdown, tests)."""
        for key in list(self._bursts):
            self._flush_burst(key)

    # ------------------------------------------------------------------ rates

    @property
    def total(self) -> int:
        """Deliveries counted towards msg/s since the start (``snapshot().rates.total``)."""
        return self._rates.total

    # ------------------------------------------------------------------ rejections

    @model_input("reject")
    def apply_rejection(self, reason: str, subject: str, *, repeat: bool = False) -> None:
        """One input refused, counted under ``reason``. A ``repeat`` (a refused key's heartbeat
        that only moves its clocks: the refusal already said stands) is counted but emits no
        event: as an accepted peer's heartbeat makes no presence line, a refused one makes no
        rejected line (30k agents past the live cap in bench/scale.py: ~8k lines a second)."""
        self._rejections[reason] = self._rejections.get(reason, 0) + 1
        if not repeat:
            self._emit(Rejected(reason, subject, self.clock()))
        self._touch()

    def rejection_count(self, reason: str | None = None) -> int:
        if reason is None:
            return sum(self._rejections.values())
        return self._rejections.get(reason, 0)

    @model_input("reject")
    def note_cuts(self, fields: Sequence[str]) -> None:
        """A delivery or presence record kept with ``fields`` cut to their byte bounds
        (``meshview.wire.bounds``; a field may repeat): counted, the record still applies."""
        cuts = self._cuts
        for f in fields:
            cuts[f] = cuts.get(f, 0) + 1
        self._touch()

    def cut_count(self, field: str | None = None) -> int:
        """How many wire fields were cut to their byte bounds (of ``field``, or all)."""
        if field is None:
            return sum(self._cuts.values())
        return self._cuts.get(field, 0)

    # ------------------------------------------------------------------ channels

    @model_input("channels")
    def set_channel_registry(
        self, configs: Mapping[str, ChannelConfig | ChannelSettings],
        defaults: ChannelDefaults | ChannelSettings | None = None,
    ) -> None:
        """Replace the registry view (keys minus ``=defaults``, already filtered): the wire
        records as decoded, or hand-built :class:`ChannelSettings`. ``defaults`` None keeps
        the defaults already known."""
        self.channels.set_registry(configs, defaults)
        self._touch()

    @model_input("channels")
    def set_retained_counts(self, counts: Mapping[str, int]) -> None:
        """Per-channel stored counts from ``STREAM.INFO`` (event channels already removed).
        Rebuilt on every poll, so deleted channels disappear."""
        self.channels.set_retained(counts)
        self._touch()

    @model_input("channels")
    def forget_channels(self, names: Iterable[str]) -> None:
        """Channels whose history was deleted (``delchan``, ``purge``): they leave the channel
        list until a message arrives on them again. The registry still lists registered ones
        until its watch says otherwise."""
        self.channels.forget(names)
        self._touch()

    def effective(self, channel: str) -> ChannelSettings:
        """A channel's settings by the wire rules (channel ?? defaults ?? SPEC default)."""
        return self.channels.effective(channel)

    def replay_floor(self, channel: str, now: float) -> float | None:
        """Oldest ``ts`` a backfill of ``channel`` may show at ``now`` (None = no floor)."""
        return self.channels.replay_floor(channel, now)

    # ------------------------------------------------------------------ roster (meshview/model/roster.py)

    def peer(self, pid: str) -> Peer | None:
        return self.roster.peers.get(pid)

    @property
    def presence_view(self) -> str:
        return self._status.presence_view

    def _presence_view_to(self, view: str) -> None:
        """The presence watch's view became ``live`` or ``stale`` (the roster's call)."""
        self._status = replace(self._status, presence_view=view)
        self._emit_state()
        self._touch()

    @model_input("presence")
    def watch_delivered(self, received: float | None = None) -> None:
        """The presence watch delivered something (any key, incl. ignored ones)."""
        self.roster.watch_delivered(self.clock() if received is None else received)

    @model_input("presence")
    def apply_presence(self, rec: PresenceRecord, *, received: float | None = None) -> None:
        """Apply a validated presence PUT (key == card.id already checked by the caller)."""
        self.roster.apply_presence(rec, self.clock() if received is None else received)

    @model_input("presence")
    def refresh_clocks(
        self, pid: str, ts: float, activity_since: float | None, status_since: float | None,
        active_at: float | None, *, received: float | None = None,
    ) -> bool:
        """A heartbeat-only rewrite: only the clocks move (:meth:`Roster.refresh_clocks`);
        False (nothing done) when the caller must apply the full record instead."""
        return self.roster.refresh_clocks(pid, ts, activity_since, status_since, active_at,
                                          self.clock() if received is None else received)

    @model_input("presence")
    def apply_presence_delete(
        self, pid: str, *, purge: bool = False, received: float | None = None
    ) -> None:
        """KV DEL/PURGE on a presence key -> that peer offline (kept in the roster)."""
        self.roster.apply_presence_delete(pid, purge, self.clock() if received is None else received)

    @model_input("presence")
    def presence_resync(self, present: Iterable[str], *, received: float | None = None) -> None:
        """A rebound watch finished its initial state: peers absent from it are gone."""
        self.roster.presence_resync(present, self.clock() if received is None else received)

    @model_input("presence")
    def apply_absent(self, pid: str, name: str, role: str | None, last_ts: float | None, *,
                     received: float | None = None) -> bool:
        """A principal the space remembers with no presence: it joins offline (``absent``)."""
        return self.roster.apply_absent(pid, name, role, last_ts,
                                        self.clock() if received is None else received)

    @model_input("presence")
    def apply_stranded_seat(self, pid: str, uid: str | None, name: str, *,
                            received: float | None = None) -> bool:
        """A managed seat running with no presence: it joins offline (``seat-no-presence``)."""
        return self.roster.apply_stranded_seat(pid, uid, name,
                                               self.clock() if received is None else received)

    @model_input("presence")
    def grace(self, now: float | None = None) -> None:
        """After a reconnect: every live peer gets one ttl to heartbeat again."""
        self.roster.grace(self.clock() if now is None else now)

    @model_input("presence")
    def end_initial_load(self) -> None:
        """The first watch snapshot is complete: later joins are live events."""
        self.roster.end_initial_load()

    @property
    def first_load(self) -> bool:
        """The presence watch's first snapshot is still coming in (the roster is filling)."""
        return self.roster.initial_load

    @model_input("presence")
    def sweep(self, now: float | None = None) -> bool:
        """Stale peers go offline; True when the caller should rebind the presence watch."""
        return self.roster.sweep(self.clock() if now is None else now)

    # ------------------------------------------------------------------ runs (meshview/model/runs_state.py)

    @model_input("runs")
    def apply_run_rows(self, instance_id: str, rows: tuple[RunView, ...]) -> None:
        """A ``run-ps`` answer from ``instance_id``: its runs are these."""
        if self.runs.apply_run_rows(instance_id, rows, self.clock()):
            self._touch()

    @model_input("runs")
    def apply_run_status(self, instance_id: str, run_id: str,
                         journal: tuple[JournalRow, ...], pauses: tuple[Pause, ...]) -> None:
        """A ``run-status`` answer: the run's journal and its open pauses now."""
        if self.runs.apply_run_status(instance_id, run_id, journal, pauses, self.clock()):
            self._touch()

    @model_input("runs")
    def set_run_status_error(self, instance_id: str, run_id: str, error: str) -> None:
        """``run-status`` was refused or went unanswered: the run keeps what it showed."""
        if self.runs.set_run_status_error(instance_id, run_id, error):
            self._touch()

    @model_input("runs")
    def set_runs_silent(self, instance_id: str, error: str) -> None:
        """A manager did not answer ``run-ps``: its runs stay, as its last word."""
        if self.runs.set_runs_silent(instance_id, error, self.clock()):
            self._touch()

    @model_input("runs")
    def forget_run_manager(self, instance_id: str) -> None:
        """A manager no longer registered: it and its runs leave."""
        if self.runs.forget_run_manager(instance_id, self.clock()):
            self._touch()

    @model_input("runs")
    def set_runs_unavailable(self, reason: str | None) -> None:
        """This console cannot list runs at all (open mesh, no control path): why, once."""
        if self.runs.set_runs_unavailable(reason):
            self._touch()

    def runs_view(self) -> RunsSnapshot:
        """The runs as an immutable :class:`RunsSnapshot` at the model clock."""
        return self.runs.view(self.clock())

    # ------------------------------------------------------------------ membership, managers

    @model_input("channels")
    def set_membership(
        self, members: Mapping[str, MemberView] | None, feed_observed_at: float | None
    ) -> None:
        """A successful membership read (None members = bucket missing: no daemon)."""
        self._membership = MembershipState(dict(members or {}), feed_observed_at, True, None)
        self._touch()

    @model_input("channels")
    def set_membership_unreadable(self, reason: str) -> None:
        """A failed read keeps the last snapshot; never touches the connection error."""
        self._membership.unreadable = reason
        self._touch()

    @model_input("lifecycle")
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
            from_name=self.roster.names.get(holder_id, f"manager {instance_id[:8]}"),
            from_role="manager",
            text=f"manager {instance_id[:12]} {'up' if up else 'down'}"
            + (f" ({lease.runtime})" if lease.runtime else ""),
            lifecycle="manager-up" if up else "manager-down",
            historical=self.roster.initial_load and up,
        )

    def manager_resync(self, present: Iterable[str]) -> None:
        keep = set(present)
        for iid, m in list(self._managers.items()):
            if m.up and iid not in keep:
                self.apply_manager(iid, up=False)

    # ------------------------------------------------------------------ connection

    @model_input("state")
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

    @model_input("state")
    def set_tap(self, subjects: Sequence[str], dm_visible: bool) -> None:
        self._status = replace(self._status, tap=tuple(subjects), dm_visible=dm_visible)
        self._emit_state("tap")
        self._touch()

    @model_input("state")
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

    @model_input("state")
    def set_server(self, server: str) -> None:
        self._status = replace(self._status, server=server)
        self._touch()

    @model_input("state")
    def set_warning(self, warning: str | None) -> None:
        self._status = replace(self._status, warning=warning)
        self._touch()

    @model_input("state")
    def set_listener_errors(self, count: int, last: str | None) -> None:
        """The observer's listeners (line stream, notifier, chat) have raised ``count`` times;
        ``last`` is the latest, one line. Counted and shown (status bar, a ``state`` line),
        never swallowed."""
        st = self._status
        if count == st.listener_errors and last == st.listener_error:
            return
        self._status = replace(st, listener_errors=count, listener_error=last)
        self._emit_state("listener error")
        self._touch()

    @property
    def status(self) -> ConnectionStatus:
        return self._status

    def _emit_state(self, detail: str | None = None) -> None:
        s = self._status
        self._emit(StateEvent(s.connection, s.presence_view, s.dm_visible, self.clock(), detail,
                              s.lagging, s.dropped, s.listener_errors, s.listener_error))

    # ------------------------------------------------------------------ time

    @model_input("time")
    def tick(self, now: float | None = None) -> None:
        """Advance time: flush due bursts, roll rate buckets, run the presence sweep.
        The observer calls it every ~75 ms; it marks the model dirty once a second so ages
        refresh."""
        now = self.clock() if now is None else now
        for key, b in list(self._bursts.items()):
            if now - b.opened > self.burst_ms:
                self._flush_burst(key)
        rates = self._rates
        before = (rates.buckets(), rates.per_sec(now))
        rates.roll(now)
        if (rates.buckets(), rates.per_sec(now)) != before:
            self._touch()
        if self._snap is not None and now - self._snap.now >= 1000.0:
            self._touch()
        if now - self._stall_checked >= 1000.0:
            self._stall_transitions(now)

    @model_input("seat")
    def seat_activity(self, pid: str, *, session_open: bool, output_at: float | None = None,
                      active_at: float | None = None, received: float | None = None) -> None:
        """What the console sees of a managed seat: a session open on it, its last terminal
        output (receipt time), the manager's seat row's ``activeAt``: facts for the verdict."""
        now = self.clock() if received is None else received
        self._stall.seat(pid, now, session_open=session_open, output_at=output_at)
        self._stall.active_at(pid, now, active_at)

    @property
    def stalled_ids(self) -> frozenset[str]:
        """The agents the last once-a-second check found stalled (cheap: no verdict is made)."""
        return self._stalled_ids

    def stalled(self, pid: str | None = None, now: float | None = None) -> dict[str, Stalled]:
        """The stalled verdicts at ``now`` (the model clock): agent id -> :class:`Stalled`, for
        every agent claiming ``working`` whose facts have not moved for ``stall_ms``."""
        now = self.clock() if now is None else now
        rows = self.roster.peers
        peers = [rows[pid]] if pid is not None and pid in rows else (
            [] if pid is not None else rows.values())
        out: dict[str, Stalled] = {}
        quiet_from, threshold = self._stall.last_moved, self.stall_ms
        for p in peers:
            if (p.status == "working" and p.kind == "agent"
                    and now - quiet_from(p.id, p.first_seen) >= threshold):
                v = verdict(p.status, self._stall.facts(p.id, p.first_seen), now, self.stall_ms)
                if v is not None:
                    out[p.id] = v
        return out

    def _next_stall(self, now: float, stalled: frozenset[str]) -> float:
        """The earliest time an agent not in ``stalled`` could be judged stalled: facts only
        move forward, and a status change moves the presence fact, so until then only the
        stalled ones can change and the once-a-second check need not walk 10k rows."""
        quiet_from, due = self._stall.last_moved, now + self.stall_ms
        for p in self.roster.peers.values():
            if p.status == "working" and p.kind == "agent" and p.id not in stalled:
                t = quiet_from(p.id, p.first_seen) + self.stall_ms
                if t < due:
                    due = t
        return due

    def _stall_transitions(self, now: float) -> None:
        """Once a second: an agent that became stalled gets a presence line (``reason``
        ``stalled``); any change of the set marks the model dirty."""
        prev, self._stall_checked = self._stall_checked, now
        if prev <= now < self._stall_due:  # nobody can have newly stalled: re-judge the stalled ones
            ids = frozenset(pid for pid in self._stalled_ids if self.stalled(pid, now))
        else:
            ids = frozenset(self.stalled(now=now))
            self._stall_due = self._next_stall(now, ids)
        if ids == self._stalled_ids:
            return
        for pid in sorted(ids - self._stalled_ids):
            self.roster.presence_event("update", self.roster.peers[pid], now, "stalled")
        self._stalled_ids = ids
        self._touch()

    # ------------------------------------------------------------------ snapshot

    def snapshot(self) -> Snapshot:
        """The current state as an immutable :class:`Snapshot` (cached until a change)."""
        if self._snap is not None:
            return self._snap
        now = self.clock()
        self._rates.roll(now)
        roster = self.roster
        roster.order()
        labels = roster.labels()
        label = labels.label
        # heartbeat-only rewrites replace Peer objects without re-sorting: refresh them
        get = roster.peers.__getitem__
        agents = tuple(map(get, roster.agent_ids))
        endpoints = tuple(map(get, roster.endpoint_ids))

        spans = roster.spans
        counts = {s: (spans[s][1] - spans[s][0] if s in spans else 0) for s in STATUSES}
        live = tuple(agents[lo:hi] for s, (lo, hi) in spans.items() if s != "offline")
        needs: list[NeedsYou] = []
        lo, hi = spans.get("waiting", (0, 0))
        # the waiting block is in roster order, which within a block is (name.lower(), id):
        # NEEDS-YOU's order, so no sort (built positionally: 500 of them at 10k agents)
        for p in agents[lo:hi]:
            c = p.condition
            ca = now - c.since if c and c.since else None
            sa = now - p.status_since if p.status_since else None
            ha = now - p.ts
            needs.append(NeedsYou(
                p.id, p.name, p.role, c.code if c else None, c.message if c else None,
                None if ca is None else ca if ca > 0.0 else 0.0,
                None if sa is None else sa if sa > 0.0 else 0.0,
                ha if ha > 0.0 else 0.0, p.activity, label(p.id) or p.name,
            ))
        signals = Signals(
            counts=tuple((s, counts[s]) for s in STATUSES), needs_you=tuple(needs), live=live)
        meter = self._rates
        rates = Rates(msgs_per_sec=meter.per_sec(now), buckets=meter.buckets(), total=meter.total)
        snap = Snapshot(
            version=self.version, now=now, status=self._status, agents=agents,
            endpoints=endpoints, channels=self.channels.infos(),
            feed=self._ring.rows(), feed_base=self._ring.base, signals=signals, rates=rates,
            dms=self._dms.conversations(lambda pid: labels.label(pid) or pid), dm_log=tuple(self._dms.log),
            topology=self._topology.topology(),
            rejections=tuple(sorted(self._rejections.items())),
            membership=self._membership.view(now),
            managers=tuple(self._managers[k] for k in sorted(self._managers)),
            names=ReadOnlyNames(roster.names), order=roster.peer_ids, labels=labels,
            cuts=tuple(sorted(self._cuts.items())),
        )
        self._snap = snap
        self.dirty = False
        return snap
