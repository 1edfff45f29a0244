"""Memory under large-but-legal messages: the observer's feed must be bounded in bytes, not
only in rows. Each message here is valid and under the broker's 1 MiB max_payload; an agent
(or anyone on an open mesh) may send them. The space has only its presence bucket (so
``cotal watch`` accepts it) and no CHAT stream, so the broker stores nothing: only the live
tap carries the load.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from cotal_tui.demo.broker import Broker
from support.hostile import RawPublisher
from support.watchproc import WatchProc

pytestmark = pytest.mark.slow  # a broker scenario over ~10 s

SPACE = "mem"
N = 300
TEXT = 900 * 1024  # bytes of text per message


@pytest.fixture(scope="module")
def broker_mem():
    b = Broker(name="cotal-mem").start()
    asyncio.run(_presence_only(b.url))
    yield b
    b.stop()


async def _presence_only(url: str) -> None:
    """Only the presence bucket: enough for ``cotal watch`` to call the space provisioned,
    while no stream stores the chat load."""
    import nats
    from nats.js.api import KeyValueConfig

    from meshview.wire.names import bucket_names

    nc = await nats.connect(url)
    try:
        await nc.jetstream().create_key_value(KeyValueConfig(bucket_names(SPACE).presence, ttl=6))
    finally:
        await nc.close()


def _msg(i: int) -> tuple[bytes, bytes, str]:
    mid = f"big-{i}"
    env = {"id": mid, "ts": int(time.time() * 1000), "space": SPACE,
           "from": {"id": "local.big", "name": "big"}, "channel": "general",
           "parts": [{"kind": "text", "text": f"{i:06d}" + "A" * TEXT}]}
    return f"cotal.{SPACE}.chat.local.big.general".encode(), json.dumps(env).encode(), mid


async def test_rss_is_bounded_under_a_stream_of_near_max_payload_messages(broker_mem):
    w = WatchProc.start("--json", "--server", broker_mem.url, "--space", SPACE)
    try:
        await w.wait_for(lambda: w.objs("state"), 30, "watch up")
        rss0 = w.rss_kb() / 1024
        peak = rss0
        with RawPublisher.to(broker_mem.url) as pub:
            for i in range(N):
                subj, payload, mid = _msg(i)
                pub.publish(subj, payload)
                if i % 20 == 19:  # pace: never a broker slow consumer (64 MiB pending)
                    pub.flush()
                    await w.wait_for(lambda m=mid: any(o.get("id") == m
                                                       for o in w.objs("message")[-25:]),
                                     60, f"message {mid}")
                    peak = max(peak, w.rss_kb() / 1024)
        sent = N * TEXT / 2**20
        print(f"\nrss {rss0:.0f} MB -> peak {peak:.0f} MB after {sent:.0f} MiB of legal messages")
        assert peak - rss0 < 128, f"RSS grew {peak - rss0:.0f} MB for {sent:.0f} MiB of input"
    finally:
        w.stop()


async def test_rss_is_bounded_under_oversized_presence_cards(broker_mem):
    space = "memp"
    from cotal_tui.demo.provision import provision_space
    import nats
    nc = await nats.connect(broker_mem.url)
    try:
        await provision_space(nc, space)
    finally:
        await nc.close()
    w = WatchProc.start("--json", "--server", broker_mem.url, "--space", space)
    try:
        await w.wait_for(lambda: w.objs("state"), 30, "watch up")
        rss0 = w.rss_kb() / 1024
        n = 150
        with RawPublisher.to(broker_mem.url) as pub:
            for i in range(n):
                pid = f"local.p{i}"
                rec = {"card": {"id": pid, "name": "N" * TEXT, "kind": "agent"},
                       "status": "working", "ts": int(time.time() * 1000),
                       "lifecycleUid": "a" * 26}
                pub.publish(f"$KV.cotal_presence_{space}.{pid}".encode(), json.dumps(rec).encode())
                if i % 20 == 19 or i == n - 1:
                    pub.flush()
                    await w.wait_for(lambda p=pid: any(o.get("id") == p
                                                       for o in w.objs("presence")[-25:]),
                                     60, f"presence {pid}")
        grew = w.rss_kb() / 1024 - rss0
        print(f"\nrss grew {grew:.0f} MB for {n} presence cards of {TEXT // 1024} KiB")
        assert grew < 96, f"RSS grew {grew:.0f} MB for {n * TEXT / 2**20:.0f} MiB of cards"
    finally:
        w.stop()


def test_the_cli_pins_the_mmap_threshold_on_glibc():
    """The RSS bound above rests on this: without the pin, glibc serves each later large
    message from a heap that never shrinks (+135 MB measured on a loaded CI box)."""
    import platform

    from cotal_tui.cli.process import steady_malloc

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("the pin is glibc's mallopt")
    assert steady_malloc() is True
