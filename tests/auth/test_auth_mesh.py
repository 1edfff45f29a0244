"""The secured-mesh fixture itself: JWT minting, creds files, and the §9 permission rows,
proved against a real operator-mode nats-server with raw nats-py (no console code involved).

These pin the boundaries the console must live within: what an ``observer`` and an ``admin``
credential may read, that neither may publish, and how nats-py's defaults collide with the
reference permission rows (bare-create KV watches, direct-get KV reads).
"""

from __future__ import annotations

import json
import os
import stat
import time
import uuid

import nats
import pytest
from nats.js.api import ConsumerConfig, DeliverPolicy, AckPolicy

from support.authmesh import ErrorLog, auth_mesh  # noqa: F401  (fixture)
from support.jwt import (
    AuthSpace,
    Permissions,
    claims_id,
    decode_jwt,
    format_creds,
    new_nkey,
    read_creds_jwt,
    write_creds,
)

DENIED = "permissions violation"


def _msg(space: str, sender: str, **route) -> bytes:
    owner, actor = sender.split(".")
    m = {"id": str(uuid.uuid4()), "ts": int(time.time() * 1000), "space": space,
         "from": {"id": sender, "name": actor}, "parts": [{"kind": "text", "text": "hi"}]}
    m.update(route)
    return json.dumps(m).encode()


async def _seen_live(js, sub, subject: str, build, attempts: int = 5):
    """Publish (``js``: a JetStream context or a connection) until ``sub`` sees one (each a
    new message), at most ``attempts`` times.

    The server does not promise that a subscription flushed on one connection is matched by
    the very next publish from another (nats-io/nats-server#2150, nats-io/nats.rs#1274): under
    load about one run in thirty lost that first DM while JetStream acked it (the tap's
    ``delivered`` stayed 0; the next publish arrived). What this asserts is that the admin
    tap receives DMs live at all, which a denied tap never does."""
    for _ in range(attempts):
        await js.publish(subject, build())
        try:
            return await sub.next_msg(timeout=2)
        except nats.errors.TimeoutError:
            continue
    raise AssertionError(f"{attempts} publishes on {subject}, none seen live")


async def _no_msg(sub, within: float = 0.5) -> None:
    with pytest.raises(Exception):  # nats.errors.TimeoutError
        await sub.next_msg(timeout=within)


# -- minting --------------------------------------------------------------------------------


def test_jwt_roundtrip_and_jti():
    auth = AuthSpace("x")
    u = auth.mint_user("u", Permissions(sub_allow=("a.>",)), expires_at=2_000_000_000)
    claims = decode_jwt(u.jwt)  # verifies the ed25519 signature against iss
    assert claims["iss"] == auth.signing.public
    assert claims["sub"] == u.public and u.public.startswith("U") and len(u.public) == 56
    assert claims["nats"]["issuer_account"] == auth.account.public
    assert claims["nats"]["type"] == "user" and claims["nats"]["version"] == 2
    assert claims["nats"]["sub"] == {"allow": ["a.>"]}
    assert claims["exp"] == 2_000_000_000
    assert claims["jti"] == claims_id(claims)
    acct = decode_jwt(auth.account_jwt)
    assert acct["iss"] == auth.operator.public
    assert acct["nats"]["limits"]["disk_storage"] == -1  # JetStream enabled
    assert decode_jwt(auth.system_jwt)["nats"]["limits"].get("disk_storage", 0) == 0
    op = decode_jwt(auth.operator_jwt)
    assert op["iss"] == op["sub"] == auth.operator.public
    assert op["nats"]["system_account"] == auth.system.public
    header = json.loads(__import__("base64").urlsafe_b64decode(u.jwt.split(".")[0] + "=="))
    assert header == {"typ": "JWT", "alg": "ed25519-nkey"}


def test_tampered_jwt_fails_verification():
    auth = AuthSpace("x")
    u = auth.mint_user("u", None)
    h, c, s = u.jwt.split(".")
    import base64
    claims = json.loads(base64.urlsafe_b64decode(c + "=="))
    claims["name"] = "mallory"
    forged = h + "." + base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode() + "." + s
    with pytest.raises(ValueError, match="signature"):
        decode_jwt(forged)


