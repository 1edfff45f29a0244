"""The demo manager: a faithful stand-in of the reference manager (service contract revision 21)
on an open or static mesh, serving real pty seats.

It registers as the reference does: presence as an endpoint with role ``manager``, a liveness
lease, ``svc.manager.<iid>.spec`` and ``.status`` (state ``ready``, then ``exited`` on a stop) in
the records bucket, every contract artifact in ``EPC_<space>``; a clean stop deregisters (status
deleted, then spec, each revision-pinned). The contract is the reference's own, shipped as data
(:mod:`cotal_tui.demo.contract`): every request's args are validated against the command's closed
input schema (``bad-request``, the reference's wording) and every reply against its output schema
before it leaves (a miss is ``internal`` and is recorded, loud under tests).

Served: ``status`` ``ps`` ``inspect`` ``slots`` ``models`` ``spawn`` ``despawn`` ``attach`` ``input``
``goal-result`` ``list-personas`` ``show-persona`` ``define-persona`` ``purge``; every other
contract command answers ``unimplemented`` naming it. ``spawn`` resolves a persona file
(:mod:`cotal_tui.demo.personas`) by its ``config`` path or its ``name`` (the persona ref, as the
reference reads it; ``identity`` overrides the seat name), launches the
persona's connector on a pty and answers at once with the action acceptance; the goal then settles
on the caller's epe progress rail with the first fact - the seat joined (its presence record,
written once the program is up), its program exited first, or the readiness deadline passed - and
``goal-result`` re-reads the caller's own settled goal. ``despawn`` stops a seat (graceful: SIGHUP +
SIGTERM to the program's group, SIGKILL after a grace; force: SIGKILL), ``input`` types text into a
seat's pty. ``attach`` mints a holder-bound session grant, writes the ``session.<id>`` ledger row,
opens the serving rail and starts a :class:`~attach.host.ServingBridge`.

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
import shutil
import signal
import socket
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable
from pathlib import Path

from nats.js.api import KeyValueConfig
from nats.js.errors import BucketNotFoundError, KeyNotFoundError

from attach.endpoint import publish_closure
from attach.host import PtySeat, ServingBridge
from attach.rail import STALL_TIMEOUT_MS, WINDOW_DEFAULT, check_window, open_rail
from cotal_tui.demo.contract import VIOLATIONS, load_contract
from cotal_tui.demo.runs import RUN_COMMANDS, RunHost
from cotal_tui.demo.personas import (
    DEFAULT_CONNECTOR,
    PROGRAMS,  # noqa: F401  (re-exported: tests run the demo programs by path)
    ConnectorState,
    LaunchRefused,
    PersonaError,
    PersonaFile,
    PersonaStore,
    connector_argv,
    measure_connectors,
)
from meshview.wire.canonical import canonical_bytes
from meshview.wire.endpoint import (
    ANY_GENERATION,
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
from meshview.wire.names import bucket_names, chat_stream, dm_stream, space_token
from meshview.wire.outbound import PROTOCOL_VERSION, mint_lifecycle_uid

HEARTBEAT_S = 2.0
LEASE_TTL_MS = 10_000
GRANT_TTL_MS = 24 * 3600 * 1000
CONTRACT = load_contract()
CONTRACT_REVISION = CONTRACT.revision  # 21: the reference's cluster document, not ours
# A live caller says something every second (data, credit or the idle re-advertisement); one
# silent this long vanished without a close (kill -9, a cut link) and its slot is reaped. As
# long as the stall bound: a false reap costs a user their session, so err on the slow side.
CALLER_SILENCE_MS = STALL_TIMEOUT_MS
READINESS_MS = 30_000  # a spawn goal left unsettled this long ends `uncertain`
STOP_GRACE_S = 3.0  # graceful stop: SIGKILL this long after SIGHUP + SIGTERM
MAX_AGENTS = 50
GOALS_KEPT = 256
WORKING_S = 3.0  # a spawned seat that printed this recently heartbeats `working`
PRESENCE_TTL_MS = 6000
SERVED = ("status", "ps", "inspect", "slots", "models", "spawn", "despawn", "attach", "input",
          "goal-result", "list-personas", "show-persona", "define-persona", "purge")
ACTION_COMMANDS = ("spawn", "launch")  # left to a sibling when no connector is available (classSpawn)
# the program kinds a static seat may name, and the connector each one is
KIND_CONNECTOR = {"line": "echo-line", "fullscreen": "dashboard", "shell": "bash"}
# Process-wide memory of the last epoch each instance served, for managers without a root to
# persist it in: a clean stop deregisters (the status record with its epoch is deleted), and a
# restart of the same instance must still advance its epoch.
_LAST_EPOCH: dict[tuple[str, str], int] = {}


@dataclass(frozen=True)
class Persona:
    """A persona the manager seeds as a file under its root: the program kind it runs (its
    connector, see :data:`KIND_CONNECTOR`; an ``argv`` makes it the ``command`` connector), the
    card's role, and a description (also its persona text)."""

    kind: str
    role: str
    description: str
    argv: tuple[str, ...] | None = None

    def as_file(self, name: str, store: PersonaStore) -> PersonaFile:
        agent = "command" if self.argv else KIND_CONNECTOR.get(self.kind, DEFAULT_CONNECTOR)
        return PersonaFile(name=name, path=store.path_for(name), role=self.role, description=self.description,
                           agent=agent, subscribe=[],
                           launch_options={"argv": list(self.argv)} if self.argv else None,
                           persona=self.description)


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
    cols: int = 120  # the size a reference manager starts every pty at
    rows: int = 32
    argv: list[str] | None = None
    role: str | None = None
    persona: str | None = None
    presence: bool = False  # the manager heartbeats this seat's presence (spawned seats)
    agent: str | None = None  # the connector; from ``kind`` (or ``command`` for an argv) when unset
    model: str | None = None
    variant: str | None = None
    cwd: str | None = None
    prompt: str | None = None  # typed into the pty once the program is up (spawn's initial prompt)
    description: str | None = None
    # a file the program writes its condition to while it waits (``COTAL_SEAT_CONDITION``; see
    # programs/migrate_ask.py): present, the seat heartbeats ``waiting`` with that condition
    condition_file: str | None = None
    # an agent that heartbeats on its own (a scripted team member): its lifecycle uid as it says
    # it, which the manager's rows report (as a real manager reports the agent it launched), so
    # the console binds the seat to that agent by principal + lifecycle uid
    incarnation: Callable[[], str] | None = None

    @property
    def connector(self) -> str:
        if self.agent:
            return self.agent
        return "command" if self.argv else KIND_CONNECTOR.get(self.kind, DEFAULT_CONNECTOR)


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
    minted_uid: str
    pty: PtySeat
    started: float
    exited_at: float | None = None
    sessions: set = field(default_factory=set)
    joined_at: float | None = None
    last_output: float = 0.0
    waiting: bool = False  # the condition file was there at the last presence put
    spawner: str | None = None
    goal: _Goal | None = None
    stopping: bool = False

    @property
    def lifecycle_uid(self) -> str:
        inc = self.spec.incarnation
        return inc() if inc is not None else self.minted_uid


