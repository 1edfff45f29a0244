"""Errors a user can act on: every verb that connects says the same one sentence for
a space that is not there, exits 1 and publishes nothing; no sentence a user sees carries an
exception class name, an errno or a bytes repr. The real CLI as a user runs it (a pty for the
two verbs that need a terminal), against a real broker of the test's own."""

from __future__ import annotations

import asyncio
import os
import re
import sys

import nats
import pytest
from test_attach_cli import PtyRun

COTAL = [sys.executable, "-m", "cotal_tui.cli"]
# what must never reach a user: a class name, an errno, a bytes repr
LEAK = re.compile(r"\w+(Error|Exception)\b|Error\)|\[Errno|\(b'|Traceback")


async def cotal(*argv: str, env: dict | None = None) -> tuple[int, str, str]:
    p = await asyncio.create_subprocess_exec(
        *COTAL, *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})})
    out, err = await asyncio.wait_for(p.communicate(), 60)
    return p.returncode, out.decode(), err.decode()


async def on_pty(*argv: str, env: dict | None = None) -> tuple[int, str]:
    r = PtyRun([*COTAL, *argv], env=env)
    try:
        code = await r.exit_code(60)
        return code, r.buf.decode("utf-8", "replace").replace("\r\n", "\n")
    finally:
        r.close()


def one_sentence(err: str, verb: str) -> str:
    """Exactly one line on stderr, ``cotal <verb>: …`` (watch's stream says ``cotal: …``),
    ending in a full stop, with nothing a user cannot read in it. Returns the sentence."""
    assert err.count("\n") == 1 and err.endswith(".\n"), repr(err)
    prefix = "cotal: " if verb == "watch" else f"cotal {verb}: "
    assert err.startswith(prefix), repr(err)
    assert not LEAK.search(err), repr(err)
    return err[len(prefix):].rstrip("\n")


@pytest.fixture
async def main_only(fresh_broker, tmp_path):
    """A broker of the test's own holding one space, ``main``, and a tap on every subject."""
    from cotal_tui.demo.provision import provision_space

    nc = await nats.connect(fresh_broker.url)
    await provision_space(nc, "main")
    seen: list[str] = []

    async def cb(msg) -> None:
        seen.append(msg.subject)

    await nc.subscribe(">", cb=cb)
    await nc.flush()
    yield fresh_broker, nc, seen
    await nc.close()


# (verb, argv after the connection flags, needs a terminal)
VERBS = [
    ("send", ("#general", "hello"), False),
    ("chat", (), True),
    ("watch", ("--plain",), False),
    ("ps", (), False),
    ("status", ("alpha",), False),
    ("stop", ("alpha",), False),
    ("input", ("alpha", "text"), False),
    ("spawn", ("echo",), False),
    ("attach", ("alpha",), True),
]


async def test_every_verb_says_the_same_sentence_for_a_space_that_is_not_there(main_only, tmp_path):
    """send printed ``unexpected error (NoStreamResponseError)``, chat started and failed each
    line, ps and the control verbs said ``(no manager registry)``: one check for all now."""
    broker, nc, seen = main_only
    env = {"COTAL_HOME": str(tmp_path)}  # no registry: the flags alone decide
    want = (f"space 'nosuch' is not provisioned on {broker.url} (spaces there: main); "
            "pick one with --space.")
    streams = {si.config.name: si.state.messages for si in await nc.jsm().streams_info()}
    lane = asyncio.Semaphore(3)

    async def one(verb: str, rest: tuple, tty: bool) -> None:
        argv = (verb, "--server", broker.url, "--space", "nosuch", "--connect-timeout", "3", *rest)
        async with lane:
            if tty:
                code, text = await on_pty(*argv, env=env)
                err, out = text, ""
            else:
                code, out, err = await cotal(*argv, env=env)
        assert (code, out) == (1, ""), (verb, code, out, err)
        assert one_sentence(err, verb) == want, (verb, err)

    await asyncio.gather(*(one(*v) for v in VERBS))
    await nc.flush()
    # nothing was sent: only the stream lookups the check makes (and their replies) went by
    sent = [s for s in seen if not s.startswith(("$JS.API.STREAM.INFO.", "$JS.API.STREAM.LIST",
                                                  "$JS.API.STREAM.NAMES", "_INBOX",
                                                  "$JS.EVENT.ADVISORY."))]
    assert sent == [], sent
    assert {si.config.name: si.state.messages for si in await nc.jsm().streams_info()} == streams
    # usage still comes first: a malformed instance id or seat name is exit 2, no word of space
    base = ("--server", broker.url, "--space", "nosuch", "--connect-timeout", "3")
    code, out, err = await cotal("ps", *base, "--on", "no-pe", env=env)
    assert code == 2 and "is not a manager instance id" in one_sentence(err, "ps"), err
    code, out, err = await cotal("stop", *base, "bad name", env=env)
    assert code == 2 and "is not a seat name" in one_sentence(err, "stop"), err


async def test_a_host_name_that_does_not_resolve_is_said_in_words(tmp_path):
    """It was ``[Errno -2] Name or service not known`` (or ``-3``, by resolver)."""
    for verb, rest in (("ps", ()), ("send", ("#general", "hi")), ("watch", ("--plain",))):
        code, out, err = await cotal(verb, "--server", "nats://no-such-host.invalid:4222",
                                     "--connect-timeout", "2", *rest,
                                     env={"COTAL_HOME": str(tmp_path)})
        assert code == 1 and out == ""
        assert one_sentence(err, verb) == ("could not connect to nats://no-such-host.invalid:4222: "
                                           "the broker's host name could not be resolved."), err
