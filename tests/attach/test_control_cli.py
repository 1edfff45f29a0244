"""``cotal spawn | stop | input | status | ps`` as a user runs them (subprocesses) against real
managers: what they print, and that every failure is one sentence with a non-zero exit."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys

import pytest

from conftest import until
from support.managers import Managers

COTAL = [sys.executable, "-m", "cotal_tui.cli"]


async def cotal(broker, space: str, *argv: str, server: str | None = None, env: dict | None = None
                ) -> subprocess.CompletedProcess:
    import os

    cmd = COTAL + [argv[0], "--server", server or broker.url, "--space", space, "--connect-timeout", "2",
                   *argv[1:]]
    e = dict(os.environ)
    e.pop("COTAL_READ_ONLY", None)
    e.update(env or {})
    return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=90, env=e)


def failed(r: subprocess.CompletedProcess, verb: str, code: int = 1) -> str:
    """Exit ``code``, nothing on stdout but progress, exactly one sentence on stderr."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"cotal {verb}: "), repr(r.stderr)
    assert r.stderr.rstrip().endswith("."), repr(r.stderr)
    assert "\x1b" not in r.stderr
    return r.stderr.strip()


@pytest.fixture
async def managers(broker, space, tmp_path):
    ms = Managers(broker, space, tmp_path)
    yield ms
    await ms.stop()


async def test_spawn_input_status_stop_from_the_command_line(broker, space, managers):
    m1 = await managers.start("near")
    m2 = await managers.start()
    r = await cotal(broker, space, "spawn", "echo", "--name", "cli1", "--on", m1.instance_id)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"spawning echo as cli1 on manager {m1.instance_id}…"
    assert lines[-1].startswith(f"spawned cli1 (echo) on manager {m1.instance_id}: joined the mesh after ")
    r = await cotal(broker, space, "spawn", "bash", "--on", m2.instance_id)
    assert r.returncode == 0 and "spawned bash (bash)" in r.stdout, r.stderr

    r = await cotal(broker, space, "input", "cli1", "hello", "world")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"typed 12 bytes and Enter into cli1 (manager {m1.instance_id})"
    screen = lambda: "\n".join(m1.seats["cli1"].pty.mirror.text_lines())  # noqa: E731
    await until(lambda: "echo: hello world" in screen(), 10, "typed line echoed")
    r = await cotal(broker, space, "input", "cli1", "--no-enter", "--", "-staged")
    assert r.returncode == 0 and "typed 7 bytes into cli1" in r.stdout, r.stderr
    await until(lambda: "cli1> -staged" in screen(), 10, "staged text")

    r = await cotal(broker, space, "status", "cli1")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(rf"cli1/echo · echo-line · pty · running · mesh (idle|working · progress unknown) · "
                        rf"up 0m · manager {m1.instance_id}\n", r.stdout), r.stdout

    r = await cotal(broker, space, "stop", "cli1")
    assert r.returncode == 0 and r.stdout == f"stopped cli1 (manager {m1.instance_id})\n", r.stderr
    r = await cotal(broker, space, "stop", "bash", "--force")
    assert r.returncode == 0 and r.stdout == f"force-killed bash (manager {m2.instance_id})\n", r.stderr
    assert "cli1" not in m1.seats and "bash" not in m2.seats
    # gone now: one sentence naming the search
    msg = failed(await cotal(broker, space, "status", "cli1"), "status")
    assert msg == f"cotal status: no managed agent 'cli1' on any of the 2 answering manager(s) in space {space}."


