"""One hostile publish must not make the observer deaf.

NATS subjects and header values are bytes; the broker relays invalid UTF-8 in them. nats-py
decodes every received subject (``Client._build_message``) with strict UTF-8 inside its read
loop, and an exception there ends the read loop (header values survive: they are decoded
leniently): the connection stays
"connected" but hears nothing until pings time out and it reconnects (about 20–30 s with
the observer's 10 s ping interval). Any participant allowed to publish on a subject the
observer taps (every agent on its own chat subjects; anyone in open mode) can do this at
will, and a retained copy in CHAT replays it to every history read.

These tests publish one such message, then an ordinary one right after it, and require the
ordinary one to be printed promptly without a reconnect.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
import uuid

import nats
import pytest

from cotal_tui.demo.broker import Broker
from cotal_tui.demo.provision import provision_space
from support.hostile import RawPublisher
from support.watchproc import WatchProc

SPACE = "kl"

# meshview.link.connect.LenientClient decodes received subjects with U+FFFD instead of raising in
# the read loop; a KV key is a subject token, so the presence watch is covered the same way.


@pytest.fixture(scope="module")
def broker_kl():
    b = Broker(name="cotal-killers").start()

    async def prov():
        nc = await nats.connect(b.url)
        await provision_space(nc, SPACE)
        await nc.close()

    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        ex.submit(asyncio.run, prov()).result(30)
    yield b
    b.stop()


def _msg(actor: str, channel: str) -> tuple[str, bytes]:
    mid = f"{actor}-{uuid.uuid4().hex[:8]}"
    env = {"id": mid, "ts": int(time.time() * 1000), "space": SPACE,
           "from": {"id": f"local.{actor}", "name": actor}, "channel": channel,
           "parts": [{"kind": "text", "text": mid}]}
    return mid, json.dumps(env).encode()


async def _check(broker, subject: bytes, payload: bytes, headers=()) -> None:
    w = WatchProc.start("--json", "--server", broker.url, "--space", SPACE)
    try:
        await w.wait_for(lambda: w.objs("state"), 20, "watch up")
        before, p0 = _msg("before", "general")
        with RawPublisher.to(broker.url) as pub:
            pub.publish(f"cotal.{SPACE}.chat.local.before.general".encode(), p0)
            pub.flush()
            await w.wait_for(lambda: any(o.get("id") == before for o in w.objs("message")), 10,
                             "a normal message before the hostile one")
            pub.publish(subject, payload, headers)
            mid, p1 = _msg("after", "general")
            pub.publish(f"cotal.{SPACE}.chat.local.after.general".encode(), p1)
            pub.flush()
        await w.wait_for(lambda: any(o.get("id") == mid for o in w.objs("message")), 5,
                         "the message right after the hostile one")
        assert [s for _, s in w.states()] == ["connected"]
    finally:
        w.stop()


async def test_invalid_utf8_subject_does_not_deafen(broker_kl):
    _, payload = _msg("x", "general")
    await _check(broker_kl, f"cotal.{SPACE}.chat.local.bad.gen".encode() + b"\xff\xfe", payload)


async def test_invalid_utf8_header_does_not_deafen(broker_kl):
    mid, payload = _msg("hdr", "general")
    await _check(broker_kl, f"cotal.{SPACE}.chat.local.hdr.general".encode(), payload,
                 ((b"X-Bad", b"\xff\xfe"),))


async def test_control_bytes_in_a_subject_are_harmless(broker_kl):
    """Escape bytes are valid UTF-8: they must be rejected by name, not break the reader."""
    _, payload = _msg("esc", "general")
    await _check(broker_kl, f"cotal.{SPACE}.chat.local.esc.gen\x1b[2J\x1b]0;x\x07".encode(),
                 payload)


async def test_invalid_utf8_presence_key_does_not_deafen(broker_kl):
    w = WatchProc.start("--json", "--server", broker_kl.url, "--space", SPACE)
    try:
        await w.wait_for(lambda: w.objs("state"), 20, "watch up")
        now = int(time.time() * 1000)

        def rec(pid: str) -> bytes:
            return json.dumps({"card": {"id": pid, "name": pid.split(".")[1], "kind": "agent"},
                               "status": "idle", "ts": now, "lifecycleUid": "c" * 26}).encode()

        with RawPublisher.to(broker_kl.url) as pub:
            pub.publish(f"$KV.cotal_presence_{SPACE}.local.".encode() + b"\xff\xfe", rec("local.x"))
            pub.publish(f"$KV.cotal_presence_{SPACE}.local.after_key".encode(),
                        rec("local.after_key"))
            pub.flush()
        await w.wait_for(lambda: any(o.get("id") == "local.after_key"
                                     for o in w.objs("presence")), 5,
                         "the presence record right after the hostile key")
    finally:
        w.stop()
