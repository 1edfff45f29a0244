"""History reads (SPEC §7): newest N of a filter, oldest first, through ephemeral consumers.

Every consumer made here is deleted when the read ends (and has an inactivity threshold in
case we die first). Channel backfill honours each channel's ``replay`` and ``replayWindow``
as the ``meshview.wire`` rules give them; rejected rows are counted, never returned.

Order is the broker's, never a sender's ``ts`` (which any peer can set to anything): each
stream's rows in stream sequence, and the streams (CHAT, DM) merged by the time each stored its
row, a merge that never reorders a stream's own rows. A forger's earlier ``ts`` cannot move its
copy of an id ahead of the original.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable, NamedTuple

from nats.js import api

from meshview.errors import swallowed
from meshview.link.connect import short_error
from meshview.model.mesh import MeshModel
from meshview.observe.streamorder import Stored, stored_ms, stream_order
from meshview.wire import Delivery, chat_pattern, decode_delivery, kind_pattern
from meshview.wire.names import chat_stream, dm_stream

PARALLEL_READS = 4


class Backfill(NamedTuple):
    """What :meth:`History.backfill` read: ``rows`` in stream order, and the first channel
    read that failed (None: the history is whole as far as the stream answered)."""

    rows: list[Delivery]
    failed: BaseException | None


class History:
    """History reads of one space for ``model`` (its registry, clock and reject counts)."""

    def __init__(self, js: Any, space: str, model: MeshModel, *, timeout: float = 5.0) -> None:
        self.js, self.space, self.model, self.timeout = js, space, model, timeout
        self.dm_error: str | None = None  # why the DM backfill was refused, if it was

    async def backfill(
        self, channels: Iterable[str], *, limit: int, since_ts: float | None = None,
        dm_limit: int = 0,
    ) -> Backfill:
        """Newest ``limit`` rows of each channel that replays, inside its replay window, and
        the newest ``dm_limit`` DMs (0: none); with ``since_ts`` only rows from then on (an
        outage's gap). In stream order (:func:`stream_order`), never by ``ts``. A channel
        whose read failed leaves the others' rows standing and is said in ``failed``."""
        now = self.model.clock()
        rows: list[Stored] = []
        dms: list[Stored] = []
        failed: list[BaseException] = []
        sem = asyncio.Semaphore(PARALLEL_READS)

        async def one(ch: str) -> None:
            if not self.model.effective(ch).replay:
                return
            floor_ts = self.model.replay_floor(ch, now)
            if since_ts is not None:
                floor_ts = since_ts if floor_ts is None else max(floor_ts, since_ts)
            try:
                async with sem:
                    got = await self.read_stored(chat_stream(self.space),
                                                 chat_pattern(self.space, ch), limit)
            except Exception as e:  # noqa: BLE001 - the other channels' rows stand; said in Backfill.failed
                failed.append(e)
                return
            rows.extend(r for r in got if floor_ts is None or r.delivery.message.ts >= floor_ts)

        await asyncio.gather(*(one(c) for c in channels))
        if dm_limit > 0:
            try:
                got = await self.read_stored(dm_stream(self.space),
                                             kind_pattern(self.space, "inst"), dm_limit)
                dms.extend(r for r in got if since_ts is None or r.delivery.message.ts >= since_ts)
            except Exception as e:  # noqa: BLE001 - refused by ACL: the lens stays live-only
                self.dm_error = short_error(e)
        return Backfill(stream_order(rows, dms), failed[0] if failed else None)

    async def read(self, stream: str, filt: str, limit: int) -> list[Delivery]:
        """Newest ``limit`` messages matching ``filt``, oldest first (stream order)."""
        return [r.delivery for r in await self.read_stored(stream, filt, limit)]

    async def read_stored(self, stream: str, filt: str, limit: int) -> list[Stored]:
        """Newest ``limit`` messages matching ``filt`` with their stream sequence and store
        time, in stream order."""
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
        out: list[Stored] = []
        for seq in sorted(got)[-limit:] if len(got) > limit else sorted(got):
            msg = got[seq]
            d = decode_delivery(msg.subject, msg.data, history=True)
            if type(d) is Delivery:
                out.append(Stored(stream, seq, stored_ms(msg), d))
            else:
                self.model.apply_rejection(d.reason, msg.subject)
        return out

    async def last(self, stream: str, filt: str) -> Delivery | None:
        """The newest message matching ``filt`` (one consumer, one fetch), or None. A row the
        reader rules reject is None here, not counted again (the backfill counts rejections)."""
        msg = await self._first(stream, filt, api.DeliverPolicy.LAST)
        if msg is None:
            return None
        d = decode_delivery(msg.subject, msg.data, history=True)
        return d if type(d) is Delivery else None

    async def _ephemeral(self, stream: str, filt: str, **cfg: Any) -> Any:
        return await self.js.add_consumer(stream, api.ConsumerConfig(
            filter_subject=filt, ack_policy=api.AckPolicy.NONE, mem_storage=True,
            inactive_threshold=30.0, max_ack_pending=-1, **cfg))

    async def _delete(self, stream: str, name: str, psub: Any = None) -> None:
        if psub is not None:
            try:
                await psub.unsubscribe()
            except Exception:  # noqa: BLE001 - cleanup of a one-off consumer; the broker reaps it anyway [counted: COTAL_LOG]
                swallowed("meshview.observe.history:History._delete")
        try:
            await self.js.delete_consumer(stream, name)
        except Exception:  # noqa: BLE001 - cleanup of a one-off consumer; the broker reaps it anyway [counted: COTAL_LOG]
            swallowed("meshview.observe.history:History._delete#2")

    async def _edge_seq(self, stream: str, filt: str, policy: api.DeliverPolicy) -> int | None:
        msg = await self._first(stream, filt, policy)
        return None if msg is None else msg.metadata.sequence.stream

    async def _first(self, stream: str, filt: str, policy: api.DeliverPolicy) -> Any | None:
        """The one message a throwaway consumer with ``policy`` delivers first, or None."""
        ci = await self._ephemeral(stream, filt, deliver_policy=policy)
        psub = None
        try:
            if not ci.num_pending:
                return None
            psub = await self.js.pull_subscribe_bind(consumer=ci.name, stream=stream)
            msgs = await psub.fetch(1, timeout=self.timeout)
            return msgs[0] if msgs else None
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
                    msgs = await psub.fetch(min(pending, 256), timeout=self.timeout)
                except Exception:  # noqa: BLE001 - a failed fetch ends the range read; what was read stands [counted: COTAL_LOG]
                    if not out:
                        raise  # nothing of a range that holds messages: not an empty history
                    swallowed("meshview.observe.history:History._read_range")
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
