"""Presence KV decisions (SPEC §6, §8, §13.1): what one watch entry means for the roster.

Pure: the caller supplies its clock and the previous record for the key, so the same entry
always yields the same decision.  Staleness by ``ts`` is mandatory because bucket TTL expiry
is silent (no DEL reaches watchers).
"""

from __future__ import annotations

import functools
import math
import re

import msgspec

from meshview.wire import bounds as B
from meshview.wire.bounds import Cuts
from meshview.wire.messages import (
    PRESENCE_CANARY_KEY,
    PRESENCE_STATUSES,
    AgentCard,
    Presence,
    PresenceCondition,
)
from meshview.wire.subjects import NON_PRINCIPAL_OWNER, is_principal_id  # one code, one rule

PRESENCE_TTL_MS = 6000
HEARTBEAT_MS = 2000
#: Maintenance keys (the TTL canary and any sibling) live under this prefix, never peers.
RESERVED_KEY_PREFIX = "_cotal_"

# Stable reason codes (presence.json).
OK = "ok"
STALE = "stale"
KV_DELETE = "kv-delete"
KV_PURGE = "kv-purge"
RESERVED_KEY = "reserved-key"
KEY_MISMATCH = "key-mismatch"
INVALID_STATUS = "invalid-status"
MALFORMED_JSON = "malformed-json"
MALFORMED_RECORD = "malformed-record"
UNKNOWN_OPERATION = "unknown-operation"


class PresenceDecision(msgspec.Struct, frozen=True, gc=False):
    """``apply`` the record (shown as ``derived_status``), ``mark-offline`` the key, ``drop``
    a bad record (diagnostic), or ``ignore`` a maintenance key silently."""

    action: str  # "apply" | "drop" | "ignore" | "mark-offline"
    presence: Presence | None
    derived_status: str | None
    reason: str | None
    new_incarnation: bool = False
    condition_code: str | None = None
    #: the record's fields cut to their byte bounds (``meshview.wire.bounds``), for counting
    cuts: tuple[str, ...] = ()


_DECODER = msgspec.json.Decoder(Presence)
# a key's verdict never changes and a watch sees each key every heartbeat: judged once (bounded)
_is_principal_key = functools.lru_cache(maxsize=1 << 16)(is_principal_id)
_GENERIC = msgspec.json.Decoder()


def offline_view(p: Presence) -> Presence:
    """The record as an offline roster entry: advisory attention/modes and statusSince dropped."""
    return msgspec.structs.replace(p, status="offline", attention=None, channelModes=None,
                                   statusSince=None)


def is_stale(ts: float, now_ms: float, ttl_ms: float = PRESENCE_TTL_MS,
             received: float | None = None) -> bool:
    """A heartbeat older than the liveness window (``now − ts > ttl``: exactly ttl is live).

    ``received`` (when the record arrived) clamps a ``ts`` from the future to its receipt
    time: a peer's clock, or a record written a year ahead, cannot keep it live past a ttl
    of silence."""
    if received is not None and ts > received:
        ts = received
    return now_ms - ts > ttl_ms


def _fits(v: str | None, limit: int) -> bool:
    """``v`` is short enough in code points to fit ``limit`` bytes whatever it holds."""
    return v is None or len(v) <= limit >> 2


def _card_fits(c: AgentCard) -> bool:
    """Every string and list the roster keeps of ``c`` fits its bound (the common case: one
    comparison each)."""
    return (_fits(c.name, B.NAME_BYTES) and _fits(c.kind, B.TOKEN_BYTES)
            and _fits(c.role, B.ROLE_BYTES) and _fits(c.description, B.DESCRIPTION_BYTES)
            and (c.tags is None or (len(c.tags) <= B.TAGS_MAX
                                    and all(_fits(t, B.TAG_BYTES) for t in c.tags)))
            and (c.meta is None or (len(c.meta) <= B.META_MAX and all(
                _fits(k, B.TAG_BYTES) and (type(v) is not str or _fits(v, B.META_BYTES))
                for k, v in c.meta.items()))))


