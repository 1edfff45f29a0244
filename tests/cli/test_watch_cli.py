"""What ``cotal watch`` says before it watches anything: a
space that is not there, a bad flag, the default server, a URL that is not a broker's. The real
CLI as a user runs it, against a real broker (a pty where it would open the console)."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sys

import pytest
from test_attach_cli import PtyRun

COTAL = [sys.executable, "-m", "cotal_tui.cli"]


async def run(*args: str, env: dict | None = None) -> tuple[int, str, str]:
    p = await asyncio.create_subprocess_exec(
        *COTAL, *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})})
    out, err = await asyncio.wait_for(p.communicate(), 30)
    return p.returncode, out.decode(), err.decode()


NOT_THERE = re.compile(r"cotal: space 'nosuch' is not provisioned on (\S+) "
                       r"\(spaces there: ([^)]*)\); pick one with --space\.\n")


@pytest.fixture
async def lone_space(fresh_broker):
    """A broker of the test's own with one provisioned space, so the sentence's list of the
    spaces there is exactly known (the session broker holds over a hundred)."""
    import nats

    from cotal_tui.demo.provision import provision_space

    nc = await nats.connect(fresh_broker.url)
    try:
        await provision_space(nc, "known")
    finally:
        await nc.close()
    return fresh_broker


@pytest.mark.parametrize("mode", ["--plain", "--json"])
async def test_unprovisioned_space_is_one_sentence_and_exit_1(lone_space, mode):
    """It used to wait forever (--plain) on a space nobody provisioned."""
    rc, out, err = await run("watch", mode, "--server", lone_space.url, "--space", "nosuch")
    assert rc == 1 and out == ""
    m = NOT_THERE.fullmatch(err)
    assert m, err
    assert m.group(2).split(", ") == ["known"]


async def test_unprovisioned_space_never_opens_the_console(broker, space):
    """On a terminal it used to open an empty console. Now the console's shell is drawn before
    the broker answers (issue 40, first frame), so it is the shell that says what it waits for
    (``opening space nosuch …``) and gives way: the terminal is restored and holds the one
    sentence, and the console itself (its roster, its feed) never opened."""
    r = PtyRun([*COTAL, "watch", "--server", broker.url, "--space", "nosuch"])
    try:
        assert await r.exit_code() == 1
        text = r.buf.decode("utf-8", "replace").replace("\r\n", "\n")
        assert "\x1b[?1049h" in text and "\x1b[?1049l" in text  # the shell came and went
        after = text.rsplit("\x1b[?1049l", 1)[1]
        tail = re.sub(r"\x1b\[[?<>=]?[0-9;]*[a-zA-Z]", "", after)  # the modes it resets
        assert NOT_THERE.fullmatch(tail), repr(tail)
        assert "roster ·" not in text and "feed ·" not in text  # no console was mounted
        assert "Traceback" not in text
    finally:
        r.close()


async def test_a_bad_flag_prints_the_watch_usage():
    rc, out, err = await run("watch", "--bogus")
    assert rc == 2 and out == ""
    assert err.startswith("usage: cotal watch ")
    assert err.rstrip().endswith("cotal watch: error: unrecognized arguments: --bogus")


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


async def test_default_server_failure_says_it_was_the_default(tmp_path):
    if _port_in_use(4222):
        pytest.skip("something listens on the default port here")
    rc, out, err = await run("watch", "--plain", env={"COTAL_HOME": str(tmp_path)})
    assert rc == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("cotal: could not connect to nats://127.0.0.1:4222, the default server "
                          "(no --server given and no mesh registered in ")
    assert err.rstrip().endswith("connection refused; pass --server URL to name the broker.")


async def test_an_http_url_gets_a_sentence_about_the_scheme():
    rc, out, err = await run("watch", "--plain", "--server", "http://127.0.0.1:8222")
    assert rc == 1 and out == ""
    assert err == ("cotal: http://127.0.0.1:8222 is not a broker URL: a Cotal mesh speaks NATS, "
                   "not http; give --server nats://HOST:4222 (or tls://, ws://, wss://).\n")
