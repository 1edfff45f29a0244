"""The §13.2 endpoint rails (`ep.one|all|inst|reply`), session rails (`eps`) and `epc` subjects.

Builders fail loud on a bad token rather than sanitize (the SPEC's build-time boundary); the
parser splits and checks shape only and returns None for anything that is not one of ours.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from meshview.wire.names import space_token

MAX_EP_SUBJECT_BYTES = 1024
AUTHZ_MODES = ("self", "owner", "any", "child", "ledger", "handle")
_TARGET_ARITY = {"self": 0, "owner": 1, "any": 1, "child": 1, "ledger": 1, "handle": 3}

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_COMMAND = re.compile(r"^[a-z0-9-]{1,32}$")
_NONCE = re.compile(r"^[A-Za-z0-9_-]{22,64}$")
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_LIFECYCLE = re.compile(r"^[a-z0-9]{26,32}$")
_OWNER = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_EPOCH = re.compile(r"^(0|[1-9][0-9]*)$")


class SubjectError(ValueError):
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


def is_lifecycle_token(v: object) -> bool:
    return isinstance(v, str) and bool(_LIFECYCLE.fullmatch(v))


def is_id_token(v: object) -> bool:
    return isinstance(v, str) and bool(_ID.fullmatch(v))


def new_nonce() -> str:
    return secrets.token_urlsafe(24)  # 32 chars, 192 bits


def new_request_id() -> str:
    return secrets.token_urlsafe(24)


_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def mint_lifecycle_uid() -> str:
    """20 CSPRNG bytes rendered base36, left-padded to 26 (the reference mint, §13.1)."""
    n = int.from_bytes(secrets.token_bytes(20), "big")
    s = ""
    while n:
        n, r = divmod(n, 36)
        s = _B36[r] + s
    return s.rjust(26, "0")[-32:]


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
class Target:
    """Subject target block: ``mode`` plus the pinned tokens (`tOwner`, or the handle triple)."""

    mode: str
    owner: str = ""
    actor: str = ""
    uid: str = ""

    def tokens(self) -> list[str]:
        if self.mode == "self":
            return ["self"]
        if self.mode == "handle":
            return ["handle", check_owner(self.owner), check_owner(self.actor), check_lifecycle(self.uid)]
        if self.mode not in AUTHZ_MODES:
            raise SubjectError(f"authorization mode {self.mode!r} is unknown")
        return [self.mode, check_owner(self.owner, "target owner")]


def _sized(s: str) -> str:
    if len(s.encode()) > MAX_EP_SUBJECT_BYTES:
        raise SubjectError(f"subject exceeds {MAX_EP_SUBJECT_BYTES} bytes")
    return s


def request_subject(
    space: str,
    endpoint: str,
    command: str,
    caller: Caller,
    nonce: str,
    *,
    route: str = "one",
    instance_id: str | None = None,
    target: Target | None = None,
) -> str:
    parts = ["cotal", space_token(space), "ep", route, endpoint_token(endpoint)]
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
    parts.append(check_nonce(nonce))
    return _sized(".".join(parts))


def reply_subject(space: str, endpoint: str, instance_id: str, epoch: int, caller: Caller, nonce: str) -> str:
    if not isinstance(epoch, int) or epoch < 0:
        raise SubjectError(f"epoch {epoch!r} is not an unsigned integer")
    return _sized(
        ".".join(
            ["cotal", space_token(space), "ep", "reply", endpoint_token(endpoint),
             check_lifecycle(instance_id, "instanceId"), str(epoch), *caller.tokens(), check_nonce(nonce)]
        )
    )


def serve_filter(space: str, route: str, endpoint: str, instance_id: str | None = None) -> str:
    base = f"cotal.{space_token(space)}.ep.{route}.{endpoint_token(endpoint)}"
    if route == "inst":
        base += "." + check_lifecycle(instance_id or "", "instanceId")
    return base + ".>"


def eps_subject(space: str, endpoint: str, session_id: str, epoch: int, direction: str) -> str:
    if direction not in ("in", "out"):
        raise SubjectError("session direction is in|out")
    return _sized(
        f"cotal.{space_token(space)}.eps.{endpoint_token(endpoint)}."
        f"{check_id(session_id, 'sessionId')}.{int(epoch)}.{direction}"
    )


def epc_subject(space: str, digest_ref: str) -> str:
    hexpart = digest_ref[7:] if digest_ref.startswith("sha256:") else digest_ref
    if not _HEX64.fullmatch(hexpart):
        raise SubjectError(f"contract digest {digest_ref!r} is not sha256 hex")
    return f"cotal.{space_token(space)}.epc.{hexpart}"


@dataclass(frozen=True)
class ParsedRequest:
    route: str
    endpoint: str
    command: str
    target: Target | None
    caller: Caller
    nonce: str
    instance_id: str | None = None


@dataclass(frozen=True)
class ParsedReply:
    endpoint: str
    instance_id: str
    epoch: int
    caller: Caller
    nonce: str


def _parse_tail(parts: list[str], i: int) -> tuple[Target | None, Caller, str] | None:
    target = None
    if i < len(parts) and parts[i] in _TARGET_ARITY:
        mode = parts[i]
        n = _TARGET_ARITY[mode]
        t = parts[i + 1 : i + 1 + n]
        if len(t) != n:
            return None
        if mode == "self":
            target = Target("self")
        elif mode == "handle":
            target = Target("handle", t[0], t[1], t[2])
        else:
            target = Target(mode, t[0])
        i += 1 + n
    if len(parts) != i + 4:
        return None
    return target, Caller(parts[i], parts[i + 1], parts[i + 2]), parts[i + 3]


def parse_request(subject: str) -> ParsedRequest | None:
    if len(subject.encode()) > MAX_EP_SUBJECT_BYTES:
        return None
    p = subject.split(".")
    if len(p) < 10 or p[0] != "cotal" or p[2] != "ep":
        return None
    route = p[3]
    if route in ("one", "all"):
        tail = _parse_tail(p, 6)
        if tail is None:
            return None
        return ParsedRequest(route, endpoint_name(p[4]), p[5], *tail)
    if route == "inst" and len(p) >= 11:
        tail = _parse_tail(p, 7)
        if tail is None:
            return None
        return ParsedRequest(route, endpoint_name(p[4]), p[6], *tail, instance_id=p[5])
    return None


def parse_reply(subject: str) -> ParsedReply | None:
    p = subject.split(".")
    if len(p) != 11 or p[0] != "cotal" or p[2] != "ep" or p[3] != "reply":
        return None
    if not _EPOCH.fullmatch(p[6]):
        return None
    return ParsedReply(endpoint_name(p[4]), p[5], int(p[6]), Caller(p[7], p[8], p[9]), p[10])
