"""The plane-liveness probe (SPEC §6.1 as the reference's ``liveness.ts`` and
docs/presence-and-delivery.md "Plane liveness" state it): the one place its wire rules live.

A peer asks ``cotal.<space>.live.<plane>.<owner>.<actor>`` (its OWN principal in the last two
tokens, so the publish grant it already holds covers the ask) with the reply subject
``<request>.reply.<nonce>``; a responder, bound in a queue group on ``live.<plane>.*.*``, answers
``{plane, responder, instance?}`` and grades itself. How the ask ENDED decides the verdict:
a reply defers to the responder's own grade, the broker's "no responders" (503) is ``unbound``,
and a timeout, a refusal or an unreadable reply is ``unknown`` — never health.

The planes are a closed set (``manager``, ``delivery``); an answer about another plane, an
unknown grade, a non-string or empty ``instance`` or a body past :data:`ANSWER_MAX_BYTES` is
refused by name (:class:`LivenessRejected`), which the caller grades ``unknown``.
"""

from __future__ import annotations

import json
import secrets
from typing import Literal, get_args

from meshview.wire.names import space_token

Plane = Literal["manager", "delivery"]
PLANES: tuple[str, ...] = get_args(Plane)
Responder = Literal["bound", "unbound", "stale", "unknown"]
RESPONDERS: tuple[str, ...] = get_args(Responder)
Outcome = Literal["replied", "noResponders", "timeout", "refused", "malformed"]

ANSWER_MAX_BYTES = 1024  # an answer is three short fields; anything larger is not one
INSTANCE_MAX = 64  # the opaque per-bind token (SPEC §13.2 id bound)
QUEUE = "liveness"  # the responders' queue group: one answer per ask


class LivenessRejected(ValueError):
    """A reply that is not a liveness answer; ``code`` names why (``liveness:<why>``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def check_plane(plane: str) -> Plane:
    if plane not in PLANES:
        raise ValueError(f"no liveness plane {plane!r} (the planes are {', '.join(PLANES)})")
    return plane  # type: ignore[return-value]


def probe_subject(space: str, plane: str, owner: str, actor: str) -> str:
    """Where a peer asks: its own principal after the plane."""
    return f"cotal.{space_token(space)}.live.{check_plane(plane)}.{owner}.{actor}"


def serve_filter(space: str, plane: str) -> str:
    """What a responder subscribes (in queue group :data:`QUEUE`)."""
    return f"cotal.{space_token(space)}.live.{check_plane(plane)}.*.*"


def reply_subject(request: str, nonce: str | None = None) -> str:
    return f"{request}.reply.{nonce or secrets.token_hex(12)}"


def answer(plane: str, responder: str, instance: str | None = None) -> bytes:
    """A responder's answer body."""
    if responder not in RESPONDERS:
        raise ValueError(f"no responder state {responder!r}")
    body: dict[str, str] = {"plane": check_plane(plane), "responder": responder}
    if instance is not None:
        body["instance"] = instance
    return json.dumps(body, separators=(",", ":")).encode()


def parse_answer(data: bytes, expect: str) -> tuple[Responder, str | None]:
    """``(responder, instance)`` from a reply, strict as the reference's ``parseLivenessAnswer``;
    raises :class:`LivenessRejected` for anything else."""
    if len(data) > ANSWER_MAX_BYTES:
        raise LivenessRejected("liveness:oversize", f"a liveness answer of {len(data)} bytes "
                               f"(an answer fits in {ANSWER_MAX_BYTES})")
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise LivenessRejected("liveness:malformed-json", "a liveness answer that is not JSON") from None
    if not isinstance(body, dict):
        raise LivenessRejected("liveness:malformed", "a liveness answer that is not an object")
    plane, responder, instance = body.get("plane"), body.get("responder"), body.get("instance")
    if plane != expect:
        raise LivenessRejected("liveness:wrong-plane", f"an answer about another plane to a {expect} probe")
    if responder not in RESPONDERS:
        raise LivenessRejected("liveness:bad-state", "a liveness answer with no readable responder state")
    if instance is not None and (not isinstance(instance, str) or not instance or len(instance) > INSTANCE_MAX):
        raise LivenessRejected("liveness:bad-instance", "a liveness answer whose instance token is unreadable")
    return responder, instance


def responder_from_probe(outcome: Outcome, answered: Responder | None = None) -> Responder:
    """THE one rule: only the broker's no-responders is ``unbound``; only a reply may say more."""
    if outcome == "replied":
        return answered or "unknown"
    if outcome == "noResponders":
        return "unbound"
    return "unknown"


LEASE_KEY = "lease.0"  # the delivery daemon's shard-0 lease in ``cotal_delivery_<space>`` (wire.md §7)
LEASE_TTL_MS = 30_000  # that bucket's TTL: a heartbeat older than this should have been refreshed
LEASE_MAX_BYTES = 4096
HOLDER_MAX = 256


def delivery_lease(data: bytes) -> tuple[str, int, bool]:
    """``(holder, since_ms, ready)`` from a ``DeliveryLeaseInfo`` record; :class:`LivenessRejected`
    (``lease:malformed``) for anything else, so a bad record is named, never read as health."""
    if len(data) > LEASE_MAX_BYTES:
        raise LivenessRejected("lease:oversize", f"a delivery lease of {len(data)} bytes")
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise LivenessRejected("lease:malformed", "a delivery lease that is not JSON") from None
    holder = body.get("holder") if isinstance(body, dict) else None
    since = body.get("since") if isinstance(body, dict) else None
    ready = body.get("ready") if isinstance(body, dict) else None
    if (not isinstance(holder, str) or len(holder) > HOLDER_MAX or isinstance(since, bool)
            or not isinstance(since, int) or since < 0 or not isinstance(ready, bool)):
        raise LivenessRejected("lease:malformed", "a delivery lease without holder, since and ready")
    return holder, since, ready


def ask_grants(space: str, owner: str, actor: str) -> tuple[str, str]:
    """``(publish, subscribe)`` rows that let a principal ask the probe as itself and hear the
    answer (§6.1: an ordinary agent credential may ask; a pure observer may not)."""
    ask = f"cotal.{space_token(space)}.live.*.{owner}.{actor}"
    return ask, f"{ask}.reply.*"
