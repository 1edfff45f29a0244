"""Cotal subject grammar (SPEC §3, §12, §13.2): parse received subjects, build publish targets.

Parsing is split from trust: ``parse_subject`` says how a subject splits by prefix and arity
and, separately, whether it may surface as a delivery (principal owner, concrete, a delivery
kind).  Builders fail loud on identity tokens and sanitize only route tokens and channels,
because a silently rewritten owner or actor would alias another principal's lane.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from meshview.wire.names import space_token

ROOT = "cotal"
DELIVERY_KINDS = frozenset({"chat", "inst", "svc"})
#: Reserved NATS/JetStream prefixes that are never application subjects (SPEC §3).
RESERVED_PREFIXES = ("$JS.", "$KV.", "$SYS.", "$O.", "_INBOX.")
#: Endpoint rails and control-surface planes (SPEC §13.2): never deliveries.
ENDPOINT_RAILS = frozenset({"ep", "epc", "epe", "epf", "epj", "epr", "ept", "epw", "eps"})
#: Other known kind tokens that are not deliveries (workflow journal, backstops, probes, trace).
RESERVED_RAILS = frozenset({"wfj", "dinbox", "dlv", "live", "trace"})
RETIRED_RAILS = frozenset({"ctl"})
MAX_CHANNEL_LENGTH = 4096
#: No SPEC bound on delivery subjects; this only keeps hostile input from costing much.
MAX_SUBJECT_LENGTH = 8192

_IDENTITY = re.compile(r"[A-Za-z0-9_]+")
_DERIVED_OWNER = re.compile(r"u_[a-z2-7]{26}")
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_WILDCARDS = frozenset({"*", ">"})

# Stable reason codes (subjects.json).
OK = "ok"
MALFORMED = "malformed-subject"
NOT_CONCRETE = "not-concrete"
NON_PRINCIPAL_OWNER = "non-principal-owner"
ENDPOINT_RAIL = "endpoint-rail-not-delivery"
RESERVED = "reserved-not-delivery"
RETIRED = "retired-control-rail"


@dataclass(frozen=True, slots=True)
class ParsedSubject:
    """How a subject splits, and whether it may surface as a delivery.

    ``kind`` is set only when the subject splits as a delivery kind (chat/inst/svc); other
    recognised kind tokens (``ep``, ``epe``, ``ctl``, ``live``, ``trace``…) leave ``kind``
    None and name themselves in ``rail``.  ``concrete`` is False when any token is a wildcard.
    """

    raw: str
    space: str | None
    kind: str | None
    owner: str | None
    actor: str | None
    sender: str | None
    channel: str | None
    recipient: str | None
    role: str | None
    splits: bool
    deliver: bool
    reason: str | None
    rail: str | None = None
    concrete: bool = True
    #: a chat subject on an agent event channel (:func:`is_event_channel` of ``channel``),
    #: settled once per subject here rather than once per message
    event: bool = False

    @property
    def target(self) -> str | None:
        """The kind's routing target: channel, recipient principal or anycast role."""
        return self.channel if self.kind == "chat" else self.recipient if self.kind == "inst" else self.role

    @property
    def publishable(self) -> bool:
        return self.splits and self.concrete


def _reject(raw: str, reason: str, space: str | None = None, rail: str | None = None,
            concrete: bool = True) -> ParsedSubject:
    return ParsedSubject(raw, space, None, None, None, None, None, None, None,
                         False, False, reason, rail, concrete)


@lru_cache(maxsize=4096)
def parse_subject(subject: str) -> ParsedSubject:
    """Split a received subject (cached: a space reuses few sender×channel subjects)."""
    if not isinstance(subject, str) or not subject or len(subject) > MAX_SUBJECT_LENGTH:
        return _reject(str(subject)[:64] if subject else "", MALFORMED)
    if subject.startswith(RESERVED_PREFIXES):
        return _reject(subject, MALFORMED)
    toks = subject.split(".")
    if any(not t for t in toks):
        return _reject(subject, MALFORMED)
    concrete = not any(t in _WILDCARDS for t in toks)
    if ">" in toks[:-1]:
        return _reject(subject, MALFORMED, concrete=False)
    if toks[0] != ROOT or len(toks) < 3:
        return _reject(subject, MALFORMED if concrete else NOT_CONCRETE, concrete=concrete)
    space, kind = toks[1], toks[2]
    if kind in ENDPOINT_RAILS:
        return _reject(subject, ENDPOINT_RAIL, space, kind, concrete)
    if kind in RETIRED_RAILS:
        return _reject(subject, RETIRED, space, kind, concrete)
    if kind in RESERVED_RAILS:
        return _reject(subject, RESERVED, space, kind, concrete)

    channel = recipient = role = None
    n = len(toks)
    if kind == "chat" and n >= 6:
        owner, actor = toks[3], toks[4]
        channel = ".".join(toks[5:])
        if len(channel) > MAX_CHANNEL_LENGTH:
            return _reject(subject, MALFORMED, space, kind, concrete)
    elif kind == "inst" and n == 7:
        recipient = f"{toks[3]}.{toks[4]}"
        owner, actor = toks[5], toks[6]
    elif kind == "svc" and n == 6:
        role, owner, actor = toks[3], toks[4], toks[5]
    else:
        rail = kind if kind in DELIVERY_KINDS else None
        return _reject(subject, MALFORMED if concrete else NOT_CONCRETE, space, rail, concrete)

    if not concrete:
        reason = NOT_CONCRETE
    elif not is_principal_owner(owner):
        reason = NON_PRINCIPAL_OWNER
    elif not _valid_route(kind, toks):
        reason = MALFORMED
    else:
        reason = OK
    return ParsedSubject(subject, space, kind, owner, actor, f"{owner}.{actor}", channel,
                         recipient, role, True, reason == OK, reason, kind, concrete,
                         channel is not None and is_event_channel(channel))


