"""The whole demo mesh on one machine: broker + provisioned space + scripted team + manager.

It runs on its own thread and event loop so that whatever sits on top (the Textual console,
the plain stream, a benchmark) owns the main loop and cannot starve the team or the manager.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

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

    def __post_init__(self) -> None:
        self.broker = Broker(port=self.port, name="cotal-demo")
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
            nc = await nats.connect(self.url, name="cotal-demo-team", max_reconnect_attempts=-1)
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
        mgr = DemoManager(nc, self.space, seats)
        await mgr.start()
        return mgr

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

    def __enter__(self) -> "DemoMesh":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
