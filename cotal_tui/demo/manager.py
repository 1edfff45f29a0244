"""The demo manager: a §13 `manager` endpoint on an open mesh serving real pty seats.

It registers like a reference manager (presence as an endpoint with role ``manager``, a liveness
lease, ``svc.manager.<iid>.{spec,status}`` records, contract documents in ``EPC_<space>``) and
answers ``describe`` / ``status`` / ``ps`` / ``inspect`` / ``attach`` on the class, scatter and
instance rails. ``attach`` mints a holder-bound session grant, writes the ``session.<id>`` ledger
row, opens the serving rail and starts a :class:`~attach.host.ServingBridge`.

The control verbs: ``spawn`` starts a seat from a small persona catalogue (the echo line
program, the dashboard, bash) and answers at once with the action acceptance; the goal then
settles on the epe progress rail with the first fact - the seat joined (its presence record,
written once the program is up), its program exited first, or the readiness deadline passed.
``despawn`` stops a seat (graceful: SIGHUP + SIGTERM to the program's group, SIGKILL after a
grace; force: SIGKILL), ``input`` types text into a seat's pty, ``goal-result`` re-reads a
settled goal. A spawned seat heartbeats presence like any agent (the manager writes it on the
program's behalf) and goes offline when it stops or exits.

On an open mesh nothing is minted per session and the sessions share the manager's connection.
A session whose caller falls silent (no frame, not even an idle credit, for ``caller_silence_ms``)
is reaped, so a caller that vanished without a ``close`` cannot pin a ``maxSessions`` slot.

Size: over 500 lines because the demo manager is one §13 service (ops, seats, sessions,
personas) that `cotal demo`, the tests and the benches start as a unit.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from nats.js.api import KeyValueConfig
from nats.js.errors import BucketNotFoundError, KeyNotFoundError

from attach.endpoint import publish_closure
from attach.host import PtySeat, ServingBridge
from attach.rail import STALL_TIMEOUT_MS, WINDOW_DEFAULT, check_window, open_rail
from meshview.wire.canonical import VOID_SCHEMA, canonical_bytes, digest
from meshview.wire.endpoint import (
    MANAGER,
    Caller,
    ParsedRequest,
    eps_subject,
    goal_progress_subject,
    is_seat_name,
    parse_request,
    reply_subject,
    serve_filter,
)
from meshview.wire.envelope import BIND_REFUSED, EndpointError, reply_body, validate_request
from meshview.wire.names import bucket_names, space_token
from meshview.wire.outbound import PROTOCOL_VERSION, mint_lifecycle_uid

HEARTBEAT_S = 2.0
LEASE_TTL_MS = 10_000
GRANT_TTL_MS = 24 * 3600 * 1000
CONTRACT_REVISION = 17
# A live caller says something every second (data, credit or the idle re-advertisement); one
# silent this long vanished without a close (kill -9, a cut link) and its slot is reaped. As
# long as the stall bound: a false reap costs a user their session, so err on the slow side.
CALLER_SILENCE_MS = STALL_TIMEOUT_MS
PROGRAMS = Path(__file__).resolve().parent / "programs"
READINESS_MS = 30_000  # a spawn goal left unsettled this long ends `uncertain`
STOP_GRACE_S = 3.0  # graceful stop: SIGKILL this long after SIGHUP + SIGTERM
MAX_AGENTS = 50
INPUT_MAX = 65536
GOALS_KEPT = 256
WORKING_S = 3.0  # a spawned seat that printed this recently heartbeats `working`


@dataclass(frozen=True)
class Persona:
    """What ``spawn`` can start: a program kind (see :func:`argv_for`) and the card's role."""

    kind: str
    role: str
    description: str
    argv: tuple[str, ...] | None = None


PERSONAS: dict[str, Persona] = {
    "echo": Persona("line", "echo", "the echo line program: a prompt that echoes each line"),
    "dashboard": Persona("fullscreen", "dashboard", "a full-screen live dashboard"),
    "bash": Persona("shell", "shell", "an interactive bash"),
}


@dataclass
class SeatSpec:
    name: str
    principal_id: str
    kind: str = "line"  # "line" | "fullscreen" | "shell"
    cols: int = 100
    rows: int = 30
    argv: list[str] | None = None
    role: str | None = None
    persona: str | None = None
    presence: bool = False  # the manager heartbeats this seat's presence (spawned seats)


