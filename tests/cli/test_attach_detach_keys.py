"""Raw ``cotal attach`` and the detach keys (issue 38 item 4): by default only Ctrl-] detaches
and Esc reaches the seat at once; Esc Esc (or any sequence) is opt-in through
``COTAL_DETACH_KEY`` or ``[attach] detach_keys``, and a bad value is refused by name before the
terminal is touched. The seat runs ``cat -v`` on a raw tty, so what it prints is what it read."""

from __future__ import annotations

import asyncio
import time

import pytest

from cotal_tui.demo.manager import DemoManager, SeatSpec
from test_attach_cli import PtyRun, attach_argv, stty_a

CAT_V = ["sh", "-c", "stty raw -echo; echo cat-ready; exec cat -v"]


@pytest.fixture
async def catv(broker, nc, space, tmp_path):
    m = DemoManager(nc, space, [SeatSpec("catv", "local.catv", argv=CAT_V)], root=str(tmp_path))
    await m.start()
    yield m
    await m.stop()


async def test_esc_reaches_the_seat_at_once_and_esc_esc_is_data(catv, broker, space, tmp_path):
    r = PtyRun(attach_argv(broker, space, "catv"), env={"COTAL_HOME": str(tmp_path)})
    try:
        await r.wait(b"Ctrl-] to detach")
        await r.wait(b"cat-ready")
        t0 = time.monotonic()
        r.type(b"\x1b")
        await r.wait(b"^[")
        took = time.monotonic() - t0
        assert took < 0.4, f"Esc took {took:.3f}s: held like a detach key"
        print(f"raw attach: Esc at the seat and back in {took * 1000:.0f} ms")
        r.type(b"\x1b")
        await r.wait(b"^[^[")  # a second Esc (a double tap) is the program's too
        r.type(b"x")
        await r.wait(b"^[^[x")
        assert r.proc.poll() is None and b"detached" not in r.buf
        r.type(b"\x1d")  # Ctrl-] alone detaches
        await r.wait(b"detached from catv")
        assert await r.exit_code() == 0
        assert stty_a(r.slave) == r.before
    finally:
        r.close()


async def test_opted_in_esc_esc_detaches_from_the_environment(catv, broker, space, tmp_path):
    r = PtyRun(attach_argv(broker, space, "catv"),
               env={"COTAL_HOME": str(tmp_path), "COTAL_DETACH_KEY": "ctrl-], esc esc"})
    try:
        await r.wait(b"Ctrl-] or Esc Esc to detach")
        await r.wait(b"cat-ready")
        r.type(b"\x1b")
        await r.wait(b"^[")  # a lone Esc still arrives, once its window passed
        r.type(b"\x1b")
        await asyncio.sleep(0.05)  # a typist: two presses, two reads
        r.type(b"\x1b")
        await r.wait(b"detached from catv")
        assert b"^[^[" not in r.buf
        assert await r.exit_code() == 0
        assert stty_a(r.slave) == r.before
    finally:
        r.close()


async def test_detach_keys_from_config_and_a_tmux_style_sequence(catv, broker, space, tmp_path):
    (tmp_path / "config.toml").write_text('[attach]\ndetach_keys = ["ctrl-b d"]\n')
    r = PtyRun(attach_argv(broker, space, "catv"), env={"COTAL_HOME": str(tmp_path)})
    try:
        await r.wait(b"Ctrl-B d to detach")
        await r.wait(b"cat-ready")
        r.type(b"\x1d")  # Ctrl-] is data now: the seat reads it
        await r.wait(b"^]")
        r.type(b"\x02")
        await asyncio.sleep(0.05)  # a typist: two presses, two reads
        r.type(b"x")  # not d: Ctrl-B and x both reach the seat
        await r.wait(b"^Bx")
        r.type(b"\x02")
        await asyncio.sleep(0.05)  # a typist: two presses, two reads
        r.type(b"d")
        await r.wait(b"detached from catv")
        assert await r.exit_code() == 0
    finally:
        r.close()


@pytest.mark.parametrize("where", ["config", "environment"])
async def test_a_bad_detach_key_is_refused_by_name_before_the_terminal(catv, broker, space, tmp_path,
                                                                       where):
    env = {"COTAL_HOME": str(tmp_path)}
    if where == "config":
        (tmp_path / "config.toml").write_text('[attach]\ndetach_keys = "d esc"\n')
    else:
        env["COTAL_DETACH_KEY"] = "ctrl-b, ctrl-b d"
    r = PtyRun(attach_argv(broker, space, "catv"), env=env)
    try:
        assert await r.exit_code() == 2
        named = b"[attach] detach_keys" if where == "config" else b"COTAL_DETACH_KEY"
        await r.wait(named)
        assert b"\x1b[" not in r.buf and r.buf.count(b"\n") == 1  # one sentence, nothing else
        assert b"Traceback" not in r.buf
        assert stty_a(r.slave) == r.before
        assert catv.live_sessions == 0  # no grant was asked for
    finally:
        r.close()


async def test_the_console_refuses_a_bad_detach_key_before_the_terminal(broker, space, tmp_path):
    """``cotal watch`` checks the detach keys its panes will use before Textual starts."""
    from test_attach_cli import COTAL

    r = PtyRun([*COTAL, "watch", "--server", broker.url, "--space", space],
               env={"COTAL_HOME": str(tmp_path), "COTAL_DETACH_KEY": "esc esc esc esc"})
    try:
        assert await r.exit_code() == 2
        await r.wait(b"COTAL_DETACH_KEY='esc esc esc esc': a sequence is at most 3 presses")
        assert b"\x1b[" not in r.buf and b"Traceback" not in r.buf
        assert stty_a(r.slave) == r.before
    finally:
        r.close()