def _valid_route(kind: str, toks: list[str]) -> bool:
    """Identity tokens match ``[A-Za-z0-9_]+``; role and channel segments ``[A-Za-z0-9_-]+``.

    Keeps control bytes and aliasing out of anything surfaced as a sender or target.
    """
    routes: Sequence[str]
    if kind == "chat":
        ids, routes = toks[3:5], toks[5:]
    elif kind == "inst":
        ids, routes = toks[3:7], ()
    else:
        ids, routes = toks[4:6], toks[3:4]
    return all(map(is_identity_token, ids)) and all(_SEGMENT.fullmatch(t) for t in routes)


# ---- identity ----------------------------------------------------------------------------

def is_identity_token(tok: str) -> bool:
    """An owner or actor token: one NATS-safe segment without ``-`` (the dash-form separator)."""
    return isinstance(tok, str) and _IDENTITY.fullmatch(tok) is not None


def is_principal_owner(owner: str) -> bool:
    """Owners a reader trusts off a subject: open-mode ``local`` or a derived ``u_`` token.

    The newer ``p_`` platform family is refused here, as the reference's message guards do.
    """
    return owner == "local" or (isinstance(owner, str) and _DERIVED_OWNER.fullmatch(owner) is not None)


def split_principal(pid: str) -> tuple[str, str] | None:
    """``owner.actor`` → ``(owner, actor)`` when both halves are identity tokens."""
    if not isinstance(pid, str):
        return None
    owner, dot, actor = pid.partition(".")
    if not dot or not is_identity_token(owner) or not is_identity_token(actor):
        return None
    return owner, actor


def is_principal_id(pid: str) -> bool:
    """A dot-form principal whose owner is a principal owner and whose actor is a valid token."""
    pr = split_principal(pid)
    return pr is not None and is_principal_owner(pr[0])


def is_event_channel(channel: str) -> bool:
    """``events.<owner>.<actor>``: a per-principal event channel, recognised by its shape alone,
    as upstream's ``isEventChannel``: exactly two ``[A-Za-z0-9_]+`` tokens after ``events.``, any
    owner (``events.team.standup`` is one, a known collision upstream accepts). Who *sent* a
    frame is still checked where it is surfaced (:func:`is_principal_id`)."""
    if not isinstance(channel, str) or not channel.startswith("events."):
        return False  # the common case (per message): no split
    segs = channel.split(".")
    return (len(segs) == 3 and segs[0] == "events" and is_identity_token(segs[1])
            and is_identity_token(segs[2]))


def event_channel(principal: str) -> str:
    """The event channel of ``principal`` (``owner.actor``): ``events.<owner>.<actor>``, where
    only that principal publishes its activity frames. ValueError when it is no principal id."""
    pr = split_principal(principal)
    if pr is None:
        raise ValueError(f"not a principal id (owner.actor of [A-Za-z0-9_] tokens): {principal!r}")
    return f"events.{pr[0]}.{pr[1]}"


# ---- sanitization and building -----------------------------------------------------------

def sanitize_token(raw: str) -> str:
    """SPEC §3 ``token()``: lossy, for space and role tokens only (never decode it back)."""
    return space_token(raw)


def sanitize_channel(raw: str) -> str:
    """Sanitize each dotted segment, keep whole-segment ``*``/``>``; ``>`` only last.

    Empty segments are dropped; an empty result becomes ``_``.  Raises ValueError when ``>``
    is not the final segment, since no rewrite of that is a faithful pattern.
    """
    segs = [s.strip() for s in raw.split(".")]
    segs = [s for s in segs if s]
    if not segs:
        return "_"
    out = []
    for i, s in enumerate(segs):
        if s == ">":
            if i != len(segs) - 1:
                raise ValueError(f"channel {raw!r}: '>' is only valid as the last segment")
            out.append(s)
        elif s == "*":
            out.append(s)
        else:
            out.append(space_token(s))
    return ".".join(out)


def is_channel_name(channel: str) -> bool:
    """A channel as it travels: dotted ``[A-Za-z0-9_-]+`` segments, concrete, nothing for
    :func:`sanitize_channel` to rewrite."""
    return isinstance(channel, str) and all(_SEGMENT.fullmatch(s) for s in channel.split("."))


