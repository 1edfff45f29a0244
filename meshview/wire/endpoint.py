"""The §13.2 endpoint subjects: request rails (``ep.one|all|inst``), replies, goal progress
(``epe``), session rails (``eps``), the contract store (``epc``) and the read/publish patterns a
permission list grants on them; plus the token grammar of the manager contract's arguments.

The versioned rail (§13.2, §13.15): an issued caller rides ``cotal.<s>.ep.v1.…``, every request
and reply form with ``v1`` after ``ep`` and the caller's ``<generation>`` (32 lowercase hex)
between ``<uid>`` and ``<nonce>``. Every builder, pattern and parser here takes
``generation=None`` (the legacy rail) or a generation (``ep.v1``); the two rails are disjoint.
Goal progress (``epe``) and sessions (``eps``) have no versioned form.

Builders fail loud on a bad token rather than sanitize (the SPEC's build-time boundary); the
parsers split and check shape only and return None for anything that is not one of ours.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import TypeGuard

from meshview.errors import MeshviewError
from meshview.wire.issued import is_generation
from meshview.wire.names import space_token
from meshview.wire.outbound import mint_lifecycle_uid
from meshview.wire.subjects import ROOT

MANAGER = "manager"  # the manager endpoint's name (attach.md §3)
MAX_EP_SUBJECT_BYTES = 1024
# §13.2: seven modes; ``handle`` and ``exact`` pin the whole target triple as subject tokens
AUTHZ_MODES = ("self", "owner", "any", "child", "ledger", "handle", "exact")
TRIPLE_MODES = ("handle", "exact")
_TARGET_ARITY = {"self": 0, "owner": 1, "any": 1, "child": 1, "ledger": 1, "handle": 3, "exact": 3}
ROUTES = ("one", "all", "inst")
DIRECTIONS = ("in", "out")

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_COMMAND = re.compile(r"^[a-z0-9-]{1,32}$")
_NONCE = re.compile(r"^[A-Za-z0-9_-]{22,64}$")
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_LIFECYCLE = re.compile(r"^[a-z0-9]{26,32}$")
_LIFECYCLE_PREFIX = re.compile(r"^[a-z0-9]{1,32}$")
_OWNER = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_EPOCH = re.compile(r"^(0|[1-9][0-9]*)$")
# manager contract arguments (``spawn``): a persona names a program, a seat name an agent
_PERSONA = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SEAT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")


V1 = "v1"  # the versioned rail's token after ``ep`` (§13.2)
ANY_GENERATION = "*"  # patterns only: every generation of one caller on the versioned rail


class SubjectError(MeshviewError, ValueError):
    pass


def _check(rx: re.Pattern, v: str, what: str) -> str:
    if not isinstance(v, str) or not rx.fullmatch(v):
        raise SubjectError(f"{what} {v!r} is not a valid token")
    return v


def endpoint_token(name: str) -> str:
    for label in name.split("."):
        _check(_LABEL, label, "endpoint label")
    tok = name.replace(".", "_")
    if len(tok) > 64:
        raise SubjectError(f"endpoint token {tok!r} exceeds 64 characters")
    return tok


def endpoint_name(token: str) -> str:
    return token.replace("_", ".")


def check_command(v: str) -> str:
    return _check(_COMMAND, v, "command")


def check_nonce(v: str) -> str:
    return _check(_NONCE, v, "nonce")


def check_id(v: str, what: str = "id") -> str:
    return _check(_ID, v, what)


def check_lifecycle(v: str, what: str = "lifecycleUid") -> str:
    return _check(_LIFECYCLE, v, what)


def check_owner(v: str, what: str = "owner") -> str:
    return _check(_OWNER, v, what)


def is_lifecycle_token(v: object) -> TypeGuard[str]:
    return isinstance(v, str) and bool(_LIFECYCLE.fullmatch(v))


def is_lifecycle_prefix(v: object) -> TypeGuard[str]:
    """A lifecycle token (a manager instance id) or the start of one, as an operator types it."""
    return isinstance(v, str) and bool(_LIFECYCLE_PREFIX.fullmatch(v))


def is_id_token(v: object) -> TypeGuard[str]:
    return isinstance(v, str) and bool(_ID.fullmatch(v))


def is_persona(v: object) -> bool:
    """A ``spawn`` persona: the program kind a manager starts."""
    return isinstance(v, str) and bool(_PERSONA.fullmatch(v))


def is_seat_name(v: object) -> bool:
    """A managed seat's name (``spawn --name``), also its actor token."""
    return isinstance(v, str) and bool(_SEAT_NAME.fullmatch(v))


