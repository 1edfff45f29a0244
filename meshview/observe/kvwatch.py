"""A KV bucket watch built on a *named* ephemeral push consumer.

nats-py's ``kv.watchall()`` creates an unnamed ordered consumer through the bare
``$JS.API.CONSUMER.CREATE.<stream>`` subject. The Cotal observer and admin profiles (SPEC
App. B) grant only the named, filtered form ``$JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>``
on the presence bucket, so under scoped credentials the stock watch is refused and the roster
stays empty. This watch uses the named form, delivers to our own inbox (the SPEC §10 inbox
prefix applies), answers flow control, and detects gaps and silence itself: any of those ends
the iteration with :class:`WatchBroken`, and the caller rebinds from current state;
:class:`KvWatch` is that caller, the rebindable watch the observer runs per bucket.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncGenerator
from typing import Any, Callable

import msgspec
from nats.js import api
from nats.js.errors import BucketNotFoundError

from meshview.errors import MeshviewError, swallowed
from meshview.link.connect import YIELD_EVERY, events_of, short_error
from meshview.tasks import reap

IDLE_HEARTBEAT_S = 5.0
SILENCE_S = 3 * IDLE_HEARTBEAT_S
MAX_QUEUED = 100_000  # deliveries a callback subscription may hold before it drops (a gap)


class WatchBroken(MeshviewError, RuntimeError):
    """The watch lost continuity (gap, silence, consumer gone); rebind from current state."""


class KvEntry(msgspec.Struct, frozen=True, gc=False):
    key: str
    value: bytes
    operation: str  # PUT | DEL | PURGE
    revision: int


class _Feed:
    """One watch's consumer state: raw deliveries in, ``on_entry(entry, initial)`` out in
    delivery order, and ``on_ready(keys)`` once the initial state is in (the keys it holds).
    Synchronous, so the connection can hand it each delivery as it parses it
    (:meth:`LenientClient.direct`): no message object, no queue, no task between the socket
    and the model. A break in continuity (a gap, a failing callback) is kept in ``broken``
    and ends the watch."""

    __slots__ = ("bucket", "prefix", "on_entry", "on_ready", "expect", "initial", "keys",
                 "held", "seen", "broken", "done")

    def __init__(self, bucket: str, on_entry: Callable[[KvEntry, bool], None],
                 on_ready: Callable[[set[str]], None]) -> None:
        self.bucket, self.prefix = bucket, f"$KV.{bucket}."
        self.on_entry, self.on_ready = on_entry, on_ready
        self.expect = 1
        self.initial = True
        self.keys: set[str] = set()  # present in the initial state so far
        self.held: list[tuple[str, str, bytes, Any]] | None = []  # until the consumer is made
        self.seen = 0  # deliveries of any kind (the silence check reads it)
        self.broken: BaseException | None = None
        self.done = asyncio.Event()

    def start(self, pending: int) -> None:
        """The consumer exists and has ``pending`` entries for us: deliver what came first."""
        held, self.held = self.held or [], None
        if pending <= 0:
            self._ready()
        for d in held:
            self.feed(*d)

    def _ready(self) -> None:
        self.initial = False
        try:
            self.on_ready(self.keys)
        except Exception as err:  # noqa: BLE001 - the caller rebinds and reports it
            self._break(err)

    def _break(self, err: BaseException) -> None:
        if self.broken is None:
            self.broken = err
            self.done.set()

    def feed(self, subject: str, reply: str, data: bytes, hdrs: Any) -> str | None:
        """One delivery; returns the subject a flow-control request wants answered."""
        self.seen += 1
        if self.broken is not None:
            return None
        if hdrs and hdrs.get("Status") == "100" and not data:
            return reply or None  # flow control (answered on receipt) or an idle heartbeat
        if self.held is not None:
            self.held.append((subject, reply, data, hdrs))
            return None
        # the ack subject: $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
        # (9 tokens), or the v2 form with domain and account hash in front: count from the end
        if not reply.startswith("$JS.ACK."):
            return None  # not a stream delivery
        tok = reply.rsplit(".", 4)
        if len(tok) < 5 or tok[0].count(".") < 4:
            return None
        try:
            sseq, cseq, pending = int(tok[1]), int(tok[2]), int(tok[4])
        except ValueError:
            return None
        if cseq != self.expect:
            self._break(WatchBroken(
                f"gap in the {self.bucket} watch (expected {self.expect}, got {cseq})"))
            return None
        self.expect = cseq + 1
        if subject.startswith(self.prefix):
            key = subject[len(self.prefix):]
            op = hdrs.get("KV-Operation", "PUT") if hdrs else "PUT"
            initial = self.initial
            if initial:
                if op == "PUT":
                    self.keys.add(key)
                else:
                    self.keys.discard(key)
            try:
                self.on_entry(KvEntry(key, data or b"", op, sseq), initial)
            except Exception as err:  # noqa: BLE001 - the caller rebinds and reports it
                self._break(err)
                return None
        if self.initial and pending == 0:
            self._ready()
        return None


async def run_watch(nc: Any, bucket: str, on_entry: Callable[[KvEntry, bool], None],
                    on_ready: Callable[[set[str]], None]) -> None:
    """Watch the bucket: ``on_entry(entry, initial)`` gets its current entries (last per key,
    ``initial`` True), ``on_ready(keys)`` the keys present once they are in, then
    ``on_entry`` every live update; synchronously and in order. Runs until cancelled; raises
    :class:`WatchBroken` on any loss of continuity (a gap, silence past ``SILENCE_S``), or
    what a callback raised.

    On our own connection (:class:`~meshview.link.connect.LenientClient`) the watch's inbox is
    read directly from the parser; on any other it is an ordinary callback subscription."""
    js = nc.jetstream()
    stream = f"KV_{bucket}"
    f = _Feed(bucket, on_entry, on_ready)
    inbox = nc.new_inbox()
    direct = getattr(nc, "direct", None)
    if direct is not None:
        sub = await nc.subscribe(inbox)
        direct(sub, f.feed)
    else:
        run = 0

        async def cb(msg: Any) -> None:
            nonlocal run
            fc = f.feed(msg.subject, msg.reply or "", msg.data, msg.headers)
            if fc:
                await nc.publish(fc, b"")
            run += 1
            if run >= YIELD_EVERY:  # a backlog never holds the loop for long
                run = 0
                await asyncio.sleep(0)

        # a slow reader's excess is dropped here, which the watch sees as a gap and rebinds
        sub = await nc.subscribe(inbox, cb=cb, pending_msgs_limit=MAX_QUEUED)
    name = f"cotal_watch_{secrets.token_hex(8)}"
    created = False
    try:
        info = await js.add_consumer(stream, api.ConsumerConfig(
            name=name, deliver_subject=inbox, filter_subject=f"{f.prefix}>",
            deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT, ack_policy=api.AckPolicy.NONE,
            flow_control=True, idle_heartbeat=IDLE_HEARTBEAT_S, mem_storage=True,
            inactive_threshold=30.0, num_replicas=1))
        created = True
        f.start(info.num_pending)
        loop = asyncio.get_running_loop()
        seen, heard = f.seen, loop.time()
        while f.broken is None:
            try:  # the silence check wakes a few times per window, not per delivery
                await asyncio.wait_for(f.done.wait(), SILENCE_S / 3)
            except asyncio.TimeoutError:
                now = loop.time()
                if f.seen != seen:
                    seen, heard = f.seen, now
                elif now - heard >= SILENCE_S:
                    raise WatchBroken(
                        f"no heartbeat from the {bucket} watch for {SILENCE_S:g}s") from None
        raise f.broken
    finally:
        if direct is not None:
            nc.undirect(sub)
        try:
            await sub.unsubscribe()
        except Exception:  # noqa: BLE001 - teardown of a watch that is ending anyway [counted: COTAL_LOG]
            swallowed("meshview.observe.kvwatch:run_watch")
        if created:
            try:
                await asyncio.wait_for(js.delete_consumer(stream, name), 1.0)
            except Exception:  # noqa: BLE001 - the inactive threshold reaps it [counted: COTAL_LOG]
                swallowed("meshview.observe.kvwatch:run_watch#2")  # the inactive threshold reaps it


async def watch(nc: Any, bucket: str) -> AsyncGenerator[KvEntry | None, None]:
    """:func:`run_watch` as an iterator (for one-shot reads such as the roster of a sender):
    the bucket's entries, ``None`` once the initial state is in, then live updates."""
    queue: asyncio.Queue = asyncio.Queue()
    task = asyncio.create_task(
        run_watch(nc, bucket, lambda e, initial: queue.put_nowait(e),
                  lambda keys: queue.put_nowait(None)), name=f"read:{bucket}")
    task.add_done_callback(lambda t: queue.put_nowait(t))
    try:
        while True:
            e = await queue.get()
            if isinstance(e, asyncio.Task):
                e.result()  # raises what ended the watch
                return
            yield e
    finally:
        await reap([task])


