"""§13 endpoint plane: canonical digests, subjects, envelope checks, describe + contracts, bind fence."""

from __future__ import annotations

import json

import pytest

from attach.control.endpoint import EndpointClient, fetch_artifact
from meshview.wire.canonical import VOID_SCHEMA, canonical_bytes, closure_digest, digest
from meshview.wire.endpoint import (
    AuthzTarget,
    Caller,
    eps_subject,
    parse_reply,
    parse_request,
    reply_subject,
    request_subject,
)
from meshview.wire.envelope import (
    BIND_REFUSED,
    EndpointError,
    build_request,
    parse_reply_body,
    validate_request,
)
from meshview.wire.outbound import mint_lifecycle_uid
from cotal_tui.demo.manager import DemoManager, SeatSpec

CALLER = Caller("local", "abc123", "a" * 26)
D = "sha256:" + "0" * 64


def test_canonical_json_orders_keys_and_strips_space():
    assert canonical_bytes({"b": 1, "a": [True, None, "é"], "A": {}}) == '{"A":{},"a":[true,null,"é"],"b":1}'.encode()
    assert canonical_bytes({"\u00e9": 1, "z": 2}) == '{"z":2,"é":1}'.encode()  # UTF-16 order
    with pytest.raises(ValueError):
        canonical_bytes({"x": 1.5})


def test_void_closure_is_a_manifest_over_the_void_schema():
    root = digest(VOID_SCHEMA)
    assert root == "sha256:" + __import__("hashlib").sha256(b'{"type":"null"}').hexdigest()
    assert closure_digest(VOID_SCHEMA) == digest({"v": 1, "root": root, "members": []})


def test_request_and_reply_subjects_round_trip():
    s = request_subject("main", "manager", "ps", CALLER, "n" * 22)
    assert s == "cotal.main.ep.one.manager.ps.local.abc123." + "a" * 26 + "." + "n" * 22
    p = parse_request(s)
    assert p and p.route == "one" and p.command == "ps" and p.target is None and p.caller == CALLER
    iid = mint_lifecycle_uid()
    s = request_subject("main", "manager", "attach", CALLER, "n" * 22, route="inst", instance_id=iid,
                        target=AuthzTarget("any", "local"))
    p = parse_request(s)
    assert p and p.instance_id == iid and p.target == AuthzTarget("any", "local") and p.caller == CALLER
    r = reply_subject("main", "manager", iid, 3, CALLER, "n" * 22)
    pr = parse_reply(r)
    assert pr and (pr.instance_id, pr.epoch, pr.nonce) == (iid, 3, "n" * 22)
    assert eps_subject("main", "manager", "sid_-1", 3, "in") == "cotal.main.eps.manager.sid_-1.3.in"


@pytest.mark.parametrize("bad", [
    dict(nonce="short"), dict(nonce="n" * 22 + "\n"), dict(command="Bad"),
])
def test_builders_fail_loud(bad):
    kw = dict(command="ps", nonce="n" * 22)
    kw.update(bad)
    with pytest.raises(ValueError):
        request_subject("main", "manager", kw["command"], CALLER, kw["nonce"])


def test_parser_rejects_wrong_arity():
    assert parse_request("cotal.main.ep.one.manager.ps.local.abc") is None
    assert parse_reply("cotal.main.ep.reply.manager.x.notanepoch.a.b.c.n") is None


def _req(**over):
    env = build_request(endpoint="manager", command="ps", caller=CALLER, input_digest=D, output_digest=D)
    env.update(over)
    return json.dumps(env).encode()


PS = parse_request(request_subject("main", "manager", "ps", CALLER, "n" * 22))


@pytest.mark.parametrize("body,code", [
    (b"nope", "bad-request"),
    (_req(v=2), "unsupported-version"),
    (_req(op={"endpoint": "manager", "command": "ps"}), "contract-mismatch"),
    (_req(op={"endpoint": "manager", "command": "status", "inputDigest": D, "outputDigest": D}), "op-mismatch"),
    (_req(**{"class": "record"}), "bad-request"),
    (_req(deadlineMs=0), "bad-request"),
    (_req(target={"owner": "local", "actor": "x", "lifecycleUid": "a" * 26}), "target-mismatch"),
    (_req(**{"from": {"id": "local.someoneelse", "name": "x"}}), "sender-mismatch"),
    (_req(args=[1]), "bad-request"),
], ids=["not-json", "version", "contract", "op-digests", "class", "deadline", "target", "sender",
        "args"])
def test_envelope_refusals_carry_catalog_codes(body, code):
    with pytest.raises(EndpointError) as e:
        validate_request(PS, body)
    assert e.value.code == code and e.value.outcome == "not-executed"


def test_describe_carries_no_digests_and_no_bind():
    d = parse_request(request_subject("main", "manager", "describe", CALLER, "n" * 22))
    env = build_request(endpoint="manager", command="describe", caller=CALLER)
    assert "inputDigest" not in env["op"]
    validate_request(d, json.dumps(env).encode())
    env["bind"] = {"instanceId": "a" * 26, "epoch": 1}
    with pytest.raises(EndpointError) as e:
        validate_request(d, json.dumps(env).encode())
    assert e.value.code == "bad-request"