def new_nonce() -> str:
    return secrets.token_urlsafe(24)  # 32 chars, 192 bits


def new_request_id() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Caller:
    owner: str
    actor: str
    uid: str

    @property
    def principal(self) -> str:
        return f"{self.owner}.{self.actor}"

    def tokens(self) -> list[str]:
        return [check_owner(self.owner), check_owner(self.actor, "actor"), check_lifecycle(self.uid)]

    @classmethod
    def fresh(cls, owner: str = "local") -> "Caller":
        return cls(owner, secrets.token_hex(16), mint_lifecycle_uid())


@dataclass(frozen=True)
class AuthzTarget:
    """Subject target block: ``mode`` plus the pinned tokens (`tOwner`, or for ``handle`` and
    ``exact`` the whole ``tOwner.tActor.tUid`` triple)."""

    mode: str
    owner: str = ""
    actor: str = ""
    uid: str = ""

    def tokens(self) -> list[str]:
        if self.mode == "self":
            return ["self"]
        if self.mode in TRIPLE_MODES:
            return [self.mode, check_owner(self.owner, "target owner"), check_owner(self.actor, "target actor"),
                    check_lifecycle(self.uid, "target lifecycleUid")]
        if self.mode not in AUTHZ_MODES:
            raise SubjectError(f"authorization mode {self.mode!r} is unknown")
        return [self.mode, check_owner(self.owner, "target owner")]


def _sized(s: str) -> str:
    if len(s.encode()) > MAX_EP_SUBJECT_BYTES:
        raise SubjectError(f"subject exceeds {MAX_EP_SUBJECT_BYTES} bytes")
    return s


def _rail(space: str, kind: str, *tokens: str) -> str:
    return ".".join([ROOT, space_token(space), kind, *tokens])


def check_generation(v: str) -> str:
    if not is_generation(v):
        raise SubjectError(f"generation {v!r} is not 32 lowercase hex")
    return v


def _ep(space: str, generation: str | None, *tokens: str) -> str:
    """``cotal.<s>.ep.…`` (legacy) or ``cotal.<s>.ep.v1.…`` (a generation is given)."""
    return _rail(space, "ep", *([V1] if generation is not None else []), *tokens)


def _gen(generation: str | None, *, pattern: bool = False) -> list[str]:
    """The generation token between ``<uid>`` and ``<nonce>``, none on the legacy rail."""
    if generation is None:
        return []
    if pattern and generation == ANY_GENERATION:
        return [ANY_GENERATION]
    return [check_generation(generation)]


def request_subject(
    space: str,
    endpoint: str,
    command: str,
    caller: Caller,
    nonce: str,
    *,
    route: str = "one",
    instance_id: str | None = None,
    target: AuthzTarget | None = None,
    generation: str | None = None,
) -> str:
    parts = [route, endpoint_token(endpoint)]
    if route == "inst":
        if instance_id is None:
            raise SubjectError("the inst route needs an instanceId")
        parts.append(check_lifecycle(instance_id, "instanceId"))
    elif route not in ("one", "all"):
        raise SubjectError(f"route {route!r} is not one|all|inst")
    parts.append(check_command(command))
    if target is not None:
        parts += target.tokens()
    parts += caller.tokens()
    parts += _gen(generation)
    parts.append(check_nonce(nonce))
    return _sized(_ep(space, generation, *parts))


def reply_subject(space: str, endpoint: str, instance_id: str, epoch: int, caller: Caller, nonce: str, *,
                  generation: str | None = None) -> str:
    """The reply to one request, on the rail it arrived on (its generation copied, §13.2)."""
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        raise SubjectError(f"epoch {epoch!r} is not an unsigned integer")
    return _sized(_ep(space, generation, "reply", endpoint_token(endpoint),
                      check_lifecycle(instance_id, "instanceId"), str(epoch), *caller.tokens(),
                      *_gen(generation), check_nonce(nonce)))