class KvWatch:
    """One KV bucket watch that can be rebound from current state.

    ``on_entry(entry, initial)`` gets every entry (``initial`` while the current state is
    being delivered), ``on_ready(keys)`` the keys present once it is, ``on_error(reason, e)``
    each failure (``"missing"`` for an absent bucket, which ends the watch; anything else is
    retried with backoff until ``closing()`` says stop, except ``"denied"``: the broker refused
    this credential the bucket, which ends the watch too).
    """

    def __init__(
        self, nc: Any, js: Any, bucket: str, on_entry: Callable[[Any, bool], None],
        on_ready: Callable[[set[str]], None], on_error: Callable[[str, Exception], None],
        closing: Callable[[], bool] = lambda: False,
    ) -> None:
        self.nc, self.js, self.bucket = nc, js, bucket
        self.on_entry, self.on_ready, self.on_error = on_entry, on_ready, on_error
        self.closing = closing
        self.task: asyncio.Task | None = None
        self.ready = asyncio.Event()
        self.generation = 0
        self.missing = False
        self.denied = False  # the credential may not read the bucket: the watch has ended

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
            await reap([t])
        # the watch's consumer goes with its generator (``watch`` deletes it)

    async def _run(self, gen: int) -> None:
        delay = 0.2
        while gen == self.generation and not self.closing():
            mark = events_of(self.nc).denial_seq
            try:
                await self.js.key_value(self.bucket)  # BucketNotFoundError if absent
                self.missing = False

                def ready(keys: set[str]) -> None:
                    self.on_ready(keys)
                    self.ready.set()

                await run_watch(self.nc, self.bucket, self.on_entry, ready)
                return  # stopped
            except asyncio.CancelledError:
                raise
            except BucketNotFoundError as e:
                self.missing = True
                self.on_error("missing", e)
                self.ready.set()
                return
            except Exception as e:  # noqa: BLE001 - denied, timeout, broker down: retry
                denied = events_of(self.nc).denied_since(mark, "publish")
                if denied and f"kv_{self.bucket}".lower() in denied.lower().split("."):
                    # the credential may not read this bucket: asking again only makes the
                    # broker log another violation (a ``denied`` watch ends, like ``missing``)
                    self.denied = True
                    self.on_error("denied", e)
                    self.ready.set()
                    return
                self.on_error(short_error(e), e)
                self.ready.set()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)


async def current_values(nc: Any, bucket: str) -> dict[str, bytes]:
    """A bucket's current values by key: one watch of its initial state, then stop (the caller
    bounds it in time: an empty or absent bucket answers at once, a dead link never)."""
    values: dict[str, bytes] = {}
    agen = watch(nc, bucket)
    try:
        async for e in agen:
            if e is None:
                break
            if e.operation == "PUT":
                values[e.key] = e.value
            else:
                values.pop(e.key, None)
    finally:
        await agen.aclose()
    return values
