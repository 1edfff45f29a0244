"""``cotal runs`` against the demo's run host, on a real broker with the contract tap on: a
waiting checkpoint in ``runs ps`` and ``runs journal``; ``runs answer`` settles it and the run
completes; a second answer is the contract's refusal; an expired deadline; a held run reads
``released`` (never failed) and a resume that ends released exits 2; a start with no issued
caller is refused by name; an open mesh refuses by name.

The host is a demo manager serving runs as on a static mesh (``run_mesh="static"``) on the
session broker, and the CLI reaches it on that broker's open rails: a static mesh's minted
control instrument does not carry the run-* request rows yet (meshview/link/auth.py), so the
operator-mode path is covered by tests/attach/test_runs_host.py's sibling once it does."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import nats
import pytest

from conftest import until
from cotal_tui.demo.manager import DemoManager
from cotal_tui.demo.runs import PROGRAMS

ROOT = Path(__file__).resolve().parents[2]
APPROVE = "/checkpoint:approve#0"


class Done:
    def __init__(self, rc: int, out: bytes, err: bytes):
        self.returncode, self.stdout, self.stderr = rc, out.decode(), err.decode()


@pytest.fixture
async def mesh(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    m = DemoManager(c, space, [], root=str(tmp_path / "m"), run_mesh="static")
    await m.start()
    m.url, m.space_name, m.home = broker.url, space, str(tmp_path / "home")
    yield m
    await m.stop()
    await c.close()


async def cli(mesh, *argv: str, timeout: float = 60.0) -> Done:
    env = dict(os.environ, COTAL_HOME=mesh.home)
    p = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cotal_tui.cli", *argv, "--server", mesh.url, "--space", mesh.space_name,
        env=env, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(p.communicate(), timeout)
    return Done(p.returncode, out, err)


async def start(mesh, program: str) -> str:
    return await mesh.run_host.start_bundled(program)


async def test_a_waiting_checkpoint_is_listed_answered_once_and_completes(mesh):
    run_id = await start(mesh, "release-checklist")
    ps = await cli(mesh, "runs")
    assert ps.returncode == 0, ps.stderr
    header, *rows = ps.stdout.splitlines()
    assert header.split() == ["RUN", "ENDPOINT", "STATE", "HOLDER", "JOURNAL", "FORKED-FROM"]
    mine = next(r for r in rows if r.startswith(run_id))
    assert mine.split()[1:3] == ["manager", "running"] and mine.split()[-1] == "-"
    j = await cli(mesh, "runs", "journal", run_id)
    assert j.returncode == 0, j.stderr
    lines = j.stdout.splitlines()
    assert lines[0].startswith(f"run {run_id} on manager: running, holder ")
    assert f"step        {APPROVE}  pending" in j.stdout
    assert "            asks        ship release 1.8?" in lines
    a = await cli(mesh, "runs", "answer", run_id, APPROVE, "--text", "yes")
    assert a.returncode == 0, a.stderr
    reply = json.loads(a.stdout)
    assert len(reply["answerId"]) == 43 and reply["settle"]["status"] == "resumed"
    j = await cli(mesh, "runs", "journal", run_id)
    assert j.stdout.splitlines()[0].startswith(f"run {run_id} on manager: completed")
    assert "asks" not in j.stdout and f"{APPROVE}  resumed" in j.stdout
    again = await cli(mesh, "runs", "answer", run_id, APPROVE, "--value", '"yes"')
    assert again.returncode == 1 and "no open checkpoint" in again.stderr and again.stdout == ""
    as_json = await cli(mesh, "runs", "ps", "--json")
    row = next(json.loads(ln) for ln in as_json.stdout.splitlines() if run_id in ln)
    assert row["state"] == "completed" and row["manager"] == mesh.instance_id


async def test_an_expired_deadline_fails_the_run_and_leaves_no_open_pause(mesh):
    run_id = await start(mesh, "expiring")
    assert "asks        confirm within 3 seconds" in (await cli(mesh, "runs", "journal", run_id)).stdout

    async def failed() -> bool:
        out = (await cli(mesh, "runs")).stdout.splitlines()
        return any(r.startswith(run_id) and r.split()[2] == "failed" for r in out)

    await until(failed, timeout=20, what="the expiring run to fail on its deadline")
    j = await cli(mesh, "runs", "journal", run_id)
    assert "/checkpoint:confirm#0  expired" in j.stdout and "asks" not in j.stdout


async def test_released_is_never_shown_as_failed_and_a_released_resume_exits_2(mesh):
    run_id = await start(mesh, "held")
    row = next(r for r in (await cli(mesh, "runs")).stdout.splitlines() if r.startswith(run_id))
    assert row.split()[2] == "released" and "failed" not in row
    r = await cli(mesh, "runs", "resume", run_id)
    assert r.returncode == 2, r.stderr
    assert f"resumed run {run_id} on the manager" in r.stdout
    assert f"run {run_id}: released — RunHeld: step /spawn:builder#0 settled refused (L5016)" in r.stdout


async def test_a_start_without_an_issued_caller_and_bad_usage_are_refused_by_name(mesh, tmp_path):
    prog = tmp_path / "release.cotal"
    prog.write_text(PROGRAMS["release-checklist"].source)
    r = await cli(mesh, "runs", "start", str(prog))
    assert r.returncode == 1 and "issued authority" in r.stderr and "Traceback" not in r.stderr
    r = await cli(mesh, "runs", "start", str(tmp_path / "missing.cotal"))
    assert r.returncode == 2 and "cannot read" in r.stderr
    r = await cli(mesh, "runs", "journal", "run-1")
    assert r.returncode == 2 and "not a run id" in r.stderr
    r = await cli(mesh, "runs", "answer", "run-" + "0" * 32, APPROVE, "--value", "yes")
    assert r.returncode == 2 and "needs its own quotes" in r.stderr
    r = await cli(mesh, "runs", "answer", "run-" + "0" * 32, APPROVE)
    assert r.returncode == 2 and "exactly one of --value" in r.stderr
    r = await cli(mesh, "runs", "ps", "--on", "nope")
    assert r.returncode == 2 and "Traceback" not in r.stderr


async def test_an_open_mesh_refuses_runs_by_name(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    m = DemoManager(c, space, [], root=str(tmp_path / "o"))  # an open mesh: no run is hosted
    await m.start()
    m.url, m.space_name, m.home = broker.url, space, str(tmp_path / "home")
    try:
        r = await cli(m, "runs")
    finally:
        await m.stop()
        await c.close()
    assert r.returncode == 1 and "open mesh" in r.stderr and "static-auth mesh" in r.stderr
