"""The control plane: spawn, stop, input, status and ps on a space's managers, plus the two
history verbs, delchan and purge. No Textual or Rich here: the CLI and the console call these.

Every function is one action on a connection of its own, made from a
:class:`meshview.link.connect.ConnectTarget` and closed when the action ends: control never rides an
observer's connection. A targeted verb first locates the seat (a ``ps`` scatter over the
registered managers, since one manager answers ``not-found`` alike for "hosted elsewhere" and
"does not exist"), then calls the hosting instance on its ``inst`` rail, bound to the epoch that
answered. Failures raise :class:`ControlError` whose message is one sentence; a ``read_only``
reason refuses every mutation before anything touches the network.

On a static-auth mesh each verb mints the credential the reference CLI mints for it: the
manager verbs a one-shot caller instrument, ``purge`` a ``purger`` and ``delchan`` a
``channel-purger`` (:func:`meshview.link.connect.prepare`); the console's ``ps`` panel asks on a
fresh instrument each round (:class:`InstrumentPsPoller`).

``ps`` asks the expected set frozen from the registry (:mod:`attach.control.registry`: live registrations
only, never an exited, escalated or deregistered manager, nor one holding only a lease) and keeps
every frozen slot in the answer (:mod:`attach.control.scatter`): one that replied with rows, one that
refused (its code and message), one that answered from another incarnation (churn), and one
that stayed silent, with what the broker says about it (``gone``: nothing is subscribed on its
rail, so the registration outlived its host - ``cotal deregister-instance`` removes it;
``unknown``: something is subscribed but did not answer within the deadline; ``not-probed`` /
``probe-refused``: this command could not ask). Unexpected, duplicate and late replies are
reported beside them, never dropped. Every manager-sent string in a ControlError's message is
neutralised for a terminal.

On a per-user-auth mesh (the registry entry's ``mode: user``; user-auth digest §3) a user bearer
holds ``owner`` reach on one manager instance only, and neither the registry nor a scatter: each
verb's connection carries a ``manager-caller`` view from the auth service's exchange, pinned to
``--on`` or to the instance the exchange picks (:func:`meshview.link.connect.exchanged_target`). ``ps``
is then one call to that instance, reported as that manager's view (``PsResult.pinned``); a
targeted verb inspects the seat there and calls it in ``owner`` mode (the manager decides from
the caller's ledger scopes); ``input`` is refused before anything is published unless the bearer
carries operator reach; ``purge`` and ``delchan`` ride the ``purger`` and ``channel-purger`` views.

Size: over 500 lines because seven verbs share one locate, pin and call path and its one-
sentence errors; split per verb, each file would repeat it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from attach.errors import AttachLayerError
from meshview.errors import swallowed, swallowing
from meshview.model.resolve import AmbiguousName, Candidate, matches, resolve
from meshview.wire.sanitize import inline as clean
from meshview.link.connect import ConnectError, SubjectDenied, ConnectTarget, caller_of, request_checked
from meshview.link.connect import connect as mesh_connect
from meshview.wire.endpoint import (
    MANAGER,
    Caller,
    goal_progress_pattern,
    is_lifecycle_token,
    is_persona,
    is_seat_name,
    new_nonce,
    new_request_id,
    request_subject,
)
from meshview.wire.envelope import BIND_REFUSED, EndpointError, build_request
from meshview.wire.names import bucket_names, chat_stream, space_token
from meshview.wire.subjects import MAX_CHANNEL_LENGTH, chat_pattern, is_concrete_channel, sanitize_channel

from attach.control.broker import server_version, too_old
from attach.control.endpoint import EndpointClient, Reply
from attach.control.managed import PsPoller
from attach.control.registry import Registration, RegistryUnreadable, Slot, freeze, read_registry
from attach.control.scatter import Stray, scatter

CLIENT_NAME = "cotal-control"
PS_DEADLINE_MS = 8000
CALL_DEADLINE_MS = 10_000
STOP_DEADLINE_MS = 20_000  # the manager's grace before SIGKILL rides inside this
PROBE_S = 2.0  # the reference interest-probe deadline; no-responders comes back in one round trip
READINESS_MS = 30_000  # when the acceptance names no readiness deadline
SETTLE_MARGIN_S = 5.0  # past the readiness deadline, the terminal fact still has this long to land
MAX_REBIND = 3
INPUT_MAX = 65536
JS_API = "$JS.API"
MESSAGE_MAX = 600  # a refusal sentence is cut past this (a manager's message is untrusted)



class ControlError(AttachLayerError):
    """A control action that did not happen (or whose outcome is unknown); ``message`` is one
    sentence for a status line or stderr, ``code`` the §13.3 code (or ``read-only``)."""

    def __init__(self, code: str, message: str):
        message = _sentence(message)
        super().__init__(message)
        self.code = code
        self.message = message


def _sentence(text: str) -> str:
    """One line for a terminal: whitespace folded, and every control, C1 and bidi character a
    manager may have put in its part of the text escaped visibly (:mod:`meshview.wire.sanitize`)."""
    text = clean(" ".join(str(text).split()), limit=MESSAGE_MAX)
    return text if text.endswith((".", "?", "!")) else text + "."


# ---- shapes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ManagedRow:
    """One ``ps``/``inspect`` row, attributed to the instance that answered with it."""

    name: str
    id: str
    agent: str
    mode: str
    process: str  # running | exited (the runtime's fact)
    mesh: str  # the seat's presence as the manager reads it, or absent
    uptime_ms: int
    instance_id: str
    lifecycle_uid: str | None = None
    mesh_view: str = "current"
    role: str | None = None
    pid: int | None = None
    host: str | None = None
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_row(cls, row: dict, instance_id: str) -> "ManagedRow | None":
        name, rid = row.get("name"), row.get("id")
        if not isinstance(name, str) or not name or not isinstance(rid, str) or not rid:
            return None

        def s(k: str, default: str | None = None) -> str | None:
            v = row.get(k)
            return v if isinstance(v, str) else default

        up = row.get("uptimeMs")
        pid = row.get("pid")
        return cls(name=name[:64], id=rid[:256], agent=s("agent", "?") or "?", mode=s("mode", "?") or "?",
                   process=s("status", "?") or "?", mesh=s("mesh", "absent") or "absent",
                   uptime_ms=up if isinstance(up, int) and not isinstance(up, bool) and up >= 0 else 0,
                   instance_id=instance_id, lifecycle_uid=s("lifecycleUid"),
                   mesh_view=s("meshView", "current") or "current", role=s("role"),
                   pid=pid if isinstance(pid, int) and not isinstance(pid, bool) and pid > 0 else None,
                   host=s("host"), raw=row)


@dataclass
class ManagerReport:
    """One frozen slot of a ``ps`` scatter (or the one instance ``--on`` names)."""

    instance_id: str
    state: str  # answered | refused | silent | churn
    rows: list[ManagedRow] = field(default_factory=list)
    code: str | None = None  # refused: the reply's code
    message: str | None = None  # refused: the reply's message (untrusted: neutralise to show)
    liveness: str | None = None  # silent: gone | unknown | not-probed | probe-refused
    registration: Registration | None = None
    epoch: int | None = None  # the epoch that answered
    data: Any = None  # the answer of a command other than ps (its rows are ``rows``)

    @property
    def stale(self) -> bool:
        """Silent with nothing subscribed on its rail: the host is gone, the record is not."""
        return self.state == "silent" and self.liveness == "gone"


@dataclass
class PsResult:
    space: str
    managers: list[ManagerReport]
    strays: list[Stray] = field(default_factory=list)  # unexpected | duplicate | late | churn replies
    skipped: list[Registration] = field(default_factory=list)  # registered, not expected (escalated…)
    pinned: str | None = None  # a user-auth mesh: the one manager this answer is the view of

    @property
    def rows(self) -> list[ManagedRow]:
        return [r for m in self.managers for r in m.rows]

    @property
    def silent(self) -> list[ManagerReport]:
        return [m for m in self.managers if m.state == "silent"]

    @property
    def refused(self) -> list[ManagerReport]:
        return [m for m in self.managers if m.state == "refused"]


@dataclass(frozen=True)
class SpawnResult:
    name: str
    persona: str
    instance_id: str
    outcome: str  # joined | exited | deadline | cancelled
    state: str  # the goal's terminal state as the manager settled it (or uncertain)
    principal: str
    lifecycle_uid: str
    elapsed_s: float
    readiness_ms: int
    data: dict = field(default_factory=dict)
    goal_id: str = ""  # the spawn's goal (its progress and result were read by this id)

    @property
    def joined(self) -> bool:
        return self.outcome == "joined"


@dataclass(frozen=True)
class StopResult:
    name: str
    instance_id: str
    force: bool
    graceful: bool  # the program ended on the graceful signals (no SIGKILL was needed)


@dataclass(frozen=True)
class InputResult:
    name: str
    instance_id: str
    bytes: int


def status_line(row: ManagedRow) -> str:
    """The ``:status`` row: ``name/role · agent · mode · <process> · mesh <presence> · up Nm``.
    Presence ``working`` records a claim, never observed progress, so it says so."""
    mesh = "working · progress unknown" if row.mesh == "working" else row.mesh
    who = f"{row.name}/{row.role}" if row.role else row.name
    return f"{who} · {row.agent} · {row.mode} · {row.process} · mesh {mesh} · up {round(row.uptime_ms / 60000)}m"


# ---- checks before the network ---------------------------------------------------------------


def refuse_read_only(read_only: str | None) -> None:
    if read_only is not None:
        raise ControlError("read-only", f"read-only - {read_only}; nothing was changed")


def check_instance(on: str | None) -> None:
    if on is not None and not is_lifecycle_token(on):
        raise ControlError("bad-request", f"{_show(on)} is not a manager instance id (26 to 32 lowercase "
                           "letters and digits, the whole id as ps prints it)")


def check_seat_name(name: str) -> str:
    name = name.removeprefix("@") if isinstance(name, str) else name
    if not isinstance(name, str) or not name or len(name) > 160 or not name.isprintable() or " " in name:
        raise ControlError("bad-request", f"{_show(name)} is not a seat name or id")
    return name


def _show(v: object) -> str:
    s = repr(v) if not isinstance(v, str) else repr(v[:80])
    return s


# ---- connection and registry -----------------------------------------------------------------


def user_mesh(target: ConnectTarget) -> bool:
    """A per-user-auth mesh whose verbs exchange for their views (not a raw --creds connect)."""
    return target.user_mode and not (target.creds or target.nkey)


def _pinned(nc: Any, space: str) -> str:
    """The manager instance a user-mode connection's ``manager-caller`` view is pinned to."""
    from meshview.link.connect import target_of

    t = target_of(nc)
    iid = t.manager_instance if t is not None else None
    if not iid:
        raise ControlError("failed-precondition", f"the auth service pinned no manager instance for space "
                           f"{space}; name one with --on INSTANCE")
    return iid


