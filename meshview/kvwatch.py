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
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from nats.js import api
from nats.js.errors import BucketNotFoundError

from meshview.connect import events_of, short_error
from meshview.tasks import reap

IDLE_HEARTBEAT_S = 5.0
SILENCE_S = 3 * IDLE_HEARTBEAT_S
MAX_QUEUED = 100_000
YIELD_EVERY = 64  # entries taken from a non-empty queue before the watch yields to the loop


class WatchBroken(RuntimeError):
    """The watch lost continuity (gap, silence, consumer gone); rebind from current state."""


@dataclass(frozen=True, slots=True)
class KvEntry:
    key: str
    value: bytes
    operation: str  # PUT | DEL | PURGE
    revision: int


def _ack_meta(reply: str) -> tuple[int, int, int] | None:
    """(stream seq, consumer seq, pending) from a JetStream ack subject, or None."""
    tok = reply.split(".")
    # $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending> (9 tokens), or the
    # v2 form with domain and account hash in front (12+ tokens): count from the end.
    if len(tok) < 9 or tok[0] != "$JS" or tok[1] != "ACK":
        return None
    try:
        return int(tok[-4]), int(tok[-3]), int(tok[-1])
    except ValueError:
        return None


async def watch(nc: Any, bucket: str) -> AsyncIterator[KvEntry | None]:
    """Yield the bucket's current entries (last per key), then ``None`` once the initial state
    is delivered, then live updates. Raises :class:`WatchBroken` on any loss of continuity."""
    js = nc.jetstream()
    stream = f"KV_{bucket}"
    prefix = f"$KV.{bucket}."
    inbox = nc.new_inbox()
    queue: asyncio.Queue = asyncio.Queue()
    overflow = False

    async def cb(msg: Any) -> None:
        nonlocal overflow
        if msg.reply and not msg.data and (msg.headers or {}).get("Status") == "100":
            # a flow-control request, answered on receipt: answered from the queue's head, it
            # held delivery back until everything before it was applied, and a busy loop (the
            # console at 10k agents) then read the watch in stalls, slower than it was written.
            # The queue stays bounded by MAX_QUEUED (past it the watch rebinds).
            await nc.publish(msg.reply, b"")
            return
        if queue.qsize() >= MAX_QUEUED:
            overflow = True  # we cannot keep up: rebind from current state instead
            return
        queue.put_nowait(msg)

    sub = await nc.subscribe(inbox, cb=cb)
    name = f"cotal_watch_{secrets.token_hex(8)}"
    created = False
    try:
        info = await js.add_consumer(stream, api.ConsumerConfig(
            name=name, deliver_subject=inbox, filter_subject=f"{prefix}>",
            deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT, ack_policy=api.AckPolicy.NONE,
            flow_control=True, idle_heartbeat=IDLE_HEARTBEAT_S, mem_storage=True,
            inactive_threshold=30.0, num_replicas=1))
        created = True
        initial = info.num_pending > 0
        if not initial:
            yield None
        expect = 1
        run = 0
        while True:
            if overflow:
                raise WatchBroken(f"the {bucket} watch fell too far behind")
            if queue.empty():  # only an idle watch pays for a timer (wait_for is a task)
                try:
                    msg = await asyncio.wait_for(queue.get(), SILENCE_S)
                except asyncio.TimeoutError:
                    raise WatchBroken(f"no heartbeat from the {bucket} watch for {SILENCE_S:g}s")
            else:
                msg = queue.get_nowait()
                run += 1
                if run >= YIELD_EVERY:  # a backlog never holds the loop for long
                    run = 0
                    await asyncio.sleep(0)
            hdrs = msg.headers or {}
            if hdrs.get("Status") == "100" and not msg.data:
                if msg.reply:  # a flow-control request: answer it or delivery stalls
                    await nc.publish(msg.reply, b"")
                continue
            meta = _ack_meta(msg.reply or "")
            if meta is None:
                continue  # not a stream delivery
            sseq, cseq, pending = meta
            if cseq != expect:
                raise WatchBroken(f"gap in the {bucket} watch (expected {expect}, got {cseq})")
            expect = cseq + 1
            if not msg.subject.startswith(prefix):
                continue
            op = hdrs.get("KV-Operation", "PUT")
            yield KvEntry(msg.subject[len(prefix):], msg.data or b"", op, sseq)
            if initial and pending == 0:
                initial = False
                yield None
    finally:
        try:
            await sub.unsubscribe()
        except Exception:
            pass
        if created:
            try:
                await asyncio.wait_for(js.delete_consumer(stream, name), 1.0)
            except Exception:
                pass  # the inactive threshold reaps it


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
                keys: set[str] = set()
                initial = True
                async for e in watch(self.nc, self.bucket):
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
