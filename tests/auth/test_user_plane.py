"""The user-auth plane stand-in (``cotal_tui.demo.userauth``) on a real operator-mode broker with
``auth_callout``: the ledger read the manager uses, the exchange's views, faces and refusals, the
bearer's claims and expiry, the callout's refusals and mints, the session redemption checked at
the exchange and again at the callout, and the accepted row written for an interactive
``manager-caller`` connection (and for no other)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import nats
import pytest
from conftest import until
from support.userplane import post, user_plane  # noqa: F401

from cotal_tui.demo.userauth.bearer import MAX_TOKEN_TTL_S, validate_bearer
from cotal_tui.demo.userauth.jws import b64url_decode
from cotal_tui.demo.userauth.ledger import read_actor
from meshview.link.auth import user_nonce
from meshview.wire.endpoint import MANAGER, Caller, new_nonce, request_subject
from meshview.wire.issued import accepted_token, direct_get_subject, parse_row
from meshview.wire.names import bucket_names
from meshview.wire.outbound import mint_lifecycle_uid


def claims(token: str) -> dict:
    return json.loads(b64url_decode(token.split(".")[1]))


async def exchange(up, body: dict, *, loopback: bool = False, headers: dict | None = None):
    url = (up.loopback_url if loopback else up.exchange_url) + "/exchange"
    h = dict(headers or {})
    if loopback and "authorization" not in h:
        h["authorization"] = f"Bearer {up.cap}"
    return await post(url, body, h)


async def refused_connect(up, bearer: str, needle: str, **kw) -> str:
    before = len(up.plane.refusals())
    with pytest.raises(Exception):
        nc = await up.connect(bearer, **kw)
        await nc.close()
    got = await until(lambda: [r for r in up.plane.refusals()[before:] if needle in r], 5, f"refusal {needle!r}")
    return got[0]


async def register_manager(up, *, owner: str = "local", epoch: int = 1) -> str:
    """A manager registration as the demo manager writes it (svc spec + ready status)."""
    iid = mint_lifecycle_uid()
    nc = await up.service_nc()
    try:
        kv = await nc.jetstream().key_value(bucket_names(up.space).records)
        rev = await kv.put(f"svc.manager.{iid}.spec", json.dumps(
            {"endpoint": MANAGER, "owner": owner, "clusterDigests": [], "protocol": {"v": 1}}).encode())
        await kv.put(f"svc.manager.{iid}.status", json.dumps(
            {"epoch": epoch, "state": "ready", "observedSpecRevision": rev}).encode())
    finally:
        await nc.close()
    return iid


# ---- the ledger (CONTRACTS item 4) -----------------------------------------------------------


async def test_read_actor_sees_the_current_row_and_a_revoke(user_plane):
    u = user_plane.add_user("lena", ["spawn", "admin"])
    nc = await user_plane.service_nc()
    try:
        row = await read_actor(nc, user_plane.space, u.owner, "cli")
        assert row is not None and row.scopes == frozenset({"spawn", "admin"}) and row.interactive
        assert len(row.lifecycle_uid) >= 26
        assert await read_actor(nc, user_plane.space, u.owner, "other") is None
        assert await read_actor(nc, "nosuchspace", u.owner, "cli") is None
        user_plane.plane.revoke(u.owner, "cli")
        assert await read_actor(nc, user_plane.space, u.owner, "cli") is None
    finally:
        await nc.close()


# ---- the exchange: faces, views, refusals, bearer claims -------------------------------------


async def test_a_plain_exchange_mints_the_reference_bearer(user_plane):
    u = user_plane.add_user("ada", ["spawn"])
    status, body = await exchange(user_plane, {"idpToken": user_plane.idp_token("ada"), "actor": "cli"})
    assert status == 200, body
    assert body["owner"] == u.owner and u.owner.startswith("u_") and len(u.owner) == 28
    hdr = json.loads(b64url_decode(body["token"].split(".")[0]))
    c = claims(body["token"])
    assert hdr["alg"] == "EdDSA"
    assert c["iss"] == f"urn:cotal:auth:{user_plane.space}" and c["aud"] == user_plane.space
    assert c["sub"] == u.owner and c["ver"] == 1 and c["nbf"] == c["iat"]
    assert 0 < c["exp"] - c["iat"] <= MAX_TOKEN_TTL_S and c["exp"] == body["exp"]
    act = c["act"]
    assert act["owner"] == u.owner and act["actor"] == "cli" and act["scope"] == ["spawn"]
    assert act["lifecycleUid"] and act["credentialId"] and "view" not in act
    # it verifies against the published JWKS (and only that key)
    status, jwks = await post(user_plane.exchange_url + "/jwks", None, method="GET")
    assert status == 200 and jwks["keys"][0]["kty"] == "OKP" and jwks["keys"][0]["crv"] == "Ed25519"
    assert validate_bearer(body["token"], user_plane.plane.issuer).owner == u.owner


async def test_views_by_face_and_scope(user_plane):
    user_plane.add_user("op", ["admin", "spawn", "supervise"])
    user_plane.add_user("joe", ["spawn"])
    op, joe = user_plane.idp_token("op"), user_plane.idp_token("joe")
    # the public face never serves the operator views, whatever the scope
    for view in ("purger", "admin", "deployer", "manager-service"):
        s, b = await exchange(user_plane, {"idpToken": op, "actor": "cli", "view": view})
        assert s == 403 and "loopback operator surface" in b["error"], (view, b)
    # the loopback face without its capability
    s, b = await exchange(user_plane, {"idpToken": op, "actor": "cli", "view": "purger"}, loopback=True,
                          headers={"authorization": "Bearer wrong"})
    assert s == 401 and "capability" in b["error"]
    # with it: the view needs its ledger scope
    for view, need in (("purger", "admin"), ("admin", "admin"), ("channel-purger", "admin")):
        s, b = await exchange(user_plane, {"idpToken": joe, "actor": "cli", "view": view}, loopback=True)
        assert s == 401 and f'needs scope "{need}"' in b["error"], b
        s, b = await exchange(user_plane, {"idpToken": op, "actor": "cli", "view": view}, loopback=True)
        assert s == 200 and claims(b["token"])["act"]["view"] == view
    s, b = await exchange(user_plane, {"idpToken": joe, "actor": "cli", "view": "deployer"}, loopback=True)
    assert s == 200 and claims(b["token"])["act"]["view"] == "deployer"  # deployer needs spawn
    s, b = await exchange(user_plane, {"idpToken": op, "actor": "cli", "view": "manager-service"}, loopback=True)
    assert s == 401 and "not a bearer profile" in b["error"]
    # channel-purger and channel-writer are public, admin-gated
    s, b = await exchange(user_plane, {"idpToken": op, "actor": "cli", "view": "channel-purger"})
    assert s == 200
    s, b = await exchange(user_plane, {"idpToken": joe, "actor": "cli", "view": "channel-writer"})
    assert s == 401 and 'needs scope "admin"' in b["error"]
    s, b = await exchange(user_plane, {"idpToken": op, "actor": "cli", "view": "nonsense"})
    assert s == 403


async def test_request_shape_and_idp_refusals(user_plane):
    user_plane.add_user("kim", ["spawn"])
    url = user_plane.exchange_url + "/exchange"
    tok = user_plane.idp_token("kim")
    assert (await post(url, {}, {"content-type": "text/plain"}))[0] == 415
    s, b = await post(url, None, raw=b'{"pad":"' + b"x" * (64 * 1024) + b'"}')
    assert s == 413 and b["error"] == "request body too large (maximum 65536 bytes)"
    assert (await post(url, {"idpToken": tok, "actor": "cli"}, {"origin": "https://evil.example"}))[0] == 403
    assert (await post(url, None, method="GET"))[0] == 405
    assert (await post(user_plane.exchange_url + "/ledger", None, method="GET"))[0] == 404
    s, b = await post(url, {"actor": "cli"})
    assert s == 400 and "exchange needs" in b["error"]
    s, b = await post(url, {"idpToken": tok, "actor": "cli", "view": "session-caller"})
    assert s == 400 and "come together" in b["error"]
    s, b = await post(url, {"idpToken": tok, "actor": "cli", "managerInstanceId": "a" * 26})
    assert s == 400 and "manager-caller" in b["error"]
    # an expired IdP proof, a proof from another key, an ungranted user, an ungranted actor
    s, b = await post(url, {"idpToken": user_plane.idp_token("kim", ttl_s=-60), "actor": "cli"})
    assert s == 401 and "exp" in b["error"]
    from cotal_tui.demo.userauth.idp import IdentityProvider
    forged = IdentityProvider(issuer=user_plane.plane.idp.issuer, audience=user_plane.plane.idp.audience)
    s, b = await post(url, {"idpToken": forged.token("kim"), "actor": "cli"})
    assert s == 401 and "signature" in b["error"]
    s, b = await post(url, {"idpToken": user_plane.plane.idp.token("stranger"), "actor": "cli"})
    assert s == 401 and "not granted" in b["error"]
    s, b = await post(url, {"idpToken": tok, "actor": "laptop"})
    assert s == 401 and "not granted" in b["error"]
    assert tok not in json.dumps(user_plane.plane.log)  # refusals never echo a token


# ---- the callout -------------------------------------------------------------------------------


async def test_a_plain_bearer_connects_as_an_agent_scoped_to_itself(user_plane):
    u = user_plane.add_user("noor", ["spawn"])
    s, b = await exchange(user_plane, {"idpToken": user_plane.idp_token("noor"), "actor": "cli"})
    errors: list[str] = []

    async def on_error(e):
        errors.append(str(e))

    nc = await user_plane.connect(b["token"], error_cb=on_error)
    try:
        info = await nc.jetstream().stream_info(f"CHAT_{user_plane.space}")  # history reads: allowed
        assert info.config.name == f"CHAT_{user_plane.space}"
        await nc.publish(f"cotal.{user_plane.space}.chat.{u.owner}.cli.general", b"{}")  # as itself
        await nc.publish(f"cotal.{user_plane.space}.chat.u_{'z' * 26}.cli.general", b"{}")  # as another
        await nc.flush()
        await until(lambda: any("permissions violation" in e.lower() for e in errors), 5, "a violation")
        assert all(f"u_{'z' * 26}" in e for e in errors if "violation" in e.lower())
    finally:
        await nc.close()


async def test_callout_refuses_a_bearer_without_a_lifecycle_claim(user_plane):
    u = user_plane.add_user("omar", ["spawn"])
    issuer = user_plane.plane.issuer
    c = {"iss": issuer.issuer, "aud": user_plane.space, "sub": u.owner, "iat": int(time.time()),
         "nbf": int(time.time()), "exp": int(time.time()) + 60, "ver": 1,
         "act": {"owner": u.owner, "actor": "cli", "scope": ["spawn"]}}
    await refused_connect(user_plane, issuer.key.sign(c), "no lifecycle claim")


async def test_callout_rereads_the_ledger_row(user_plane):
    u = user_plane.add_user("pia", ["spawn", "admin"])
    s, b = await exchange(user_plane, {"idpToken": user_plane.idp_token("pia"), "actor": "cli"})
    nc = await user_plane.connect(b["token"])  # granted: connects
    await nc.close()
    row = user_plane.plane.run(user_plane.plane.read_actor(u.owner, "cli"))
    # the scope narrowed under the same incarnation: the bearer's "admin" is no longer granted
    user_plane.plane.grant(u.owner, "cli", ["spawn"], lifecycle_uid=row.lifecycle_uid)
    await refused_connect(user_plane, b["token"], 'bearer scope "admin" exceeds')
    # re-granted (a new incarnation): the old bearer names the predecessor
    user_plane.plane.grant(u.owner, "cli", ["spawn", "admin"])
    await refused_connect(user_plane, b["token"], "not the actor's current incarnation")
    # revoked: no row at all
    s, b = await exchange(user_plane, {"idpToken": user_plane.idp_token("pia"), "actor": "cli"})
    user_plane.plane.revoke(u.owner, "cli")
    await refused_connect(user_plane, b["token"], "not (or no longer) granted")
    s, b = await exchange(user_plane, {"idpToken": user_plane.idp_token("pia"), "actor": "cli"})
    assert s == 401 and "not granted" in b["error"]


async def test_a_bearer_expires_and_a_re_exchange_connects_again(user_plane):
    user_plane.add_user("quin", ["spawn"])
    s, b = await exchange(user_plane, {"idpToken": user_plane.idp_token("quin"), "actor": "cli", "ttlSec": 2})
    assert s == 200 and claims(b["token"])["exp"] - claims(b["token"])["iat"] == 2
    closed = asyncio.Event()

    async def on_closed():
        closed.set()

    nc = await user_plane.connect(b["token"], closed_cb=on_closed)
    # the broker JWT dies with the bearer: the live connection ends at its exp
    await asyncio.wait_for(closed.wait(), 10)
    assert not nc.is_connected
    await refused_connect(user_plane, b["token"], "expired")
    s, b2 = await exchange(user_plane, {"idpToken": user_plane.idp_token("quin"), "actor": "cli"})
    assert s == 200 and b2["token"] != b["token"]
    nc = await user_plane.connect(b2["token"])
    await nc.close()


# ---- manager-caller: the pinned instance and the accepted row ---------------------------------


async def test_manager_caller_is_pinned_and_issued_on_ep_v1(user_plane):
    user_plane.add_user("rae", ["spawn"])
    tok = user_plane.idp_token("rae")
    user_plane.plane.local_manager = None
    s, b = await exchange(user_plane, {"idpToken": tok, "actor": "cli", "view": "manager-caller"})
    assert s == 401 and "no manager candidate" in b["error"]
    iid = await register_manager(user_plane)
    other = await register_manager(user_plane, owner=f"u_{'y' * 26}")
    user_plane.plane.local_manager = iid
    s, b = await exchange(user_plane, {"idpToken": tok, "actor": "cli", "view": "manager-caller"})
    assert s == 200 and b["managerInstanceId"] == iid
    s, b2 = await exchange(user_plane, {"idpToken": tok, "actor": "cli", "view": "manager-caller",
                                        "managerInstanceId": other})
    assert s == 401 and "not this owner's" in b2["error"]
    act = claims(b["token"])["act"]
    assert act["view"] == "manager-caller" and act["managerInstanceId"] == iid
    conn_id = user_nonce()
    errors: list[str] = []

    async def on_error(e):
        errors.append(str(e))

    infra = await user_plane.service_nc()
    nc = await user_plane.connect(b["token"], name=conn_id, error_cb=on_error)
    try:
        # the accepted row names this connection's own triple; the caller reads it itself
        token = accepted_token(conn_id)
        msg = await nc.request(direct_get_subject(user_plane.space, token), b"", timeout=3)
        ref = parse_row(msg.data, space=user_plane.space, triple=(act["owner"], "cli", act["lifecycleUid"]))
        caller = Caller(act["owner"], "cli", act["lifecycleUid"])
        got: list[str] = []

        async def seen(m):
            got.append(m.subject)

        sub = await infra.subscribe(f"cotal.{user_plane.space}.ep.>", cb=seen)
        await infra.flush()
        v1 = request_subject(user_plane.space, MANAGER, "ps", caller, new_nonce(), route="inst",
                             instance_id=iid, generation=ref.generation)
        legacy = request_subject(user_plane.space, MANAGER, "ps", caller, new_nonce(), route="inst",
                                 instance_id=iid)
        pinned_away = request_subject(user_plane.space, MANAGER, "ps", caller, new_nonce(),
                                      route="inst", instance_id=other, generation=ref.generation)
        for subj in (v1, legacy, pinned_away):
            await nc.publish(subj, b"{}")
        await nc.flush()
        await until(lambda: v1 in got, 15,
                    lambda: f"the v1 request to the pinned instance (the service saw {got}, the "
                            f"caller's errors {errors}, connected {nc.is_connected})")
        await until(lambda: sum("violation" in e.lower() for e in errors) >= 2, 15,
                    "two violations")
        assert legacy not in got and pinned_away not in got
        await sub.unsubscribe()
    finally:
        await nc.close()
        await infra.close()
    assert user_plane.plane.issued[-1] == ref
    # a reconnect under the same connId with the same ceiling keeps the generation
    nc = await user_plane.connect(b["token"], name=conn_id)
    msg = await nc.request(direct_get_subject(user_plane.space, accepted_token(conn_id)), b"", timeout=3)
    assert parse_row(msg.data, space=user_plane.space).generation == ref.generation
    await nc.close()
    # the ceiling changed (a scope added under the same incarnation): the same connId is refused
    row = user_plane.plane.run(user_plane.plane.read_actor(act["owner"], "cli"))
    user_plane.plane.grant(act["owner"], "cli", ["spawn", "run"], lifecycle_uid=row.lifecycle_uid)
    s, b3 = await exchange(user_plane, {"idpToken": tok, "actor": "cli", "view": "manager-caller"})
    await refused_connect(user_plane, b3["token"], "ceiling changed", name=conn_id)
    nc = await user_plane.connect(b3["token"])  # a new nonce: a new row, a new generation
    await nc.close()
    assert user_plane.plane.issued[-1].generation != ref.generation


async def test_no_accepted_row_for_a_plain_bearer_or_a_managed_agent(user_plane):
    u = user_plane.add_user("sol", ["spawn"])
    iid = user_plane.plane.local_manager or await register_manager(user_plane)
    user_plane.plane.local_manager = iid
    before = len(user_plane.plane.issued)
    s, b = await exchange(user_plane, {"idpToken": user_plane.idp_token("sol"), "actor": "cli"})
    conn_id = user_nonce()
    nc = await user_plane.connect(b["token"], name=conn_id)
    await nc.close()
    secret = user_plane.plane.grant_agent(u.owner, "worker", lifecycle_uid=mint_lifecycle_uid(),
                                          parent=f"{u.owner}.cli")
    s, b = await exchange(user_plane, {"owner": u.owner, "actor": "worker", "actorToken": secret,
                                       "view": "manager-caller"})
    assert s == 200 and b["managerInstanceId"] == iid
    s, b2 = await exchange(user_plane, {"owner": u.owner, "actor": "worker", "actorToken": "wrong" * 8})
    assert s == 401
    s, b2 = await exchange(user_plane, {"owner": u.owner, "actor": "worker", "actorToken": secret,
                                        "view": "channel-writer"})
    assert s == 400 and "never mints elevated views" in b2["error"]
    agent_conn = user_nonce()
    nc = await user_plane.connect(b["token"], name=agent_conn)
    await nc.close()
    assert len(user_plane.plane.issued) == before
    infra = await user_plane.service_nc()
    try:
        for cid in (conn_id, agent_conn):
            msg = await infra.request(direct_get_subject(user_plane.space, accepted_token(cid)), b"", timeout=3)
            assert msg.headers and msg.headers.get("Status") == "404"
    finally:
        await infra.close()


# ---- session redemption: at the exchange and at the callout -----------------------------------


async def _session_row(up, iid: str, *, holder: str, uid: str, state: str = "active", epoch: int = 1):
    sid = user_nonce() + "sessionxx"
    exp = int(time.time() * 1000) + 600_000
    grant = {"sessionId": sid, "endpoint": MANAGER, "sig": "sig-" + sid, "serving": {"instanceId": iid, "epoch": epoch}}
    row = {"sessionId": sid, "endpoint": MANAGER, "serving": {"instanceId": iid, "epoch": epoch},
           "holder": {"principal": holder, "lifecycleUid": uid}, "grantSig": grant["sig"], "state": state, "exp": exp}
    nc = await up.service_nc()
    try:
        js = nc.jetstream()
        from nats.js.api import KeyValueConfig
        try:
            kv = await js.key_value(f"cotal_sessions_{up.space}")
        except Exception:
            kv = await js.create_key_value(config=KeyValueConfig(bucket=f"cotal_sessions_{up.space}", history=1))
        await kv.put(f"session.{sid}", json.dumps(row).encode())
    finally:
        await nc.close()
    return grant, row


async def test_session_caller_redemption(user_plane):
    u = user_plane.add_user("tao", ["spawn"])
    user_plane.add_user("uma", ["spawn"])
    iid = await register_manager(user_plane)
    user_plane.plane.local_manager = iid
    row = user_plane.plane.run(user_plane.plane.read_actor(u.owner, "cli"))
    grant, srow = await _session_row(user_plane, iid, holder=f"{u.owner}.cli", uid=row.lifecycle_uid)
    body = {"idpToken": user_plane.idp_token("tao"), "actor": "cli", "view": "session-caller", "sessionGrant": grant}
    s, b = await exchange(user_plane, body)
    assert s == 200, b
    sess = claims(b["token"])["act"]["session"]
    assert sess == {"endpoint": MANAGER, "sessionId": grant["sessionId"], "epoch": 1, "exp": srow["exp"] // 1000}
    # another owner presenting the same grant: issued to someone else
    s, b2 = await exchange(user_plane, {**body, "idpToken": user_plane.idp_token("uma")})
    assert s == 401 and b2["error"].startswith("session redemption refused:") and "was issued to" in b2["error"]
    # a forged signature reusing the session id
    s, b2 = await exchange(user_plane, {**body, "sessionGrant": {**grant, "sig": "forged"}})
    assert s == 401 and "not the one this session was redeemed with" in b2["error"]
    # the callout mints the session's rails, bound to the session's expiry
    nc = await user_plane.connect(b["token"])
    await nc.close()
    # the session closes between exchange and connect: the callout's re-check refuses
    nc2 = await user_plane.service_nc()
    kv = await nc2.jetstream().key_value(f"cotal_sessions_{user_plane.space}")
    await kv.put(f"session.{grant['sessionId']}", json.dumps({**srow, "state": "closed"}).encode())
    await nc2.close()
    await refused_connect(user_plane, b["token"], "not active")
    s, b2 = await exchange(user_plane, body)
    assert s == 401 and "not active" in b2["error"]


async def test_nats_refuses_a_connect_without_a_bearer(user_plane):
    with pytest.raises(Exception):
        nc = await nats.connect(user_plane.url, user_credentials=str(user_plane.sentinel_creds),
                                name=user_nonce(), allow_reconnect=False, connect_timeout=3,
                                max_reconnect_attempts=0)
        await nc.close()
    await until(lambda: any("no bearer presented" in r for r in user_plane.plane.refusals()), 5, "refusal")


# ---- the demo: `cotal demo --auth user` -----------------------------------------------------


def test_the_demo_prints_each_home_and_the_user_it_acts_as(tmp_path):
    import os
    import re
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "COTAL_HOME"}
    p = subprocess.Popen([sys.executable, "-m", "cotal_tui.cli", "demo", "--auth", "user", "--headless",
                          "--agents", "2", "--space", "ud", "--as-user", "sam"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(ln.startswith("home:") for ln in lines) < 2:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
        info = [ln.split(":", 1) for ln in lines]
        keys = [k for k, _ in info]
        assert keys == ["server", "space", "user", "home", "user", "home"], lines
        assert info[2][1].strip().startswith("sam (scopes spawn)")  # --as-user: sam first
        assert info[4][1].strip().startswith("olivia (scopes admin")
        homes = [v.strip() for k, v in info if k == "home"]
        for h, _who in zip(homes, ("sam", "olivia")):
            entry = json.loads((Path(h) / "meshes" / "ud.json").read_text())
            assert entry["mode"] == "user" and entry["exchange"].startswith("http://127.0.0.1:")
            assert Path(entry["sentinelCreds"]).stat().st_mode & 0o077 == 0
            assert Path(entry["idpTokenFile"]).stat().st_mode & 0o077 == 0
            assert (Path(h) / "current-mesh").read_text().strip() == "ud"
        assert not re.search(r"eyJ[A-Za-z0-9_-]{8,}\.|S[UAO][A-Z2-7]{40,}", "\n".join(lines))
    finally:
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
    err = p.stderr.read()
    assert not re.search(r"eyJ[A-Za-z0-9_-]{8,}\.|S[UAO][A-Z2-7]{40,}", err)
    assert not Path(homes[0]).exists()  # the temp homes go with the mesh


def test_demo_as_user_needs_user_auth_and_a_known_name():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "cotal_tui.cli", "demo", "--as-user", "sam", "--headless"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == "cotal demo: --as-user needs --auth user."
    r = subprocess.run([sys.executable, "-m", "cotal_tui.cli", "demo", "--auth", "user", "--as-user", "zed",
                        "--headless"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a demo user" in r.stderr and "Traceback" not in r.stderr


async def test_the_demo_mesh_serves_u_principals_through_its_manager_on_ep_v1():
    from attach.control.endpoint import EndpointClient
    from cotal_tui.demo.mesh import DemoMesh

    m = await asyncio.to_thread(lambda: DemoMesh(space="uv", agents=2, auth="user").start())
    try:
        pl = m.plane
        olivia, sam = pl.users["olivia"], pl.users["sam"]
        assert [a.owner for a in m.team.members] == [olivia.owner, sam.owner]
        assert pl.local_manager == m.mgr.instance_id
        # every scripted agent is a managed-agent row of its owner, spawned by that owner's cli
        row = await pl.arun(pl.read_actor(sam.owner, "bram"))
        assert row is not None and row.kind == "managed-agent" and row.parent == f"{sam.owner}.cli"
        s, b = await post(pl.exchange_url + "/exchange", {"idpToken": pl.idp_token("sam"), "actor": "cli",
                                                           "view": "manager-caller"})
        assert s == 200 and b["managerInstanceId"] == m.mgr.instance_id
        act = claims(b["token"])["act"]
        sentinel = m.user_homes["sam"] / "auth" / "uv.sentinel.creds"
        cid = user_nonce()
        nc = await nats.connect(m.url, user_credentials=str(sentinel), token=b["token"], name=cid,
                                inbox_prefix=f"_INBOX_{cid}", allow_reconnect=False, connect_timeout=5)
        try:
            c = EndpointClient(nc, "uv", caller=Caller(act["owner"], "cli", act["lifecycleUid"]))
            binding = await c.bind()
            assert binding.generation == pl.issued[-1].generation
            iid = b["managerInstanceId"]
            r = await c.call("ps", instance_id=iid)
            assert r.ok and {row["id"] for row in r.data} >= {f"{sam.owner}.bram"}
            # attach: owner mode, the triple from inspect; the grant redeems through the exchange
            r = await c.call("inspect", {"name": "bram"}, instance_id=iid)
            assert r.ok
            target = {"mode": "owner", "owner": sam.owner, "actor": "bram", "lifecycleUid": r.data["lifecycleUid"]}
            r = await c.call("attach", None, instance_id=iid, mode="owner", target=target)
            assert r.ok, r.error
            grant = r.data["grant"]
            body = {"idpToken": pl.idp_token("sam"), "actor": "cli", "view": "session-caller", "sessionGrant": grant}
            s, sb = await post(pl.exchange_url + "/exchange", body)
            assert s == 200, sb
            s, ob = await post(pl.exchange_url + "/exchange", {**body, "idpToken": pl.idp_token("olivia")})
            assert s == 401 and "was issued to" in ob["error"]
            scid = user_nonce()
            snc = await nats.connect(m.url, user_credentials=str(sentinel), token=sb["token"], name=scid,
                                     inbox_prefix=f"_INBOX_{scid}", allow_reconnect=False, connect_timeout=5)
            assert snc.is_connected
            await snc.close()
            live = m.mgr.live_sessions
            await asyncio.to_thread(m.call, m.mgr.despawn("bram"))  # the session ends with its seat
            assert live == 1
            await until(lambda: m.mgr.live_sessions == 0, 10, "the session to end with its seat")
        finally:
            await nc.close()
    finally:
        await asyncio.to_thread(m.stop)


async def test_a_home_for_a_user_connects_through_the_exchange(user_plane, monkeypatch):
    import argparse

    from cotal_tui.cli.connection import add_connection_arguments, target_from_args
    from meshview.link.connect import connect

    user_plane.add_user("vik", ["spawn"])
    home = user_plane.home_for("vik")
    entry = json.loads((home / "meshes" / f"{user_plane.space}.json").read_text())
    assert entry["mode"] == "user" and entry["exchange"] == user_plane.exchange_url
    assert Path(entry["sentinelCreds"]).read_text() == user_plane.plane.sentinel_text
    monkeypatch.setenv("COTAL_HOME", str(home))
    p = argparse.ArgumentParser()
    add_connection_arguments(p)
    before = len(user_plane.plane.log)
    nc, t = await connect(target_from_args(p.parse_args([])))
    try:
        assert nc.is_connected and t.mode == "user"
    finally:
        await nc.close()
    assert ("exchange", "ok") in user_plane.plane.log[before:] and ("callout", "ok") in user_plane.plane.log[before:]
