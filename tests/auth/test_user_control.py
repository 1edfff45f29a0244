"""Control on a per-user-auth mesh: the exchange client (its request body, its answers, its
one-sentence refusals and the per-view bearer cache) and the user-mode connect target.

The exchange is a real HTTP server on loopback (stdlib), answering what the reference's does;
the end-to-end verbs against the operator-mode broker and auth plane are further down, on the
``user_plane`` fixture."""

from __future__ import annotations

import asyncio
import dataclasses
import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from meshview.link.connect import ConnectError, ConnectTarget, connect, resolve_target
from meshview.link.connect_request import ConnectRequest
from meshview.link.exchange import BearerCache, ExchangeError, exchange, read_idp_token

OWNER = "u_" + "a" * 26
UID = "b" * 26
IID = "c" * 26


def _b64(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def fake_jwt(claims: dict) -> str:
    return f"{_b64({'alg': 'EdDSA'})}.{_b64(claims)}.c2ln"


def bearer_token(*, ttl: float = 900, view: str | None = None, scope=("spawn",), iid: str | None = None) -> str:
    now = int(time.time())
    act = {"owner": OWNER, "actor": "cli", "lifecycleUid": UID, "scope": list(scope)}
    if view:
        act["view"] = view
    if iid:
        act["managerInstanceId"] = iid
    return fake_jwt({"sub": OWNER, "iat": now, "nbf": now, "exp": now + ttl, "act": act, "ver": 1})


class Exchange:
    """A loopback exchange: records every body, answers from ``answer(body) -> (status, doc)``."""

    def __init__(self, answer):
        self.bodies: list[dict] = []
        self.answer = answer
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(n))
                outer.bodies.append({"path": self.path, **body})
                status, doc = outer.answer(body)
                raw = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def idp_file(tmp_path: Path) -> Path:
    p = tmp_path / "idp.jwt"
    p.write_text(fake_jwt({"sub": "ada", "exp": int(time.time()) + 3600}) + "\n")
    p.chmod(0o600)
    return p


def test_exchange_sends_the_reference_body_and_reads_the_bearer(idp_file):
    tok = bearer_token(view="manager-caller", iid=IID)
    ex = Exchange(lambda body: (200, {"token": tok, "managerInstanceId": IID}))
    try:
        b = asyncio.run(exchange(ex.url, read_idp_token(str(idp_file)), view="manager-caller"))
    finally:
        ex.close()
    body = ex.bodies[0]
    assert body["path"] == "/exchange"
    assert body["actor"] == "cli" and body["view"] == "manager-caller" and "managerInstanceId" not in body
    assert body["idpToken"] == idp_file.read_text().strip()
    assert b.token == tok and b.caller == (OWNER, "cli", UID) and b.manager_instance_id == IID
    assert tok not in repr(b)


def test_cache_reexchanges_past_80_percent_of_the_lifetime(idp_file):
    ttls = iter([3.0, 900.0])
    ex = Exchange(lambda body: (200, {"token": bearer_token(ttl=next(ttls))}))
    cache = BearerCache(ex.url, str(idp_file))
    try:
        async def go():
            first = await cache.get(None)
            again = await cache.get(None)
            assert again is first and cache.exchanges == 1  # fresh: held
            await asyncio.sleep(max(0.0, first.issued_at + 0.8 * (first.expires_at - first.issued_at)
                                    - time.time()) + 0.05)
            renewed = await cache.get(None)
            assert renewed is not first and cache.exchanges == 2
        asyncio.run(go())
    finally:
        ex.close()


def test_session_grants_are_redeemed_each_time_never_cached(idp_file):
    ex = Exchange(lambda body: (200, {"token": bearer_token(view="session-caller")}))
    cache = BearerCache(ex.url, str(idp_file))
    grant = {"v": 1, "sessionId": "s" * 43}
    try:
        async def go():
            await cache.get("session-caller", session_grant=grant)
            await cache.get("session-caller", session_grant=grant)
        asyncio.run(go())
    finally:
        ex.close()
    assert [b["sessionGrant"] for b in ex.bodies] == [grant, grant]


