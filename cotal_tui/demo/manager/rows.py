"""What the manager reports about its seats: the AgentRow of ``ps`` and ``inspect`` (the
presence view read fresh), and ``slots`` (the demo keeps no durable static slots)."""

from __future__ import annotations

import json
import math
import socket
import time
from typing import Any

from meshview.wire.endpoint import ParsedRequest

from cotal_tui.demo.manager.base import fail
from cotal_tui.demo.manager.seats import SeatFamily
from cotal_tui.demo.manager.spec import Seat

PRESENCE_TTL_MS = 6000


def _stamp(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _projected(rec: Any) -> dict[str, Any]:
    """The presence facts an AgentRow carries, only in the row schema's own shape (a seat's record
    is its bytes: a ``condition`` that is not ``{code: str, ...}`` is not projected, never sent
    on as something the manager's own output schema would refuse)."""
    out: dict[str, Any] = {}
    cond = rec.get("condition") if isinstance(rec, dict) else None
    if isinstance(cond, dict) and isinstance(cond.get("code"), str):
        c: dict[str, Any] = {"code": cond["code"][:64]}
        for k in ("source", "message"):
            if isinstance(cond.get(k), str):
                c[k] = cond[k][:400]
        since = cond.get("since")
        if _stamp(since):
            c["since"] = since
        out["condition"] = c
    active = rec.get("activeAt") if isinstance(rec, dict) else None
    if _stamp(active):
        out["activeAt"] = active
    return out


class RowFamily(SeatFamily):
    async def _mesh_status(self, seat: Seat) -> tuple[str, int | None, dict[str, Any]]:
        """The seat's presence status (``absent`` without a record), when ``offline`` since when
        (its last heartbeat), and the presence facts a row projects (``condition``, ``activeAt``)."""
        try:
            e = await self._kv["presence"].get(f"{seat.owner}.{seat.actor}")
            rec = json.loads(e.value or b"")
        except Exception:  # noqa: BLE001 - no record, a dead link or bytes that are not JSON all read as `absent`, as upstream's ps
            return "absent", None, {}
        ts = rec.get("ts") if isinstance(rec, dict) else None
        ts = ts if isinstance(ts, int) and not isinstance(ts, bool) and ts >= 0 else None
        status = rec.get("status") if isinstance(rec, dict) else None
        if ts is None or time.time() * 1000 - ts > PRESENCE_TTL_MS or status == "offline":
            return "offline", ts, {}
        return (status if isinstance(status, str) and status else "absent"), None, _projected(rec)

    async def _row(self, seat: Seat) -> dict[str, Any]:
        """An AgentRow exactly: required keys always, an optional key only when recorded (never
        null). The presence view is read fresh, so it is current and ``meshView`` is omitted."""
        end = seat.exited_at or time.time()
        mesh, offline_since, projected = await self._mesh_status(seat)
        row: dict[str, Any] = {
            "name": seat.spec.name,
            "id": self._row_id(seat),
            "agent": seat.spec.connector,
            "space": self.space,
            "mode": "pty",
            "status": "running" if seat.pty.running else "exited",
            "uptimeMs": max(0, int((end - seat.started) * 1000)),
            "mesh": mesh,
            "lifecycleUid": seat.lifecycle_uid,
            "instanceId": self.instance_id,
            "host": socket.gethostname(),
            "cwd": seat.spec.cwd or self.root,
        }
        if offline_since is not None:
            row["offlineSince"] = offline_since
        row.update(projected)
        if seat.pty.pid:
            row["pid"] = seat.pty.pid
        for key, value in (("role", seat.spec.role), ("spawner", seat.spawner), ("model", seat.spec.model),
                           ("variant", seat.spec.variant)):
            if value:
                row[key] = value
        return row

    async def _cmd_ps(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> list[dict[str, Any]]:
        seats = list(self.seats.values())
        if self.user_mesh and self.USER_OTHER_SCOPE not in await self._user_scopes(parsed):
            seats = [s for s in seats if s.owner == parsed.caller.owner]  # the caller's owner only
        return [await self._row(s) for s in seats]

    async def _cmd_inspect(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        name = str(args["name"]).strip()
        seat = self.seats.get(name)
        if seat is None:
            raise fail("not-found", f'no agent "{name}"')
        return await self._row(seat)

    async def _cmd_slots(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> list[Any]:
        return []  # the demo keeps no durable static-slot rows (its seats live with the process)
