"""Reader reject rules for deliveries (SPEC §3, §4, §5, §12 item 5).

The hot path is one typed msgspec decode plus a few comparisons; only payloads that fail the
typed decode take a second, generic decode to name the reason.  The subject is checked
before the payload (cheap, cached) and always wins over payload routing fields.  Nothing
here raises on hostile input: every failure is a ``Rejection`` with a stable reason code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import islice
from typing import Any, Literal, final

import msgspec
from msgspec import UNSET, UnsetType

from meshview.wire import bounds as B
from meshview.wire.bounds import Cuts
from meshview.wire.frames import MAX_SEQ
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
from meshview.wire.parts import AGUI_FRAME_KIND, parts_to_text
from meshview.wire.subjects import ParsedSubject, is_event_channel, parse_subject

# Stable reason codes (messages.json); subject reasons come from subjects.py.
OK = "ok"
MALFORMED_SUBJECT = "malformed-subject"
MALFORMED_JSON = "malformed-json"
SENDER_MISMATCH = "sender-mismatch"
MALFORMED_ENVELOPE = "malformed-envelope"
NON_CONFORMANT_ENVELOPE = "non-conformant-envelope"
NON_CONFORMANT_PART_KIND = "non-conformant-part-kind"

DeliveryKind = Literal["channel", "dm", "anycast"]
DELIVERY_KIND: dict[str, DeliveryKind] = {"chat": "channel", "inst": "dm", "svc": "anycast"}
#: Bare legacy part kinds older builds emitted (json-render ``view``): kept, not rendered.
LEGACY_PART_KINDS = frozenset({"view"})


@final  # never subclassed: readers test ``type(d) is Delivery`` on the hot path
class Delivery(msgspec.Struct, frozen=True):
    """An accepted message; kind, sender and target come from the subject, never the payload.

    A frozen msgspec Struct rather than a frozen dataclass: same fields and immutability, but
    construction is ~7x cheaper, and one is built per message on the hot path.
    """

    kind: DeliveryKind
    subject: ParsedSubject
    message: CotalMessage
    sender: str
    target: str
    dedup_key: str | None
    historical: bool = False
    #: the fields the decode cut to their byte bounds (``meshview.wire.bounds``), for counting
    cuts: tuple[str, ...] = ()

    def applied(self, received: float | None = None, historical: bool | None = None) -> Applied:
        """This delivery as the model applies it (``MeshModel.apply_message``): ``received``
        the observer's receipt time, ``historical`` a backfilled row (default: as decoded)."""
        msg = self.message
        kind, target = self.kind, self.target
        channel = target if kind == "channel" else None
        frm = msg.from_
        return Applied(  # positional (Applied's field order): one per message on the hot path
            kind, msg.id, msg.ts, self.sender, frm.name, frm.role, parts_to_text(msg.parts),
            msg.parts, channel, target if kind == "dm" else None,
            target if kind == "anycast" else None,
            self.historical if historical is None else historical,
            kind == "channel" and is_event_channel(target), received,
            msg.contextId or msg.id,  # ``reply_context`` (wire/outbound.py), inlined: per message
            msg.replyTo, msg.contextId, msg.mentions,
        )


