"""The manager registry as a scatter reads it: which instances are expected to answer.

Registration is not liveness. A reference manager writes ``svc.manager.<iid>.spec`` and
``….status`` (state ``ready``; ``exited`` when it ends; ``escalated`` when its supervisor spent
the restart budget, irreversibly) and deletes both on a clean stop. The expected set is frozen
from these records exactly as the reference freezes it (``freezeExpectedSet``): a spec with no
status never converged, ``exited`` and ``escalated`` are not live, and a status whose
``observedSpecRevision`` lags the spec's revision belongs to an older registration. What is left
is frozen as ``(instanceId, registrationRevision, epoch)``. The liveness lease in
``cotal_manager_<space>`` is a hint for display; it never makes an instance expected.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from meshview.wire.endpoint import is_lifecycle_token
from meshview.wire.names import bucket_names

EXITED = "exited"
ESCALATED = "escalated"
READY = "ready"


class RegistryUnreadable(Exception):
    """The records bucket could not be read (absent, or this credential may not read it)."""


@dataclass(frozen=True)
class Registration:
    """What the space's registry says about one manager instance."""

    instance_id: str
    spec_revision: int | None = None  # the registrationRevision; None: no spec (deregistered)
    state: str | None = None  # the status record's state; None: no status record
    epoch: int | None = None
    observed_spec_revision: int | None = None
    status_revision: int | None = None
    lease: bool = False  # a live lease (a hint only; never makes the instance expected)

    @property
    def spec(self) -> bool:
        return self.spec_revision is not None

    @property
    def skip_reason(self) -> str | None:
        """Why a scatter does not expect this instance (None: it does)."""
        if self.spec_revision is None:
            return "lease-only" if self.lease else "deregistered"
        if self.state is None or self.epoch is None:
            return "never-converged"
        if self.state == EXITED:
            return EXITED
        if self.state == ESCALATED:
            return ESCALATED
        if self.observed_spec_revision is None or self.observed_spec_revision < self.spec_revision:
            return "behind"
        return None

    @property
    def expected(self) -> bool:
        return self.skip_reason is None


@dataclass(frozen=True)
class Slot:
    """One frozen expected instance: the coordinate a reply must match."""

    instance_id: str
    registration_revision: int
    epoch: int


def _uint(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


async def read_registry(nc: Any, space: str) -> dict[str, Registration]:
    """Every manager instance the records (and, as a hint, the leases) name. Raises
    :class:`RegistryUnreadable` when the records bucket cannot be read."""
    js = nc.jetstream()
    b = bucket_names(space)
    from nats.js.errors import NoKeysError

    try:
        records = await js.key_value(b.records)
    except Exception as e:  # noqa: BLE001 - absent bucket, or a denied read
        raise RegistryUnreadable(str(e)) from None
    try:
        keys = await records.keys()
    except NoKeysError:
        keys = []
    except Exception as e:  # noqa: BLE001
        raise RegistryUnreadable(str(e)) from None
    ids: set[str] = set()
    for k in keys:
        p = k.split(".")
        if len(p) == 4 and p[:2] == ["svc", "manager"] and p[3] in ("spec", "status") and is_lifecycle_token(p[2]):
            ids.add(p[2])
    out: dict[str, Registration] = {}
    for iid in ids:
        spec_rev = state = epoch = observed = status_rev = None
        with contextlib.suppress(Exception):
            e = await records.get(f"svc.manager.{iid}.spec")
            if e.value:
                spec_rev = e.revision
        with contextlib.suppress(Exception):
            e = await records.get(f"svc.manager.{iid}.status")
            rec = json.loads(e.value) if e.value else None
            if isinstance(rec, dict):
                status_rev = e.revision
                s = rec.get("state")
                state = s if isinstance(s, str) else None
                epoch = _uint(rec.get("epoch"))
                observed = _uint(rec.get("observedSpecRevision"))
        out[iid] = Registration(iid, spec_rev, state, epoch, observed, status_rev)
    with contextlib.suppress(Exception):
        kv = await js.key_value(b.manager)
        for k in await kv.keys():
            iid = k[len("lease."):] if k.startswith("lease.") else ""
            if is_lifecycle_token(iid):
                r = out.get(iid, Registration(iid))
                out[iid] = Registration(r.instance_id, r.spec_revision, r.state, r.epoch,
                                        r.observed_spec_revision, r.status_revision, lease=True)
    return out


def freeze(regs: dict[str, Registration]) -> dict[str, Slot]:
    """The expected set: ``(instanceId, registrationRevision, epoch)`` of every live registration."""
    return {iid: Slot(iid, r.spec_revision, r.epoch)  # type: ignore[arg-type]
            for iid, r in regs.items() if r.expected}
