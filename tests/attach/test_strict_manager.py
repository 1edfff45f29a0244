"""The CLI's control verbs against the strict stand-in (support/strict_manager.py), a manager
written from the contract alone: where it and the demo both accept what the client sends, the
client is right by the contract and not by a mistake the two share. The strict manager's own
refusals and records are proven here too, since the other tests lean on them."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import nats
import pytest
from support.contract import contract
from support.strict_manager import CONNECTOR, StrictManager

from attach.control.endpoint import EndpointClient, fetch_cluster
from meshview.wire.endpoint import (
    MANAGER,
    Caller,
    new_nonce,
    reply_filter,
    request_subject,
)
from meshview.wire.envelope import build_request
from meshview.wire.names import bucket_names

COTAL = [sys.executable, "-m", "cotal_tui.cli"]
ROW_KEYS = set(contract().commands["ps"].output_schema["items"]["properties"])


async def cotal(broker, space: str, *argv: str) -> subprocess.CompletedProcess:
    cmd = COTAL + [argv[0], "--server", broker.url, "--space", space, "--connect-timeout", "2", *argv[1:]]
    env = dict(os.environ)
    env.pop("COTAL_READ_ONLY", None)
    return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=90, env=env)


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    return r.stdout


def one_sentence(r: subprocess.CompletedProcess, verb: str) -> str:
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"cotal {verb}: "), repr(r.stderr)
    return r.stderr.strip()


@pytest.fixture
async def strict(broker, space, tmp_path):
    """One strict manager hosting the seat ``alpha``; fails the test if it ever refused to send
    one of its own replies (a reply outside its output schema)."""
    nc = await nats.connect(broker.url)
    m = await StrictManager(nc, space, seats=("alpha",), root=str(tmp_path / "strict")).start()
    yield m
    await m.stop()
    await nc.close()
    assert m.own_failures == []


async def test_ps_status_spawn_input_stop_pass_against_the_strict_manager(broker, space, strict):
    iid = strict.instance_id
    head, *rows = ok(await cotal(broker, space, "ps")).splitlines()
    assert head.split() == ["NAME", "KIND", "PROCESS", "MESH", "MANAGER"]
    assert [r.split()[0] for r in rows] == ["alpha"] and rows[0].split()[-1] == iid
    [line] = ok(await cotal(broker, space, "ps", "--json")).splitlines()
    row = json.loads(line)
    # ours beside the contract's row: the manager that answered, and the stranded verdict
    assert set(row) - {"manager", "stranded"} <= ROW_KEYS and row["name"] == "alpha" and row["manager"] == iid
    # the strict manager's seat runs with no presence record: the one stranded rule says so
    assert row["stranded"] is (row["status"] == "running" and row["mesh"] == "absent")

    assert ok(await cotal(broker, space, "status", "alpha")).startswith(f"alpha · {CONNECTOR} · pty · running")
    # the manager itself (no seat name): its connectors and reconciliation
    out = ok(await cotal(broker, space, "status"))
    assert out.startswith(f"manager {iid} ") and f"connector {CONNECTOR}: available" in out

    out = ok(await cotal(broker, space, "input", "alpha", "hello", "world"))
    assert out.strip() == f"typed 12 bytes and Enter into alpha (manager {iid})"
    assert strict.seats["alpha"].typed == ["hello world"] and strict.seats["alpha"].bytes_in == 12
    ok(await cotal(broker, space, "input", "alpha", "--no-enter", "--", "-x"))
    assert strict.seats["alpha"].bytes_in == 14

    # --name pins the seat; the persona is the manager's file, resolved on the manager
    out = ok(await cotal(broker, space, "spawn", "echo", "--name", "s2"))
    assert out.splitlines()[-1].startswith(f"spawned s2 (echo) on manager {iid}: joined the mesh after ")
    assert "s2" in strict.seats and strict.seats["s2"].role == "echo"
    spawn_args = [a for c, a in strict.requests if c == "spawn"]
    assert spawn_args == [{"name": "echo", "identity": "s2"}], spawn_args
    # without --name the file's own name, numbered when taken
    ok(await cotal(broker, space, "spawn", "echo"))
    ok(await cotal(broker, space, "spawn", "echo"))
    assert {"echo", "echo_2"} <= set(strict.seats)
    msg = one_sentence(await cotal(broker, space, "spawn", "echo", "--name", "s2"), "spawn")
    assert "already runs here" in msg, msg
    msg = one_sentence(await cotal(broker, space, "spawn", "nope"), "spawn")
    assert 'no persona "nope"' in msg, msg

    assert ok(await cotal(broker, space, "stop", "alpha")) == f"stopped alpha (manager {iid})\n"
    assert ok(await cotal(broker, space, "stop", "s2")) == f"stopped s2 (manager {iid})\n"
    assert "alpha" not in strict.seats and "s2" not in strict.seats
    assert [c for c, *_ in strict.refused if c != "spawn"] == []  # only the two spawns meant to fail


async def test_personas_and_models_against_the_strict_manager(broker, space, strict):
    out = ok(await cotal(broker, space, "personas"))
    assert "echo" in out and "reviewer" in out
    assert "You are echo." in ok(await cotal(broker, space, "personas", "echo"))
    rows = [json.loads(ln) for ln in ok(await cotal(broker, space, "personas", "--json")).splitlines()]
    assert {r["name"] for r in rows} == {"echo", "reviewer"}
    assert all(r["manager"] == strict.instance_id for r in rows)
    for r in rows:  # each row as the manager sent it, plus the manager that answered
        assert not contract().validate_result("list-personas", {"personas": [
            {k: v for k, v in r.items() if k != "manager"}]}), r
    assert CONNECTOR in ok(await cotal(broker, space, "models"))


def _env(caller: Caller, command: str, args, *, digests=None, **kw) -> dict:
    c = contract().commands[command]
    i, o = digests or (c.input_digest, c.output_digest)
    return build_request(endpoint=MANAGER, command=command, caller=caller, input_digest=i, output_digest=o,
                         args=args, **kw)


async def _call(nc, space: str, iid: str, command: str, env: dict, caller: Caller) -> dict:
    nonce = new_nonce()
    subj = request_subject(space, MANAGER, command, caller, nonce, route="inst", instance_id=iid)
    q: asyncio.Queue = asyncio.Queue()

    async def cb(msg):
        q.put_nowait(json.loads(msg.data))

    sub = await nc.subscribe(reply_filter(space, MANAGER, caller, nonce), cb=cb)
    await nc.flush()
    await nc.publish(subj, json.dumps(env).encode())
    try:
        return await asyncio.wait_for(q.get(), 5)
    finally:
        await sub.unsubscribe()


@pytest.mark.contract_tap_off("sends contract-breaking requests on purpose to prove the strict refusals")
async def test_the_strict_manager_refuses_what_the_contract_refuses(nc, space, strict):
    caller = Caller.fresh()
    iid = strict.instance_id
    cases = [
        ("spawn", {"name": "echo", "persona": "echo"}, "bad-request"),  # no persona key at rev 21
        ("spawn", {"name": "echo", "continueSession": "x"}, "bad-request"),  # rev 17 only
        ("spawn", {"name": ""}, "bad-request"),
        ("spawn", {"name": "echo", "config": "no/such/file.md"}, "failed-precondition"),
        ("spawn", {"name": "echo", "agent": "claude"}, "failed-precondition"),
        ("inspect", None, "bad-request"),
        ("inspect", {"name": "alpha", "extra": 1}, "bad-request"),
        ("ps", {}, "bad-request"),  # a void input takes args absent or null
        ("inspect", {"name": "ghost"}, "not-found"),
        ("slots", None, "unimplemented"),  # in the contract, not served here
    ]
    for command, args, code in cases:
        r = await _call(nc, space, iid, command, _env(caller, command, args), caller)
        assert r["ok"] is False and r["error"]["code"] == code, (command, args, r)
        assert r["error"].get("outcome") == "not-executed", r
    # digests that are not the contract's
    void = contract().commands["ps"].input_digest
    r = await _call(nc, space, iid, "ps", _env(caller, "ps", None, digests=(void, void)), caller)
    assert r["error"]["code"] == "contract-mismatch", r
    # a targeted command without its target block
    r = await _call(nc, space, iid, "input", _env(caller, "input", {"text": "x"}), caller)
    assert r["error"]["code"] == "permission-denied", r
    assert strict.seats["alpha"].typed == []


async def test_registry_records_and_contract_artifacts_are_the_references(nc, space, broker, tmp_path):
    c = contract()
    own = await nats.connect(broker.url)
    m = await StrictManager(own, space, root=str(tmp_path / "r")).start()
    try:
        records = await nc.jetstream().key_value(bucket_names(space).records)
        spec_e = await records.get(f"svc.manager.{m.instance_id}.spec")
        spec = json.loads(spec_e.value)
        status = json.loads((await records.get(f"svc.manager.{m.instance_id}.status")).value)
        assert spec == {"endpoint": "manager", "owner": "local", "clusterDigests": [c.cluster_digest],
                        "protocol": {"v": 1}}
        assert status == {"epoch": 1, "state": "ready", "observedSpecRevision": spec_e.revision}
        # the cluster document in EPC_<space> is the contract's, byte for byte through its digest
        cmds = await fetch_cluster(nc, space, c.cluster_digest)
        assert set(cmds) == set(c.commands)
        assert all(cmds[n].input_digest == c.commands[n].input_digest for n in cmds)
        ep = EndpointClient(nc, space)
        r = await ep.describe(instance_id=m.instance_id)
        assert not c.validate_result("describe", r.data)
        assert (r.instance_id, r.epoch) == (m.instance_id, 1)
    finally:
        await m.stop()
        await own.close()
    # a clean stop deregisters: status and spec are gone
    keys = set()
    try:
        keys = set(await records.keys())
    except Exception:  # no keys left at all
        pass
    assert not {k for k in keys if m.instance_id in k}, keys
    assert m.own_failures == []
