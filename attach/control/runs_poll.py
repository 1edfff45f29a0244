"""The console's runs poll: ``run-ps`` on each manager, then ``run-status`` for its running runs.

There is no push event for runs (runs.md §4), so the console asks. Bounded: a round every
``period`` seconds, re-armed only after the previous one ended (never two at once), at most one
call in flight per manager, every call under a deadline, and a manager that does not answer is
asked less often (doubling back-off up to ``max_period``) and said to be silent. It never rides
the observer's connection: each call goes through :mod:`attach.control.runs` on the control credential
the mesh mode needs (a minted instrument on a static mesh, the exchange's manager-caller view on
a user one), opened and closed per call.

What the managers say is handed to the model as :mod:`meshview.model.runs_state` values through its
run inputs, so a recording holds it and a replay shows it. No Textual or Rich here.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol

from attach.errors import AttachLayerError
from meshview.errors import swallowing
from meshview.model.runs_state import JournalRow, Pause, RunView, clip, pause_kind
from meshview.wire.runs import RUNNING, RunRow, RunStatus, Step

from attach.control.poller import RoundLoop

PERIOD_S = 5.0
MAX_PERIOD_S = 60.0
CALL_S = 8.0  # one call's bound (connect + describe + the command), on top of its own deadline
SILENT = "did not answer run-ps"  # a manager's silence (anything else is its refusal)
STATUS_PER_ROUND = 16  # run-status calls per manager per round (the newest running runs first)


class RunsClient(Protocol):
    """How the poll reaches managers (:class:`TargetRunsClient` over ``attach.control.runs``)."""

    async def instances(self) -> set[str]: ...

    async def ps(self, instance_id: str) -> list[RunRow]: ...

    async def status(self, instance_id: str, run_id: str) -> RunStatus: ...


class RunsInput(Protocol):
    """The model's run inputs (:class:`~meshview.model.mesh.MeshModel`)."""

    def apply_run_rows(self, instance_id: str, rows: tuple[RunView, ...]) -> None: ...

    def apply_run_status(self, instance_id: str, run_id: str, journal: tuple[JournalRow, ...],
                         pauses: tuple[Pause, ...]) -> None: ...

    def set_run_status_error(self, instance_id: str, run_id: str, error: str) -> None: ...

    def set_runs_silent(self, instance_id: str, error: str) -> None: ...

    def forget_run_manager(self, instance_id: str) -> None: ...

    def set_runs_unavailable(self, reason: str | None) -> None: ...


class RunsUnavailable(AttachLayerError):
    """This console has no way to list runs here (open mesh, no control path): one sentence."""


class TargetRunsClient:
    """The poll's calls through :mod:`attach.control.runs` on the control credential of ``target``
    (each call its own connection, closed after it; never the observer's)."""

    def __init__(self, target: Any, space: str) -> None:
        self.target = control_target(target, space)
        self.space = space

    async def instances(self) -> set[str]:
        from attach.control.managed import registered_instances
        from meshview.link.connect import connect as mesh_connect

        nc, _ = await mesh_connect(dataclasses.replace(self.target, name="cotal-runs-poll"))
        nc.options["allow_reconnect"] = False
        try:
            return await registered_instances(nc, self.space)
        finally:
            with swallowing("attach.control.runs_poll:TargetRunsClient.instances"):
                await asyncio.wait_for(nc.close(), 2.0)

    async def ps(self, instance_id: str) -> list[RunRow]:
        from attach.control.runs import run_ps

        return await run_ps(self._pinned(instance_id), on=instance_id)

    async def status(self, instance_id: str, run_id: str) -> RunStatus:
        from attach.control.runs import run_status

        return await run_status(self._pinned(instance_id), run_id, on=instance_id)

    def _pinned(self, instance_id: str) -> Any:
        """On a user mesh the exchange's manager-caller view is pinned to one instance."""
        if self.target.user_mode:
            return dataclasses.replace(self.target, manager_instance=instance_id)
        return self.target