def test_creds_file_format_and_mode(tmp_path):
    k = new_nkey("user")
    p = write_creds(tmp_path / "u.creds", "aaa.bbb.ccc", k.seed)
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    text = p.read_text()
    assert text == format_creds("aaa.bbb.ccc", k.seed)
    assert "-----BEGIN NATS USER JWT-----\naaa.bbb.ccc\n------END NATS USER JWT------" in text
    assert "-----BEGIN USER NKEY SEED-----\nSU" in text
    assert read_creds_jwt(p) == "aaa.bbb.ccc"
    loose = write_creds(tmp_path / "l.creds", "aaa.bbb.ccc", k.seed, mode=0o644)
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o644


def test_key_repr_hides_seed():
    k = new_nkey("user")
    assert k.seed.decode() not in repr(k)
    auth = AuthSpace("x")
    u = auth.mint_user("u", None)
    assert u.key.seed.decode() not in repr(u) and u.jwt not in repr(u)
    assert auth.signing.seed.decode() not in repr(auth)


def test_fixture_creds_modes(auth_mesh):
    for name in ("observer", "admin", "agent", "expired", "revoked", "infra"):
        assert stat.S_IMODE(os.stat(auth_mesh.creds(name)).st_mode) == 0o600, name
    assert stat.S_IMODE(os.stat(auth_mesh.creds("loose")).st_mode) == 0o644


# -- expired / revoked ----------------------------------------------------------------------


@pytest.mark.parametrize("who", ["expired", "revoked"])
async def test_expired_and_revoked_are_refused(auth_mesh, who):
    with pytest.raises(Exception, match="Authorization Violation"):
        nc = await auth_mesh.connect(who)
        await nc.close()


async def test_loose_creds_still_authenticate(auth_mesh):
    """0644 is a hygiene warning, not a broker refusal: the console must warn, not fail."""
    nc = await auth_mesh.connect("loose")
    assert nc.is_connected
    await nc.close()


# -- observer -------------------------------------------------------------------------------


async def test_observer_reads_channels_only(auth_mesh):
    s = auth_mesh.space
    infra = await auth_mesh.connect("infra")
    log = ErrorLog()
    obs = await auth_mesh.connect("observer", error_cb=log.cb)
    try:
        chat = await obs.subscribe(f"cotal.{s}.chat.>")
        await obs.flush()
        m = await _seen_live(infra, chat, f"cotal.{s}.chat.local.ada.general",
                             lambda: _msg(s, "local.ada", channel="general"))
        assert m.subject.endswith(".general")

        for pattern in (f"cotal.{s}.inst.>", f"cotal.{s}.svc.>", f"cotal.{s}.>",
                        f"cotal.{s}.ep.>", "_INBOX.>", "_INBOX_someoneelse.>"):
            await obs.subscribe(pattern)
            err = await log.wait_for(f'Subscription to "{pattern}"')
            assert DENIED in err.lower()
        # a denied subscription receives nothing, even when traffic flows
        await infra.publish(f"cotal.{s}.inst.local.bob.local.ada", _msg(s, "local.ada",
                                                                        to="local.bob"))
        await infra.flush()
        assert obs.is_connected  # permission errors do not kill the connection
    finally:
        await obs.close()
        await infra.close()


async def test_observer_cannot_publish_or_write_presence(auth_mesh):
    s = auth_mesh.space
    log = ErrorLog()
    obs = await auth_mesh.connect("observer", error_cb=log.cb)
    try:
        subj = f"cotal.{s}.chat.local.{auth_mesh.users['observer'].public}.general"
        await obs.publish(subj, b"{}")
        await log.wait_for(f'Publish to "{subj}"')
        js = obs.jetstream(timeout=1)
        with pytest.raises(Exception):
            await js.publish(f"$KV.cotal_presence_{s}.local.mallory", b"{}")
        await log.wait_for(f'Publish to "$KV.cotal_presence_{s}.local.mallory"')
        with pytest.raises(Exception):
            await js.stream_info(f"DM_{s}")
        await log.wait_for(f'"$JS.API.STREAM.INFO.DM_{s}"')
        with pytest.raises(Exception):
            await js.delete_stream(f"CHAT_{s}")
        await log.wait_for(f'"$JS.API.STREAM.DELETE.CHAT_{s}"')
    finally:
        await obs.close()


