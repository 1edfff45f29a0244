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

from attach.errors import AttachLayerError

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from meshview.errors import swallowing
from meshview.wire.endpoint import is_lifecycle_token
from meshview.wire.names import bucket_names

EXITED = "exited"
ESCALATED = "escalated"
READY = "ready"


class RegistryUnreadable(AttachLayerError):
    """The records bucket could not be read: ``absent`` when it does not exist or this
    credential may not read it, otherwise a read that failed (a slow or refusing server)."""

    def __init__(self, message: str, *, absent: bool = True) -> None:
        super().__init__(message)
        self.absent = absent


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

    def slot(self) -> Slot | None:
        """The coordinate a reply must match, when a scatter expects this instance."""
        if self.skip_reason is not None or self.spec_revision is None or self.epoch is None:
            return None
        return Slot(self.instance_id, self.spec_revision, self.epoch)


@dataclass(frozen=True)
class Slot:
    """One frozen expected instance: the coordinate a reply must match."""

    instance_id: str
    registration_revision: int
    epoch: int


def _uint(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


async def kv_keys(js: Any, bucket: str, prefix: str = "") -> list[str]:
    """The keys under ``prefix`` that the bucket's stream holds a subject for (tombstones
    included: a read of one then says deleted), from one ``STREAM.INFO`` with a subject filter —
    the read the reference's freeze makes. nats-py's ``kv.keys()`` is not used: its watch can
    signal "no more keys" before the first key arrives when the loop is busy, which turned a
    registered manager into an absent one under load."""
    stream, head = f"KV_{bucket}", f"$KV.{bucket}."
    info = await js.stream_info(stream, subjects_filter=f"{head}{prefix}>")
    return [subj[len(head):] for subj in (info.state.subjects or {}) if subj.startswith(head)]


async def _get(kv: Any, key: str) -> Any:
    """One record, or None when it is absent or deleted; a read that fails twice (a slow or
    refusing server) raises :class:`RegistryUnreadable`, never reads as absent."""
    from nats.js.errors import KeyNotFoundError

    for attempt in (1, 2):
        try:
            e = await kv.get(key)
            return e if e.value else None
        except KeyNotFoundError:  # KeyDeletedError included
            return None
        except Exception as e:  # noqa: BLE001 - a timeout or a refusal
            if attempt == 2:
                raise RegistryUnreadable(f"reading {key}: {type(e).__name__}", absent=False) from None
    return None


async def read_registry(nc: Any, space: str) -> dict[str, Registration]:
    """Every manager instance the records (and, as a hint, the leases) name. Raises
    :class:`RegistryUnreadable` when the records bucket cannot be read (``absent`` when it does
    not exist or may not be read at all)."""
    js = nc.jetstream()
    b = bucket_names(space)
    try:
        records = await js.key_value(b.records)
        keys = await kv_keys(js, b.records, "svc.manager.")
    except Exception as e:  # noqa: BLE001 - absent bucket, or a denied read
        raise RegistryUnreadable(str(e)) from None
    ids: set[str] = set()
    for k in keys:
        p = k.split(".")
        if len(p) == 4 and p[:2] == ["svc", "manager"] and p[3] in ("spec", "status") and is_lifecycle_token(p[2]):
            ids.add(p[2])
    out: dict[str, Registration] = {}
    for iid in sorted(ids):
        spec_rev = state = epoch = observed = status_rev = None
        entry = await _get(records, f"svc.manager.{iid}.spec")
        if entry is not None:
            spec_rev = entry.revision
        entry = await _get(records, f"svc.manager.{iid}.status")
        rec = None
        if entry is not None:
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                rec = json.loads(entry.value)
        if isinstance(rec, dict):
            status_rev = entry.revision
            s = rec.get("state")
            state = s if isinstance(s, str) else None
            epoch = _uint(rec.get("epoch"))
            observed = _uint(rec.get("observedSpecRevision"))
        out[iid] = Registration(iid, spec_rev, state, epoch, observed, status_rev)
    with swallowing("attach.control.registry:read_registry"):  # the leases are a display hint only
        for iid in await read_leases(js, space):
            r = out.get(iid, Registration(iid))
            out[iid] = Registration(r.instance_id, r.spec_revision, r.state, r.epoch,
                                    r.observed_spec_revision, r.status_revision, lease=True)
    return out


async def read_leases(js: Any, space: str) -> set[str]:
    """The manager instances holding a live lease in ``cotal_manager_<space>`` (a deleted or
    expired lease is not live). Raises :class:`RegistryUnreadable`: ``absent`` when there is no
    lease bucket, otherwise a read that failed — never an empty set for a slow server."""
    from nats.js.errors import BucketNotFoundError, NotFoundError

    bucket = bucket_names(space).manager
    try:
        leases = await js.key_value(bucket)
        keys = await kv_keys(js, bucket, "lease.")
    except (BucketNotFoundError, NotFoundError):
        raise RegistryUnreadable(f"no lease bucket {bucket}") from None
    except Exception as e:  # noqa: BLE001 - a timeout or a refusal
        raise RegistryUnreadable(f"reading {bucket}: {type(e).__name__}", absent=False) from None
    out: set[str] = set()
    for k in keys:
        iid = k[len("lease."):]
        if is_lifecycle_token(iid) and await _get(leases, k) is not None:
            out.add(iid)
    return out


def freeze(regs: dict[str, Registration]) -> dict[str, Slot]:
    """The expected set: ``(instanceId, registrationRevision, epoch)`` of every live registration."""
    return {iid: s for iid, r in regs.items() if (s := r.slot()) is not None}