def is_concrete_channel(channel: str) -> bool:
    return not any(s.strip() in _WILDCARDS for s in channel.split("."))


def _principal(sender_id: str) -> str:
    if split_principal(sender_id) is None:
        raise ValueError(f"not a principal id (owner.actor of [A-Za-z0-9_] tokens): {sender_id!r}")
    return sender_id


def _space(space: str) -> str:
    return sanitize_token(space)


def chat_subject(space: str, sender_id: str, channel: str) -> str:
    """Concrete publish target for a channel message from ``sender_id``."""
    ch = sanitize_channel(channel)
    if not is_concrete_channel(ch):
        raise ValueError(f"publish channel must be concrete: {channel!r}")
    if len(ch) > MAX_CHANNEL_LENGTH:
        raise ValueError("channel longer than 4096 characters")
    return f"{ROOT}.{_space(space)}.chat.{_principal(sender_id)}.{ch}"


def inst_subject(space: str, recipient_id: str, sender_id: str) -> str:
    """Concrete publish target for a DM: recipient tokens first, then the sender."""
    return f"{ROOT}.{_space(space)}.inst.{_principal(recipient_id)}.{_principal(sender_id)}"


def recipient_pattern(space: str, recipient_id: str) -> str:
    """Every DM to one principal, from any sender (its DM durable's filter)."""
    return f"{ROOT}.{_space(space)}.inst.{_principal(recipient_id)}.*.*"


def svc_subject(space: str, role: str, sender_id: str) -> str:
    """Concrete publish target for an anycast to ``role`` (sanitized, so never a wildcard)."""
    return f"{ROOT}.{_space(space)}.svc.{sanitize_token(role)}.{_principal(sender_id)}"


def chat_pattern(space: str, channel: str | None = None) -> str:
    """Read pattern: one channel from any sender, or the whole chat tap when channel is None."""
    if channel is None:
        return kind_pattern(space, "chat")
    return f"{ROOT}.{_space(space)}.chat.*.*.{sanitize_channel(channel)}"


def sender_pattern(space: str, kind: str, sender_id: str) -> str:
    """Everything one principal sends of ``kind`` (``chat``, ``inst`` or ``svc``): its read
    pattern, and the publish rows of a credential that may send only as itself."""
    if kind == "chat":
        return f"{ROOT}.{_space(space)}.chat.{_principal(sender_id)}.>"
    if kind == "inst":
        return f"{ROOT}.{_space(space)}.inst.*.*.{_principal(sender_id)}"
    if kind == "svc":
        return f"{ROOT}.{_space(space)}.svc.*.{_principal(sender_id)}"
    raise ValueError(f"no sender pattern for {kind!r}")


def space_pattern(space: str) -> str:
    """Every subject of a space (the open-mesh tap)."""
    return f"{ROOT}.{_space(space)}.>"


def kind_pattern(space: str, kind: str) -> str:
    """Every subject of one kind in a space (``chat``, ``inst``, ``svc``)."""
    if kind not in DELIVERY_KINDS:
        raise ValueError(f"not a delivery kind: {kind!r}")
    return f"{ROOT}.{_space(space)}.{kind}.>"


def rail_pattern(space: str, rail: str) -> str:
    """Every subject of one non-delivery rail of a space (``epc``, ``dinbox``, ``dlv``…)."""
    if rail not in ENDPOINT_RAILS | RESERVED_RAILS:
        raise ValueError(f"not a known rail: {rail!r}")
    return f"{ROOT}.{_space(space)}.{rail}.>"


def pattern_channel(pattern: str) -> str | None:
    """The channel part of a chat subscription pattern (``cotal.<s>.chat.<o>.<a>.<ch…>``):
    ``>`` for a pattern that reads every channel, None for a pattern that is not a chat read."""
    toks = pattern.split(".")
    if len(toks) < 4 or toks[0] != ROOT or toks[2] != "chat":
        return None
    if toks[3] == ">":
        return ">"
    if len(toks) < 6:
        return ">" if toks[-1] == ">" else None
    return ".".join(toks[5:])


def tap_subjects(space: str, *, admin: bool, open_mesh: bool = False) -> list[str]:
    """Live taps: chat only for observers; chat+inst+svc (three subs) for admin (App. B);
    one whole-space subscription on an open mesh, where nothing is denied."""
    if open_mesh:
        return [space_pattern(space)]
    kinds = ("chat", "inst", "svc") if admin else ("chat",)
    return [kind_pattern(space, k) for k in kinds]


def dm_visible(taps: Iterable[str], space: str) -> bool:
    """Whether live taps include direct messages (the whole space or the ``inst`` kind)."""
    return not {space_pattern(space), kind_pattern(space, "inst")}.isdisjoint(taps)


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS matching: ``*`` one token, ``>`` one-or-more trailing tokens."""
    p, s = pattern.split("."), subject.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return i < len(s)
        if i >= len(s) or (tok != "*" and tok != s[i]):
            return False
    return len(p) == len(s)
