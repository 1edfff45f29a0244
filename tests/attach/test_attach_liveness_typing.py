"""Attach liveness under input with no output: typing steadily at a password prompt
(the terminal echoes nothing) is a live session, never ``the manager stopped answering``; a
terminal frame of a kind this build does not know, or with extra fields, is ignored, not fatal.
Real broker, real manager, a real pty running a real program."""

from __future__ import annotations

import asyncio
import json
import sys

import nats
import pytest
from conftest import until

from meshview.wire import frames as tf
from attach.session.client import AttachSession, Notice
from cotal_tui.demo.manager import DemoManager, SeatSpec

BOUND_S = 2.5
PASSWORD = [sys.executable, "-c",
            ("import getpass, time; pw = getpass.getpass('Password: '); "
             "print('got', len(pw), 'chars', flush=True); time.sleep(60)")]


@pytest.fixture
async def manager(nc, space):
    m = DemoManager(nc, space, [SeatSpec("vault", "local.vault", argv=PASSWORD)],
                    caller_silence_ms=int(BOUND_S * 1000))
    await m.start()
    yield m
    await m.stop()


async def test_typing_at_a_password_prompt_keeps_the_session(manager, broker, space):
    nc = await nats.connect(broker.url)
    out = bytearray()
    notices: list[Notice] = []
    s = AttachSession(space, "vault", nc=nc, on_output=out.extend, on_notice=notices.append,
                      reconnect=False, liveness_s=BOUND_S)
    try:
        await s.open()
        run = asyncio.get_running_loop().create_task(s.run())
        await until(lambda: b"Password:" in out, 10, f"the prompt; got {bytes(out)!r}")
        before = len(out)
        loop = asyncio.get_running_loop()
        end = loop.time() + 3 * BOUND_S  # keys for three times the silence bound, no echo
        n = 0
        while loop.time() < end:
            assert await s.send_keys(b"x"), "a key was refused"
            n += 1
            await asyncio.sleep(0.05)
            assert not run.done(), (s.final_reason, notices)
        assert bytes(out[before:]).strip() == b""  # nothing came back while typing
        await s.send_keys(b"\r")
        await until(lambda: f"got {n} chars".encode() in out, 10, "the program read every key")
        assert s.is_open and not run.done() and not notices, notices
    finally:
        await s.close()
        await nc.close()


def test_unknown_terminal_frames_and_extra_fields_are_ignored():
    """A newer manager may add frame kinds or fields: the caller ignores what it does not know
    instead of breaking the session (§11: receivers ignore unknown fields). The strict reading
    (the serving side, tests/test_terminal.py) is unchanged."""
    dec = lambda d: tf.decode(d, lenient=True)
    assert dec({"k": "data", "b": "aGk=", "ts": 1}) == tf.Data(b"hi")
    assert dec({"k": "end", "reason": "process-exit", "code": 0}) == tf.End("process-exit")
    assert dec({"k": "drop", "bytes": 5, "why": "slow"}) == tf.Drop(5)
    assert dec({"k": "resize", "cols": 80, "rows": 24, "px": [1, 2]}) == tf.Resize(80, 24)
    assert dec({"k": "title", "text": "vim"}) is None  # unknown kind: nothing to do
    assert dec({"k": "bell"}) is None
    with pytest.raises(tf.TerminalFrameError):  # a known kind with a bad value still fails
        dec({"k": "data", "b": "not base64!"})
    with pytest.raises(tf.TerminalFrameError):
        dec({"no": "kind"})


async def test_the_client_ignores_unknown_frames_from_the_manager(manager, broker, space):
    """End to end: a frame of an unknown kind and a data frame with an extra field reach the
    client on its own rail; the session stays open and the bytes of the data frame show."""
    nc = await nats.connect(broker.url)
    out = bytearray()
    s = AttachSession(space, "vault", nc=nc, on_output=out.extend, reconnect=False,
                      liveness_s=BOUND_S)
    try:
        await s.open()
        run = asyncio.get_running_loop().create_task(s.run())
        await until(lambda: b"Password:" in out, 10, "the prompt")
        rail = s.link.rail
        seq = rail.expected + len(rail._queue)
        for data in ({"k": "title", "text": "vault"},
                     {"k": "data", "b": "ZnJvbS1hLW5ld2VyLW1hbmFnZXI=", "ts": 1}):
            await rail.feed(json.dumps({"t": "f", "seq": seq, "data": data}).encode())
            seq += 1
        await until(lambda: b"from-a-newer-manager" in out, 5, "the data frame's bytes")
        assert s.is_open and not run.done()
    finally:
        await s.close()
        await nc.close()
