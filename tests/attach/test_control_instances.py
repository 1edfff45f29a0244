"""``deregister-instance`` exactly as the reference guards it (deregister-instance.ts): a live
manager refuses ``instance-answered``; a hung one (SIGSTOP: it holds its subscriptions) refuses
``instance-not-affirmed-gone``; a crashed one is ``gone`` and its status then spec are removed at
the revisions read; an id with no spec is ``not-registered``. Plus the managers' own ``status``,
and the spawn request in the contract's vocabulary."""

from __future__ import annotations

import signal

import jsonschema
import nats
import pytest

from attach.control import verbs as control
from attach.control.broker import parse_version, too_old
from attach.control.verbs import ControlError, LaunchOptions, spawn_request
from attach.control.instances import (
    INSTANCE_ANSWERED,
    NOT_AFFIRMED_GONE,
    NOT_REGISTERED,
    deregister_instance,
    manager_status,
)
from cotal_tui.demo.manager import DemoManager, SeatSpec
from meshview.link.connect import ConnectTarget
from meshview.wire.names import bucket_names
from meshview.wire.outbound import mint_lifecycle_uid
from support import manager_proc
from conftest import load_vectors

CONTRACT = load_vectors("manager-contract.json")
COMMANDS = {c["name"]: c for c in CONTRACT["commands"]}
FAST = {"describe_ms": 1500, "interest_ms": 1000}


def target(broker, space: str) -> ConnectTarget:
    return ConnectTarget((broker.url,), space, timeout=3)


