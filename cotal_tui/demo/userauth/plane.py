"""The user-auth plane composed: an operator-mode trust chain with an AUTH account whose JWT
delegates authentication to the callout, the sentinel creds, the IdP stand-in, the bearer
issuer, the ledger and the two exchange faces, all on one loop in a worker thread (so a
synchronous fixture, a CLI subprocess and the demo's own loop can all use it).

``UserAuthPlane(space)`` → ``server_config()`` for ``nats-server`` → ``start(url)`` once the
broker listens. The exchange decision (``exchange``) follows ``service.ts`` ``handleExchange``
and ``idp.ts`` ``createIdpBridge``: the body's shape, the face's view policy, the IdP proof, the
derived owner, the *interactive* ledger row (the only source of scope and lifecycle), the view's
required scope, the manager selection, the session redemption, a lifetime capped by the IdP
proof's remaining life and by ``max_ttl_s`` (≤ 900; tests lower it to exercise re-exchange).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import nats

from cotal_tui.demo.trust import SpaceTrust, account_jwt
from cotal_tui.demo.userauth.bearer import (
    MAX_TOKEN_TTL_S,
    PUBLIC_EXCHANGE_VIEWS,
    USER_TOKEN_VIEWS,
    VIEW_REQUIRED_SCOPE,
    BearerIssuer,
    Session,
)
from cotal_tui.demo.userauth.callout import AUTH_SUBJECT, Callout
from cotal_tui.demo.userauth.exchange import HttpFace, Request
from cotal_tui.demo.userauth.idp import IdentityProvider, IdpTokenError, derive_owner, verify_idp_token
from cotal_tui.demo.userauth.ledger import (
    INTERACTIVE,
    MANAGED,
    ActorRow,
    LedgerError,
    ensure_ledger,
    grant_actor,
    grant_managed_actor,
    is_actor,
    read_row,
    read_unified,
    revoke_actor,
)
from cotal_tui.demo.userauth.managers import (
    ManagerRefused,
    authorize_manager_caller,
    select_manager_instance,
)
from cotal_tui.demo.userauth.redemption import RedemptionRefused, grant_coordinates, verify_session_redemption
from cotal_tui.errors import CotalError
from meshview.errors import swallowed
from meshview.tasks import TaskOwner
from meshview.link.auth import Credential, Permissions, format_creds, new_nkey, user_jwt
from meshview.wire.issued import accepted_bucket
from meshview.wire.names import space_token

_owned = TaskOwner("auth-plane")  # one callout per request, held until answered
AGENT_BEARER_TTL_S = MAX_TOKEN_TTL_S


class ExchangeRefused(CotalError):
    def __init__(self, status: int, error: str) -> None:
        super().__init__(error)
        self.status = status


@dataclass(frozen=True)
class User:
    """A signed-in human of the demo/tests: an IdP subject, the derived owner, its ``cli`` row."""

    name: str
    sub: str
    owner: str
    actor: str
    scopes: frozenset[str]


def write_secret(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.chmod(path, 0o600)
    return path


class UserAuthPlane:
    def __init__(self, space: str, *, max_ttl_s: int = MAX_TOKEN_TTL_S, operator_name: str = "cotal-user-auth") -> None:
        if not 1 <= max_ttl_s <= MAX_TOKEN_TTL_S:
            raise ValueError(f"a bearer lifetime must be 1..{MAX_TOKEN_TTL_S} s")
        self.space = space_token(space)
        self.max_ttl_s = max_ttl_s
        self.trust = SpaceTrust(self.space, operator_name=operator_name)
        self.auth_key = new_nkey("account")
        service_key = new_nkey("user")
        authorization = {"auth_users": [service_key.public], "allowed_accounts": [self.trust.account.public]}
        self.trust.extra_accounts[self.auth_key.public] = account_jwt(
            self.auth_key, self.trust.operator, name="AUTH", jetstream=False, authorization=authorization)
        self._service = Credential("callout-service", user_jwt(service_key.public, self.auth_key,
                                                               account=self.auth_key.public,
                                                               name="callout-service", permissions=None), service_key)
        sentinel_key = new_nkey("user")
        self.sentinel_text = format_creds(user_jwt(
            sentinel_key.public, self.auth_key, account=self.auth_key.public, name="sentinel",
            permissions=Permissions(pub_deny=(">",), sub_deny=(">",))), sentinel_key.seed)
        self._infra = self.trust.root_seed.mint("auth-plane", None)  # allow-all, data account
        self._infra_creds = format_creds(self._infra.jwt, self._infra.key.seed)
        self.idp = IdentityProvider()
        self.owner_secret = secrets.token_bytes(32)
        self.issuer = BearerIssuer(self.space)
        self.cap = secrets.token_urlsafe(32)
        self.local_manager: str | None = None
        self.users: dict[str, User] = {}
        self.log: list[tuple[str, str]] = []  # (where, outcome or refusal sentence)
        self.issued: list = []  # IssuedRef of every accepted row written
        self.callout = Callout(self)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self.url: str | None = None
        self.public = HttpFace(lambda r: self.route(r, public=True))
        self.loopback = HttpFace(lambda r: self.route(r, public=False))

    def __repr__(self) -> str:
        return f"UserAuthPlane({self.space})"

    # ---- wiring --------------------------------------------------------------------------

    def server_config(self) -> str:
        return self.trust.server_config()

    @property
    def infra_creds_text(self) -> str:
        return self._infra_creds

    def start(self, url: str) -> "UserAuthPlane":
        self.url = url
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="cotal-auth-plane",
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(20) or self._failed is not None:
            raise RuntimeError(f"the auth plane did not come up: {self._failed}")
        return self

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        url = self.url
        assert url is not None  # start() sets it before this thread runs
        try:
            self.nc = await nats.connect(url, **self._infra.nats_options(), name="cotal-auth-plane",
                                         connect_timeout=5, max_reconnect_attempts=-1)
            js = self.nc.jetstream()
            self.ledger_kv = await ensure_ledger(js, self.space)
            from nats.js.api import KeyValueConfig
            from nats.js.errors import BucketNotFoundError
            try:
                self.accepted_kv = await js.key_value(accepted_bucket(self.space))
            except BucketNotFoundError:
                self.accepted_kv = await js.create_key_value(config=KeyValueConfig(
                    bucket=accepted_bucket(self.space), history=1, direct=True))
            self.callout_nc = await nats.connect(url, **self._service.nats_options(), connect_timeout=5,
                                                 name="cotal-auth-callout", max_reconnect_attempts=-1)
            await self.callout_nc.subscribe(AUTH_SUBJECT, cb=self._on_auth)
            await self.callout_nc.flush()
            await self.public.start()
            await self.loopback.start()
        except BaseException as e:  # noqa: BLE001 - reported to start()
            self._failed = e
            self._ready.set()
            return
        self._ready.set()
        await self._stop.wait()
        await self.public.stop()
        await self.loopback.stop()
        for c in (self.callout_nc, self.nc):
            try:
                await asyncio.wait_for(c.close(), 3)
            except Exception:  # noqa: BLE001 - the plane is stopping; a slow close changes nothing [counted: COTAL_LOG]
                swallowed("cotal_tui.demo.userauth.plane:UserAuthPlane._main")

    async def _on_auth(self, msg) -> None:
        _owned.spawn(self.callout.handle(msg), "auth-callout")

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def run(self, coro, timeout: float = 15):
        """Run ``coro`` on the plane's loop from any thread (or any other loop) and wait for it."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def arun(self, coro, timeout: float = 15):
        """The same from inside another event loop, without blocking it."""
        assert self._loop is not None
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return await asyncio.wait_for(asyncio.wrap_future(fut), timeout)

    def record(self, where: str, outcome: str) -> None:
        self.log.append((where, outcome))

    def refusals(self, where: str = "callout") -> list[str]:
        return [o for w, o in self.log if w == where and o != "ok"]

    @property
    def exchange_url(self) -> str:
        return self.public.url

    @property
    def loopback_url(self) -> str:
        return self.loopback.url

    # ---- users and the ledger ------------------------------------------------------------

    def owner_for(self, sub: str) -> str:
        return derive_owner(self.owner_secret, self.idp.issuer, sub)

    def add_user(self, name: str, scopes, *, actor: str = "cli", sub: str | None = None) -> User:
        """Grant ``name`` (IdP subject ``sub``, default the name) an interactive row for ``actor``."""
        sub = sub or name
        owner = self.owner_for(sub)
        self.run(grant_actor(self.ledger_kv, owner, actor, scopes=list(scopes), label=name))
        u = User(name, sub, owner, actor, frozenset(scopes))
        self.users[name] = u
        return u

    def grant(self, owner: str, actor: str, scopes, **kw) -> ActorRow:
        return self.run(grant_actor(self.ledger_kv, owner, actor, scopes=list(scopes), **kw))

    def revoke(self, owner: str, actor: str, *, kind: str = INTERACTIVE) -> bool:
        return self.run(revoke_actor(self.ledger_kv, owner, actor, kind=kind))

    def grant_agent(self, owner: str, actor: str, *, scopes=(), lifecycle_uid: str,
                    allow_subscribe=(">",), allow_publish=(">",), parent: str | None = None) -> str:
        """A managed-agent row; returns the agent's exchange secret (``actorToken``), once."""
        token = secrets.token_urlsafe(32)
        self.run(grant_managed_actor(self.ledger_kv, owner, actor, scopes=list(scopes), lifecycle_uid=lifecycle_uid,
                                     token_hash=hashlib.sha256(token.encode()).hexdigest(), parent=parent,
                                     allow_subscribe=allow_subscribe, allow_publish=allow_publish))
        return token

    def idp_token(self, name: str, **kw) -> str:
        return self.idp.token(self.users[name].sub if name in self.users else name, **kw)

    async def read_actor(self, owner: str, actor: str) -> ActorRow | None:
        return await read_unified(self.ledger_kv, owner, actor)

    async def kv_value(self, kv, key: str) -> bytes | None:
        from nats.js.errors import KeyNotFoundError
        try:
            e = await kv.get(key)
        except KeyNotFoundError:
            return None
        return e.value or None

    async def authorize_manager_caller(self, owner: str, iid: str) -> None:
        await authorize_manager_caller(self.nc, self.space, owner, iid, local=self.local_manager)

    async def verify_session(self, **kw) -> Session:
        return await verify_session_redemption(self.nc, self.space, local_manager=self.local_manager, **kw)

    # ---- the exchange --------------------------------------------------------------------

    async def route(self, r: Request, *, public: bool) -> tuple[int, object, dict[str, str]]:
        if r.path == "/health":
            if r.method != "GET":
                return 405, {"error": "GET only"}, {}
            return 200, {"ok": True, "issuer": self.issuer.issuer}, {}
        if r.path == "/jwks":
            if r.method != "GET":
                return 405, {"error": "GET only"}, {}
            return 200, self.issuer.jwks(), {"cache-control": "max-age=300"}
        if r.path == "/exchange":
            status, body = await self.handle_exchange(r, public=public)
            self.record("exchange", "ok" if status == 200 else body.get("error", ""))
            return status, body, {}
        return 404, {"error": "unknown path - /health, /jwks, /exchange"}, {}

    async def handle_exchange(self, r: Request, *, public: bool) -> tuple[int, dict]:
        if r.method != "POST":
            return 405, {"error": "POST only"}
        if "origin" in r.headers:
            return 403, {"error": "browser-origin requests are not served here"}
        if not r.headers.get("content-type", "").startswith("application/json"):
            return 415, {"error": "content-type must be application/json"}
        if not public and not hmac.compare_digest(r.headers.get("authorization", ""), f"Bearer {self.cap}"):
            return 401, {"error": "missing/invalid exchange capability - read it from the space's auth-service.json"}
        try:
            body = json.loads(r.body)
        except (ValueError, UnicodeDecodeError):
            return 400, {"error": "request body is not valid JSON"}
        if not isinstance(body, dict):
            return 400, {"error": "exchange needs { idpToken: string, actor: string, ttlSec?: number, view?: string }"}
        try:
            return 200, await self.exchange(body, public=public)
        except ExchangeRefused as e:
            return e.status, {"error": str(e)}

    async def exchange(self, body: dict, *, public: bool) -> dict:
        view, grant, iid, ttl = body.get("view"), body.get("sessionGrant"), body.get("managerInstanceId"), body.get("ttlSec")
        if (view == "session-caller") != (grant is not None):
            raise ExchangeRefused(400, 'view "session-caller" and sessionGrant come together or not at all')
        if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool)):
            raise ExchangeRefused(400, "ttlSec must be a number")
        if view is not None and not isinstance(view, str):
            raise ExchangeRefused(400, "view must be a string when present")
        if iid is not None and not isinstance(iid, str):
            raise ExchangeRefused(400, "managerInstanceId must be a string when present")
        if iid is not None and view != "manager-caller":
            raise ExchangeRefused(400, 'managerInstanceId is valid only with view "manager-caller"')
        if public and view is not None and view not in PUBLIC_EXCHANGE_VIEWS:
            raise ExchangeRefused(403, "elevated views are a loopback operator surface - the public exchange "
                                       "never serves them")
        idp_token, actor_token = body.get("idpToken"), body.get("actorToken")
        if idp_token is not None and actor_token is not None:
            raise ExchangeRefused(400, "exchange takes idpToken (human) OR owner+actorToken (agent), never both")
        if actor_token is not None:
            return await self._agent_exchange(body, view, iid, ttl)
        actor = body.get("actor")
        if not isinstance(idp_token, str) or not idp_token or not isinstance(actor, str) or not actor:
            raise ExchangeRefused(400, "exchange needs { idpToken: string, actor: string, ttlSec?: number, view?: string }")
        try:
            return await self._human_exchange(idp_token, actor, view, iid, ttl, grant)
        except (IdpTokenError, LedgerError, ManagerRefused, RedemptionRefused, ValueError) as e:
            raise ExchangeRefused(401, str(e)) from None

    async def _human_exchange(self, idp_token, actor, view, iid, ttl, grant) -> dict:
        if not is_actor(actor):
            raise ValueError(f"actor {actor[:64]!r} is not an actor name")
        sub, idp_exp = verify_idp_token(idp_token, self.idp)
        owner = self.owner_for(sub)
        selected = await select_manager_instance(self.nc, self.space, owner, iid, local=self.local_manager) \
            if view == "manager-caller" else None
        coords = grant_coordinates(grant) if view == "session-caller" else None
        row = await read_row(self.ledger_kv, INTERACTIVE, owner, actor)
        if row is None:
            if await read_row(self.ledger_kv, MANAGED, owner, actor):
                raise ValueError(f'actor "{actor}" is a managed agent - it authenticates with its own spawn-time '
                                 "secret; interact with it via the mesh")
            raise ValueError(f'actor "{actor}" is not granted for this user - the mesh operator lets them in with '
                             f"`cotal actor grant {actor} --owner {owner} --full`")
        if view == "manager-service":
            raise ValueError('view "manager-service" is not a bearer profile; use the typed manager-service '
                             "authority exchange")
        if view is not None:
            if view not in USER_TOKEN_VIEWS:
                raise ValueError(f'view "{view}" is not a known view ({", ".join(USER_TOKEN_VIEWS)})')
            need = VIEW_REQUIRED_SCOPE.get(view)
            if need is not None and need not in row.scopes:
                raise ValueError(f'the "{view}" view needs scope "{need}", which your grant lacks. Ask the mesh '
                                 f'operator to re-grant the WHOLE ROW with "{need}" ADDED to its scope.')
        if not row.lifecycle_uid:
            raise ValueError(f'idp bridge: the grant for actor "{actor}" carries no lifecycleUid - re-grant it '
                             "(bearers are lifecycle-bound from v0.4)")
        remaining = idp_exp - int(time.time())
        if remaining <= 0:
            raise ValueError("idp bridge: the IdP session proof has expired - cannot mint a bearer")
        session = None
        if coords is not None:
            endpoint, sid, epoch, sig = coords
            session = await self.verify_session(owner=owner, actor=actor, lifecycle_uid=row.lifecycle_uid,
                                                endpoint=endpoint, session_id=sid, epoch=epoch, grant_sig=sig)
        ttl_s = min(ttl if ttl is not None else self.max_ttl_s, self.max_ttl_s, remaining)
        if ttl_s <= 0:
            raise ValueError("ttlSec must be positive")
        now = int(time.time())
        token = self.issuer.issue(owner=owner, actor=actor, scope=row.scopes, lifecycle_uid=row.lifecycle_uid,
                                  credential_id=self._credential_id(row), ttl_s=ttl_s, view=view,
                                  manager_instance_id=selected, session=session, parent=row.parent, now=now)
        out = {"token": token, "owner": owner, "exp": now + ttl_s}
        if selected is not None:
            out["managerInstanceId"] = selected
        return out

    async def _agent_exchange(self, body, view, iid, ttl) -> dict:
        if view is not None and view != "manager-caller":
            raise ExchangeRefused(400, "the managed (agent-secret) exchange never mints elevated views - views "
                                       "ride a signed-in human exchange")
        owner, actor, secret = body.get("owner"), body.get("actor"), body.get("actorToken")
        if not all(isinstance(v, str) and v for v in (owner, actor, secret)):
            raise ExchangeRefused(400, "agent exchange needs { owner: string, actor: string, actorToken: string, "
                                       "ttlSec?: number }")
        refused = ExchangeRefused(401, "agent exchange refused: no managed agent with that secret is granted here")
        try:
            row = await read_row(self.ledger_kv, MANAGED, owner, actor)
        except LedgerError:
            raise refused from None
        digest = hashlib.sha256(secret.encode()).hexdigest()
        if row is None or not hmac.compare_digest(row.token_hash or "", digest):
            raise refused
        try:
            selected = await select_manager_instance(self.nc, self.space, owner, iid, local=self.local_manager) \
                if view == "manager-caller" else None
        except ManagerRefused as e:
            raise ExchangeRefused(401, str(e)) from None
        ttl_s = min(ttl if ttl is not None else AGENT_BEARER_TTL_S, AGENT_BEARER_TTL_S, self.max_ttl_s)
        now, ttl_s = int(time.time()), max(1, ttl_s)
        token = self.issuer.issue(owner=owner, actor=actor, scope=row.scopes, lifecycle_uid=row.lifecycle_uid,
                                  credential_id=self._credential_id(row), ttl_s=ttl_s, view=view,
                                  manager_instance_id=selected, parent=row.parent, now=now)
        out = {"token": token, "owner": owner, "exp": now + ttl_s}
        if selected is not None:
            out["managerInstanceId"] = selected
        return out

    @staticmethod
    def _credential_id(row: ActorRow) -> str:
        """``act.credentialId``: the reference's root-credential row is not modelled; a stable id
        per incarnation stands in (the callout does not check a credential ledger)."""
        return hashlib.sha256(f"{row.owner}.{row.actor}.{row.lifecycle_uid}".encode()).hexdigest()[:26]

    # ---- what a client needs -------------------------------------------------------------

    def write_sentinel(self, path: Path) -> Path:
        return write_secret(path, self.sentinel_text)


def run_in_thread(coro, timeout: float = 60):
    """Run ``coro`` on a fresh loop in a worker thread (callable from sync or async code)."""
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, coro).result(timeout)
