"""The demo manager as a stand-in of the reference manager (service contract revision 22), on the
real session broker: describe and the EPC artifacts are the contract's bytes, every reply it sends
validates against the command's closed output schema, every bad request is refused bad-request
before any effect, the registry goes ready -> exited -> deregistered, personas are files under its
root, spawn is an action whose facts reach only its caller."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import jsonschema
import pytest
from nats.js.errors import KeyNotFoundError

from attach.control.endpoint import EndpointClient, fetch_artifact
from conftest import until
from cotal_tui.demo.contract import CONTRACT_FILE, CONTRACT_FILES, VIOLATIONS, load_contract
from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.demo.personas import ConnectorState
from meshview.wire.canonical import closure_digest, digest
from meshview.wire.endpoint import (
    MANAGER,
    AuthzTarget,
    Caller,
    goal_progress_pattern,
    new_nonce,
    parse_reply,
    reply_filter,
    request_subject,
)
from meshview.wire.envelope import build_request, parse_reply_body

VECTOR = Path(__file__).resolve().parents[1] / "vectors" / "manager-contract-rev22.json"
VECTOR21 = Path(__file__).resolve().parents[1] / "vectors" / "manager-contract.json"
RAW = json.loads(VECTOR.read_text())
CMDS = {c["name"]: c for c in RAW["commands"]}
SERVED = ("status", "ps", "inspect", "slots", "models", "spawn", "despawn", "attach", "input",
          "goal-result", "list-personas", "show-persona", "define-persona", "purge")
UNSERVED = [n for n in CMDS if n not in SERVED]
BAD_ON_PURPOSE = pytest.mark.contract_tap_off("sends requests outside the input schemas on purpose")


def out_ok(command: str, data) -> None:
    jsonschema.Draft202012Validator(CMDS[command]["outputSchema"]).validate(data)


class Raw:
    """A caller that sends exactly the envelope a test builds (no client-side shaping)."""

    def __init__(self, nc, space: str, caller: Caller | None = None):
        self.nc, self.space = nc, space
        self.caller = caller or Caller.fresh()

    async def call(self, command: str, args=None, *, target: dict | None = None, mode: str | None = None,
                   instance_id: str | None = None, digests: tuple[str, str] | None = None,
                   request_id: str | None = None, omit_args: bool = False, timeout: float = 10) -> dict:
        c = CMDS.get(command)
        nonce = new_nonce()
        if mode == "self":
            subj_target = AuthzTarget("self")
        elif target is not None:
            subj_target = AuthzTarget(mode or "any", target["owner"])
        else:
            subj_target = None
        subject = request_subject(self.space, MANAGER, command, self.caller, nonce,
                                  route="inst" if instance_id else "one", instance_id=instance_id,
                                  target=subj_target)
        ind, outd = digests or ((c["inputDigest"], c["outputDigest"]) if c else ("sha256:" + "0" * 64,) * 2)
        env = build_request(endpoint=MANAGER, command=command, caller=self.caller, input_digest=ind,
                            output_digest=outd, target=target, deadline_ms=5000, request_id=request_id)
        if not omit_args:
            env["args"] = args
        got: asyncio.Future = asyncio.get_running_loop().create_future()

        async def cb(msg):
            p = parse_reply(msg.subject)
            body = parse_reply_body(msg.data)
            if p is not None and p.nonce == nonce and body["id"] == env["id"] and not got.done():
                got.set_result(body)

        sub = await self.nc.subscribe(reply_filter(self.space, MANAGER, self.caller, nonce), cb=cb)
        try:
            await self.nc.flush()
            await self.nc.publish(subject, json.dumps(env).encode())
            return await asyncio.wait_for(got, timeout)
        finally:
            await sub.unsubscribe()

    async def ok(self, command: str, args=None, **kw):
        r = await self.call(command, args, **kw)
        assert r["ok"], r
        out_ok(command, r["data"])
        return r["data"]


@pytest.fixture
async def manager(nc, space, tmp_path):
    m = DemoManager(nc, space, [SeatSpec("alice", "local.alice")], root=str(tmp_path / "root"))
    await m.start()
    yield m
    await m.stop()
    assert m.contract_violations == []


def seat_target(m: DemoManager, name: str) -> dict:
    s = m.seats[name]
    return {"owner": s.owner, "actor": s.actor, "lifecycleUid": s.lifecycle_uid}


def valid_args(schema: dict):
    """The smallest args the schema admits (required keys only)."""
    if schema.get("type") == "null":
        return None
    out = {}
    for key in schema.get("required", []):
        p = schema["properties"][key]
        if "enum" in p:
            out[key] = p["enum"][0]
        elif p.get("type") == "string":
            out[key] = "0" * 64 if "pattern" in p else "x"
        elif p.get("type") == "integer":
            out[key] = max(1, p.get("minimum", 1))
        elif p.get("type") == "object":
            out[key] = {}
        elif p.get("type") == "array":
            out[key] = []
        else:
            out[key] = "x"
    return out


def invalid_args(schema: dict):
    return {"x": 1} if schema.get("type") == "null" else {"definitelyNotAKey": True}


def target_for(command: str, m: DemoManager) -> dict:
    c = CMDS[command]
    if not c["targeted"]:
        return {}
    if c["modes"] == ["self"]:
        return {"mode": "self"}
    return {"target": seat_target(m, "alice"), "mode": "any"}


# ---- the contract as package data ---------------------------------------------------------------


def test_the_packaged_contract_is_the_vector_byte_for_byte():
    assert CONTRACT_FILE.read_bytes() == VECTOR.read_bytes()
    assert CONTRACT_FILES[21].read_bytes() == VECTOR21.read_bytes()  # the revision a forced demo serves
    assert load_contract(21).revision == 21
    c = load_contract()
    assert c.revision == 22 and c.cluster_digest == RAW["clusterDocument"]["closureDigest"]
    for name, cmd in c.commands.items():
        assert (cmd.input_digest, cmd.output_digest) == (closure_digest(CMDS[name]["inputSchema"]),
                                                         closure_digest(CMDS[name]["outputSchema"]))
    assert len(c.schema_roots()) == RAW["distinctSchemaRoots"]


# ---- describe and the EPC artifacts -------------------------------------------------------------


async def test_describe_advertises_the_contract_and_publishes_its_exact_artifacts(nc, space, manager):
    raw = Raw(nc, space)
    r = await raw.call("describe", omit_args=True, digests=None)
    assert r["ok"], r
    jsonschema.Draft202012Validator(RAW["describe"]["answerSchema"]).validate(r["data"])
    d = r["data"]["descriptor"]
    assert d["protocol"] == {"v": 1} and d["endpoint"] == "manager"
    [cluster] = d["clusters"]
    assert cluster["digest"] == RAW["clusterDocument"]["closureDigest"]
    assert cluster["commands"] == [c["name"] for c in RAW["commands"]]
    # the cluster manifest and document in EPC are the contract's own bytes
    manifest = await fetch_artifact(nc, space, cluster["digest"])
    assert manifest == RAW["clusterDocument"]["manifest"]
    doc = await fetch_artifact(nc, space, manifest["root"])
    assert doc == RAW["clusterDocument"]["document"] and doc["revision"] == 22
    for row in doc["commands"]:
        c = CMDS[row["name"]]
        assert (row["class"], row["targeted"], row["capability"], row.get("modes")) == (
            "ephemeral", c["targeted"], c["capability"], c.get("modes"))
        for side in ("input", "output"):
            ref = row[f"{side}Digest"]
            assert ref == c[f"{side}Digest"] == closure_digest(c[f"{side}Schema"])
            m = await fetch_artifact(nc, space, ref)
            assert m["root"] == digest(c[f"{side}Schema"])
            assert await fetch_artifact(nc, space, m["root"]) == c[f"{side}Schema"]
    # the client resolves the same surface from it
    res = await EndpointClient(nc, space).resolve()
    assert set(res.commands) == set(CMDS)
    assert res.commands["despawn"].modes == ("owner", "any") and res.commands["stop"].modes == ("self",)


# ---- every served command's reply is one its output schema allows -------------------------------


async def test_every_served_command_answers_inside_its_output_schema(nc, space, manager):
    raw = Raw(nc, space)
    status = await raw.ok("status")
    assert (status["runtime"], status["custody"], status["agentCount"]) == ("pty", "legacy", 1)
    assert status["classSpawn"] is True and status["staticReconciliation"] == {"state": "idle", "failures": []}
    assert {c["agent"] for c in status["connectors"]} == {"echo-line", "dashboard", "bash", "command"}
    assert all(c["state"] == "available" for c in status["connectors"] if c["agent"] != "bash")
    [row] = await raw.ok("ps")
    assert row["agent"] == "echo-line" and row["name"] == "alice"
    assert not {"cols", "rows", "meshView"} & set(row) and None not in row.values()
    one = await raw.ok("inspect", {"name": "alice"})
    assert {k: v for k, v in one.items() if k != "uptimeMs"} == {k: v for k, v in row.items() if k != "uptimeMs"}
    assert await raw.ok("slots") == []
    models = await raw.ok("models", {})
    assert {c["agent"] for c in models["catalogs"]} == {"echo-line", "dashboard", "bash", "command"}
    assert await raw.ok("models", {"agent": "bash", "refresh": True}) == {
        "catalogs": [{"agent": "bash", "supported": False, "models": []}]}
    assert [p["name"] for p in (await raw.ok("list-personas"))["personas"]] == ["bash", "dashboard", "echo"]
    assert (await raw.ok("show-persona", {"name": "echo"}))["role"] == "echo"
    assert (await raw.ok("define-persona", {"name": "critic", "persona": "You critique."}))["name"] == "critic"
    assert "chat" in await raw.ok("purge", {"includeDms": True})
    acc = await raw.ok("spawn", {"name": "echo", "identity": "w1"})
    await until(lambda: "w1" in manager.seats and manager.seats["w1"].joined_at, 10, what="w1 up")
    assert (await raw.ok("goal-result", {"goalId": acc["goalId"]}))["goalId"] == acc["goalId"]
    wt = seat_target(manager, "w1")
    assert await raw.ok("input", {"text": "hi"}, target=wt) == {"name": "w1", "bytes": 3}
    grant = (await raw.ok("attach", None, target=wt))["grant"]
    assert grant["serving"] == {"instanceId": manager.instance_id, "epoch": manager.epoch}
    assert await raw.ok("despawn", {"graceful": False}, target=wt) == {"name": "w1", "stopped": True,
                                                                       "graceful": False}
    # a reply the demo could not send inside its schema fails loud instead (see below)
    assert manager.contract_violations == []


class _Broken(DemoManager):
    async def _cmd_status(self, parsed, env, args):
        return {"instanceId": self.instance_id, "state": "serving"}  # the old demo's kind of answer


async def test_a_reply_outside_its_output_schema_is_never_sent_it_is_internal_and_counted(nc, space):
    m = _Broken(nc, space, [])
    await m.start()
    before = len(VIOLATIONS)
    try:
        r = await Raw(nc, space).call("status", instance_id=m.instance_id)
        assert not r["ok"] and r["error"]["code"] == "internal"
        assert "output does not validate against the pinned output schema" in r["error"]["message"]
        assert [c for c, _ in m.contract_violations] == ["status"]
    finally:
        del VIOLATIONS[before:]  # this one was provoked on purpose
        await m.stop()


# ---- bad requests -------------------------------------------------------------------------------


@BAD_ON_PURPOSE
@pytest.mark.parametrize("command", list(CMDS))
async def test_args_outside_the_input_schema_are_bad_request_for_every_command(nc, space, manager, command):
    r = await Raw(nc, space).call(command, invalid_args(CMDS[command]["inputSchema"]),
                                  instance_id=manager.instance_id, **target_for(command, manager))
    assert not r["ok"] and r["error"]["code"] == "bad-request", r
    assert r["error"]["message"].startswith("args do not validate against the input schema: /")
    assert r["error"]["outcome"] == "not-executed"
    assert "alice" in manager.seats and manager.seats["alice"].pty.running  # nothing happened


@BAD_ON_PURPOSE
async def test_spawn_refuses_a_key_outside_its_closed_schema_by_name(nc, space, manager):
    raw = Raw(nc, space)
    r = await raw.call("spawn", {"name": "w1", "persona": "echo"})
    assert r["error"]["code"] == "bad-request"
    assert r["error"]["message"] == ('args do not validate against the input schema: / must NOT have '
                                     'additional properties: "persona"')
    r = await raw.call("spawn", {"name": "w1", "continueSession": "s"})  # rev 17's key, gone at 21
    assert r["error"]["code"] == "bad-request" and '"continueSession"' in r["error"]["message"]
    r = await raw.call("despawn", None, target=seat_target(manager, "alice"))  # an object input: null is refused
    assert r["error"]["code"] == "bad-request" and r["error"]["message"].endswith("/ must be object")
    r = await raw.call("input", {"text": ""}, target=seat_target(manager, "alice"))
    assert r["error"]["message"].endswith("/text must NOT have fewer than 1 characters")
    assert set(manager.seats) == {"alice"}


@BAD_ON_PURPOSE
async def test_pinned_digests_that_are_not_the_contract_are_contract_mismatch(nc, space, manager):
    c = CMDS["ps"]
    r = await Raw(nc, space).call("ps", digests=(c["inputDigest"], CMDS["status"]["outputDigest"]))
    assert r["error"]["code"] == "contract-mismatch" and r["error"]["outcome"] == "not-executed"


@pytest.mark.parametrize("command", UNSERVED)
async def test_contract_commands_the_demo_does_not_serve_are_unimplemented_by_name(nc, space, manager, command):
    r = await Raw(nc, space).call(command, valid_args(CMDS[command]["inputSchema"]),
                                  instance_id=manager.instance_id, **target_for(command, manager))
    assert not r["ok"] and r["error"]["code"] == "unimplemented", r
    assert command in r["error"]["message"]


# ---- registry -----------------------------------------------------------------------------------


async def records_ops(nc, space: str, iid: str) -> tuple[list, object]:
    seen: list = []

    async def cb(msg):
        op = (msg.headers or {}).get("KV-Operation", "PUT")
        seen.append((msg.subject.rsplit(".", 1)[-1], op, json.loads(msg.data) if msg.data else None))

    sub = await nc.subscribe(f"$KV.cotal_records_{space}.svc.manager.{iid}.*", cb=cb)
    await nc.flush()
    return seen, sub


async def test_registry_ready_then_exited_then_deregistered_status_before_spec(nc, space, tmp_path):
    root = tmp_path / "root"
    m = DemoManager(nc, space, [], root=str(root))
    await m.start()
    rec = await nc.jetstream().key_value(f"cotal_records_{space}")
    spec_e = await rec.get(f"svc.manager.{m.instance_id}.spec")
    status = json.loads((await rec.get(f"svc.manager.{m.instance_id}.status")).value)
    assert status == {"epoch": m.epoch, "state": "ready", "observedSpecRevision": spec_e.revision}
    assert json.loads(spec_e.value) == {"endpoint": "manager", "owner": "local", "protocol": {"v": 1},
                                        "clusterDigests": [RAW["clusterDocument"]["closureDigest"]]}
    seen, sub = await records_ops(nc, space, m.instance_id)
    await m.stop()
    await until(lambda: len(seen) >= 3, 5, what="exited + two deletes")
    await sub.unsubscribe()
    assert seen[0] == ("status", "PUT", {"epoch": m.epoch, "state": "exited",
                                         "observedSpecRevision": spec_e.revision})
    assert [(k, op) for k, op, _ in seen[1:]] == [("status", "DEL"), ("spec", "DEL")]
    for key in ("spec", "status"):
        with pytest.raises(KeyNotFoundError):
            await rec.get(f"svc.manager.{m.instance_id}.{key}")
    # the same instance comes back with the next epoch although its status record is gone
    m2 = DemoManager(nc, space, [], root=str(root))
    await m2.start()
    try:
        assert (m2.instance_id, m2.epoch) == (m.instance_id, m.epoch + 1)
    finally:
        await m2.stop(deregister=False)
    status = json.loads((await rec.get(f"svc.manager.{m2.instance_id}.status")).value)
    assert status["state"] == "exited" and status["epoch"] == m2.epoch


async def test_a_manager_without_a_usable_connector_leaves_class_spawn_to_a_sibling(nc, space):
    dead = {"echo-line": ConnectorState("echo-line", False, {}, "python was not found on this host")}
    m = DemoManager(nc, space, [], connectors=dead)
    await m.start()
    try:
        raw = Raw(nc, space)
        status = await raw.ok("status", instance_id=m.instance_id)
        assert status["classSpawn"] is False
        assert status["connectors"] == [{"agent": "echo-line", "state": "unavailable", "binaries": {},
                                         "reason": "python was not found on this host"}]
        with pytest.raises(asyncio.TimeoutError):  # nothing on the class rail takes an unpinned spawn
            await raw.call("spawn", {"name": "echo", "identity": "w1"}, timeout=1.5)
        r = await raw.call("spawn", {"name": "echo", "identity": "w1"}, instance_id=m.instance_id)
        assert r["error"]["code"] == "failed-precondition" and "unavailable" in r["error"]["message"]
        assert (await raw.ok("ps")) == []  # the class rail still serves everything else
    finally:
        await m.stop()


# ---- personas -----------------------------------------------------------------------------------


async def test_personas_are_files_under_the_root_listed_shown_defined_and_spawned(nc, space, manager, tmp_path):
    owner, other = Raw(nc, space), Raw(nc, space)
    agents = tmp_path / "root" / ".cotal" / "agents"
    assert sorted(p.name for p in agents.glob("*.md")) == ["bash.md", "dashboard.md", "echo.md"]
    listed = (await owner.ok("list-personas"))["personas"]
    assert {p["name"]: p.get("role") for p in listed} == {"bash": "shell", "dashboard": "dashboard", "echo": "echo"}
    assert all("owner" not in p for p in listed)  # operator-written files
    shown = await owner.ok("show-persona", {"name": "dashboard"})
    assert shown["persona"] == "a full-screen live dashboard"
    r = await owner.call("show-persona", {"name": "nope"})
    assert r["error"]["code"] == "not-found" and "no persona named 'nope'" in r["error"]["message"]

    d = await owner.ok("define-persona", {"name": "critic", "persona": "You critique.", "role": "reviewer",
                                          "agent": "dashboard", "model": "m1"})
    assert d == {"name": "critic", "path": str(agents / "critic.md")}
    assert (await owner.ok("show-persona", {"name": "critic"})) == {
        "name": "critic", "role": "reviewer", "model": "m1", "owner": owner.caller.principal,
        "persona": "You critique."}
    # only its owner redefines it, and only its content; an operator file is nobody's to redefine
    r = await other.call("define-persona", {"name": "critic", "persona": "mine now"})
    assert r["error"]["code"] == "failed-precondition" and "only its owner" in r["error"]["message"]
    r = await owner.call("define-persona", {"name": "echo", "persona": "hijack"})
    assert r["error"]["code"] == "failed-precondition" and "operator-owned" in r["error"]["message"]
    await owner.ok("define-persona", {"name": "critic", "persona": "You critique harder.", "role": "boss"})
    again = await owner.ok("show-persona", {"name": "critic"})
    assert (again["persona"], again["role"]) == ("You critique harder.", "reviewer")

    # spawn resolves the persona by its name (the ref), or an explicit config file instead;
    # identity names the seat
    acc = await owner.ok("spawn", {"name": "unused-ref", "config": "critic", "identity": "c1"})
    assert acc["name"] == "c1"
    row = await owner.ok("inspect", {"name": "c1"})
    assert (row["agent"], row["role"], row["model"]) == ("dashboard", "reviewer", "m1")
    await owner.ok("spawn", {"name": "bash"})
    assert (await owner.ok("inspect", {"name": "bash"}))["agent"] == "bash"
    r = await owner.call("spawn", {"name": "c2", "config": "ghost"})
    assert r["error"]["code"] == "failed-precondition" and "ghost" in r["error"]["message"]


# ---- spawn: acceptance, progress to the caller, goal-result -------------------------------------


async def test_spawn_is_an_action_whose_facts_reach_only_its_caller(nc, space, manager):
    raw, stranger = Raw(nc, space), Raw(nc, space)
    goal_id = "goal-" + new_nonce()[:20]
    facts: list = []

    async def cb(msg):
        facts.append((msg.subject, json.loads(msg.data)))

    sub = await nc.subscribe(goal_progress_pattern(space, MANAGER, raw.caller, goal_id), cb=cb)
    await nc.flush()
    acc = await raw.ok("spawn", {"name": "echo", "role": "lead", "prompt": "hello"}, request_id=goal_id)
    assert acc["goalId"] == goal_id and acc["name"] == "echo" and acc["readinessDeadlineMs"] == 30_000
    assert acc["executor"]["epoch"] == manager.epoch
    await until(lambda: any(f["phase"] == "terminal" for _, f in facts), 10, what="the terminal fact")
    await sub.unsubscribe()
    phases = [f["phase"] for _, f in facts]
    assert phases == ["presence", "terminal"]
    term = facts[-1][1]
    assert term["state"] == "succeeded" and term["goalId"] == goal_id
    assert term["data"] == {"name": "echo", "agent": "echo-line", "id": acc["actor"], "mode": "pty",
                            "lifecycleUid": acc["uid"], "role": "lead"}
    subj = facts[-1][0].split(".")
    assert subj[4:6] == [manager.instance_id, str(manager.epoch)]
    # goal-result: the caller's own terminal; a stranger learns nothing
    assert (await raw.ok("goal-result", {"goalId": goal_id}))["result"] == term
    assert await stranger.ok("goal-result", {"goalId": goal_id}) == {"goalId": goal_id}
    screen = lambda: "\n".join(manager.seats["echo"].pty.mirror.text_lines())  # noqa: E731
    await until(lambda: "echo: hello" in screen(), 10, what="the initial prompt typed")
    # the persona-named seat auto-numbers; a pinned name collides
    assert (await raw.ok("spawn", {"name": "echo"}))["name"] == "echo_2"
    r = await raw.call("spawn", {"name": "nope"})  # the persona file must exist
    assert r["error"]["code"] == "failed-precondition" and ".cotal/agents/nope.md" in r["error"]["message"]
    r = await raw.call("spawn", {"name": "echo", "identity": "alice"})
    assert r["error"]["code"] == "failed-precondition" and r["error"]["message"] == 'agent "alice" already running'
    # owner mode reaches the caller's own child only
    t = seat_target(manager, "echo")
    r = await stranger.call("input", {"text": "x"}, target=t, mode="owner")
    assert r["error"]["code"] == "permission-denied"
    assert (await raw.ok("input", {"text": "x", "enter": False}, target=t, mode="owner"))["bytes"] == 1
    # a despawned seat is no live target any more
    await raw.ok("despawn", {}, target=t)
    r = await raw.call("attach", None, target=t)
    assert r["error"]["code"] == "expired"