@pytest.mark.parametrize("status,error,view,code,words", [
    (403, "scope 'admin' not granted", "channel-purger", "permission-denied",
     ("needs ledger scope 'admin'", "cotal actor grant cli --scope admin")),
    (401, "idp token expired", None, "unauthenticated", ("has expired", "--idp-token-file")),
    (401, "invalid signature", "manager-caller", "unauthenticated", ("refused your IdP token", "--idp-token-file")),
    (403, "session redemption refused: was issued to u_x.cli", "session-caller", "permission-denied",
     ("refused to redeem the session", "was issued to", "attach again")),
    (401, "no manager candidate", "manager-caller", "unavailable", ("no manager", "--on")),
    (404, "unknown view on the public face", "purger", "permission-denied", ("loopback",)),
    (403, "elevated views are a loopback operator surface", "purger", "permission-denied", ("only on its loopback",)),
])
def test_refusals_are_one_sentence_naming_the_fix(idp_file, status, error, view, code, words):
    idp = idp_file.read_text().strip()
    ex = Exchange(lambda body: (status, {"error": error + " " + idp}))  # a server echoing the token
    try:
        with pytest.raises(ExchangeError) as ei:
            asyncio.run(exchange(ex.url, idp, view=view))
    finally:
        ex.close()
    msg = str(ei.value)
    assert ei.value.code == code
    assert all(w in msg for w in words), msg
    assert idp not in msg and "\n" not in msg and msg.endswith(".")
    assert "Error" not in msg and "Traceback" not in msg


def test_expired_idp_token_is_refused_before_anything_is_sent(tmp_path):
    p = tmp_path / "old.jwt"
    p.write_text(fake_jwt({"sub": "ada", "exp": int(time.time()) - 5}))
    with pytest.raises(ExchangeError, match=r"expired at .*--idp-token-file"):
        read_idp_token(str(p))
    with pytest.raises(ExchangeError, match=r"cannot read the IdP token file"):
        read_idp_token(str(tmp_path / "missing"))


def test_unreachable_exchange_names_the_flag(idp_file):
    ex = Exchange(lambda body: (200, {}))
    url = ex.url
    ex.close()  # nothing listens there now
    with pytest.raises(ExchangeError, match=r"could not be reached .*--exchange-url"):
        asyncio.run(exchange(url, "x.y.z", timeout=2.0))


def test_registry_entry_carries_the_user_material(tmp_path, idp_file):
    home = tmp_path / "home"
    (home / "meshes").mkdir(parents=True)
    sentinel = tmp_path / "sentinel.creds"
    sentinel.write_text("x")
    (home / "meshes" / "team.json").write_text(json.dumps({
        "space": "team", "server": "nats://127.0.0.1:1", "mode": "user", "exchange": "http://127.0.0.1:9",
        "sentinelCreds": str(sentinel), "idpTokenFile": str(idp_file)}))
    t = resolve_target(ConnectRequest(space="team"), home=home)
    assert t.problem is None and t.user_mode and t.can_exchange
    assert (t.exchange_url, t.idp_token_file, t.sentinel) == ("http://127.0.0.1:9", str(idp_file), str(sentinel))
    # a flag wins over the entry
    t2 = resolve_target(ConnectRequest(space="team", exchange_url="http://127.0.0.1:10"), home=home)
    assert t2.exchange_url == "http://127.0.0.1:10"
    # no IdP token anywhere: one sentence naming the flag
    (home / "meshes" / "team.json").write_text(json.dumps({
        "space": "team", "server": "nats://127.0.0.1:1", "mode": "user", "sentinelCreds": str(sentinel)}))
    t3 = resolve_target(ConnectRequest(space="team"), home=home)
    assert t3.problem and "--idp-token-file" in t3.problem