def _pin(target: ConnectTarget, on: str | None) -> ConnectTarget:
    """A user-mode control target pinned to ``on`` (the exchange's ``managerInstanceId``)."""
    if not user_mesh(target):
        return target
    return dataclasses.replace(_as_role(target, "control"), manager_instance=on)


def _as_role(target: ConnectTarget, role: str) -> ConnectTarget:
    """``target`` for a verb that needs its own credential: one minted for another role (the
    console's control target) is dropped, so this verb mints the profile it needs."""
    if target.role == role:
        return target
    keep = target.credential is not None and getattr(target.credential, "profile", None) == role
    return dataclasses.replace(target, role=role, credential=target.credential if keep else None)


async def _connect(target: ConnectTarget) -> Any:
    try:
        nc, _ = await mesh_connect(dataclasses.replace(target, name=CLIENT_NAME))
    except ConnectError as e:
        raise ControlError(e.code, str(e)) from None
    nc.options["allow_reconnect"] = False  # one action: a dropped link ends it, never revives it
    old = too_old(server_version(nc))
    if old is not None:
        await _close(nc)
        raise ControlError("failed-precondition", old)
    return nc


async def _close(nc: Any) -> None:
    with swallowing("attach.control.verbs:_close"):
        await asyncio.wait_for(nc.close(), 2.0)


