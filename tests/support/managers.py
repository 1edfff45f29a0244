"""In-process demo managers for the control tests, each on a connection of its own."""

from __future__ import annotations

import nats

from cotal_tui.demo.manager import DemoManager, SeatSpec


class Managers:
    """In-process demo managers, each on a connection of its own."""

    def __init__(self, broker, space: str, tmp_path) -> None:
        self.broker, self.space, self.tmp = broker, space, tmp_path
        self.running: list[tuple[DemoManager, object]] = []

    async def start(self, *seats: str, **kw) -> DemoManager:
        nc = await nats.connect(self.broker.url)
        m = DemoManager(nc, self.space, [SeatSpec(s, f"local.{s}") for s in seats],
                        root=str(self.tmp / f"m{len(self.running)}"), **kw)
        await m.start()
        self.running.append((m, nc))
        return m

    async def stop(self) -> None:
        for m, nc in self.running:
            await m.stop()
            await nc.close()