@dataclass
class _Goal:
    goal_id: str
    caller: Caller
    seat: str
    settled: bool = False
    timer: asyncio.TimerHandle | None = None


@dataclass
class _Seat:
    spec: SeatSpec
    owner: str
    actor: str
    lifecycle_uid: str
    pty: PtySeat
    started: float
    exited_at: float | None = None
    sessions: set = field(default_factory=set)
    joined_at: float | None = None
    last_output: float = 0.0
    spawner: str | None = None
    goal: _Goal | None = None
    stopping: bool = False


def argv_for(spec: SeatSpec) -> list[str]:
    if spec.argv:
        return list(spec.argv)
    if spec.kind == "fullscreen":
        return [sys.executable, str(PROGRAMS / "dashboard.py")]
    if spec.kind == "shell":
        return ["bash", "--noprofile", "--norc", "-i"]
    return [sys.executable, str(PROGRAMS / "echo_line.py"), spec.name]


# ---- the contract ----------------------------------------------------------------------------

_STRING = {"type": "string"}
INSPECT_INPUT = {"type": "object", "properties": {"name": _STRING}, "required": ["name"],
                 "additionalProperties": False}
ROW_SCHEMA = {"type": "object", "required": ["name", "id", "agent", "space", "mode", "status",
                                              "uptimeMs", "mesh", "lifecycleUid"]}
PS_OUTPUT = {"type": "array", "items": ROW_SCHEMA}
STATUS_OUTPUT = {"type": "object", "required": ["instanceId", "runtime", "agentCount", "uptimeMs"]}
ATTACH_OUTPUT = {"type": "object", "properties": {"grant": {"type": "object"}}, "required": ["grant"]}
DESPAWN_INPUT = {"type": ["object", "null"], "properties": {"graceful": {"type": "boolean"}},
                 "additionalProperties": False}
DESPAWN_OUTPUT = {"type": "object", "required": ["name", "stopped", "graceful"]}
SPAWN_INPUT = {"type": "object", "properties": {"name": {"type": "string", "minLength": 1},
                                                 "identity": {"type": "string", "minLength": 1}},
               "required": ["name"], "additionalProperties": False}
SPAWN_OUTPUT = {"type": "object", "required": ["name", "owner", "actor", "uid", "goalId", "fingerprint",
                                               "executor"]}
INPUT_INPUT = {"type": "object", "properties": {"text": {"type": "string", "minLength": 1, "maxLength": INPUT_MAX},
                                                 "enter": {"type": "boolean"}},
               "required": ["text"], "additionalProperties": False}
INPUT_OUTPUT = {"type": "object", "required": ["name", "bytes"]}
GOAL_INPUT = {"type": "object", "properties": {"goalId": _STRING}, "required": ["goalId"],
              "additionalProperties": False}
GOAL_OUTPUT = {"type": "object", "required": ["goalId"]}

_SCHEMAS = {
    "void": VOID_SCHEMA, "inspect-in": INSPECT_INPUT, "row": ROW_SCHEMA, "ps-out": PS_OUTPUT,
    "status-out": STATUS_OUTPUT, "attach-out": ATTACH_OUTPUT, "despawn-in": DESPAWN_INPUT,
    "despawn-out": DESPAWN_OUTPUT, "spawn-in": SPAWN_INPUT, "spawn-out": SPAWN_OUTPUT,
    "input-in": INPUT_INPUT, "input-out": INPUT_OUTPUT, "goal-in": GOAL_INPUT, "goal-out": GOAL_OUTPUT,
}

# name -> (capability, input schema, output schema, targeted)
COMMANDS: dict[str, tuple[str, str, str, bool]] = {
    "status": ("manager.read", "void", "status-out", False),
    "ps": ("manager.read", "void", "ps-out", False),
    "inspect": ("manager.read", "inspect-in", "row", False),
    "goal-result": ("manager.read", "goal-in", "goal-out", False),
    "spawn": ("manager.spawn", "spawn-in", "spawn-out", False),
    "attach": ("manager.lifecycle", "void", "attach-out", True),
    "despawn": ("manager.lifecycle", "despawn-in", "despawn-out", True),
    "input": ("manager.lifecycle", "input-in", "input-out", True),
}