def test_a_refused_exchange_is_the_connect_sentence(idp_file, tmp_path):
    ex = Exchange(lambda body: (403, {"error": "scope 'admin' not granted"}))
    sentinel = tmp_path / "s.creds"
    sentinel.write_text("x")
    sentinel.chmod(0o600)
    t = ConnectTarget(("nats://127.0.0.1:1",), "team", mode="user", role="channel-purger",
                      sentinel=str(sentinel), exchange_url=ex.url, idp_token_file=str(idp_file))
    try:
        with pytest.raises(ConnectError, match=r"'channel-purger' view needs ledger scope 'admin'"):
            asyncio.run(connect(t))
    finally:
        ex.close()
    assert ex.bodies[0]["view"] == "channel-purger"


# ---- end to end: the verbs on the operator-mode broker, the callout and the exchange ---------------

from attach.control import verbs as control  # noqa: E402
from attach.control.verbs import ControlError  # noqa: E402
from cotal_tui.demo.manager import DemoManager, SeatSpec  # noqa: E402
from support.userplane import user_plane  # noqa: E402,F401

from conftest import until  # noqa: E402


def user_target(plane, user, **kw) -> ConnectTarget:
    t = resolve_target(ConnectRequest(space=plane.space), home=plane.home_for(user))
    assert t.problem is None and t.can_exchange, t.problem
    return t


class Plane:
    """The module's users and the demo manager serving their seats (as the auth plane's local manager)."""

    def __init__(self, p):
        self.p = p
        self.ada = p.plane.users.get("ada") or p.add_user("ada", ["spawn"])
        self.bob = p.plane.users.get("bob") or p.add_user("bob", ["spawn"])
        self.root = p.plane.users.get("root") or p.add_user("root", ["spawn", "admin"])
        self.mgr: DemoManager | None = None
        self.nc = None

    async def start_manager(self, seats, **kw) -> DemoManager:
        self.nc = await self.p.service_nc()
        mgr = DemoManager(self.nc, self.p.space, seats, **kw)
        mgr.user_mesh = True
        await mgr.start()
        self.p.plane.local_manager = mgr.instance_id
        self.mgr = mgr
        return mgr

    async def stop_manager(self) -> None:
        if self.mgr is not None:
            await self.mgr.stop()
            self.mgr = None
        if self.nc is not None:
            await self.nc.close()
            self.nc = None


def seat(user, name: str) -> SeatSpec:
    return SeatSpec(name=name, principal_id=f"{user.owner}.{name}", kind="line")


@pytest.fixture
async def plane(user_plane):  # noqa: F811
    pl = Plane(user_plane)
    try:
        yield pl
    finally:
        await pl.stop_manager()


async def test_ps_is_one_call_to_the_pinned_manager_filtered_to_the_owner(plane):
    mgr = await plane.start_manager([seat(plane.ada, "adaone"), seat(plane.bob, "bobone")])
    res = await control.ps(user_target(plane.p, plane.ada))
    assert res.pinned == mgr.instance_id and [m.instance_id for m in res.managers] == [mgr.instance_id]
    assert [r.name for r in res.rows] == ["adaone"]  # the manager's view of ada's owner only
    assert res.rows[0].id == f"{plane.ada.owner}.adaone"
    admin = await control.ps(user_target(plane.p, plane.root))
    assert sorted(r.name for r in admin.rows) == ["adaone", "bobone"]
    assert not plane.p.plane.refusals("callout"), plane.p.plane.refusals("callout")


async def test_stop_own_seat_refused_another_owners_admin_may(plane):
    mgr = await plane.start_manager([seat(plane.ada, "adatwo"), seat(plane.bob, "bobtwo"),
                                     seat(plane.bob, "bobthree")])
    ada = user_target(plane.p, plane.ada)
    with pytest.raises(ControlError) as ei:
        await control.stop(ada, "bobtwo")
    assert ei.value.code == "permission-denied" and "lacks ledger scope 'admin'" in ei.value.message, ei.value.message
    assert "bobtwo" in mgr.seats and mgr.seats["bobtwo"].pty.running
    r = await control.stop(ada, "adatwo", force=True)
    assert r.instance_id == mgr.instance_id
    await until(lambda: "adatwo" not in mgr.seats or not mgr.seats["adatwo"].pty.running, 20, "ada's seat stopped")
    r = await control.stop(user_target(plane.p, plane.root), "bobthree", force=True)  # admin: another owner's
    await until(lambda: "bobthree" not in mgr.seats or not mgr.seats["bobthree"].pty.running, 20, "bob's seat stopped")
    assert "bobtwo" in mgr.seats