@final  # readers test ``type(d) is Applied`` on the hot path (decode_applied)
class Applied(msgspec.Struct, frozen=True, gc=False):
    """One delivery as the model applies it: the one value ``MeshModel.apply_message`` takes
    and a recording stores (meshview/record/record.py). Built by :meth:`Delivery.applied`;
    sender, kind and target come from the subject, the rest from the validated, bounded
    envelope. Field names are :class:`~meshview.model.snapshot.FeedEntry`'s, and a recording
    made when ``apply_message`` took these as keyword arguments replays as this value.

    Untracked by the collector (``gc=False``): it holds strings, numbers and wire parts only.
    A field added later (the activity work's frame envelope) takes a default, so a value
    recorded before it still reads.
    """

    kind: DeliveryKind  # the subject's
    id: str
    ts: float  # the sender's stamp (self-asserted: never an order)
    from_id: str  # the authenticated principal (the subject's)
    from_name: str  # the envelope's claim, shown against the roster's entry
    from_role: str | None = None
    text: str = ""  # the parts as one string (``parts_to_text``)
    parts: Sequence[Part] = ()
    channel: str | None = None
    to: str | None = None  # a DM's recipient principal
    to_service: str | None = None  # an anycast's role
    historical: bool = False  # a backfilled row (history prefill)
    event: bool = False  # on an agent event channel (``events.<owner>.<actor>``)
    received: float | None = None  # the observer's receipt time (None: the model's clock)
    context_id: str | None = None  # the thread a reply to this joins (``reply_context``)
    reply_to: str | None = None  # ``replyTo`` as sent
    wire_context_id: str | None = None  # ``contextId`` as sent
    mentions: Sequence[str] | None = None  # ``mentions`` as sent


@final
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
    # read for ``ag-ui.frame`` only: its envelope (events.md §2.1) and events
    events: Any = UNSET
    protocol: Any = None
    threadId: Any = None
    runId: Any = None
    epoch: Any = None
    seq: Any = None


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
    d = _decode(subject, payload, history, None)
    if type(d) is Applied:  # unreachable: ``received`` None never takes the one-value form
        raise AssertionError("decode_delivery built an Applied")
    return d


def decode_applied(subject: str, payload: bytes, received: float) -> Applied | Delivery | Rejection:
    """:func:`decode_delivery` for the live tap, in one value: the :class:`Applied` the model
    takes (received at ``received``, not historical) with no :class:`CotalMessage` or
    :class:`Delivery` built on the way (the observer's per-message path). The same checks, in
    the same order; a decode that cut a field to its bound returns the :class:`Delivery` (its
    ``cuts`` are counted, then ``applied(received, False)`` is applied), a refused one the
    :class:`Rejection`."""
    return _decode(subject, payload, False, received)


def _decode(subject: str, payload: bytes, history: bool,
            received: float | None) -> Applied | Delivery | Rejection:
    """The reject rules; ``received`` a float: the one-value form (:func:`decode_applied`)."""
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
    raw = w.parts
    cuts: Cuts | None = None
    if len(raw) == 1 and raw[0].kind == "text" and type(raw[0].text) is str:
        parts: list[Part] = [TextPart(raw[0].text)]  # most messages: one text part, nothing cut
    else:
        cuts = Cuts()
        try:
            parts = _parts(raw, cuts, len(payload) <= _FITS)
        except _PartError as e:
            return Rejection(e.reason, subject)

    frm, mid = w.from_, w.id
    mentions = None if w.mentions is UNSET else w.mentions
    reply = None if w.replyTo is UNSET else w.replyTo
    ctx = None if w.contextId is UNSET else w.contextId
    # the common case is one length check per field; a long one is cut (and noted) below
    if (len(frm.name) > _SHORT or (frm.role is not None and len(frm.role) > _SHORT)
            or len(mid) > _SHORT or len(w.space) > _SHORT
            or (reply is not None and len(reply) > _SHORT)
            or (ctx is not None and len(ctx) > _SHORT)
            or (mentions is not None and (len(mentions) > B.MENTIONS_MAX
                                          or any(len(m) > _SHORT for m in mentions)))):
        if cuts is None:
            cuts = Cuts()
        name = cuts.str("name", frm.name, B.NAME_BYTES)
        role = cuts.str("role", frm.role, B.ROLE_BYTES)
        if name is not frm.name or role is not frm.role:
            frm = EndpointRef(frm.id, name, role)
        mid = cuts.str("id", mid, B.ID_BYTES)
        reply = cuts.str("replyTo", reply, B.ID_BYTES)
        ctx = cuts.str("contextId", ctx, B.ID_BYTES)
        if mentions is not None:
            mentions = [cuts.str("mentions", m, B.ID_BYTES)
                        for m in cuts.list("mentions", mentions, B.MENTIONS_MAX)]
        space = cuts.str("space", w.space, B.ID_BYTES)
    else:
        space = w.space

    kind = ps.kind
    target = ps.channel if kind == "chat" else ps.recipient if kind == "inst" else ps.role
    if kind is None or target is None:  # unreachable: ps.deliver means a delivery kind and target
        return Rejection(MALFORMED_SUBJECT, subject, True)
    if received is not None and (cuts is None or not cuts.names):
        # the one-value form, field for field what ``Delivery.applied(received, False)`` builds
        dk = DELIVERY_KIND[kind]
        return Applied(
            dk, mid, ts, ps.sender or "", frm.name, frm.role,
            raw[0].text if cuts is None else parts_to_text(parts),  # (None: one text part)
            parts, target if dk == "channel" else None, target if dk == "dm" else None,
            target if dk == "anycast" else None, False,
            dk == "channel" and ps.event, received,
            ctx or mid, reply, ctx, mentions,
        )
    msg = CotalMessage(  # positional for speed: id, ts, space, from, parts, routing, extras
        mid, ts, space, frm, parts,
        target if kind == "chat" else None,
        target if kind == "inst" else None,
        target if kind == "svc" else None,
        mentions, reply, ctx,
    )
    return Delivery(DELIVERY_KIND[kind], ps, msg, ps.sender, target, mid or None, history,
                    tuple(cuts.names) if cuts is not None and cuts.names else ())