def reply_filter(space: str, endpoint: str, caller: Caller, nonce: str, *, generation: str | None = None) -> str:
    """The caller's exact reply rail for one nonce, from any responder instance and epoch."""
    return _ep(space, generation, "reply", endpoint_token(endpoint), "*", "*", *caller.tokens(),
               *_gen(generation), check_nonce(nonce))


def serve_filter(space: str, route: str, endpoint: str, instance_id: str | None = None, *,
                 generation: str | None = None) -> str:
    """What a responder subscribes on one route. With a ``generation`` (any valid one, or
    :data:`ANY_GENERATION`) it is the whole versioned rail of that route: a responder serves
    every issued caller's generation and checks it per request, never one generation only."""
    _gen(generation, pattern=True)
    base = _ep(space, generation, route, endpoint_token(endpoint))
    if route == "inst":
        base += "." + check_lifecycle(instance_id or "", "instanceId")
    return base + ".>"


def eps_subject(space: str, endpoint: str, session_id: str, epoch: int, direction: str) -> str:
    """One session rail (``in``: caller→serving, ``out``: serving→caller)."""
    if direction not in DIRECTIONS:
        raise SubjectError("session direction is in|out")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
        raise SubjectError(f"epoch {epoch!r} is not an unsigned integer")
    return _sized(_rail(space, "eps", endpoint_token(endpoint), check_id(session_id, "sessionId"),
                        str(epoch), direction))


def epc_subject(space: str, digest_ref: str) -> str:
    hexpart = digest_ref[7:] if digest_ref.startswith("sha256:") else digest_ref
    if not _HEX64.fullmatch(hexpart):
        raise SubjectError(f"contract digest {digest_ref!r} is not sha256 hex")
    return _rail(space, "epc", hexpart)


def goal_progress_subject(space: str, endpoint: str, instance_id: str, epoch: int, caller: Caller,
                          goal_id: str) -> str:
    """``cotal.<s>.epe.<ep>.<iid>.<epoch>.goal.<cOwner>.<cActor>.<cUid>.<goalId>.progress``: where an
    action's progress and its terminal fact are published for the caller that started it."""
    if not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch {epoch!r} is not an unsigned integer")
    if not is_id_token(goal_id):
        raise ValueError(f"goal id {goal_id!r} is not an id token")
    if not is_lifecycle_token(instance_id):
        raise ValueError(f"instanceId {instance_id!r} is not a lifecycle token")
    return _rail(space, "epe", endpoint_token(endpoint), instance_id, str(epoch), "goal", *caller.tokens(),
                 goal_id, "progress")


def goal_progress_pattern(space: str, endpoint: str, caller: Caller, goal_id: str) -> str:
    """The caller's read of one goal's progress from whichever instance and epoch executes it."""
    if not is_id_token(goal_id):
        raise ValueError(f"goal id {goal_id!r} is not an id token")
    return _rail(space, "epe", endpoint_token(endpoint), "*", "*", "goal", *caller.tokens(), goal_id, "progress")


# ---- what a credential may publish and subscribe on the endpoint plane (wire.md §9) ---------

def request_pattern(space: str, endpoint: str, command: str, caller: Caller, *, route: str,
                    mode: str | None = None, generation: str | None = None,
                    instance_id: str | None = None) -> str:
    """One caller's requests of ``command`` on ``route``, any nonce (and, on the instance rail,
    any instance, or the one ``instance_id`` names); ``mode`` adds a subject target block of that
    mode for any target owner (``self``: the self form, no target tokens). ``generation`` (a
    literal, or :data:`ANY_GENERATION`) makes it the versioned-rail row."""
    if route not in ROUTES:
        raise SubjectError(f"route {route!r} is not one|all|inst")
    if instance_id is not None and route != "inst":
        raise SubjectError("only the inst route names an instance")
    inst = [check_lifecycle(instance_id, "instanceId") if instance_id is not None else "*"] if route == "inst" else []
    parts = [route, endpoint_token(endpoint), *inst, check_command(command)]
    if mode == "self":
        parts.append("self")  # the self form: no target tokens, the caller triple is the target
    elif mode is not None:
        if mode not in AUTHZ_MODES or _TARGET_ARITY[mode] != 1:
            raise SubjectError(f"authorization mode {mode!r} pins no single owner")
        parts += [mode, "*"]
    return _ep(space, generation, *parts, *caller.tokens(), *_gen(generation, pattern=True), "*")


