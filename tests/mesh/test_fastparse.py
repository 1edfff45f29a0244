"""The direct-route fast path of our client's protocol parser (meshview/link/fastparse.py).

The oracle is nats-py's own parser: the same bytes, cut into reads at random places (one
byte at a time included), go through the stock parser and through ours, each in a client
that records what the parser hands on (deliveries to a direct feed, frames for the other
subscriptions, PING/PONG/INFO/-ERR, flow-control replies). Both must hand on the same things
in the same order. Then a real broker, a direct and a callback subscription on one connection,
and frames of every size, with headers and replies, interleaved with pings.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import nats
from nats.protocol.parser import Parser

from meshview.link.connect import ConnectTarget, LenientClient, connect
from meshview.link.fastparse import DirectParser

DIRECT, DIRECT_HDRS, DIRECT_FC, GONE, OTHER = 1, 2, 3, 4, 9


class _Sub:
    def __init__(self, sid: int) -> None:
        self._id = sid


class _Recorder(LenientClient):
    """Our client, unconnected, reading with ``parser`` and recording what it is handed."""

    def __init__(self, parser: type[Parser]) -> None:
        super().__init__()
        self._ps = parser(self)
        self.log: list[tuple[Any, ...]] = []
        for sid in (DIRECT, DIRECT_HDRS, DIRECT_FC, OTHER):
            self._subs[sid] = _Sub(sid)  # type: ignore[assignment]
        self.direct(_Sub(DIRECT), self._feed("feed"), headers=False)
        self.direct(_Sub(DIRECT_HDRS), self._feed("feed+h"), headers=True)
        self.direct(_Sub(DIRECT_FC), self._feed("feed+fc", fc=True), headers=True)
        self.direct(_Sub(GONE), self._feed("gone"), headers=False)  # routed, not subscribed

    def _feed(self, name: str, fc: bool = False):
        def feed(subject: str, reply: str, data: bytes, headers: Any) -> str | None:
            self.log.append((name, subject, reply, data, headers))
            return f"fc.{len(self.log)}" if fc and reply else None
        return feed

    async def _process_msg(self, sid, subject, reply, data, headers):  # type: ignore[override]
        if self._direct and sid in self._direct and sid in self._subs:
            return await super()._process_msg(sid, subject, reply, data, headers)
        self.log.append(("msg", sid, subject, reply, data, headers))

    async def _process_ping(self) -> None:
        self.log.append(("ping",))

    async def _process_pong(self) -> None:
        self.log.append(("pong",))

    async def _process_info(self, info, initial_connection=False) -> None:  # type: ignore[override]
        self.log.append(("info", info))

    async def _process_err(self, err_msg: str) -> None:
        self.log.append(("err", err_msg))

    async def publish(self, subject, payload=b"", reply="", headers=None) -> None:  # type: ignore[override]
        self.log.append(("pub", subject, payload))


def _frames(rng: random.Random, n: int) -> bytes:
    hdr_blocks = [b"NATS/1.0\r\nKV-Operation: DEL\r\n\r\n", b"NATS/1.0 100 Idle Heartbeat\r\n\r\n",
                  b"NATS/1.0\r\nX: a\r\nY: b\xff\r\n\r\n", b"NATS/1.0 404 No Messages\r\n\r\n"]
    subjects = [b"cotal.s.chat.local.a.general", b"cotal.s.chat.local.b.x\xff\xfe",
                b"$KV.cotal_presence_s.local.a", b"_INBOX.abc.1"]
    out = []
    for _ in range(n):
        r = rng.random()
        subj = rng.choice(subjects)
        payload = rng.choice([b"", b"x", b"\r\n", b"MSG a 1 3\r\nabc\r\n", b"PING\r\n",
                              bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))])
        sid = rng.choice([DIRECT, DIRECT, DIRECT_HDRS, DIRECT_FC, GONE, OTHER, 77])
        reply = rng.choice([b"", b"", b" _INBOX.r.1"])
        if r < 0.55:
            out.append(b"MSG %s %d%s %d\r\n%s\r\n" % (subj, sid, reply, len(payload), payload))
        elif r < 0.8:
            h = rng.choice(hdr_blocks)
            out.append(b"HMSG %s %d%s %d %d\r\n%s%s\r\n" % (subj, sid, reply, len(h),
                                                           len(h) + len(payload), h, payload))
        else:
            out.append(rng.choice([
                b"PING\r\n", b"PONG\r\n", b"+OK\r\n",
                b"INFO " + json.dumps({"server_id": "x", "max_payload": 1 << 20}).encode() + b"\r\n",
                b"-ERR 'Permissions Violation for Subscription to \"cotal.s.inst.>\"'\r\n",
                # not the server's form: the stock parser reads (or refuses) these, never ours
                b"MSG  %s %d %d\r\n%s\r\n" % (subj, DIRECT, len(payload), payload),
                b"MSG %s\t%d %d\r\n%s\r\n" % (subj, DIRECT, len(payload), payload),
                b"MSG %s +%d %d\r\n%s\r\n" % (subj, DIRECT, len(payload), payload),
                b"HMSG %s %d 0 %d\r\n%s\r\n" % (subj, DIRECT, len(payload), payload),
            ]))
    return b"".join(out)


async def _read(parser: type[Parser], chunks: list[bytes]) -> tuple[list, bytes, int]:
    c = _Recorder(parser)
    for ch in chunks:
        await c._ps.parse(ch)
    return c.log, bytes(c._ps.buf), c.stats["in_msgs"]


def _cut(data: bytes, rng: random.Random, most: int) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        k = rng.randint(1, most)
        out.append(data[i:i + k])
        i += k
    return out


async def test_the_fast_path_hands_on_what_the_stock_parser_does_at_every_cut():
    rng = random.Random(40)
    for trial in range(40):
        data = _frames(rng, 60)
        for chunks in ([data], _cut(data, rng, 7), _cut(data, rng, 400),
                       _cut(data, rng, 4096), [data[i:i + 1] for i in range(len(data))]
                       if trial < 4 else [data[:len(data) // 2], data[len(data) // 2:]]):
            want = await _read(Parser, chunks)
            got = await _read(DirectParser, chunks)
            assert got == want, trial
            assert any(e[0] == "feed" for e in want[0]) and any(e[0] == "msg" for e in want[0])


async def test_a_frame_still_arriving_waits_and_a_long_run_yields():
    big = bytes(range(256)) * 400  # one frame over several reads
    data = b"MSG a.b 1 %d\r\n%s\r\n" % (len(big), big) + b"MSG a.b 1 1\r\nz\r\n" * 200
    c = _Recorder(DirectParser)
    await c._ps.parse(data[:10])
    await c._ps.parse(data[10:5000])
    assert c.log == []  # the control line, then part of the payload: nothing handed on yet
    await c._ps.parse(data[5000:])
    assert [e[3] for e in c.log] == [big] + [b"z"] * 200
    assert c._ps.buf == bytearray() and c.stats["in_msgs"] == 201


async def test_a_real_broker_delivers_every_shape_in_order_on_both_paths(broker):
    """One connection of ours (fast path) and a stock client read the same subjects; frames of
    every size (an empty one, one spanning many reads), with headers and replies, interleaved
    with pings and with a callback subscription on our connection."""
    nc, _ = await connect(ConnectTarget((broker.url,), "fp"))
    plain = await nats.connect(broker.url)
    pub = await nats.connect(broker.url)
    try:
        assert isinstance(nc, LenientClient) and isinstance(nc._ps, DirectParser)
        got: list[tuple[str, str, bytes, Any]] = []
        plain_got: list[tuple[str, str, bytes, Any]] = []
        cb_got: list[bytes] = []

        def feed(subject: str, reply: str, data: bytes, headers: Any) -> None:
            got.append((subject, reply, data, headers))

        async def on_plain(m: Any) -> None:
            plain_got.append((m.subject, m.reply, m.data, m.headers))

        async def on_cb(m: Any) -> None:
            cb_got.append(m.data)

        sub = await nc.subscribe("fp.direct.>", cb=on_cb)  # routed direct below
        nc.direct(sub, feed, headers=True)
        await nc.subscribe("fp.cb.>", cb=on_cb)
        await plain.subscribe("fp.direct.>", cb=on_plain)
        await nc.flush()
        await plain.flush()
        rng = random.Random(7)
        sent = []
        for i in range(3000):
            size = rng.choice([0, 1, 40, 300, 300, 300, 70_000])
            data = bytes([i % 251]) * size
            subj = f"fp.direct.{i % 7}"
            if i % 5 == 0:
                await pub.publish(subj, data, headers={"N": str(i)})
            elif i % 5 == 1:
                await pub.publish(subj, data, reply=f"r.{i}")
            else:
                await pub.publish(subj, data)
            if i % 3 == 0:
                await pub.publish("fp.cb.x", b"cb%d" % i)
            if i % 500 == 0:
                await nc.flush()  # a PING/PONG between frames
            sent.append(data)
        await pub.flush()
        for _ in range(400):
            if len(got) == len(plain_got) == 3000 and len(cb_got) == 1000:
                break
            await asyncio.sleep(0.05)
        assert [g[2] for g in got] == sent
        assert [(s, r, d, h or None) for s, r, d, h in got] == \
               [(s, r, d, h or None) for s, r, d, h in plain_got]
        assert cb_got == [b"cb%d" % i for i in range(0, 3000, 3)]
        assert nc.stats["in_msgs"] >= 4000
    finally:
        await pub.close()
        await plain.close()
        await nc.close()