async def registrations(nc: Any, space: str) -> dict[str, Registration]:
    """Every manager instance the space's registry names (:mod:`attach.control.registry`)."""
    try:
        return await read_registry(nc, space)
    except RegistryUnreadable as e:
        if not e.absent:
            raise ControlError("unavailable", f"the manager registry of space {space} could not be read "
                               f"({e}); try again") from None
        raise ControlError("not-found", f"space {space} is not provisioned (no manager registry)") from None


async def expected_slots(nc: Any, space: str) -> tuple[dict[str, Registration], dict[str, Slot]]:
    """The registry and the frozen expected set; an empty set is ``failed-precondition``, never an
    empty success (the reference's freeze)."""
    regs = await registrations(nc, space)
    frozen = freeze(regs)
    if not frozen:
        raise ControlError("failed-precondition", no_manager_sentence(space, regs))
    return regs, frozen


def no_manager_sentence(space: str, regs: dict[str, Registration]) -> str:
    if not regs:
        return f"no manager is registered in space {space}"
    why = sorted({r.skip_reason or "" for r in regs.values()} - {""})
    return f"no live manager is registered in space {space} ({len(regs)} record(s): {', '.join(why)})"


async def probe(nc: Any, space: str, instance_id: str, timeout: float = PROBE_S) -> str:
    """Is anything subscribed on the instance's rail? The broker answers "no responders" when
    nothing is (``gone``); silence means something is there but did not answer (``unknown``)."""
    from nats.errors import NoRespondersError

    bound = caller_of(nc)  # a minted instrument may only speak as its own caller
    caller = Caller(*bound) if bound else Caller.fresh()
    nonce = new_nonce()
    generation = (await EndpointClient(nc, space, caller=caller).bind()).generation  # its own rail (§13.15)
    subject = request_subject(space, MANAGER, "describe", caller, nonce, route="inst", instance_id=instance_id,
                              generation=generation)
    body = json.dumps(build_request(endpoint=MANAGER, command="describe", caller=caller,
                                    deadline_ms=int(timeout * 1000), name=CLIENT_NAME)).encode()
    try:
        await nc.request(subject, body, timeout=timeout)
    except NoRespondersError:
        return "gone"
    except (asyncio.TimeoutError, TimeoutError):
        return "unknown"
    except Exception:  # noqa: BLE001 - any refusal of the probe is the answer [counted: COTAL_LOG]
        swallowed("attach.control.verbs:probe")
        return "probe-refused"
    return "unknown"


# ---- ps and locate ---------------------------------------------------------------------------


async def _gather_ps(nc: Any, ep: EndpointClient, space: str, *, on: str | None,
                     deadline_ms: int, command: str = "ps") -> tuple[PsResult, dict[str, Reply]]:
    """``ps`` over the frozen expected set (or the one instance ``on`` names), each silent slot
    labelled by a liveness probe run beside the gather."""
    if on is not None:
        regs = await registrations(nc, space)
        if on not in regs or not regs[on].spec:
            raise ControlError("not-found", f"no manager instance {on} is registered in space {space}")
        frozen = {on: Slot(on, regs[on].spec_revision or 0, regs[on].epoch or 0)}
    else:
        regs, frozen = await expected_slots(nc, space)
    waiting = set(frozen)  # shrinks as probes find instances with nothing on their rail
    lives: dict[str, str] = {}

    async def reconcile() -> dict[str, Slot]:
        return freeze(await read_registry(nc, space))

    async def ask() -> tuple[dict[str, Reply], list[Stray], set[str]]:
        try:
            if on is not None:
                r = await ep.call(command, None, instance_id=on, deadline_ms=deadline_ms)
                return {on: r}, [], set()
            got = await scatter(ep, command, None, frozen, deadline_ms=deadline_ms, waiting=waiting,
                                reconcile=reconcile)
            return got.answers, got.strays, got.churned
        except EndpointError as e:
            if e.code != "deadline-exceeded":
                raise ControlError(e.code, f"{command}: {e.message}") from None
            return {}, [], set()

    asking = asyncio.ensure_future(ask())

    async def probe_one(iid: str) -> None:
        lives[iid] = await probe(nc, space, iid)
        if lives[iid] == "gone":
            waiting.discard(iid)
            if not waiting and on is not None:
                asking.cancel()  # nothing left that could answer

    probes = {iid: asyncio.ensure_future(probe_one(iid)) for iid in frozen}
    answers: dict[str, Reply] = {}
    strays: list[Stray] = []
    churned: set[str] = set()
    try:
        await asyncio.wait({asking})
        if not asking.cancelled():
            answers, strays, churned = asking.result()
        for iid, t in probes.items():
            if iid in answers:
                t.cancel()
        await asyncio.gather(*(t for iid, t in probes.items() if iid not in answers), return_exceptions=True)
    finally:
        for t in probes.values():
            t.cancel()
        asking.cancel()
    reports: list[ManagerReport] = []
    for iid, r in answers.items():
        if r.ok and command != "ps":
            reports.append(ManagerReport(iid, "answered", registration=regs.get(iid), epoch=r.epoch,
                                         data=r.data))
        elif r.ok and isinstance(r.data, list):
            rows = [ManagedRow.from_row(x, iid) for x in r.data if isinstance(x, dict)]
            reports.append(ManagerReport(iid, "answered", [x for x in rows if x is not None],
                                         registration=regs.get(iid), epoch=r.epoch))
        else:
            err = r.error
            reports.append(ManagerReport(iid, "refused", code=err.code if err else "internal",
                                         message=err.message if err else "a malformed ps answer",
                                         registration=regs.get(iid), epoch=r.epoch))
    for iid in sorted(churned - set(answers)):
        reports.append(ManagerReport(iid, "churn", registration=regs.get(iid)))
    for iid in sorted(set(frozen) - set(answers) - churned):
        reports.append(ManagerReport(iid, "silent", liveness=lives.get(iid, "not-probed"),
                                     registration=regs.get(iid)))
    order = {"answered": 0, "refused": 1, "churn": 2, "silent": 3}
    reports.sort(key=lambda m: (order[m.state], m.instance_id))
    skipped = sorted((r for i, r in regs.items() if i not in frozen and r.skip_reason == "escalated"),
                     key=lambda r: r.instance_id)
    return PsResult(space, reports, strays, skipped), answers


