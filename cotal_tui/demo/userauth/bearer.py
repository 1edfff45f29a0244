"""The Cotal user bearer: what the exchange signs and the callout validates
(``implementations/auth/src/token.ts``, ``issuer.ts``).

EdDSA only; ``iss`` pinned (``urn:cotal:auth:<space>``); ``aud`` exactly the space; ``exp``,
``iat`` and ``nbf`` required and a lifetime of at most 900 s measured from the validator's clock
(``transfer-writer``: 5 min); ``ver`` 1; ``sub`` the derived owner; ``act`` = ``{owner, actor,
scope, parent?, lifecycleUid, credentialId, view?, managerInstanceId?, session?}``; a top-level
``scope`` must equal ``act.scope``. The views are a closed enum with the ledger scope each needs.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from cotal_tui.demo.userauth.jws import JwsError, SigningKey, verify
from cotal_tui.demo.userauth.ledger import is_actor, is_derived_owner
from cotal_tui.errors import CotalError
from meshview.wire.endpoint import is_lifecycle_token

USER_TOKEN_VER = 1
MAX_TOKEN_TTL_S = 900
TRANSFER_WRITER_TTL_S = 300
CLOCK_TOLERANCE_S = 5

USER_TOKEN_VIEWS = ("admin", "purger", "channel-purger", "channel-writer", "deployer", "manager-service",
                    "manager-caller", "session-caller", "transfer-writer")
VIEW_REQUIRED_SCOPE = {"admin": "admin", "purger": "admin", "channel-purger": "admin",
                       "channel-writer": "admin", "deployer": "spawn", "manager-service": "supervise",
                       "transfer-writer": "admin"}  # manager-caller, session-caller: none
PUBLIC_EXCHANGE_VIEWS = ("channel-writer", "channel-purger", "manager-caller", "session-caller",
                         "transfer-writer")


def issuer_name(space: str) -> str:
    return f"urn:cotal:auth:{space}"


class BearerError(CotalError, ValueError):
    """A bearer the callout refuses; the message is one sentence (it never echoes the token)."""


@dataclass(frozen=True)
class Session:
    """``act.session``: the one §13.6 session a ``session-caller`` bearer may hold (exp: unix s)."""

    endpoint: str
    session_id: str
    epoch: int
    exp: int

    def as_json(self) -> dict:
        return {"endpoint": self.endpoint, "sessionId": self.session_id, "epoch": self.epoch, "exp": self.exp}


@dataclass(frozen=True)
class ValidatedBearer:
    owner: str
    actor: str
    scope: tuple[str, ...]
    lifecycle_uid: str | None
    credential_id: str | None
    view: str | None
    manager_instance_id: str | None
    session: Session | None
    parent: str | None
    exp: int
    iat: int
    top_scope: tuple[str, ...] = ()

    @property
    def principal(self) -> str:
        return f"{self.owner}.{self.actor}"


class BearerIssuer:
    """Signs bearers for one space; ``jwks()`` is what ``GET /jwks`` serves."""

    def __init__(self, space: str, key: SigningKey | None = None) -> None:
        self.space = space
        self.issuer = issuer_name(space)
        self.key = key or SigningKey()

    def __repr__(self) -> str:
        return f"BearerIssuer({self.issuer}, kid={self.key.kid})"

    def jwks(self) -> dict:
        return {"keys": [self.key.jwk()]}

    def issue(self, *, owner: str, actor: str, scope, lifecycle_uid: str, credential_id: str,
              ttl_s: int, view: str | None = None, manager_instance_id: str | None = None,
              session: Session | None = None, parent: str | None = None, now: float | None = None) -> str:
        if not is_derived_owner(owner):
            raise BearerError(f"bearer owner {owner!r} is not a derived owner")
        if view is not None and view not in USER_TOKEN_VIEWS:
            raise BearerError(f'view "{view}" is not a known view ({", ".join(USER_TOKEN_VIEWS)})')
        cap = TRANSFER_WRITER_TTL_S if view == "transfer-writer" else MAX_TOKEN_TTL_S
        if not isinstance(ttl_s, int) or ttl_s <= 0 or ttl_s > cap:
            raise BearerError(f"a bearer lifetime must be 1..{cap} s")
        t = int(now if now is not None else time.time())
        act: dict = {"owner": owner, "actor": actor, "scope": sorted(scope), "lifecycleUid": lifecycle_uid,
                     "credentialId": credential_id}
        if parent:
            act["parent"] = parent
        if view is not None:
            act["view"] = view
        if manager_instance_id is not None:
            act["managerInstanceId"] = manager_instance_id
        if session is not None:
            act["session"] = session.as_json()
        claims = {"iss": self.issuer, "aud": self.space, "sub": owner, "iat": t, "nbf": t, "exp": t + ttl_s,
                  "jti": secrets.token_hex(12), "ver": USER_TOKEN_VER, "act": act}
        return self.key.sign(claims)

    def validate(self, token: str, *, now: float | None = None) -> ValidatedBearer:
        return validate_bearer(token, self, now=now)


def _strs(v, what: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise BearerError(f"bearer {what} must be a list of strings")
    return tuple(v)


def validate_bearer(token: str, issuer: BearerIssuer, *, now: float | None = None) -> ValidatedBearer:
    t = now if now is not None else time.time()
    try:
        _, c = verify(token, {issuer.key.kid: issuer.key.verify_key}, what="bearer")
    except JwsError as e:
        raise BearerError(str(e)) from None
    if c.get("iss") != issuer.issuer:
        raise BearerError("bearer: unexpected issuer - this space's auth service did not sign it")
    aud = c.get("aud")
    if aud != issuer.space and not (isinstance(aud, list) and aud == [issuer.space]):
        raise BearerError("bearer: aud must be exactly this space")
    for k in ("exp", "iat", "nbf"):
        if not isinstance(c.get(k), int) or isinstance(c.get(k), bool):
            raise BearerError(f"bearer: {k} is required")
    if c["exp"] <= t:
        raise BearerError("bearer has expired - re-exchange for a fresh bearer")
    if c["nbf"] > t + CLOCK_TOLERANCE_S or c["iat"] > t + CLOCK_TOLERANCE_S:
        raise BearerError("bearer is not valid yet (nbf/iat in the future)")
    if c.get("ver") != USER_TOKEN_VER:
        raise BearerError(f"bearer: ver must be {USER_TOKEN_VER}")
    act = c.get("act")
    if not isinstance(act, dict):
        raise BearerError("bearer: act is required")
    view = act.get("view")
    if view is not None and view not in USER_TOKEN_VIEWS:
        raise BearerError("bearer: act.view is not a known view")
    cap = TRANSFER_WRITER_TTL_S if view == "transfer-writer" else MAX_TOKEN_TTL_S
    if c["exp"] - t > cap + CLOCK_TOLERANCE_S:
        raise BearerError(f"bearer lifetime exceeds {cap} s")
    sub = c.get("sub")
    if not is_derived_owner(sub):
        raise BearerError("bearer: sub must be a derived owner (u_...)")
    if act.get("owner") != sub:
        raise BearerError("bearer: act.owner must equal sub")
    actor = act.get("actor")
    if not is_actor(actor):
        raise BearerError("bearer: act.actor must be an actor name")
    scope = _strs(act.get("scope"), "act.scope")
    top = _strs(c.get("scope"), "scope")
    if top and sorted(top) != sorted(scope):
        raise BearerError("bearer: top-level scope != act.scope - act.scope is the single capability authority")
    uid = act.get("lifecycleUid")
    if uid is not None and not is_lifecycle_token(uid):
        raise BearerError("bearer: act.lifecycleUid is malformed")
    iid = act.get("managerInstanceId")
    if iid is not None and (view != "manager-caller" or not is_lifecycle_token(iid)):
        raise BearerError("bearer: act.managerInstanceId rides only a manager-caller view")
    if view == "manager-caller" and iid is None:
        raise BearerError("bearer: a manager-caller view names no manager instance")
    sess = act.get("session")
    session = None
    if (view == "session-caller") != (sess is not None):
        raise BearerError("bearer: act.session and the session-caller view come together")
    if sess is not None:
        try:
            session = Session(str(sess["endpoint"]), str(sess["sessionId"]), int(sess["epoch"]), int(sess["exp"]))
        except (KeyError, TypeError, ValueError):
            raise BearerError("bearer: act.session is not {endpoint, sessionId, epoch, exp}") from None
    parent = act.get("parent") if isinstance(act.get("parent"), str) else None
    cred = act.get("credentialId") if isinstance(act.get("credentialId"), str) else None
    return ValidatedBearer(sub, actor, scope, uid, cred, view, iid, session, parent, c["exp"], c["iat"], top)
