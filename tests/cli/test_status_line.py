"""``cotal status --line``: one line of presence counts for tmux, on a real broker: counts per
state (stale is offline), a lying peer counted once and its name never printed raw, ``--format``
fields, a bad format named before any connection, and no console import on the way."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from support.observer import now_ms, presence, put_presence

ROOT = Path(__file__).resolve().parents[2]


async def cli(broker, space: str, *argv: str, home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, COTAL_HOME=str(home))
    p = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cotal_tui.cli", "status", "--line", *argv, "--server", broker.url,
        "--space", space, env=env, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(p.communicate(), 30)
    return subprocess.CompletedProcess(argv, p.returncode, out.decode(), err.decode())


async def team(nc, space: str) -> None:
    for i in range(3):
        await put_presence(nc, space, presence(f"w{i}", "working"))
    for i in range(2):
        await put_presence(nc, space, presence(f"q{i}", "waiting"))
    await put_presence(nc, space, presence("idle1", "idle"))
    await put_presence(nc, space, presence("gone", "offline"))
    await put_presence(nc, space, presence("stale", "working", ts=now_ms() - 60_000))
    await put_presence(nc, space, presence("manager", "idle", kind="endpoint"))  # not an agent


async def test_the_line_counts_each_state(broker, nc, space, tmp_path):
    await team(nc, space)
    got = await cli(broker, space, home=tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stdout == f"{space} ● 3 ◐ 2 ○ 1 ⨯ 2\n"


async def test_format_fields_and_a_lying_peer(broker, nc, space, tmp_path):
    await team(nc, space)
    # a record keyed for one peer but carrying another's id, and garbage: neither is counted
    kv = await nc.jetstream().key_value(f"cotal_presence_{space}")
    forged = presence("q0", "waiting")
    await kv.put("local.liar", json.dumps(forged).encode())
    await kv.put("local.junk", b"\x1b]2;owned\x07{not json")
    got = await cli(broker, space, "--format", "{waiting} waiting · {working}/{offline}", home=tmp_path)
    assert got.returncode == 0, got.stderr
    assert got.stdout == "2 waiting · 3/2\n"


async def test_a_bad_format_is_one_sentence_before_any_connection(tmp_path):
    for fmt, said in (("{space} {busy}", "unknown field 'busy'"), ("{working", "not a format string"),
                      ("{working!r}", "takes no conversion")):
        p = subprocess.run([sys.executable, "-m", "cotal_tui.cli", "status", "--line", "--format", fmt,
                            "--server", "nats://127.0.0.1:1"], capture_output=True, text=True, cwd=ROOT,
                           env=dict(os.environ, COTAL_HOME=str(tmp_path)), timeout=30)
        assert p.returncode == 2, (fmt, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0] and "{space} {working} {waiting}" in lines[0], p.stderr
        assert "Traceback" not in p.stderr


def test_line_and_a_seat_do_not_mix(tmp_path):
    p = subprocess.run([sys.executable, "-m", "cotal_tui.cli", "status", "bob", "--line"],
                       capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, COTAL_HOME=str(tmp_path)),
                       timeout=30)
    assert p.returncode == 2 and p.stderr.startswith("cotal status: --line takes no seat")


async def test_it_is_fast_and_imports_no_console(broker, nc, space, tmp_path):
    await team(nc, space)
    code = ("import sys, time; t = time.perf_counter(); from cotal_tui.cli import main; "
            f"rc = main(['status', '--line', '--server', {broker.url!r}, '--space', {space!r}]); "
            "print('WALL', round(time.perf_counter() - t, 3)); "
            "print('HEAVY', sorted(m for m in ('textual', 'rich', 'cotal_tui.app', 'widgets') if m in sys.modules)); "
            "sys.exit(rc)")
    t = time.perf_counter()
    p = await asyncio.create_subprocess_exec(sys.executable, "-c", code, cwd=ROOT, stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.PIPE,
                                             env=dict(os.environ, COTAL_HOME=str(tmp_path)))
    out, err = await asyncio.wait_for(p.communicate(), 30)
    wall = time.perf_counter() - t
    assert p.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[0] == f"{space} ● 3 ◐ 2 ○ 1 ⨯ 2"
    assert "HEAVY []" in lines, lines
    assert wall < 5.0, f"cotal status --line took {wall:.2f} s"


async def test_no_broker_or_no_space_is_one_sentence(broker, tmp_path):
    for server, space, said in (("nats://127.0.0.1:1", "main", "cotal status: "),
                                (broker.url, "nosuchspace", "not provisioned")):
        p = subprocess.run([sys.executable, "-m", "cotal_tui.cli", "status", "--line", "--server", server,
                            "--space", space, "--connect-timeout", "2"], capture_output=True, text=True,
                           cwd=ROOT, env=dict(os.environ, COTAL_HOME=str(tmp_path)), timeout=30)
        assert p.returncode == 1 and p.stdout == "", (server, p.stdout, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and said in lines[0] and "Traceback" not in p.stderr, p.stderr