def reply_pattern(space: str, caller: Caller, *, generation: str | None = None) -> str:
    """Every reply to one caller: any endpoint, instance, epoch and nonce (on the versioned rail,
    of ``generation``: a literal, or :data:`ANY_GENERATION`)."""
    return _ep(space, generation, "reply", "*", "*", "*", *caller.tokens(), *_gen(generation, pattern=True), "*")


def goal_pattern(space: str, endpoint: str, caller: Caller) -> str:
    """Every goal-progress fact for one caller on ``endpoint``."""
    return _rail(space, "epe", endpoint_token(endpoint), "*", "*", "goal", *caller.tokens(), ">")


# ---- parsing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedRequest:
    route: str
    endpoint: str
    command: str
    target: AuthzTarget | None
    caller: Caller
    nonce: str
    instance_id: str | None = None
    generation: str | None = None  # None: the legacy rail; a value: ``ep.v1``


@dataclass(frozen=True)
class ParsedReply:
    endpoint: str
    instance_id: str
    epoch: int
    caller: Caller
    nonce: str
    generation: str | None = None  # None: the legacy rail; a value: ``ep.v1``


def _parse_tail(parts: list[str], i: int, versioned: bool) -> tuple[AuthzTarget | None, Caller, str, str | None] | None:
    target = None
    if i < len(parts) and parts[i] in _TARGET_ARITY:
        mode = parts[i]
        n = _TARGET_ARITY[mode]
        t = parts[i + 1 : i + 1 + n]
        if len(t) != n:
            return None
        if mode == "self":
            target = AuthzTarget("self")
        elif mode in TRIPLE_MODES:
            target = AuthzTarget(mode, t[0], t[1], t[2])
        else:
            target = AuthzTarget(mode, t[0])
        i += 1 + n
    if len(parts) != i + (5 if versioned else 4):
        return None
    caller = Caller(parts[i], parts[i + 1], parts[i + 2])
    if not versioned:
        return target, caller, parts[i + 3], None
    if not is_generation(parts[i + 3]):
        return None
    return target, caller, parts[i + 4], parts[i + 3]


def _split_ep(subject: str) -> tuple[list[str], bool] | None:
    """The tokens after ``cotal.<s>.ep`` (or ``ep.v1``) and whether it is the versioned rail."""
    if len(subject.encode()) > MAX_EP_SUBJECT_BYTES:
        return None
    p = subject.split(".")
    if len(p) < 4 or p[0] != ROOT or p[2] != "ep":
        return None
    if p[3] == V1:
        return [*p[:3], *p[4:]], True
    return p, False


def parse_request(subject: str) -> ParsedRequest | None:
    split = _split_ep(subject)
    if split is None:
        return None
    p, versioned = split
    if len(p) < 10:
        return None
    route = p[3]
    if route in ("one", "all"):
        tail = _parse_tail(p, 6, versioned)
        if tail is None:
            return None
        target, caller, nonce, gen = tail
        return ParsedRequest(route, endpoint_name(p[4]), p[5], target, caller, nonce, generation=gen)
    if route == "inst" and len(p) >= 11:
        tail = _parse_tail(p, 7, versioned)
        if tail is None:
            return None
        target, caller, nonce, gen = tail
        return ParsedRequest(route, endpoint_name(p[4]), p[6], target, caller, nonce, instance_id=p[5],
                             generation=gen)
    return None


def parse_reply(subject: str) -> ParsedReply | None:
    split = _split_ep(subject)
    if split is None:
        return None
    p, versioned = split
    if len(p) != (12 if versioned else 11) or p[3] != "reply":
        return None
    if not _EPOCH.fullmatch(p[6]):
        return None
    gen = None
    if versioned:
        gen = p[10]
        if not is_generation(gen):
            return None
    return ParsedReply(endpoint_name(p[4]), p[5], int(p[6]), Caller(p[7], p[8], p[9]), p[-1], generation=gen)