#: Strings no longer than this many code points fit every byte bound below (128 x 4 <= 512,
#: but a role's is 256): the hot path's one comparison per field
_SHORT = B.ROLE_BYTES >> 2


#: a payload no longer than this holds frames whose events fit ``AGUI_FRAME_BYTES`` whatever they
#: are: re-encoded JSON is at most 4.5x its text (a number: ``1e15`` is ``1000000000000000.0``;
#: a string never grows), so such a frame's events take at most ~18 KiB of the 64 KiB bound
_FITS = B.AGUI_FRAME_BYTES >> 4


def _parts(raw: list[_WirePart], cuts: Cuts, fits: bool = False) -> list[Part]:
    """``fits``: the payload is at most :data:`_FITS` bytes (see :func:`bound_frame`)."""
    out: list[Part] = []
    if len(raw) > B.PARTS_MAX:
        # every part is still checked (a bad one rejects the message), only the first kept
        for p in islice(raw, B.PARTS_MAX, None):
            _check_part(p)
        out = _parts(raw[:B.PARTS_MAX], cuts, fits)
        cuts.names.append("parts")
        out.append(BrokenPart("parts", f"{len(raw) - B.PARTS_MAX} more not kept"))
        return out
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
            _check_part(p)
            out.append(ArtifactPart(cuts.str("artifact", p.name, B.ARTIFACT_BYTES),
                                    cuts.str("artifact", p.mediaType, B.ARTIFACT_BYTES),
                                    p.digest, p.size))
        elif k == AGUI_FRAME_KIND:  # (an extension kind: the pattern below holds for it)
            out.append(bound_frame(None if p.events is UNSET else p.events, cuts,
                                   protocol=p.protocol, threadId=p.threadId,
                                   runId=p.runId, epoch=p.epoch, seq=p.seq, fits=fits))
        elif k in LEGACY_PART_KINDS or EXTENSION_KIND_RE.fullmatch(k):
            out.append(ExtensionPart(cuts.str("kind", k, B.KIND_BYTES)))
        else:
            raise _PartError(NON_CONFORMANT_PART_KIND)
    return out


