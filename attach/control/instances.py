"""The managers themselves: ``deregister-instance``, ``status`` of each manager, ``personas``
and ``models``. No Textual or Rich here; the CLI and the console call these.

``deregister_instance`` is the reference's guarded deregistration (``deregister-instance.ts``):
an explicit verb for one named instance, never a sweep. It asks the instance first (a pinned
``describe``, 5 s: an answer refuses ``instance-answered``), then the broker (an interest probe on
the instance's own rail, 2 s: only "no responders" is ``gone``; anything else refuses
``instance-not-affirmed-gone``, and a probe that could not run ``liveness-unestablishable``).
Only on ``gone`` does it touch the registry: status first, then spec, each delete pinned to the
revision it read (``not-registered`` when there is no spec, ``superseded`` when a key moved).
The same instance re-registers on its next start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from meshview.errors import swallowed
from meshview.link.connect import ConnectTarget
from meshview.wire.endpoint import MANAGER
from meshview.wire.envelope import EndpointError
from meshview.wire.names import bucket_names, space_token

from attach.control.verbs import (
    CALL_DEADLINE_MS,
    CLIENT_NAME,
    PS_DEADLINE_MS,
    ControlError,
    PsResult,
    _gather_ps,
    _pin,
    _pinned,
    _run,
    _user_nc,
    check_instance,
    probe,
    refuse_read_only,
)
from attach.control.endpoint import EndpointClient

DESCRIBE_MS = 5000  # the reference's pinned-describe deadline
INTEREST_MS = 2000  # the reference's interest-probe deadline

# refusal conditions, as the reference names them
INSTANCE_ANSWERED = "instance-answered"
NOT_AFFIRMED_GONE = "instance-not-affirmed-gone"
UNESTABLISHABLE = "liveness-unestablishable"
NOT_REGISTERED = "not-registered"
SUPERSEDED = "superseded"


class DeregisterRefused(ControlError):
    """A refusal of ``deregister-instance``; ``code`` is the reference's condition."""


@dataclass(frozen=True)
class InstanceProbe:
    state: str  # answered | gone | unknown | unestablishable
    detail: str


@dataclass(frozen=True)
class DeregisterReport:
    endpoint: str
    instance_id: str
    probe: InstanceProbe
    removed_spec_revision: int
    removed_status_revision: int | None = None

    def as_json(self) -> dict:
        """The reference's report shape."""
        out: dict = {"endpoint": self.endpoint, "instanceId": self.instance_id,
                     "probe": {"state": self.probe.state, "detail": self.probe.detail},
                     "removedSpecRevision": self.removed_spec_revision}
        if self.removed_status_revision is not None:
            out["removedStatusRevision"] = self.removed_status_revision
        return out


async def probe_instance(nc: Any, space: str, instance_id: str, *, describe_ms: int = DESCRIBE_MS,
                         interest_ms: int = INTEREST_MS) -> InstanceProbe:
    """Both questions: does it answer a pinned describe, and if not, is its rail empty?"""
    ep = EndpointClient(nc, space, name=CLIENT_NAME)
    try:
        r = await ep.describe(instance_id=instance_id, deadline_ms=describe_ms)
        return InstanceProbe("answered", f"it answered a pinned describe at epoch {r.epoch}")
    except EndpointError as e:
        if e.code != "deadline-exceeded":
            return InstanceProbe("unestablishable", f"the probe itself failed: {e.message}")
    silence = f"no answer to a pinned describe within {describe_ms} ms"
    verdict = await probe(nc, space, instance_id, timeout=interest_ms / 1000)
    if verdict == "gone":
        return InstanceProbe("gone", f"{silence}, and the broker reports nothing subscribed on its rail")
    if verdict == "unknown":
        return InstanceProbe("unknown", f"{silence}, and the broker did not report its rail empty within "
                             f"{interest_ms} ms - a held subscription is what withholds that answer, so the "
                             "instance is quiet rather than absent")
    return InstanceProbe("unestablishable", f"{silence}, and the broker's rail check could not run")