def control_target(target: Any, space: str) -> Any:
    """``target`` for the manager's commands: the control profile (a view credential minted for
    the observer is dropped, so the call mints what it needs), as the ``ps`` poll does."""
    t = dataclasses.replace(target, space=space)
    if t.role == "control":
        return t
    return dataclasses.replace(t, role="control", credential=None)


def call_target(target: Any, space: str, instance_id: str) -> Any:
    """The target one run call to ``instance_id`` rides (an answer, say): the control
    credential, pinned to the instance on a user mesh."""
    return TargetRunsClient(target, space)._pinned(instance_id)


def target_client(target: Any, space: str) -> TargetRunsClient:
    return TargetRunsClient(target, space)


def _unimplemented(e: BaseException) -> bool:
    from attach.control.runs import RunsError

    return isinstance(e, RunsError) and e.code == "unimplemented"


# ---- from the wire's values to the model's ------------------------------------------------


def view_of_row(row: RunRow, instance_id: str) -> RunView:
    fork = row.forked_from
    return RunView(
        run_id=clip(row.run_id, 80), endpoint=clip(row.endpoint, 80), instance_id=instance_id,
        state=row.display_state, holder=None if row.holder is None else clip(row.holder, 120),
        epoch=row.epoch, journal_high=row.journal_high, started_at=row.started_at,
        forked_from=None if fork is None else clip(f"{fork.run}@{fork.step}", 300),
        revoked_by=None if row.revoked is None else clip(row.revoked.by, 120))


def journal_of(st: RunStatus) -> tuple[tuple[JournalRow, ...], tuple[Pause, ...]]:
    """The journal in order (each step once, at its first position, as its last record says)
    and the open pauses, as the model keeps them."""
    folded = {s.key: s for s in st.steps}
    out: list[JournalRow] = []
    shown: set[str] = set()
    for r in st.journal:
        if isinstance(r, Step):
            if r.key in shown:
                continue
            shown.add(r.key)
            s = folded.get(r.key, r)
            a = s.answer
            out.append(JournalRow(
                n=s.n, kind="step", step_key=clip(s.key, 500), state=s.state, outcome=s.outcome or s.status,
                effect=s.effect, started_at=s.started_at, ended_at=s.ended_at,
                prompt=None if s.asks is None else clip(s.asks), addressee=s.addressee,
                deadline_at=s.deadline_at, on_expiry=s.on_expiry,
                answer_id=a.answer_id if a is not None else None, answer_by=a.by if a is not None else None,
                amendments=len(s.amendments), error_code=s.error_code))
        else:
            out.append(JournalRow(n=r.n, kind="activation", holder=r.holder, epoch=r.epoch,
                                  replayed_to=r.replayed_to))
    pauses = tuple(Pause(step_key=clip(p.step_key, 500), kind=pause_kind(p.step_key, p.kind),
                         prompt=clip(p.prompt), addressee=p.addressee, deadline_at=p.deadline_at,
                         on_expiry=p.on_expiry, schema=p.schema) for p in st.pauses)
    return tuple(out), pauses


# ---- the poll ------------------------------------------------------------------------------


@dataclass
class _Manager:
    backoff: float = 0.0  # seconds added to the period while it stays silent
    next_at: float = 0.0  # monotonic: not asked before this
    busy: bool = False  # a call to it is in flight