def bound_presence(p: Presence) -> tuple[Presence, tuple[str, ...]]:
    """``p`` with every string and list the roster keeps within its byte bound
    (``meshview.wire.bounds``), and the fields cut; ``p`` itself when nothing was."""
    c = p.condition
    if (_card_fits(p.card) and _fits(p.lifecycleUid, B.ID_BYTES)
            and _fits(p.activity, B.ACTIVITY_BYTES) and _fits(p.attention, B.TOKEN_BYTES)
            and _fits(p.environment, B.ENVIRONMENT_BYTES)
            and (c is None or (_fits(c.code, B.TOKEN_BYTES) and _fits(c.source, B.TOKEN_BYTES)
                               and _fits(c.message, B.CONDITION_BYTES)))
            and (p.channelModes is None or (len(p.channelModes) <= B.CHANNEL_MODES_MAX and all(
                _fits(k, B.CHANNEL_BYTES) and _fits(v, B.TOKEN_BYTES)
                for k, v in p.channelModes.items())))):
        return p, ()
    k = Cuts()
    card = p.card
    tags = k.list("tags", card.tags, B.TAGS_MAX)
    meta = card.meta
    if meta is not None and len(meta) > B.META_MAX:
        k.names.append("meta")
        meta = dict(list(meta.items())[:B.META_MAX])
    card = msgspec.structs.replace(
        card, name=k.str("name", card.name, B.NAME_BYTES),
        kind=k.str("kind", card.kind, B.TOKEN_BYTES),
        role=k.str("role", card.role, B.ROLE_BYTES),
        description=k.str("description", card.description, B.DESCRIPTION_BYTES),
        tags=None if tags is None else [k.str("tags", t, B.TAG_BYTES) for t in tags],
        meta=None if meta is None else {k.str("meta", mk, B.TAG_BYTES):
                                        k.str("meta", mv, B.META_BYTES)
                                        for mk, mv in meta.items()})
    if c is not None:
        c = PresenceCondition(k.str("condition", c.code, B.TOKEN_BYTES),
                              k.str("condition", c.source, B.TOKEN_BYTES),
                              k.str("condition", c.message, B.CONDITION_BYTES), c.since)
    modes = p.channelModes
    if modes is not None:
        if len(modes) > B.CHANNEL_MODES_MAX:
            k.names.append("channelModes")
            modes = dict(list(modes.items())[:B.CHANNEL_MODES_MAX])
        modes = {k.str("channelModes", mk, B.CHANNEL_BYTES):
                 k.str("channelModes", mv, B.TOKEN_BYTES)
                 for mk, mv in modes.items()}
    out = msgspec.structs.replace(
        p, card=card, condition=c, channelModes=modes,
        lifecycleUid=k.str("lifecycleUid", p.lifecycleUid, B.ID_BYTES),
        activity=k.str("activity", p.activity, B.ACTIVITY_BYTES),
        attention=k.str("attention", p.attention, B.TOKEN_BYTES),
        environment=k.str("environment", p.environment, B.ENVIRONMENT_BYTES))
    return out, tuple(k.names)


def _drop(reason: str) -> PresenceDecision:
    return PresenceDecision("drop", None, None, reason)


def decode_presence(key: str, operation: str, value: bytes | None, now_ms: int,
                    previous: Presence | None = None, *, ttl_ms: int = PRESENCE_TTL_MS
                    ) -> PresenceDecision:
    """Decide what a presence watch entry does.  Never raises on hostile values.

    A stale record (``now − ts > ttl``) is still ``apply`` with derived status offline and
    reason ``stale``: whether to keep a known peer's last state is the roster's call.
    """
    if not isinstance(key, str) or key.startswith(RESERVED_KEY_PREFIX) or key == PRESENCE_CANARY_KEY:
        return PresenceDecision("ignore", None, None, RESERVED_KEY)
    op = (operation or "").upper()
    if op in ("DEL", "PURGE"):
        return PresenceDecision("mark-offline", offline_view(previous) if previous else None,
                                "offline", KV_DELETE if op == "DEL" else KV_PURGE)
    if op != "PUT":
        return _drop(UNKNOWN_OPERATION)
    if not value:
        return _drop(MALFORMED_JSON)
    try:
        p = _DECODER.decode(value)
    except msgspec.ValidationError:
        try:
            _GENERIC.decode(value)
        except (msgspec.DecodeError, RecursionError, TypeError):
            return _drop(MALFORMED_JSON)
        return _drop(MALFORMED_RECORD)
    except (msgspec.DecodeError, RecursionError, TypeError):
        return _drop(MALFORMED_JSON)

    if p.card.id != key:
        return _drop(KEY_MISMATCH)
    if not _is_principal_key(key):
        return _drop(NON_PRINCIPAL_OWNER)
    if p.status not in PRESENCE_STATUSES:
        return _drop(INVALID_STATUS)
    if type(p.ts) is float and not math.isfinite(p.ts):
        return _drop(MALFORMED_RECORD)

    p, cuts = bound_presence(p)
    new_inc = (previous is not None and previous.lifecycleUid is not None
               and p.lifecycleUid is not None and previous.lifecycleUid != p.lifecycleUid)
    code = p.condition.code if p.condition is not None else None
    if p.status == "offline":
        status, reason = "offline", OK
    elif is_stale(p.ts, now_ms, ttl_ms):
        status, reason = "offline", STALE
    else:
        status, reason = p.status, OK
    return PresenceDecision("apply", p, status, reason, new_inc, code, cuts)


