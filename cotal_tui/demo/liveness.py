"""The demo's side of the §6.1 plane-liveness rail: a responder per plane, and a stand-in
delivery plane (the lease a delivery daemon holds plus its responder) that can be told to stop
answering, so ``cotal status --components`` and the console's health segment can show
``unbound`` on a demo.

A responder answers only a request whose reply subject is the request's own ``.reply.<nonce>``
(§6.1): a probe cannot point the answer somewhere else.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Any, Callable

from meshview.errors import swallowed, swallowing
from meshview.wire import liveness as lw
from meshview.wire.names import bucket_names

LEASE_RENEW_S = 5.0  # well inside the delivery bucket's 30 s TTL


class LivenessResponder:
    """Answers ``live.<plane>.*.*`` in the responders' queue group, grading itself by ``grade``."""

    def __init__(self, nc: Any, space: str, plane: str, grade: Callable[[], str]) -> None:
        self.nc, self.space, self.plane, self.grade = nc, space, lw.check_plane(plane), grade
        self.instance = secrets.token_hex(8)  # opaque, minted at bind: says "same one", nothing else
        self._sub: Any = None

    @property
    def serving(self) -> bool:
        return self._sub is not None

    async def start(self) -> None:
        if self._sub is None:
            self._sub = await self.nc.subscribe(lw.serve_filter(self.space, self.plane), queue=lw.QUEUE,
                                                cb=self._on)
            await self.nc.flush()

    async def stop(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            with swallowing("demo.liveness.stop"):  # a closed link has no subscription left anyway
                await sub.unsubscribe()
                await self.nc.flush()

    async def _on(self, msg: Any) -> None:
        if not msg.reply or not msg.reply.startswith(msg.subject + ".reply."):
            return
        try:
            await self.nc.publish(msg.reply, lw.answer(self.plane, self.grade(), self.instance))
        except Exception:  # noqa: BLE001 - the asker is gone: nothing to answer [counted: COTAL_LOG]
            swallowed("demo.liveness.answer")


class DeliveryStandIn:
    """A stand-in delivery daemon: the shard-0 lease in ``cotal_delivery_<space>`` (renewed, ready)
    and the delivery responder. :meth:`set_answering` (False) stops both, as a daemon that died
    would: the probe then finds no responder (``unbound``) and the lease ages out."""

    def __init__(self, nc: Any, space: str, holder: str = "local.cotal-demo-delivery") -> None:
        self.nc, self.space, self.holder = nc, space, holder
        self.responder = LivenessResponder(nc, space, "delivery", lambda: "bound")
        self._task: asyncio.Task | None = None

    @property
    def answering(self) -> bool:
        return self.responder.serving

    async def _renew(self) -> None:
        kv = await self.nc.jetstream().key_value(bucket_names(self.space).delivery)
        while True:
            with swallowing("demo.liveness.renew"):  # a missed renew ages the lease; that is the signal
                await kv.put(lw.LEASE_KEY, json.dumps({
                    "holder": self.holder, "incarnation": self.responder.instance,
                    "since": int(time.time() * 1000), "ready": True}).encode())
            await asyncio.sleep(LEASE_RENEW_S)

    async def set_answering(self, on: bool) -> None:
        if on and not self.answering:
            self._task = asyncio.get_running_loop().create_task(self._renew())
            await self.responder.start()
        elif not on:
            await self.stop()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        await self.responder.stop()
