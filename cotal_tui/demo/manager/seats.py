"""The pty seats: start one from its spec, watch its output and exit, heartbeat its presence
while it runs (``working``, ``waiting`` with the condition its program wrote, ``idle``), and stop
it (``despawn``: graceful SIGHUP + SIGTERM to the program's group, SIGKILL after a grace; force:
SIGKILL at once); ``input`` types text into its pty."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from typing import Any

from attach.session.host import PtySeat, _default_env
from meshview.errors import swallowed, swallowing
from meshview.wire.endpoint import ParsedRequest
from meshview.wire.outbound import PROTOCOL_VERSION, mint_lifecycle_uid

from cotal_tui.demo.manager.authz import AuthzFamily
from cotal_tui.demo.manager.base import fail
from cotal_tui.demo.manager.goals import GoalFamily
from cotal_tui.demo.manager.spec import Seat, SeatSpec, argv_for, read_condition

WORKING_S = 3.0  # a spawned seat that printed this recently heartbeats `working`


class SeatFamily(GoalFamily, AuthzFamily):
    def _spawn(self, spec: SeatSpec) -> Seat:
        owner, _, actor = spec.principal_id.partition(".")
        if not actor:
            owner, actor = "local", spec.principal_id
        env = None
        if spec.condition_file:
            env = {**_default_env(), "COTAL_SEAT_CONDITION": spec.condition_file}
        pty = PtySeat(argv_for(spec), cols=spec.cols, rows=spec.rows, cwd=spec.cwd or self.root, env=env)
        seat = Seat(spec, owner, actor, mint_lifecycle_uid(), pty, time.time())
        pty.exit_listeners.append(lambda rc: self._on_exit(seat, rc))
        pty.listeners.append(lambda data: self._on_output(seat))
        pty.start()
        self.seats[spec.name] = seat
        return seat

    def _on_exit(self, seat: Seat, rc: int | None = None) -> None:
        seat.exited_at = time.time()
        for b in list(seat.sessions):
            b.end("process-exit")
        if not seat.stopping:
            data: dict[str, Any] = {"name": seat.spec.name}
            if rc is not None:
                data["exitCode"] = rc
            self._settle(seat, "failed", data)
            self._later(self._offline(seat))

    def _on_output(self, seat: Seat) -> None:
        seat.last_output = time.time()
        if seat.spec.presence and seat.joined_at is None and not seat.stopping:
            seat.joined_at = seat.last_output  # the program is up: it joins the mesh
            self._later(self._join(seat))
        elif (seat.spec.condition_file and seat.joined_at is not None and not seat.stopping
              and os.path.exists(seat.spec.condition_file) != seat.waiting):
            seat.waiting = not seat.waiting  # it began or stopped waiting: say so now, not next beat
            self._later(self._put_seat_presence(seat))

    async def _join(self, seat: Seat) -> None:
        try:
            await self._put_seat_presence(seat)
        except Exception:  # noqa: BLE001 - any failed presence write is retried on the next output
            seat.joined_at = None  # retried on the next output
            return
        if seat.spec.prompt:  # the initial prompt, typed once the program is up
            with swallowing("demo.manager.seats"):  # best effort: the stand-in manager never dies of a side effect
                await seat.pty.write(seat.spec.prompt.encode("utf-8", "replace") + b"\r")
        goal = seat.goal
        if goal is not None and not goal.settled:
            await self._progress(goal, {"phase": "presence"})
        data = {"name": seat.spec.name, "agent": seat.spec.connector, "id": self._row_id(seat), "mode": "pty",
                "lifecycleUid": seat.lifecycle_uid}
        if seat.spec.role:
            data["role"] = seat.spec.role
        self._settle(seat, "succeeded", data)

    def _row_id(self, seat: Seat) -> str:
        return seat.actor if seat.owner == "local" else f"{seat.owner}.{seat.actor}"

    # ---- presence -------------------------------------------------------------------------

    def _seat_presence(self, seat: Seat, status: str) -> dict[str, Any]:
        spec = seat.spec
        card = {"id": f"{seat.owner}.{seat.actor}", "name": spec.name, "kind": "agent", "owner": seat.owner,
                "actor": seat.actor, "role": spec.role or spec.connector, "protocolVersion": PROTOCOL_VERSION,
                "description": spec.description or "", "tags": ["demo", "spawned"],
                "meta": {"connector": spec.connector, "host": socket.gethostname(), "manager": self.instance_id}}
        rec: dict[str, Any] = {"card": card, "status": status, "ts": int(time.time() * 1000),
                               "lifecycleUid": seat.lifecycle_uid}
        if status != "offline":
            rec["attention"] = "open"
        return rec

    async def _put_seat_presence(self, seat: Seat) -> None:
        busy = time.time() - seat.last_output < WORKING_S
        cond = read_condition(seat.spec.condition_file)
        seat.waiting = cond is not None
        rec = self._seat_presence(seat, "waiting" if cond else "working" if busy else "idle")
        if cond is not None:
            rec["condition"] = cond
            rec["statusSince"] = cond["since"]
        await self._kv["presence"].put(f"{seat.owner}.{seat.actor}", json.dumps(rec).encode())

    async def _seat_heartbeats(self) -> None:
        for seat in list(self.seats.values()):
            if seat.spec.presence and seat.joined_at is not None and seat.pty.running and not seat.stopping:
                await self._put_seat_presence(seat)

    async def _offline(self, seat: Seat) -> None:
        """A spawned seat that joined leaves with an offline record (never a silent TTL lapse)."""
        if not seat.spec.presence or seat.joined_at is None:
            return
        try:
            rec = self._seat_presence(seat, "offline")
            await self._kv["presence"].put(f"{seat.owner}.{seat.actor}", json.dumps(rec).encode())
            await self.nc.flush()
        except Exception:  # noqa: BLE001 - the record lapses by TTL if it cannot be written [counted: COTAL_LOG]
            swallowed("demo.manager.seat-offline")

    # ---- stop -----------------------------------------------------------------------------

    async def despawn(self, name: str, graceful: bool = True) -> dict[str, Any] | None:
        """Stop a seat and forget it: its sessions end with ``target-despawn``; graceful sends
        SIGHUP + SIGTERM to the program's group and SIGKILL after the grace, force SIGKILL at
        once. Returns the reply (``graceful`` says whether the program ended without SIGKILL)."""
        seat = self.seats.pop(name, None)
        if seat is None:
            return None
        seat.stopping = True
        self._settle(seat, "cancelled", {"reason": "despawned before it joined"})
        bridges = list(seat.sessions)
        for b in bridges:
            b.end("target-despawn")
        await self._wait_bridges(bridges)
        ended_gracefully = await self._kill(seat, graceful)
        await self._offline(seat)
        return {"name": name, "stopped": True, "graceful": ended_gracefully}

    async def _kill(self, seat: Seat, graceful: bool) -> bool:
        pty = seat.pty
        if not pty.running or pty.proc is None:
            return True
        pgid = pty.proc.pid  # the program leads its own session and process group
        if graceful:
            for sig in (signal.SIGHUP, signal.SIGTERM):
                try:
                    os.killpg(pgid, sig)
                except ProcessLookupError:
                    pass
            try:
                await asyncio.wait_for(pty.exited.wait(), self.stop_grace_s)
                return True
            except asyncio.TimeoutError:
                pass
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await pty.stop(timeout=2.0)  # reaps it and closes the pty
        return False

    # ---- commands -------------------------------------------------------------------------

    async def _cmd_despawn(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        seat = await self._authorized_seat(parsed, env)
        if seat.stopping:
            raise fail("conflict", f"seat {seat.spec.name} is already stopping")
        out = await self.despawn(seat.spec.name, graceful=args.get("graceful", True) is not False)
        if out is None:
            raise fail("expired", f"seat {seat.spec.name} is no longer a live managed agent of this manager")
        return out

    async def _cmd_input(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        seat = await self._authorized_seat(parsed, env)
        if not seat.pty.running:
            raise fail("failed-precondition", f"seat {seat.spec.name} is not running (exited)")
        data = args["text"].encode("utf-8", "replace") + (b"\r" if args.get("enter", True) else b"")
        await seat.pty.write(data)
        return {"name": seat.spec.name, "bytes": len(data)}
