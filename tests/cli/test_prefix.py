"""Unique prefixes where the command line asks for an id (cotal_tui/cli/prefix.py): run ids in
``cotal runs``, manager instance ids in ``--on`` (ps, runs, control verbs). A unique prefix is the
id; an ambiguous one is one sentence and its candidates; no match is named. Real broker, the
demo manager serving runs as on a static mesh (as tests/cli/test_runs_cli.py)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import nats
import pytest

from cotal_tui.cli.prefix import PrefixError, unique
from cotal_tui.demo.manager import DemoManager, SeatSpec

ROOT = Path(__file__).resolve().parents[2]


def test_the_rule():
    ids = ["run-aa01", "run-aa02", "run-b"]
    assert unique("run-b", ids, "run") == "run-b"
    assert unique("run-aa01", ids, "run") == "run-aa01"
    assert unique("run-aa0", ["run-aa0", "run-aa01"], "run") == "run-aa0"  # a whole id wins over longer ones
    with pytest.raises(PrefixError) as e:
        unique("run-aa", ids, "run", where="in space main")
    lines = str(e.value).splitlines()
    assert lines == ["'run-aa' names 2 runs in space main; give more of the id:", "  run-aa01", "  run-aa02"]
    assert e.value.candidates == ("run-aa01", "run-aa02")
    with pytest.raises(PrefixError, match=r"^'run-c' is not a run id, nor the start of one \(3 known\)\.$"):
        unique("run-c", ids, "run")
    many = [f"run-{i:04x}" for i in range(100)]
    with pytest.raises(PrefixError) as e:
        unique("run-", many, "run")
    assert len(str(e.value).splitlines()) == 1 + 20 + 1 and str(e.value).endswith("… and 80 more")


@pytest.fixture
async def mesh(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    m = DemoManager(c, space, [SeatSpec("alice", "local.alice")], root=str(tmp_path / "m"), run_mesh="static")
    await m.start()
    m.url, m.space_name, m.home = broker.url, space, str(tmp_path / "home")
    yield m
    await m.stop()
    await c.close()


async def cli(mesh, *argv: str) -> tuple[int, str, str]:
    p = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cotal_tui.cli", *argv, "--server", mesh.url, "--space", mesh.space_name,
        env=dict(os.environ, COTAL_HOME=mesh.home), cwd=ROOT, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(p.communicate(), 60)
    return p.returncode or 0, out.decode(), err.decode()


async def test_run_ids_by_unique_prefix(mesh):
    first = await mesh.run_host.start_bundled("release-checklist")
    code, out, err = await cli(mesh, "runs", "journal", first[:8])
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"run {first} on manager: running")
    second = await mesh.run_host.start_bundled("release-checklist")
    # "run-" starts both: the sentence, then each candidate, nothing on stdout
    code, out, err = await cli(mesh, "runs", "journal", "run-")
    assert code == 2 and out == ""
    head, *listed = err.splitlines()
    assert head == f"cotal runs journal: 'run-' names 2 runs in space {mesh.space_name}; give more of the id:"
    assert sorted(x.strip() for x in listed) == sorted([first, second])
    # no run starts it: named; a prefix that is no run id at all is usage, before the network
    other = "run-" + ("0" if not first.startswith("run-0") and not second.startswith("run-0") else "f") * 6
    code, out, err = await cli(mesh, "runs", "journal", other)
    assert code == 2 and err == (f"cotal runs journal: {other!r} is not a run id, nor the start of one, "
                                 f"in space {mesh.space_name} (2 known).\n")
    code, out, err = await cli(mesh, "runs", "journal", "run-XYZ")
    assert code == 2 and "is not a run id or a prefix of one" in err and "Traceback" not in err
    # answer takes a prefix too, and settles the whole id's checkpoint
    code, out, err = await cli(mesh, "runs", "answer", second[:10], "/checkpoint:approve#0", "--text", "yes")
    assert code == 0, err
    code, out, err = await cli(mesh, "runs", "journal", second)
    assert "/checkpoint:approve#0  ok" in out or "completed" in out.splitlines()[0], out


async def test_instance_ids_by_unique_prefix(mesh):
    iid = mesh.instance_id
    code, out, err = await cli(mesh, "runs", "ps", "--on", iid[:6])
    assert code == 0, err
    assert out.startswith("no workflow runs recorded") or out.startswith("RUN")
    code, out, err = await cli(mesh, "ps", "--on", iid[:5])
    assert code == 0, err
    assert iid in out
    miss = "z" if not iid.startswith("z") else "y"
    code, out, err = await cli(mesh, "ps", "--on", miss)
    assert code == 2
    assert err == (f"cotal ps: {miss!r} is not a manager instance id, nor the start of one, "
                   f"in space {mesh.space_name} (1 known).\n")
    code, out, err = await cli(mesh, "status", "alice", "--on", iid[:4])
    assert code == 0, err
    assert out.rstrip().endswith(f"· manager {iid}")


async def test_an_ambiguous_instance_prefix_lists_its_candidates(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    ids = ["p" * 20 + "a" * 6, "p" * 20 + "b" * 6]
    ms = [DemoManager(c, space, [SeatSpec(n, f"local.{n}")], instance_id=i, root=str(tmp_path / n))
          for n, i in zip(("alice", "bob"), ids)]
    for m in ms:
        await m.start()
    mesh = ms[0]
    mesh.url, mesh.space_name, mesh.home = broker.url, space, str(tmp_path / "home")
    try:
        code, out, err = await cli(mesh, "stop", "alice", "--on", "ppp")
        assert code == 2 and out == ""
        assert err.splitlines() == [
            f"cotal stop: 'ppp' names 2 manager instances in space {space}; give more of the id:",
            f"  {ids[0]}", f"  {ids[1]}"]
        code, out, err = await cli(mesh, "ps", "--on", "p" * 20 + "b")
        assert code == 0 and "bob" in out and "alice" not in out, (out, err)
    finally:
        for m in ms:
            await m.stop()
        await c.close()
