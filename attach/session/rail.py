"""§13.6 session rails: JSON frames ``f`` / ``credit`` / ``close`` with a bounded credit window.

One :class:`Rail` is one side of a session (caller or serving) over its two core subjects.
The window is per direction; control frames are exempt from it. Acks are absolute contiguous
watermarks, piggybacked on reverse data frames and re-advertised on idle ticks. Any fault breaks
the rail (no retransmit); the fix is to re-establish the session. A side that faults first sends
the advisory ``close`` (the frame has no room for a reason), so its peer learns at once instead of
waiting on a silent subject.

Liveness: a live side that has delivered anything says something on every tick (data, a credit,
or the idle re-advertisement), so a peer silent for ``peer_silence_ms`` is gone and the rail
breaks with ``peer-silent``. Output is never needed: an idle session stays up on keepalives.

Consumer credit (``consumer_credit=True``, a receiver's choice, invisible on the wire): frames
are handed to the application at once, but credit covers only what it has released.
A consumer that parses slower than the peer sends (the console's terminal pane) thus keeps
seeing every frame — a ``drop`` notice the moment it lands — while holding the peer's window
shut, so the peer drops and repaints instead of either side queueing bytes.

The frame grammar (the closed schema of the three frames, the window bound) is
:mod:`meshview.wire.rail`; the frame logic here is transport-neutral (``feed`` in, ``publish`` out) so it can be unit-tested
without a broker; :func:`open_rail` wires it to a NATS connection.

Size: just over 500 lines because both directions, the watchdogs and consumer credit share one
seq/ack state.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from attach.errors import AttachLayerError
from meshview.errors import swallowed
from meshview.tasks import TaskOwner
from meshview.wire.rail import MAX_SEQ, WINDOW_DEFAULT, FrameError, check_window, encode_frame, parse_frame

if TYPE_CHECKING:
    from nats.aio.client import Client as NATS
    from nats.aio.msg import Msg

MAX_PAYLOAD = 1024 * 1024
IDLE_CREDIT_MS = 1000
STALL_TIMEOUT_MS = 30_000
PEER_SILENT = "peer-silent"  # a local fault name: nothing heard from the peer within the bound
log = logging.getLogger(__name__)
_owned = TaskOwner("rail")  # an async teardown hook runs on after the rail; a failure is logged
CLOSE_DRAIN_S = 2.0


class RailError(AttachLayerError):
    """A refused send. ``code`` is an §13.3 catalog code."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class RailStats:
    sent: int
    acked_through: int
    delivered: int
    in_flight: int


Publish = Callable[[str, bytes], Awaitable[None]]