async def ps(target: ConnectTarget, *, on: str | None = None, deadline_ms: int = PS_DEADLINE_MS) -> PsResult:
    """Every registered manager's seats (or one instance's, ``on``), silent and refusing
    managers named with their reason. An empty ``managers`` list: nothing is registered."""
    check_instance(on)
    if user_mesh(target):
        return await _run(_pin(target, on), lambda nc: _user_ps(nc, target.space, deadline_ms))
    return await _run(target, lambda nc: _ps(nc, target.space, on, deadline_ms))


async def _user_ps(nc: Any, space: str, deadline_ms: int) -> PsResult:
    """A user mesh's ``ps``: one ``inst`` call to the pinned manager, never a scatter and never a
    registry read (a user bearer holds neither); its rows are that manager's view."""
    space = space_token(space)
    iid = _pinned(nc, space)
    ep = EndpointClient(nc, space, name=CLIENT_NAME)
    try:
        r = await ep.call("ps", None, instance_id=iid, deadline_ms=deadline_ms)
    except EndpointError as e:
        if e.code != "deadline-exceeded":
            raise ControlError(e.code, f"ps on manager {iid}: {e.message}") from None
        return PsResult(space, [ManagerReport(iid, "silent", liveness="unknown")], pinned=iid)
    if r.ok and isinstance(r.data, list):
        rows = [ManagedRow.from_row(x, iid) for x in r.data if isinstance(x, dict)]
        rep = ManagerReport(iid, "answered", [x for x in rows if x is not None], epoch=r.epoch)
    else:
        err = r.error
        rep = ManagerReport(iid, "refused", code=err.code if err else "internal",
                            message=err.message if err else "a malformed ps answer", epoch=r.epoch)
    return PsResult(space, [rep], pinned=iid)


async def _ps(nc: Any, space: str, on: str | None, deadline_ms: int) -> PsResult:
    result, _ = await _gather_ps(nc, EndpointClient(nc, space, name=CLIENT_NAME), space_token(space),
                                 on=on, deadline_ms=deadline_ms)
    return result


@dataclass
class _Located:
    row: ManagedRow
    instance_id: str
    epoch: int


Expect = tuple[str, "str | None"]  # a seat bound by id: (row id, lifecycleUid) as its manager reported


def seat_candidates(rows: list[ManagedRow]) -> list[Candidate]:
    """``ps`` rows as resolver candidates: addressed by row id, told apart by manager instance."""
    return [Candidate(seat_principal(r.id), r.name, r.process, f"manager {r.instance_id}", r) for r in rows]


def seat_principal(rid: str) -> str:
    """A row id as a principal: ``owner.actor``, or a bare actor under the open/static owner."""
    return rid if "." in rid else f"local.{rid}"


async def _locate(nc: Any, ep: EndpointClient, space: str, name: str, on: str | None,
                  expect: Expect | None = None) -> _Located:
    loc = await _locate_any(nc, ep, space, name, on)
    if expect is not None and (loc.row.id, loc.row.lifecycle_uid) != expect:
        # the seat this verb was bound to (by id, from a ps row) is not the one found now
        raise ControlError("failed-precondition",
                           f"seat {name!r} on manager {loc.instance_id} is not the bound seat "
                           f"{_show(expect[0])} any more; nothing was done")
    return loc


async def _locate_any(nc: Any, ep: EndpointClient, space: str, name: str, on: str | None) -> _Located:
    user = _user_nc(nc)
    if user:  # a user mesh: the pinned instance is the only one this credential reaches
        on = _pinned(nc, space)
    if on is not None:
        regs = {} if user else await registrations(nc, space)
        if not user and (on not in regs or not regs[on].spec):
            raise ControlError("not-found", f"no manager instance {on} is registered in space {space}")
        try:
            r = await ep.call("inspect", {"name": name}, instance_id=on, deadline_ms=CALL_DEADLINE_MS)
        except EndpointError as e:
            raise ControlError(e.code, f"manager {on} did not answer: {e.message}") from None
        if not r.ok:
            assert r.error is not None
            if r.error.code == "not-found":
                raise ControlError("not-found", f"no managed agent {name!r} on manager {on}")
            raise ControlError(r.error.code, f"manager {on} refused: {r.error.message}")
        row = ManagedRow.from_row(r.data if isinstance(r.data, dict) else {}, r.instance_id)
        if row is None:
            raise ControlError("contract-invalid", f"manager {on} answered inspect without a seat row")
        return _Located(row, r.instance_id, r.epoch)
    result, replies = await _gather_ps(nc, ep, space, on=None, deadline_ms=PS_DEADLINE_MS)
    hits = matches(name, seat_candidates(result.rows))  # a name or a row id; never the first look-alike
    if len(hits) == 1:
        row = hits[0].item
        return _Located(row, row.instance_id, replies[row.instance_id].epoch)
    if len(hits) > 1:
        try:
            resolve(name, hits, what="seat", outcome="nothing was done")
        except AmbiguousName as e:
            raise ControlError("failed-precondition", f"{e} (--on INSTANCE picks the manager)") from None
    answered = [m for m in result.managers if m.state == "answered"]
    msg = f"no managed agent {name!r} on any of the {len(answered)} answering manager(s) in space {space}"
    quiet = [m.instance_id for m in result.managers if m.state != "answered"]
    if quiet:
        msg += f"; {len(quiet)} registered manager(s) did not answer ({', '.join(quiet)})"
    raise ControlError("not-found", msg)


