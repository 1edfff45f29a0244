"""What ``cotal attach`` says: the banner, ``detached from X`` on its own line,
``--name``, an empty ``COTAL_DETACH_KEY``, a stdin that is not a terminal, a space that is not
there. Run as a user runs it: the real CLI on a pty we control, a real broker and manager."""

from __future__ import annotations

import asyncio
import re

import pytest
from test_attach_cli import COTAL, PtyRun, attach_argv, run_cli, stty_a
from test_watch_cli import lone_space  # noqa: F401  (fixture)

from cotal_tui.demo.manager import DemoManager, SeatSpec


@pytest.fixture
async def demo(broker, nc, space):
    m = DemoManager(nc, space, [SeatSpec("alice", "local.alice")])
    await m.start()
    yield m
    await m.stop()


async def test_banner_and_detached_on_its_own_line(demo, broker, space):
    r = PtyRun([*COTAL, "attach", "--name", "alice", "--server", broker.url, "--space", space])
    try:
        await r.wait(b"attached to alice - Ctrl-] to detach")
        await r.wait(b"alice>")
        r.type(b"hi\r")
        await r.wait(b"echo: hi")
        await r.wait(b"alice> ")  # the remote left its prompt: the cursor is mid-line
        r.type(b"\x1d")
        assert await r.exit_code() == 0
        await r.wait(b"detached from alice")
        before = bytes(r.buf[:r.buf.rfind(b"detached from alice")])
        assert before.endswith(b"\n"), before[-40:]  # not glued to `alice> `
        assert b"[cotal: detached]" not in r.buf
        assert stty_a(r.slave) == r.before
    finally:
        r.close()


async def test_name_flag_and_positional(demo, broker, space):
    rc, _, err = await run_cli([*COTAL, "attach", "alice", "--name", "bob", "--server",
                                broker.url, "--space", space])
    assert rc == 2 and "two different seats" in err and "Traceback" not in err
    rc, _, err = await run_cli([*COTAL, "attach", "--server", broker.url])
    assert rc == 2 and err.count("\n") == 1 and "--name NAME" in err


async def test_empty_detach_key_is_an_error(demo, broker, space):
    r = PtyRun(attach_argv(broker, space, "alice"), env={"COTAL_DETACH_KEY": ""})
    try:
        assert await r.exit_code() == 2
        await r.wait(b"COTAL_DETACH_KEY is set but empty")
        assert b"\x1b[" not in r.buf and stty_a(r.slave) == r.before
    finally:
        r.close()


async def test_stdin_not_a_terminal_is_refused_with_a_sentence(demo, broker, space):
    p = await asyncio.create_subprocess_exec(
        *attach_argv(broker, space, "alice"), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(p.communicate(b"ls\n"), 30)
    assert p.returncode == 1
    assert err.decode().count("\n") == 1 and "stdin is not a terminal" in err.decode()
    assert out == b""
    assert demo.live_sessions == 0


async def test_unprovisioned_space_is_one_sentence(lone_space):
    r = PtyRun(attach_argv(lone_space, "known", "alice")[:-1] + ["nosuch"])
    try:
        assert await r.exit_code() == 1
        text = r.buf.decode()
        assert "Traceback" not in text and "BucketNotFound" not in text
        assert re.fullmatch(r"cotal attach: space 'nosuch' is not provisioned on \S+ "
                            r"\(spaces there: known\); pick one with --space\.\s*", text), text
    finally:
        r.close()


async def test_space_without_a_manager_bucket_is_no_traceback(broker, nc, space):
    """A provisioned space where no manager was ever set up: one sentence, exit 1."""
    from meshview.wire.names import bucket_names

    await nc.jetstream().delete_key_value(bucket_names(space).manager)
    r = PtyRun(attach_argv(broker, space, "alice"))
    try:
        assert await r.exit_code() == 1
        text = r.buf.decode()
        assert "Traceback" not in text
        assert text.strip().endswith(f"no manager is serving space {space}.")
    finally:
        r.close()
