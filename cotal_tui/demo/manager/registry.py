"""The manager as a registered service: its epoch, the ``svc.manager.<iid>`` spec and status
records (``ready``, ``exited``, then removed on a clean stop), its liveness lease and its own
presence card."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from nats.js.errors import KeyNotFoundError

from meshview.wire.endpoint import MANAGER
from meshview.wire.outbound import PROTOCOL_VERSION

from cotal_tui.demo.manager.base import ManagerBase

HEARTBEAT_S = 2.0
LEASE_TTL_MS = 10_000
# Process-wide memory of the last epoch each instance served, for managers without a root to
# persist it in: a clean stop deregisters (the status record with its epoch is deleted), and a
# restart of the same instance must still advance its epoch.
_LAST_EPOCH: dict[tuple[str, str], int] = {}


class RegistryFamily(ManagerBase):
    def _epoch_file(self) -> Path | None:
        return Path(self._own_root) / ".cotal" / "manager-epoch" if self._own_root else None

    async def _next_epoch(self) -> int:
        """One past every epoch this instance is known to have served: its status record (a
        crashed predecessor never deregistered), the root's epoch file, this process's memory."""
        seen = _LAST_EPOCH.get((self.space, self.instance_id), 0)
        try:
            entry = await self._kv["records"].get(self._status_key)
            prev = json.loads(entry.value or b"")
            seen = max(seen, int(prev.get("epoch", 0)))
        except (KeyNotFoundError, ValueError, TypeError, AttributeError):
            pass
        f = self._epoch_file()
        if f is not None:
            with contextlib.suppress(OSError, ValueError):
                seen = max(seen, int(f.read_text().strip()))
        epoch = seen + 1
        _LAST_EPOCH[(self.space, self.instance_id)] = epoch
        if f is not None:
            with contextlib.suppress(OSError):
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(f"{epoch}\n")
        return epoch

    @property
    def _spec_key(self) -> str:
        return f"svc.manager.{self.instance_id}.spec"

    @property
    def _status_key(self) -> str:
        return f"svc.manager.{self.instance_id}.status"

    async def _register(self) -> None:
        """The ``svc`` spec (its store revision is the registration revision), then the status
        ``ready`` that observed it."""
        records = self._kv["records"]
        self.spec_revision = await records.put(self._spec_key, json.dumps({
            "endpoint": MANAGER, "owner": "local", "clusterDigests": [self._cluster_digest],
            "protocol": {"v": 1},
        }).encode())
        self.status_revision = await records.put(self._status_key, json.dumps(self._status_record("ready")).encode())
        self.registry_state = "ready"

    def _status_record(self, state: str) -> dict[str, Any]:
        return {"epoch": self.epoch, "state": state, "observedSpecRevision": self.spec_revision}

    async def _exit_registry(self, deregister: bool) -> None:
        records = self._kv["records"]
        if self.status_revision is None:
            return
        self.status_revision = await records.update(self._status_key, json.dumps(
            self._status_record("exited")).encode(), last=self.status_revision)
        self.registry_state = "exited"
        if not deregister:
            return
        await records.delete(self._status_key, last=self.status_revision)
        await records.delete(self._spec_key, last=self.spec_revision)
        self.registry_state = None

    def _presence(self, status: str = "idle") -> dict[str, Any]:
        card = {"id": f"local.{self.actor}", "name": f"manager-{self.instance_id[:6]}", "kind": "endpoint",
                "owner": "local", "actor": self.actor, "role": "manager", "protocolVersion": PROTOCOL_VERSION,
                "meta": {"host": socket.gethostname()}}
        return {"card": card, "status": status, "ts": int(time.time() * 1000), "lifecycleUid": self.uid}

    async def _renew_lease(self) -> None:
        await self._kv["manager"].put(f"lease.{self.instance_id}", json.dumps({
            "holder": f"local.{self.actor}", "instanceId": self.instance_id, "runtime": "pty",
            "root": self.root, "pid": os.getpid(), "since": int(self._started * 1000),
        }).encode())
