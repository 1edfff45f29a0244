"""Wire shapes as msgspec Structs (SPEC §5, §6, §7; spec/cotal.schema.json).

Unknown fields are ignored everywhere (§11 additive changes).  Optional fields default to
None and are omitted on encode, so a re-encoded record carries no ``null`` the schema forbids.
Part kinds are separate Structs for consumers; decoding goes through ``decode.py``, which
maps the wire's open part set (reverse-DNS extensions) onto them.
"""

from __future__ import annotations

import math
import re
from typing import Any, Union

import msgspec

PRESENCE_CANARY_KEY = "_cotal_ttl_reconcile"
CHANNEL_DEFAULTS_KEY = "=defaults"
MEMBERSHIP_FEED_KEY = "=feed"

PRESENCE_STATUSES = frozenset({"idle", "waiting", "working", "offline"})
CONDITION_CODES = frozenset({
    "rate_limit", "overloaded", "auth", "billing", "budget", "context", "model", "request",
    "server", "retrying", "approval", "input", "failed",
})
ATTENTION_MODES = frozenset({"open", "dnd", "focus"})
CHANNEL_MODES = frozenset({"quiet", "muted"})
DELIVERY_CLASSES = frozenset({"live", "durable"})

DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
EXTENSION_KIND_RE = re.compile(r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+")
REPLAY_WINDOW_RE = re.compile(r"(\d+)(s|m|h|d)")
_WINDOW_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}

Number = Union[int, float]


class _Wire(msgspec.Struct, omit_defaults=True):
    """Base: ignore unknown fields, omit unset optionals when encoding."""


# ---- messages ----------------------------------------------------------------------------

class EndpointRef(_Wire, gc=False):
    id: str
    name: str
    role: str | None = None


class TextPart(_Wire, tag_field="kind", tag="text", gc=False):
    text: str


class DataPart(msgspec.Struct, tag_field="kind", tag="data", gc=False):
    """``data`` is any JSON value, ``null`` included. A (legacy) part that carries no ``data``
    at all is kept with ``data`` = ``msgspec.UNSET``: shown as ``[empty data part]``, never
    confused with ``null``, and refused by :func:`encode_message`.

    Not ``omit_defaults``: ``data`` is required on the wire even when it is null.
    """

    data: Any = None


class ArtifactPart(_Wire, tag_field="kind", tag="artifact", gc=False):
    """Reference to out-of-band bytes; name, mediaType and size are unverified publisher claims."""

    name: str
    mediaType: str
    digest: str
    size: int


class ExtensionPart(_Wire, gc=False):
    """A namespaced (reverse-DNS) part kind, kept in place so indexes line up. Only what a
    registered renderer or the frame ledger reads is kept (an ``ag-ui.frame``'s envelope and
    ``events``); any other kind is shown as a marker naming it (``meshview.wire.parts``)."""

    kind: str
    events: Any = None
    #: events the reader did not keep (past ``meshview.wire.bounds``' per-frame bounds)
    dropped: int = 0
    # An ``ag-ui.frame``'s envelope (events.md §2.1), wire names; None when absent or not of
    # its type. A frame recorded before these were kept reads with all five None: ``seq``
    # unknown, so no gap is ever claimed for it.
    protocol: str | None = None
    threadId: str | None = None
    runId: str | None = None
    epoch: str | None = None
    seq: int | None = None


class BrokenPart(_Wire, gc=False):
    """A part of a core kind that breaks its own shape (a text part whose ``text`` is not a
    string): kept and shown as a marker rather than dropping the whole message. Never
    published (:func:`encode_message` refuses it)."""

    kind: str
    problem: str


Part = Union[TextPart, DataPart, ArtifactPart, ExtensionPart, BrokenPart]
"""Parts and endpoint refs are ``gc=False``: feed rows keep them for the ring's lifetime, and a
tuple of untracked parts is itself untracked after one collection, so a row costs the
collector nothing. They hold only decoded JSON values, which can't form a cycle through them."""


class CotalMessage(_Wire):
    """One delivery envelope.  Exactly one of ``channel`` / ``to`` / ``toService`` is set."""

    id: str
    ts: Number
    space: str
    from_: EndpointRef = msgspec.field(name="from")
    parts: list[Part] = msgspec.field(default_factory=list)
    channel: str | None = None
    to: str | None = None
    toService: str | None = None
    mentions: list[str] | None = None
    replyTo: str | None = None
    contextId: str | None = None

    @property
    def routing(self) -> tuple[str, str] | None:
        """``(field, value)`` of the single routing field, or None when not exactly one is set."""
        set_ = [(k, v) for k, v in (("channel", self.channel), ("to", self.to),
                                    ("toService", self.toService)) if v is not None]
        return set_[0] if len(set_) == 1 else None