def _user_nc(nc: Any) -> bool:
    from meshview.link.connect import target_of

    t = target_of(nc)
    return t is not None and user_mesh(t)


def _target_of(row: ManagedRow, caller: Caller) -> dict:
    owner, dot, actor = row.id.partition(".")
    if not dot:
        owner, actor = caller.owner, row.id
    if not is_lifecycle_token(row.lifecycle_uid):
        raise ControlError("contract-invalid", f"the row of seat {row.name!r} carries no lifecycleUid")
    return {"owner": owner, "actor": actor, "lifecycleUid": row.lifecycle_uid}


def _bind_refused(e: EndpointError | None) -> bool:
    return (e is not None and e.effective_outcome == "not-executed"
            and any(isinstance(d, dict) and d.get("kind") == BIND_REFUSED for d in e.details))


async def _targeted(nc: Any, space: str, name: str, on: str | None, command: str, args: Any,
                    deadline_ms: int, expect: Expect | None = None) -> tuple[_Located, Any]:
    """Locate, then call the hosting instance bound to the epoch that answered; a bind refusal
    (the manager restarted in between, nothing was done) locates again."""
    ep = EndpointClient(nc, space, name=CLIENT_NAME)
    mode = "owner" if _user_nc(nc) else "any"  # a user bearer never holds any-mode reach
    for _ in range(MAX_REBIND):
        loc = await _locate(nc, ep, space, name, on, expect)
        try:
            r = await ep.call(command, args, instance_id=loc.instance_id, target=_target_of(loc.row, ep.caller),
                              mode=mode, bind={"instanceId": loc.instance_id, "epoch": loc.epoch},
                              deadline_ms=deadline_ms)
        except EndpointError as e:
            if e.code == "deadline-exceeded":
                raise ControlError("deadline-exceeded", f"manager {loc.instance_id} did not answer {command} "
                                   f"within {deadline_ms // 1000} s; the outcome is unknown") from None
            raise ControlError(e.code, f"{command}: {e.message}") from None
        if r.ok:
            return loc, r.data
        if _bind_refused(r.error):
            continue
        assert r.error is not None
        if r.error.code in ("not-found", "expired"):
            raise ControlError(r.error.code, f"seat {name!r} is gone from manager {loc.instance_id}")
        raise ControlError(r.error.code, f"manager {loc.instance_id} refused {command}: {r.error.message}")
    raise ControlError("unavailable", f"manager of seat {name!r} kept restarting; nothing was done")


# ---- the verbs -------------------------------------------------------------------------------


async def _run(target: ConnectTarget, body: Callable[[Any], Any]) -> Any:
    """One connection for one action; every failure leaves as a ControlError."""
    nc = await _connect(target)
    try:
        return await body(nc)
    except ControlError:
        raise
    except EndpointError as e:
        raise ControlError(e.code, e.message) from None
    except ValueError as e:  # a token the subject builders refused
        raise ControlError("bad-request", str(e)) from None
    except Exception as e:  # noqa: BLE001 - one sentence, never a traceback
        raise ControlError("internal", f"{type(e).__name__}: {e}") from None
    finally:
        await _close(nc)


async def status(target: ConnectTarget, name: str, *, on: str | None = None) -> ManagedRow:
    """One seat's row, answered by the manager that hosts it."""
    name = check_seat_name(name)
    check_instance(on)

    async def body(nc: Any) -> ManagedRow:
        space = space_token(target.space)
        ep = EndpointClient(nc, space, name=CLIENT_NAME)
        loc = await _locate(nc, ep, space, name, on)
        if on is not None or _user_nc(nc):
            return loc.row  # _locate already asked the pinned host
        try:
            r = await ep.call("inspect", {"name": name}, instance_id=loc.instance_id, deadline_ms=CALL_DEADLINE_MS)
        except EndpointError as e:
            raise ControlError(e.code, f"manager {loc.instance_id} did not answer: {e.message}") from None
        if not r.ok:
            assert r.error is not None
            if r.error.code == "not-found":
                raise ControlError("not-found", f"seat {name!r} is gone from manager {loc.instance_id}")
            raise ControlError(r.error.code, f"manager {loc.instance_id} refused: {r.error.message}")
        row = ManagedRow.from_row(r.data if isinstance(r.data, dict) else {}, r.instance_id)
        if row is None:
            raise ControlError("contract-invalid", f"manager {loc.instance_id} answered without a seat row")
        return row

    return await _run(_pin(target, on), body)


