"""The observer under a backlog, on a real broker: time-sliced apply and bounded overflow.

The drain is held (as it is during the history prefill) while a burst is published, so the
backlog is deterministic; then it is released and we watch how it is worked off.
"""

from __future__ import annotations

import asyncio
import json

from meshview.link.connect import ConnectTarget, connect
from meshview.model.mesh import MeshModel
from meshview.observe.observer import Observer, ObserverOptions
from conftest import until
from support.observer import message


async def start(url: str, space: str, **opts) -> tuple[Observer, MeshModel]:
    onc, _ = await connect(ConnectTarget((url,), space, timeout=3))
    model = MeshModel(space, record_events=True, feed_cap=20_000)
    obs = Observer(onc, space, model, options=ObserverOptions(backfill=0, **opts))
    await obs.start()
    return obs, model


async def burst(nc, space: str, n: int) -> None:
    """``n`` channel messages ``m0 .. m{n-1}`` in one go (core publish, one connection:
    the broker keeps their order)."""
    subj = f"cotal.{space}.chat.local.pub.general"
    for i in range(n):
        await nc.publish(subj, json.dumps(message(space, "pub", f"m{i}", channel="general")).encode())
    await nc.flush()


async def held(obs: Observer, nc, space: str, n: int, expect_queued: int) -> None:
    """Publish ``n`` messages while the drain is held until ``expect_queued`` are queued."""
    obs.hold_drain()  # the same gate that holds live traffic behind the prefill
    await burst(nc, space, n)
    await until(lambda: obs.queued >= expect_queued and obs.queued_frames()[-1].find(
        f'"m{n - 1}"'.encode()) >= 0, timeout=15)


async def test_big_backlog_is_applied_in_slices_in_order(broker, nc, space):
    obs, model = await start(broker.url, space, slice_ms=1.0)
    try:
        n = 6000
        await held(obs, nc, space, n, n)
        slices0 = obs.slices
        loop_turns = 0  # how often other tasks ran while the backlog was being applied
        done = asyncio.Event()

        async def other_task() -> None:
            nonlocal loop_turns
            while not done.is_set():
                if obs.queued:
                    loop_turns += 1
                await asyncio.sleep(0)

        t = asyncio.create_task(other_task())
        obs.release_drain()
        await until(lambda: not obs.queued and model.feed_len >= n, timeout=20)
        done.set()
        await t
        texts = [e.text for e in model.snapshot().feed if e.kind == "channel"]
        assert texts == [f"m{i}" for i in range(n)]  # in order, nothing lost
        assert model.total >= n
        assert obs.slices - slices0 >= 3  # a 6000-frame backlog does not fit one 1 ms slice
        assert loop_turns >= 2  # and the loop ran other work between slices
        st = model.snapshot().status
        assert st.dropped == 0 and not st.lagging
    finally:
        await obs.stop()
        await obs.nc.close()


async def test_overflow_is_bounded_counted_and_visible(broker, nc, space):
    cap = 1000
    obs, model = await start(broker.url, space, queue_cap=cap)
    try:
        n = 3000
        await held(obs, nc, space, n, cap)
        assert obs.queued == cap  # the backlog never grows past its cap
        obs.release_drain()
        await until(lambda: model.snapshot().status.dropped == n - cap, timeout=10)
        await until(lambda: not obs.queued)
        snap = model.snapshot()
        texts = [e.text for e in snap.feed if e.kind == "channel"]
        # the oldest frames went; what was applied is the newest, still in order
        assert texts == [f"m{i}" for i in range(n - cap, n)]
        assert snap.status.dropped == n - cap == obs.dropped_total
        assert dict(snap.rejections).get("queue-overflow") is None  # not a reader rejection
        lag = [e for e in model.pending_events() if getattr(e, "lagging", False)]
        assert lag and lag[0].dropped == n - cap  # the line stream hears about it too
        await until(lambda: not model.snapshot().status.lagging)  # caught up: flag clears
        assert model.snapshot().status.dropped == n - cap  # the count stays
    finally:
        await obs.stop()
        await obs.nc.close()


async def test_overflow_is_bounded_in_bytes_too(broker, nc, space):
    """Near-1 MiB messages: the frame cap alone would let the backlog hold gigabytes."""
    budget = 4 * 1024 * 1024
    obs, model = await start(broker.url, space, queue_bytes=budget)
    try:
        obs.hold_drain()
        subj = f"cotal.{space}.chat.local.pub.general"
        big = "x" * (900 * 1024)
        n = 12
        for i in range(n):
            await nc.publish(subj, json.dumps(message(space, "pub", f"b{i} {big}",
                                                      channel="general")).encode())
        await nc.flush()
        await until(lambda: obs.queued and obs.queued_frames()[-1].find(f'"b{n - 1} '.encode()) >= 0,
                    timeout=15)
        assert obs.queued_bytes <= budget
        assert obs.queued_bytes == sum(len(d) for d in obs.queued_frames())
        kept = obs.queued
        assert 0 < kept < n
        obs.release_drain()
        await until(lambda: model.snapshot().status.dropped == n - kept, timeout=10)
        await until(lambda: not obs.queued)
        assert obs.queued_bytes == 0
        texts = [e.text.split(" ", 1)[0] for e in model.snapshot().feed if e.kind == "channel"]
        assert texts == [f"b{i}" for i in range(n - kept, n)]  # the newest, in order
    finally:
        await obs.stop()
        await obs.nc.close()