async def test_input_is_refused_by_name_before_anything_is_published(plane):
    mgr = await plane.start_manager([seat(plane.ada, "adafour")])
    before = mgr.bad_requests, len(mgr.contract_violations)
    with pytest.raises(ControlError) as ei:
        await control.input_text(user_target(plane.p, plane.ada), "adafour", "typed")
    assert ei.value.code == "permission-denied"
    assert "operator-only" in ei.value.message and "cotal attach" in ei.value.message
    assert (mgr.bad_requests, len(mgr.contract_violations)) == before


async def test_spawn_under_the_callers_owner(plane):
    mgr = await plane.start_manager([])
    r = await control.spawn(user_target(plane.p, plane.ada), "echo", name="adaspawn")
    assert r.instance_id == mgr.instance_id
    assert mgr.seats["adaspawn"].owner == plane.ada.owner
    res = await control.ps(user_target(plane.p, plane.ada))
    assert "adaspawn" in [x.name for x in res.rows]


async def test_purge_and_delchan_under_their_views(plane):
    nc = await plane.p.service_nc()
    try:
        js = nc.jetstream()
        await js.publish(f"cotal.{plane.p.space}.chat.{plane.ada.owner}.cli.scratch", b'{"v":1}')
    finally:
        await nc.close()
    # an ordinary user: the channel-purger view needs ledger scope admin
    with pytest.raises(ControlError) as ei:
        await control.delchan(user_target(plane.p, plane.ada), "scratch")
    assert "'channel-purger' view needs ledger scope 'admin'" in ei.value.message
    assert "cotal actor grant cli --scope admin" in ei.value.message
    n = await control.delchan(user_target(plane.p, plane.root), "scratch")
    assert n == 1
    # purger is a loopback-only view: the public exchange of the registry entry refuses it by name
    with pytest.raises(ControlError) as ei:
        await control.purge(user_target(plane.p, plane.root))
    assert "only on its loopback (operator) face" in ei.value.message and "nothing was changed" in ei.value.message
    assert ei.value.code == "permission-denied"


def test_a_short_lived_bearer_is_reexchanged_with_no_interruption():
    from support.userplane import start_user_plane

    p = start_user_plane("uattl", max_ttl_s=4)
    try:
        asyncio.run(_short_lived(p))
    finally:
        p.stop()


async def _short_lived(p) -> None:
    from meshview.link.connect import bearer_renewals
    from meshview.link.exchange import cache_for

    pl = Plane(p)
    await pl.start_manager([seat(pl.ada, "adattl")])
    try:
        t = user_target(p, pl.ada)
        cache = cache_for(t.exchange_url, t.idp_token_file)
        first = await control.ps(t)
        n0 = cache.exchanges
        # a standing (console) connection on the baseline bearer, across two of its lifetimes
        nc, _ = await connect(t)
        try:
            await until(lambda: bearer_renewals(nc) >= 2, 20, "two bearer renewals")
            await until(lambda: nc.is_connected, 10, "connected")
            await nc.flush(timeout=3)
            js = nc.jetstream()
            info = await js.stream_info(f"KV_cotal_presence_{p.space}")
            assert info is not None
        finally:
            await nc.close()
        # the console's seats panel across the same expiries: every round answered, never a gap
        seen: list[tuple[str, ...]] = []
        poller = control.ps_poller(None, t, p.space, period=0.3,
                                   on_update=lambda f: seen.append(tuple(
                                       x.name for x in f.seats() if not x.silent)))
        assert isinstance(poller, control.UserPsPoller)
        poller.start()
        try:
            t0 = time.monotonic()
            await until(lambda: time.monotonic() - t0 > 9 and len(seen) >= 8, 30, "rounds across two lifetimes")
        finally:
            await poller.stop()
        assert poller.last_error is None, poller.last_error
        assert all(names == ("adattl",) for names in seen), seen
        assert poller.pinned == pl.mgr.instance_id
        again = await control.ps(t)  # the manager-caller bearer expired meanwhile: re-exchanged
        assert [r.name for r in again.rows] == [r.name for r in first.rows] == ["adattl"]
        assert cache.exchanges > n0
    finally:
        await pl.stop_manager()


