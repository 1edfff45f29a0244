"""Hand-built wire traffic for observer/stream tests (deterministic, no demo team)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from meshview.link.connect import ConnectTarget, connect
from meshview.model.mesh import MeshModel
from meshview.observe.observer import Observer, ObserverOptions
from meshview.wire.names import bucket_names


def now_ms() -> int:
    return int(time.time() * 1000)


def presence(name: str, status: str = "idle", *, ts: int | None = None, uid: str | None = None,
             role: str | None = None, kind: str = "agent", **extra: Any) -> dict:
    pid = f"local.{name}"
    card = {"id": pid, "name": name, "kind": kind, "owner": "local", "actor": name,
            "protocolVersion": "0.4"}
    if role:
        card["role"] = role
    rec = {"card": card, "status": status, "ts": ts if ts is not None else now_ms(),
           "lifecycleUid": uid or (name * 26)[:26]}
    rec.update(extra)
    return rec


async def put_presence(nc, space: str, rec: dict) -> None:
    kv = await nc.jetstream().key_value(bucket_names(space).presence)
    await kv.put(rec["card"]["id"], json.dumps(rec).encode())


def message(space: str, sender: str, text: str, *, mid: str | None = None, **route: Any) -> dict:
    m = {"id": mid or str(uuid.uuid4()), "ts": now_ms(), "space": space,
         "from": {"id": f"local.{sender}", "name": sender}, "parts": [{"kind": "text", "text": text}]}
    m.update(route)
    return m


async def post(nc, space: str, sender: str, channel: str, text: str, *, mid: str | None = None,
               role: str | None = None, js: bool = True) -> dict:
    m = message(space, sender, text, mid=mid, channel=channel)
    if role:
        m["from"]["role"] = role
    subj = f"cotal.{space}.chat.local.{sender}.{channel}"
    data = json.dumps(m).encode()
    if js:
        await nc.jetstream().publish(subj, data, headers={"Nats-Msg-Id": m["id"]})
    else:
        await nc.publish(subj, data)
    return m


async def dm(nc, space: str, sender: str, to: str, text: str, *, mid: str | None = None) -> dict:
    m = message(space, sender, text, mid=mid, to=f"local.{to}")
    subj = f"cotal.{space}.inst.local.{to}.local.{sender}"
    await nc.jetstream().publish(subj, json.dumps(m).encode(), headers={"Nats-Msg-Id": m["id"]})
    return m


async def anycast(nc, space: str, sender: str, role: str, text: str) -> dict:
    m = message(space, sender, text, toService=role)
    await nc.publish(f"cotal.{space}.svc.{role}.local.{sender}", json.dumps(m).encode())
    return m


class Heartbeat:
    """Agents that re-put their presence every ``period`` seconds until stopped."""

    def __init__(self, nc, space: str, period: float = 2.0) -> None:
        self.nc, self.space, self.period = nc, space, period
        self.recs: dict[str, dict] = {}
        self.last_ts: dict[str, int] = {}
        self.task: asyncio.Task | None = None

    def add(self, name: str, **kw: Any) -> None:
        self.recs[name] = kw

    def drop(self, name: str) -> None:
        self.recs.pop(name, None)

    async def beat(self) -> None:
        for name, kw in list(self.recs.items()):
            ts = now_ms()
            try:
                await put_presence(self.nc, self.space, presence(name, ts=ts, **kw))
                self.last_ts[name] = ts
            except Exception:
                pass

    async def _loop(self) -> None:
        while True:
            await self.beat()
            await asyncio.sleep(self.period)

    def start(self) -> None:
        self.task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass

    async def __aenter__(self) -> "Heartbeat":
        """Beat once (so the records are there), then keep beating until the block ends."""
        await self.beat()
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def start_observer(url: str, space: str, **opts) -> tuple[Observer, MeshModel]:
    nc, target = await connect(ConnectTarget((url,), space, timeout=3))
    model = MeshModel(space, record_events=True)
    obs = Observer(nc, space, model, has_credential=target.has_credential,
                   options=ObserverOptions(**opts))
    await obs.start()
    return obs, model


async def close(obs: Observer) -> None:
    await obs.stop()
    await obs.nc.close()
