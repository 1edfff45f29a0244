"""Liveness on a real broker: silent peers are noticed on both sides, idle sessions are not.

A live side says something every idle-credit tick (data, a credit, or the keepalive
re-advertisement), so silence for a bounded time means the peer is gone. The manager reaps a
caller that vanished without a ``close`` (kill -9): ``maxSessions`` recovers by itself. The
client notices a manager that vanished and runs its reconnect/finish logic with a notice.
Neither tears down a session that is merely idle (no output at all).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import nats
import pytest

from attach.session.client import AttachSession, Notice, check_grant, locate, target_for
from attach.control.endpoint import EndpointClient
from attach.session.rail import PEER_SILENT
from meshview.wire.endpoint import Caller
from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.demo.manager.base import CALLER_SILENCE_MS
from conftest import until

BOUND_MS = 2500  # the tests' silence bound on both sides (defaults: 30 s manager, 10 s client)


@pytest.fixture
async def manager(nc, space):
    m = DemoManager(nc, space, [SeatSpec("alice", "local.alice")], max_sessions=1,
                    caller_silence_ms=BOUND_MS)
    await m.start()
    yield m
    await m.stop()


async def raw_grant(nc, space: str) -> dict:
    caller = Caller.fresh()
    ep = EndpointClient(nc, space, caller=caller)
    loc = await locate(ep, "alice")
    r = await ep.call("attach", None, instance_id=loc.instance_id, target=target_for(loc.row, caller),
                      mode="any", bind={"instanceId": loc.instance_id, "epoch": loc.epoch},
                      deadline_ms=5000)
    assert r.ok, r.error
    return check_grant(r.data["grant"], space, r)


CALLER_PROC = """
import asyncio, sys, nats
from attach.session.client import AttachSession
async def main(url, space):
    nc = await nats.connect(url)
    out = bytearray()
    s = AttachSession(space, "alice", nc=nc, on_output=out.extend, reconnect=False)
    await s.open()
    while b"alice>" not in out:
        await asyncio.sleep(0.02)
    print("attached", flush=True)
    await s.run()
asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_the_defaults_are_longer_than_the_tests_bound():
    assert CALLER_SILENCE_MS >= 25_000  # never beats the 30 s stall watchdog to a slow reader
    assert AttachSession("s", "n", nc=object()).liveness_s == 10.0


async def test_a_caller_killed_without_a_close_is_reaped_and_the_ceiling_recovers(
        manager, broker, nc, space):
    p = subprocess.Popen([sys.executable, "-c", CALLER_PROC, broker.url, space],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(p.stdout.readline), 20)
        assert line.strip() == b"attached", p.stderr.read().decode()
        assert manager.live_sessions == 1
        os.kill(p.pid, signal.SIGKILL)  # no close frame, no flush: the connection just dies
        await asyncio.to_thread(p.wait, 5)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(5)
    took = await until(lambda: manager.live_sessions == 0, BOUND_MS / 1000 + 3,
                       "the manager to reap the vanished caller")
    print(f"\nvanished caller reaped {took:.1f}s after the kill (bound {BOUND_MS / 1000:.1f}s)")
    await raw_grant(nc, space)  # max_sessions=1: the slot is usable again


async def test_a_grant_whose_rails_never_open_is_reaped(manager, nc, space):
    await raw_grant(nc, space)  # the caller takes the grant and never says a word
    assert manager.live_sessions == 1
    await until(lambda: manager.live_sessions == 0, BOUND_MS / 1000 + 3, "the silent grant to go")


async def test_an_idle_session_outlives_the_bound_on_keepalives_alone(manager, broker, nc, space):
    nc_c = await nats.connect(broker.url)
    out = bytearray()
    s = AttachSession(space, "alice", nc=nc_c, on_output=out.extend, reconnect=False,
                      liveness_s=BOUND_MS / 1000)
    heard = {"in": 0, "out": 0}
    try:
        await s.open()
        task = asyncio.get_running_loop().create_task(s.run())
        await until(lambda: b"alice>" in out, 10, "the prompt")
        grant = s.link.grant
        subs = []
        for d in ("in", "out"):
            async def count(msg, d=d):
                if json.loads(msg.data).get("t") == "credit":
                    heard[d] += 1
            subs.append(await nc.subscribe(grant["subjects"][d], cb=count))
        await nc.flush()
        # no output and no keys: only keepalives cross, for over twice the bound each way
        await until(lambda: min(heard.values()) >= 5, 15, "keepalives both ways")
        assert manager.live_sessions == 1 and s.is_open and not task.done()
        before = len(out)
        assert await s.send_keys(b"still here\r")
        await until(lambda: b"echo: still here" in out[before:], 10, "the echo after idling")
        for sub in subs:
            await sub.unsubscribe()
        await s.close()
        assert await asyncio.wait_for(task, 10) == "detached"
    finally:
        await nc_c.close()


MANAGER_PROC = """
import asyncio, sys, nats
from cotal_tui.demo.manager import DemoManager, SeatSpec
async def main(url, space):
    nc = await nats.connect(url)
    m = DemoManager(nc, space, [SeatSpec("alice", "local.alice")])
    await m.start()
    print("ready", flush=True)
    await asyncio.sleep(3600)
asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.parametrize("reconnect", [False, True], ids=["finish", "reconnect"])
async def test_the_client_notices_a_manager_that_vanished(broker, nc, space, reconnect):
    p = subprocess.Popen([sys.executable, "-c", MANAGER_PROC, broker.url, space],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = bytearray()
    notices: list[Notice] = []
    s = AttachSession(space, "alice", nc=nc, on_output=out.extend, on_notice=notices.append,
                      reconnect=reconnect, backoff=(0.2,), liveness_s=BOUND_MS / 1000)
    task = None
    try:
        line = await asyncio.wait_for(asyncio.to_thread(p.stdout.readline), 20)
        assert line.strip() == b"ready"
        await s.open()
        task = asyncio.get_running_loop().create_task(s.run())
        await until(lambda: b"alice>" in out, 10, "the prompt")
        p.send_signal(signal.SIGKILL)  # no end, no close: the manager just stops talking
        await asyncio.to_thread(p.wait, 5)
        if reconnect:
            took = await until(lambda: any(n.kind == "reconnecting" for n in notices),
                               BOUND_MS / 1000 + 3, "the reconnect notice")
            n = next(n for n in notices if n.kind == "reconnecting")
            assert n.reason == PEER_SILENT and "stopped answering" in n.text
            assert not s.is_open
        else:
            took = await until(task.done, BOUND_MS / 1000 + 3, "the session to finish")
            assert task.result() == PEER_SILENT
        print(f"\nvanished manager noticed after {took:.1f}s (bound {BOUND_MS / 1000:.1f}s)")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(5)
        await s.close()
        if task is not None:
            await asyncio.wait_for(task, 10)
