"""The auth callout (Plane 2): ``$SYS.REQ.USER.AUTH`` answered over the AUTH account's service
connection (nats-server "Auth Callout", decentralized/operator mode).

Per request, as the reference (``callout.ts``, ``permissions.ts``, ``ledger.ts``
``ledgerAuthorizeConnect``): validate the bearer in ``connect_opts.auth_token``; take the
connection id from ``connect_opts.name`` (the client's inbox nonce; the inbox becomes
``_INBOX_<connId>.>``); re-read the actor's ledger row (refuse a missing row, a capability no longer
granted, a bearer without ``act.lifecycleUid`` or with another one); then mint the view's profile:
``agent`` with no view, ``manager-caller`` pinned to its instance (issued on ``ep.v1`` with a fresh
generation and an accepted row for an interactive row), ``session-caller`` after the redemption is
verified again, the static operator views. The user JWT is signed by the data account's signing
key and dies with the bearer (a session's own expiry for ``session-caller``). A refusal answers
the server with an error; the client sees an authorization violation.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING

import nacl.exceptions
import nacl.signing

from cotal_tui.demo.userauth.bearer import VIEW_REQUIRED_SCOPE, BearerError, ValidatedBearer
from cotal_tui.demo.userauth.ledger import LedgerError
from cotal_tui.demo.userauth.managers import ManagerRefused
from cotal_tui.demo.userauth.profiles import (
    agent_permissions,
    deployer_permissions,
    manager_caller_permissions,
    session_caller_permissions,
    view_permissions,
)
from cotal_tui.demo.userauth.redemption import RedemptionRefused
from cotal_tui.errors import CotalError
from meshview.link.auth import Permissions, encode_jwt, principal_tags, user_jwt
from meshview.wire.endpoint import MANAGER, Caller, SubjectError, check_nonce
from meshview.wire.issued import (
    IssuedRef,
    IssuedRowError,
    accepted_key,
    accepted_token,
    encode_row,
    new_generation,
    parse_row,
)

if TYPE_CHECKING:
    from cotal_tui.demo.userauth.plane import UserAuthPlane

AUTH_SUBJECT = "$SYS.REQ.USER.AUTH"


class CalloutRefused(CotalError, RuntimeError):
    """The callout refuses a connect; the sentence goes to the server (and the plane's log)."""


def _b64url_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def decode_request(token: str) -> dict:
    """The authorization request's claims, verified against the server's nkey (its ``iss``)."""
    try:
        h, c, s = token.split(".")
        claims = json.loads(_b64url_decode(c))
        raw = base64.b32decode(claims["iss"] + "=" * (-len(claims["iss"]) % 8))
        nacl.signing.VerifyKey(raw[1:-2]).verify(f"{h}.{c}".encode(), _b64url_decode(s))
    except (ValueError, KeyError, TypeError, nacl.exceptions.BadSignatureError):
        raise CalloutRefused("the authorization request is not signed by the server") from None
    return claims


def ceiling(perms: Permissions) -> bytes:
    """The minted ceiling, canonically serialized (byte-identical comparison on renewal)."""
    return json.dumps(perms.claims(), sort_keys=True, separators=(",", ":")).encode()


class Callout:
    def __init__(self, plane: "UserAuthPlane") -> None:
        self.plane = plane
        # accepted-row token -> (generation, ceiling bytes): what this issuer issued on it
        self._issued: dict[str, tuple[str, bytes]] = {}

    async def handle(self, msg) -> None:
        p = self.plane
        try:
            req = decode_request(msg.data.decode())
        except (CalloutRefused, UnicodeDecodeError) as e:
            p.record("callout", str(e))
            return  # nothing to answer to: the server never signed it
        n = req.get("nats") or {}
        user_nkey = n.get("user_nkey", "")
        server_id = (n.get("server_id") or {}).get("id", "")
        resp = {"sub": user_nkey, "aud": server_id, "nats": {"type": "authorization_response", "version": 2}}
        try:
            resp["nats"]["jwt"] = await self.mint(n, user_nkey)
            p.record("callout", "ok")
        except (CalloutRefused, BearerError, LedgerError, ManagerRefused, RedemptionRefused) as e:
            resp["nats"]["error"] = str(e)
            p.record("callout", str(e))
        await msg.respond(encode_jwt(resp, p.auth_key).encode())

    async def mint(self, n: dict, user_nkey: str) -> str:
        p = self.plane
        opts = n.get("connect_opts") or {}
        conn_id = opts.get("name") or ""
        try:
            check_nonce(conn_id)
        except (SubjectError, TypeError):
            raise CalloutRefused("the connect name must be the connection's inbox nonce (22-64 URL-safe characters)") from None
        bearer = opts.get("auth_token")
        if not isinstance(bearer, str) or not bearer:
            raise CalloutRefused("no bearer presented - exchange an IdP token for one (auth_token)")
        t = p.issuer.validate(bearer)
        perms, exp = await self.permissions(t, conn_id)
        return user_jwt(user_nkey, p.trust.signing, account=p.trust.account.public,
                        name=f"{t.principal}{'/' + t.view if t.view else ''}", permissions=perms,
                        expires_at=exp, tags=principal_tags(t.owner, t.actor))

    async def permissions(self, t: ValidatedBearer, conn_id: str) -> tuple[Permissions, int]:
        p = self.plane
        row = await p.read_actor(t.owner, t.actor)  # the connect gate: a fresh read
        if row is None:
            raise CalloutRefused(f'actor "{t.actor}" is not (or no longer) granted for this owner')
        for s in t.scope:
            if s not in row.scopes:
                raise CalloutRefused(f'bearer scope "{s}" exceeds the actor\'s current grant - re-login to mint '
                                     "a fresh bearer")
        if t.lifecycle_uid is None:
            raise CalloutRefused("bearer carries no lifecycle claim - re-exchange for a fresh bearer "
                                 "(lifecycle-bound from v0.4)")
        if t.lifecycle_uid != row.lifecycle_uid:
            raise CalloutRefused(f"bearer lifecycle {t.lifecycle_uid} is not the actor's current incarnation - "
                                 "the alias was respawned; re-exchange for a fresh bearer")
        caller = Caller(t.owner, t.actor, t.lifecycle_uid)
        caps = frozenset(t.scope)
        if t.view is None:
            return agent_permissions(p.space, caller, conn_id, scopes=caps, allow_subscribe=row.allow_subscribe,
                                     allow_publish=row.allow_publish), t.exp
        need = VIEW_REQUIRED_SCOPE.get(t.view)
        if need is not None and need not in caps:
            raise CalloutRefused(f'callout permissions: view "{t.view}" without capability "{need}" in act.scope '
                                 "- refusing to mint")
        if t.view == "manager-service":
            raise CalloutRefused('callout permissions: "manager-service" is a typed material exchange, not a '
                                 "connect profile; raw view bearers are refused")
        if t.view == "session-caller":
            assert t.session is not None
            sess = await p.verify_session(owner=t.owner, actor=t.actor, lifecycle_uid=t.lifecycle_uid,
                                          endpoint=t.session.endpoint, session_id=t.session.session_id,
                                          epoch=t.session.epoch, grant_sig=None)
            if sess.exp != t.session.exp:
                raise CalloutRefused("callout permissions: the session row's expiry is not the bearer's session claim")
            return session_caller_permissions(p.space, (sess.endpoint, sess.session_id, sess.epoch), conn_id), sess.exp
        if t.view == "manager-caller":
            assert t.manager_instance_id is not None
            await p.authorize_manager_caller(t.owner, t.manager_instance_id)
            if row.interactive:
                return await self.issue_user_caller(t, caller, caps, conn_id, t.manager_instance_id), t.exp
            return manager_caller_permissions(p.space, caller, conn_id, scopes=caps,
                                              instance_id=t.manager_instance_id), t.exp
        if t.view == "deployer":
            return deployer_permissions(p.space, caller, conn_id, scopes=caps), t.exp
        return view_permissions(t.view, p.space, conn_id), t.exp

    async def issue_user_caller(self, t: ValidatedBearer, caller: Caller, caps: frozenset[str], conn_id: str,
                                instance_id: str) -> Permissions:
        """§13.15: a fresh generation and a create-only accepted row for this connection's token;
        a reconnect under the same connId keeps the generation only if the ceiling is identical.
        ``caller`` carries the bearer's checked lifecycle uid; ``instance_id`` its manager's."""
        p = self.plane
        token = accepted_token(conn_id)

        def mint(generation: str) -> Permissions:
            return manager_caller_permissions(p.space, caller, conn_id, scopes=caps,
                                              instance_id=instance_id, generation=generation,
                                              accepted_token=token)

        kv = p.accepted_kv
        existing = await p.kv_value(kv, accepted_key(token))
        if existing is not None:
            try:
                ref = parse_row(existing, space=p.space, triple=(caller.owner, caller.actor, caller.uid))
            except IssuedRowError:
                raise CalloutRefused("failed-precondition: this connection id is bound to another caller - "
                                     "open a new connection with a new nonce") from None
            perms = mint(ref.generation)
            prior = self._issued.get(token)
            if prior is None or prior != (ref.generation, ceiling(perms)):
                raise CalloutRefused("failed-precondition: the reconnect's ceiling changed - open a new "
                                     "connection with a new nonce and re-read its accepted row")
            return perms
        generation = new_generation()
        perms = mint(generation)
        ref = IssuedRef(p.space, caller.owner, caller.actor, caller.uid, generation)
        await kv.create(accepted_key(token), encode_row(ref))
        self._issued[token] = (generation, ceiling(perms))
        p.issued.append(ref)
        return perms


__all__ = ["AUTH_SUBJECT", "MANAGER", "Callout", "CalloutRefused"]