async def _delete_pinned(kv: Any, key: str, revision: int) -> bool:
    try:
        await kv.delete(key, last=revision)
    except Exception:  # noqa: BLE001 - a wrong-last-sequence refusal: the key moved [counted: COTAL_LOG]
        swallowed("attach.control.instances:_delete_pinned")
        return False
    return True


async def deregister_instance(target: ConnectTarget, instance_id: str, *, read_only: str | None = None,
                              describe_ms: int = DESCRIBE_MS, interest_ms: int = INTEREST_MS,
                              log: Callable[[str], Any] | None = None) -> DeregisterReport:
    """Remove the registration of one manager instance whose host is gone (see the module doc)."""
    refuse_read_only(read_only)
    if instance_id is None:
        raise ControlError("bad-request", "name the manager instance to deregister")
    check_instance(instance_id)

    async def body(nc: Any) -> DeregisterReport:
        from nats.js.errors import KeyDeletedError, KeyNotFoundError

        space = space_token(target.space)
        seen = await probe_instance(nc, space, instance_id, describe_ms=describe_ms, interest_ms=interest_ms)
        if log is not None:
            log(f"instance {MANAGER}/{instance_id}: {seen.state} - {seen.detail}")
        if seen.state == "answered":
            raise DeregisterRefused(INSTANCE_ANSWERED, (
                f"{MANAGER}/{instance_id} answered ({seen.detail}) - it is alive, and a live instance is never "
                "deregistered; if it is wedged, stop its process first"))
        if seen.state == "unknown":
            raise DeregisterRefused(NOT_AFFIRMED_GONE, (
                f"{MANAGER}/{instance_id} did not answer, but the broker did not affirm its rail empty "
                f"({seen.detail}); nothing was removed - stop the process if it is hung, then run this again"))
        if seen.state != "gone":
            raise DeregisterRefused(UNESTABLISHABLE, (
                f"the liveness of {MANAGER}/{instance_id} could not be established ({seen.detail}); "
                "nothing was removed"))
        try:
            kv = await nc.jetstream().key_value(bucket_names(space).records)
        except Exception:  # noqa: BLE001
            raise ControlError("not-found", f"space {space} has no manager registry") from None
        spec_key = f"svc.manager.{instance_id}.spec"
        status_key = f"svc.manager.{instance_id}.status"
        try:
            spec = await kv.get(spec_key)
        except (KeyNotFoundError, KeyDeletedError):
            spec = None
        if spec is None or not spec.value:
            raise DeregisterRefused(NOT_REGISTERED, (
                f"{MANAGER}/{instance_id} has no registration to remove - it never registered, or it was "
                "already deregistered (ps prints the whole id, and this takes nothing shorter)"))
        status_rev: int | None = None
        try:
            status = await kv.get(status_key)
            status_rev = status.revision if status.value else None
        except (KeyNotFoundError, KeyDeletedError):
            status_rev = None
        moved = (f"the registration of {MANAGER}/{instance_id} moved while this ran (something is writing "
                 "it); nothing more was removed - look again before retrying")
        if status_rev is not None and not await _delete_pinned(kv, status_key, status_rev):
            raise DeregisterRefused(SUPERSEDED, moved)
        if not await _delete_pinned(kv, spec_key, spec.revision):
            raise DeregisterRefused(SUPERSEDED, moved)
        if log is not None:
            log(f"removed the {MANAGER} registration of {instance_id} (spec revision {spec.revision}"
                + (f", status revision {status_rev})" if status_rev is not None else ", no status key)"))
        return DeregisterReport(MANAGER, instance_id, seen, spec.revision, status_rev)

    return await _run(target, body)


# ---- manager-level reads ---------------------------------------------------------------------


async def manager_status(target: ConnectTarget, *, on: str | None = None,
                         deadline_ms: int = PS_DEADLINE_MS) -> PsResult:
    """``status`` of every live manager (a scatter over the frozen set), or of ``on``; each
    answering report carries the manager's status record in ``data``."""
    return await _manager_read("status", target, on, deadline_ms)