def _check_json(value: Any, depth: int = 0) -> None:
    """Publishers refuse NaN/Infinity and non-JSON values at every depth (SPEC §5)."""
    if depth > 512:
        raise ValueError("data nested too deeply")
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("data holds a non-finite number")
        return
    if isinstance(value, (list, tuple)):
        for v in value:
            _check_json(v, depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError("data object keys must be strings")
            _check_json(v, depth + 1)
        return
    raise ValueError(f"data holds a non-JSON value of type {type(value).__name__}")


def encode_message(msg: CotalMessage) -> bytes:
    """Encode for publishing; refuses envelopes a conformant reader would drop."""
    if msg.routing is None:
        raise ValueError("exactly one of channel, to, toService must be set")
    if not isinstance(msg.ts, (int, float)) or isinstance(msg.ts, bool) or not math.isfinite(msg.ts):
        raise ValueError("ts must be a finite number")
    for p in msg.parts:
        if isinstance(p, BrokenPart):
            raise ValueError(f"{p.kind} part: {p.problem}")
        if isinstance(p, DataPart):
            if p.data is msgspec.UNSET:
                raise ValueError("a data part must carry data (null is allowed)")
            _check_json(p.data)
        elif isinstance(p, ArtifactPart):
            if not DIGEST_RE.fullmatch(p.digest) or p.size < 0:
                raise ValueError("artifact digest must be sha256:<64 lowercase hex>, size >= 0")
        elif isinstance(p, ExtensionPart) and not EXTENSION_KIND_RE.fullmatch(p.kind):
            raise ValueError(f"extension part kind must be reverse-DNS: {p.kind!r}")
    return msgspec.json.encode(msg)


# ---- identity and presence -----------------------------------------------------------------
# Untracked by the garbage collector (``gc=False``): decoded JSON holds no cycles, and the
# observer keeps the last record of every live key (10k at scale, replaced every heartbeat),
# which a full collection would otherwise walk each time.

class Skill(_Wire, gc=False):
    id: str
    name: str
    description: str | None = None


class AgentCard(_Wire, gc=False):
    id: str
    name: str
    kind: str
    owner: str | None = None
    actor: str | None = None
    role: str | None = None
    description: str | None = None
    tags: list[str] | None = None
    skills: list[Skill] | None = None
    meta: dict[str, Any] | None = None
    protocolVersion: str | None = None


class PresenceCondition(_Wire, gc=False):
    code: str
    source: str | None = None
    message: str | None = None
    since: Number | None = None


class Presence(_Wire, gc=False):
    """A presence KV record (key = ``card.id``).  ``ts`` is the heartbeat, ``activeAt`` work."""

    card: AgentCard
    status: str
    ts: Number
    lifecycleUid: str | None = None
    activity: str | None = None
    activitySince: Number | None = None
    statusSince: Number | None = None
    activeAt: Number | None = None
    condition: PresenceCondition | None = None
    attention: str | None = None
    channelModes: dict[str, str] | None = None
    environment: str | None = None


def encode_presence(p: Presence) -> bytes:
    if p.status not in PRESENCE_STATUSES:
        raise ValueError(f"status must be one of {sorted(PRESENCE_STATUSES)}")
    if not math.isfinite(p.ts):
        raise ValueError("ts must be finite")
    return msgspec.json.encode(p)


# ---- channels and membership ---------------------------------------------------------------

class ChannelDefaults(_Wire):
    """The registry's ``=defaults`` record."""

    replay: bool | None = None
    replayWindow: str | None = None
    deliveryClass: str | None = None


class ChannelConfig(_Wire):
    replay: bool | None = None
    replayWindow: str | None = None
    deliveryClass: str | None = None
    description: str | None = None
    instructions: str | None = None


class ChannelMembership(_Wire):
    """Display-only membership feed row; never an authorization input (SPEC §8)."""

    live: list[str] = msgspec.field(default_factory=list)
    durable: list[str] = msgspec.field(default_factory=list)
    observedAt: Number | None = None


def parse_replay_window(window: str | None) -> int | None:
    """``"24h"`` → milliseconds; None for absent or malformed windows (full history)."""
    if not window:
        return None
    m = REPLAY_WINDOW_RE.fullmatch(window)
    return int(m.group(1)) * _WINDOW_UNIT_MS[m.group(2)] if m else None


def effective_replay(cfg: ChannelConfig | None, defaults: ChannelDefaults | None) -> bool:
    """channel.replay ?? defaults.replay ?? true."""
    for src in (cfg, defaults):
        if src is not None and src.replay is not None:
            return src.replay
    return True


def effective_class(cfg: ChannelConfig | None, defaults: ChannelDefaults | None) -> str:
    """channel.deliveryClass ?? defaults.deliveryClass ?? "durable" (unknown values skipped)."""
    for src in (cfg, defaults):
        if src is not None and src.deliveryClass in DELIVERY_CLASSES:
            return src.deliveryClass
    return "durable"


def effective_window(cfg: ChannelConfig | None, defaults: ChannelDefaults | None) -> str | None:
    """The governing ``replayWindow``: channel ?? defaults; None when that one is malformed
    (a bad channel window does not fall back to the defaults: it means the full history)."""
    for src in (cfg, defaults):
        if src is not None and src.replayWindow is not None:
            return src.replayWindow if parse_replay_window(src.replayWindow) is not None else None
    return None


def effective_window_ms(cfg: ChannelConfig | None, defaults: ChannelDefaults | None) -> int | None:
    """Backfill horizon in ms: channel ?? defaults ?? None (= the full retained history)."""
    return parse_replay_window(effective_window(cfg, defaults))


def replay_floor(cfg: ChannelConfig | None, defaults: ChannelDefaults | None,
                 now_ms: float) -> float | None:
    """Oldest ``ts`` a backfill may show at ``now_ms``; None means no floor (full history)."""
    window = effective_window_ms(cfg, defaults)
    return None if window is None else now_ms - window


def _decode_or_none(value: bytes | None, typ: type) -> Any:
    if not value:
        return None
    try:
        return msgspec.json.decode(value, type=typ)
    except (msgspec.DecodeError, RecursionError):
        return None


def decode_channel_config(value: bytes | None) -> ChannelConfig | None:
    """A registry value, or None when it is not a ChannelConfig object."""
    return _decode_or_none(value, ChannelConfig)


def decode_channel_defaults(value: bytes | None) -> ChannelDefaults | None:
    return _decode_or_none(value, ChannelDefaults)


def decode_membership(value: bytes | None) -> ChannelMembership | None:
    return _decode_or_none(value, ChannelMembership)


def decode_agent_card(value: bytes | None) -> AgentCard | None:
    return _decode_or_none(value, AgentCard)
