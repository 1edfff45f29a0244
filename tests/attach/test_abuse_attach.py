"""Attach abuse against the real demo manager on a real broker (open mesh).

What a hostile or broken peer can do to a session: garbled and out-of-order frames from a
foreign presenter on the session rails, floods beyond the window, replayed frames and grants,
a caller that stops reading, a session ceiling under churn. The manager and the client must
refuse by code, never hang, and never leak a session (``maxSessions`` recovers).

On an open mesh anyone may publish on a session's rails once they know its subjects (an
open-mode tap sees them); under auth the broker confines each rail to its session
credentials. These tests therefore also show what an open mesh exposes.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import nats
import pytest

from attach.session.client import AttachError, AttachSession, Notice, check_grant, locate, target_for
from attach.control.endpoint import EndpointClient
from meshview.wire.endpoint import Caller
from meshview.wire.envelope import EndpointError
from meshview.wire import frames as tf
from cotal_tui.demo.manager import DemoManager, SeatSpec
from conftest import until


SEATS = [SeatSpec("alice", "local.alice")]


@pytest.fixture
async def manager(nc, space):
    m = DemoManager(nc, space, SEATS, max_sessions=3)
    await m.start()
    # the program must be up before anyone attaches (a loaded CI box starts python slowly)
    await until(lambda: b"alice>" in m.seats["alice"].pty.snapshot(), 30,
                "the seat's program to print its prompt")
    yield m
    await m.stop()


@pytest.fixture
async def chatty_manager(nc, space):
    """A seat whose program prints steadily (a build log): 200 lines/s."""
    prog = "import sys,time\nwhile True:\n    print('cotal-output ' * 6, flush=True)\n    time.sleep(0.005)\n"
    m = DemoManager(nc, space, [SeatSpec("chatty", "local.chatty",
                                         argv=[sys.executable, "-c", prog])], max_sessions=3)
    await m.start()
    yield m
    await m.stop()


@pytest.fixture
async def nc_a(broker):
    c = await nats.connect(broker.url)
    yield c
    await c.close()


@pytest.fixture
async def nc_evil(broker):
    c = await nats.connect(broker.url, name="evil")
    yield c
    await c.close()


async def raw_attach(nc, space: str, name: str, caller: Caller | None = None) -> dict:
    """Establish a session without AttachSession: just the grant, no rails opened."""
    caller = caller or Caller.fresh()
    ep = EndpointClient(nc, space, caller=caller)
    loc = await locate(ep, name)
    r = await ep.call("attach", None, instance_id=loc.instance_id,
                      target=target_for(loc.row, caller), mode="any",
                      bind={"instanceId": loc.instance_id, "epoch": loc.epoch},
                      deadline_ms=5000)
    if not r.ok:
        raise r.error
    return check_grant(r.data["grant"], space, r)


def frame(seq: int, data: object, ack: int | None = None) -> bytes:
    f: dict = {"t": "f", "seq": seq, "data": data}
    if ack:
        f["ack"] = ack
    return json.dumps(f).encode()


class Client:
    def __init__(self, nc, space, name, **kw):
        self.out = bytearray()
        self.notices: list[Notice] = []
        self.s = AttachSession(space, name, nc=nc, on_output=self.out.extend,
                               on_notice=self.notices.append, **kw)
        self.task: asyncio.Task | None = None

    async def open(self) -> "Client":
        await self.s.open()
        self.task = asyncio.get_running_loop().create_task(self.s.run())
        return self

    @property
    def text(self) -> str:
        return self.out.decode("utf-8", "replace")


GARBAGE = [
    b"not json",
    b"\xff\xfe\xfd",
    b"[]",
    b'{"t":"f","seq":1}',  # no data
    b'{"t":"f","seq":2,"data":{"k":"ready"},"evil":1}',  # unknown field
    b'{"t":"credit","ack":999999}',  # credit overrun
    b'{"t":"bogus"}',
    b'{"t":"f","seq":0,"data":null}',
]


@pytest.mark.parametrize("garbage", GARBAGE, ids=[f"g{i}" for i in range(len(GARBAGE))])
async def test_foreign_garbage_on_the_in_rail_ends_the_session_without_a_leak(
        manager, nc_a, nc_evil, space, garbage):
    c = await Client(nc_a, space, "alice", reconnect=False).open()
    await until(lambda: "alice>" in c.text, 10, "the prompt")
    assert manager.live_sessions == 1
    grant = c.s.link.grant
    await nc_evil.publish(grant["subjects"]["in"], garbage)
    await nc_evil.flush()
    await until(lambda: manager.live_sessions == 0, 5, "the manager to release the session")
    await c.s.close()


async def test_the_caller_is_told_when_the_serving_side_faults(manager, nc_a, nc_evil, space):
    c = await Client(nc_a, space, "alice", reconnect=False).open()
    await until(lambda: "alice>" in c.text, 10, "the prompt")
    await nc_evil.publish(c.s.link.grant["subjects"]["in"], b"not json")
    await nc_evil.flush()
    await until(lambda: manager.live_sessions == 0, 5, "the manager to release the session")
    try:
        reason = await asyncio.wait_for(asyncio.shield(c.task), 10)
    except asyncio.TimeoutError:
        await c.s.close()
        raise AssertionError("the caller still believes it is attached 10 s later") from None
    assert reason != "detached"


async def test_out_of_order_frame_is_a_gap_fault_and_frees_the_slot(manager, nc_a, nc_evil,
                                                                      space):
    grant = await raw_attach(nc_a, space, "alice")
    assert manager.live_sessions == 1
    await nc_evil.publish(grant["subjects"]["in"], frame(5, tf.encode(tf.Ready())))
    await nc_evil.flush()
    await until(lambda: manager.live_sessions == 0, 5, "a gap fault to release the session")


async def test_replayed_frames_are_idempotent(manager, nc_a, nc_evil, space):
    c = await Client(nc_a, space, "alice", reconnect=False).open()
    await until(lambda: "alice>" in c.text, 10, "the prompt")
    grant = c.s.link.grant
    # replay an already-delivered seq (the ready frame was seq 1): dropped, session lives on
    for _ in range(20):
        await nc_evil.publish(grant["subjects"]["in"], frame(1, tf.encode(tf.Data(b"rm -rf /\r"))))
    await nc_evil.flush()
    assert await c.s.send_keys(b"still here\r")
    await until(lambda: "echo: still here" in c.text, 10, "the echo after replays")
    assert "rm -rf" not in c.text
    assert manager.live_sessions == 1
    await c.s.close()
    assert await asyncio.wait_for(c.task, 10) == "detached"
    await until(lambda: manager.live_sessions == 0, 5, "release after detach")


async def test_flood_beyond_the_window_leaves_the_manager_responsive(manager, nc_a, nc_evil,
                                                                     space):
    """A caller that ignores credit: the rail refuses what it cannot queue (``flood``) or
    absorbs what its handler keeps up with; either way the manager keeps serving others and
    the slot comes back. (Small keystroke frames: see the paste test for large ones.)"""
    grant = await raw_attach(nc_a, space, "alice")
    window = grant["window"]
    sin = grant["subjects"]["in"]
    await nc_a.publish(sin, frame(1, tf.encode(tf.Ready())))
    for seq in range(2, 2 + 4 * window):
        await nc_a.publish(sin, frame(seq, tf.encode(tf.Data(b"k" * 8))))
    await nc_a.flush()
    t0 = time.monotonic()
    c = await asyncio.wait_for(Client(nc_evil, space, "alice", reconnect=False).open(), 10)
    await until(lambda: "alice ready" in c.text, 10, "a second caller's repaint during the flood")
    print(f"\nsecond caller served {time.monotonic() - t0:.2f}s after the flood")
    await c.s.close()
    await nc_a.publish(sin, json.dumps({"t": "close"}).encode())
    await nc_a.flush()
    await until(lambda: manager.live_sessions == 0, 10, "every slot back")


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


@pytest.fixture
def manager_proc(broker, space):
    """The demo manager in its own process, so a wedged manager cannot wedge the test."""
    import subprocess
    p = subprocess.Popen([sys.executable, "-c", MANAGER_PROC, broker.url, space],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert p.stdout.readline().strip() == b"ready"
    yield p
    p.kill()
    p.wait(5)


async def test_a_large_paste_does_not_freeze_the_manager(manager_proc, nc_a, space):
    grant = await raw_attach(nc_a, space, "alice")
    sin = grant["subjects"]["in"]
    acks: list[int] = []

    async def credit(msg):
        f = json.loads(msg.data)
        if f.get("t") == "credit":
            acks.append(f["ack"])

    sub = await nc_a.subscribe(grant["subjects"]["out"], cb=credit)
    await nc_a.flush()
    await nc_a.publish(sin, frame(1, tf.encode(tf.Ready())))
    for seq in range(2, 18):  # 16 lines of 4 KiB: a modest paste, within the window
        await nc_a.publish(sin, frame(seq, tf.encode(tf.Data(b"x" * 4096 + b"\r"))))
    await nc_a.flush()
    # the manager has taken the whole paste once it credits the last frame
    await until(lambda: acks and max(acks) >= 17, 15, "the manager to credit the whole paste")
    await sub.unsubscribe()
    ep = EndpointClient(nc_a, space)
    try:
        await asyncio.wait_for(locate(ep, "alice"), 8)
    except (EndpointError, asyncio.TimeoutError) as e:
        raise AssertionError(f"the manager stopped answering after a paste: {e}") from None


async def test_grant_replayed_after_detach_opens_nothing(manager, nc_a, nc_evil, space):
    c = await Client(nc_a, space, "alice", reconnect=False).open()
    await until(lambda: "alice>" in c.text, 10, "the prompt")
    grant = c.s.link.grant
    await c.s.close()
    await asyncio.wait_for(c.task, 10)
    await until(lambda: manager.live_sessions == 0, 5, "release after detach")
    got: list[bytes] = []

    async def cb(msg):
        got.append(msg.data)

    sub = await nc_evil.subscribe(grant["subjects"]["out"], cb=cb)
    await nc_evil.flush()
    await nc_evil.publish(grant["subjects"]["in"], frame(1, tf.encode(tf.Ready())))
    await nc_evil.publish(grant["subjects"]["in"], frame(2, tf.encode(tf.Data(b"id\r"))))
    await nc_evil.flush()
    await asyncio.sleep(1.0)  # absence check: a live rail answers a ready within ms
    await sub.unsubscribe()
    assert got == []
    assert manager.live_sessions == 0


async def test_malformed_terminal_frames_are_dropped_not_fatal(manager, nc_a, space):
    """§13.6: a degenerate caller frame (0x0 resize, bad base64, unknown kind) is dropped."""
    grant = await raw_attach(nc_a, space, "alice")
    sin, sout = grant["subjects"]["in"], grant["subjects"]["out"]
    out = bytearray()

    async def cb(msg):
        f = json.loads(msg.data)
        if f.get("t") == "f" and isinstance(f.get("data"), dict) and f["data"].get("k") == "data":
            out.extend(tf.decode(f["data"]).payload)

    sub = await nc_a.subscribe(sout, cb=cb)
    await nc_a.flush()
    bad = [{"k": "resize", "cols": 0, "rows": 0}, {"k": "data", "b": "!!!not base64"},
           {"k": "nope"}, {"k": "data", "b": "aGk=", "extra": 1}, "string", 42, None]
    seq = 1
    for d in bad:
        await nc_a.publish(sin, frame(seq, d))
        seq += 1
    await nc_a.publish(sin, frame(seq, tf.encode(tf.Ready())))
    await nc_a.publish(sin, frame(seq + 1, tf.encode(tf.Data(b"after junk\r"))))
    await nc_a.flush()
    await until(lambda: b"echo: after junk" in out, 10, "the echo after junk frames")
    assert manager.live_sessions == 1
    await nc_a.publish(sin, json.dumps({"t": "close"}).encode())
    await nc_a.flush()
    await sub.unsubscribe()
    await until(lambda: manager.live_sessions == 0, 5, "release after close")


async def test_session_ceiling_refuses_by_code_and_recovers(manager, nc_a, nc_evil, space):
    grants = [await raw_attach(nc_a, space, "alice") for _ in range(3)]
    assert manager.live_sessions == 3
    with pytest.raises(EndpointError) as ei:
        await raw_attach(nc_a, space, "alice")
    assert ei.value.code == "resource-exhausted"
    # the AttachSession client relays the same refusal by code
    with pytest.raises(AttachError) as ae:
        await AttachSession(space, "alice", nc=nc_a, reconnect=False).open()
    assert ae.value.code == "resource-exhausted"
    # faults and closes free slots; the ceiling recovers
    await nc_evil.publish(grants[0]["subjects"]["in"], b"garbage")
    await nc_a.publish(grants[1]["subjects"]["in"], json.dumps({"t": "close"}).encode())
    await nc_a.flush()
    await nc_evil.flush()
    await until(lambda: manager.live_sessions == 1, 5, "two slots to free")
    g = await raw_attach(nc_a, space, "alice")
    assert manager.live_sessions == 2
    for gr in (grants[2], g):
        await nc_a.publish(gr["subjects"]["in"], json.dumps({"t": "close"}).encode())
    await nc_a.flush()
    await until(lambda: manager.live_sessions == 0, 5, "all slots free")


async def test_client_fault_hands_the_old_session_back(manager, nc_a, nc_evil, space):
    c = await Client(nc_a, space, "alice", reconnect=True, backoff=(0.2,)).open()
    await until(lambda: "alice>" in c.text, 10, "the prompt")
    for i in range(2):
        grant = c.s.link.grant
        await nc_evil.publish(grant["subjects"]["out"], b"garbage for the client")
        await nc_evil.flush()
        await until(lambda: c.s.link is not None and c.s.link.grant is not grant
                    and c.s.is_open, 10, f"reconnect #{i + 1}")
    try:
        await until(lambda: manager.live_sessions == 1, 5,
                    "the manager to hold only the current session")
    finally:
        await c.s.close()


@pytest.mark.slow
async def test_a_caller_that_stops_reading_is_reaped_by_the_stall_watchdog(chatty_manager,
                                                                           nc_a, space):
    """A ready caller that never credits: the window fills on a chatty seat, output is
    dropped (never buffered without bound), and after the 30 s stall the session ends."""
    manager = chatty_manager
    grant = await raw_attach(nc_a, space, "chatty")
    await nc_a.publish(grant["subjects"]["in"], frame(1, tf.encode(tf.Ready())))
    await nc_a.flush()
    t0 = time.monotonic()
    await until(lambda: manager.live_sessions == 0, 45, "the stall watchdog to end the session")
    took = time.monotonic() - t0
    print(f"\nstalled session reaped after {took:.1f}s")
    assert 25 <= took <= 45