@dataclass
class RunsPoller(RoundLoop):
    client: RunsClient
    model: RunsInput
    period: float = PERIOD_S
    max_period: float = MAX_PERIOD_S
    call_s: float = CALL_S
    on_round: Callable[[], Any] | None = None
    rounds: int = 0
    failed_rounds: int = 0
    last_error: str | None = None
    _managers: dict[str, _Manager] = field(default_factory=dict)
    _task: asyncio.Task | None = None
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _stopped: bool = False
    _known: set[str] = field(default_factory=set)
    _wanted: set[tuple[str, str]] = field(default_factory=set)  # journals asked for (any state)

    async def _bounded(self, aw: Awaitable[Any]) -> Any:
        return await asyncio.wait_for(aw, self.call_s)

    async def _ask(self, iid: str) -> None:
        m = self._managers.setdefault(iid, _Manager())
        if m.busy or time.monotonic() < m.next_at:
            return
        m.busy = True
        try:
            try:
                rows = await self._bounded(self.client.ps(iid))
            except RunsUnavailable:
                raise
            except (asyncio.TimeoutError, TimeoutError):
                self._silent(iid, m, SILENT)
                return
            except Exception as e:  # noqa: BLE001 - the manager's sentence, shown, retried later
                if _unimplemented(e):  # this manager hosts no run (open mesh): said, asked rarely
                    m.next_at = time.monotonic() + self.max_period
                    self.model.set_runs_unavailable(f"runs: {_sentence(e)}")
                    return
                self._silent(iid, m, _sentence(e))
                return
            m.backoff = 0.0
            views = tuple(view_of_row(r, iid) for r in rows)
            self.model.apply_run_rows(iid, views)
            wanted = {r for i, r in self._wanted if i == iid}
            running = [v for v in sorted(views, key=lambda v: (v.run_id not in wanted, -(v.started_at or 0.0)))
                       if v.state == RUNNING or v.run_id in wanted][:STATUS_PER_ROUND]
            self._wanted -= {(iid, v.run_id) for v in running}
            for v in running:  # one at a time: one call in flight per manager
                try:
                    st = await self._bounded(self.client.status(iid, v.run_id))
                except (asyncio.TimeoutError, TimeoutError):
                    self.model.set_run_status_error(iid, v.run_id, "the manager did not answer run-status")
                    continue
                except Exception as e:  # noqa: BLE001
                    self.model.set_run_status_error(iid, v.run_id, _sentence(e))
                    continue
                journal, pauses = journal_of(st)
                self.model.apply_run_status(iid, v.run_id, journal, pauses)
        finally:
            m.busy = False

    def _silent(self, iid: str, m: _Manager, why: str) -> None:
        m.backoff = min(self.max_period, max(self.period, m.backoff * 2 or self.period))
        m.next_at = time.monotonic() + m.backoff
        self.model.set_runs_silent(iid, why)

    async def poll_once(self) -> None:
        try:
            iids = await self._bounded(self.client.instances())
        except RunsUnavailable as e:
            self.model.set_runs_unavailable(str(e))
            self._stopped = True
            return
        except Exception as e:  # noqa: BLE001 - nothing to ask this round; said, retried
            self.model.set_runs_unavailable(f"runs: cannot read the manager registry ({_sentence(e)})")
            return
        for gone in self._known - iids:
            self._managers.pop(gone, None)
            self.model.forget_run_manager(gone)
        self._known = set(iids)
        if not iids:
            self.model.set_runs_unavailable("no manager is registered in this space, so no run is hosted")
        try:
            await asyncio.gather(*(self._ask(i) for i in sorted(iids)))
        except RunsUnavailable as e:
            self.model.set_runs_unavailable(str(e))
            self._stopped = True
        self.rounds += 1
        if self.on_round is not None:
            self.on_round()

    task_name = "runs-poller"

    def round_failed(self, e: Exception) -> None:
        self.failed_rounds += 1
        self.last_error = _sentence(e)

    def poke(self) -> None:
        """Ask now (after the round in flight, if any): after an answer, or ``F5``."""
        for m in self._managers.values():
            m.next_at = 0.0
        self._wake.set()

    def want_status(self, instance_id: str, run_id: str) -> None:
        """Read this run's journal in the next round whatever its state (the journal is open
        on it), and ask now."""
        self._wanted.add((instance_id, run_id))
        self.poke()


def _sentence(e: BaseException) -> str:
    return " ".join((str(e) or "the call failed").split())[:300]
