"""The demo manager: a §13 `manager` endpoint on an open mesh serving real pty seats.

It registers like a reference manager (presence as an endpoint with role ``manager``, a liveness
lease, ``svc.manager.<iid>.{spec,status}`` records, contract documents in ``EPC_<space>``) and
answers ``describe`` / ``status`` / ``ps`` / ``inspect`` / ``attach`` on the class, scatter and
instance rails. ``attach`` mints a holder-bound session grant, writes the ``session.<id>`` ledger
row, opens the serving rail and starts a :class:`~attach.host.ServingBridge`.

On an open mesh nothing is minted per session and the sessions share the manager's connection.
A session whose caller falls silent (no frame, not even an idle credit, for ``caller_silence_ms``)
is reaped, so a caller that vanished without a ``close`` cannot pin a ``maxSessions`` slot.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import secrets
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from nats.js.api import KeyValueConfig
from nats.js.errors import BucketNotFoundError, KeyNotFoundError

from attach.canonical import VOID_SCHEMA, canonical_bytes
from attach.endpoint import (
    BIND_REFUSED,
    MANAGER,
    EndpointError,
    publish_artifact,
    publish_closure,
    reply_body,
    validate_request,
)
from attach.host import PtySeat, ServingBridge
from attach.rail import STALL_TIMEOUT_MS, WINDOW_DEFAULT, check_window, open_rail
from attach.subjects import (
    Caller,
    ParsedRequest,
    eps_subject,
    mint_lifecycle_uid,
    parse_request,
    reply_subject,
    serve_filter,
)
from meshview.wire.names import bucket_names, space_token

HEARTBEAT_S = 2.0
LEASE_TTL_MS = 10_000
GRANT_TTL_MS = 24 * 3600 * 1000
CONTRACT_REVISION = 17
# A live caller says something every second (data, credit or the idle re-advertisement); one
# silent this long vanished without a close (kill -9, a cut link) and its slot is reaped. As
# long as the stall bound: a false reap costs a user their session, so err on the slow side.
CALLER_SILENCE_MS = STALL_TIMEOUT_MS
PROGRAMS = Path(__file__).resolve().parent / "programs"


@dataclass
class SeatSpec:
    name: str
    principal_id: str
    kind: str = "line"  # "line" | "fullscreen" | "shell"
    cols: int = 100
    rows: int = 30
    argv: list[str] | None = None


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
DESPAWN_INPUT = {"type": ["object", "null"], "properties": {"graceful": {"type": "boolean"}}}
DESPAWN_OUTPUT = {"type": "object", "required": ["name", "stopped", "graceful"]}

_SCHEMAS = {
    "void": VOID_SCHEMA, "inspect-in": INSPECT_INPUT, "row": ROW_SCHEMA, "ps-out": PS_OUTPUT,
    "status-out": STATUS_OUTPUT, "attach-out": ATTACH_OUTPUT, "despawn-in": DESPAWN_INPUT,
    "despawn-out": DESPAWN_OUTPUT,
}


def cluster_document(d: dict[str, str]) -> dict:
    def cmd(name, cap, i, o, targeted=False, modes=None):
        c = {"name": name, "class": "ephemeral", "targeted": targeted, "capability": cap,
             "inputDigest": d[i], "outputDigest": d[o]}
        if targeted:
            c["modes"] = modes
        return c

    return {
        "urn": "ai.cotal.manager",
        "revision": CONTRACT_REVISION,
        "attributes": [],
        "commands": [
            cmd("status", "manager.read", "void", "status-out"),
            cmd("ps", "manager.read", "void", "ps-out"),
            cmd("inspect", "manager.read", "inspect-in", "row"),
            cmd("attach", "manager.lifecycle", "void", "attach-out", True, ["owner", "any"]),
            cmd("despawn", "manager.lifecycle", "despawn-in", "despawn-out", True, ["owner", "any"]),
        ],
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
                 caller_silence_ms: int = CALLER_SILENCE_MS):
        self.nc = nc
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
            await seat.pty.stop()
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

    async def despawn(self, name: str) -> None:
        seat = self.seats.pop(name, None)
        if seat is None:
            return
        bridges = [b for b in seat.sessions]
        for b in bridges:
            b.end("target-despawn")
        await self._wait_bridges(bridges)
        await seat.pty.stop()

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
                "owner": "local", "actor": self.actor, "role": "manager", "protocolVersion": "0.4",
                "meta": {"host": socket.gethostname()}}
        return {"card": card, "status": status, "ts": int(time.time() * 1000), "lifecycleUid": self.uid}

    async def _heartbeat(self) -> None:
        await self._kv["presence"].put(f"local.{self.actor}", json.dumps(self._presence()).encode())

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
        pty.exit_listeners.append(lambda rc, s=seat: self._on_exit(s))
        pty.start()
        self.seats[spec.name] = seat
        return seat

    def _on_exit(self, seat: _Seat) -> None:
        seat.exited_at = time.time()
        for b in list(seat.sessions):
            b.end("process-exit")

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
                "clusters": [{"digest": self._cluster_digest,
                              "commands": ["status", "ps", "inspect", "attach", "despawn"]}]}}
        self._check_bind(env)
        known = {"status": False, "ps": False, "inspect": False, "attach": True, "despawn": True}
        if cmd not in known:
            raise EndpointError("unimplemented", f"manager does not serve {cmd!r}", outcome="not-executed")
        targeted = known[cmd]
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
        seat = self._target_seat(parsed, env)
        if cmd == "despawn":
            await self.despawn(seat.spec.name)
            return {"name": seat.spec.name, "stopped": True, "graceful": True}
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

        rail = await open_rail(self.nc, egress=sout, ingress=sin, window=self.window, on_data=on_data,
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

        async def mark() -> None:
            try:
                await self._kv["sessions"].put(f"session.{sid}", json.dumps(
                    {"state": "closed", "reason": reason}).encode())
            except Exception:
                pass

        t = asyncio.get_running_loop().create_task(mark())
        self._handlers.add(t)
        t.add_done_callback(self._handlers.discard)

    @property
    def live_sessions(self) -> int:
        return len(self.sessions)
