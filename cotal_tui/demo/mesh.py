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
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nats

from cotal_tui.demo.broker import Broker
from cotal_tui.demo.provision import provision_space
from cotal_tui.demo.team import Team, TeamSchedule


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
    auth: str = "open"  # open | static
    home: str | None = None  # static: the COTAL_HOME that gets the registry entry (a temp dir if None)

    def __post_init__(self) -> None:
        if self.auth not in ("open", "static"):
            raise ValueError(f"auth must be open or static, not {self.auth!r}")
        self.trust = None
        self.root: str | None = None
        self._own_home = False
        extra = ""
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
            self.team = Team(nc, self.space, seed=self.seed, agents=self.agents,
                             rate=self.rate, schedule=self.schedule)
            await self.team.start()
            if self.manager:
                self.mgr = await self._start_manager(nc)
        except BaseException as e:  # surfaced to start()
            self._error = e
            self._ready.set()
            if nc is not None:
                await nc.close()
            return
        self._ready.set()
        await self._stop.wait()
        if self.mgr is not None:
            await self.mgr.stop()
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
            seats.append(SeatSpec(name=a.name, principal_id=a.id, kind=kind))
        mgr = DemoManager(nc, self.space, seats,
                          session_connect=self._serving_connect if self.trust is not None else None)
        await mgr.start()
        return mgr

    # ---- static auth -------------------------------------------------------------------

    def _infra_options(self) -> dict:
        """nats-py options for the team and the manager: an allow-all infrastructure user of
        the data account on a static mesh (what ``cotal up`` runs its daemons with), else none."""
        if self.trust is None:
            return {}
        return self.trust.root_seed.mint("infra", None).nats_options()

    async def _serving_connect(self, grant: dict):
        """A connection on one session's serving credential (sub ``in``, pub ``out``)."""
        from meshview.auth import mint_session_serving

        cred = mint_session_serving(self.trust.root_seed, self.space,
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

    def call(self, coro, timeout: float = 30.0):
        """Run a coroutine on the mesh's loop (tests: crash an agent, despawn a seat)."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            if self._thread.is_alive():
                self._loop.call_soon_threadsafe(self._stop.set)
                self._thread.join(15)
        self.broker.stop()
        if self._own_home and self.home:
            shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> "DemoMesh":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
