"""Foundation: the embedded broker, space provisioning, the scripted team, the CLI shell."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import jsonschema
import nats
import pytest

from attach.control.registry import kv_keys
from conftest import VECTORS, until
from cotal_tui.demo.broker import Broker, BrokerError, check_version
from cotal_tui.demo.provision import provision_space
from cotal_tui.demo.team import Team, TeamSchedule

SCHEMA = json.loads((VECTORS / "cotal.schema.json").read_text())
COTAL = [sys.executable, "-m", "cotal_tui.cli"]


def _validator(definition: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(
        {"$ref": f"#/definitions/{definition}", "definitions": SCHEMA["definitions"]}
    )


# -- broker --------------------------------------------------------------------------------

def test_broker_refuses_old_version():
    with pytest.raises(BrokerError, match=r"2\.11\.9.*>= 2\.12"):
        check_version((2, 11, 9))
    check_version((2, 12, 0))


def test_broker_missing_binary_is_one_sentence(monkeypatch, tmp_path):
    monkeypatch.setenv("COTAL_NATS_SERVER", str(tmp_path / "nope"))
    with pytest.raises(BrokerError) as e:
        Broker().start()
    assert "\n" not in str(e.value) and "not an executable" in str(e.value)


def test_broker_old_binary_refused(monkeypatch, tmp_path):
    fake = tmp_path / "nats-server"
    fake.write_text("#!/bin/sh\necho 'nats-server: v2.10.22'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("COTAL_NATS_SERVER", str(fake))
    with pytest.raises(BrokerError, match="2.10.22"):
        Broker().start()


def test_busy_port_picks_another():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        b = Broker(port=busy).start()
        try:
            assert b.port != busy and b.running
        finally:
            b.stop()


def test_free_ports_are_never_handed_out_twice_in_a_row():
    """A pick is free when made but not held: a cluster's nine picks once named one port twice
    before any server bound it ("Error listening on router port ... address already in use").
    A process's picks are distinct, each bindable when handed out."""
    from cotal_tui.demo.broker import HANDED_MAX, free_port

    picks = [free_port() for _ in range(600)]
    assert len(set(picks)) == len(picks) and len(picks) < HANDED_MAX
    with socket.socket() as s:
        s.bind(("127.0.0.1", picks[-1]))  # the last one is still free


def test_stop_removes_store_and_process():
    b = Broker().start()
    store = Path(b.store_dir).parent
    pid = b.proc.pid
    assert store.exists()
    b.stop()
    assert not store.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_restart_keeps_port_and_store(fresh_broker):
    nc = await nats.connect(fresh_broker.url)
    await provision_space(nc, "keep")
    await nc.jetstream().publish("cotal.keep.chat.local.a.general", b"{}")
    await nc.close()
    port = fresh_broker.port
    fresh_broker.restart()
    assert fresh_broker.port == port
    nc = await nats.connect(fresh_broker.url)
    info = await nc.jetstream().stream_info("CHAT_keep")
    assert info.state.messages == 1
    await nc.close()


def test_cluster_routes(cluster):
    for n in cluster.nodes:
        with urllib.request.urlopen(f"http://127.0.0.1:{n.monitor_port}/routez") as r:
            routez = json.loads(r.read())
        peers = {route.get("remote_name") for route in routez["routes"]}
        assert len(peers - {None}) == 2, routez


async def test_cluster_r3_provision(cluster):
    nc = await nats.connect(servers=cluster.urls)
    await provision_space(nc, "ha", replicas=3)
    info = await nc.jetstream().stream_info("CHAT_ha")
    assert info.config.num_replicas == 3 and len(info.cluster.replicas or []) == 2
    await nc.close()


# -- provisioning ------------------------------------------------------------------------

async def test_provision_canonical_configs(nc, space):
    await provision_space(nc, space)  # idempotent: a second run changes nothing and never fails
    js = nc.jetstream()
    chat = (await js.stream_info(f"CHAT_{space}")).config
    assert chat.subjects == [f"cotal.{space}.chat.>"]
    assert chat.max_msgs_per_subject == 1000 and chat.allow_direct and chat.retention == "limits"
    assert chat.discard == "old" and not chat.max_age
    assert (await js.stream_info(f"DM_{space}")).config.subjects == [f"cotal.{space}.inst.>"]
    task = (await js.stream_info(f"TASK_{space}")).config
    assert task.retention == "workqueue" and task.subjects == [f"cotal.{space}.svc.>"]
    pres = (await js.stream_info(f"KV_cotal_presence_{space}")).config
    assert pres.max_age == 6.0
    assert (await js.stream_info(f"KV_cotal_manager_{space}")).config.max_age == 10.0
    for b in ("channels", "membership", "records"):
        await js.stream_info(f"KV_cotal_{b}_{space}")
    kv = await js.key_value(f"cotal_channels_{space}")
    assert json.loads((await kv.get("=defaults")).value) == {"deliveryClass": "live"}


# -- scripted team -----------------------------------------------------------------------

