"""A manager is an ordinary endpoint any capability holder can run: everything it says is
untrusted. Against the strict stand-in in its hostile modes (support/strict_manager.py), every
control verb keeps the operator's terminal safe - no control, C1 or bidi byte a manager sent
reaches stdout or stderr raw (it shows escaped) - while ``--json`` keeps the manager's text
exact, JSON-escaped."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import nats
import pytest
from support.hostile import raw_control_bytes
from support.strict_manager import (
    CONNECTOR,
    HOSTILE,
    HOSTILE_PARTS,
    SERVED,
    StrictManager,
)

COTAL = [sys.executable, "-m", "cotal_tui.cli"]


async def cotal(broker, space: str, *argv: str) -> subprocess.CompletedProcess:
    cmd = COTAL + [argv[0], "--server", broker.url, "--space", space, "--connect-timeout", "2", *argv[1:]]
    env = dict(os.environ)
    env.pop("COTAL_READ_ONLY", None)
    return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, timeout=90, env=env)


async def run_all(broker, space: str, verbs: list[tuple[str, ...]]) -> dict[tuple, subprocess.CompletedProcess]:
    lane = asyncio.Semaphore(4)

    async def one(argv):
        async with lane:
            return argv, await cotal(broker, space, *argv)

    return dict(await asyncio.gather(*(one(v) for v in verbs)))


def check_terminal_safe(results: dict) -> list[str]:
    bad = []
    for argv, r in results.items():
        for stream, out in (("stdout", r.stdout), ("stderr", r.stderr)):
            hits = raw_control_bytes(out)  # C0 but newline, DEL, C1, bidi: what acts on a terminal
            if hits:
                bad.append(f"cotal {' '.join(argv)}: {stream} carries raw {sorted({h for _, h in hits})}: "
                           f"{out.decode('utf-8', 'replace')[:200]!r}")
        if b"Traceback" in r.stderr:
            bad.append(f"cotal {' '.join(argv)}: a traceback")
    return bad


@pytest.fixture
async def hostile(broker, space, tmp_path):
    started: list[tuple[StrictManager, object]] = []

    async def start(*modes: str, refuse=None, seats=("alpha",)) -> StrictManager:
        nc = await nats.connect(broker.url)
        m = await StrictManager(nc, space, seats=seats, root=str(tmp_path / f"h{len(started)}"),
                                hostile=set(modes), refuse=refuse).start()
        started.append((m, nc))
        return m

    yield start
    for m, nc in started:
        await m.stop()
        await nc.close()
        assert m.own_failures == []


TEXT_VERBS = [("ps",), ("status", "alpha"), ("status",), ("input", "alpha", "hi"), ("personas",),
              ("personas", "echo"), ("models",)]
JSON_VERBS = [("ps", "--json"), ("status", "alpha", "--json"), ("status", "--json"), ("personas", "--json"),
              ("personas", "echo", "--json"), ("models", "--json")]


async def test_hostile_strings_in_every_answer_never_reach_the_terminal_raw(broker, space, hostile):
    m = await hostile("strings")
    results = await run_all(broker, space, TEXT_VERBS + JSON_VERBS)
    # spawn then stop: the acceptance, the progress facts and the stop answer carry them too
    results[("spawn", "echo", "--name", "s2")] = await cotal(broker, space, "spawn", "echo", "--name", "s2")
    results[("stop", "s2")] = await cotal(broker, space, "stop", "s2")
    for argv, r in results.items():
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
    assert check_terminal_safe(results) == []
    # shown escaped, not dropped
    assert b"\\x1b]0;t" in results[("ps",)].stdout, results[("ps",)].stdout
    assert b"\\x1b]0;t" in results[("status", "alpha")].stdout
    assert "s2" not in m.seats


async def test_json_keeps_the_hostile_strings_exact(broker, space, hostile):
    m = await hostile("strings")
    results = await run_all(broker, space, JSON_VERBS)
    for argv, r in results.items():
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
    docs = {argv: [json.loads(ln) for ln in r.stdout.decode().splitlines()] for argv, r in results.items()}
    rows = {d["name"]: d for d in docs[("ps", "--json")]}
    assert rows["alpha"]["agent"] == CONNECTOR + HOSTILE and rows["alpha"]["mesh"].endswith(HOSTILE)
    assert ("evil" + HOSTILE) in rows  # a seat whose very name is hostile
    [st] = docs[("status", "alpha", "--json")]
    assert st["mode"] == "pty" + HOSTILE and st["instanceId"] == m.instance_id
    [mgr] = docs[("status", "--json")]
    assert any(c.get("reason") == "missing" + HOSTILE for c in mgr["connectors"]), mgr
    assert mgr["staticReconciliation"]["failures"][0]["remedy"] == "fix it" + HOSTILE
    assert any(p.get("description", "").endswith(HOSTILE) for p in docs[("personas", "--json")])
    [persona] = docs[("personas", "echo", "--json")]
    assert HOSTILE in persona["persona"]
    [models] = docs[("models", "--json")]
    assert json.dumps(models).count("\\u001b]0;t") >= 1
    # exact, and JSON-escaped on the wire to the terminal (no raw C1 or bidi either)
    assert check_terminal_safe(results) == []
    for part in HOSTILE_PARTS:
        for r in results.values():
            assert part.encode() not in r.stdout


async def test_hostile_error_messages_never_reach_stderr_raw(broker, space, hostile):
    # ps and inspect answer (so the targeted verbs reach their own command); the rest refuse
    await hostile("errors", refuse=set(SERVED) - {"describe", "ps", "inspect"})
    verbs = [("status",), ("input", "alpha", "hi"), ("spawn", "echo", "--name", "s2"), ("stop", "alpha"),
             ("stop", "alpha", "--force"), ("personas",), ("personas", "echo"), ("models",)]
    results = await run_all(broker, space, verbs)
    refused = {argv: r for argv, r in results.items() if argv != ("status",)}
    for argv, r in refused.items():
        assert r.returncode == 1, (argv, r.stdout, r.stderr)
        assert r.stderr.count(b"\n") == 1 and r.stderr.startswith(f"cotal {argv[0]}: ".encode()), (argv, r.stderr)
        assert b"\\x1b]0;t" in r.stderr, (argv, r.stderr)  # the manager's sentence, escaped
    assert check_terminal_safe(results) == []


async def test_a_hostile_refusal_of_ps_itself(broker, space, hostile):
    await hostile("errors")
    results = await run_all(broker, space, [("ps",), ("ps", "--json"), ("status", "alpha"), ("status",)])
    assert check_terminal_safe(results) == []
    assert b"\\x1b]0;t" in results[("ps",)].stdout + results[("ps",)].stderr