async def stop(target: ConnectTarget, name: str, *, force: bool = False, on: str | None = None,
               read_only: str | None = None, expect: Expect | None = None) -> StopResult:
    """Stop a seat: graceful (the manager signals, then SIGKILLs after its grace) or force.
    ``expect`` (row id, lifecycleUid) binds it to one seat: another one there is refused."""
    refuse_read_only(read_only)
    name = check_seat_name(name)
    check_instance(on)

    async def body(nc: Any) -> StopResult:
        loc, data = await _targeted(nc, space_token(target.space), name, on, "despawn",
                                    {"graceful": not force}, STOP_DEADLINE_MS, expect)
        graceful = bool(data.get("graceful")) if isinstance(data, dict) else False
        return StopResult(name, loc.instance_id, force, graceful)

    return await _run(_pin(target, on), body)


async def input_text(target: ConnectTarget, name: str, text: str, *, enter: bool = True, on: str | None = None,
                     read_only: str | None = None, expect: Expect | None = None) -> InputResult:
    """Type ``text`` into a seat's terminal, then Enter unless ``enter`` is false; ``expect``
    binds it to one seat (row id, lifecycleUid), as for :func:`stop`."""
    refuse_read_only(read_only)
    name = check_seat_name(name)
    check_instance(on)
    if not isinstance(text, str) or not text:
        raise ControlError("bad-request", "there is no text to type")
    if len(text) > INPUT_MAX:
        raise ControlError("bad-request", f"the text is {len(text)} characters; a seat takes at most {INPUT_MAX}")

    async def body(nc: Any) -> InputResult:
        if _user_nc(nc):
            refuse_without_operator_reach(nc)
        loc, data = await _targeted(nc, space_token(target.space), name, on, "input",
                                    {"text": text, "enter": enter}, CALL_DEADLINE_MS, expect)
        n = data.get("bytes") if isinstance(data, dict) else None
        return InputResult(name, loc.instance_id, n if isinstance(n, int) and n >= 0 else 0)

    return await _run(_pin(target, on), body)


def refuse_without_operator_reach(nc: Any) -> None:
    """``input`` is operator-only: on a user mesh the verbs ride a ``manager-caller`` view, which
    never carries operator reach (the reference's smoke: an ordinary user's owner-mode ``input``
    is refused by the broker and nothing reaches the seat), so it is refused here, before
    anything is published."""
    from meshview.link.connect import exchanged_of

    b = exchanged_of(nc)
    if b is not None and b.view != "manager-caller":
        return  # not the manager-caller view: the broker and the manager decide
    who = f" ({b.owner}.{b.actor})" if b is not None else ""
    raise ControlError("permission-denied", f"input is operator-only on a per-user-auth mesh: the "
                       f"manager-caller view your verbs run on{who} carries no operator reach; attach to "
                       "the seat and type there instead (cotal attach NAME); nothing was typed")


@dataclass(frozen=True)
class LaunchOptions:
    """The launch fields ``cotal spawn`` takes besides the persona and the seat name, each sent
    under its contract key only when given (the manager's persona file fills in the rest)."""

    agent: str | None = None  # the connector (harness)
    role: str | None = None
    model: str | None = None
    variant: str | None = None
    config: str | None = None  # a persona file on the manager's host, instead of the PERSONA ref
    prompt: str | None = None
    cwd: str | None = None
    subscribe: tuple[str, ...] | None = None
    allow_subscribe: tuple[str, ...] | None = None
    allow_publish: tuple[str, ...] | None = None
    events: bool | None = None
    share_tools: tuple[str, ...] | None = None  # the MCP servers shared with the seat; (): none


def spawn_request(persona: str, name: str | None = None, options: LaunchOptions | None = None) -> dict:
    """The ``spawn`` args, in the reference's vocabulary (manager.ts ``StartAgentOpts``, which the
    rev-22 ``SPAWN_INPUT_SCHEMA`` transcribes): ``name`` is the persona ref the manager resolves
    under its root, ``identity`` the seat-name override of the file's own ``name:``; every other
    key only when the user gave it."""
    o = options or LaunchOptions()
    args: dict = {"name": persona}
    if name is not None:
        args["identity"] = name
    for key, v in (("agent", o.agent), ("role", o.role), ("model", o.model), ("variant", o.variant),
                   ("config", o.config), ("prompt", o.prompt), ("cwd", o.cwd)):
        if v is not None:
            args[key] = v
    for key, vs in (("subscribe", o.subscribe), ("allowSubscribe", o.allow_subscribe),
                    ("allowPublish", o.allow_publish)):
        if vs is not None:
            args[key] = list(vs)
    if o.events is not None:
        args["events"] = o.events
    if o.share_tools is not None:
        args["shareTools"] = list(o.share_tools)
    return args


SHARE_TOOLS_NONE = "none"  # the rev-21 flag text for "share no server"


def fit_share_tools(args: dict, schema: dict | None) -> dict:
    """``args`` in the shape the responder's spawn schema declares for ``shareTools``: the list
    (rev 22) as is; to a manager whose contract still types it as the ``--share-tools`` flag text
    (rev 21), that text (``a,b``; ``none`` for no server), when every name can be said in it.
    A name that cannot (a comma, surrounding spaces, or ``none`` itself) is refused, never
    reshaped into a different selection; an undeclared key is left for the call's own refusal."""
    tools = args.get("shareTools")
    props = schema.get("properties") if isinstance(schema, dict) else None
    decl = props.get("shareTools") if isinstance(props, dict) else None
    if not isinstance(tools, list) or not isinstance(decl, dict) or decl.get("type") != "string":
        return args
    bad = [t for t in tools if not t or "," in t or t != t.strip() or t == SHARE_TOOLS_NONE]
    if bad:
        raise ControlError("bad-request", f"the manager's contract carries --share-tools as one comma-separated "
                           f"string, which cannot say the server name {_show(bad[0])}; upgrade that manager "
                           "(contract revision 22 takes a list); nothing was spawned")
    return {**args, "shareTools": ",".join(tools) if tools else SHARE_TOOLS_NONE}