async def test_team_traffic_validates_against_schema(nc, space):
    msgs: list[tuple[str, dict]] = []
    presence: list[dict] = []

    async def on_msg(m):
        msgs.append((m.subject, json.loads(m.data)))

    await nc.subscribe(f"cotal.{space}.>", cb=on_msg)
    kv = await nc.jetstream().key_value(f"cotal_presence_{space}")
    watcher = await kv.watchall()

    team = Team(nc, space, seed=7, schedule=TeamSchedule(chat_interval=0.05, crash_after=None,
                                                         restart_after=None))
    await team.start()
    try:
        async def enough():
            return len(msgs) >= 40
        await until(enough, timeout=20)
        async for e in watcher:
            if e is None:
                continue
            presence.append(json.loads(e.value))
            if len(presence) >= 30:
                break
    finally:
        await team.stop()
        await watcher.stop()
    mv, pv = _validator("CotalMessage"), _validator("Presence")
    kinds = set()
    for subject, m in msgs:
        errors = list(mv.iter_errors(m))
        assert not errors, (subject, m, errors[0].message)
        kinds.add(subject.split(".")[2])
        tok = subject.split(".")
        sender = {"chat": tok[3:5], "inst": tok[5:7], "svc": tok[4:6]}[tok[2]]
        assert m["from"]["id"] == ".".join(sender), subject  # the subject names the sender
    for p in presence:
        errors = list(pv.iter_errors(p))
        assert not errors, (p, errors[0].message)
    assert kinds == {"chat", "inst", "svc"}
    channels = {s.split(".", 5)[5] for s, _ in msgs if s.split(".")[2] == "chat"}
    assert "team.backend" in channels or len(channels) >= 3
    part_kinds = {p["kind"] for _, m in msgs for p in m["parts"]}
    assert {"text", "data"} <= part_kinds


async def test_team_messages_carry_msg_id_and_land_in_streams(nc, space):
    team = Team(nc, space, seed=3, schedule=TeamSchedule(chat_interval=0.05, crash_after=None,
                                                         restart_after=None))
    await team.start()
    try:
        a = team.members[0]
        msg = await team.post(a, "general", "hello")
        # a republish with the same Nats-Msg-Id is deduplicated by JetStream
        ack = await nc.jetstream().publish(
            f"cotal.{space}.chat.local.{a.name}.general", json.dumps(msg).encode(),
            headers={"Nats-Msg-Id": msg["id"]})
        assert ack.duplicate
    finally:
        await team.stop()


async def test_team_crash_and_incarnation(nc, space):
    kv = await nc.jetstream().key_value(f"cotal_presence_{space}")
    team = Team(nc, space, seed=1, schedule=TeamSchedule(chat_interval=10, crash_after=None,
                                                         restart_after=None),
                heartbeat_s=0.3)
    await team.start()
    try:
        finn = team.by_name("finn")
        before = json.loads((await kv.get(finn.id)).value)
        await team.crash("finn")
        t_crash = time.time() * 1000

        async def last_beat_stops():
            await asyncio.sleep(0.7)
            cur = json.loads((await kv.get(finn.id)).value)
            return cur["ts"] <= t_crash
        await until(last_beat_stops, timeout=5)

        cleo = team.by_name("cleo")
        old_uid = cleo.lifecycle_uid
        new_uid = await team.restart_incarnation("cleo")
        cur = json.loads((await kv.get(cleo.id)).value)
        assert cur["lifecycleUid"] == new_uid != old_uid and cur["card"]["id"] == cleo.id
        assert before["card"]["meta"]["connector"] == "gemini-cli"
    finally:
        await team.stop()


def test_team_is_deterministic_under_seed():
    class _NC:  # Team only reads nc in start(); construction is pure
        pass
    a = Team(_NC(), "main", seed=42, agents=12)
    b = Team(_NC(), "main", seed=42, agents=12)
    assert [m.lifecycle_uid for m in a.members] == [m.lifecycle_uid for m in b.members]
    assert len(a.members) == 12 and len({m.id for m in a.members}) == 12


# -- CLI ---------------------------------------------------------------------------------

def test_unknown_flag_is_usage_error():
    r = subprocess.run(COTAL + ["demo", "--bogus"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr
    assert "Traceback" not in r.stderr
    r = subprocess.run(COTAL + ["demo", "--agents", "zero"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_demo_headless_runs_and_stops_clean():
    p = subprocess.Popen(COTAL + ["demo", "--headless", "--seed", "5"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("server: nats://127.0.0.1:")
        url = line.split()[1]
        space = p.stdout.readline().split()[1]
        assert space == "main"

        async def probe():
            nc = await nats.connect(url)
            got = asyncio.Event()

            async def cb(m):
                got.set()
            await nc.subscribe("cotal.main.chat.>", cb=cb)
            await asyncio.wait_for(got.wait(), 20)
            keys = await kv_keys(nc.jetstream(), "cotal_presence_main")  # never a racy kv.keys()
            await nc.close()
            return keys
        keys = asyncio.run(probe())
        assert "local.ada" in keys
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "Traceback" not in err
    port = int(url.rsplit(":", 1)[1])
    with socket.socket() as s:  # the broker is gone with the demo
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_demo_missing_server_is_one_sentence(tmp_path):
    env = dict(os.environ, COTAL_NATS_SERVER=str(tmp_path / "missing"))
    r = subprocess.run(COTAL + ["demo", "--headless"], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and "nats-server" in r.stderr
    assert "Traceback" not in r.stderr