def _check_part(p: _WirePart) -> None:
    """What :func:`_parts` would refuse in ``p``, without building it."""
    k = p.kind
    if k == "artifact":
        size = p.size
        if (type(p.name) is not str or type(p.mediaType) is not str
                or type(p.digest) is not str or not DIGEST_RE.fullmatch(p.digest)
                or type(size) is not int or size < 0):
            raise _PartError(MALFORMED_ENVELOPE)
    elif (k not in _CORE_KINDS and k not in LEGACY_PART_KINDS
          and not EXTENSION_KIND_RE.fullmatch(k)):
        raise _PartError(NON_CONFORMANT_PART_KIND)


_CORE_KINDS = frozenset({"text", "data"})

# What the ``ag-ui.frame`` renderer reads of an event (``meshview.wire.parts``): ids and
# names are bounded each, payload strings share the frame's byte budget.
_AGUI_IDS = (("messageId", B.ID_BYTES), ("toolCallId", B.ID_BYTES), ("runId", B.ID_BYTES),
             ("type", B.KIND_BYTES), ("code", B.KIND_BYTES), ("name", B.KIND_BYTES),
             ("toolCallName", B.KIND_BYTES))
_AGUI_PAYLOAD = ("delta", "message", "content")
_AGUI_READ = frozenset(f for f, _ in _AGUI_IDS) | set(_AGUI_PAYLOAD) | {"outcome"}
#: the JSON punctuation around one kept key/value pair (quotes, colon, comma), over-counted
_PAIR = 8


#: an envelope id no longer than this many code points fits ``ID_BYTES`` (4 bytes each at most)
_SHORT_ID = B.ID_BYTES >> 2


def _envelope_id(v: Any, field: str, cuts: Cuts) -> str | None:
    """A frame's ``protocol``/``threadId``/``runId``/``epoch``: a string, bounded; else None."""
    return cuts.str(field, v, B.ID_BYTES) if type(v) is str else None


def bound_frame(events: Any, cuts: Cuts, *, protocol: Any = None, threadId: Any = None,
                runId: Any = None, epoch: Any = None, seq: Any = None,
                fits: bool = False) -> ExtensionPart:
    """An ``ag-ui.frame`` part as kept: its envelope (ids bounded by ``ID_BYTES``, each None
    unless a string; ``seq`` None unless an integer in ``0..MAX_SEQ``, a bool is not one) and at
    most :data:`~meshview.wire.bounds.AGUI_EVENTS_MAX` events within the frame's
    :data:`~meshview.wire.bounds.AGUI_FRAME_BYTES` (JSON-encoded). An event that fits is kept
    whole (``--json`` shows it as sent); one that does not keeps the fields its renderer reads
    first, then every other key, in order, while it fits (a string cut, anything else dropped);
    the events past a bound are counted in ``dropped``. One pass over the frame (linear).

    ``fits``: ``events`` were decoded from a payload of at most :data:`_FITS` bytes, so they
    fit the byte bound (and the event bound is all that is checked): none is measured."""
    env = (protocol, threadId, runId, epoch,
           seq if type(seq) is int and 0 <= seq <= MAX_SEQ else None)
    if not (type(protocol) is str and type(threadId) is str and type(runId) is str
            and type(epoch) is str and len(protocol) <= _SHORT_ID and len(threadId) <= _SHORT_ID
            and len(runId) <= _SHORT_ID and len(epoch) <= _SHORT_ID):  # (the common case: all fit)
        env = (_envelope_id(protocol, "protocol", cuts), _envelope_id(threadId, "threadId", cuts),
               _envelope_id(runId, "runId", cuts), _envelope_id(epoch, "epoch", cuts), env[4])
    if not isinstance(events, list):
        if events is not None:
            cuts.names.append("events")
        return ExtensionPart(AGUI_FRAME_KIND, None, 0, *env)
    if fits and len(events) <= B.AGUI_EVENTS_MAX:
        return ExtensionPart(AGUI_FRAME_KIND, list(events), 0, *env)  # (all kept, as below)
    budget = B.AGUI_FRAME_BYTES
    kept: list[Any] = []
    encode = msgspec.json.encode
    for i, e in enumerate(events):
        if i >= B.AGUI_EVENTS_MAX or budget <= 0:
            cuts.names.append("events")
            return ExtensionPart(AGUI_FRAME_KIND, kept, len(events) - i, *env)
        try:
            size = len(encode(e)) + 1  # (and the comma before the next)
        except (TypeError, ValueError, OverflowError, RecursionError):
            size = budget + 1
        if size > budget:
            cuts.names.append("events")
            e = _reduced_event(e, cuts, budget) if type(e) is dict else None
            size = len(encode(e)) + 1
            if size > budget:  # not even its ids fit: the frame ends here
                return ExtensionPart(AGUI_FRAME_KIND, kept, len(events) - i, *env)
        kept.append(e)  # a non-object reduced to null: the renderer names it unrecognised
        budget -= size
    return ExtensionPart(AGUI_FRAME_KIND, kept, 0, *env)


