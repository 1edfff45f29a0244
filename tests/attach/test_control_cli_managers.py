"""``cotal deregister-instance | personas | models | status`` (no seat) as a user runs them, against
real demo managers: what they print, --json exact, and each refusal as one sentence."""

from __future__ import annotations

import asyncio
import json

import pytest

from support import manager_proc
from support.managers import Managers
from test_control_cli import cotal, failed


@pytest.fixture
async def managers(broker, space, tmp_path):
    ms = Managers(broker, space, tmp_path)
    yield ms
    await ms.stop()


async def test_deregister_instance_from_the_command_line(broker, space, managers, tmp_path):
    live = await managers.start("alpha")
    proc, far = await manager_proc.start(broker.url, space, str(tmp_path / "far"), "far")
    try:
        proc.kill()
        await proc.wait()
        r = await cotal(broker, space, "ps")
        assert f"cotal deregister-instance {far}" in r.stdout  # the gone slot names its remedy
        answered, ready_only, bad, gone = await asyncio.gather(
            cotal(broker, space, "deregister-instance", live.instance_id),
            cotal(broker, space, "deregister-instance", far, env={"COTAL_READ_ONLY": "1"}),
            cotal(broker, space, "deregister-instance", "short"),
            cotal(broker, space, "deregister-instance", "--instance", far, "--json"))
        assert "answered" in failed(answered, "deregister-instance")
        assert failed(ready_only, "deregister-instance") == (
            "cotal deregister-instance: read-only - COTAL_READ_ONLY is set; nothing was changed.")
        assert "is not a manager instance id" in failed(bad, "deregister-instance", 2)
        assert gone.returncode == 0, gone.stderr
        rep = json.loads(gone.stdout)
        assert rep["endpoint"] == "manager" and rep["instanceId"] == far and rep["probe"]["state"] == "gone"
        assert isinstance(rep["removedSpecRevision"], int) and isinstance(rep["removedStatusRevision"], int)
        again = await cotal(broker, space, "deregister-instance", far)
        assert "has no registration to remove" in failed(again, "deregister-instance")
        r = await cotal(broker, space, "ps")
        assert far not in r.stdout and r.returncode == 0
    finally:
        await manager_proc.finish(proc)


async def test_personas_models_and_the_managers_status(broker, space, managers):
    m = await managers.start()
    listed, one, models, status, status_json = await asyncio.gather(
        cotal(broker, space, "personas"), cotal(broker, space, "personas", "echo"),
        cotal(broker, space, "models"), cotal(broker, space, "status"),
        cotal(broker, space, "status", "--json"))
    assert listed.returncode == 0, listed.stderr
    names = {line.split(" · ")[0].split("/")[0] for line in listed.stdout.splitlines()}
    assert {"echo", "bash"} <= names, listed.stdout
    assert one.returncode == 0 and one.stdout.startswith("echo"), one.stderr
    assert models.returncode == 0, models.stderr
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"manager {m.instance_id} · ")
    assert "static reconciliation:" in status.stdout
    rec = json.loads(status_json.stdout)
    assert rec["manager"] == m.instance_id and rec["instanceId"] == m.instance_id
    assert {"connectors", "classSpawn", "staticReconciliation"} <= set(rec)
    nope = await cotal(broker, space, "personas", "nope")
    failed(nope, "personas")