_OUTCOMES = {"succeeded": "joined", "failed": "exited", "uncertain": "deadline", "expired": "deadline",
             "cancelled": "cancelled"}


async def spawn(target: ConnectTarget, persona: str, *, name: str | None = None, on: str | None = None,
                read_only: str | None = None, progress: Callable[[str], Any] | None = None,
                options: LaunchOptions | None = None) -> SpawnResult:
    """Start a seat from ``persona`` and wait for the first fact: it joined the mesh (presence),
    its program exited first, or the manager's readiness deadline passed. ``progress`` hears
    one line per step."""
    refuse_read_only(read_only)
    if not is_persona(persona):
        raise ControlError("bad-request", f"{_show(persona)} is not a persona name")
    if name is not None and not is_seat_name(name):
        raise ControlError("bad-request", f"{_show(name)} is not a seat name (a letter, then up to 31 letters, "
                           "digits, '_' or '-')")
    check_instance(on)

    def say(line: str) -> None:
        if progress is not None:
            with swallowing("attach.control.verbs:spawn.say"):
                progress(clean(line))  # the seat name in it is the manager's

    async def body(nc: Any) -> SpawnResult:
        space = space_token(target.space)
        ep = EndpointClient(nc, space, name=CLIENT_NAME)
        pin = on
        if _user_nc(nc):  # the pinned manager; a user bearer reads no registry
            pin = _pinned(nc, space)
        else:
            regs = await registrations(nc, space)
            if on is not None:
                if on not in regs or not regs[on].spec:
                    raise ControlError("not-found", f"no manager instance {on} is registered in space {space}")
            elif not freeze(regs):
                raise ControlError("unavailable", no_manager_sentence(space, regs))
        goal_id = new_request_id()
        facts: asyncio.Queue = asyncio.Queue()

        async def on_fact(msg: Any) -> None:
            try:
                body = json.loads(msg.data)
            except ValueError:
                return
            if isinstance(body, dict) and body.get("goalId") == goal_id:
                facts.put_nowait((msg.subject.split(".")[4], body))

        sub = await nc.subscribe(goal_progress_pattern(space, MANAGER, ep.caller, goal_id), cb=on_fact)
        try:
            await nc.flush()  # the progress read is live before the action leaves
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            args = spawn_request(persona, name, options)
            try:
                if "shareTools" in args:
                    args = fit_share_tools(args, await ep.input_schema("spawn", pin))
                r = await ep.call("spawn", args, instance_id=pin, request_id=goal_id, deadline_ms=CALL_DEADLINE_MS)
            except EndpointError as e:
                if e.code == "deadline-exceeded":
                    raise ControlError("deadline-exceeded", "no manager answered spawn within "
                                       f"{CALL_DEADLINE_MS // 1000} s; the outcome is unknown, see ps") from None
                raise ControlError(e.code, f"spawn: {e.message}") from None
            if not r.ok:
                assert r.error is not None
                raise ControlError(r.error.code, f"manager {r.instance_id} refused spawn: {r.error.message}")
            acc = r.data if isinstance(r.data, dict) else {}
            seat = str(acc.get("name") or name or persona)
            ready_ms = acc.get("readinessDeadlineMs")
            ready_ms = ready_ms if isinstance(ready_ms, int) and ready_ms > 0 else READINESS_MS
            say(f"spawning {persona} as {seat} on manager {r.instance_id}…")
            end = t0 + ready_ms / 1000 + SETTLE_MARGIN_S
            terminal: dict | None = None
            while terminal is None:
                left = end - loop.time()
                if left <= 0:
                    break
                try:
                    iid, fact = await asyncio.wait_for(facts.get(), left)
                except asyncio.TimeoutError:
                    break
                if iid != r.instance_id:
                    continue
                if fact.get("phase") == "presence":
                    say(f"{seat} joined the mesh")
                elif fact.get("phase") == "terminal":
                    terminal = fact
            if terminal is None:  # missed or late: ask the executor for the settled fact
                with contextlib.suppress(EndpointError):
                    g = await ep.call("goal-result", {"goalId": goal_id}, instance_id=r.instance_id,
                                      deadline_ms=3000)
                    if g.ok and isinstance(g.data, dict) and isinstance(g.data.get("result"), dict):
                        terminal = g.data["result"]
            state = str((terminal or {}).get("state") or "uncertain")
            data = (terminal or {}).get("data")
            return SpawnResult(
                name=seat, persona=persona, instance_id=r.instance_id, outcome=_OUTCOMES.get(state, "deadline"),
                state=state, principal=f"{acc.get('owner', 'local')}.{acc.get('actor', '?')}",
                lifecycle_uid=str(acc.get("uid") or ""), elapsed_s=loop.time() - t0, readiness_ms=ready_ms,
                data=data if isinstance(data, dict) else {}, goal_id=goal_id)
        finally:
            with swallowing("attach.control.verbs:spawn.body"):
                await sub.unsubscribe()

    return await _run(_pin(target, on), body)


# ---- history: delchan and purge ----------------------------------------------------------------


async def _purge_stream(nc: Any, stream: str, subject_filter: str | None = None) -> int:
    req: dict = {}
    if subject_filter is not None:
        req["filter"] = subject_filter
    try:
        msg = await request_checked(nc, f"{JS_API}.STREAM.PURGE.{stream}", json.dumps(req).encode(), timeout=5.0)
    except SubjectDenied:
        raise ControlError("permission-denied", f"the broker refused the purge of {stream}: these "
                           "credentials may not purge it; nothing was deleted") from None
    except (asyncio.TimeoutError, TimeoutError):
        raise ControlError("deadline-exceeded", f"the broker did not answer the purge of {stream} within 5 s; "
                           "the outcome is unknown") from None
    try:
        o = json.loads(msg.data)
    except ValueError:
        raise ControlError("internal", f"the broker's answer to the purge of {stream} is not JSON") from None
    err = o.get("error") if isinstance(o, dict) else None
    if err:
        if isinstance(err, dict) and err.get("err_code") == 10059:
            raise ControlError("not-found", f"stream {stream} does not exist")
        desc = err.get("description") if isinstance(err, dict) else err
        raise ControlError("permission-denied" if "permission" in str(desc).lower() else "internal",
                           f"the broker refused the purge of {stream}: {desc}")
    n = o.get("purged") if isinstance(o, dict) else None
    return n if isinstance(n, int) and n >= 0 else 0