async def test_ps_groups_per_manager_and_names_a_killed_one(broker, space, managers, tmp_path):
    from support import manager_proc

    r = await cotal(broker, space, "ps")
    assert failed(r, "ps") == f"cotal ps: no manager is registered in space {space} on {broker.url}."
    near = await managers.start()
    r = await cotal(broker, space, "ps")
    assert r.returncode == 0 and r.stdout == "(no managed agents)\n", (r.stdout, r.stderr)
    await near.stop()
    near = await managers.start("n1", "n2")
    proc, far = await manager_proc.start(broker.url, space, str(tmp_path / "far"), "f1")
    try:
        r = await cotal(broker, space, "ps")
        assert r.returncode == 0, r.stderr
        head, *rows = r.stdout.splitlines()
        assert head.split() == ["NAME", "KIND", "PROCESS", "MESH", "MANAGER"]
        got = [(ln.split()[0], ln.split()[1], ln.split()[-1]) for ln in rows if not ln.startswith("manager ")]
        # grouped per manager, each row with the whole id of the instance that answered
        assert sorted(got) == sorted([("n1", "echo-line", near.instance_id), ("n2", "echo-line", near.instance_id),
                                      ("f1", "echo-line", far)])
        managers_in_order = [m for _, _, m in got]
        assert managers_in_order == sorted(managers_in_order, key=managers_in_order.index)
        assert managers_in_order.count(near.instance_id) == 2
        # the stopped first manager: registered, said it stopped, holds no lease: not asked
        assert not any(ln.startswith("manager ") for ln in rows), rows
        r = await cotal(broker, space, "ps", "--on", far)
        assert r.returncode == 0 and [ln.split()[0] for ln in r.stdout.splitlines()[1:]] == ["f1"]

        proc.kill()
        await proc.wait()
        r = await cotal(broker, space, "ps")
        assert r.returncode == 1, r.stderr  # partial: a manager did not answer (upstream exits non-zero)
        assert "cotal ps: partial answer: 1 manager did not answer" in r.stderr, r.stderr
        out = r.stdout.splitlines()
        assert [ln.split()[0] for ln in out[1:-1]] == ["n1", "n2"]
        assert out[-1] == (f"manager {far}: registration is stale - nothing is subscribed on its rail; "
                           f"its host is gone and it never deregistered; remove the record: "
                           f"cotal deregister-instance {far}")
        r = await cotal(broker, space, "ps", "--json")
        assert r.returncode == 1 and r.stdout.count("\n") == 2 and f'"manager":"{near.instance_id}"' in r.stdout
        assert r.stderr.startswith(f"cotal ps: manager {far}: registration is stale")
    finally:
        await manager_proc.finish(proc)


async def test_every_verb_fails_with_one_sentence(broker, space, managers):
    m = await managers.start("alpha")
    ghost = "b" * 26
    cases = [
        (("spawn", "nope"), 1, "spawn", "no agent file .cotal/agents/nope.md"),
        (("spawn", "echo", "--name", "alpha"), 1, "spawn", "already running"),
        (("spawn", "echo", "--name", "9lives"), 2, "spawn", "is not a seat name"),
        (("spawn", "echo", "--on", "short"), 2, "spawn", "is not a manager instance id"),
        (("spawn", "echo", "--on", ghost), 1, "spawn", f"no manager instance {ghost} is registered"),
        (("stop", "ghost"), 1, "stop", "no managed agent 'ghost'"),
        (("stop", "al\x1b]0;pwned\x07pha"), 2, "stop", "is not a seat name"),
        (("stop", "alpha", "--on", "UPPER" * 6), 2, "stop", "is not a manager instance id"),
        (("stop", "alpha", "--on", ghost), 1, "stop", "registered in space"),
        (("input", "ghost", "hi"), 1, "input", "no managed agent 'ghost'"),
        (("input", "alpha", "x" * 65537), 2, "input", "at most 65536"),
        (("status", "ghost"), 1, "status", "no managed agent 'ghost'"),
        (("status", "alpha", "--on", ghost), 1, "status", "registered in space"),
        (("ps", "--on", "nope"), 2, "ps", "is not a manager instance id"),
        (("ps", "--on", ghost), 1, "ps", f"no manager instance {ghost}"),
    ]
    # each case is its own process: run them a few at once (the suite's slowest test otherwise)
    lane = asyncio.Semaphore(4)

    async def one(verb: str, argv: tuple, check, **kw) -> None:
        async with lane:
            r = await cotal(broker, kw.pop("space_", space), *argv, **kw)
        check(r, verb)

    def says(words: str, code: int = 1):
        def check(r, verb):
            msg = failed(r, verb, code)
            assert words in msg, (verb, msg)
        return check

    def read_only(r, verb):
        assert failed(r, verb) == f"cotal {verb}: read-only - COTAL_READ_ONLY is set; nothing was changed."

    jobs = [one(verb, argv, says(words, code)) for argv, code, verb, words in cases]
    # a space nothing provisioned, an unreachable broker, read-only
    for verb, argv in (("spawn", ("echo",)), ("stop", ("alpha",)), ("input", ("alpha", "x")),
                       ("status", ("alpha",)), ("ps", ())):
        jobs.append(one(verb, (verb, *argv), says("space 'no-such-space' is not provisioned"),
                        space_="no-such-space"))
        jobs.append(one(verb, (verb, *argv), says("could not"), server="nats://127.0.0.1:1"))
    for verb, argv in (("spawn", ("echo",)), ("stop", ("alpha",)), ("input", ("alpha", "x"))):
        jobs.append(one(verb, (verb, *argv), read_only, env={"COTAL_READ_ONLY": "1"}))
    await asyncio.gather(*jobs)
    assert "alpha" in m.seats and m.seats["alpha"].pty.running  # none of that touched it