def cluster_document(d: dict[str, str]) -> dict:
    def cmd(name, cap, i, o, targeted):
        c = {"name": name, "class": "ephemeral", "targeted": targeted, "capability": cap,
             "inputDigest": d[i], "outputDigest": d[o]}
        if targeted:
            c["modes"] = ["owner", "any"]
        return c

    return {
        "urn": "ai.cotal.manager",
        "revision": CONTRACT_REVISION,
        "attributes": [],
        "commands": [cmd(name, *row) for name, row in COMMANDS.items()],
        "events": [],
    }


def _load_or_mint_instance_id(root: str | None) -> str:
    if root is None:
        return mint_lifecycle_uid()
    p = Path(root) / ".cotal" / "manager-instance-id"
    try:
        v = p.read_text().strip()
        if v:
            return v
    except OSError:
        pass
    v = mint_lifecycle_uid()
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(v + "\n")
    return v


class DemoManager:
    def __init__(self, nc, space: str, seats: list[SeatSpec], *, instance_id: str | None = None,
                 max_sessions: int = 64, root: str | None = None, window: int = WINDOW_DEFAULT,
                 caller_silence_ms: int = CALLER_SILENCE_MS, personas: dict[str, Persona] | None = None,
                 readiness_ms: int = READINESS_MS, stop_grace_s: float = STOP_GRACE_S,
                 session_connect=None):
        self.nc = nc
        # static auth: grant -> a connection on that session's own serving credential (pub
        # `out`, sub `in`), so only the holder of its session-caller credential reaches it
        self.session_connect = session_connect
        self._session_ncs: dict[str, object] = {}
        self.space = space_token(space)
        self.seat_specs = list(seats)
        self.instance_id = instance_id or _load_or_mint_instance_id(root)
        self.epoch = 0
        self.max_sessions = max_sessions
        self.root = root or os.getcwd()
        self.window = check_window(window)
        self.caller_silence_ms = caller_silence_ms  # 0: never reap a silent caller
        self.buckets = bucket_names(self.space)
        self.actor = self.instance_id
        self.uid = mint_lifecycle_uid()
        self.seats: dict[str, _Seat] = {}
        self.sessions: dict[str, tuple[ServingBridge, _Seat]] = {}
        self._subs: list = []
        self._tasks: list[asyncio.Task] = []
        self._handlers: set[asyncio.Task] = set()
        self._signing_key = secrets.token_bytes(32)
        self._started = 0.0
        self._cluster_digest = ""
        self._kv: dict[str, object] = {}
        self._stopping = False
        self.personas = dict(PERSONAS if personas is None else personas)
        self.readiness_ms = readiness_ms
        self.stop_grace_s = stop_grace_s
        self._goals: dict[str, dict] = {}  # goalId -> terminal progress body (bounded)

    # ---- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        js = self.nc.jetstream()
        for name in ("presence", "manager", "records"):
            self._kv[name] = await js.key_value(getattr(self.buckets, name))
        self._kv["sessions"] = await self._sessions_bucket(js)
        records = self._kv["records"]
        try:
            prev = json.loads((await records.get(f"svc.manager.{self.instance_id}.status")).value)
            self.epoch = int(prev.get("epoch", 0)) + 1
        except (KeyNotFoundError, ValueError, TypeError):
            self.epoch = 1
        self._started = time.time()
        digests = {k: await publish_closure(self.nc, self.space, v) for k, v in _SCHEMAS.items()}
        self._cluster_digest = await publish_closure(self.nc, self.space, cluster_document(digests))
        for spec in self.seat_specs:
            self._spawn(spec)
        cb = self._on_request
        self._subs.append(await self.nc.subscribe(serve_filter(self.space, "one", MANAGER), queue="manager", cb=cb))
        self._subs.append(await self.nc.subscribe(serve_filter(self.space, "all", MANAGER), cb=cb))
        self._subs.append(await self.nc.subscribe(
            serve_filter(self.space, "inst", MANAGER, self.instance_id), cb=cb))
        await self.nc.flush()
        spec_rev = await records.put(f"svc.manager.{self.instance_id}.spec", json.dumps({
            "endpoint": MANAGER, "owner": "local", "clusterDigests": [self._cluster_digest],
            "protocol": {"v": 1},
        }).encode())
        await records.put(f"svc.manager.{self.instance_id}.status", json.dumps({
            "epoch": self.epoch, "state": "serving", "observedSpecRevision": spec_rev,
        }).encode())
        await self._renew_lease()
        await self._heartbeat()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._every(HEARTBEAT_S, self._heartbeat)))
        self._tasks.append(loop.create_task(self._every(LEASE_TTL_MS / 4000, self._renew_lease)))

    async def _sessions_bucket(self, js):
        name = f"cotal_sessions_{self.space}"
        try:
            return await js.key_value(name)
        except BucketNotFoundError:
            try:
                return await js.create_key_value(config=KeyValueConfig(bucket=name, history=1))
            except Exception:
                return await js.key_value(name)

    async def stop(self) -> None:
        """A graceful stop drains every session with ``manager-restart``, then the seats."""
        if self._stopping:
            return
        self._stopping = True
        for sub in self._subs:
            try:
                await sub.unsubscribe()
            except Exception:
                pass
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
        try:
            await self._kv["records"].put(f"svc.manager.{self.instance_id}.status", json.dumps(
                {"epoch": self.epoch, "state": "stopped"}).encode())
            await self._kv["manager"].delete(f"lease.{self.instance_id}")
            await self._kv["presence"].put(f"local.{self.actor}", json.dumps(
                self._presence("offline")).encode())
            await self.nc.flush()
        except Exception:
            pass

    async def _wait_bridges(self, bridges: list[ServingBridge], timeout: float = 5.0) -> None:
        if bridges:
            await asyncio.wait([asyncio.ensure_future(b.done.wait()) for b in bridges], timeout=timeout)

    async def despawn(self, name: str, graceful: bool = True) -> dict | None:
        """Stop a seat and forget it: its sessions end with ``target-despawn``; graceful sends
        SIGHUP + SIGTERM to the program's group and SIGKILL after the grace, force SIGKILL at
        once. Returns the reply (``graceful`` says whether the program ended without SIGKILL)."""
        seat = self.seats.pop(name, None)
        if seat is None:
            return None
        seat.stopping = True
        self._settle(seat, "cancelled", {"reason": "despawned before it joined"})
        bridges = [b for b in seat.sessions]
        for b in bridges:
            b.end("target-despawn")
        await self._wait_bridges(bridges)
        ended_gracefully = await self._kill(seat, graceful)
        await self._offline(seat)
        return {"name": name, "stopped": True, "graceful": ended_gracefully}

    async def _kill(self, seat: _Seat, graceful: bool) -> bool:
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

    async def _every(self, period: float, fn) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:
                pass  # a missed beat is retried on the next tick

    def _presence(self, status: str = "idle") -> dict:
        card = {"id": f"local.{self.actor}", "name": f"manager-{self.instance_id[:6]}", "kind": "endpoint",
                "owner": "local", "actor": self.actor, "role": "manager", "protocolVersion": PROTOCOL_VERSION,
                "meta": {"host": socket.gethostname()}}
        return {"card": card, "status": status, "ts": int(time.time() * 1000), "lifecycleUid": self.uid}

    async def _heartbeat(self) -> None:
        await self._kv["presence"].put(f"local.{self.actor}", json.dumps(self._presence()).encode())
        for seat in list(self.seats.values()):
            if seat.spec.presence and seat.joined_at is not None and seat.pty.running and not seat.stopping:
                await self._put_seat_presence(seat)

    def _seat_presence(self, seat: _Seat, status: str) -> dict:
        spec = seat.spec
        card = {"id": f"{seat.owner}.{seat.actor}", "name": spec.name, "kind": "agent", "owner": seat.owner,
                "actor": seat.actor, "role": spec.role or spec.kind, "protocolVersion": PROTOCOL_VERSION,
                "description": self.personas[spec.persona].description if spec.persona in self.personas else "",
                "tags": ["demo", "spawned"],
                "meta": {"connector": spec.persona or spec.kind, "host": socket.gethostname(),
                         "manager": self.instance_id}}
        rec = {"card": card, "status": status, "ts": int(time.time() * 1000), "lifecycleUid": seat.lifecycle_uid}
        if status != "offline":
            rec["attention"] = "open"
        return rec

    async def _put_seat_presence(self, seat: _Seat) -> None:
        busy = time.time() - seat.last_output < WORKING_S
        rec = self._seat_presence(seat, "working" if busy else "idle")
        await self._kv["presence"].put(f"{seat.owner}.{seat.actor}", json.dumps(rec).encode())

    async def _offline(self, seat: _Seat) -> None:
        """A spawned seat that joined leaves with an offline record (never a silent TTL lapse)."""
        if not seat.spec.presence or seat.joined_at is None:
            return
        try:
            rec = self._seat_presence(seat, "offline")
            await self._kv["presence"].put(f"{seat.owner}.{seat.actor}", json.dumps(rec).encode())
            await self.nc.flush()
        except Exception:
            pass

    async def _renew_lease(self) -> None:
        await self._kv["manager"].put(f"lease.{self.instance_id}", json.dumps({
            "holder": f"local.{self.actor}", "instanceId": self.instance_id, "runtime": "pty",
            "root": self.root, "pid": os.getpid(), "since": int(self._started * 1000),
        }).encode())

    # ---- seats ----------------------------------------------------------------------------

    def _spawn(self, spec: SeatSpec) -> _Seat:
        owner, _, actor = spec.principal_id.partition(".")
        if not actor:
            owner, actor = "local", spec.principal_id
        pty = PtySeat(argv_for(spec), cols=spec.cols, rows=spec.rows, cwd=self.root)
        seat = _Seat(spec, owner, actor, mint_lifecycle_uid(), pty, time.time())
        pty.exit_listeners.append(lambda rc, s=seat: self._on_exit(s, rc))
        pty.listeners.append(lambda data, s=seat: self._on_output(s))
        pty.start()
        self.seats[spec.name] = seat
        return seat

    def _on_exit(self, seat: _Seat, rc: int | None = None) -> None:
        seat.exited_at = time.time()
        for b in list(seat.sessions):
            b.end("process-exit")
        if not seat.stopping:
            self._settle(seat, "failed", {"name": seat.spec.name, "exitCode": rc})
            self._later(self._offline(seat))

    def _on_output(self, seat: _Seat) -> None:
        seat.last_output = time.time()
        if seat.spec.presence and seat.joined_at is None and not seat.stopping:
            seat.joined_at = seat.last_output  # the program is up: it joins the mesh
            self._later(self._join(seat))

    async def _join(self, seat: _Seat) -> None:
        try:
            await self._put_seat_presence(seat)
        except Exception:
            seat.joined_at = None  # retried on the next output
            return
        goal = seat.goal
        if goal is not None and not goal.settled:
            await self._progress(goal, {"phase": "presence"})
        self._settle(seat, "succeeded", {"name": seat.spec.name, "agent": seat.spec.kind,
                                         "id": seat.actor, "mode": "pty", "lifecycleUid": seat.lifecycle_uid,
                                         "role": seat.spec.role or seat.spec.kind})

    def _later(self, coro) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._handlers.add(t)
        t.add_done_callback(self._handlers.discard)

    # ---- spawn goals ----------------------------------------------------------------------

    async def _progress(self, goal: _Goal, body: dict) -> None:
        c = goal.caller
        subj = goal_progress_subject(self.space, MANAGER, self.instance_id, self.epoch, c, goal.goal_id)
        try:
            await self.nc.publish(subj, json.dumps({"v": 1, "goalId": goal.goal_id, **body},
                                                   separators=(",", ":")).encode())
        except Exception:
            pass

    def _settle(self, seat: _Seat, state: str, data: dict | None = None) -> None:
        """First fact wins: the goal's terminal progress, kept for ``goal-result``."""
        goal = seat.goal
        if goal is None or goal.settled:
            return
        goal.settled = True
        if goal.timer is not None:
            goal.timer.cancel()
        body = {"phase": "terminal", "state": state}
        if data is not None:
            body["data"] = data
        self._goals[goal.goal_id] = body
        while len(self._goals) > GOALS_KEPT:
            self._goals.pop(next(iter(self._goals)))
        self._later(self._progress(goal, body))

    async def _start_spawn(self, parsed: ParsedRequest, env: dict) -> dict:
        args = env.get("args") or {}
        persona = args.get("name") if isinstance(args, dict) else None
        if not isinstance(persona, str) or not persona:
            raise EndpointError("bad-request", "spawn needs {name: persona}", outcome="not-executed")
        p = self.personas.get(persona)
        if p is None:
            known = ", ".join(sorted(self.personas))
            raise EndpointError("not-found", f"no persona named {persona!r} (this manager knows {known})",
                                outcome="not-executed")
        name = args.get("identity")
        if name is not None:
            if not is_seat_name(name):
                raise EndpointError("bad-request", f"{name!r} is not a seat name (a letter, then up to 31 "
                                    "letters, digits, '_' or '-')", outcome="not-executed")
            if name in self.seats:
                raise EndpointError("already-exists", f"a seat named {name!r} already runs on this manager",
                                    outcome="not-executed")
        else:
            name, n = persona, 1
            while name in self.seats:
                n += 1
                name = f"{persona}_{n}"
        if len(self.seats) >= MAX_AGENTS:
            raise EndpointError("resource-exhausted", f"this manager already runs {MAX_AGENTS} seats",
                                outcome="not-executed")
        actor = secrets.token_hex(12)  # a fresh principal per incarnation, like an nkey on open meshes
        spec = SeatSpec(name=name, principal_id=f"local.{actor}", kind=p.kind,
                        argv=list(p.argv) if p.argv else None, role=p.role, persona=persona, presence=True)
        goal = _Goal(env["id"], parsed.caller, name)
        seat = self._spawn(spec)
        seat.spawner = parsed.caller.principal
        seat.goal = goal
        loop = asyncio.get_running_loop()
        goal.timer = loop.call_later(self.readiness_ms / 1000, self._settle, seat, "uncertain",
                                     {"name": name, "readinessDeadlineMs": self.readiness_ms})
        return {"name": name, "owner": seat.owner, "actor": seat.actor, "uid": seat.lifecycle_uid,
                "goalId": goal.goal_id, "fingerprint": digest({"persona": persona, "name": name}),
                "readinessDeadlineMs": self.readiness_ms,
                "executor": {"lifecycleUid": self.uid, "epoch": self.epoch}}

    async def _input(self, seat: _Seat, env: dict) -> dict:
        args = env.get("args") or {}
        text = args.get("text") if isinstance(args, dict) else None
        enter = args.get("enter", True) if isinstance(args, dict) else True
        if not isinstance(text, str) or not text or len(text) > INPUT_MAX:
            raise EndpointError("bad-request", f"input needs {{text}} of 1 to {INPUT_MAX} characters",
                                outcome="not-executed")
        if not isinstance(enter, bool):
            raise EndpointError("bad-request", "input.enter is not a boolean", outcome="not-executed")
        if not seat.pty.running:
            raise EndpointError("failed-precondition", f"seat {seat.spec.name} is not running (exited)",
                                outcome="not-executed")
        data = text.encode("utf-8", "replace") + (b"\r" if enter else b"")
        await seat.pty.write(data)
        return {"name": seat.spec.name, "bytes": len(data)}

    async def _mesh_status(self, seat: _Seat) -> str:
        try:
            e = await self._kv["presence"].get(f"{seat.owner}.{seat.actor}")
            rec = json.loads(e.value)
        except Exception:
            return "absent"
        if time.time() * 1000 - rec.get("ts", 0) > 6000:
            return "offline"
        return rec.get("status", "absent")

    async def _row(self, seat: _Seat) -> dict:
        end = seat.exited_at or time.time()
        row = {
            "name": seat.spec.name,
            "id": seat.actor if seat.owner == "local" else f"{seat.owner}.{seat.actor}",
            "agent": seat.spec.kind,
            "space": self.space,
            "mode": "pty",
            "status": "running" if seat.pty.running else "exited",
            "uptimeMs": int((end - seat.started) * 1000),
            "mesh": await self._mesh_status(seat),
            "meshView": "current",
            "lifecycleUid": seat.lifecycle_uid,
            "instanceId": self.instance_id,
            "host": socket.gethostname(),
            "cwd": self.root,
            "cols": seat.pty.cols,  # the pane opens at the seat's real size (late-attach repaint)
            "rows": seat.pty.rows,
        }
        if seat.pty.pid:
            row["pid"] = seat.pty.pid
        if seat.spec.role:
            row["role"] = seat.spec.role
        if seat.spawner:
            row["spawner"] = seat.spawner
        return row

    # ---- requests -------------------------------------------------------------------------

    async def _on_request(self, msg) -> None:
        t = asyncio.get_running_loop().create_task(self._handle(msg))
        self._handlers.add(t)
        t.add_done_callback(self._handlers.discard)

    async def _handle(self, msg) -> None:
        parsed = parse_request(msg.subject)
        if parsed is None or parsed.endpoint != MANAGER:
            return  # not a subject of our grammar: no sender, MUST NOT be handled
        if parsed.route == "inst" and parsed.instance_id != self.instance_id:
            return
        try:
            reply_to = reply_subject(self.space, MANAGER, self.instance_id, self.epoch, parsed.caller, parsed.nonce)
        except ValueError:
            return
        req_id = "unknown"
        try:
            env = validate_request(parsed, msg.data)
            req_id = env["id"]
            data = await self._dispatch(parsed, env)
            body = reply_body(req_id, data=data)
        except EndpointError as e:
            if req_id == "unknown":
                try:
                    req_id = json.loads(msg.data).get("id") or "unknown"
                except Exception:
                    pass
            body = reply_body(req_id if isinstance(req_id, str) else "unknown", error=e)
        except Exception as e:  # a handler bug answers `internal`, never silence
            body = reply_body(req_id, error=EndpointError("internal", f"{type(e).__name__}: {e}", outcome="unknown"))
        try:
            await self.nc.publish(reply_to, body)
        except Exception:
            pass

    async def _dispatch(self, parsed: ParsedRequest, env: dict) -> object:
        cmd = parsed.command
        if cmd == "describe":
            return {"public": False, "descriptor": {
                "endpoint": MANAGER, "owner": "local",
                "clusters": [{"digest": self._cluster_digest, "commands": list(COMMANDS)}]}}
        self._check_bind(env)
        if cmd not in COMMANDS:
            raise EndpointError("unimplemented", f"manager does not serve {cmd!r}", outcome="not-executed")
        targeted = COMMANDS[cmd][3]
        if targeted and (parsed.target is None or parsed.target.mode not in ("owner", "any")):
            raise EndpointError("target-mismatch", f"{cmd} admits the owner/any modes only", outcome="not-executed")
        if not targeted and parsed.target is not None:
            raise EndpointError("target-mismatch", f"{cmd} is untargeted", outcome="not-executed")
        if self._stopping:
            raise EndpointError("unavailable", "manager is stopping", outcome="not-executed")
        if cmd == "status":
            return {"instanceId": self.instance_id, "runtime": "pty", "custody": "legacy",
                    "agentCount": len(self.seats), "uptimeMs": int((time.time() - self._started) * 1000),
                    "connectors": [], "classSpawn": False, "staticReconciliation": {"state": "idle"},
                    "sessions": len(self.sessions), "maxSessions": self.max_sessions, "epoch": self.epoch}
        if cmd == "ps":
            return [await self._row(s) for s in list(self.seats.values())]
        if cmd == "inspect":
            args = env.get("args") or {}
            name = args.get("name") if isinstance(args, dict) else None
            if not isinstance(name, str):
                raise EndpointError("bad-request", "inspect needs {name}", outcome="not-executed")
            seat = self.seats.get(name)
            if seat is None:
                raise EndpointError("not-found", f"no seat named {name!r} on this manager", outcome="not-executed")
            return await self._row(seat)
        if cmd == "goal-result":
            args = env.get("args") or {}
            gid = args.get("goalId") if isinstance(args, dict) else None
            if not isinstance(gid, str):
                raise EndpointError("bad-request", "goal-result needs {goalId}", outcome="not-executed")
            out: dict = {"goalId": gid}
            if gid in self._goals:
                out["result"] = self._goals[gid]
            return out
        if cmd == "spawn":
            return await self._start_spawn(parsed, env)
        seat = self._target_seat(parsed, env)
        if cmd == "despawn":
            args = env.get("args") or {}
            graceful = args.get("graceful", True) if isinstance(args, dict) else True
            if not isinstance(graceful, bool):
                raise EndpointError("bad-request", "despawn.graceful is not a boolean", outcome="not-executed")
            if seat.stopping:
                raise EndpointError("conflict", f"seat {seat.spec.name} is already stopping", outcome="not-executed")
            out = await self.despawn(seat.spec.name, graceful=graceful)
            if out is None:
                raise EndpointError("not-found", "no such seat on this manager", outcome="not-executed")
            return out
        if cmd == "input":
            return await self._input(seat, env)
        return await self._attach(parsed, env, seat)

    def _check_bind(self, env: dict) -> None:
        b = env.get("bind")
        if b is None or (b["instanceId"], b["epoch"]) == (self.instance_id, self.epoch):
            return
        same = b["instanceId"] == self.instance_id
        raise EndpointError(
            "expired" if same else "failed-precondition",
            "bound to another epoch of this instance" if same else "bound to another manager instance",
            details=[{"kind": BIND_REFUSED, "instanceId": self.instance_id, "epoch": self.epoch}],
            outcome="not-executed",
        )

    def _target_seat(self, parsed: ParsedRequest, env: dict) -> _Seat:
        t = env["target"]
        for seat in self.seats.values():
            if seat.owner == t["owner"] and seat.actor == t["actor"]:
                if seat.lifecycle_uid != t["lifecycleUid"]:
                    raise EndpointError("expired", "that incarnation of the seat is gone", outcome="not-executed")
                if parsed.target and parsed.target.mode == "owner" and parsed.caller.owner != seat.owner:
                    raise EndpointError("permission-denied", "not the seat's owner", outcome="not-executed")
                return seat
        raise EndpointError("not-found", "no such seat on this manager", outcome="not-executed")

    # ---- attach ---------------------------------------------------------------------------

    def _sign(self, grant: dict) -> str:
        mac = hmac.new(self._signing_key, canonical_bytes(grant), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()

    async def _attach(self, parsed: ParsedRequest, env: dict, seat: _Seat) -> dict:
        if len(self.sessions) >= self.max_sessions:
            raise EndpointError("resource-exhausted", f"the manager holds {self.max_sessions} sessions",
                                outcome="not-executed")
        sid = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        now = int(time.time() * 1000)
        sin = eps_subject(self.space, MANAGER, sid, self.epoch, "in")
        sout = eps_subject(self.space, MANAGER, sid, self.epoch, "out")
        grant = {
            "v": 1, "sessionId": sid, "space": self.space, "endpoint": MANAGER,
            "subjects": {"in": sin, "out": sout},
            "holder": {"id": parsed.caller.principal, "lifecycleUid": parsed.caller.uid, "processEpoch": 0},
            "serving": {"instanceId": self.instance_id, "epoch": self.epoch},
            "window": self.window, "iat": now, "exp": now + GRANT_TTL_MS,
            "nonce": secrets.token_urlsafe(16), "issuer": {"keyId": f"{self.instance_id}.{self.epoch}"},
        }
        grant["sig"] = self._sign(grant)
        ledger = self._kv["sessions"]
        row = {"state": "issuing", "holder": grant["holder"], "serving": grant["serving"],
               "target": {"name": seat.spec.name, "lifecycleUid": seat.lifecycle_uid}, "exp": grant["exp"]}
        await ledger.create(f"session.{sid}", json.dumps(row).encode())
        holder: dict = {}

        def on_data(data, seq):
            return holder["b"].on_caller_data(data, seq)

        rail_nc = self.nc
        if self.session_connect is not None:
            rail_nc = self._session_ncs[sid] = await self.session_connect(grant)
        rail = await open_rail(rail_nc, egress=sout, ingress=sin, window=self.window, on_data=on_data,
                               peer_silence_ms=self.caller_silence_ms,
                               on_close=lambda: holder["b"].rail_gone(),
                               on_fault=lambda reason, detail: holder["b"].rail_gone())
        bridge = ServingBridge(seat.pty, rail, on_done=lambda b, reason: self._session_done(sid, b, reason))
        holder["b"] = bridge
        self.sessions[sid] = (bridge, seat)
        seat.sessions.add(bridge)
        row["state"] = "active"
        await ledger.put(f"session.{sid}", json.dumps(row).encode())
        bridge.start()
        if not seat.pty.running:
            bridge.end("process-exit")
        return {"grant": grant}

    def _session_done(self, sid: str, bridge: ServingBridge, reason: str) -> None:
        entry = self.sessions.pop(sid, None)
        if entry is not None:
            entry[1].sessions.discard(bridge)
        snc = self._session_ncs.pop(sid, None)

        async def mark() -> None:
            try:
                await self._kv["sessions"].put(f"session.{sid}", json.dumps(
                    {"state": "closed", "reason": reason}).encode())
            except Exception:
                pass
            if snc is not None:  # the session's serving connection dies with it
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(snc.drain(), 2.0)

        t = asyncio.get_running_loop().create_task(mark())
        self._handlers.add(t)
        t.add_done_callback(self._handlers.discard)

    @property
    def live_sessions(self) -> int:
        return len(self.sessions)