def check_channel(channel: str) -> str:
    ch = channel.removeprefix("#").strip() if isinstance(channel, str) else ""
    if not ch:
        raise ControlError("bad-request", "name the channel to delete")
    if not is_concrete_channel(ch):
        raise ControlError("bad-request", f"#{ch} is a wildcard, not a deletable channel")
    try:
        same = sanitize_channel(ch) == ch
    except ValueError:
        same = False
    if not same or len(ch) > MAX_CHANNEL_LENGTH:
        raise ControlError("bad-request", f"{_show(ch)} is not a channel name the wire carries as written")
    return ch


async def delchan(target: ConnectTarget, channel: str, *, read_only: str | None = None) -> int:
    """Delete one channel: its retained messages in the CHAT stream (a purge filtered to
    ``cotal.<s>.chat.*.*.<ch>``, which no sub-channel matches) and its entry in the channels
    registry, if it has one. Returns the number of messages purged."""
    refuse_read_only(read_only)
    ch = check_channel(channel)

    async def body(nc: Any) -> int:
        space = space_token(target.space)
        purged = await _purge_stream(nc, chat_stream(space), chat_pattern(space, ch))
        had_entry = False
        with swallowing("attach.control.verbs:delchan.body"):
            kv = await nc.jetstream().key_value(bucket_names(space).channels)
            try:
                await kv.get(ch)
                had_entry = True
            except Exception:  # noqa: BLE001 - an unreadable entry is no entry [counted: COTAL_LOG]
                swallowed("attach.control.verbs:delchan.body")
                had_entry = False
            if had_entry:
                await kv.delete(ch)
        if not purged and not had_entry:
            raise ControlError("not-found", f"space {space} has no channel #{ch} (no messages, no registry entry)")
        return purged

    return await _run(_as_role(target, "channel-purger"), body)


async def purge(target: ConnectTarget, *, read_only: str | None = None) -> int:
    """Purge the space's chat history (every message of its CHAT stream); returns the count.
    Channel registry entries stay: a channel's configuration is not its history."""
    refuse_read_only(read_only)

    async def body(nc: Any) -> int:
        return await _purge_stream(nc, chat_stream(space_token(target.space)))

    return await _run(_as_role(target, "purger"), body)


# ---- the console's ps poll on a static mesh ------------------------------------------------------


ROUND_SLACK_S = 12.0  # registry reads (two buckets) on top of the scatter's own deadline


class InstrumentPsPoller(PsPoller):
    """``ps`` for the console's managers/seats panel where the console's own (admin view)
    credential cannot read the manager registry: every round mints a one-shot caller instrument
    from the mesh root's seed and asks on a connection of its own, closed when the round ends
    (the reference console's ``controlPs``: one resolve-and-mint per poll, nothing standing)."""

    def __init__(self, target: ConnectTarget, space: str, **kw: Any) -> None:
        super().__init__(None, space, **kw)
        self.target = _as_role(dataclasses.replace(target, space=space), "control")

    async def poll_once(self) -> None:
        nc = await _connect(self.target)  # ControlError: the round fails and the next one retries
        self.nc = nc
        try:  # a round never outlives its instrument's connection: bounded, then closed
            await asyncio.wait_for(super().poll_once(), self.deadline_ms / 1000 + ROUND_SLACK_S)
        finally:
            self.nc = None
            await _close(nc)


class UserPsPoller(PsPoller):
    """``ps`` for the console's managers/seats panel on a per-user-auth mesh: every round asks the
    one manager its ``manager-caller`` view is pinned to, on a connection of its own (the held
    bearer while fresh, a re-exchanged one past 80% of its lifetime, so an expiring bearer never
    interrupts the panel), closed when the round ends."""

    def __init__(self, target: ConnectTarget, space: str, **kw: Any) -> None:
        super().__init__(None, space, **kw)
        self.target = _pin(dataclasses.replace(target, space=space), None)
        self.pinned: str | None = None

    async def poll_once(self) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            nc = await _connect(self.target)  # ControlError: the round fails and the next one retries
            try:
                res = await asyncio.wait_for(_user_ps(nc, self.space, self.deadline_ms),
                                             self.deadline_ms / 1000 + ROUND_SLACK_S)
            finally:
                await _close(nc)
            m = res.managers[0]
            self.pinned = res.pinned
            answers = {m.instance_id: [r.raw for r in m.rows]} if m.state == "answered" else {}
            errors = {m.instance_id: m.code or "internal"} if m.state == "refused" else {}
            self.fold.apply({m.instance_id}, answers, errors=errors)
        finally:
            self.in_flight -= 1
        if self.on_update is not None:
            self.on_update(self.fold)


def ps_poller(nc: Any, target: ConnectTarget, space: str, **kw: Any) -> PsPoller:
    """The console's ``ps`` poller: over its own connection where that reads the registries
    (open mesh, ``--creds``), on minted instruments where the mesh is static and its view
    credential was minted from the root."""
    if user_mesh(target) and target.can_exchange:
        return UserPsPoller(target, space, **kw)
    if target.mode == "auth" and target.root and not (target.creds or target.nkey):
        return InstrumentPsPoller(target, space, **kw)
    return PsPoller(nc, space, **kw)