async def test_the_cli_verbs_from_the_registry_entry_alone(plane):
    """``COTAL_HOME=<home> cotal ps / status / input / stop``: the home's user-mesh entry is all
    the CLI needs; no secret reaches the terminal."""
    import os
    import subprocess
    import sys

    mgr = await plane.start_manager([seat(plane.ada, "adacli")])
    home = plane.p.home_for(plane.ada)
    env = dict(os.environ, COTAL_HOME=str(home))
    for k in ("COTAL_EXCHANGE_URL", "COTAL_IDP_TOKEN_FILE", "COTAL_SENTINEL_CREDS", "COTAL_BEARER_FILE"):
        env.pop(k, None)
    idp = (home / "auth" / "idp-token").read_text().strip()

    async def cotal(*argv):
        r = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "cotal_tui", *argv], env=env,
                                    capture_output=True, text=True, timeout=60)
        assert idp not in r.stdout + r.stderr
        return r

    r = await cotal("ps")
    assert r.returncode == 0 and "adacli" in r.stdout and mgr.instance_id in r.stdout, r.stderr
    r = await cotal("input", "adacli", "hi")
    assert r.returncode == 1 and "operator-only" in r.stderr and "nothing was typed" in r.stderr
    r = await cotal("stop", "adacli", "--force")
    assert r.returncode == 0 and "killed adacli" in r.stdout, r.stderr


async def test_an_expired_idp_token_names_the_file_and_the_flag(plane, tmp_path):
    await plane.start_manager([])
    old = tmp_path / "old-idp"
    old.write_text(plane.p.idp_token(plane.ada, ttl_s=60, now=time.time() - 3600))
    old.chmod(0o600)
    t = dataclasses.replace(user_target(plane.p, plane.ada), idp_token_file=str(old))
    with pytest.raises(ControlError) as ei:
        await control.ps(t)
    assert ei.value.code == "unauthenticated"
    assert str(old) in ei.value.message and "expired" in ei.value.message
    assert "--idp-token-file" in ei.value.message and old.read_text() not in ei.value.message
    # a token the IdP never signed: the exchange refuses it, the sentence says how to fix it
    forged = tmp_path / "forged-idp"
    forged.write_text(fake_jwt({"sub": "ada", "exp": int(time.time()) + 600}))
    t = dataclasses.replace(t, idp_token_file=str(forged))
    with pytest.raises(ControlError) as ei:
        await control.ps(t)
    assert ei.value.code == "unauthenticated" and "refused your IdP token" in ei.value.message
    assert forged.read_text() not in ei.value.message


async def test_the_manager_caller_connection_rides_ep_v1(plane):
    """An interactive ``cli`` row's manager-caller view is issued: the verbs' connection binds to
    its accepted row's generation (the legacy rail holds no rows for it)."""
    from attach.control.endpoint import EndpointClient

    mgr = await plane.start_manager([seat(plane.ada, "adav1")])
    nc, t = await connect(dataclasses.replace(user_target(plane.p, plane.ada), role="control"))
    try:
        assert t.manager_instance == mgr.instance_id
        ep = EndpointClient(nc, plane.p.space)
        r = await ep.call("ps", None, instance_id=mgr.instance_id, deadline_ms=5000)
        assert r.ok and ep.generation is not None
    finally:
        await nc.close()
