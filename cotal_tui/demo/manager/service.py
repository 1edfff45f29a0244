"""The demo manager assembled from its families, and its life: ``start`` (buckets, connectors,
personas, epoch, contract artifacts, seats, subscriptions, registration, beats), ``stop`` (sessions
drain with ``manager-restart``, seats stop, registry ``exited`` then removed) and ``status``."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import time
from typing import Any

from attach.control.endpoint import publish_closure
from cotal_tui.demo.personas import measure_connectors
from meshview.errors import swallowed, swallowing
from meshview.wire.liveness import QUEUE as LIVE_QUEUE, answer as live_answer, serve_filter as live_filter
from meshview.wire.endpoint import ANY_GENERATION, MANAGER, ParsedRequest, serve_filter

from cotal_tui.demo.manager.catalog import CatalogFamily
from cotal_tui.demo.manager.dispatch import ACTION_COMMANDS, DispatchFamily
from cotal_tui.demo.manager.purge import PurgeFamily
from cotal_tui.demo.manager.registry import HEARTBEAT_S, LEASE_TTL_MS, RegistryFamily
from cotal_tui.demo.manager.rows import RowFamily
from cotal_tui.demo.manager.runs import RunFamily
from cotal_tui.demo.manager.sessions import SessionFamily
from cotal_tui.demo.manager.spawn import SpawnFamily


class DemoManager(DispatchFamily, RegistryFamily, SpawnFamily, RowFamily, SessionFamily, CatalogFamily,
                  RunFamily, PurgeFamily):
    """One §13 manager service: each family owns its commands (``_cmd_<name>``), dispatch finds
    them by name, and the state they share is declared once in :class:`ManagerBase`."""

    async def start(self) -> None:
        js = self.nc.jetstream()
        for name in ("presence", "manager", "records"):
            self._kv[name] = await js.key_value(getattr(self.buckets, name))
        self._kv["sessions"] = await self._sessions_bucket(js)
        self.connectors = dict(self._connectors_override) if self._connectors_override is not None \
            else measure_connectors()  # measured once, at boot
        self.class_spawn = any(c.available for c in self.connectors.values())
        self._seed_personas()
        self.epoch = await self._next_epoch()
        self._started = time.time()
        for schema in self.contract.schema_roots():  # the exact artifacts a client pins
            await publish_closure(self.nc, self.space, schema)
        published = await publish_closure(self.nc, self.space, self.contract.document)
        assert published == self._cluster_digest
        for spec in self.seat_specs:
            self._spawn(spec)
        cb = self._on_request
        for gen in (None, ANY_GENERATION):  # §13.2: an endpoint serves the legacy and the ep.v1 rail
            if self.class_spawn:
                self._subs.append(await self.nc.subscribe(serve_filter(self.space, "one", MANAGER, generation=gen),
                                                          queue="manager", cb=cb))
            else:  # every connector unavailable: unpinned spawn/launch stay for a sibling that can launch
                base = serve_filter(self.space, "one", MANAGER, generation=gen)[:-1]
                for name in self.contract.commands:
                    if name not in ACTION_COMMANDS:
                        self._subs.append(await self.nc.subscribe(base + name + ".>", queue="manager", cb=cb))
                self._subs.append(await self.nc.subscribe(base + "describe.>", queue="manager", cb=cb))
            self._subs.append(await self.nc.subscribe(serve_filter(self.space, "all", MANAGER, generation=gen), cb=cb))
            self._subs.append(await self.nc.subscribe(
                serve_filter(self.space, "inst", MANAGER, self.instance_id, generation=gen), cb=cb))
        self._live_token = secrets.token_hex(8)  # opaque per bind: never the instance id (§6.1)
        self._subs.append(await self.nc.subscribe(live_filter(self.space, "manager"), queue=LIVE_QUEUE,
                                                  cb=self._on_liveness))  # §6.1: the manager plane's rail
        await self.nc.flush()
        await self._register()
        await self._renew_lease()
        await self._heartbeat()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._every(HEARTBEAT_S, self._heartbeat)))
        self._tasks.append(loop.create_task(self._every(LEASE_TTL_MS / 4000, self._renew_lease)))
        await self._start_runs(boot_run=self._boot_run)

    async def stop(self, *, deregister: bool = True) -> None:
        """A graceful stop: every session drains with ``manager-restart``, the seats stop, the
        status goes ``exited``, and (a clean stop) the registration is removed - status first,
        then spec, each pinned to the revision this incarnation wrote. ``deregister=False`` leaves
        the ``exited`` record, as a holder that stopped without cooperating would."""
        if self._stopping:
            return
        self._stopping = True
        if self.run_host is not None:
            await self.run_host.stop()
        for sub in self._subs:
            try:
                await sub.unsubscribe()
            except Exception:  # noqa: BLE001 - stopping: a dead link cannot unsubscribe, and the drain below ends it anyway [counted: COTAL_LOG]
                swallowed("demo.manager.stop")
        self._subs.clear()
        bridges = [b for b, _ in self.sessions.values()]
        for b in bridges:
            b.end("manager-restart")
        await self._wait_bridges(bridges)
        for t in self._tasks:
            t.cancel()
        for seat in self.seats.values():
            seat.stopping = True
            self._settle(seat, "cancelled", {"reason": "manager stopping"})
            await seat.pty.stop()
        for seat in self.seats.values():
            await self._offline(seat)
        with swallowing("demo.manager.service"):  # best effort: the stand-in manager never dies of a side effect
            await self._exit_registry(deregister)
        try:
            await self._kv["manager"].delete(f"lease.{self.instance_id}")
            await self._kv["presence"].put(f"local.{self.actor}", json.dumps(
                self._presence("offline")).encode())
            await self.nc.flush()
        except Exception:  # noqa: BLE001 - stopping: the lease and the offline record expire by TTL if the link is gone [counted: COTAL_LOG]
            swallowed("demo.manager.stop")
        if self._tmp_personas is not None:
            shutil.rmtree(self._tmp_personas, ignore_errors=True)

    async def _on_liveness(self, msg: Any) -> None:
        """§6.1: grade this manager (bound while it serves) for a probe on its own reply rail."""
        if msg.reply and msg.reply.startswith(msg.subject + ".reply."):
            with swallowing("demo.manager.liveness"):  # the asker is gone
                await self.nc.publish(msg.reply, live_answer("manager", "unbound" if self._stopping else "bound",
                                                             self._live_token))

    async def _heartbeat(self) -> None:
        await self._kv["presence"].put(f"local.{self.actor}", json.dumps(self._presence()).encode())
        await self._seat_heartbeats()

    async def _cmd_status(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        return {"instanceId": self.instance_id, "runtime": "pty", "custody": "legacy",
                "agentCount": len(self.seats), "uptimeMs": self._uptime_ms(),
                "connectors": [c.row() for c in self.connectors.values()], "classSpawn": self.class_spawn,
                # no durable static slots, so no reconciliation ever ran or failed
                "staticReconciliation": {"state": "idle", "failures": []}}
