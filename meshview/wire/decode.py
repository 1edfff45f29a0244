"""Reader reject rules for deliveries (SPEC §3, §4, §5, §12 item 5).

The hot path is one typed msgspec decode plus a few comparisons; only payloads that fail the
typed decode take a second, generic decode to name the reason.  The subject is checked
before the payload (cheap, cached) and always wins over payload routing fields.  Nothing
here raises on hostile input: every failure is a ``Rejection`` with a stable reason code.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from meshview.wire.messages import (
    DIGEST_RE,
    EXTENSION_KIND_RE,
    ArtifactPart,
    BrokenPart,
    CotalMessage,
    DataPart,
    EndpointRef,
    ExtensionPart,
    Part,
    TextPart,
)
from meshview.wire.parts import AGUI_FRAME_KIND, parts_to_text  # noqa: F401 - re-exported
from meshview.wire.subjects import ParsedSubject, parse_subject

# Stable reason codes (messages.json); subject reasons come from subjects.py.
OK = "ok"
MALFORMED_SUBJECT = "malformed-subject"
MALFORMED_JSON = "malformed-json"
SENDER_MISMATCH = "sender-mismatch"
MALFORMED_ENVELOPE = "malformed-envelope"
NON_CONFORMANT_ENVELOPE = "non-conformant-envelope"
NON_CONFORMANT_PART_KIND = "non-conformant-part-kind"

DELIVERY_KIND = {"chat": "channel", "inst": "dm", "svc": "anycast"}
#: Bare legacy part kinds older builds emitted (json-render ``view``): kept, not rendered.
LEGACY_PART_KINDS = frozenset({"view"})


class Delivery(msgspec.Struct, frozen=True):
    """An accepted message; kind, sender and target come from the subject, never the payload.

    A frozen msgspec Struct rather than a frozen dataclass: same fields and immutability, but
    construction is ~7x cheaper, and one is built per message on the hot path.
    """

    kind: str  # "channel" | "dm" | "anycast"
    subject: ParsedSubject
    message: CotalMessage
    sender: str
    target: str
    dedup_key: str | None
    historical: bool = False


class Rejection(msgspec.Struct, frozen=True):
    """A dropped message.  ``terminate`` marks permanent anomalies a JetStream reader ``term()``s.

    A Struct for the same reason as Delivery: a hostile flood builds one per message.
    """

    reason: str
    subject: str
    terminate: bool = False


class _WirePart(msgspec.Struct):
    """The open part set: only ``kind`` is typed; per-kind checks happen in ``_parts``."""

    kind: str
    text: Any = UNSET
    data: Any = UNSET
    name: Any = UNSET
    mediaType: Any = UNSET
    digest: Any = UNSET
    size: Any = UNSET
    events: Any = UNSET  # read for ``ag-ui.frame`` only (its renderer's input)


class _WireMessage(msgspec.Struct):
    id: str
    ts: int | float
    space: str
    from_: EndpointRef = msgspec.field(name="from")
    parts: list[_WirePart]
    channel: str | UnsetType = UNSET
    to: str | UnsetType = UNSET
    toService: str | UnsetType = UNSET
    mentions: list[str] | UnsetType = UNSET
    replyTo: str | UnsetType = UNSET
    contextId: str | UnsetType = UNSET


_TYPED = msgspec.json.Decoder(_WireMessage)
_GENERIC = msgspec.json.Decoder()


class _PartError(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def decode_delivery(subject: str, payload: bytes, *, history: bool = False) -> Delivery | Rejection:
    """Apply the reader reject rules to one received message.

    ``history`` marks a backfilled row (``Delivery.historical``). Parts that break their own
    shape without breaking the envelope (a legacy ``{"kind":"data"}`` with no ``data``, SPEC
    §5; a text part whose ``text`` is not a string) are kept and shown as markers, live or
    backfilled (upstream ``parts.ts``): dropping the whole message would hide the rest of it.
    A bare unknown kind still rejects the message (messages.json ``bare-unknown-part-kind``).
    """
    ps = parse_subject(subject)
    if not ps.splits:
        return Rejection(MALFORMED_SUBJECT, subject, True)
    if not ps.deliver:
        reason = ps.reason or MALFORMED_SUBJECT
        return Rejection(reason, subject, reason == MALFORMED_SUBJECT)
    try:
        w = _TYPED.decode(payload)
    except msgspec.ValidationError:
        return _classify(ps, payload)
    except (msgspec.DecodeError, RecursionError, TypeError):
        return Rejection(MALFORMED_JSON, subject, True)

    if w.from_.id != ps.sender:
        return Rejection(SENDER_MISMATCH, subject, True)
    ts = w.ts
    if type(ts) is float and not math.isfinite(ts):
        return Rejection(MALFORMED_ENVELOPE, subject)
    if (w.channel is not UNSET) + (w.to is not UNSET) + (w.toService is not UNSET) != 1:
        return Rejection(NON_CONFORMANT_ENVELOPE, subject)
    try:
        parts = _parts(w.parts)
    except _PartError as e:
        return Rejection(e.reason, subject)

    kind = ps.kind
    target = ps.channel if kind == "chat" else ps.recipient if kind == "inst" else ps.role
    msg = CotalMessage(  # positional for speed: id, ts, space, from, parts, routing, extras
        w.id, ts, w.space, w.from_, parts,
        target if kind == "chat" else None,
        target if kind == "inst" else None,
        target if kind == "svc" else None,
        None if w.mentions is UNSET else w.mentions,
        None if w.replyTo is UNSET else w.replyTo,
        None if w.contextId is UNSET else w.contextId,
    )
    return Delivery(DELIVERY_KIND[kind], ps, msg, ps.sender, target, w.id or None, history)


def _parts(raw: list[_WirePart]) -> list[Part]:
    out: list[Part] = []
    for p in raw:
        k = p.kind
        if k == "text":
            if type(p.text) is str:
                out.append(TextPart(p.text))
            else:
                out.append(BrokenPart("text", "no text" if p.text is UNSET
                                      else f"text is a {_json_type(p.text)}, not a string"))
        elif k == "data":
            out.append(DataPart(p.data))  # UNSET: a part with no data ([empty data part])
        elif k == "artifact":
            size = p.size
            if (type(p.name) is not str or type(p.mediaType) is not str
                    or type(p.digest) is not str or not DIGEST_RE.fullmatch(p.digest)
                    or type(size) is not int or size < 0):
                raise _PartError(MALFORMED_ENVELOPE)
            out.append(ArtifactPart(p.name, p.mediaType, p.digest, size))
        elif k in LEGACY_PART_KINDS or EXTENSION_KIND_RE.fullmatch(k):
            keep = p.events if k == AGUI_FRAME_KIND and p.events is not UNSET else None
            out.append(ExtensionPart(k, keep))
        else:
            raise _PartError(NON_CONFORMANT_PART_KIND)
    return out


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return "list" if isinstance(v, list) else "object" if isinstance(v, dict) else type(v).__name__


def _classify(ps: ParsedSubject, payload: bytes) -> Rejection:
    """Name the reason a payload failed the typed decode (cold path)."""
    try:
        obj = _GENERIC.decode(payload)
    except (msgspec.DecodeError, RecursionError, TypeError):
        return Rejection(MALFORMED_JSON, ps.raw, True)
    if not isinstance(obj, dict):
        return Rejection(MALFORMED_ENVELOPE, ps.raw)
    frm = obj.get("from")
    if not isinstance(frm, dict) or frm.get("id") != ps.sender:
        return Rejection(SENDER_MISMATCH, ps.raw, True)
    return Rejection(MALFORMED_ENVELOPE, ps.raw)