def test_reply_parse_rules():
    assert parse_reply_body(b'{"v":1,"id":"x","ok":true,"data":1}')["data"] == 1
    for bad in (b'{"v":1,"id":"x","ok":false}', b'{"v":1,"id":"x","ok":false,"error":{"code":"nope","message":""}}',
                b'{"v":1,"id":"x","ok":true,"error":{"code":"internal","message":""}}',
                b'{"v":1,"id":"x","ok":false,"error":{"code":"internal","message":"","outcome":"maybe"}}'):
        with pytest.raises(ValueError):
            parse_reply_body(bad)


@pytest.fixture
async def manager(nc, space):
    m = DemoManager(nc, space, [SeatSpec("alice", "local.alice")])
    await m.start()
    yield m
    await m.stop()


async def test_describe_resolves_verified_contracts_and_attributes_from_the_subject(nc, space, manager):
    ep = EndpointClient(nc, space)
    res = await ep.resolve()
    assert (res.instance_id, res.epoch) == (manager.instance_id, manager.epoch)
    assert {"ps", "inspect", "status", "attach"} <= set(res.commands)
    att = res.commands["attach"]
    assert att.targeted and set(att.modes) == {"owner", "any"}
    assert att.input_digest == closure_digest(VOID_SCHEMA)
    # the stored bytes verify against their digest
    doc = await fetch_artifact(nc, space, att.input_digest)
    assert doc == {"v": 1, "root": digest(VOID_SCHEMA), "members": []}
    status = (await ep.call("status")).unwrap()
    assert status["instanceId"] == manager.instance_id and status["agentCount"] == 1
    rows = (await ep.call("ps", instance_id=manager.instance_id)).unwrap()
    assert [r["name"] for r in rows] == ["alice"] and rows[0]["status"] == "running"


async def test_tampered_artifact_is_refused(nc, space, manager):
    from meshview.wire.endpoint import epc_subject

    fake = "sha256:" + "ab" * 32
    await nc.jetstream().publish(epc_subject(space, fake), b'{"v":1}')
    with pytest.raises(EndpointError) as e:
        await fetch_artifact(nc, space, fake)
    assert e.value.code == "contract-invalid"


async def test_bind_fence_refuses_before_effect(nc, space, manager):
    ep = EndpointClient(nc, space)
    r = await ep.call("ps", bind={"instanceId": manager.instance_id, "epoch": manager.epoch + 5})
    assert not r.ok and r.error.code == "expired" and r.error.outcome == "not-executed"
    assert r.error.details[0]["kind"] == BIND_REFUSED
    r = await ep.call("ps", bind={"instanceId": mint_lifecycle_uid(), "epoch": 1})
    assert not r.ok and r.error.code == "failed-precondition"
    r = await ep.call("ps", bind={"instanceId": manager.instance_id, "epoch": manager.epoch})
    assert r.ok


async def test_inspect_not_found_and_unknown_target(nc, space, manager):
    ep = EndpointClient(nc, space)
    r = await ep.call("inspect", {"name": "nobody"})
    assert r.error.code == "not-found"
    row = (await ep.call("inspect", {"name": "alice"})).unwrap()
    r = await ep.call("attach", target={"owner": "local", "actor": "alice", "lifecycleUid": mint_lifecycle_uid()})
    assert r.error.code == "expired"  # a stale incarnation, refused before anything is minted
    assert manager.live_sessions == 0
    r = await ep.call("attach", target={"owner": "local", "actor": row["id"], "lifecycleUid": row["lifecycleUid"]})
    assert r.ok and r.data["grant"]["serving"] == {"instanceId": manager.instance_id, "epoch": manager.epoch}


async def test_foreign_reply_on_our_rail_is_ignored(nc, space, manager):
    """A reply with a wrong id on our nonce, or on another nonce, never satisfies the call."""
    ep = EndpointClient(nc, space)
    await ep.resolve()
    real_publish = nc.publish
    injected = []

    async def spy(subject, payload=b"", **kw):
        await real_publish(subject, payload, **kw)
        if ".ep.one.manager.status." in subject:
            nonce = subject.rsplit(".", 1)[1]
            bad = reply_subject(space, "manager", mint_lifecycle_uid(), 9, ep.caller, nonce)
            await real_publish(bad, json.dumps({"v": 1, "id": "someone-else", "ok": True, "data": "forged"}).encode())
            injected.append(bad)

    nc.publish = spy
    try:
        r = await ep.call("status")
    finally:
        nc.publish = real_publish
    assert injected and r.ok and r.data != "forged" and r.instance_id == manager.instance_id