def argv_for(spec: SeatSpec) -> list[str]:
    if spec.argv:
        return list(spec.argv)
    return connector_argv(spec.connector, spec.name, None)


def _read_condition(path: str | None) -> dict | None:
    """The condition a waiting program wrote (code, message, since), bounded; None when absent
    or unreadable."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.loads(f.read(4096))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("code"), str):
        return None
    since = raw.get("since")
    cond = {"code": raw["code"][:64], "source": "terminal",
            "since": int(since) if isinstance(since, (int, float)) else int(time.time() * 1000)}
    if isinstance(raw.get("message"), str):
        cond["message"] = raw["message"][:1024]
    return cond


def _fail(code: str, message: str, **kw) -> EndpointError:
    return EndpointError(code, message, outcome=kw.pop("outcome", "not-executed"), **kw)


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
                 session_connect=None, connectors: dict[str, ConnectorState] | None = None,
                 personas_dir: str | None = None, boot_run: str | None = None,
                 run_mesh: str | None = None, user_mesh: bool = False):
        self.nc = nc
        # a user-auth mesh (A's registration region): the co-located manager of the signer host,
        # svc owner ``local`` like the reference's; u_ callers are authorized by the ledger (B)
        self.user_mesh = user_mesh
        # static auth: grant -> a connection on that session's own serving credential (pub
        # `out`, sub `in`), so only the holder of its session-caller credential reaches it
        self.session_connect = session_connect
        self._session_ncs: dict[str, object] = {}
        self.space = space_token(space)
        self.seat_specs = list(seats)
        self.instance_id = instance_id or _load_or_mint_instance_id(root)
        self.epoch = 0
        self.max_sessions = max_sessions
        self._own_root = root
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
        self.contract = CONTRACT
        self._cluster_digest = CONTRACT.cluster_digest
        self._kv: dict[str, object] = {}
        self._stopping = False
        self.personas = dict(PERSONAS if personas is None else personas)
        self.readiness_ms = readiness_ms
        self.stop_grace_s = stop_grace_s
        self._goals: dict[str, tuple[str, dict]] = {}  # goalId -> (caller principal, terminal fact), bounded
        # the persona catalogue: <root>/.cotal/agents, or a private directory for a rootless manager
        # (never the process's cwd: a test's manager must not write into the checkout)
        self._tmp_personas: str | None = None
        if personas_dir is not None:
            pdir = Path(personas_dir)
        elif root is not None:
            pdir = Path(root) / ".cotal" / "agents"
        else:
            self._tmp_personas = tempfile.mkdtemp(prefix="cotal-demo-personas-")
            pdir = Path(self._tmp_personas)
        self.persona_store = PersonaStore(pdir)
        self._connectors_override = connectors
        self.connectors: dict[str, ConnectorState] = {}
        self.class_spawn = True
        self.spec_revision: int | None = None
        self.status_revision: int | None = None
        self.registry_state: str | None = None  # ready | exited | None (deregistered / not yet)
        # Replies refused because they failed their own output schema (a demo bug): counted here and
        # in cotal_tui.demo.contract.VIOLATIONS, so a test can assert neither ever grows.
        self.contract_violations: list[tuple[str, str]] = []
        self.bad_requests = 0  # requests refused bad-request by the input schemas
        # the run family (cotal_tui/demo/runs.py); ``boot_run`` names a bundled program started at boot
        self._boot_run = boot_run
        self._run_mesh = run_mesh  # open | static | user; None: from the mesh this manager serves
        self.run_host: RunHost | None = None

    # ---- lifecycle ------------------------------------------------------------------------

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
        await self.nc.flush()
        await self._register()
        await self._renew_lease()
        await self._heartbeat()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._every(HEARTBEAT_S, self._heartbeat)))
        self._tasks.append(loop.create_task(self._every(LEASE_TTL_MS / 4000, self._renew_lease)))
        await self._start_runs(boot_run=self._boot_run)

    def _seed_personas(self) -> None:
        """The configured personas become files of the catalogue (an existing file is the
        operator's and is kept)."""
        for name, p in self.personas.items():
            if not self.persona_store.path_for(name).exists():
                self.persona_store.write(p.as_file(name, self.persona_store))

    def _epoch_file(self) -> Path | None:
        return Path(self._own_root) / ".cotal" / "manager-epoch" if self._own_root else None

    async def _next_epoch(self) -> int:
        """One past every epoch this instance is known to have served: its status record (a
        crashed predecessor never deregistered), the root's epoch file, this process's memory."""
        seen = _LAST_EPOCH.get((self.space, self.instance_id), 0)
        try:
            prev = json.loads((await self._kv["records"].get(self._status_key)).value)
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

    def _status_record(self, state: str) -> dict:
        return {"epoch": self.epoch, "state": state, "observedSpecRevision": self.spec_revision}

    async def _sessions_bucket(self, js):
        name = f"cotal_sessions_{self.space}"
        try:
            return await js.key_value(name)
        except BucketNotFoundError:
            try:
                return await js.create_key_value(config=KeyValueConfig(bucket=name, history=1))
            except Exception:
                return await js.key_value(name)

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
        with contextlib.suppress(Exception):
            await self._exit_registry(deregister)
        try:
            await self._kv["manager"].delete(f"lease.{self.instance_id}")
            await self._kv["presence"].put(f"local.{self.actor}", json.dumps(
                self._presence("offline")).encode())
            await self.nc.flush()
        except Exception:
            pass
        if self._tmp_personas is not None:
            shutil.rmtree(self._tmp_personas, ignore_errors=True)

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
                "actor": seat.actor, "role": spec.role or spec.connector, "protocolVersion": PROTOCOL_VERSION,
                "description": spec.description or "", "tags": ["demo", "spawned"],
                "meta": {"connector": spec.connector, "host": socket.gethostname(), "manager": self.instance_id}}
        rec = {"card": card, "status": status, "ts": int(time.time() * 1000), "lifecycleUid": seat.lifecycle_uid}
        if status != "offline":
            rec["attention"] = "open"
        return rec

    async def _put_seat_presence(self, seat: _Seat) -> None:
        busy = time.time() - seat.last_output < WORKING_S
        cond = _read_condition(seat.spec.condition_file)
        seat.waiting = cond is not None
        rec = self._seat_presence(seat, "waiting" if cond else "working" if busy else "idle")
        if cond is not None:
            rec["condition"] = cond
            rec["statusSince"] = cond["since"]
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
        env = None
        if spec.condition_file:
            from attach.host import _default_env

            env = {**_default_env(), "COTAL_SEAT_CONDITION": spec.condition_file}
        pty = PtySeat(argv_for(spec), cols=spec.cols, rows=spec.rows, cwd=spec.cwd or self.root, env=env)
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
            data: dict = {"name": seat.spec.name}
            if rc is not None:
                data["exitCode"] = rc
            self._settle(seat, "failed", data)
            self._later(self._offline(seat))

    def _on_output(self, seat: _Seat) -> None:
        seat.last_output = time.time()
        if seat.spec.presence and seat.joined_at is None and not seat.stopping:
            seat.joined_at = seat.last_output  # the program is up: it joins the mesh
            self._later(self._join(seat))
        elif (seat.spec.condition_file and seat.joined_at is not None and not seat.stopping
              and os.path.exists(seat.spec.condition_file) != seat.waiting):
            seat.waiting = not seat.waiting  # it began or stopped waiting: say so now, not next beat
            self._later(self._put_seat_presence(seat))

    async def _join(self, seat: _Seat) -> None:
        try:
            await self._put_seat_presence(seat)
        except Exception:
            seat.joined_at = None  # retried on the next output
            return
        if seat.spec.prompt:  # the initial prompt, typed once the program is up
            with contextlib.suppress(Exception):
                await seat.pty.write(seat.spec.prompt.encode("utf-8", "replace") + b"\r")
        goal = seat.goal
        if goal is not None and not goal.settled:
            await self._progress(goal, {"phase": "presence"})
        data = {"name": seat.spec.name, "agent": seat.spec.connector, "id": self._row_id(seat), "mode": "pty",
                "lifecycleUid": seat.lifecycle_uid}
        if seat.spec.role:
            data["role"] = seat.spec.role
        self._settle(seat, "succeeded", data)

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
        """First fact wins: the goal's terminal fact, published on the caller's progress rail and
        kept (for that caller only) for ``goal-result``."""
        goal = seat.goal
        if goal is None or goal.settled:
            return
        goal.settled = True
        if goal.timer is not None:
            goal.timer.cancel()
        body: dict = {"phase": "terminal", "state": state}
        if data is not None:
            body["data"] = data
        self._goals[goal.goal_id] = (goal.caller.principal, {"v": 1, "goalId": goal.goal_id, **body})
        while len(self._goals) > GOALS_KEPT:
            self._goals.pop(next(iter(self._goals)))
        self._later(self._progress(goal, body))

    # ---- the versioned rail ep.v1 (§13.15; C's region) ----------------------------------------
    # This manager stands in for the issuing host's check: a versioned request's generation must be
    # one an issuer recorded in the space's accepted-row store for exactly this caller triple (rows
    # are write-once, so a row read once stays known), and on a user-auth mesh the actor-ledger row
    # it was issued against must still hold that lifecycle uid. Unknown or dead: permission-denied.

    _issued_refs: set | None = None  # (owner, actor, uid, generation) of every accepted row read
    _issued_keys: set | None = None  # the store keys already read (rows are write-once)

    async def _check_issued(self, parsed: ParsedRequest) -> None:
        gen = parsed.generation
        if gen is None:
            return
        c = parsed.caller
        key = (c.owner, c.actor, c.uid, gen)
        if key not in self._issued_known():
            await self._load_issued()
        if key not in self._issued_known():
            raise _fail("permission-denied", f"no issued evidence for generation {gen}; an unrecorded generation "
                        "authorizes nothing (SPEC 13.15)")
        if self.user_mesh:
            from cotal_tui.demo.userauth.ledger import LedgerError, read_actor

            try:
                row = await read_actor(self.nc, self.space, c.owner, c.actor)
            except LedgerError:
                row = None
            if row is None or row.lifecycle_uid != c.uid:
                raise _fail("permission-denied", f"generation {gen} depends on cotal_actors_{self.space}/actor."
                            f"{c.owner}.{c.actor}.{c.uid}, which is no longer live (SPEC 13.15)")

    def _issued_known(self) -> set:
        if self._issued_refs is None:
            self._issued_refs, self._issued_keys = set(), set()
        return self._issued_refs

    async def _load_issued(self) -> None:
        """Read the accepted-row store's rows not read yet (a missing store holds none)."""
        from meshview.wire.issued import IssuedRowError, accepted_bucket, parse_row

        known = self._issued_known()
        seen = self._issued_keys
        from attach.registry import kv_keys

        try:
            js = self.nc.jetstream()
            kv = await js.key_value(accepted_bucket(self.space))
            keys = await kv_keys(js, accepted_bucket(self.space), "accepted.")  # never a racy kv.keys()
        except Exception:  # noqa: BLE001 - no store, or no keys: nothing issued
            return
        for k in keys:
            if k in seen:
                continue
            try:
                entry = await kv.get(k)
                ref = parse_row(entry.value or b"", space=self.space)
            except IssuedRowError:  # a malformed or foreign row authorizes nothing
                seen.add(k)
                continue
            except Exception:  # noqa: BLE001 - an unreadable row is tried again next time
                continue
            seen.add(k)
            known.add((ref.owner, ref.actor, ref.uid, ref.generation))

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
            reply_to = reply_subject(self.space, MANAGER, self.instance_id, self.epoch, parsed.caller, parsed.nonce,
                                     generation=parsed.generation)  # the rail it arrived on (§13.2)
        except ValueError:
            return
        env: dict | None = None
        try:
            env = validate_request(parsed, msg.data)
            await self._check_issued(parsed)
            data = await self._dispatch(parsed, env)
            if not env["replyExpected"]:
                return  # a cast is never answered (§13.5)
            body = reply_body(env["id"], data=data)
        except EndpointError as e:
            if env is not None and not env["replyExpected"]:
                return  # a failed cast stays silent too
            if e.code == "bad-request":
                self.bad_requests += 1
            body = reply_body(env["id"] if env is not None else "invalid", error=e)
        except Exception as e:  # a handler bug answers `internal`, never silence
            if env is not None and not env["replyExpected"]:
                return
            body = reply_body(env["id"] if env is not None else "invalid",
                              error=EndpointError("internal", f"{type(e).__name__}: {e}", outcome="unknown"))
        try:
            await self.nc.publish(reply_to, body)
        except Exception:
            pass

    async def _dispatch(self, parsed: ParsedRequest, env: dict) -> object:
        """The reference's boundary order: the command, its digest pins, the bind fence, the
        authorization form, the args against the closed input schema; then the handler; then the
        reply against the output schema before anything is published."""
        cmd = parsed.command
        if cmd == "describe":
            return self._describe()
        c = self.contract.commands.get(cmd)
        if c is None:
            raise _fail("unimplemented", f"the manager does not serve {cmd!r}: it is not a command of cluster "
                        f"{self.contract.urn} revision {self.contract.revision}")
        op = env["op"]
        if (op["inputDigest"], op["outputDigest"]) != (c.input_digest, c.output_digest):
            raise _fail("contract-mismatch", f"pinned digests {op['inputDigest']}/{op['outputDigest']} do not match "
                        f"the served contract {c.input_digest}/{c.output_digest}; a member that cannot honor "
                        "a pinned digest rejects, never coerces (SPEC 13.7)")
        self._check_bind(env, cmd)
        mode = parsed.target.mode if parsed.target is not None else None
        if c.targeted and mode not in c.modes:
            raise _fail("target-mismatch", f"{cmd} admits the {'/'.join(c.modes)} form{'s' if len(c.modes) > 1 else ''} only")
        if not c.targeted and mode is not None:
            raise _fail("target-mismatch", f"{cmd} is untargeted")
        args = env.get("args")
        why = self.contract.args_error(cmd, args)
        if why is not None:
            raise _fail("bad-request", why)
        if self._stopping:
            raise _fail("unavailable", "the manager is stopping")
        if cmd not in SERVED and cmd not in RUN_COMMANDS:
            raise _fail("unimplemented", f"the demo manager does not serve {cmd}: a contract command this "
                        "stand-in leaves unimplemented")
        data = await getattr(self, "_cmd_" + cmd.replace("-", "_"))(parsed, env, args or {})
        why = self.contract.output_error(cmd, data)
        if why is not None:
            self.contract_violations.append((cmd, why))
            VIOLATIONS.append((cmd, why))
            raise EndpointError("internal", why)
        return data

    # ---- the run family (D1's region): delegated to cotal_tui/demo/runs.py -------------------

    async def _start_runs(self, *, boot_run: str | None = None) -> None:
        mesh = self._run_mesh or ("user" if self.user_mesh else
                                  ("static" if self.session_connect is not None else "open"))
        self.run_host = RunHost(self.nc, self.space, endpoint=MANAGER, instance_id=self.instance_id, mesh=mesh)
        await self.run_host.start()
        if boot_run is not None and self.run_host.hosts_runs:
            await self.run_host.start_bundled(boot_run)

    async def _run_command(self, parsed: ParsedRequest, args: dict) -> object:
        if self.run_host is None:
            raise _fail("unavailable", "the manager is still starting its run host; retry shortly")
        return await self.run_host.handle(parsed.command, parsed.caller, args, generation=parsed.generation)

    async def _cmd_run_start(self, parsed, env, args) -> dict:
        return await self._run_command(parsed, args)

    async def _cmd_run_resume(self, parsed, env, args) -> dict:
        return await self._run_command(parsed, args)

    async def _cmd_run_answer(self, parsed, env, args) -> dict:
        return await self._run_command(parsed, args)

    async def _cmd_run_status(self, parsed, env, args) -> dict:
        return await self._run_command(parsed, args)

    async def _cmd_run_ps(self, parsed, env, args) -> list:
        return await self._run_command(parsed, args)

    def _describe(self) -> dict:
        return {"public": True, "descriptor": {
            "endpoint": MANAGER, "owner": "local", "protocol": {"v": 1},
            "clusters": [{"digest": self._cluster_digest, "commands": list(self.contract.commands)}]}}

    def _check_bind(self, env: dict, command: str) -> None:
        """The responder fence: a request bound to another incarnation is refused before the args
        are looked at, saying what it was bound to and who refused (``ai.cotal.ep.bind-refused``)."""
        b = env.get("bind")
        if b is None or (b["instanceId"], b["epoch"]) == (self.instance_id, self.epoch):
            return
        same = b["instanceId"] == self.instance_id
        raise EndpointError(
            "expired" if same else "failed-precondition",
            f"bound to epoch {b['epoch']} of this instance, which serves epoch {self.epoch}" if same
            else f"bound to manager instance {b['instanceId']}, not this one",
            details=[{"kind": BIND_REFUSED, "endpoint": MANAGER, "command": command,
                      "boundTo": {"instanceId": b["instanceId"], "epoch": b["epoch"]},
                      "servedBy": {"instanceId": self.instance_id, "epoch": self.epoch}}],
            outcome="not-executed",
        )

    # ---- request authorization on a per-user-auth mesh (B's region) -------------------------
    # A user-auth mesh's manager (``user_mesh`` set by its constructor) admits ``owner`` mode only;
    # the caller's *current* ledger row decides, read fresh per request as the reference handler
    # does: a target under the caller's own owner needs scope ``spawn``, under another owner
    # ``admin``; ``input`` is operator reach (``admin``) whatever the owner.
    user_mesh = False
    USER_OWN_SCOPE = "spawn"
    USER_OTHER_SCOPE = "admin"
    USER_OPERATOR_SCOPE = "admin"

    async def _authorized_seat(self, parsed: ParsedRequest, env: dict) -> _Seat:
        seat = self._target_seat(parsed, env)
        if self.user_mesh:
            await self._authorize_user(parsed, seat)
        return seat

    async def _authorize_user(self, parsed: ParsedRequest, seat: _Seat) -> None:
        from cotal_tui.demo.userauth.ledger import LedgerError, read_actor

        c = parsed.caller
        if parsed.target is None or parsed.target.mode != "owner":
            raise _fail("permission-denied", f"a user-auth mesh admits {parsed.command} in owner mode only")
        try:
            row = await read_actor(self.nc, self.space, c.owner, c.actor)
        except LedgerError as e:
            raise _fail("permission-denied", f"{e}") from None
        if row is None or row.lifecycle_uid != c.uid:
            raise _fail("permission-denied", f"{c.owner}.{c.actor} holds no current ledger grant "
                        "(revoked or re-granted); re-exchange for a fresh bearer")
        if parsed.command == "input":
            need = self.USER_OPERATOR_SCOPE
            why = "input is operator reach"
        elif seat.owner == c.owner:
            need, why = self.USER_OWN_SCOPE, f"a seat under your own owner needs it for {parsed.command}"
        else:
            need, why = self.USER_OTHER_SCOPE, f"{seat.spec.name} is under another owner"
        if need not in row.scopes:
            raise _fail("permission-denied", f"{c.owner}.{c.actor} lacks ledger scope {need!r} ({why})")

    async def _user_scopes(self, parsed: ParsedRequest) -> frozenset[str]:
        """The caller's current ledger scopes (empty without a current row)."""
        from cotal_tui.demo.userauth.ledger import LedgerError, read_actor

        c = parsed.caller
        try:
            row = await read_actor(self.nc, self.space, c.owner, c.actor)
        except LedgerError:
            return frozenset()
        return row.scopes if row is not None and row.lifecycle_uid == c.uid else frozenset()

    async def _authorize_user_spawn(self, parsed: ParsedRequest) -> None:
        if self.USER_OWN_SCOPE not in await self._user_scopes(parsed):
            c = parsed.caller
            raise _fail("permission-denied", f"{c.owner}.{c.actor} lacks ledger scope {self.USER_OWN_SCOPE!r} "
                        "(spawning a seat under your own owner needs it)")

    def _target_seat(self, parsed: ParsedRequest, env: dict) -> _Seat:
        """The live seat the body target names, authorized for the request's form: ``any`` is
        operator reach, ``owner`` reaches only the caller's own children (on a user-auth mesh
        the ledger decides instead, :meth:`_authorize_user`)."""
        t = env["target"]
        seat = next((s for s in self.seats.values() if s.owner == t["owner"] and s.actor == t["actor"]
                     and s.lifecycle_uid == t["lifecycleUid"]), None)
        if seat is None:
            raise _fail("expired", f"target {t['owner']}.{t['actor']} (lifecycle {t['lifecycleUid']}) is not a live "
                        "managed agent of this manager")
        if self.user_mesh:
            return seat
        if parsed.target is not None and parsed.target.mode == "owner" and seat.spawner != parsed.caller.principal:
            raise _fail("permission-denied", f"{seat.spec.name} is not a seat this caller spawned; an owner-mode "
                        f"{parsed.command} reaches only the caller's own children")
        return seat

    # ---- commands -------------------------------------------------------------------------

    async def _cmd_status(self, parsed, env, args) -> dict:
        return {"instanceId": self.instance_id, "runtime": "pty", "custody": "legacy",
                "agentCount": len(self.seats), "uptimeMs": max(0, int((time.time() - self._started) * 1000)),
                "connectors": [c.row() for c in self.connectors.values()], "classSpawn": self.class_spawn,
                # no durable static slots, so no reconciliation ever ran or failed
                "staticReconciliation": {"state": "idle", "failures": []}}

    async def _cmd_ps(self, parsed, env, args) -> list:
        seats = list(self.seats.values())
        if self.user_mesh and self.USER_OTHER_SCOPE not in await self._user_scopes(parsed):
            seats = [s for s in seats if s.owner == parsed.caller.owner]  # the caller's owner only
        return [await self._row(s) for s in seats]

    async def _cmd_inspect(self, parsed, env, args) -> dict:
        name = str(args["name"]).strip()
        seat = self.seats.get(name)
        if seat is None:
            raise _fail("not-found", f'no agent "{name}"')
        return await self._row(seat)

    async def _cmd_slots(self, parsed, env, args) -> list:
        return []  # the demo keeps no durable static-slot rows (its seats live with the process)

    async def _cmd_models(self, parsed, env, args) -> dict:
        agent = args.get("agent")
        if agent is not None and agent not in self.connectors:
            raise _fail("failed-precondition", f"no connector named {agent!r} (this manager has "
                        f"{', '.join(self.connectors)})")
        names = [agent] if agent is not None else list(self.connectors)
        # the demo's programs take no model: every catalog is unsupported and empty
        return {"catalogs": [{"agent": n, "supported": False, "models": []} for n in names]}

    async def _cmd_list_personas(self, parsed, env, args) -> dict:
        return {"personas": self.persona_store.catalog()}

    async def _cmd_show_persona(self, parsed, env, args) -> dict:
        name = str(args["name"]).strip()
        try:
            p = self.persona_store.load(name)
        except PersonaError as e:
            return {"name": name, "error": str(e)}
        if p is None:
            raise _fail("not-found", f"no persona named {name!r} (this manager knows "
                        f"{', '.join(self.persona_store.names()) or 'none'})")
        return p.show()

    async def _cmd_define_persona(self, parsed, env, args) -> dict:
        try:
            p = self.persona_store.define(args, parsed.caller.principal)
        except PersonaError as e:
            raise _fail("failed-precondition", str(e)) from None
        return {"name": p.name, "path": str(p.path)}

    async def _cmd_purge(self, parsed, env, args) -> dict:
        out = {"chat": await self._purge_stream(chat_stream(self.space))}
        if args.get("includeDms") is True:
            out["dm"] = await self._purge_stream(dm_stream(self.space))
        return out

    async def _purge_stream(self, stream: str) -> int:
        try:
            msg = await self.nc.request(f"$JS.API.STREAM.PURGE.{stream}", b"{}", timeout=5.0)
            o = json.loads(msg.data)
        except Exception as e:
            raise _fail("failed-precondition", f"the purge of {stream} failed ({type(e).__name__})",
                        outcome="unknown") from None
        err = o.get("error") if isinstance(o, dict) else None
        if err:
            if isinstance(err, dict) and err.get("err_code") == 10059:
                return 0  # no such stream: nothing retained
            raise _fail("failed-precondition", f"the broker refused the purge of {stream}")
        purged = o.get("purged", 0)
        return purged if isinstance(purged, int) and purged >= 0 else 0

    async def _cmd_despawn(self, parsed, env, args) -> dict:
        seat = await self._authorized_seat(parsed, env)
        if seat.stopping:
            raise _fail("conflict", f"seat {seat.spec.name} is already stopping")
        out = await self.despawn(seat.spec.name, graceful=args.get("graceful", True) is not False)
        if out is None:
            raise _fail("expired", f"seat {seat.spec.name} is no longer a live managed agent of this manager")
        return out

    async def _cmd_input(self, parsed, env, args) -> dict:
        seat = await self._authorized_seat(parsed, env)
        if not seat.pty.running:
            raise _fail("failed-precondition", f"seat {seat.spec.name} is not running (exited)")
        data = args["text"].encode("utf-8", "replace") + (b"\r" if args.get("enter", True) else b"")
        await seat.pty.write(data)
        return {"name": seat.spec.name, "bytes": len(data)}

    async def _cmd_attach(self, parsed, env, args) -> dict:
        return await self._attach(parsed, env, await self._authorized_seat(parsed, env))

    async def _cmd_goal_result(self, parsed, env, args) -> dict:
        """The caller's own settled goal (by principal, so it stays readable from a replaced
        connection); anyone else's goal, or one not settled, answers with no ``result``."""
        gid = args["goalId"]
        out: dict = {"goalId": gid}
        kept = self._goals.get(gid)
        if kept is not None and kept[0] == parsed.caller.principal:
            out["result"] = kept[1]
        return out

    async def _cmd_spawn(self, parsed, env, args) -> dict:
        # As the reference's ``start`` op reads spawn (manager.ts StartAgentOpts): ``name`` is the
        # persona REF (``.cotal/agents/<name>.md``, which must exist), ``config`` an explicit agent
        # file loaded instead, ``identity`` the seat-name override (the CLI's ``--name``); without
        # it the seat presents under the persona file's own name, auto-numbered on collision.
        ref = args["name"].strip()
        if self.user_mesh:
            await self._authorize_user_spawn(parsed)
        try:
            if args.get("config"):
                persona: PersonaFile | None = self.persona_store.resolve(args["config"], Path(self.root))
            else:
                persona = self.persona_store.load(ref)
        except PersonaError as e:
            raise _fail("failed-precondition", str(e)) from None
        if persona is None:
            raise _fail("failed-precondition", f"no agent file .cotal/agents/{ref}.md on this manager "
                        f"(it knows {', '.join(self.persona_store.names()) or 'none'})")
        pinned = bool(args.get("identity"))
        name = args["identity"].strip() if pinned else persona.name
        if not is_seat_name(name):
            raise _fail("failed-precondition", f"unsafe name {json.dumps(name)} (allowed: a letter, then up to 31 "
                        "letters, digits, _ -)")
        for key in ("resume", "resumeClaim", "resumeAgent"):
            if args.get(key):
                raise _fail("failed-precondition", f"{key}: the demo's connectors keep no harness sessions to resume")
        if "supervise" in args:
            raise _fail("failed-precondition", "supervise: this manager does not restart seats in place")
        agent = args.get("agent") or (persona.agent if persona else None) or args.get("defaultAgent") or DEFAULT_CONNECTOR
        conn = self.connectors.get(agent)
        if conn is None:
            raise _fail("failed-precondition", f"no connector named {agent!r} (this manager has "
                        f"{', '.join(self.connectors)})")
        if not conn.available:
            raise _fail("failed-precondition", f"connector {agent} is unavailable on this host: {conn.reason}")
        cwd = None
        if args.get("cwd"):
            p = Path(args["cwd"])
            p = p if p.is_absolute() else Path(self.root) / p
            if not p.is_dir():
                raise _fail("failed-precondition", f"cwd {args['cwd']} is not a directory on this manager's host")
            cwd = str(p.resolve())
        # a seat named by its persona auto-numbers (reviewer, reviewer_2); an --name is pinned
        if name in self.seats:
            if pinned:
                raise _fail("failed-precondition", f'agent "{name}" already running')
            base, n = name, 1
            while name in self.seats:
                n += 1
                name = f"{base}_{n}"
        launch = args["launchOptions"] if "launchOptions" in args else (persona.launch_options if persona else None)
        try:
            argv = connector_argv(agent, name, launch)
        except LaunchRefused as e:
            raise _fail("failed-precondition", str(e)) from None
        if len(self.seats) >= MAX_AGENTS:
            raise _fail("resource-exhausted", f"this manager already runs {MAX_AGENTS} seats")
        actor = secrets.token_hex(12)  # a fresh principal per incarnation, like an nkey on open meshes
        owner = parsed.caller.owner if self.user_mesh else "local"  # a user mesh: under the caller's owner
        spec = SeatSpec(name=name, principal_id=f"{owner}.{actor}", argv=argv, presence=True, agent=agent,
                        role=args.get("role") or (persona.role if persona else None),
                        persona=persona.name if persona else None,
                        model=args.get("model") or (persona.model if persona else None),
                        variant=args.get("variant") or (persona.variant if persona else None),
                        cwd=cwd, prompt=args.get("prompt") or None,
                        description=persona.description if persona else None)
        goal = _Goal(env["id"], parsed.caller, name)
        seat = self._spawn(spec)
        seat.spawner = parsed.caller.principal
        seat.goal = goal
        loop = asyncio.get_running_loop()
        goal.timer = loop.call_later(self.readiness_ms / 1000, self._settle, seat, "uncertain",
                                     {"name": name, "readinessDeadlineMs": self.readiness_ms})
        return {"name": name, "owner": seat.owner, "actor": seat.actor, "uid": seat.lifecycle_uid,
                "goalId": goal.goal_id, "fingerprint": self._fingerprint(args, name),
                "readinessDeadlineMs": self.readiness_ms,
                "executor": {"lifecycleUid": self.uid, "epoch": self.epoch}}

    @staticmethod
    def _fingerprint(args: dict, name: str) -> str:
        """What was asked for, hashed: the args as sent and the seat name they were given (any
        JSON, floats included, so not the integers-only canonical form)."""
        raw = json.dumps({"args": args, "name": name}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()

    # ---- rows -----------------------------------------------------------------------------

    def _row_id(self, seat: _Seat) -> str:
        return seat.actor if seat.owner == "local" else f"{seat.owner}.{seat.actor}"

    async def _mesh_status(self, seat: _Seat) -> tuple[str, int | None]:
        """The seat's presence status (``absent`` without a record) and, when ``offline``, since
        when (its last heartbeat)."""
        try:
            e = await self._kv["presence"].get(f"{seat.owner}.{seat.actor}")
            rec = json.loads(e.value)
        except Exception:
            return "absent", None
        ts = rec.get("ts") if isinstance(rec, dict) else None
        ts = ts if isinstance(ts, int) and not isinstance(ts, bool) and ts >= 0 else None
        status = rec.get("status") if isinstance(rec, dict) else None
        if ts is None or time.time() * 1000 - ts > PRESENCE_TTL_MS or status == "offline":
            return "offline", ts
        return (status if isinstance(status, str) and status else "absent"), None

    async def _row(self, seat: _Seat) -> dict:
        """An AgentRow exactly: required keys always, an optional key only when recorded (never
        null). The presence view is read fresh, so it is current and ``meshView`` is omitted."""
        end = seat.exited_at or time.time()
        mesh, offline_since = await self._mesh_status(seat)
        row: dict = {
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
        if seat.pty.pid:
            row["pid"] = seat.pty.pid
        for key, value in (("role", seat.spec.role), ("spawner", seat.spawner), ("model", seat.spec.model),
                           ("variant", seat.spec.variant)):
            if value:
                row[key] = value
        return row

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
        # the row the identity plane's redemption reads on a user mesh (grantSig, endpoint, the
        # holder's principal), as the reference's session ledger carries them
        row = {"state": "issuing", "endpoint": MANAGER, "grantSig": grant["sig"],
               "holder": {**grant["holder"], "principal": parsed.caller.principal}, "serving": grant["serving"],
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
