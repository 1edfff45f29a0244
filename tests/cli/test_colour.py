"""One rule decides whether our output is coloured (``meshview.lines.stream.use_colour``), the
reference CLI's (``@cotal-ai/workspace`` ``colorEnabled``, CLI 0.59): a set ``FORCE_COLOR``
decides first (``0``/``false`` off, anything else on, into a pipe too), else a non-empty
``NO_COLOR`` is off, else colour only on a terminal. Each combination, on the function and on
``cotal watch --plain`` run with its stdout on a real pty and on a pipe."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from meshview.lines.stream import use_colour
from support.observer import post


class Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


# (FORCE_COLOR, NO_COLOR) -> colour on a terminal, colour into a pipe (None: unset)
RULE = [
    ((None, None), True, False),
    ((None, ""), True, False),  # an empty NO_COLOR is not set (no-color.org)
    ((None, "1"), False, False),
    (("1", None), True, True),
    (("3", None), True, True),
    (("", None), True, True),  # set but empty: Node reads it as on
    (("1", "1"), True, True),  # FORCE_COLOR wins over NO_COLOR
    (("0", None), False, False),
    (("false", None), False, False),
    (("0", "1"), False, False),
    (("0", ""), False, False),
]


@pytest.mark.parametrize("env_pair,on_tty,on_pipe", RULE)
def test_the_rule(env_pair, on_tty, on_pipe):
    force, no = env_pair
    env = {k: v for k, v in (("FORCE_COLOR", force), ("NO_COLOR", no)) if v is not None}
    assert use_colour(Stream(True), env) is on_tty
    assert use_colour(Stream(False), env) is on_pipe


def test_a_stream_that_cannot_say_is_plain():
    class Closed:
        def isatty(self) -> bool:
            raise ValueError("I/O operation on closed file")

    assert use_colour(Closed(), {}) is False  # type: ignore[arg-type]
    assert use_colour(Closed(), {"FORCE_COLOR": "1"}) is True  # type: ignore[arg-type]


def _watch(broker_url: str, space: str, env_over: dict[str, str], tty: bool) -> bytes:
    """``cotal watch --plain`` with stdout on a pty or a pipe, until the backfilled line shows."""
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update(env_over)
    argv = [sys.executable, "-m", "cotal_tui.cli", "watch", "--plain", "--server", broker_url,
            "--space", space, "--backfill", "5"]
    if tty:
        master, slave = os.openpty()
        p = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE, env=env)
        os.close(slave)
        fd = master
    else:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert p.stdout is not None
        fd = p.stdout.fileno()
    out = b""
    try:
        end = time.monotonic() + 20
        while b"colour check" not in out:
            left = end - time.monotonic()
            assert left > 0, f"no backfilled line within 20 s: {out!r}"
            r, _, _ = select.select([fd], [], [], left)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    chunk = b""
                assert chunk, f"the watcher's stdout ended: {out!r}"
                out += chunk
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(10)
        finally:
            if tty:
                os.close(master)
            if p.stderr is not None:
                p.stderr.close()
            if p.stdout is not None:
                p.stdout.close()
    return out


@pytest.mark.parametrize("tty,env,coloured", [
    (False, {}, False),  # piped: plain
    (False, {"FORCE_COLOR": "1"}, True),  # forced into the pipe
    (False, {"FORCE_COLOR": "1", "NO_COLOR": "1"}, True),  # FORCE_COLOR wins
    (False, {"FORCE_COLOR": "0"}, False),
    (True, {}, True),  # a terminal
    (True, {"NO_COLOR": "1"}, False),
    (True, {"NO_COLOR": ""}, True),
    (True, {"FORCE_COLOR": "0"}, False),  # forced off on a terminal
    (True, {"FORCE_COLOR": "false", "NO_COLOR": ""}, False),
])
async def test_watch_plain_on_a_pty_and_a_pipe(broker, nc, space, tty, env, coloured):
    await post(nc, space, "carol", "general", "colour check")
    out = await asyncio.to_thread(_watch, broker.url, space, env, tty)
    line = next(x for x in out.split(b"\n") if b"colour check" in x)
    assert (b"\x1b[" in line) is coloured, line
    assert b"carol" in line
