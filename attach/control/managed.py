"""Which roster agents a manager hosts: ``ps`` across managers, folded per manager instance.

The fold is pure: each poll round hands it the set of registered instances and the answers;
an instance that answered replaces its rows, a registered one that stayed silent keeps its last
rows, labelled silent, and one no longer registered is dropped with its rows. The poller asks
every ``period`` seconds, re-armed only after the previous round finished, so rounds never
overlap. No Textual or Rich here, and no wording: the roster and the detail card read
:class:`ManagedSeat` and say it in their own words (``attach.control.seat_text``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Iterable

from meshview.wire.names import bucket_names

from attach.control.poller import RoundLoop
from attach.control.row_facts import FACT_CHARS, RowFacts, RowRejected, check_row, row_facts

if TYPE_CHECKING:
    from nats.aio.client import Client as NATS

    from attach.control.verbs import ManagedRow, PsResult

PERIOD_S = 10.0
DEADLINE_MS = 3000


@dataclass(frozen=True)
class ManagedSeat:
    """One ``ps`` row as the console shows it."""

    name: str
    id: str  # the principal as the row gives it (nkey on open/static meshes, owner.actor on user ones)
    instance_id: str
    runtime: str  # mode: pty | tmux | cmux | ...
    process: str  # running | exited
    mesh: str  # the manager's view of presence: working | idle | ... | offline | absent
    mesh_view: str = "current"
    uptime_ms: int = 0
    pid: int | None = None
    host: str | None = None
    lifecycle_uid: str | None = None
    agent: str | None = None
    cols: int | None = None
    rows: int | None = None
    answered_at: float = 0.0  # when the manager said this (observer clock)
    silent_since: float | None = None  # the manager stopped answering; the row is its last word
    facts: RowFacts = RowFacts()  # the row's optional facts (model, cwd, condition, ...)
    rejected: str | None = None  # a known field of the row had another type: why, and no facts read

    @property
    def principal(self) -> str:
        """The roster key: ``owner.actor``; a bare actor belongs to the open/static owner."""
        return self.id if "." in self.id else f"local.{self.id}"

    @property
    def silent(self) -> bool:
        return self.silent_since is not None


@dataclass
class ManagerState:
    instance_id: str
    seats: tuple[ManagedSeat, ...] = ()
    answered_at: float | None = None
    silent_since: float | None = None
    error: str | None = None  # the code of a refusal, when it refused rather than stayed silent


def seat_from_row(row: dict, instance_id: str, now: float) -> ManagedSeat | None:
    name, rid = row.get("name"), row.get("id")
    if not isinstance(name, str) or not isinstance(rid, str) or not name or not rid:
        return None

    def opt_int(k: str) -> int | None:
        v = row.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    def opt_str(k: str) -> str | None:
        v = row.get(k)
        return v[:FACT_CHARS] if isinstance(v, str) else None  # a peer's string: bounded here

    try:
        check_row(row)
        facts, rejected = row_facts(row), None
    except RowRejected as e:
        facts, rejected = RowFacts(), f"{e.code}: {e}"
    return ManagedSeat(
        name=name[:64], id=rid[:256], instance_id=str(row.get("instanceId") or instance_id)[:64],
        runtime=opt_str("mode") or "?", process=opt_str("status") or "?", mesh=opt_str("mesh") or "absent",
        mesh_view=opt_str("meshView") or "current", uptime_ms=opt_int("uptimeMs") or 0,
        pid=opt_int("pid"), host=opt_str("host"), lifecycle_uid=opt_str("lifecycleUid"),
        agent=opt_str("agent"), cols=opt_int("cols"), rows=opt_int("rows"), answered_at=now,
        facts=facts, rejected=rejected,
    )


def is_stranded(s: ManagedSeat) -> bool:
    """A stuck agent: its manager (answering now) reports the seat's process running while the
    agent has no presence record (``mesh: absent``, the manager's view current). The one rule
    the roster's ``⨯ … seat running, no presence`` rows, ``cotal ps`` and the spaces overview
    count by."""
    return (s.process == "running" and s.mesh == "absent" and s.mesh_view == "current"
            and not s.silent)


def stranded(seats: Iterable[ManagedSeat]) -> list[ManagedSeat]:
    """The stranded seats among ``seats``, one per roster key (principal), as the roster shows
    them: the first seat reported under a key stands for it; by principal."""
    out: dict[str, ManagedSeat] = {}
    for s in seats:
        if is_stranded(s):
            out.setdefault(s.principal, s)
    return [out[k] for k in sorted(out)]


def ps_seats(result: PsResult, now: float | None = None) -> list[tuple[ManagedRow, ManagedSeat]]:
    """A ``ps`` scatter's rows (the managers that answered, in order) each with its seat as the
    console's poll reads it, for :func:`stranded`; the answering instance is the reply's, never
    the row's word."""
    now = time.time() if now is None else now
    out = []
    for m in result.managers:
        if m.state != "answered":
            continue
        for r in m.rows:
            seat = seat_from_row(r.raw, m.instance_id, now)
            if seat is not None:
                out.append((r, replace(seat, instance_id=m.instance_id)))
    return out


async def space_stranded(nc: NATS, space: str, deadline_ms: int = DEADLINE_MS
                         ) -> list[ManagedSeat] | None:
    """One round of the console's own ``ps`` poll over ``space`` and its stranded seats (the
    spaces overview's count); None when this credential cannot read the manager registry."""
    poller = PsPoller(nc, space, deadline_ms=deadline_ms)
    await poller.poll_once()
    return None if poller.unreadable else stranded(poller.fold.seats())


@dataclass
class ManagedFold:
    managers: dict[str, ManagerState] = field(default_factory=dict)
    version: int = 0
    rounds: int = 0
    notice: str | None = None  # why there is nothing to poll (said once; the poller has stopped)

    def apply(self, registered: set[str], answers: Mapping[str, list | None], now: float | None = None,
              errors: dict[str, str] | None = None) -> None:
        """One round: ``answers[iid]`` is the row list of each instance that answered."""
        now = time.time() if now is None else now
        errors = errors or {}
        self.rounds += 1
        for iid in list(self.managers):
            if iid not in registered and iid not in answers:
                del self.managers[iid]  # deregistered: its rows go with it
        for iid in registered | set(answers):
            st = self.managers.setdefault(iid, ManagerState(iid))
            rows = answers.get(iid)
            if rows is not None:
                seats = [seat_from_row(r, iid, now) for r in rows if isinstance(r, dict)]
                st.seats = tuple(s for s in seats if s is not None)
                st.answered_at = now
                st.silent_since = None
                st.error = None
            else:
                if st.silent_since is None:
                    st.silent_since = now
                st.error = errors.get(iid)
                st.seats = tuple(_silenced(s, st.silent_since) for s in st.seats)
        self.version += 1

    def seats(self) -> list[ManagedSeat]:
        return [s for st in self.managers.values() for s in st.seats]

    def index(self) -> dict[str, tuple[ManagedSeat, ...]]:
        """Roster key -> every seat a manager reports under it (one lookup table per rebuild)."""
        out: dict[str, list[ManagedSeat]] = {}
        for s in self.seats():
            out.setdefault(s.principal, []).append(s)
        return {k: tuple(v) for k, v in out.items()}

    def bind(self, peer_id: str, lifecycle_uid: str | None = None,
             index: dict[str, tuple[ManagedSeat, ...]] | None = None) -> "Binding":
        """The seat a roster peer is, by principal and lifecycle uid as the managers report
        them; never by name (a display name is anyone's to take)."""
        seats = (self.index() if index is None else index).get(peer_id, ())
        return bind_among(seats, lifecycle_uid)

    def for_peer(self, peer_id: str, lifecycle_uid: str | None = None) -> ManagedSeat | None:
        """The bound seat, or None when the binding is missing or ambiguous."""
        return self.bind(peer_id, lifecycle_uid).seat

    def silent_managers(self) -> list[ManagerState]:
        return [st for st in self.managers.values() if st.silent_since is not None]


@dataclass(frozen=True)
class Binding:
    """A roster peer's seat: ``seat`` when exactly one manager reports it; otherwise
    ``candidates`` (two managers claiming one principal) or nothing (not a managed seat)."""

    seat: ManagedSeat | None
    candidates: tuple[ManagedSeat, ...] = ()

    @property
    def ambiguous(self) -> bool:
        return len(self.candidates) > 1

    def refusal(self, verb: str, label: str) -> str | None:
        """One sentence when ``verb`` cannot go to a seat, else None."""
        if self.seat is not None:
            return None
        if self.ambiguous:
            where = ", ".join(f"{s.instance_id} ({s.id})" for s in self.candidates[:4])
            return (f"{verb}: {label} is claimed by {len(self.candidates)} managers ({where}); "
                    "nothing was done - pick one with cotal ps and --on")
        return f"{verb}: {label} is not a managed seat (no manager reports its id and lifecycle)"


def bind_among(seats: tuple[ManagedSeat, ...], lifecycle_uid: str | None) -> Binding:
    """The one seat of ``seats`` (all under the peer's principal) that is this incarnation: the
    row's lifecycle uid must be the peer's when the peer states one. An answering manager wins
    over a silent one; two answering managers reporting it is ambiguous, never a pick."""
    if lifecycle_uid is not None:
        seats = tuple(s for s in seats if s.lifecycle_uid == lifecycle_uid)
    if not seats:
        return Binding(None)
    live = tuple(s for s in seats if not s.silent)
    pool = live or seats
    if len({s.instance_id for s in pool}) > 1:
        return Binding(None, pool)
    return Binding(pool[0], pool)


def _silenced(s: ManagedSeat, since: float) -> ManagedSeat:
    if s.silent_since == since:
        return s
    return replace(s, silent_since=since)


# ---- the poll --------------------------------------------------------------------------------


async def registered_instances(nc: NATS, space: str) -> set[str]:
    """The instances a ``ps`` expects: the registry's frozen set (:func:`attach.control.registry.freeze`).
    An exited, escalated or deregistered manager is not in it, and neither is one that holds
    only a lease; an unreadable registry is the empty set."""
    from attach.control.registry import RegistryUnreadable, freeze, read_registry

    try:
        return set(freeze(await read_registry(nc, space)))
    except RegistryUnreadable:
        return set()


class PsPoller(RoundLoop):
    """``ps`` on every registered manager every ``period`` seconds, never two rounds at once."""

    task_name = "ps-poller"

    def __init__(self, nc: NATS | None, space: str, fold: ManagedFold | None = None, *, period: float = PERIOD_S,
                 deadline_ms: int = DEADLINE_MS, on_update: Callable[[ManagedFold], Any] | None = None) -> None:
        self.nc = nc  # None: a subclass that connects for each round (attach/control/verbs.py)
        self.space = space
        self.fold = fold or ManagedFold()
        self.period = period
        self.deadline_ms = deadline_ms
        self.on_update = on_update
        self.last_error: str | None = None
        self.unreadable = False  # the credential cannot read the registries: the poll has stopped
        self.in_flight = 0
        self.max_in_flight = 0
        self._init_loop()

    async def poll_once(self) -> None:
        from meshview.link.connect import denial_mark, events_of
        from meshview.wire.envelope import EndpointError

        from attach.control.endpoint import EndpointClient

        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            nc = self.nc
            assert nc is not None  # the round's connection (a per-round subclass set it)
            mark = denial_mark(nc)
            registered = await registered_instances(nc, self.space)
            denied = events_of(nc).denied_since(mark, "publish")
            if not registered and denied and "kv_" in denied.lower():
                # observer/admin credentials cannot read the manager registry: asking again
                # only makes the broker log another violation, so say it once and stop
                b = bucket_names(self.space)
                self.fold.notice = (f"managed seats are not shown: this credential cannot read the manager "
                                    f"registry ({b.manager}, {b.records}); watch from the mesh's project root "
                                    "or registry entry to mint one that can")
                self.unreadable = True
                self.fold.version += 1
                if self.on_update is not None:
                    self.on_update(self.fold)
                return
            answers: dict[str, list | None] = {}
            errors: dict[str, str] = {}
            if registered:
                ep = EndpointClient(nc, self.space)
                try:
                    replies = await ep.scatter("ps", None, deadline_ms=self.deadline_ms, expected=registered)
                except EndpointError as e:  # nobody to describe the contract: every manager is silent
                    replies = []
                    self.last_error = e.code
                for r in replies:
                    if r.ok and isinstance(r.data, list):
                        answers[r.instance_id] = r.data
                    elif r.error is not None:
                        errors[r.instance_id] = r.error.code
            self.fold.apply(registered, answers, errors=errors)
        finally:
            self.in_flight -= 1
        if self.on_update is not None:
            self.on_update(self.fold)

    def finished(self) -> bool:
        return self._stopped or self.unreadable
