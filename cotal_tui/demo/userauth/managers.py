"""Which manager instance a ``manager-caller`` bearer is pinned to, and the serving gate the
session redemption reads (``service.ts`` ``selectManagerInstance`` / ``authorizeManagerCaller``).

The reference reads each instance's serve gate (``epgate.manager.<iid>`` in its ep-auth bucket)
and its ``svc`` registration. This stand-in has no ep-auth bucket: an instance is a *candidate*
when its registration is live (``attach.control.registry``: spec, status ``ready``, observed revision
current) and its spec's ``owner`` is the caller's own derived owner (a participant manager) or
``local`` and it is the co-located manager the plane was told about (``cotal up``'s persisted
manager identity). Selection, as the reference: an explicit selector must name a candidate; with
none, exactly one live own remote manager wins over the local one; two are ambiguous; none and no
local is "no manager candidate".
"""

from __future__ import annotations

import contextlib
import json

from attach.control.registry import Registration, read_registry
from cotal_tui.errors import CotalError
from meshview.wire.names import bucket_names

LOCAL_OWNER = "local"


class ManagerRefused(CotalError, RuntimeError):
    """The exchange or the callout refuses a manager selection; the message is the sentence."""


async def _spec_owner(nc, space: str, iid: str) -> str | None:
    from nats.js.errors import KeyNotFoundError

    kv = await nc.jetstream().key_value(bucket_names(space).records)
    try:
        e = await kv.get(f"svc.manager.{iid}.spec")
    except KeyNotFoundError:
        return None
    with contextlib.suppress(ValueError, UnicodeDecodeError, TypeError):
        doc = json.loads(e.value)
        if isinstance(doc, dict) and isinstance(doc.get("owner"), str):
            return doc["owner"]
    return None


async def manager_view(nc, space: str) -> dict[str, tuple[Registration, str | None]]:
    regs = await read_registry(nc, space)
    return {iid: (r, await _spec_owner(nc, space, iid) if r.spec else None) for iid, r in regs.items()}


def _verdict(reg: Registration, spec_owner: str | None, owner: str, local: str | None) -> str:
    if not reg.spec:
        return "not registered"
    if not reg.expected:
        return "unavailable"
    if spec_owner == owner or (spec_owner == LOCAL_OWNER and reg.instance_id == local):
        return "candidate"
    return "not this owner's"


async def manager_gate(nc, space: str, owner: str, iid: str, *, local: str | None) -> tuple[str, int | None]:
    """``(verdict, processEpoch)`` of one instance for ``owner``: ``candidate`` or why not."""
    view = await manager_view(nc, space)
    if iid not in view:
        return "not registered", None
    reg, spec_owner = view[iid]
    return _verdict(reg, spec_owner, owner, local), reg.epoch


async def authorize_manager_caller(nc, space: str, owner: str, iid: str, *, local: str | None) -> None:
    verdict, _ = await manager_gate(nc, space, owner, iid, local=local)
    if verdict != "candidate":
        raise ManagerRefused(f"manager instance {iid} is {verdict} - request a manager-caller view for "
                             "one of this owner's live managers (managerInstanceId)")


async def select_manager_instance(nc, space: str, owner: str, requested: str | None, *,
                                  local: str | None) -> str:
    if requested is not None:
        await authorize_manager_caller(nc, space, owner, requested, local=local)
        return requested
    view = await manager_view(nc, space)
    own = [iid for iid, (r, o) in view.items() if o == owner and r.spec]
    live = [iid for iid in own if view[iid][0].expected]
    if len(live) == 1:
        return live[0]
    if len(live) > 1:
        raise ManagerRefused(f"{len(live)} live remote manager candidates for this owner - name one with "
                             "managerInstanceId")
    if own:
        raise ManagerRefused("this owner's remote manager is unavailable - name a live one with managerInstanceId")
    if local is not None and local in view and _verdict(*view[local], owner, local) == "candidate":
        return local
    raise ManagerRefused("no manager candidate - no live manager serves this owner (start one, or name it "
                         "with managerInstanceId)")