async def test_presence_lease_and_records(nc, space, manager):
    js = nc.jetstream()
    pres = json.loads((await (await js.key_value(f"cotal_presence_{space}")).get(f"local.{manager.actor}")).value)
    assert pres["card"]["kind"] == "endpoint" and pres["card"]["role"] == "manager"
    lease = json.loads((await (await js.key_value(f"cotal_manager_{space}")).get(f"lease.{manager.instance_id}")).value)
    assert lease["instanceId"] == manager.instance_id and lease["runtime"] == "pty"
    rec = await js.key_value(f"cotal_records_{space}")
    spec = json.loads((await rec.get(f"svc.manager.{manager.instance_id}.spec")).value)
    status = json.loads((await rec.get(f"svc.manager.{manager.instance_id}.status")).value)
    assert spec["endpoint"] == "manager" and spec["clusterDigests"]
    # a reference manager writes ready | exited | escalated (there is no "serving" state)
    assert status["epoch"] == manager.epoch and status["state"] == "ready"
    assert isinstance(status.get("observedSpecRevision"), int)


def test_exact_mode_pins_the_whole_target_triple():
    """§13.2 ``exact``: ``exact.<tOwner>.<tActor>.<tUid>``, three target tokens like ``handle``."""
    iid, uid = mint_lifecycle_uid(), mint_lifecycle_uid()
    t = AuthzTarget("exact", "local", "alice", uid)
    s = request_subject("main", "manager", "attach", CALLER, "n" * 22, target=t)
    assert s == f"cotal.main.ep.one.manager.attach.exact.local.alice.{uid}.local.abc123.{'a' * 26}.{'n' * 22}"
    p = parse_request(s)
    assert p and p.target == t and p.caller == CALLER and p.nonce == "n" * 22
    s = request_subject("main", "manager", "attach", CALLER, "n" * 22, route="inst", instance_id=iid, target=t)
    p = parse_request(s)
    assert p and p.instance_id == iid and p.target == t and p.caller == CALLER
    # a target block one token short has no sender: not ours
    assert parse_request(f"cotal.main.ep.one.manager.attach.exact.local.alice.local.abc123.{'a' * 26}.{'n' * 22}") is None
    with pytest.raises(ValueError):
        AuthzTarget("exact", "local", "alice", "not-a-uid").tokens()


def test_exact_mode_body_target_must_equal_the_subject_triple():
    uid = mint_lifecycle_uid()
    s = request_subject("main", "manager", "attach", CALLER, "n" * 22, target=AuthzTarget("exact", "local", "alice", uid))
    p = parse_request(s)

    def env(target):
        e = build_request(endpoint="manager", command="attach", caller=CALLER, input_digest=D, output_digest=D,
                          target=target)
        return json.dumps(e).encode()

    assert validate_request(p, env({"owner": "local", "actor": "alice", "lifecycleUid": uid}))["target"]["actor"] == "alice"
    for bad in ({"owner": "local", "actor": "bob", "lifecycleUid": uid},
                {"owner": "local", "actor": "alice", "lifecycleUid": mint_lifecycle_uid()}):
        with pytest.raises(EndpointError) as e:
            validate_request(p, env(bad))
        assert e.value.code == "target-mismatch" and e.value.outcome == "not-executed"
    with pytest.raises(EndpointError) as e:
        validate_request(p, env(None))
    assert e.value.code == "target-mismatch"


def test_a_bind_refusal_is_honoured_only_when_it_is_coherent():
    """SPEC §13.2/§13.3: attribution comes from the reply subject. A refusal to an unbound
    request, one from exactly the bound incarnation, one that names another bind or another
    refusing incarnation than the subject, is incoherent (the caller answers ``internal``)."""
    from meshview.wire.envelope import bind_refusal_incoherence, bind_refused_detail, refused_before_effect

    iid, other = mint_lifecycle_uid(), mint_lifecycle_uid()
    bound = {"instanceId": iid, "epoch": 2}

    def refusal(detail, outcome="not-executed"):
        return EndpointError("expired", "not me", details=[detail], outcome=outcome)

    ok = refusal(bind_refused_detail("manager", "attach", bound, (iid, 3)))
    assert bind_refusal_incoherence(ok, bound, (iid, 3)) is None and refused_before_effect(ok)
    assert not refused_before_effect(refusal(ok.details[0], outcome=None))  # absent = unknown: no re-issue
    assert not refused_before_effect(refusal(ok.details[0], outcome="executed"))
    assert bind_refusal_incoherence(ok, None, (iid, 3))  # no bind was carried
    assert bind_refusal_incoherence(refusal(bind_refused_detail("manager", "attach", bound, (iid, 2))),
                                    bound, (iid, 2))  # "not me", says the very incarnation bound
    assert bind_refusal_incoherence(refusal(bind_refused_detail("manager", "attach", {"instanceId": other, "epoch": 2},
                                                                (iid, 3))), bound, (iid, 3))  # another bind
    assert bind_refusal_incoherence(ok, bound, (other, 3))  # servedBy contradicts the subject
    assert bind_refusal_incoherence(refusal({"kind": BIND_REFUSED}), bound, (iid, 3))  # nothing to derive
    assert bind_refusal_incoherence(EndpointError("expired", "gone", outcome="not-executed"), bound, (iid, 2)) is None
