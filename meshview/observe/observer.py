"""The invisible observer: reads one space and feeds a :class:`~meshview.model.mesh.MeshModel`.

It registers no presence and publishes nothing. Inputs:

* live taps (core subscriptions): the whole space on an open mesh, ``chat.>``/``inst.>``/
  ``svc.>`` separately under admin credentials, ``chat.>`` alone for observer credentials.
  A subscription the broker denies (async ``Permissions Violation for Subscription``) is
  narrowed away, never fatal; ``dm_visible`` says whether DMs can still be seen;
* the presence KV watch with the offline rules of wire.md §4 (the model applies them; this
  module runs the sweep, rebinds the watch when it goes silent or after a reconnect);
* the channel registry KV watch, ``STREAM.INFO`` counts per channel (polled), newest-N history
  per channel and DM history through ephemeral consumers that are always deleted;
* the membership feed and manager leases when readable.

NATS callbacks only enqueue the raw frame on a bounded deque; a drain task decodes and applies
the backlog in time-boxed slices (``SLICE_MS``), yielding to the event loop between slices,
and a ticker publishes to listeners at most once per ``BATCH_MS``. When input outruns what we
can apply, the deque's cap drops the oldest frames: counted in ``status.dropped`` and shown as
``status.lagging`` until the backlog is worked off, never silent and never unbounded.

The reads themselves live apart: KV watches in kvwatch.py, what the side buckets mean in
buckets.py, history in history.py; every subject and rule comes from ``meshview.wire``.

Size: over 500 lines because it is the one subscriber to every live tap and KV watch; history,
buckets, KV watches and absent-agent derivation already live in their own modules.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from nats.aio.client import Client as NATS

from meshview.errors import swallowed
from meshview.observe.buckets import ManagerLeases, MembershipFold, RegistryFold
from meshview.link.connect import events_of, is_transient, short_error
from meshview.observe.history import History
from meshview.observe.kvwatch import KvWatch
from meshview.model.mesh import BATCH_MS, MeshModel
from meshview.model.snapshot import PresenceRecord
from meshview.tasks import TaskOwner, reap
from meshview.wire import (
    Applied,
    Delivery,
    clock_template,
    decode_applied,
    decode_presence,
    dm_visible,
    is_event_channel,
    match_clocks,
    parse_subject,
    space_pattern,
    tap_subjects,
)
from meshview.wire.names import bucket_names, chat_stream, dm_stream, space_token
from meshview.wire.subjects import DELIVERY_KINDS

Listener = Callable[[MeshModel], Awaitable[None] | None]


def _template_bytes(t: Any) -> int:
    """The bytes a clock template holds (its fixed segments and the tail after its ts)."""
    return sum(map(len, t[0])) + len(t[3] or b"")

log = logging.getLogger("cotal.observer")

_DENIED_SUB = re.compile(r"permissions violation for subscription to \"?([^\"\s]+)\"?", re.I)
SWEEP_MS = 250.0
CHANNEL_POLL_S = 2.0
POLL_COST_FACTOR = 20.0  # the channel poll waits at least 20x as long as the last one took
QUEUE_CAP = 50_000  # raw frames (~0.5 KB each, a few seconds of a flood): the memory bound
QUEUE_BYTES = 16 * 1024 * 1024  # ... and in bytes, so a backlog of near-1 MiB messages is bounded too
SUBJECT_MEMO_CAP = 200_000  # stored CHAT subjects whose channel the poll remembers (one per
# sender×channel pair: 10k agents over 100 channels reach tens of thousands)
LAST_PRESENCE_CAP = 200_000  # presence keys whose last applied record's template is kept
LAST_PRESENCE_BYTES = 16 * 1024  # ... and only a record this small: a 900 KiB card kept per key
# held ~130 MB for 150 keys (the fuzz-memory bound); a large record is simply applied in full
LAST_PRESENCE_TOTAL = 32 * 1024 * 1024  # ... and this many bytes of templates in all: 20k live
# keys (the roster's cap) of 16 KiB records held ~640 MB; 10k honest ~0.6 KB records take ~12 MB
SLICE_MS = 8.0  # longest stretch the drain applies before yielding to the loop
TAP_YIELD = 256  # the tap callback yields after this many frames in one stretch
LAG_HIGH = 0.25  # backlog fraction of the cap that turns ``lagging`` on ...
LAG_LOW = 0.01  # ... and the fraction it must fall under to turn it off again


@dataclass
class ObserverOptions:
    """``tap``: ``auto`` (open mesh -> whole space, credential -> admin taps), ``open``,
    ``admin`` or ``chat``. ``backfill``: newest N per channel (0 = live only)."""

    tap: str = "auto"
    dms: bool = True
    backfill: int = 50
    dm_backfill: int = 1000
    channel_poll_s: float = CHANNEL_POLL_S
    batch_ms: float = BATCH_MS
    history_timeout: float = 5.0
    queue_cap: int = QUEUE_CAP
    queue_bytes: int = QUEUE_BYTES
    slice_ms: float = SLICE_MS


WATERMARK_TIMEOUT_S = 2.0
CATCHUP_SLACK_MS = 2000  # clock skew between publishers and us when judging "during the gap"
# a start-up history read JetStream did not answer (a cluster electing leaders after a node
# died) is asked again after each of these waits, the live view running meanwhile
PREFILL_RETRY_S = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)


class Observer:
    """Runs every read of one space into ``model``. ``await start()``; ``await stop()``."""

    def __init__(
        self, nc: NATS, space: str, model: MeshModel | None = None, *,
        options: ObserverOptions | None = None, has_credential: bool = False,
    ) -> None:
        self.nc = nc
        self.js = nc.jetstream(timeout=5.0)
        self.space = space_token(space)
        self.opts = options or ObserverOptions()
        self.model = model or MeshModel(self.space)
        self.has_credential = has_credential
        self.buckets = bucket_names(self.space)
        self._listeners: list[Listener] = []
        self.listener_errors = 0  # times a listener raised (also in ``model.status``)
        self.last_listener_error: str | None = None  # the last of them, one line
        self._q: deque[tuple] = deque()
        self._q_bytes = 0  # payload bytes queued in ``_q`` (bounded by ``queue_bytes``)
        self._wake = asyncio.Event()
        self._live_open = asyncio.Event()
        self._subs: dict[str, Any] = {}
        self._denied: set[str] = set()
        self._tasks: list[asyncio.Task] = []
        self._owned = TaskOwner("observer")  # one-off rebinds and polls, cancelled by stop()
        self._closing = False
        self._started = False
        self._last_publish = 0.0
        self._last_rebind = 0.0
        self._rebinding = False
        self._said_stale = False  # we set the connection ``stale``: a delivery clears it
        self.registry = RegistryFold(self.model, self.buckets.channels)
        self.membership = MembershipFold(self.model, lambda: self.nc.is_connected)
        self.managers = ManagerLeases(self.model, self.buckets.manager)
        self.watermark: dict[str, int] = {}
        self._subject_channel: dict[str, str | None] = {}  # poll memo, see SUBJECT_MEMO_CAP
        # per presence key, the bytes of the record the roster holds cut around its clocks
        # (live peers only, wire.clock_template): a later record that is those bytes with
        # other clock digits just moves the peer's clocks, with no decode
        self._clock_templates: dict[str, Any] = {}
        self._template_total = 0  # their bytes (LAST_PRESENCE_TOTAL)
        # the keys whose template is of a refused record: the refusal was said then, so their
        # heartbeats are counted without a rejected line each (a subset of the templates' keys)
        self._refused_said: set[str] = set()
        self.history = History(self.js, self.space, self.model, timeout=self.opts.history_timeout)
        self.prefill_done = asyncio.Event()
        self.queue_dropped = 0  # dropped since the model was last told
        self.dropped_total = 0
        self.slices = 0  # drain slices run (a backlog longer than one slice takes several)
        self._tap_run = 0
        self._lagging = False
        def kv(bucket: str, entry: Any, ready: Any, error: Any = lambda r, e: None) -> KvWatch:
            return KvWatch(nc, self.js, bucket, entry, ready, error, lambda: self._closing)

        self._presence = kv(self.buckets.presence, self._on_presence, self._on_presence_ready,
                            self._on_presence_error)
        self._channels = kv(self.buckets.channels, self.registry.on_entry, self.registry.on_ready)
        self._membership = kv(self.buckets.membership, self.membership.on_entry,
                              self.membership.on_ready, self.membership.on_error)
        self._managers = kv(self.buckets.manager, self.managers.on_entry, self.managers.on_ready)
        self._watches = [self._presence, self._channels, self._membership, self._managers]
        self._grace_next_ready = False
        self._disconnected_at: float | None = None
        self._catchup: asyncio.Task | None = None

    # ------------------------------------------------------------------ public

    def add_listener(self, fn: Listener) -> None:
        """Called with the model after changes, at most once per ``batch_ms`` (and once more
        on stop and after a reconnect's catch-up). One that raises is counted in
        :attr:`listener_errors`, logged to ``cotal.observer`` and told to the model (the status
        bar, the line stream's ``state`` line); the others still run."""
        self._listeners.append(fn)

    @property
    def dm_visible(self) -> bool:
        return self.model.status.dm_visible

    @property
    def tap_subjects(self) -> tuple[str, ...]:
        return tuple(s for s in self._subs if s not in self._denied)

    @property
    def dm_history_error(self) -> str | None:
        """Why the DM backfill was refused (the DM lens is then live-only), if it was."""
        return self.history.dm_error

    # -- for tests and diagnostics (never on the hot path) -------------------------------

    @property
    def queued(self) -> int:
        """Frames taken off the socket and not yet applied (bounded by ``queue_cap``)."""
        return len(self._q)

    @property
    def queued_bytes(self) -> int:
        """Payload bytes of the frames :attr:`queued` (bounded by ``queue_bytes``)."""
        return self._q_bytes

    @property
    def started(self) -> bool:
        """:meth:`start` has finished (taps, watches and the prefill are in)."""
        return self._started

    def tap_plan(self) -> list[str]:
        """The subjects :meth:`start` taps, by the options and the credential (the wire's rule)."""
        return self._tap_plan()

    def feed_presence(self, e: Any, initial: bool = False) -> None:
        """Hand one presence KV entry (``key``, ``value``, ``operation``) to the roster as the
        watch does: how a test drives the presence path without a bucket."""
        self._on_presence(e, initial)

    def tap_subscriptions(self) -> list[Any]:
        """The live taps' subscriptions (what a test checks are direct on our client)."""
        return list(self._subs.values())

    def queued_frames(self) -> list[bytes]:
        """A copy of the queued frames' payloads, oldest first (what a test reads)."""
        return [f[1] for f in self._q]

    def hold_drain(self) -> None:
        """Hold the apply of live frames (they queue, bounded), as during the history
        prefill: how a test builds a known backlog."""
        self._live_open.clear()

    def release_drain(self) -> None:
        """Let the held frames be applied (after :meth:`hold_drain`)."""
        self._live_open.set()
        self._wake.set()

    async def start(self) -> None:
        ev = events_of(self.nc)
        ev.on_error.append(self._on_nats_error)
        ev.on_disconnect.append(self._on_disconnect)
        ev.on_reconnect.append(self._on_reconnect)
        ev.on_close.append(self._on_close)
        # watermark before subscribing (SPEC §7 step 1); both at once, and briefly: a scoped
        # credential is refused DM stream info, and a refused request only ends by timeout
        async def mark(st: str) -> None:
            try:
                info = await asyncio.wait_for(self.js.stream_info(st), WATERMARK_TIMEOUT_S)
                self.watermark[st] = info.state.last_seq
            except Exception:  # noqa: BLE001 - no watermark: history is read without one [counted: COTAL_LOG]
                swallowed("meshview.observe.observer:Observer.start.mark")
        await asyncio.gather(mark(chat_stream(self.space)), mark(dm_stream(self.space)))
        await self._subscribe_taps()
        self.model.set_connection("connected")
        for w in self._watches:
            w.start()
        self._tasks.append(asyncio.create_task(self._drain(), name="observer:drain"))
        self._tasks.append(asyncio.create_task(self._ticker(), name="observer:tick"))
        await self._poll_channels()
        try:
            await asyncio.wait_for(self._channels.ready.wait(), 3.0)
        except asyncio.TimeoutError:
            pass
        self._tasks.append(asyncio.create_task(self._poll_loop(), name="observer:poll"))
        if self.opts.backfill > 0:
            try:
                await self._prefill(strict=True)
            except Exception as e:  # noqa: BLE001 - history is best effort
                self.model.set_warning(f"history: {short_error(e)}")
                if is_transient(e):
                    self._tasks.append(asyncio.create_task(self._prefill_later(),
                                                           name="observer:prefill"))
        self.prefill_done.set()
        self._live_open.set()
        self._wake.set()
        try:
            await asyncio.wait_for(self._presence.ready.wait(), 3.0)
        except asyncio.TimeoutError:
            pass
        # in the background, and only against a complete roster (never a partial one)
        self._tasks.append(asyncio.create_task(self._add_absent(), name="observer:absent"))
        self._started = True

    async def stop(self) -> None:
        self._closing = True
        ev = events_of(self.nc)
        # one list per signature, so one line each (a loop over the pairs has no single type)
        if self._on_nats_error in ev.on_error:
            ev.on_error.remove(self._on_nats_error)
        for lst, fn in ((ev.on_disconnect, self._on_disconnect), (ev.on_reconnect, self._on_reconnect),
                        (ev.on_close, self._on_close)):
            if fn in lst:
                lst.remove(fn)
        await reap(self._tasks)
        self._tasks.clear()
        await self._owned.close()
        for w in self._watches:
            await w.stop()
        for s in list(self._subs.values()):
            await self._unsub(s)
        self._subs.clear()
        self._apply_pending()
        self.model.flush_bursts()
        await self._publish(force=True)

    # ------------------------------------------------------------------ taps

    def _tap_plan(self) -> list[str]:
        mode = self.opts.tap
        if not self.opts.dms:
            mode = "chat"
        if mode == "auto":
            mode = "admin" if self.has_credential else "open"
        return tap_subjects(self.space, admin=mode != "chat", open_mesh=mode == "open")

    async def _subscribe_taps(self) -> None:
        for subj in self._tap_plan():
            await self._sub(subj)
        for _ in range(2):  # a denial arrives before the PONG; a second round trip covers
            try:            # a PONG that answered an earlier PING (seen under JWT auth)
                await self.nc.flush(timeout=5)
            except Exception:  # noqa: BLE001 - a flush that fails leaves the taps to the next PONG [counted: COTAL_LOG]
                swallowed("meshview.observe.observer:Observer._subscribe_taps")
        self._publish_tap()

    async def _sub(self, subj: str) -> None:
        if subj in self._subs:
            return
        sub = self._subs[subj] = await self.nc.subscribe(
            subj, cb=self._on_tap, pending_msgs_limit=1_000_000,
            pending_bytes_limit=512 * 1024 * 1024,
        )
        direct = getattr(self.nc, "direct", None)
        if direct is not None:  # our client: frames go from its parser straight to the queue
            direct(sub, self._tap_frame, headers=False)

    async def _unsub(self, sub: Any) -> None:
        undirect = getattr(self.nc, "undirect", None)
        if undirect is not None:
            undirect(sub)
        try:
            await sub.unsubscribe()
        except Exception:  # noqa: BLE001 - teardown of a subscription that is ending anyway [counted: COTAL_LOG]
            swallowed("meshview.observe.observer:Observer._unsub")

    def _publish_tap(self) -> None:
        live = [s for s in self._subs if s not in self._denied]
        self.model.set_tap(live, dm_visible(live, self.space))

    async def _on_nats_error(self, e: Exception) -> None:
        m = _DENIED_SUB.search(str(e))
        if not m:
            if "permissions violation" not in str(e).lower():
                self.model.set_warning(short_error(e))
            return
        # nats-py lower-cases the server's -ERR text: match our subjects case-insensitively
        # (a space named ``Team`` taps ``cotal.Team.inst.>``, denied as ``cotal.team.inst.>``)
        said = m.group(1)
        subj = next((s for s in self._subs if s.lower() == said.lower()), said)
        if subj not in self._subs or subj in self._denied:
            return
        self._denied.add(subj)
        await self._unsub(self._subs.pop(subj))
        if subj == space_pattern(self.space):
            # the whole-space tap is denied under auth: fall back to the admin taps
            for t in tap_subjects(self.space, admin=self.opts.dms):
                await self._sub(t)
        self._publish_tap()

    async def _on_tap(self, msg: Any) -> None:
        # The callback of a client that cannot hand frames over directly (``_tap_frame``)
        self._tap_frame(msg.subject, "", msg.data, None)
        # nats-py runs this callback for every queued frame without yielding; bound that run
        self._tap_run += 1
        if self._tap_run >= TAP_YIELD:
            self._tap_run = 0
            await asyncio.sleep(0)

    def _tap_frame(self, subject: str, reply: str, data: bytes, headers: Any) -> None:
        # One tap frame: one bounded append. Decoding happens in the drain's slices, so a
        # backlog is raw bytes (few GC-tracked objects) and an overflow wastes no work.
        q = self._q
        self._q_bytes += len(data)
        while q and (len(q) >= self.opts.queue_cap or self._q_bytes > self.opts.queue_bytes):
            # the oldest frame goes: the view stays current, the gap is counted
            self._q_bytes -= len(q.popleft()[1])
            self.queue_dropped += 1
        q.append((subject, data))
        if not self._wake.is_set():
            self._wake.set()

    async def _drain(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._live_open.is_set():
                await self._live_open.wait()
            self._tap_run = 0
            while self._q:
                self._apply_pending(self.opts.slice_ms / 1000.0)
                await asyncio.sleep(0)  # taps, timers and the UI run between slices
            if self._lagging:
                self._note_backlog(len(self._q))  # drained: the flag clears (drops stay counted)

    def _apply_pending(self, budget: float | None = None) -> int:
        """Decode and apply queued frames in arrival order: all of them, or as many as fit in
        ``budget`` seconds (checked every 32 frames). Returns how many were applied."""
        q = self._q
        m = self.model
        now = m.clock()
        deadline = None if budget is None else time.perf_counter() + budget
        n = 0
        pop = q.popleft
        apply = m.apply_message
        # a run of frames on one subject (a busy sender) splits it once; two locals, whatever
        # the subjects: nothing a peer sends grows this
        last_subject, last_ok = "", False
        while q:
            k = min(32, len(q))
            n += k
            nbytes = 0
            for _ in range(k):
                subject, data = pop()
                nbytes += len(data)
                if subject != last_subject:
                    toks = subject.split(".", 3)
                    last_subject = subject
                    last_ok = len(toks) >= 3 and toks[2] in DELIVERY_KINDS
                if not last_ok:
                    continue  # endpoint/session rails and the like: not messages, not counted
                d = decode_applied(subject, data, now)  # one value per delivery
                if type(d) is Applied:
                    apply(d)
                elif type(d) is Delivery:  # a field was cut to its bound: counted, then applied
                    m.note_cuts(d.cuts)
                    apply(d.applied(now, False))
                else:
                    m.apply_rejection(d.reason, subject)
            self._q_bytes -= nbytes
            if deadline is not None and time.perf_counter() >= deadline:
                break
        self.slices += 1
        self._note_backlog(len(q))
        return n

    def _note_backlog(self, pending: int) -> None:
        dropped, self.queue_dropped = self.queue_dropped, 0
        self.dropped_total += dropped
        cap = self.opts.queue_cap
        if self._lagging:
            lagging = pending > cap * LAG_LOW or (dropped > 0)
        else:
            lagging = pending >= cap * LAG_HIGH or dropped > 0
        self._lagging = lagging
        if dropped or lagging != self.model.status.lagging:
            self.model.set_backlog(lagging=lagging, dropped=dropped)

    def _apply_delivery(self, d: Delivery, historical: bool, now: float) -> bool:
        if d.cuts:
            self.model.note_cuts(d.cuts)
        return self.model.apply_message(d.applied(now, historical))

    # ------------------------------------------------------------------ time

    async def _ticker(self) -> None:
        last_sweep = 0.0
        period = self.opts.batch_ms / 1000.0
        while True:
            await asyncio.sleep(period)
            m = self.model
            now = m.clock()
            m.tick(now)
            if now - last_sweep >= SWEEP_MS:
                last_sweep = now
                if m.sweep(now) and self.nc.is_connected:
                    self._maybe_rebind_presence(now)
                self.managers.expire(now)
            self.membership.flush()
            await self._publish()

    async def _publish(self, force: bool = False) -> None:
        if not (self.model.dirty or force) or not self._listeners:
            return
        self.model.dirty = False
        errors = self.listener_errors
        for fn in list(self._listeners):
            try:
                r = fn(self.model)
                if asyncio.iscoroutine(r):
                    await r
            except Exception as e:  # noqa: BLE001 - one bad listener never stops the others
                self.listener_errors += 1
                self.last_listener_error = _describe(fn, e)
                log.exception("listener %s failed", _name_of(fn))
        if self.listener_errors != errors:  # the status bar and the line stream say it
            self.model.set_listener_errors(self.listener_errors, self.last_listener_error)

    def _maybe_rebind_presence(self, now: float) -> None:
        if self._rebinding or now - self._last_rebind < self.model.ttl_ms:
            return
        self._last_rebind = now
        self._owned.spawn(self._rebind_presence(), "rebind-presence")

    async def _rebind_presence(self) -> None:
        self._rebinding = True
        try:
            await self._presence.rebind()
            try:
                await asyncio.wait_for(self._presence.ready.wait(), 3.0)
            except asyncio.TimeoutError:
                pass
            if self.model.presence_view == "stale" and self.nc.is_connected:
                self.model.set_connection("stale", detail="presence watch not answering")
                self._said_stale = True
        finally:
            self._rebinding = False

    async def presence_loaded(self) -> None:
        """Returns once the presence watch has delivered the bucket's current entries (its
        ``ready`` event is made anew when the watch starts or rebinds: the current one)."""
        while True:
            try:
                await asyncio.wait_for(self._presence.ready.wait(), 0.5)
                return
            except asyncio.TimeoutError:
                continue

    # ------------------------------------------------------------------ presence

    def _on_presence(self, e: Any, initial: bool) -> None:
        m = self.model
        now = m.clock()
        op = e.operation or "PUT"
        lp = self._clock_templates
        if op == "PUT" and e.key in lp:
            # the common case at scale: the last applied record again with new clock digits
            c = match_clocks(lp[e.key], e.value)
            # c[0] is the record's ts, never None (a presence record without one is refused)
            if c is not None and c[0] is not None:
                if m.refresh_clocks(e.key, float(c[0]), c[1], c[2], c[3], received=now):
                    if self._said_stale:
                        self._stale_over()
                    return
                # a refused key's heartbeat (past the live cap: 10k of 30k agents, every 2 s)
                # is refused again as ``apply_presence`` would refuse it, without the decode
                refused = m.roster.live_refusal(e.key, float(c[0]), now)
                if refused is not None:
                    m.watch_delivered(now)
                    # said once per refused record: a template of an accepted record (a
                    # peer forgotten since, back while the cap is full) says it now
                    said = e.key in self._refused_said
                    m.apply_rejection(refused, e.key, repeat=said)
                    self._refused_said.add(e.key)
                    if self._said_stale:
                        self._stale_over()
                    return
        d = decode_presence(e.key, op, e.value, int(now), None, ttl_ms=int(m.ttl_ms))
        if d.action == "ignore":
            m.watch_delivered(now)
        elif d.action == "drop":
            m.watch_delivered(now)
            m.apply_rejection(f"presence:{d.reason}", f"$KV.{self.buckets.presence}.{e.key}")
        elif d.action == "mark-offline":
            self._forget_template(e.key)
            m.apply_presence_delete(e.key, purge=op == "PURGE", received=now)
        elif d.presence is not None:
            p = d.presence
            if d.cuts:
                m.note_cuts(d.cuts)
            m.apply_presence(PresenceRecord.from_wire(p), received=now)
            held = m.peer(e.key)
            t = None
            if len(e.value or b"") <= LAST_PRESENCE_BYTES and (
                    (held is not None and held.status != "offline" and held.ts == float(p.ts))
                    # refused (live cap): its next heartbeats are matched and refused undecoded
                    or (held is None and p.status != "offline" and not d.cuts
                        and m.roster.live_refusal(e.key, float(p.ts), now) is not None)):
                t = clock_template(e.value, p)
            self._forget_template(e.key)
            if t is not None:
                size = _template_bytes(t)
                if len(lp) >= LAST_PRESENCE_CAP or self._template_total + size > LAST_PRESENCE_TOTAL:
                    lp.clear()  # bounded; the next record of each key is applied in full
                    self._refused_said.clear()
                    self._template_total = 0
                lp[e.key] = t
                self._template_total += size
                if held is None:  # refused, and said by apply_presence just now
                    self._refused_said.add(e.key)
        if self._said_stale:
            self._stale_over()

    def _forget_template(self, key: str) -> None:
        self._refused_said.discard(key)
        t = self._clock_templates.pop(key, None)
        if t is not None:
            self._template_total -= _template_bytes(t)

    def _stale_over(self) -> None:
        """A presence entry arrived after the watch was said stale: it answers again."""
        self._said_stale = False
        if self.model.status.connection == "stale":
            self.model.set_connection("connected")


    def _on_presence_ready(self, keys: set[str]) -> None:
        m = self.model
        now = m.clock()
        if self._grace_next_ready:
            # after a reconnect peers get one ttl to heartbeat again before the sweep judges
            self._grace_next_ready = False
            m.grace(now)
        m.watch_delivered(now)
        m.presence_resync(keys, received=now)
        m.end_initial_load()
        if m.status.connection == "stale":
            m.set_connection("connected")

    async def _add_absent(self) -> None:
        """Agents that left before we started (their presence keys expired) join the roster
        offline, derived from what the space retains (meshview/observe/absent.py)."""
        from meshview.observe.absent import find_absent

        await self._presence.ready.wait()
        try:
            found = await find_absent(self.js, self.space, self.history,
                                      (p.id for p in self.model.snapshot().peers),
                                      dms=self.dm_visible and self.opts.dms)
        except Exception as e:  # noqa: BLE001 - a courtesy read never stops the observer
            self.model.set_warning(f"departed agents: {short_error(e)}")
            return
        now = self.model.clock()
        for a in found:
            self.model.apply_absent(a.id, a.name, a.role, a.last_ts, received=now)

    def _on_presence_error(self, reason: str, e: Exception) -> None:
        if reason == "missing":
            self.model.set_warning(f"presence bucket {self.buckets.presence} not found")

    # ------------------------------------------------------------------ channels

    async def _poll_loop(self) -> None:
        cost = 0.0
        while True:
            # every ``channel_poll_s``, or less often when one poll is costly (a space with
            # tens of thousands of sender×channel subjects): at most 1/POLL_COST_FACTOR busy
            await asyncio.sleep(max(self.opts.channel_poll_s, cost * POLL_COST_FACTOR))
            if self.nc.is_connected:
                t0 = time.perf_counter()
                await self._poll_channels()
                cost = time.perf_counter() - t0

    async def _poll_channels(self, *, strict: bool = False) -> dict[str, int]:
        """Messages stored per channel (none when the stream cannot be read; ``strict``: a
        failure raises, so a history read can tell it from an empty stream)."""
        try:
            info = await self.js.stream_info(chat_stream(self.space), subjects_filter=">")
        except Exception:
            if strict:
                raise
            return {}
        counts: dict[str, int] = {}
        memo = self._subject_channel
        if len(memo) > SUBJECT_MEMO_CAP:
            memo.clear()  # bounded: a space with more sender×channel subjects re-parses
        for subj, n in (info.state.subjects or {}).items():
            if subj in memo:
                ch = memo[subj]
            else:
                ch = memo[subj] = self._counted_channel(subj)
            if ch is not None:
                counts[ch] = counts.get(ch, 0) + n
        self.model.set_retained_counts(counts)
        return counts

    @staticmethod
    def _counted_channel(subj: str) -> str | None:
        """The channel a stored CHAT subject counts towards, or None (not a channel delivery,
        or an event channel: filtered before any history fetch)."""
        ps = parse_subject(subj)
        if not ps.deliver or ps.kind != "chat" or not ps.channel:
            return None
        return None if is_event_channel(ps.channel) else ps.channel

    # ------------------------------------------------------------------ history

    async def _prefill(self, since_ts: float | None = None, *, strict: bool = False) -> None:
        """History prefill at start; after a reconnect (``since_ts``) the same read fills the
        gap: rows older than the outage are skipped, rows already seen dedupe by (sender, id).
        ``strict``: a stream that did not answer raises (see :func:`is_transient`)."""
        counts = await self._poll_channels(strict=strict)
        chans = [c for c in sorted(counts) if not is_event_channel(c)]
        limit = self.opts.backfill
        if since_ts is not None:
            limit = max(limit, 200)
        dm_limit = 0
        if self.dm_visible and self.opts.dms:
            dm_limit = min(self.opts.dm_backfill, max(limit, 1) if limit < 1000 else 1000)
        read = await self.history.backfill(chans, limit=limit, since_ts=since_ts,
                                           dm_limit=dm_limit)
        recv = self.model.clock()
        for d in read.rows:
            self._apply_delivery(d, True, recv)
        self.model.flush_bursts()
        if read.failed is not None:
            # what was read stands; the read is not whole, so the caller says so (and the
            # start-up prefill asks again: rows read twice dedupe by (sender, id))
            raise read.failed

    # ------------------------------------------------------------------ connection

    async def _on_disconnect(self) -> None:
        if not self._closing:
            if self._disconnected_at is None:
                self._disconnected_at = self.model.clock()
            self.model.set_connection("reconnecting")

    async def _on_reconnect(self) -> None:
        if self._closing:
            return
        self.model.set_connection("connected")
        self._grace_next_ready = True
        self._last_rebind = self.model.clock()
        for w in self._watches:
            await w.rebind()
        since, self._disconnected_at = self._disconnected_at, None
        if since is not None:
            # a failover or outage: what other nodes stored meanwhile is read back, once
            self._catchup = asyncio.create_task(self._catch_up(since - CATCHUP_SLACK_MS))
        else:
            self._owned.spawn(self._poll_channels(), "poll-channels")

    async def _prefill_later(self) -> None:
        """The start-up prefill again, after each of ``PREFILL_RETRY_S``, until JetStream
        answers: its rows land as history beside the live ones (deduped by (sender, id)) and the
        warning it left goes. Given up after the last wait (the warning stays); a refusal is
        not asked again."""
        for wait in PREFILL_RETRY_S:
            await asyncio.sleep(wait)
            if self._closing:
                return
            try:
                await self._prefill(strict=True)
            except Exception as e:  # noqa: BLE001 - history is best effort
                self.model.set_warning(f"history: {short_error(e)}")
                if is_transient(e):
                    continue
                return
            if (self.model.status.warning or "").startswith("history: "):
                self.model.set_warning(None)
            await self._publish(force=True)
            return

    async def _catch_up(self, since_ts: float) -> None:
        try:
            await self._prefill(since_ts=since_ts)
            await self._publish(force=True)
        except Exception as e:  # noqa: BLE001 - a refused read keeps the live view honest
            self.model.set_warning(f"history catch-up failed: {short_error(e)}")

    async def _on_close(self) -> None:
        self.model.set_connection("closed")


def _name_of(fn: Listener) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _describe(fn: Listener, e: Exception) -> str:
    """A listener's exception in one bounded line: which listener, what was raised."""
    text = " ".join(str(e).split())
    line = f"{_name_of(fn)}: {type(e).__name__}" + (f": {text}" if text else "")
    return line if len(line) <= 200 else line[:199] + "…"