async def manager_slots(target: ConnectTarget, *, on: str | None = None,
                        deadline_ms: int = PS_DEADLINE_MS) -> PsResult:
    """``slots`` of every live manager (``cotal ps --slots``), or of ``on``: each answering report
    carries its durable static-slot rows (SlotRow) in ``data``."""
    return await _manager_read("slots", target, on, deadline_ms)


async def _manager_read(command: str, target: ConnectTarget, on: str | None, deadline_ms: int) -> PsResult:
    """One argument-less manager-level read, scattered (or the one ``on``; on a user mesh the
    one manager the view is pinned to, no registry read)."""
    check_instance(on)

    async def body(nc: Any) -> PsResult:
        space = space_token(target.space)
        if _user_nc(nc):
            iid, data = await _call(nc, space, command, None, _pinned(nc, space), deadline_ms)
            from attach.control.verbs import ManagerReport

            return PsResult(space, [ManagerReport(iid, "answered", data=data)], pinned=iid)
        result, _ = await _gather_ps(nc, EndpointClient(nc, space, name=CLIENT_NAME), space, on=on,
                                     deadline_ms=deadline_ms, command=command)
        return result

    return await _run(_pin(target, on), body)


async def _call(nc: Any, space: str, command: str, args: Any, on: str | None,
                deadline_ms: int = CALL_DEADLINE_MS) -> tuple[str, Any]:
    ep = EndpointClient(nc, space, name=CLIENT_NAME)
    try:
        r = await ep.call(command, args, instance_id=on, deadline_ms=deadline_ms)
    except EndpointError as e:
        if e.code == "deadline-exceeded":
            raise ControlError(e.code, f"no manager answered {command} within "
                               f"{deadline_ms // 1000} s") from None
        raise ControlError(e.code, f"{command}: {e.message}") from None
    if not r.ok:
        assert r.error is not None
        raise ControlError(r.error.code, f"manager {r.instance_id} refused {command}: {r.error.message}")
    return r.instance_id, r.data


async def _read(target: ConnectTarget, command: str, args: Any, on: str | None) -> tuple[str, Any]:
    check_instance(on)

    async def body(nc: Any) -> tuple[str, Any]:
        space = space_token(target.space)
        return await _call(nc, space, command, args, _pinned(nc, space) if _user_nc(nc) else on)

    return await _run(_pin(target, on), body)


async def list_personas(target: ConnectTarget, *, on: str | None = None) -> tuple[str, list[dict]]:
    """The manager's persona catalogue: ``(instanceId, [{name, role?, model?, description?, owner?,
    error?}])``."""
    iid, data = await _read(target, "list-personas", None, on)
    items = data.get("personas") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ControlError("contract-invalid", f"manager {iid} answered list-personas without a personas list")
    return iid, [p for p in items if isinstance(p, dict) and isinstance(p.get("name"), str)]


async def show_persona(target: ConnectTarget, name: str, *, on: str | None = None) -> tuple[str, dict]:
    """One persona, its text in ``persona``."""
    if not isinstance(name, str) or not name:
        raise ControlError("bad-request", "name the persona to show")
    iid, data = await _read(target, "show-persona", {"name": name}, on)
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ControlError("contract-invalid", f"manager {iid} answered show-persona without a persona")
    return iid, data


async def list_models(target: ConnectTarget, *, agent: str | None = None, refresh: bool = False,
                      on: str | None = None) -> tuple[str, list[dict]]:
    """Each connector's model catalogue: ``[{agent, supported, models, error?}]``."""
    args: dict = {}
    if agent is not None:
        args["agent"] = agent
    if refresh:
        args["refresh"] = True
    iid, data = await _read(target, "models", args, on)
    items = data.get("catalogs") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ControlError("contract-invalid", f"manager {iid} answered models without catalogs")
    return iid, [c for c in items if isinstance(c, dict)]