async def test_observer_history_via_ephemeral_consumer(auth_mesh):
    """Observer history path: bare CONSUMER.CREATE on CHAT + MSG.NEXT + DELETE (App. B)."""
    s = auth_mesh.space
    infra = await auth_mesh.connect("infra")
    obs = await auth_mesh.connect("observer")
    try:
        ijs = infra.jetstream()
        body = _msg(s, "local.ada", channel="releases")
        await ijs.publish(f"cotal.{s}.chat.local.ada.releases", body)
        js = obs.jetstream(timeout=3)
        info = await js.stream_info(f"CHAT_{s}")
        assert info.state.messages >= 1
        psub = await js.pull_subscribe(f"cotal.{s}.chat.*.*.releases", stream=f"CHAT_{s}",
                                       config=ConsumerConfig(ack_policy=AckPolicy.NONE,
                                                             deliver_policy=DeliverPolicy.ALL))
        msgs = await psub.fetch(1, timeout=3)
        assert msgs and json.loads(msgs[0].data)["channel"] == "releases"
        await psub.unsubscribe()
    finally:
        await obs.close()
        await infra.close()


async def test_observer_presence_watch_needs_a_named_consumer(auth_mesh):
    """The reference grants ``CONSUMER.CREATE.KV_cotal_presence_<s>.>`` only (named forms):
    nats-py's ``kv.watch()`` creates an *unnamed* ordered consumer on the bare subject and is
    denied; a watch built on a named consumer works. An observer in Python must name it."""
    s = auth_mesh.space
    infra = await auth_mesh.connect("infra")
    log = ErrorLog()
    obs = await auth_mesh.connect("observer", error_cb=log.cb)
    try:
        ikv = await infra.jetstream().key_value(f"cotal_presence_{s}")
        await ikv.put("local.ada", json.dumps({"status": "idle"}).encode())
        js = obs.jetstream(timeout=1.5)
        kv = await js.key_value(f"cotal_presence_{s}")  # STREAM.INFO is granted
        with pytest.raises(Exception):
            await kv.watch(">")
        await log.wait_for(f'"$JS.API.CONSUMER.CREATE.KV_cotal_presence_{s}"')

        # point reads are not granted on presence (watch only)
        with pytest.raises(Exception):
            await kv.get("local.ada")

        inbox = obs.new_inbox()
        sub = await obs.subscribe(inbox)
        name = f"oc_{uuid.uuid4().hex[:12]}"
        await js._jsm.add_consumer(f"KV_cotal_presence_{s}", ConsumerConfig(
            name=name, deliver_subject=inbox, ack_policy=AckPolicy.NONE,
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, flow_control=True,
            idle_heartbeat=5.0, filter_subject=f"$KV.cotal_presence_{s}.>",
            inactive_threshold=10.0, mem_storage=True, num_replicas=1))
        got = None
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            m = await sub.next_msg(timeout=3)
            if m.subject == f"$KV.cotal_presence_{s}.local.ada":
                got = m
                break
        assert got is not None and json.loads(got.data) == {"status": "idle"}
        await js._jsm.delete_consumer(f"KV_cotal_presence_{s}", name)
    finally:
        await obs.close()
        await infra.close()


async def test_observer_channel_registry_read_by_stream_msg_get(auth_mesh):
    """The registry bucket is provisioned with allow_direct; the grant is STREAM.MSG.GET, so
    ``kv.get`` (which rides DIRECT.GET when direct is on) is denied and a non-direct
    last-by-subject get works."""
    s = auth_mesh.space
    log = ErrorLog()
    obs = await auth_mesh.connect("observer", error_cb=log.cb)
    try:
        js = obs.jetstream(timeout=1.5)
        kv = await js.key_value(f"cotal_channels_{s}")
        with pytest.raises(Exception):
            await kv.get("=defaults")
        await log.wait_for("DIRECT.GET")
        raw = await js.get_last_msg(f"KV_cotal_channels_{s}", f"$KV.cotal_channels_{s}.=defaults",
                                    direct=False)
        assert json.loads(raw.data)["deliveryClass"] == "live"
    finally:
        await obs.close()


# -- admin ----------------------------------------------------------------------------------