@pytest.fixture
async def live(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    m = DemoManager(c, space, [SeatSpec("near", "local.near")], root=str(tmp_path / "live"))
    await m.start()
    yield m
    await m.stop()
    await c.close()


async def keys(nc, space: str, iid: str) -> set[str]:
    records = await nc.jetstream().key_value(bucket_names(space).records)
    out = set()
    for k in ("spec", "status"):
        try:
            if (await records.get(f"svc.manager.{iid}.{k}")).value:
                out.add(k)
        except Exception:  # noqa: BLE001 - deleted or absent
            pass
    return out


async def test_a_live_manager_is_never_deregistered(broker, nc, space, live):
    with pytest.raises(ControlError) as e:
        await deregister_instance(target(broker, space), live.instance_id, **FAST)
    assert e.value.code == INSTANCE_ANSWERED
    assert "answered a pinned describe at epoch" in e.value.message
    assert await keys(nc, space, live.instance_id) == {"spec", "status"}


async def test_a_crashed_manager_is_gone_and_its_records_go(broker, nc, space, live, tmp_path):
    proc, far = await manager_proc.start(broker.url, space, str(tmp_path / "far"), "far")
    try:
        proc.kill()  # a crashed host: nothing deregisters
        await proc.wait()
        records = await nc.jetstream().key_value(bucket_names(space).records)
        spec_rev = (await records.get(f"svc.manager.{far}.spec")).revision
        status_rev = (await records.get(f"svc.manager.{far}.status")).revision
        said: list[str] = []
        rep = await deregister_instance(target(broker, space), far, log=said.append, **FAST)
        assert (rep.endpoint, rep.instance_id, rep.probe.state) == ("manager", far, "gone")
        assert (rep.removed_spec_revision, rep.removed_status_revision) == (spec_rev, status_rev)
        assert rep.as_json() == {"endpoint": "manager", "instanceId": far,
                                 "probe": {"state": "gone", "detail": rep.probe.detail},
                                 "removedSpecRevision": spec_rev, "removedStatusRevision": status_rev}
        assert said[0].startswith(f"instance manager/{far}: gone - no answer to a pinned describe")
        assert await keys(nc, space, far) == set()
        # ps no longer pays for it, and a second run finds nothing to remove
        res = await control.ps(target(broker, space), deadline_ms=1500)
        assert [m.instance_id for m in res.managers] == [live.instance_id]
        with pytest.raises(ControlError) as e:
            await deregister_instance(target(broker, space), far, **FAST)
        assert e.value.code == NOT_REGISTERED
    finally:
        await manager_proc.finish(proc)


async def test_a_hung_manager_is_not_affirmed_gone(broker, nc, space, tmp_path):
    proc, wedged = await manager_proc.start(broker.url, space, str(tmp_path / "w"), "stuck")
    try:
        proc.send_signal(signal.SIGSTOP)  # holds its subscriptions, answers nothing
        with pytest.raises(ControlError) as e:
            await deregister_instance(target(broker, space), wedged, **FAST)
        assert e.value.code == NOT_AFFIRMED_GONE
        assert "nothing was removed" in e.value.message
        assert await keys(nc, space, wedged) == {"spec", "status"}
    finally:
        proc.send_signal(signal.SIGCONT)
        await manager_proc.finish(proc)


async def test_an_unknown_id_is_not_registered(broker, space):
    with pytest.raises(ControlError) as e:
        await deregister_instance(target(broker, space), mint_lifecycle_uid(), **FAST)
    assert e.value.code == NOT_REGISTERED


async def test_refusals_before_the_network():
    dead = ConnectTarget(("nats://127.0.0.1:1",), "nowhere", timeout=0.5)
    with pytest.raises(ControlError) as e:
        await deregister_instance(dead, "a" * 26, read_only="started with --read-only")
    assert e.value.code == "read-only"
    with pytest.raises(ControlError) as e:
        await deregister_instance(dead, "4ik6rb0e")
    assert e.value.code == "bad-request"


async def test_status_of_the_managers_themselves(broker, space, live):
    res = await manager_status(target(broker, space), deadline_ms=3000)
    [m] = res.managers
    assert m.state == "answered" and m.instance_id == live.instance_id
    assert isinstance(m.data, dict) and m.data.get("instanceId") == live.instance_id
    for key in ("connectors", "classSpawn", "staticReconciliation"):
        assert key in m.data


# ---- spawn in the contract's vocabulary ------------------------------------------------------


def test_spawn_sends_only_schema_keys_in_the_reference_meaning():
    """``name`` is the persona ref the manager resolves, ``identity`` the seat-name override
    (manager.ts ``StartAgentOpts``; the CLI's spawnDetached sends ``{name: ref, identity:
    values.name}``); every launch flag rides its own contract key, only when given."""
    schema = COMMANDS["spawn"]["inputSchema"]
    assert spawn_request("echo") == {"name": "echo"}
    assert spawn_request("echo", "w1") == {"name": "echo", "identity": "w1"}
    full = spawn_request("reviewer", "rev_2", LaunchOptions(
        agent="claude", role="review", model="opus", variant="high", config="agents/review.md",
        prompt="look at #12", cwd="src", subscribe=("general", "review"), allow_subscribe=("general",),
        allow_publish=("review",), events=False))
    assert full == {"name": "reviewer", "identity": "rev_2", "agent": "claude", "role": "review",
                    "model": "opus", "variant": "high", "config": "agents/review.md", "prompt": "look at #12",
                    "cwd": "src", "subscribe": ["general", "review"], "allowSubscribe": ["general"],
                    "allowPublish": ["review"], "events": False}
    for args in (spawn_request("echo"), spawn_request("echo", "w1"), full):
        jsonschema.validate(args, schema)
        assert set(args) <= set(CONTRACT["spawnInputKeys"])
    with pytest.raises(jsonschema.ValidationError):  # the schema is closed: what we never send
        jsonschema.validate({**full, "persona": "echo"}, schema)


# ---- the broker version --------------------------------------------------------------------------


def test_a_broker_older_than_2_12_is_named_in_one_sentence():
    assert parse_version("2.12.1") == (2, 12, 1)
    assert parse_version("v2.11.9-RC.2") == (2, 11, 9)
    assert parse_version("2.10") == (2, 10, 0)
    assert parse_version("") is None and parse_version(None) is None
    assert too_old("2.12.0") is None and too_old("2.13.0") is None and too_old("3.0.0") is None
    assert too_old("garbage") is None  # unknown is not refused: the calls say what fails
    said = too_old("2.11.4")
    assert said == ("the broker is nats-server 2.11.4, and the manager control plane needs 2.12 or newer "
                    "(message schedules); upgrade the broker")


async def test_the_session_broker_passes_the_check(broker, space, live):
    """The real broker reports its INFO version; ours is >= 2.12, so the verbs run."""
    c = await nats.connect(broker.url)
    try:
        from attach.control.broker import server_version

        v = server_version(c)
        assert v is not None and too_old(v) is None, v
    finally:
        await c.close()
    res = await control.ps(target(broker, space), deadline_ms=3000)
    assert [m.state for m in res.managers] == ["answered"]


