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
from support.jwt import (
    AuthSpace,
    MintedUser,
    admin_permissions,
    agent_permissions,
    observer_permissions,
    write_creds,
)
from cotal_tui.demo.provision import provision_space

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
        self._event = asyncio.Event()

    async def cb(self, e: Exception) -> None:
        """Pass as ``error_cb=log.cb`` (nats-py wants a coroutine function)."""
        self.errors.append(str(e))
        self._event.set()

    async def wait_for(self, needle: str, timeout: float = 3.0) -> str:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for e in self.errors:
                if needle.lower() in e.lower():
                    return e
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise AssertionError(f"no error containing {needle!r}; saw {self.errors!r}")
            self._event.clear()
            try:
                await asyncio.wait_for(self._event.wait(), left)
            except asyncio.TimeoutError:
                pass
