"""A user-auth Cotal mesh for tests: a real operator-mode ``nats-server`` whose AUTH account
delegates to the auth callout of :mod:`cotal_tui.demo.userauth` (exchange faces, IdP stand-in,
actors ledger), the space provisioned through an infrastructure user.

``start_user_plane(space)`` is synchronous (it backs any fixture scope); the module-scoped
pytest fixture is ``user_plane``. ``max_ttl_s`` lowers the bearer lifetime so a test can cross
an expiry. Import it as ``from support.userplane import user_plane  # noqa: F401``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import nats
import pytest

from cotal_tui.demo.broker import Broker
from cotal_tui.demo.provision import provision_space
from cotal_tui.demo.userauth.home import write_user_home
from cotal_tui.demo.userauth.plane import User, UserAuthPlane, run_in_thread, write_secret
from meshview.link.auth import user_nonce


@dataclass
class UserPlane:
    space: str
    plane: UserAuthPlane
    broker: Broker
    dir: Path
    sentinel_creds: Path
    infra_creds: Path
    homes: dict[str, Path] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.broker.url

    @property
    def exchange_url(self) -> str:
        return self.plane.exchange_url

    @property
    def loopback_url(self) -> str:
        return self.plane.loopback_url

    @property
    def cap(self) -> str:
        return self.plane.cap

    def add_user(self, name: str, scopes, **kw) -> User:
        return self.plane.add_user(name, scopes, **kw)

    def idp_token(self, user: str | User, **kw) -> str:
        return self.plane.idp_token(user.name if isinstance(user, User) else user, **kw)

    async def service_nc(self, **kw) -> nats.NATS:
        """An infrastructure connection of the data account (what the demo manager holds)."""
        kw.setdefault("connect_timeout", 5)
        return await nats.connect(self.url, user_credentials=str(self.infra_creds), **kw)

    async def connect(self, bearer: str, *, name: str | None = None, **kw) -> nats.NATS:
        """A raw user-mode connection: the sentinel creds, the bearer as token, the connect
        name = the inbox nonce (the reference's ``standaloneConnectOpts``)."""
        conn_id = name or user_nonce()
        kw.setdefault("allow_reconnect", False)
        kw.setdefault("connect_timeout", 3)
        kw.setdefault("max_reconnect_attempts", 0)
        return await nats.connect(self.url, user_credentials=str(self.sentinel_creds), token=bearer,
                                  name=conn_id, inbox_prefix=f"_INBOX_{conn_id}", **kw)

    def home_for(self, user: str | User) -> Path:
        """A COTAL_HOME with the user-mesh registry entry (CONTRACTS item 3), made current."""
        u = self.plane.users[user.name if isinstance(user, User) else user]
        if u.name in self.homes:
            return self.homes[u.name]
        home = self.dir / f"home-{u.name}"
        write_user_home(home, space=self.space, server=self.url, exchange=self.exchange_url,
                   sentinel_text=self.plane.sentinel_text, idp_token=self.idp_token(u))
        self.homes[u.name] = home
        return home

    def stop(self) -> None:
        self.plane.stop()
        self.broker.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_user_plane(space: str = "ua", *, max_ttl_s: int = 900) -> UserPlane:
    d = Path(tempfile.mkdtemp(prefix="cotal-userplane-"))
    os.chmod(d, 0o700)
    plane = UserAuthPlane(space, max_ttl_s=max_ttl_s, operator_name="cotal-userplane")
    broker = Broker(name="cotal-userplane", extra_config=plane.server_config()).start()
    sentinel = plane.write_sentinel(d / "sentinel.creds")
    infra = write_secret(d / "infra.creds", plane.infra_creds_text)
    try:
        run_in_thread(_provision(broker.url, infra, plane.space))
        plane.start(broker.url)
    except BaseException:
        broker.stop()
        shutil.rmtree(d, ignore_errors=True)
        raise
    return UserPlane(plane.space, plane, broker, d, sentinel, infra)


async def _provision(url: str, creds: Path, space: str) -> None:
    nc = await nats.connect(url, user_credentials=str(creds), connect_timeout=5)
    try:
        await provision_space(nc, space)
    finally:
        await nc.close()


@pytest.fixture(scope="module")
def user_plane():
    p = start_user_plane()
    yield p
    p.stop()


def post_sync(url: str, body: object, headers: dict[str, str] | None = None, *, raw: bytes | None = None,
              method: str = "POST") -> tuple[int, dict]:
    data = raw if raw is not None else json.dumps(body).encode()
    h = {"content-type": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=data if method == "POST" else None, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


async def post(url: str, body: object, headers: dict[str, str] | None = None, **kw) -> tuple[int, dict]:
    """``POST`` JSON without blocking the test's loop (the plane serves on its own thread)."""
    return await asyncio.to_thread(post_sync, url, body, headers, **kw)
