"""The manager's state, declared once: every family of this package (registry, seats, goals,
sessions, runs, catalogue) extends :class:`ManagerBase` and reads the state it sets here."""

from __future__ import annotations

import asyncio
import os
import secrets
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Coroutine

from nats.aio.client import Client
from nats.aio.subscription import Subscription
from nats.js.kv import KeyValue

from attach.session.rail import STALL_TIMEOUT_MS
from cotal_tui.demo.contract import load_contract
from cotal_tui.demo.personas import ConnectorState, PersonaStore
from meshview.errors import swallowed
from meshview.wire.envelope import EndpointError
from meshview.wire.names import bucket_names, space_token
from meshview.wire.outbound import mint_lifecycle_uid
from meshview.wire.rail import WINDOW_DEFAULT, check_window

from cotal_tui.demo.manager.spec import PERSONAS, Persona, Seat, SeatSpec

if TYPE_CHECKING:
    from attach.session.host import ServingBridge
    from cotal_tui.demo.runs import RunHost

CONTRACT = load_contract()
CONTRACT_REVISION = CONTRACT.revision  # 22: the reference's cluster document, not ours
# A live caller says something every second (data, credit or the idle re-advertisement); one
# silent this long vanished without a close (kill -9, a cut link) and its slot is reaped. As
# long as the stall bound: a false reap costs a user their session, so err on the slow side.
CALLER_SILENCE_MS = STALL_TIMEOUT_MS
READINESS_MS = 30_000  # a spawn goal left unsettled this long ends `uncertain`
STOP_GRACE_S = 3.0  # graceful stop: SIGKILL this long after SIGHUP + SIGTERM

# static auth: a session grant -> a connection on that session's own serving credential
SessionConnect = Callable[[dict[str, Any]], Awaitable[Client]]


def fail(code: str, message: str, *, outcome: str = "not-executed", **kw: Any) -> EndpointError:
    """A refusal before anything ran (the reference's default outcome for a boundary refusal)."""
    return EndpointError(code, message, outcome=outcome, **kw)


def load_or_mint_instance_id(root: str | None) -> str:
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


class ManagerBase:
    """The state of one demo manager and the two task helpers every family uses."""

    # a user-auth mesh's manager admits ``owner`` mode only and asks the ledger (see authz.py)
    user_mesh = False

    def __init__(self, nc: Client, space: str, seats: list[SeatSpec], *, instance_id: str | None = None,
                 max_sessions: int = 64, root: str | None = None, window: int = WINDOW_DEFAULT,
                 caller_silence_ms: int = CALLER_SILENCE_MS, personas: dict[str, Persona] | None = None,
                 readiness_ms: int = READINESS_MS, stop_grace_s: float = STOP_GRACE_S,
                 session_connect: SessionConnect | None = None,
                 connectors: dict[str, ConnectorState] | None = None,
                 personas_dir: str | None = None, boot_run: str | None = None,
                 run_mesh: str | None = None, user_mesh: bool = False,
                 contract_revision: int | None = None):
        self.nc = nc
        # a user-auth mesh (A's registration region): the co-located manager of the signer host,
        # svc owner ``local`` like the reference's; u_ callers are authorized by the ledger (B)
        self.user_mesh = user_mesh
        # static auth: grant -> a connection on that session's own serving credential (pub
        # `out`, sub `in`), so only the holder of its session-caller credential reaches it
        self.session_connect = session_connect
        self._session_ncs: dict[str, Client] = {}
        self.space = space_token(space)
        self.seat_specs = list(seats)
        self.instance_id = instance_id or load_or_mint_instance_id(root)
        self.epoch = 0
        self.max_sessions = max_sessions
        self._own_root = root
        self.root = root or os.getcwd()
        self.window = check_window(window)
        self.caller_silence_ms = caller_silence_ms  # 0: never reap a silent caller
        self.buckets = bucket_names(self.space)
        self.actor = self.instance_id
        self.uid = mint_lifecycle_uid()
        self.seats: dict[str, Seat] = {}
        self.sessions: dict[str, tuple[ServingBridge, Seat]] = {}
        self._subs: list[Subscription] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._handlers: set[asyncio.Task[None]] = set()
        self._signing_key = secrets.token_bytes(32)
        self._started = 0.0
        # ``contract_revision=21``: serve the cluster document one release behind (what an
        # un-upgraded manager describes), so a client's handling of an older responder is testable
        self.contract = CONTRACT if contract_revision is None else load_contract(contract_revision)
        self._cluster_digest = self.contract.cluster_digest
        self._kv: dict[str, KeyValue] = {}  # presence, manager, records, sessions
        self._stopping = False
        self.personas = dict(PERSONAS if personas is None else personas)
        self.readiness_ms = readiness_ms
        self.stop_grace_s = stop_grace_s
        # goalId -> (caller principal, terminal fact), bounded
        self._goals: dict[str, tuple[str, dict[str, Any]]] = {}
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
        # the versioned rail's issued evidence (issued.py): (owner, actor, uid, generation) of every
        # accepted row read, and the store keys already read (rows are write-once)
        self._issued_refs: set[tuple[str, str, str, str]] = set()
        self._issued_keys: set[str] = set()

    def _later(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as a task the manager holds until it ends (never a dropped task)."""
        t = asyncio.get_running_loop().create_task(coro)
        self._handlers.add(t)
        t.add_done_callback(self._handlers.discard)

    async def _every(self, period: float, fn: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a missed beat is retried on the next tick [counted: COTAL_LOG]
                swallowed("demo.manager.tick")

    async def _wait_bridges(self, bridges: list[ServingBridge], timeout: float = 5.0) -> None:
        if bridges:
            await asyncio.wait([asyncio.ensure_future(b.done.wait()) for b in bridges], timeout=timeout)

    def _uptime_ms(self) -> int:
        return max(0, int((time.time() - self._started) * 1000))
