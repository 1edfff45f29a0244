"""The whole demo mesh on one machine: broker + provisioned space + scripted team + manager.

It runs on its own thread and event loop so that whatever sits on top (the Textual console,
the plain stream, a benchmark) owns the main loop and cannot starve the team or the manager.

``auth="static"`` runs the mesh the way ``cotal up`` runs a secured one: the broker in operator
mode (operator, system account and the space's data account, resolver preloaded), the trust
material at ``<root>/.cotal/auth/auth.json`` and a registry entry (``mode: auth``, ``root``) in
``home`` made current, so ``cotal watch``/``ps``/``attach`` and the control verbs find the mesh
and mint their own credentials from the seed. The team and the manager hold infrastructure
credentials; every attach session is served on a connection of its own whose credential
reaches that session's two rails and nothing else.

``auth="user"`` runs a user-auth mesh (SPEC §9, §10, App. B): the broker in operator mode with an
AUTH account whose callout is the demo's auth plane (``cotal_tui/demo/userauth``: the exchange,
the IdP stand-in, the actors ledger), two signed-in users — an ``admin``-scoped operator and an
ordinary user with ``spawn`` — each with a ``COTAL_HOME`` of its own (``home/<user>``: the
registry entry with ``mode: user``, the exchange URL, the sentinel creds and the user's IdP
token), the scripted team as ``u_…`` principals of the two users (managed-agent rows in the
ledger, the team itself on an infrastructure connection), and the demo manager as the
co-located manager of the signer-holding host (``svc`` owner ``local``, the plane's local
manager candidate for every owner's ``manager-caller``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import threading
import time
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

import nats

from cotal_tui.demo.broker import Broker
from cotal_tui.demo.provision import provision_space
from cotal_tui.demo.team import Agent, Team, TeamSchedule


def grant_team_agent(plane, agent: Agent) -> str:
    """A scripted agent's managed-agent row: it posts as itself only (every ``chat`` subject
    carries its own principal), so its event channel ``events.<owner>.<actor>`` is covered
    and no other agent's is. Returns the row's exchange secret."""
    return plane.grant_agent(agent.owner, agent.name, lifecycle_uid=agent.lifecycle_uid,
                             parent=f"{agent.owner}.cli")


@dataclass
class DemoMesh:
    space: str = "main"
    seed: int = 1
    agents: int = 6
    rate: float | None = None
    shell: bool = False
    manager: bool = True
    port: int = 0
    schedule: TeamSchedule = field(default_factory=TeamSchedule)
    auth: str = "open"  # open | static | user
    home: str | None = None  # static: the COTAL_HOME that gets the registry entry (a temp dir if None);
    # user: the directory holding one COTAL_HOME per user (home/<user>)
    delivery_down: bool = False  # the stand-in delivery plane starts not answering (§6.1 unbound)
    as_user: str | None = None  # user: whose home is ``home_for_user`` (default: the operator)
    users: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("olivia", ("admin", "spawn", "supervise", "run")), ("sam", ("spawn",)))

    def __post_init__(self) -> None:
        if self.auth not in ("open", "static", "user"):
            raise ValueError(f"auth must be open, static or user, not {self.auth!r}")
        self.trust = None
        self.plane = None
        self.root: str | None = None
        self._own_home = False
        self.user_homes: dict[str, Path] = {}
        extra = ""
        if self.auth == "user":
            from cotal_tui.demo.userauth.plane import UserAuthPlane

            names = [n for n, _ in self.users]
            if self.as_user is not None and self.as_user not in names:
                raise ValueError(f"--as-user {self.as_user!r} is not a demo user ({', '.join(names)})")
            if self.home is None:
                self.home = tempfile.mkdtemp(prefix="cotal-home-")
                self._own_home = True
            os.chmod(self.home, 0o700)
            self.plane = UserAuthPlane(self.space, operator_name="cotal-demo")
            extra = self.plane.server_config()
        if self.auth == "static":
            from cotal_tui.demo.trust import SpaceTrust

            if self.home is None:
                self.home = tempfile.mkdtemp(prefix="cotal-home-")
                self._own_home = True
            os.chmod(self.home, 0o700)
            self.trust = SpaceTrust(self.space, operator_name="cotal-demo")
            self.root = str(Path(self.home) / "project")
            extra = self.trust.server_config()
        self.broker = Broker(port=self.port, name="cotal-demo", extra_config=extra)
        self.team: Team | None = None
        self.mgr = None
        self.delivery: Any = None  # the stand-in delivery plane (cotal_tui.demo.liveness)
        self._asking_dir = None  # the asking seat's condition file lives here (tempfile)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return self.broker.url

    def start(self, timeout: float = 30.0) -> "DemoMesh":
        self.broker.start()
        if self.trust is not None:
            self._record()
        if self.plane is not None:
            try:
                self._start_plane()
            except BaseException:
                self.stop()
                raise
        self._thread = threading.Thread(target=self._run, name="cotal-demo-mesh", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise RuntimeError("the demo mesh did not come up in time")
        if self._error:
            err = self._error
            self.stop()
            raise err
        return self

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        nc = None
        try:
            nc = await nats.connect(self.url, name="cotal-demo-team", max_reconnect_attempts=-1,
                                    **self._infra_options())
            await provision_space(nc, self.space)
            owners = tuple(u.owner for u in self.plane.users.values()) if self.plane is not None else None
            by_owner: dict[str, Any] = {"owners": owners} if owners else {}  # else Team's default owner
            self.team = Team(nc, self.space, seed=self.seed, agents=self.agents,
                             rate=self.rate, schedule=self.schedule, **by_owner)
            if self.plane is not None:
                self._grant_team()  # before any agent shows up: its row exists first
            await self.team.start()
            if self.manager:
                self.mgr = await self._start_manager(nc)
            from cotal_tui.demo.liveness import DeliveryStandIn

            self.delivery = DeliveryStandIn(nc, self.space)
            await self.delivery.set_answering(not self.delivery_down)
        except BaseException as e:  # noqa: BLE001 - surfaced to start()
            self._error = e
            self._ready.set()
            if nc is not None:
                await nc.close()
            return
        self._ready.set()
        await self._stop.wait()
        if self.delivery is not None:
            await self.delivery.stop()
        if self.mgr is not None:
            await self.mgr.stop()
        if self._asking_dir is not None:
            self._asking_dir.cleanup()
        await self.team.stop()
        await nc.drain()

    async def _start_manager(self, nc):
        try:
            from cotal_tui.demo.manager import DemoManager, SeatSpec
        except ImportError:
            return None  # attach not built in this checkout: the mesh still runs
        assert self.team is not None
        seats = []
        for i, a in enumerate(self.team.members):
            kind = "shell" if self.shell else ("fullscreen" if i % 3 == 2 else "line")
            seats.append(SeatSpec(name=a.name, principal_id=a.id, kind=kind,
                                  incarnation=lambda a=a: a.lifecycle_uid))
        if self.plane is None and not self.shell:  # one seat that really asks (triage, T)
            import tempfile

            from cotal_tui.demo.asking import asking_seat

            self._asking_dir = tempfile.TemporaryDirectory(prefix="cotal-asking-")
            seats.append(asking_seat(self._asking_dir.name))
        mgr = DemoManager(nc, self.space, seats,
                          session_connect=self._serving_connect if self._signer is not None else None,
                          user_mesh=self.plane is not None,
                          # a static mesh hosts runs: one waits at a checkpoint from the start
                          boot_run="release-checklist" if self._signer is not None and self.plane is None
                          else None)
        await mgr.start()
        if self.plane is not None:  # the co-located manager: every owner's local candidate
            self.plane.local_manager = mgr.instance_id
        return mgr

    # ---- static auth -------------------------------------------------------------------

    def _infra_options(self) -> dict:
        """nats-py options for the team and the manager: an allow-all infrastructure user of
        the data account on a static mesh (what ``cotal up`` runs its daemons with), else none."""
        if self._signer is None:
            return {}
        return self._signer.root_seed.mint("infra", None).nats_options()

    @property
    def _signer(self):
        """The trust chain whose data-account signing key this host holds (static or user)."""
        return self.trust if self.trust is not None else (self.plane.trust if self.plane is not None else None)

    async def _serving_connect(self, grant: dict):
        """A connection on one session's serving credential (sub ``in``, pub ``out``)."""
        from meshview.link.auth import mint_session_serving

        cred = mint_session_serving(self._signer.root_seed, self.space,
                                    (grant["endpoint"], grant["sessionId"], grant["serving"]["epoch"]),
                                    grant["exp"])
        return await nats.connect(self.url, name="cotal-demo-session", allow_reconnect=False,
                                  **cred.nats_options())

    def _record(self) -> None:
        """The seed at ``<root>/.cotal/auth`` and the registry entry, made current."""
        assert self.trust is not None and self.home is not None and self.root is not None
        self.trust.save(self.root)
        meshes = Path(self.home) / "meshes"
        meshes.mkdir(parents=True, exist_ok=True)
        os.chmod(meshes, 0o700)
        entry = {"space": self.space, "server": self.url, "root": self.root, "mode": "auth",
                 "origin": "up", "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        path = meshes / f"{self.space}.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, json.dumps(entry, indent=2).encode())
        finally:
            os.close(fd)
        (Path(self.home) / "current-mesh").write_text(self.space + "\n")

    # ---- user auth ---------------------------------------------------------------------

    def _start_plane(self) -> None:
        """The auth plane on the running broker, the two users and one COTAL_HOME each."""
        from cotal_tui.demo.userauth.home import write_user_home

        assert self.plane is not None and self.home is not None
        self.plane.start(self.url)
        for name, scopes in self.users:
            self.plane.add_user(name, scopes)
            self.user_homes[name] = write_user_home(
                Path(self.home) / name, space=self.space, server=self.url, exchange=self.plane.exchange_url,
                sentinel_text=self.plane.sentinel_text, idp_token=self.plane.idp_token(name, ttl_s=24 * 3600))

    def _grant_team(self) -> None:
        """Each scripted agent is a managed-agent row of its owner, spawned by that owner's ``cli``."""
        assert self.plane is not None and self.team is not None
        for a in self.team.members:
            grant_team_agent(self.plane, a)

    @property
    def home_for_user(self) -> str | None:
        """The COTAL_HOME this process (and the console) acts in: ``as_user``'s, else the operator's."""
        if not self.user_homes:
            return self.home
        return str(self.user_homes[self.as_user or self.users[0][0]])

    def user_order(self) -> list[tuple[str, tuple[str, ...], Path]]:
        """The users with their scopes and homes, the one acted as first."""
        first = self.as_user or self.users[0][0]
        rows = [(n, s, self.user_homes[n]) for n, s in self.users]
        return sorted(rows, key=lambda r: r[0] != first)

    def call(self, coro, timeout: float = 30.0):
        """Run a coroutine on the mesh's loop (tests: crash an agent, despawn a seat)."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def set_delivery(self, answering: bool) -> None:
        """Let the stand-in delivery plane answer its liveness probe and renew its lease, or stop
        both (the verdict turns ``unbound``), from any thread."""
        if self.delivery is not None:
            self.call(self.delivery.set_answering(answering))

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            if self._thread.is_alive():
                self._loop.call_soon_threadsafe(self._stop.set)
                self._thread.join(15)
        if self.plane is not None:
            self.plane.stop()
        self.broker.stop()
        if self._own_home and self.home:
            shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> "DemoMesh":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
