"""nats-py's protocol parser with one fast path: a whole ``MSG``/``HMSG`` for a direct route.

A channel flood arrives as about a hundred ``MSG`` frames per socket read. The stock parser
(``nats.protocol.parser.Parser``) tries its regular expressions, fills a dict, copies the
payload twice, trims the buffer and awaits a ``_process_msg`` coroutine for each frame: for a
subscription handed to a feed (:meth:`~meshview.link.connect.LenientClient.direct`) that was
~2.3 µs a message, feed included (~1.5 µs here). A complete frame for a direct route is matched
by one strict pattern and handed to its feed with what ``LenientClient._process_msg`` does
around it (stats, headers parsed only when the route reads them, the flow-control reply, the
yield every ``YIELD_EVERY`` deliveries).

Everything else goes to the stock parser one operation at a time, so it is parsed exactly
as before: ``+OK``, ``PING``/``PONG``, ``INFO``, ``-ERR``, a frame for any other
subscription, a control line that is not the plain single-spaced form the server writes,
and a frame whose bytes are still arriving (split reads wait for the rest, as the stock
parser does).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from nats.protocol.parser import AWAITING_CONTROL_LINE, Parser

_CRLF = b"\r\n"
YIELD_EVERY = 64  # deliveries handed on in a row before a direct or callback read yields


# a frame's control line exactly as the server writes it: whitespace-free tokens between
# single spaces, sid and sizes in digits. Whatever else the stock parser's regular
# expressions would take (tabs, runs of spaces, a sid like ``+1``) is left to them.
_MSG = re.compile(rb"MSG ([^\s]+) ([0-9]+) (?:([^\s]+) )?([0-9]+)\r\n")
_HMSG = re.compile(rb"HMSG ([^\s]+) ([0-9]+) (?:([^\s]+) )?([0-9]+) ([0-9]+)\r\n")

# why a run of direct frames stopped
_OTHER = 0  # the head is not one (or the buffer is empty): the stock parser's
_WAIT = 1  # the head is still arriving: wait for more bytes
_YIELD = 2  # ``YIELD_EVERY`` deliveries in a row: let the loop run
_FLOW = 3  # the feed asked for a flow-control reply (``pending`` is its subject)
_HEADERS = 4  # a frame whose route reads headers (``pending`` is the delivery to finish)


class DirectParser(Parser):
    """The parser a :class:`~meshview.link.connect.LenientClient` reads with."""

    async def parse(self, data: bytes = b"") -> None:
        self.buf.extend(data)
        nc: Any = self.nc
        pending: Any
        while self.buf:
            if self.state != AWAITING_CONTROL_LINE:
                # the stock parser holds a control line and waits for its payload
                if len(self.buf) < self.needed + 2 or not await self._stock(self.needed + 2):
                    return
                continue
            why, pending = self._run() if nc._direct else (_OTHER, None)
            if why == _WAIT:
                return
            if why == _YIELD:
                await asyncio.sleep(0)  # one read holds hundreds: let the loop run
            elif why == _FLOW:
                await nc.publish(pending, b"")
                if nc._direct_run >= YIELD_EVERY:
                    nc._direct_run = 0
                    await asyncio.sleep(0)
            elif why == _HEADERS:
                feed, subject, reply, payload, hbuf = pending
                fc = feed(subject, reply, payload, await nc._process_headers(hbuf))
                if fc:
                    await nc.publish(fc, b"")
                nc._direct_run += 1
                if nc._direct_run >= YIELD_EVERY:
                    nc._direct_run = 0
                    await asyncio.sleep(0)
            elif self.buf:  # _OTHER: one operation to the stock parser
                eol = self.buf.find(_CRLF)
                if eol < 0 or not await self._stock(eol + 2):
                    return  # a control line still arriving (the stock parser waits too)

    def _run(self) -> tuple[int, Any]:
        """Hand the whole direct frames at the head of the buffer to their feeds, as
        ``LenientClient._process_msg`` would; the bytes taken leave the buffer at once, at the
        end (a ``del`` per frame cost ~0.4 µs)."""
        nc: Any = self.nc
        buf = self.buf
        direct, subs = nc._direct, nc._subs
        end = len(buf)
        pos = 0
        run = nc._direct_run  # (counted here, stored once at the end, as the stats are)
        taken = taken_bytes = 0
        # a run of frames on one subject (a busy sender) decodes it once: one str object
        # downstream too, its hash computed once
        last_b, last_s = b"", ""
        why, pending = _OTHER, None
        mv = memoryview(buf)
        try:
            while pos < end:
                m = _MSG.match(buf, pos)
                if m is not None:
                    subj, sid_b, reply_b, size_b = m.groups()
                    hsize = 0
                else:
                    m = _HMSG.match(buf, pos)
                    if m is None:
                        break  # another operation, a line still arriving, or not the form
                        # the server writes a frame in: the stock parser's (or a wait) either way
                    subj, sid_b, reply_b, hsize_b, size_b = m.groups()
                    hsize = int(hsize_b)
                    if hsize == 0:
                        break  # (a header block of no bytes: the stock parser's odd case)
                sid = int(sid_b)
                route = direct.get(sid)
                if route is None or sid not in subs:
                    break  # another subscription's: the stock path (its queue, its task)
                size = int(size_b)
                start = m.end()
                if end < start + size + 2:
                    why = _WAIT  # its payload is still arriving
                    break
                if hsize > size:
                    break  # (headers longer than the frame: the stock parser's odd case)
                feed, parse_headers = route
                reply = "" if reply_b is None else reply_b.decode("utf-8", "replace")
                if subj != last_b:
                    last_b, last_s = subj, subj.decode("utf-8", "replace")
                subject = last_s
                if hsize:
                    payload = bytes(mv[start + hsize:start + size])
                    hbuf = bytes(mv[start:start + hsize]) if parse_headers else None
                else:
                    payload = bytes(mv[start:start + size])
                    hbuf = None
                pos = start + size + 2
                taken += 1
                taken_bytes += len(payload)
                if hbuf is not None:
                    why, pending = _HEADERS, (feed, subject, reply, payload, hbuf)
                    break
                fc = feed(subject, reply, payload, None)
                run += 1
                if fc:
                    why, pending = _FLOW, fc  # (the yield, if due, comes after the reply)
                    break
                if run >= YIELD_EVERY:
                    run = 0
                    why = _YIELD
                    break
        finally:
            mv.release()
            del buf[:pos]
            nc._direct_run = run
            stats = nc.stats
            stats["in_msgs"] += taken
            stats["in_bytes"] += taken_bytes
        return why, pending

    async def _stock(self, k: int) -> bool:
        """The stock parser on the first ``k`` bytes only (one operation, or a payload it
        waits for). False when it took none of them: wait for more bytes, as it would."""
        buf = self.buf
        one = self.buf = bytearray(buf[:k])
        taken = 0
        try:
            await super().parse()
        finally:
            if self.buf is one:  # (else a reset() for a new connection: the old bytes go)
                # it only ever takes from the front: what is left of ``one`` is still in ``buf``
                taken = k - len(one)
                del buf[:taken]
                self.buf = buf
        return self.buf is not buf or taken > 0