def is_heartbeat_only(prev: Presence, new: Presence) -> bool:
    """True when ``new`` only refreshes ``ts`` (and clocks): nothing an operator would notice.

    Besides the reference's status/activity/attention/channelModes/lifecycleUid, a changed
    condition or card also counts, since NEEDS-YOU and the roster show them.
    """
    return (prev.status == new.status and prev.activity == new.activity
            and prev.attention == new.attention and prev.channelModes == new.channelModes
            and prev.lifecycleUid == new.lifecycleUid and prev.condition == new.condition
            and prev.card == new.card)


#: The clocks a heartbeat-only rewrite may move (``is_heartbeat_only``), in the order
#: :func:`match_clocks` returns them.
CLOCK_FIELDS = ("ts", "activitySince", "statusSince", "activeAt")
_CLOCK_NEEDLES = tuple(b'"%s":' % f.encode() for f in CLOCK_FIELDS)
_INTEGER = re.compile(rb"[ \t\n\r]*([1-9][0-9]{0,16}|0)[,} \t\n\r]")
_MAX_DIGITS = 17

#: (segments, fields: the clock each cut is, clocks: the record's, rest: when ts is the first
#: cut, the bytes after it with the other clocks as they are: a plain heartbeat's tail)
ClockTemplate = tuple


def clock_template(raw: bytes, p: Presence) -> ClockTemplate | None:
    """``raw`` (the bytes ``p`` was decoded from) cut around its integer clocks, for
    :func:`match_clocks`; None when nothing can be cut safely.

    A clock is cut only where it can be nothing else: its key appears once, the integer
    after it is the decoded value, and no ``\\u`` escape in the record could spell a key
    another way. A clock that is a float, repeated or otherwise unusual is not cut: it stays
    in the fixed bytes, so a change to it is decoded in full."""
    if b"\\u" in raw:
        return None
    cuts = []
    for k, needle in enumerate(_CLOCK_NEEDLES):
        value = getattr(p, CLOCK_FIELDS[k])
        if type(value) is not int or raw.count(needle) != 1:
            continue
        m = _INTEGER.match(raw, raw.find(needle) + len(needle))
        if m is None or int(m.group(1)) != value:
            continue
        cuts.append((m.start(1), m.end(1), k))
    if not cuts:
        return None
    clocks = tuple(getattr(p, f) for f in CLOCK_FIELDS)
    cuts.sort()
    segments, fields, pos = [], [], 0
    for start, end, k in cuts:
        segments.append(raw[pos:start])
        fields.append(k)
        pos = end
    segments.append(raw[pos:])
    rest = raw[cuts[0][1]:] if fields[0] == 0 else None
    return tuple(segments), tuple(fields), clocks, rest


def match_clocks(t: ClockTemplate, raw: bytes) -> list[int | float | None] | None:
    """The clocks of ``raw`` (in :data:`CLOCK_FIELDS` order: those not cut are the
    template record's) when ``raw`` is the template's bytes with other integers where it was
    cut, else None (the caller decodes it in full).

    Every fixed segment after a cut starts with a byte no integer holds, so the first
    occurrence of it after a run of digits is where that run ends: one decomposition."""
    segments, fields, base, rest = t
    if not raw.startswith(segments[0]):
        return None
    if rest is not None and raw.endswith(rest):  # most heartbeats: only ts moved
        ts = _integer(raw[len(segments[0]):len(raw) - len(rest)])
        if ts is not None:
            return [ts, base[1], base[2], base[3]]
    clocks = list(base)
    pos = len(segments[0])
    last = len(fields) - 1
    for k, field in enumerate(fields):
        seg = segments[k + 1]
        if k == last:
            end = len(raw) - len(seg)
            if not raw.endswith(seg):
                return None
        else:
            end = raw.find(seg, pos)
        value = _integer(raw[pos:end]) if end >= pos else None
        if value is None:
            return None
        clocks[field] = value
        pos = end + len(seg)
    return clocks


def _integer(digits: bytes) -> int | None:
    """``digits`` as a JSON integer a clock may be (no sign, no leading zero, at most
    ``_MAX_DIGITS``), else None."""
    if (not digits.isdigit() or len(digits) > _MAX_DIGITS
            or (digits[0] == 48 and len(digits) > 1)):  # (48: a leading "0")
        return None
    return int(digits)
