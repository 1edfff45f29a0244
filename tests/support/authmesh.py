"""An operator-mode (static auth) Cotal mesh for tests: real nats-server, real JWTs.

``start_auth_mesh()`` mints a trust chain with :mod:`support.jwt`, starts
``nats-server`` with ``operator`` / ``system_account`` / ``resolver: MEMORY`` /
``resolver_preload``, provisions the space through an unrestricted infra user (what
``cotal up`` would hold), and writes creds files for the users a console meets:

- ``observer`` — wire.md §9 observer profile (channels only);
- ``admin`` — observer + live DMs/anycast + DM history;
- ``agent`` — a self-scoped agent, principal ``local.<its nkey>`` (static mode);
- ``expired`` — an observer whose JWT expired a minute ago;
- ``revoked`` — an observer revoked in the account's ``revocations``;
- ``loose`` — a valid observer creds file written with mode 0644 (the warning case).

Import it from tests as ``from support.authmesh import ...``;
the fixtures in ``conftest.py`` are not touched.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nats
import pytest

from cotal_tui.demo.broker import Broker
from cotal_tui.demo.provision import provision_space
from support.jwt import (
    AuthSpace,
    MintedUser,
    admin_permissions,
    agent_permissions,
    observer_permissions,
    write_creds,
)

AGENT_CHANNELS = ["general", "team.backend"]


@dataclass
class AuthMesh:
    space: str
    auth: AuthSpace
    broker: Broker
    dir: Path
    users: dict[str, MintedUser] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.broker.url

    def creds(self, name: str) -> Path:
        c = self.users[name].creds
        assert c is not None
        return c

    def principal(self, name: str) -> str:
        """Static-mode principal of a minted user: ``local.<user nkey>``."""
        return f"local.{self.users[name].public}"

    async def connect(self, name: str, **kw) -> nats.NATS:
        """A raw nats-py connection as ``name`` with its ``_INBOX_<nkey>`` prefix (§10)."""
        u = self.users[name]
        kw.setdefault("inbox_prefix", u.inbox_prefix)
        kw.setdefault("allow_reconnect", False)
        kw.setdefault("connect_timeout", 3)
        return await nats.connect(self.url, user_credentials=str(u.creds), **kw)

    def stop(self) -> None:
        self.broker.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def mint_users(auth: AuthSpace, space: str, dir: Path) -> dict[str, MintedUser]:
    users: dict[str, MintedUser] = {}

    def add(name: str, user: MintedUser, mode: int = 0o600) -> None:
        user.creds = write_creds(dir / f"{name}.creds", user.jwt, user.key.seed, mode=mode)
        users[name] = user

    add("infra", auth.mint_user("infra", None))
    obs = auth.mint_user("observer", None)  # re-mint below with perms bound to its own nkey
    add("observer", auth.mint_user("observer", observer_permissions(space, obs.public),
                                   key=obs.key))
    adm = auth.mint_user("admin", None)
    add("admin", auth.mint_user("admin", admin_permissions(space, adm.public), key=adm.key))
    ag = auth.mint_user("agent", None)
    add("agent", auth.mint_user(
        "agent",
        agent_permissions(space, "local", ag.public, ag.public,
                          publish_channels=AGENT_CHANNELS, subscribe_channels=AGENT_CHANNELS),
        key=ag.key))
    ex = auth.mint_user("expired", None)
    now = int(time.time())
    add("expired", auth.mint_user("expired", observer_permissions(space, ex.public), key=ex.key,
                                  issued_at=now - 3600, expires_at=now - 60))
    rv = auth.mint_user("revoked", None)
    revoked = auth.mint_user("revoked", observer_permissions(space, rv.public), key=rv.key,
                             issued_at=now - 10)
    add("revoked", revoked)
    auth.revoke(revoked)
    lo = auth.mint_user("loose", None)
    add("loose", auth.mint_user("loose", observer_permissions(space, lo.public), key=lo.key),
        mode=0o644)
    return users


async def _provision(url: str, creds: Path, space: str, replicas: int = 1) -> None:
    nc = await nats.connect(url, user_credentials=str(creds), connect_timeout=5)
    try:
        await provision_space(nc, space, replicas=replicas)
    finally:
        await nc.close()


def _run_in_thread(coro) -> None:
    """Run ``coro`` on a fresh loop in a worker thread (callable from sync or async code)."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        ex.submit(asyncio.run, coro).result(60)


def start_auth_mesh(space: str = "sec") -> AuthMesh:
    """Mint, start, provision. Synchronous so it can back any fixture scope."""
    d = Path(tempfile.mkdtemp(prefix="cotal-auth-"))
    os.chmod(d, 0o700)
    auth = AuthSpace(space)
    users = mint_users(auth, space, d)
    broker = Broker(name="cotal-auth", extra_config=auth.server_config()).start()
    mesh = AuthMesh(space, auth, broker, d, users)
    try:
        _run_in_thread(_provision(broker.url, mesh.creds("infra"), space))
    except BaseException:
        mesh.stop()
        raise
    return mesh


@pytest.fixture(scope="module")
def auth_mesh():
    m = start_auth_mesh()
    yield m
    m.stop()


class ErrorLog:
    """Collects async errors nats-py reports (permission violations arrive here)."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    async def cb(self, e: Exception) -> None:
        """Pass as ``error_cb=log.cb`` (nats-py wants a coroutine function)."""
        self.errors.append(str(e))

    async def wait_for(self, needle: str, timeout: float = 3.0) -> str:
        """The suite's ``until`` (conftest) for an error containing ``needle``."""
        from conftest import until

        return await until(lambda: next((e for e in self.errors if needle.lower() in e.lower()),
                                        None),
                           timeout, what=lambda: f"an error containing {needle!r}; "
                                                 f"saw {self.errors!r}")