def _utf8_len(v: str) -> int:
    return len(v) if v.isascii() else len(v.encode("utf-8", "surrogatepass"))


def _reduced_event(e: dict, cuts: Cuts, budget: int) -> dict[str, Any]:
    """An event too big for what is left of its frame's ``budget``: the fields the
    ``ag-ui.frame`` renderer reads first (ids and names bounded each, payload strings within
    the budget together), then every other key (``cotal``, ``timestamp``, ``role``, ...) within
    half of what is left: each kept whole while it fits, then the strings too long for that cut
    into what is left, any other value dropped (noted in ``cuts``). Keys keep their wire order.
    Each value is measured once (linear)."""
    total = budget
    ev: dict[str, Any] = {}
    for f, limit in _AGUI_IDS:
        v = e.get(f)
        if v is not None:
            ev[f] = cuts.str("events", v, limit) if type(v) is str else None
    o = e.get("outcome")
    if type(o) is dict and type(o.get("type")) is str:
        ev["outcome"] = {"type": cuts.str("events", o["type"], B.KIND_BYTES)}
    encode = msgspec.json.encode
    budget -= len(encode(ev)) + 32  # (the payload keys and quotes)
    for f in _AGUI_PAYLOAD:
        v = e.get(f)
        if type(v) is str:
            v = cuts.str("events", v, max(budget, 0))
            budget -= _utf8_len(v)
            ev[f] = v
    core = dict(ev)  # what the renderer needs, should the rest not fit after all
    # the rest share half of what is left: one huge key never starves the events after it
    spare = budget - budget // 2
    budget //= 2
    long: list[str] = []  # strings too long to keep whole: cut into what the rest leave
    for k, v in e.items():
        if k in _AGUI_READ and k != "outcome":
            continue
        if len(k) > budget or (type(v) is str and len(v) > budget):  # (no need to measure)
            size = budget + 1
        else:
            try:
                size = len(encode(k)) + _PAIR + len(encode(v))
            except (TypeError, ValueError, OverflowError, RecursionError):
                size = budget + 1
        if size <= budget:
            ev[k] = v  # (an outcome that fits replaces its reduced type)
            budget -= size
        elif type(v) is str:
            long.append(k)
        else:  # (an outcome too big keeps its reduced type)
            cuts.names.append("events")
    for k in long:
        room = budget - (len(encode(k)) if len(k) <= budget else budget) - _PAIR
        if room < 16:
            cuts.names.append("events")
            continue
        cut = cuts.str("events", e[k], room)
        ev[k] = cut
        budget -= len(encode(k)) + _PAIR + _utf8_len(cut)
    ev = {k: ev[k] for k in e if k in ev}  # the wire's key order
    if len(ev) > len(core) and len(encode(ev)) >= total - spare:  # escapes outgrew the estimate
        cuts.names.append("events")
        return core
    return ev


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
