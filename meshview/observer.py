"""The invisible observer: reads one space and feeds a :class:`~meshview.model.MeshModel`.

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
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import msgspec
from nats.aio.client import Client as NATS
from nats.js import api
from nats.js.errors import BucketNotFoundError, NotFoundError

from meshview import kvwatch
from meshview.connect import events_of
from meshview.model import (
    BATCH_MS,
    ChannelSettings,
    Condition,
    MemberView,
    MeshModel,
    PresenceRecord,
)
from meshview.wire import (
    Delivery,
    decode_channel_config,
    decode_channel_defaults,
    decode_delivery,
    decode_membership,
    decode_presence,
    is_event_channel,
    parse_subject,
    parts_to_text,
)
from meshview.wire.names import bucket_names, chat_stream, dm_stream, space_token

Listener = Callable[[MeshModel], Awaitable[None] | None]

_DENIED_SUB = re.compile(r"permissions violation for subscription to \"?([^\"\s]+)\"?", re.I)
_DELIVERY_KINDS = frozenset(("chat", "inst", "svc"))
SWEEP_MS = 250.0
CHANNEL_POLL_S = 2.0
MANAGER_TTL_MS = 12_000.0
QUEUE_CAP = 50_000  # raw frames (~0.5 KB each, a few seconds of a flood): the memory bound
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
    slice_ms: float = SLICE_MS


class _KvWatch:
    """One KV bucket watch that can be rebound from current state (ordered consumer)."""

    def __init__(
        self, obs: "Observer", bucket: str, on_entry: Callable[[Any, bool], None],
        on_ready: Callable[[set[str]], None], on_error: Callable[[str, Exception], None],
    ) -> None:
        self.obs, self.bucket = obs, bucket
        self.on_entry, self.on_ready, self.on_error = on_entry, on_ready, on_error
        self.task: asyncio.Task | None = None
        self.ready = asyncio.Event()
        self.generation = 0
        self.missing = False

    def start(self) -> None:
        self.generation += 1
        self.ready = asyncio.Event()
        self.task = asyncio.create_task(self._run(self.generation), name=f"watch:{self.bucket}")

    async def rebind(self) -> None:
        await self.stop()
        self.start()

    async def stop(self) -> None:
        t, self.task = self.task, None
        if t is not None:
            t.cancel()
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        # the watch's consumer goes with its generator (``kvwatch.watch`` deletes it)

    async def _run(self, gen: int) -> None:
        delay = 0.2
        while gen == self.generation and not self.obs._closing:
            try:
                await self.obs.js.key_value(self.bucket)  # BucketNotFoundError if absent
                self.missing = False
                keys: set[str] = set()
                initial = True
                async for e in kvwatch.watch(self.obs.nc, self.bucket):
                    if e is None:
                        if initial:
                            initial = False
                            self.on_ready(keys)
                            self.ready.set()
                        continue
                    if initial:
                        if e.operation in (None, "PUT"):
                            keys.add(e.key)
                        else:
                            keys.discard(e.key)
                    self.on_entry(e, initial)
                return  # stopped
            except asyncio.CancelledError:
                raise
            except BucketNotFoundError as e:
                self.missing = True
                self.on_error("missing", e)
                self.ready.set()
                return
            except Exception as e:  # noqa: BLE001 - denied, timeout, broker down: retry
                self.on_error(_short(e), e)
                self.ready.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)


WATERMARK_TIMEOUT_S = 2.0
CATCHUP_SLACK_MS = 2000  # clock skew between publishers and us when judging "during the gap"


def _short(e: BaseException) -> str:
    s = str(e).strip() or type(e).__name__
    return s.splitlines()[0][:200]


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
        self._q: deque[tuple] = deque()
        self._wake = asyncio.Event()
        self._live_open = asyncio.Event()
        self._subs: dict[str, Any] = {}
        self._denied: set[str] = set()
        self._tasks: list[asyncio.Task] = []
        self._closing = False
        self._started = False
        self._last_publish = 0.0
        self._last_rebind = 0.0
        self._rebinding = False
        self._membership_dirty = False
        self._members: dict[str, MemberView] = {}
        self._feed_at: float | None = None
        self._manager_seen: dict[str, float] = {}
        self._registry: dict[str, ChannelSettings] = {}
        self._defaults = ChannelSettings()
        self.watermark: dict[str, int] = {}
        self.dm_history_error: str | None = None
        self.prefill_done = asyncio.Event()
        self.queue_dropped = 0  # dropped since the model was last told
        self.dropped_total = 0
        self.slices = 0  # drain slices run (a backlog longer than one slice takes several)
        self._tap_run = 0
        self._lagging = False
        self._presence = _KvWatch(self, self.buckets.presence, self._on_presence,
                                  self._on_presence_ready, self._on_presence_error)
        self._channels = _KvWatch(self, self.buckets.channels, self._on_registry,
                                  self._on_registry_ready, lambda r, e: None)
        self._membership = _KvWatch(self, self.buckets.membership, self._on_member,
                                    self._on_member_ready, self._on_member_error)
        self._managers = _KvWatch(self, self.buckets.manager, self._on_manager,
                                  self._on_manager_ready, lambda r, e: None)
        self._watches = [self._presence, self._channels, self._membership, self._managers]
        self._grace_next_ready = False
        self._disconnected_at: float | None = None
        self._catchup: asyncio.Task | None = None

    # ------------------------------------------------------------------ public

    def add_listener(self, fn: Listener) -> None:
        """Called with the model after changes, at most once per ``batch_ms``."""
        self._listeners.append(fn)

    @property
    def dm_visible(self) -> bool:
        return self.model.status.dm_visible

    @property
    def tap_subjects(self) -> tuple[str, ...]:
        return tuple(s for s in self._subs if s not in self._denied)

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
            except Exception:
                pass
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
                await self._prefill()
            except Exception as e:  # noqa: BLE001 - history is best effort
                self.model.set_warning(f"history: {_short(e)}")
        self.prefill_done.set()
        self._live_open.set()
        self._wake.set()
        try:
            await asyncio.wait_for(self._presence.ready.wait(), 3.0)
        except asyncio.TimeoutError:
            pass
        self._started = True

    async def stop(self) -> None:
        self._closing = True
        ev = events_of(self.nc)
        for lst, fn in ((ev.on_error, self._on_nats_error), (ev.on_disconnect, self._on_disconnect),
                        (ev.on_reconnect, self._on_reconnect), (ev.on_close, self._on_close)):
            if fn in lst:
                lst.remove(fn)
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        for w in self._watches:
            await w.stop()
        for s in list(self._subs.values()):
            try:
                await s.unsubscribe()
            except Exception:
                pass
        self._subs.clear()
        self._apply_pending()
        self.model.flush_bursts()
        await self._publish(force=True)

    # ------------------------------------------------------------------ taps

    def _tap_plan(self) -> tuple[list[str], bool]:
        s = self.space
        mode = self.opts.tap
        if not self.opts.dms:
            mode = "chat"
        if mode == "auto":
            mode = "admin" if self.has_credential else "open"
        if mode == "open":
            return [f"cotal.{s}.>"], True
        if mode == "admin":
            return [f"cotal.{s}.chat.>", f"cotal.{s}.inst.>", f"cotal.{s}.svc.>"], True
        return [f"cotal.{s}.chat.>"], False

    async def _subscribe_taps(self) -> None:
        subjects, dm = self._tap_plan()
        for subj in subjects:
            await self._sub(subj)
        for _ in range(2):  # a denial arrives before the PONG; a second round trip covers
            try:            # a PONG that answered an earlier PING (seen under JWT auth)
                await self.nc.flush(timeout=5)
            except Exception:
                pass
        self._publish_tap()

    async def _sub(self, subj: str) -> None:
        if subj in self._subs:
            return
        self._subs[subj] = await self.nc.subscribe(
            subj, cb=self._on_tap, pending_msgs_limit=1_000_000,
            pending_bytes_limit=512 * 1024 * 1024,
        )

    def _publish_tap(self) -> None:
        live = [s for s in self._subs if s not in self._denied]
        s = self.space
        dm = any(x in (f"cotal.{s}.>", f"cotal.{s}.inst.>") for x in live)
        self.model.set_tap(live, dm)

    async def _on_nats_error(self, e: Exception) -> None:
        m = _DENIED_SUB.search(str(e))
        if not m:
            if "permissions violation" not in str(e).lower():
                self.model.set_warning(_short(e))
            return
        subj = m.group(1)
        if subj not in self._subs or subj in self._denied:
            return
        self._denied.add(subj)
        sub = self._subs.pop(subj)
        try:
            await sub.unsubscribe()
        except Exception:
            pass
        s = self.space
        if subj == f"cotal.{s}.>":
            # the whole-space tap is denied under auth: fall back to the three admin taps
            for k in ("chat", "inst", "svc"):
                if not (k != "chat" and not self.opts.dms):
                    await self._sub(f"cotal.{s}.{k}.>")
        self._publish_tap()

    async def _on_tap(self, msg: Any) -> None:
        # The transport callback: one bounded append. Decoding happens in the drain's slices,
        # so a backlog is raw bytes (few GC-tracked objects) and an overflow wastes no work.
        q = self._q
        if len(q) >= self.opts.queue_cap:
            q.popleft()  # the oldest frame goes: the view stays current, the gap is counted
            self.queue_dropped += 1
        q.append((msg.subject, msg.data))
        if not self._wake.is_set():
            self._wake.set()
        # nats-py runs this callback for every queued frame without yielding; bound that run
        self._tap_run += 1
        if self._tap_run >= TAP_YIELD:
            self._tap_run = 0
            await asyncio.sleep(0)

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
        while q:
            k = min(32, len(q))
            n += k
            for _ in range(k):
                subject, data = pop()
                toks = subject.split(".", 3)
                if len(toks) < 3 or toks[2] not in _DELIVERY_KINDS:
                    m.count_tap()  # a non-delivery frame: counts toward the rate only
                    continue
                d = decode_delivery(subject, data)
                if type(d) is Delivery:
                    self._apply_delivery(d, False, now)
                else:
                    m.count_tap()
                    m.apply_rejection(d.reason, subject)
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
        msg = d.message
        kind = d.kind
        channel = d.target if kind == "channel" else None
        return self.model.apply_message(
            kind=kind, id=msg.id, ts=msg.ts, from_id=d.sender, from_name=msg.from_.name,
            from_role=msg.from_.role, text=parts_to_text(msg.parts), parts=msg.parts,
            channel=channel, to=d.target if kind == "dm" else None,
            to_service=d.target if kind == "anycast" else None,
            historical=historical, event=bool(channel) and is_event_channel(channel),
            received=now,
        )

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
                self._expire_managers(now)
            if self._membership_dirty:
                self._membership_dirty = False
                m.set_membership(self._members, self._feed_at)
            await self._publish()

    async def _publish(self, force: bool = False) -> None:
        if not (self.model.dirty or force) or not self._listeners:
            return
        self.model.dirty = False
        for fn in list(self._listeners):
            try:
                r = fn(self.model)
                if asyncio.iscoroutine(r):
                    await r
            except Exception:
                pass

    def _maybe_rebind_presence(self, now: float) -> None:
        if self._rebinding or now - self._last_rebind < self.model.ttl_ms:
            return
        self._last_rebind = now
        asyncio.create_task(self._rebind_presence())

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
        finally:
            self._rebinding = False

    # ------------------------------------------------------------------ presence

    def _on_presence(self, e: Any, initial: bool) -> None:
        m = self.model
        now = m.clock()
        op = e.operation or "PUT"
        d = decode_presence(e.key, op, e.value, int(now), None, ttl_ms=int(m.ttl_ms))
        if d.action == "ignore":
            m.watch_delivered(now)
        elif d.action == "drop":
            m.watch_delivered(now)
            m.apply_rejection(f"presence:{d.reason}", f"$KV.{self.buckets.presence}.{e.key}")
        elif d.action == "mark-offline":
            m.apply_presence_delete(e.key, purge=op == "PURGE", received=now)
        elif d.presence is not None:
            m.apply_presence(_record(d.presence), received=now)
        if m.status.connection == "stale":
            m.set_connection("connected")

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

    def _on_presence_error(self, reason: str, e: Exception) -> None:
        if reason == "missing":
            self.model.set_warning(f"presence bucket {self.buckets.presence} not found")

    # ------------------------------------------------------------------ channels

    def _on_registry(self, e: Any, initial: bool) -> None:
        op = e.operation or "PUT"
        if e.key == "=defaults":
            d = decode_channel_defaults(e.value) if op == "PUT" else None
            self._defaults = ChannelSettings(
                replay=d.replay, replay_window=d.replayWindow, delivery_class=d.deliveryClass
            ) if d else ChannelSettings()
        elif e.key.startswith("="):
            return
        elif op != "PUT":
            self._registry.pop(e.key, None)
        else:
            c = decode_channel_config(e.value)
            if c is None:
                self.model.apply_rejection("registry:malformed", f"$KV.{self.buckets.channels}.{e.key}")
                return
            self._registry[e.key] = ChannelSettings(
                replay=c.replay, replay_window=c.replayWindow, delivery_class=c.deliveryClass,
                description=c.description, instructions=c.instructions,
            )
        if not initial:
            self.model.set_channel_registry(self._registry, self._defaults)

    def _on_registry_ready(self, keys: set[str]) -> None:
        for k in list(self._registry):
            if k not in keys:
                del self._registry[k]
        self.model.set_channel_registry(
            {k: v for k, v in self._registry.items() if not is_event_channel(k)}, self._defaults)

    async def _poll_loop(self) -> None:
        while True:
            await asyncio.sleep(self.opts.channel_poll_s)
            if self.nc.is_connected:
                await self._poll_channels()

    async def _poll_channels(self) -> dict[str, int]:
        try:
            info = await self.js.stream_info(chat_stream(self.space), subjects_filter=">")
        except Exception:
            return {}
        counts: dict[str, int] = {}
        for subj, n in (info.state.subjects or {}).items():
            ps = parse_subject(subj)
            if not ps.deliver or ps.kind != "chat" or not ps.channel:
                continue
            if is_event_channel(ps.channel):
                continue  # filtered before any history fetch
            counts[ps.channel] = counts.get(ps.channel, 0) + n
        self.model.set_retained_counts(counts)
        return counts

    # ------------------------------------------------------------------ history

    async def _prefill(self, since_ts: float | None = None) -> None:
        """History prefill at start; after a reconnect (``since_ts``) the same read fills the
        gap: rows older than the outage are skipped, rows already seen dedupe by id."""
        counts = await self._poll_channels()
        chans = [c for c in sorted(counts) if not is_event_channel(c)]
        limit = self.opts.backfill
        now = self.model.clock()
        if since_ts is not None:
            limit = max(limit, 200)
        rows: list[tuple[Delivery, float]] = []
        sem = asyncio.Semaphore(4)

        async def one(ch: str) -> None:
            eff = self.model.effective(ch)
            if eff.replay is False:
                return
            floor_ts = _window_floor(eff.replay_window, now)
            async with sem:
                got = await self.read_history(
                    chat_stream(self.space), f"cotal.{self.space}.chat.*.*.{ch}", limit)
            if since_ts is not None:
                floor_ts = since_ts if floor_ts is None else max(floor_ts, since_ts)
            rows.extend((d, 0.0) for d in got if floor_ts is None or d.message.ts >= floor_ts)

        await asyncio.gather(*(one(c) for c in chans))
        if self.dm_visible and self.opts.dms:
            try:
                got = await self.read_history(
                    dm_stream(self.space), f"cotal.{self.space}.inst.>",
                    min(self.opts.dm_backfill, max(limit, 1) if limit < 1000 else 1000))
                rows.extend((d, 0.0) for d in got
                            if since_ts is None or d.message.ts >= since_ts)
            except Exception as e:  # noqa: BLE001 - refused by ACL: the lens stays live-only
                self.dm_history_error = _short(e)
        rows.sort(key=lambda r: r[0].message.ts)
        recv = self.model.clock()
        for d, _ in rows:
            self._apply_delivery(d, True, recv)
        self.model.flush_bursts()

    async def read_history(self, stream: str, filt: str, limit: int) -> list[Delivery]:
        """Newest ``limit`` messages matching ``filt``, oldest first; every consumer made here
        is deleted. Rejected rows are counted, never returned."""
        if limit <= 0:
            return []
        ceiling = await self._edge_seq(stream, filt, api.DeliverPolicy.LAST)
        if ceiling is None:
            return []
        span = max(limit, 64)
        got: dict[int, Any] = {}
        while True:
            start = max(1, ceiling - span + 1)
            for seq, msg in await self._read_range(stream, filt, start, ceiling):
                got[seq] = msg
            if len(got) >= limit or start == 1:
                break
            span *= 4
        out: list[Delivery] = []
        for seq in sorted(got)[-limit:] if len(got) > limit else sorted(got):
            msg = got[seq]
            d = decode_delivery(msg.subject, msg.data, history=True)
            if type(d) is Delivery:
                out.append(d)
            else:
                self.model.apply_rejection(d.reason, msg.subject)
        return out

    async def _ephemeral(self, stream: str, filt: str, **cfg: Any) -> Any:
        return await self.js.add_consumer(stream, api.ConsumerConfig(
            filter_subject=filt, ack_policy=api.AckPolicy.NONE, mem_storage=True,
            inactive_threshold=30.0, max_ack_pending=-1, **cfg))

    async def _delete(self, stream: str, name: str, psub: Any = None) -> None:
        if psub is not None:
            try:
                await psub.unsubscribe()
            except Exception:
                pass
        try:
            await self.js.delete_consumer(stream, name)
        except Exception:
            pass

    async def _edge_seq(self, stream: str, filt: str, policy: api.DeliverPolicy) -> int | None:
        ci = await self._ephemeral(stream, filt, deliver_policy=policy)
        psub = None
        try:
            if not ci.num_pending:
                return None
            psub = await self.js.pull_subscribe_bind(consumer=ci.name, stream=stream)
            msgs = await psub.fetch(1, timeout=self.opts.history_timeout)
            return msgs[0].metadata.sequence.stream if msgs else None
        finally:
            await self._delete(stream, ci.name, psub)

    async def _read_range(self, stream: str, filt: str, start: int, end: int) -> list[tuple[int, Any]]:
        ci = await self._ephemeral(stream, filt, deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
                                   opt_start_seq=start)
        psub = None
        out: list[tuple[int, Any]] = []
        try:
            pending = ci.num_pending
            if not pending:
                return out
            psub = await self.js.pull_subscribe_bind(consumer=ci.name, stream=stream)
            while pending > 0:
                try:
                    msgs = await psub.fetch(min(pending, 256), timeout=self.opts.history_timeout)
                except Exception:
                    break
                if not msgs:
                    break
                for m in msgs:
                    seq = m.metadata.sequence.stream
                    pending = m.metadata.num_pending
                    if seq <= end:
                        out.append((seq, m))
                    else:
                        pending = 0
                        break
            return out
        finally:
            await self._delete(stream, ci.name, psub)

    # ------------------------------------------------------------------ membership

    def _on_member(self, e: Any, initial: bool) -> None:
        op = e.operation or "PUT"
        if e.key == "=feed":
            if op == "PUT":
                try:
                    self._feed_at = float(json.loads(e.value).get("observedAt"))
                except (ValueError, TypeError, AttributeError):
                    self._feed_at = None
            else:
                self._feed_at = None
        elif op != "PUT":
            self._members.pop(e.key, None)
        else:
            mm = decode_membership(e.value)
            if mm is not None:
                self._members[e.key] = MemberView(
                    e.key, tuple(mm.live), tuple(mm.durable),
                    float(mm.observedAt) if mm.observedAt is not None else None)
        if not initial:
            self._membership_dirty = True

    def _on_member_ready(self, keys: set[str]) -> None:
        self._members = {k: v for k, v in self._members.items() if k in keys}
        self._membership_dirty = True

    def _on_member_error(self, reason: str, e: Exception) -> None:
        if reason == "missing":
            self.model.set_membership(None, None)  # no daemon: traffic-only
        elif self.nc.is_connected:
            self.model.set_membership_unreadable(f"watch: {reason}")

    # ------------------------------------------------------------------ managers

    def _on_manager(self, e: Any, initial: bool) -> None:
        if not e.key.startswith("lease."):
            return
        iid = e.key[len("lease."):]
        op = e.operation or "PUT"
        if op != "PUT":
            self._manager_seen.pop(iid, None)
            self.model.apply_manager(iid, up=False)
            return
        try:
            v = json.loads(e.value)
            if not isinstance(v, dict):
                raise ValueError
        except ValueError:
            self.model.apply_rejection("manager:malformed", f"$KV.{self.buckets.manager}.{e.key}")
            return
        self._manager_seen[iid] = self.model.clock()
        pid = v.get("pid")
        since = v.get("since")
        self.model.apply_manager(
            iid, up=True, holder=v.get("holder") if isinstance(v.get("holder"), str) else None,
            runtime=v.get("runtime") if isinstance(v.get("runtime"), str) else None,
            pid=pid if isinstance(pid, int) else None,
            since=float(since) if isinstance(since, (int, float)) else None,
        )

    def _on_manager_ready(self, keys: set[str]) -> None:
        self.model.manager_resync(k[len("lease."):] for k in keys if k.startswith("lease."))

    def _expire_managers(self, now: float) -> None:
        for iid, seen in list(self._manager_seen.items()):
            if now - seen > MANAGER_TTL_MS:  # lease TTL expiry is silent
                del self._manager_seen[iid]
                self.model.apply_manager(iid, up=False)

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
            asyncio.create_task(self._poll_channels())

    async def _catch_up(self, since_ts: float) -> None:
        try:
            await self._prefill(since_ts=since_ts)
            await self._publish(force=True)
        except Exception as e:  # noqa: BLE001 - a refused read keeps the live view honest
            self.model.set_warning(f"history catch-up failed: {_short(e)}")

    async def _on_close(self) -> None:
        self.model.set_connection("closed")


def _window_floor(window: str | None, now: float) -> float | None:
    if not window:
        return None
    m = re.fullmatch(r"(\d+)([smhd])", window)
    if not m:
        return None
    mult = {"s": 1e3, "m": 6e4, "h": 3.6e6, "d": 8.64e7}[m.group(2)]
    return now - int(m.group(1)) * mult


def _clip(v: Any, n: int) -> Any:
    """Bound one wire string kept in the roster (None and non-strings pass through)."""
    return v[:n] + "…" if isinstance(v, str) and len(v) > n else v


def _record(p: Any) -> PresenceRecord:
    """The roster's copy of a presence record, every field bounded: the SPEC caps a name at
    128 characters, and nobody may buy megabytes of our memory with one KV key."""
    card = p.card
    c = p.condition
    meta = card.meta or {}
    return PresenceRecord(
        id=card.id, name=_clip(card.name, 128), kind=_clip(card.kind, 16), status=p.status,
        ts=float(p.ts), role=_clip(card.role, 64), lifecycle_uid=_clip(p.lifecycleUid, 64),
        activity=_clip(p.activity, 512), activity_since=p.activitySince,
        status_since=p.statusSince, active_at=p.activeAt,
        condition=Condition(_clip(c.code, 64), _clip(c.source, 64), _clip(c.message, 1024),
                            c.since) if c is not None else None,
        attention=_clip(p.attention, 16),
        channel_modes=tuple(sorted((_clip(k, 128), _clip(v, 16))
                                   for k, v in list((p.channelModes or {}).items())[:64])),
        description=_clip(card.description, 200),
        tags=tuple(_clip(t, 64) for t in (card.tags or ())[:32]),
        meta=tuple(sorted((_clip(k, 64), _clip(v, 256))
                          for k, v in list(meta.items())[:32] if isinstance(v, str))),
        environment=_clip(p.environment, 256),
    )