# ---- per-user auth: an operator-mode server whose AUTH account calls out -------------------------


class CalloutResponder:
    """A small auth-callout service (nats-server docs, "Auth Callout", decentralized): it
    connects as the AUTH account's service user, answers ``$SYS.REQ.USER.AUTH`` with an
    ``authorization_response`` JWT signed by the AUTH account, carrying a user JWT for the data
    account (signed by its signing key) whose inbox is the client's connect ``name`` — the
    ``ibx<uuid>`` nonce — and whose permissions are the admin view. A wrong bearer is answered
    with an error. It runs on its own thread and loop, so a CLI subprocess can log in while
    the test awaits it. ``seen`` records what each request carried (names, token matches)."""

    def __init__(self, url: str, trust, auth_key, service, bearer: str) -> None:
        self.url, self.trust, self.auth_key, self.service, self.bearer = url, trust, auth_key, service, bearer
        self.seen: list[dict] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = None
        self._stop: asyncio.Event | None = None
        self._ready = __import__("threading").Event()

    def start(self) -> "CalloutResponder":
        import threading

        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()
        if not self._ready.wait(15):
            raise RuntimeError("the callout responder did not come up")
        return self

    async def _main(self) -> None:
        from meshview.link.auth import admin_permissions, encode_jwt, user_jwt
        from support.jwt import decode_jwt

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        nc = await nats.connect(self.url, **self.service.nats_options(), connect_timeout=5)

        async def handle(msg) -> None:
            req = decode_jwt(msg.data.decode(), verify=True)  # signed by the server's nkey
            n = req["nats"]
            opts = n.get("connect_opts") or {}
            name = opts.get("name") or ""
            ok = opts.get("auth_token") == self.bearer and name.startswith("ibx") and len(name) == 35
            self.seen.append({"name": name, "token_ok": opts.get("auth_token") == self.bearer,
                              "has_jwt": bool(opts.get("jwt"))})
            resp = {"sub": n["user_nkey"], "aud": n["server_id"]["id"],
                    "nats": {"type": "authorization_response", "version": 2}}
            if ok:
                resp["nats"]["jwt"] = user_jwt(
                    n["user_nkey"], self.trust.signing, account=self.trust.account.public, name="admin-view",
                    permissions=admin_permissions(self.trust.space, name))
            else:
                resp["nats"]["error"] = "not a bearer this mesh issued"
            await msg.respond(encode_jwt(resp, self.auth_key).encode())

        await nc.subscribe("$SYS.REQ.USER.AUTH", cb=handle)
        await nc.flush()
        self._ready.set()
        await self._stop.wait()
        await nc.close()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(5)


@dataclass
class CalloutMesh:
    space: str
    broker: Broker
    dir: Path
    bearer_file: Path
    sentinel: Path
    responder: CalloutResponder
    bearer: str = field(repr=False)
    infra: Path | None = None

    @property
    def url(self) -> str:
        return self.broker.url

    def stop(self) -> None:
        self.responder.stop()
        self.broker.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_callout_mesh(space: str = "ua") -> CalloutMesh:
    """An operator-mode broker with a data account for ``space`` and an AUTH account whose JWT
    delegates authentication to the callout responder (``auth_users``: the service user;
    ``allowed_accounts``: the data account). Clients hold the deny-all sentinel creds of the
    AUTH account plus a bearer; the responder places them in the data account."""
    from cotal_tui.demo.trust import SpaceTrust, account_jwt
    from meshview.link.auth import Permissions, encode_jwt, new_nkey, user_jwt

    d = Path(tempfile.mkdtemp(prefix="cotal-callout-"))
    os.chmod(d, 0o700)
    trust = SpaceTrust(space, operator_name="cotal-callout")
    auth_key = new_nkey("account")
    service_key = new_nkey("user")
    authorization = {"auth_users": [service_key.public], "allowed_accounts": [trust.account.public]}
    trust.extra_accounts[auth_key.public] = account_jwt(auth_key, trust.operator, name="AUTH", jetstream=False,
                                                        authorization=authorization)
    from meshview.link.auth import Credential

    service = Credential("callout-service", user_jwt(service_key.public, auth_key, account=auth_key.public,
                                                     name="callout-service", permissions=None), service_key)
    sentinel_key = new_nkey("user")
    sentinel_jwt = user_jwt(sentinel_key.public, auth_key, account=auth_key.public, name="sentinel",
                            permissions=Permissions(pub_deny=(">",), sub_deny=(">",)))
    sentinel = write_creds(d / "sentinel.creds", sentinel_jwt, sentinel_key.seed)
    infra_user = trust.root_seed.mint("infra", None)
    infra = write_creds(d / "infra.creds", infra_user.jwt, infra_user.key.seed)
    # the Cotal bearer: an opaque compact JWS naming the principal (sub, act.actor, act.lifecycleUid)
    bearer = encode_jwt({"sub": "u_" + "a" * 26, "act": {"actor": "cli", "lifecycleUid": "b" * 26},
                         "view": "admin"}, new_nkey("account"))
    bearer_file = d / "bearer"
    bearer_file.write_text(bearer + "\n")
    os.chmod(bearer_file, 0o600)
    broker = Broker(name="cotal-callout", extra_config=trust.server_config()).start()
    try:
        _run_in_thread(_provision(broker.url, infra, space))
        responder = CalloutResponder(broker.url, trust, auth_key, service, bearer).start()
    except BaseException:
        broker.stop()
        shutil.rmtree(d, ignore_errors=True)
        raise
    return CalloutMesh(space, broker, d, bearer_file, sentinel, responder, bearer, infra)
