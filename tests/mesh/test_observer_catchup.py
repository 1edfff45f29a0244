"""A dropped observer link (broker still up) is healed: messages stored meanwhile come back."""

from __future__ import annotations

import asyncio

from meshview.link.connect import ConnectTarget, connect
from meshview.model.mesh import MeshModel
from meshview.observe.observer import Observer, ObserverOptions
from conftest import until
from meshview.tasks import reap
from support.observer import post


class CuttableProxy:
    """A loopback TCP proxy whose live connections can be cut, like a node dying under us."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.conns: list[asyncio.StreamWriter] = []
        self.pipes: list[asyncio.Task] = []  # held so a pipe is not collected mid-copy
        self.accepting = True

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        if not self.accepting:
            w.close()
            return
        ur, uw = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.conns += [w, uw]

        async def pipe(src, dst):
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except Exception:
                pass
            finally:
                dst.close()
        self.pipes += [asyncio.create_task(pipe(r, uw)), asyncio.create_task(pipe(ur, w))]

    def cut(self) -> None:
        for w in self.conns:
            w.transport.abort()
        self.conns.clear()

    async def close(self) -> None:
        self.cut()
        self.server.close()
        await reap(self.pipes)


async def test_gap_is_filled_from_history_after_reconnect(broker, nc, space):
    proxy = CuttableProxy(broker.port)
    port = await proxy.start()
    onc, target = await connect(ConnectTarget((f"nats://127.0.0.1:{port}",), space, timeout=3))
    model = MeshModel(space, record_events=True)
    obs = Observer(onc, space, model, options=ObserverOptions(backfill=0))
    await obs.start()
    try:
        await post(nc, space, "ada", "general", "before")
        await until(lambda: any(e.text == "before" for e in model.snapshot().feed))
        proxy.accepting = False
        proxy.cut()
        await until(lambda: model.snapshot().status.connection == "reconnecting")
        gap = [await post(nc, space, "bram", "general", f"during {i}") for i in range(3)]
        proxy.accepting = True
        await until(lambda: model.snapshot().status.connection == "connected", timeout=15)
        await until(lambda: sum(e.text.startswith("during") for e in model.snapshot().feed) == 3,
                    timeout=10)
        await post(nc, space, "ada", "general", "after")
        await until(lambda: any(e.text == "after" for e in model.snapshot().feed))
        feed = [e for e in model.snapshot().feed if e.kind == "channel"]
        ids = [i for e in feed for i in e.ids]
        assert len(ids) == len(set(ids)), "no duplicate rows"
        caught = [e for e in feed if e.text.startswith("during")]
        assert all(e.historical for e in caught)  # read back from the stream, marked so
        assert {e.id for e in caught} == {m["id"] for m in gap}
        assert [e.text for e in feed] == ["before", "during 0", "during 1", "during 2", "after"]
    finally:
        await obs.stop()
        await onc.close()
        await proxy.close()