class Rail:
    def __init__(
        self,
        *,
        egress: str,
        ingress: str,
        publish: Publish,
        on_data: Callable[[Any, int], Any],
        on_close: Callable[[], Any] | None = None,
        on_fault: Callable[[str, Any], Any] | None = None,
        window: int = WINDOW_DEFAULT,
        idle_credit_ms: int = IDLE_CREDIT_MS,
        stall_timeout_ms: int = STALL_TIMEOUT_MS,
        peer_silence_ms: int = 0,
        max_payload: int = MAX_PAYLOAD,
        clock: Callable[[], float] = time.monotonic,
        consumer_credit: bool = False,
    ):
        self.egress, self.ingress = egress, ingress
        self.window = check_window(window)
        self._publish = publish
        self._on_data, self._on_close, self._on_fault = on_data, on_close, on_fault
        self.idle_credit_ms, self.stall_timeout_ms = idle_credit_ms, stall_timeout_ms
        self.peer_silence_ms = peer_silence_ms
        self.max_payload = max_payload
        self._clock = clock
        self.credit_every = max(1, math.ceil(self.window / 2))
        self.consumer_credit = consumer_credit
        self.released = 0  # consumer credit: the application has consumed frames up to this seq
        self._ack_sent = 0  # the highest ack we advertised
        self._credit_tasks: set[asyncio.Task] = set()
        self.seq = 0
        self.acked_through = 0
        self.expected = 1
        self.delivered = 0
        self._since_credit = 0
        self._data_since_tick = False
        self._last_sent = -math.inf
        self._last_heard = clock()
        self._last_tick = self._last_heard
        self._window_full_since: float | None = None
        self._queue: deque[tuple[int, Any]] = deque()
        self._drain_task: asyncio.Task | None = None
        self._timer: asyncio.Task | None = None
        self._teardown_hooks: list[Callable[[], Any]] = []
        self.closed = False
        self.broken = False
        self.fault: str | None = None
        self.peer_closed = False  # the peer's close arrived (nothing to hand back)
        self.close_sent = False  # our close left (published; a flush confirms delivery)
        self._torn_down = False
        self._credit = asyncio.Event()

    # ---- lifecycle ---------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return not (self.closed or self.broken)

    def start_timer(self) -> None:
        if self._timer is None and (self.idle_credit_ms > 0 or self.stall_timeout_ms > 0
                                    or self.peer_silence_ms > 0):
            period = (self.idle_credit_ms or 1000) / 1000
            self._timer = asyncio.get_running_loop().create_task(self._tick_loop(period))

    async def _tick_loop(self, period: float) -> None:
        while self.alive:
            await asyncio.sleep(period)
            await self.tick()

    def on_teardown(self, fn: Callable[[], Any]) -> None:
        self._teardown_hooks.append(fn)

    def _teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        self._credit.set()
        if self._timer is not None and self._timer is not asyncio.current_task():
            self._timer.cancel()
        for fn in self._teardown_hooks:
            try:
                r = fn()
                if inspect.isawaitable(r):
                    _owned.spawn(r, "teardown-hook")
            except Exception:  # noqa: BLE001 - a teardown hook never stops the teardown [counted: COTAL_LOG]
                swallowed("attach.session.rail:Rail._teardown")

    async def _call(self, fn: Callable | None, *args: Any) -> None:
        if fn is None:
            return
        r = fn(*args)
        if inspect.isawaitable(r):
            await r

    async def _send_close(self) -> None:
        """Best effort: the advisory ``close`` on our egress (once)."""
        if self.close_sent:
            return
        self.close_sent = True
        try:
            await self._publish(self.egress, encode_frame({"t": "close"}))
        except Exception:  # noqa: BLE001 - never left: a hand-back must retry on another link [counted: COTAL_LOG]
            swallowed("attach.session.rail:Rail._send_close")
            self.close_sent = False  # never left: a hand-back must retry on another link

    async def _protocol_error(self, reason: str, detail: Any = None) -> None:
        if self.broken or self.closed:
            return
        self.broken = True
        self.fault = reason
        log.debug("rail %s broke: %s %s", self.ingress, reason, detail)
        # tell the peer before going quiet, or it holds the session until its own watchdogs fire
        await self._send_close()
        self._teardown()
        await self._call(self._on_fault, reason, detail)

    # ---- ingress -----------------------------------------------------------------------------

    async def _apply_ack(self, ack: int) -> None:
        if ack > self.seq:
            await self._protocol_error("credit-overrun", {"ack": ack, "sent": self.seq})
            return
        if ack > self.acked_through:
            self.acked_through = ack
            self._window_full_since = None
            self._credit.set()

    async def feed(self, raw: bytes) -> None:
        """One NATS message arrived on the ingress subject."""
        if not self.alive:
            return
        self._last_heard = self._clock()  # any frame, even a bad one, proves someone is there
        try:
            frame = parse_frame(raw)
        except FrameError as e:
            await self._protocol_error("garbled-frame", str(e))
            return
        t = frame["t"]
        if t == "credit":
            await self._apply_ack(frame["ack"])
            return
        if t == "close":
            if self._queue:  # frames that arrived before the close are still delivered
                try:
                    await asyncio.wait_for(self.idle(), CLOSE_DRAIN_S)
                except asyncio.TimeoutError:
                    pass
            if not self.alive:
                return
            self.closed = True
            self.peer_closed = True
            self._teardown()
            await self._call(self._on_close)
            return
        if "ack" in frame:
            await self._apply_ack(frame["ack"])
            if not self.alive:
                return
        self._data_since_tick = True
        nxt = self.expected + len(self._queue)
        seq = frame["seq"]
        if seq < nxt:
            return  # duplicate: idempotent drop
        if seq > nxt:
            await self._protocol_error("gap", {"expected": nxt, "got": seq})
            return
        if len(self._queue) >= self.window:
            await self._protocol_error("flood", {"queued": len(self._queue), "window": self.window})
            return
        self._queue.append((seq, frame["data"]))
        if self._drain_task is None or self._drain_task.done():
            self._drain_task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self.alive and self._queue:
            seq, data = self._queue[0]
            try:
                await self._call(self._on_data, data, seq)
            except Exception as e:  # noqa: BLE001 - reported as the rail's protocol error
                if self.alive:
                    await self._protocol_error("handler", f"{type(e).__name__}: {e}")
                return
            if not self.alive:
                return
            self._queue.popleft()
            self.expected += 1
            self.delivered += 1
            if self.consumer_credit:
                continue  # credit follows release()
            self._since_credit += 1
            if self._since_credit >= self.credit_every:
                self._since_credit = 0
                await self._emit_credit()

    async def idle(self) -> None:
        """Wait until every queued ingress frame has been handed to the application."""
        while self._drain_task is not None and not self._drain_task.done():
            await asyncio.shield(self._drain_task)

    def _ack_point(self) -> int:
        """What our acks may say: everything delivered, or (consumer credit) everything released."""
        delivered = self.expected - 1
        return min(delivered, self.released) if self.consumer_credit else delivered

    async def _emit_credit(self) -> None:
        self._last_sent = self._clock()
        ack = self._ack_point()
        self._ack_sent = max(self._ack_sent, ack)
        try:
            await self._publish(self.egress, encode_frame({"t": "credit", "ack": ack}))
        except Exception as e:  # noqa: BLE001 - reported as the rail's protocol error
            await self._protocol_error("publish", str(e))

    def release(self, through: int, *, now: bool = False) -> None:
        """Consumer credit: frames up to seq ``through`` are consumed. Credit goes out once
        ``credit_every`` frames are released since the last ack (at once with ``now``)."""
        if not self.consumer_credit or not self.alive:
            return
        through = min(through, self.expected - 1)
        if through <= self.released:
            return
        self.released = through
        if now or through - self._ack_sent >= self.credit_every:
            self._ack_sent = max(self._ack_sent, self._ack_point())  # as good as sent: it is queued
            task = asyncio.get_running_loop().create_task(self._emit_credit())
            self._credit_tasks.add(task)
            task.add_done_callback(self._credit_tasks.discard)

    def release_all(self) -> None:
        """Consumer credit: everything received so far is consumed; credit goes out now."""
        self.release(self.expected - 1 + len(self._queue), now=True)

    @property
    def unreleased(self) -> int:
        """Frames received that our acks do not cover yet (the peer's view of its window)."""
        return self.expected - 1 + len(self._queue) - self._ack_sent

    @property
    def peer_window_full(self) -> bool:
        """Every frame the peer may send unacknowledged has arrived: it is blocked (dropping,
        for a terminal session) until credit comes."""
        return self.unreleased >= self.window

    async def tick(self) -> None:
        """One timer tick: silence and stall watchdogs, then the idle credit re-advertisement.

        The re-advertisement goes out when the peer was quiet (the §13.6 keepalive, which also
        heals lost credits) and also when this side has sent nothing for half a period, so a
        peer typing into a program that prints nothing still hears from us: a live side is
        never silent for more than ~1.5 periods, which is what ``peer_silence_ms`` relies on.
        """
        if not self.alive:
            return
        now = self._clock()
        if self.peer_silence_ms > 0:
            if now - self._last_tick > 3 * ((self.idle_credit_ms or 1000) / 1000):
                # our own loop stalled (a blocked event loop, not a dead peer): frames may be
                # waiting unread, so give the peer a fresh bound rather than a verdict
                self._last_heard = max(self._last_heard, now)
            elif (now - self._last_heard) * 1000 > self.peer_silence_ms:
                silent = int((now - self._last_heard) * 1000)
                await self._protocol_error(PEER_SILENT, {"silentMs": silent})
                return
        self._last_tick = now
        if self.stall_timeout_ms > 0 and self._window_full_since is not None:
            blocked = (self._clock() - self._window_full_since) * 1000
            if blocked > self.stall_timeout_ms:
                await self._protocol_error(
                    "stall", {"window": self.window, "ackedThrough": self.acked_through,
                              "sent": self.seq, "blockedMs": int(blocked)})
                return
        quiet = not self._data_since_tick
        self._data_since_tick = False
        mute = (now - self._last_sent) * 1000 >= self.idle_credit_ms / 2
        if self.idle_credit_ms > 0 and (quiet or mute) and self.expected > 1:
            await self._emit_credit()  # consumer credit: re-advertises the released point only

    # ---- egress ------------------------------------------------------------------------------

    async def wait_credit(self, timeout: float | None = None) -> bool:
        """Wait for the next ack advance (or the rail ending); False on timeout."""
        self._credit.clear()
        if not self.alive:
            return False
        try:
            await asyncio.wait_for(self._credit.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def free_slots(self) -> int:
        return self.window - (self.seq - self.acked_through) if self.alive else 0

    def window_open(self) -> bool:
        return self.alive and self.seq - self.acked_through < self.window

    async def send(self, data: Any) -> int:
        return await self._send(data, None)

    async def send_json(self, data_json: bytes) -> int:
        """:meth:`send` for a ``data`` value already encoded as compact JSON text (a large
        payload skips a pass of the JSON encoder)."""
        return await self._send(None, data_json)

    async def _send(self, data: Any, data_json: bytes | None) -> int:
        if not self.alive:
            raise RailError("failed-precondition", "session rail is closed or broken; re-establish")
        if self.seq >= MAX_SEQ:
            await self._protocol_error("seq-exhausted", {"seq": self.seq})
            raise RailError("failed-precondition", "session rail exhausted its sequence space")
        if self.seq - self.acked_through >= self.window:
            now = self._clock()
            if self._window_full_since is None:
                self._window_full_since = now
            elif self.stall_timeout_ms > 0 and (now - self._window_full_since) * 1000 > self.stall_timeout_ms:
                await self._protocol_error("stall", {"sent": self.seq, "ackedThrough": self.acked_through})
                raise RailError("failed-precondition", "session rail stalled; re-establish")
            raise RailError("resource-exhausted", f"session window is full ({self.window} unacknowledged frames)")
        ack = self._ack_point()
        if data_json is not None:
            tail = b',"ack":%d}' % ack if ack > 0 else b"}"
            raw = b'{"t":"f","seq":%d,"data":' % (self.seq + 1) + data_json + tail
        else:
            frame: dict = {"t": "f", "seq": self.seq + 1, "data": data}
            if ack > 0:
                frame["ack"] = ack
            raw = encode_frame(frame)
        if len(raw) > self.max_payload:
            raise RailError("contract-invalid", f"session frame is {len(raw)} bytes, over {self.max_payload}")
        self._ack_sent = max(self._ack_sent, ack)
        self.seq += 1  # claim the seq before yielding so concurrent sends stay ordered
        self._last_sent = self._clock()
        try:
            await self._publish(self.egress, raw)
        except Exception as e:  # noqa: BLE001 - reported, then said as RailError
            await self._protocol_error("publish", str(e))
            raise RailError("failed-precondition", f"session rail publish failed: {e}") from None
        if self.seq - self.acked_through >= self.window and self._window_full_since is None:
            self._window_full_since = self._clock()
        return self.seq

    async def close(self) -> None:
        """Send the advisory close and stop locally. Idempotent.

        On a rail that already ended, the close still goes out unless the peer closed first or
        ours already left: a side abandoning a session always hands it back.
        """
        if not (self.closed or self.broken):
            self.closed = True
        if not self.peer_closed:
            await self._send_close()
        self._teardown()

    def stop(self) -> None:
        """Stop locally without a frame: the peer already let the session go."""
        if not (self.closed or self.broken):
            self.closed = True
        self._teardown()

    def stats(self) -> RailStats:
        return RailStats(self.seq, self.acked_through, self.delivered, self.seq - self.acked_through)


async def open_rail(nc: NATS, *, egress: str, ingress: str, **kw: Any) -> Rail:
    """Subscribe the ingress rail on ``nc``, flush so the SUB is live, start the timer."""

    async def publish(subject: str, payload: bytes) -> None:
        await nc.publish(subject, payload)

    rail = Rail(egress=egress, ingress=ingress, publish=publish, **kw)

    async def cb(msg: Msg) -> None:
        await rail.feed(msg.data)

    sub = await nc.subscribe(ingress, cb=cb)

    async def unsub() -> None:
        try:
            await sub.unsubscribe()
        except Exception:  # noqa: BLE001 - teardown of a subscription that is ending anyway [counted: COTAL_LOG]
            swallowed("attach.session.rail:open_rail.unsub")

    rail.on_teardown(unsub)
    await nc.flush()
    rail.start_timer()
    return rail