async def test_admin_sees_dms_and_anycast_live_and_dm_history(auth_mesh):
    s = auth_mesh.space
    infra = await auth_mesh.connect("infra")
    log = ErrorLog()
    adm = await auth_mesh.connect("admin", error_cb=log.cb)
    try:
        inst = await adm.subscribe(f"cotal.{s}.inst.>")
        svc = await adm.subscribe(f"cotal.{s}.svc.>")
        chat = await adm.subscribe(f"cotal.{s}.chat.>")
        await adm.flush()
        ijs = infra.jetstream()
        for sub, subject, route in (
                (inst, f"cotal.{s}.inst.local.bob.local.ada", {"to": "local.bob"}),
                (svc, f"cotal.{s}.svc.reviewer.local.ada", {"toService": "reviewer"}),
                (chat, f"cotal.{s}.chat.local.ada.general", {"channel": "general"})):
            got = await _seen_live(ijs, sub, subject, lambda: _msg(s, "local.ada", **route))
            assert got.subject == subject

        # god-view over messaging only: one space-wide tap and the ep rails stay denied
        for pattern in (f"cotal.{s}.>", f"cotal.{s}.ep.>", f"cotal.{s}.eps.>"):
            await adm.subscribe(pattern)
            await log.wait_for(f'Subscription to "{pattern}"')

        js = adm.jetstream(timeout=3)
        psub = await js.pull_subscribe(f"cotal.{s}.inst.>", stream=f"DM_{s}",
                                       config=ConsumerConfig(ack_policy=AckPolicy.NONE))
        rows = await psub.fetch(1, timeout=3)
        assert json.loads(rows[0].data)["to"] == "local.bob"
        await psub.unsubscribe()

        await adm.publish(f"cotal.{s}.inst.local.bob.local.ada", b"{}")
        await log.wait_for(f'Publish to "cotal.{s}.inst.local.bob.local.ada"')
        # TASK is a work queue: admin holds no consumer grant there (anycast is live-only)
        with pytest.raises(Exception):
            await adm.jetstream(timeout=1).stream_info(f"TASK_{s}")
    finally:
        await adm.close()
        await infra.close()


# -- agent ----------------------------------------------------------------------------------


async def test_agent_publishes_only_as_itself(auth_mesh):
    s = auth_mesh.space
    me = auth_mesh.principal("agent")
    actor = me.split(".")[1]
    log = ErrorLog()
    ag = await auth_mesh.connect("agent", error_cb=log.cb)
    try:
        js = ag.jetstream(timeout=1)
        ack = await js.publish(f"cotal.{s}.chat.local.{actor}.general",
                               _msg(s, me, channel="general"))
        assert ack.stream == f"CHAT_{s}"
        ack = await js.publish(f"cotal.{s}.inst.local.bob.local.{actor}", _msg(s, me, to="local.bob"))
        assert ack.stream == f"DM_{s}"
        kv = await js.key_value(f"cotal_presence_{s}")
        await kv.put(me, json.dumps({"status": "idle"}).encode())

        # forging another sender, an undeclared channel, or a peer's presence key is refused
        for subj in (f"cotal.{s}.chat.local.ada.general",
                     f"cotal.{s}.chat.local.{actor}.secret",
                     f"cotal.{s}.inst.local.bob.local.ada"):
            with pytest.raises(Exception):
                await js.publish(subj, b"{}")
            await log.wait_for(f'Publish to "{subj}"')
        with pytest.raises(Exception):
            await kv.put("local.ada", b"{}")
        await log.wait_for(f'Publish to "$KV.cotal_presence_{s}.local.ada"')
        # no DM reads for an agent beyond its own durable; create on DM is denied outright
        await ag.subscribe(f"cotal.{s}.inst.>")
        await log.wait_for(f'Subscription to "cotal.{s}.inst.>"')
        with pytest.raises(Exception):
            await ag.jetstream(timeout=1).pull_subscribe(f"cotal.{s}.inst.>", stream=f"DM_{s}")
    finally:
        await ag.close()


async def test_revocation_applies_to_a_live_reload(tmp_path):
    """Revoking a user after the fact (account JWT update + reload) refuses its next connect."""
    from support.authmesh import start_auth_mesh
    m = start_auth_mesh("rv")
    try:
        nc = await m.connect("observer")
        await nc.close()
        m.auth.revoke(m.users["observer"])
        # push the updated account JWT through the system account's claim update subject
        sysu_key = new_nkey("user")
        sysu = __import__("support.jwt", fromlist=["user_jwt"]).user_jwt(
            sysu_key.public, m.auth.system, account=m.auth.system.public, name="sys",
            permissions=None)
        creds = write_creds(tmp_path / "sys.creds", sysu, sysu_key.seed)
        import nats
        sysnc = await nats.connect(m.url, user_credentials=str(creds))
        try:
            resp = await sysnc.request(f"$SYS.REQ.ACCOUNT.{m.auth.account.public}.CLAIMS.UPDATE",
                                       m.auth.account_jwt.encode(), timeout=3)
            assert b'"error"' not in resp.data, resp.data
        finally:
            await sysnc.close()
        with pytest.raises(Exception, match="Authorization Violation"):
            nc = await m.connect("observer")
            await nc.close()
    finally:
        m.stop()
