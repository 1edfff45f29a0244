"""Credentials for secured meshes: minted from a mesh's root seed, or user-auth connect material.

A space under static auth is one NATS account signed by an operator; every client is a user of
that account, and the broker enforces each user's permission lists (wire.md §9, §10). The
reference CLI never hands a control command a standing credential: it reads the space's trust
material from the root the mesh resolved to (``<root>/.cotal/auth/auth.json``, its data-account
signing seed) and mints a short-lived user JWT per call, bound to a fresh caller identity
(attach.md §3.2, §6). This module does the same without ``nsc``: nkeys, JWT encoding, the
permission profiles a console, its control verbs, its purges and its sends need (the reference
``permissionsFor`` arms: admin/observer views, control-caller, session-caller/serving, purger,
channel-purger, operator), and the in-memory :class:`Credential`
a connection authenticates with (it never touches the disk). Every subject row of a profile comes
from the wire's builders (``meshview.wire``); the operator and accounts a demo mesh is created
with are ``cotal_tui/demo/trust.py``.

JWT format (nats-io/jwt v2): ``b64url(header).b64url(claims).b64url(ed25519 signature)``, header
``{"typ":"JWT","alg":"ed25519-nkey"}``, ``jti`` = unpadded base32 of the SHA-256 of the claims
serialized without ``jti``.

Secrets (seeds, JWTs, bearers) never leave this module inside a string meant for people: every
``repr`` shows public halves only, and errors name files and spaces, never their contents.

Size: over 500 lines because nkey/JWT encoding, claims and the per-role permission tables are
one minting path; a mistake between split halves would be a security bug.
"""

from __future__ import annotations

from meshview.errors import MeshviewError

import base64
import dataclasses
import hashlib
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import nkeys

from meshview.wire.endpoint import (
    MANAGER,
    Caller,
    SubjectError,
    eps_subject,
    goal_pattern,
    reply_pattern,
    request_pattern,
)
from meshview.wire.issued import IssuedRef, accepted_bucket, accepted_token, direct_get_subject, new_generation
from meshview.wire.liveness import ask_grants
from meshview.wire.names import bucket_names, chat_stream, dm_stream, epc_stream, space_token
from meshview.wire.outbound import DEV_OWNER, mint_lifecycle_uid, presence_subject
from meshview.wire.subjects import kind_pattern, rail_pattern, sender_pattern

JWT_HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}
UNLIMITED = -1
OWNER = DEV_OWNER  # the principal owner on open and static meshes (SPEC §2)
CONTROL_TTL_S = 5 * 60  # one-shot instrument (the reference's control-caller lifetime)
SESSION_TTL_CAP_S = 24 * 3600  # a session-caller never outlives the 24 h grant ceiling
AUTH_FILE = "auth.json"

_PREFIX = {
    "operator": nkeys.PREFIX_BYTE_OPERATOR,
    "account": nkeys.PREFIX_BYTE_ACCOUNT,
    "user": nkeys.PREFIX_BYTE_USER,
}


class AuthError(MeshviewError, RuntimeError):
    """Credentials cannot be made; the message is one sentence that names no secret."""


# ---- keys -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NKey:
    """An nkey pair. ``repr`` never shows the seed."""

    kind: str
    public: str
    _seed: bytes = field(repr=False)

    @property
    def seed(self) -> bytes:
        return self._seed

    def sign(self, data: bytes) -> bytes:
        return nkeys.from_seed(self._seed).sign(data)

    def __repr__(self) -> str:
        return f"NKey({self.kind}, {self.public})"


def new_nkey(kind: str) -> NKey:
    """A fresh operator/account/user nkey from 32 CSPRNG bytes."""
    if kind not in _PREFIX:
        raise ValueError(f"unknown nkey kind {kind!r}")
    seed = nkeys.encode_seed(os.urandom(32), _PREFIX[kind])
    return NKey(kind, nkeys.from_seed(seed).public_key.decode(), seed)


def nkey_from_seed(seed: bytes | str) -> NKey:
    if isinstance(seed, str):
        seed = seed.encode()
    try:
        public = nkeys.from_seed(seed).public_key.decode()
    except Exception:  # noqa: BLE001 - any decode failure is said as AuthError
        raise AuthError("an nkey seed does not decode") from None
    kind = {"O": "operator", "A": "account", "U": "user"}.get(public[0], "unknown")
    return NKey(kind, public, seed)


# ---- JWT ------------------------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def claims_id(claims: dict) -> str:
    body = {k: v for k, v in claims.items() if k != "jti"}
    return base64.b32encode(hashlib.sha256(_json(body)).digest()).rstrip(b"=").decode()


def encode_jwt(claims: dict, signer: NKey) -> str:
    """Sign ``claims`` (``iss`` forced to the signer's public key, ``jti`` recomputed)."""
    c = {k: v for k, v in claims.items() if k != "jti"}
    c["iss"] = signer.public
    c.setdefault("iat", int(time.time()))
    c = {"jti": claims_id(c), **c}
    head = _b64url(_json(JWT_HEADER)) + "." + _b64url(_json(c))
    return head + "." + _b64url(signer.sign(head.encode()))


def jwt_claims(token: str) -> dict:
    """The claims of a compact JWT, unverified (client side: the broker verifies)."""
    try:
        claims = json.loads(_b64url_decode(token.split(".")[1]))
    except (IndexError, ValueError):
        raise AuthError("a token is not a compact JWT") from None
    if not isinstance(claims, dict):
        raise AuthError("a token's claims are not an object")
    return claims


@dataclass(frozen=True)
class Permissions:
    """A NATS user permission set: default-deny allow lists plus optional denies."""

    pub_allow: tuple[str, ...] = ()
    pub_deny: tuple[str, ...] = ()
    sub_allow: tuple[str, ...] = ()
    sub_deny: tuple[str, ...] = ()

    def claims(self) -> dict:
        def side(allow: tuple[str, ...], deny: tuple[str, ...]) -> dict[str, list[str]]:
            d: dict[str, list[str]] = {}
            if allow:
                d["allow"] = list(allow)
            if deny:
                d["deny"] = list(deny)
            return d

        return {"pub": side(self.pub_allow, self.pub_deny), "sub": side(self.sub_allow, self.sub_deny)}


def user_claims(user_public: str, *, account: str, signer_public: str, name: str,
                permissions: Permissions | None, issued_at: int | None = None,
                expires_at: int | None = None, audience: str | None = None,
                tags: list[str] | None = None) -> dict:
    """Claims of a user JWT; ``permissions=None`` is allow-all (infrastructure only)."""
    nats: dict = {"type": "user", "version": 2, "subs": UNLIMITED, "data": UNLIMITED, "payload": UNLIMITED}
    if permissions is not None:
        nats.update(permissions.claims())
    if tags:
        nats["tags"] = list(tags)
    if signer_public != account:
        nats["issuer_account"] = account
    claims: dict = {"name": name, "sub": user_public, "nats": nats,
                    "iat": int(time.time()) if issued_at is None else issued_at}
    if expires_at is not None:
        claims["exp"] = int(expires_at)
    if audience is not None:
        claims["aud"] = audience
    return claims


def user_jwt(user_public: str, signer: NKey, *, account: str, name: str,
             permissions: Permissions | None, issued_at: int | None = None,
             expires_at: int | None = None, tags: list[str] | None = None) -> str:
    return encode_jwt(user_claims(user_public, account=account, signer_public=signer.public, name=name,
                                  permissions=permissions, issued_at=issued_at, expires_at=expires_at,
                                  tags=tags),
                      signer)


def principal_tags(owner: str, actor: str) -> list[str]:
    """The identity tags every minted user JWT carries (the reference's ``principalTags``): a
    static connection's principal is recoverable from its CONNZ record by ``principal:``."""
    return [f"owner:{owner}", f"actor:{actor}", f"principal:{owner}.{actor}"]


# ---- creds text -----------------------------------------------------------------------------


def format_creds(jwt: str, seed: bytes | str) -> str:
    """The standard decorated creds text (what ``nsc`` / ``fmtCreds`` emit)."""
    s = seed.decode() if isinstance(seed, bytes) else seed
    return ("-----BEGIN NATS USER JWT-----\n" f"{jwt}\n" "------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n"
            "NKEYs are sensitive and should be treated as secrets.\n\n"
            "-----BEGIN USER NKEY SEED-----\n" f"{s}\n" "------END USER NKEY SEED------\n\n"
            "*************************************************************\n")


# ---- permission profiles (wire.md §9; the reference permissionsFor) ------------------------


def inbox_prefix(conn_id: str) -> str:
    """``_INBOX_<connId>`` (§10): the only reply inbox a scoped credential may subscribe."""
    return f"_INBOX_{conn_id}"


def _kv_read(stream: str, *, msg_get: bool, watch: bool) -> list[str]:
    rows = [f"$JS.API.STREAM.INFO.{stream}"]
    if msg_get:
        rows.append(f"$JS.API.STREAM.MSG.GET.{stream}")
    if watch:
        rows += [f"$JS.API.CONSUMER.CREATE.{stream}.>", f"$JS.API.CONSUMER.INFO.{stream}.>",
                 f"$JS.API.CONSUMER.DELETE.{stream}.>"]
    return rows


def observer_permissions(space: str, conn_id: str) -> Permissions:
    """Channels only: sub ``chat.>`` + own inbox; JS reads for CHAT history, presence watch,
    channel registry, membership feed, delivery lease. No application publish."""
    s = space_token(space)
    b = bucket_names(s)
    chat = chat_stream(s)
    pub = [
        "$JS.API.INFO",
        f"$JS.API.STREAM.INFO.{chat}",
        f"$JS.API.CONSUMER.CREATE.{chat}",  # bare form: a multi-filter ephemeral history read
        f"$JS.API.CONSUMER.CREATE.{chat}.>",
        f"$JS.API.CONSUMER.INFO.{chat}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{chat}.>",
        f"$JS.API.CONSUMER.DELETE.{chat}.>",
        f"$JS.ACK.{chat}.>",
        *_kv_read(f"KV_{b.presence}", msg_get=False, watch=True),
        *_kv_read(f"KV_{b.channels}", msg_get=True, watch=True),
        *_kv_read(f"KV_{b.membership}", msg_get=True, watch=True),
        *_kv_read(f"KV_{b.delivery}", msg_get=True, watch=False),
        "$JS.FC.>",
    ]
    return Permissions(pub_allow=tuple(pub), sub_allow=(kind_pattern(s, "chat"), f"{inbox_prefix(conn_id)}.>"))


def admin_permissions(space: str, conn_id: str) -> Permissions:
    """Observer plus live DMs and anycast (three taps, never ``cotal.<s>.>``) and DM history."""
    s = space_token(space)
    base = observer_permissions(s, conn_id)
    dm = dm_stream(s)
    pub = list(base.pub_allow) + [
        f"$JS.API.STREAM.INFO.{dm}", f"$JS.API.CONSUMER.CREATE.{dm}", f"$JS.API.CONSUMER.CREATE.{dm}.>",
        f"$JS.API.CONSUMER.INFO.{dm}.>", f"$JS.API.CONSUMER.MSG.NEXT.{dm}.>",
        f"$JS.API.CONSUMER.DELETE.{dm}.>", f"$JS.ACK.{dm}.>",
    ]
    sub = (*(kind_pattern(s, k) for k in ("chat", "inst", "svc")), f"{inbox_prefix(conn_id)}.>")
    return Permissions(pub_allow=tuple(pub), sub_allow=sub)


READ_COMMANDS = ("describe", "status", "ps", "inspect", "goal-result", "spawn")
ANY_MODE_COMMANDS = ("attach", "despawn", "input")
RUN_COMMANDS = ("run-ps", "run-status", "run-start", "run-resume")  # untargeted (contract rev 21)
SELF_MODE_COMMANDS = ("run-answer",)  # targeted, modes ["self"] since rev 16


def control_caller_permissions(space: str, caller: tuple[str, str, str], conn_id: str, *,
                               endpoint: str = MANAGER, issued: tuple[str, str] | None = None) -> Permissions:
    """The operator instrument a control command rides (the reference's ``control-caller``):
    its own caller triple's request rows on the manager endpoint — the reads and ``spawn`` on
    the class, scatter and instance rails, ``attach``/``despawn``/``input`` in ``any`` mode —
    its reply rail and goal-progress rail, the contract fetch, and read-only access to the two
    registries that tell it which managers exist (service records, manager leases). The nonce
    is the only wildcard in a request row; nothing here can post, read a feed or write (the
    liveness ask is an empty request on its own principal's ``live`` subject).

    ``issued`` = ``(generation, acceptedToken)``: the instrument is an issuance (§13.15). Its
    request and reply rows are then the ``ep.v1`` rows pinned to that generation, and only those
    (an issued credential holds no legacy-rail row), plus the per-key Direct-Get of its own
    accepted row, which is how the connection learns the generation back."""
    s = space_token(space)
    c = Caller(*caller)
    b = bucket_names(s)
    gen = issued[0] if issued is not None else None
    pub: list[str] = []
    for cmd in READ_COMMANDS:
        pub += [request_pattern(s, endpoint, cmd, c, route=r, generation=gen) for r in ("one", "all", "inst")]
    for cmd in ANY_MODE_COMMANDS:
        pub += [request_pattern(s, endpoint, cmd, c, route=r, mode="any", generation=gen) for r in ("one", "inst")]
    for cmd in RUN_COMMANDS:
        pub += [request_pattern(s, endpoint, cmd, c, route=r, generation=gen) for r in ("one", "inst")]
    for cmd in SELF_MODE_COMMANDS:
        pub += [request_pattern(s, endpoint, cmd, c, route=r, mode="self", generation=gen) for r in ("one", "inst")]
    if issued is not None:
        pub.append(direct_get_subject(s, issued[1]))
    pub += [f"$JS.API.DIRECT.GET.{epc_stream(s)}.{rail_pattern(s, 'epc')}", "$JS.FC.>"]
    for bucket in (b.records, b.manager):
        st = f"KV_{bucket}"
        pub += [f"$JS.API.STREAM.INFO.{st}", f"$JS.API.STREAM.MSG.GET.{st}",
                f"$JS.API.DIRECT.GET.{st}.>", f"$JS.API.CONSUMER.CREATE.{st}",
                f"$JS.API.CONSUMER.CREATE.{st}.>", f"$JS.API.CONSUMER.INFO.{st}.>",
                f"$JS.API.CONSUMER.DELETE.{st}.>"]
    # §6.1: ask the plane-liveness probe as its own principal, and read the delivery lease (as an
    # observer may) that the delivery verdict weighs (cotal status --components)
    ask, hear = ask_grants(s, c.owner, c.actor)
    pub += [ask, *_kv_read(f"KV_{b.delivery}", msg_get=True, watch=False)]
    sub = (f"{inbox_prefix(conn_id)}.>", reply_pattern(s, c, generation=gen), goal_pattern(s, endpoint, c), hear)
    return Permissions(pub_allow=tuple(pub), sub_allow=sub)


def accepted_store_rows(space: str) -> list[str]:
    """What the issuer needs on the accepted-row store: create-or-verify it, and publish rows."""
    st = f"KV_{accepted_bucket(space)}"
    return [f"$JS.API.STREAM.INFO.{st}", f"$JS.API.STREAM.CREATE.{st}",
            f"$KV.{accepted_bucket(space)}.accepted.v1.*"]


def issuer_permissions(space: str, conn_id: str) -> Permissions:
    """The one-shot ``issuer`` (the reference's profile of that name, accepted-row half): the
    signer-holding client that mints an issued instrument writes that instrument's accepted row
    with it before handing the instrument over. No request, feed or read row."""
    return Permissions(pub_allow=tuple(accepted_store_rows(space)), sub_allow=(f"{inbox_prefix(conn_id)}.>",))


def _eps(space: str, endpoint: str, session_id: str, epoch: int, direction: str) -> str:
    try:
        return eps_subject(space, endpoint, session_id, epoch, direction)
    except SubjectError:
        raise AuthError("a session grant names malformed rails") from None


def session_caller_permissions(space: str, session: tuple[str, str, int], conn_id: str) -> Permissions:
    """Rails only, for one §13.6 session: publish its ``in``, subscribe its ``out`` + own inbox."""
    endpoint, sid, epoch = session
    return Permissions(pub_allow=(_eps(space, endpoint, sid, epoch, "in"),),
                       sub_allow=(_eps(space, endpoint, sid, epoch, "out"), f"{inbox_prefix(conn_id)}.>"))


def session_serving_permissions(space: str, session: tuple[str, str, int], conn_id: str) -> Permissions:
    """The serving mirror of :func:`session_caller_permissions`: sub ``in``, pub ``out``."""
    endpoint, sid, epoch = session
    return Permissions(pub_allow=(_eps(space, endpoint, sid, epoch, "out"),),
                       sub_allow=(_eps(space, endpoint, sid, epoch, "in"), f"{inbox_prefix(conn_id)}.>"))


def purger_permissions(space: str, conn_id: str) -> Permissions:
    """The history purge (the reference's ``purger``: ``cotal history clear``, one-shot): purge
    the CHAT and DM streams and nothing else. It never reads a body and never posts."""
    s = space_token(space)
    return Permissions(pub_allow=("$JS.API.INFO", f"$JS.API.STREAM.PURGE.{chat_stream(s)}",
                                  f"$JS.API.STREAM.PURGE.{dm_stream(s)}"),
                       sub_allow=(f"{inbox_prefix(conn_id)}.>",))


def channel_purger_permissions(space: str, conn_id: str) -> Permissions:
    """Delete one channel (the reference's ``channel-purger``, the console's and dashboard's
    channel delete): read and delete channel-registry keys, and purge the CHAT stream (the
    purge request carries the channel's filter). No other bucket, no post, no body read."""
    s = space_token(space)
    b = bucket_names(s)
    chkv = f"KV_{b.channels}"
    pub = ("$JS.API.INFO", f"$KV.{b.channels}.>", f"$JS.API.STREAM.INFO.{chkv}",
           f"$JS.API.STREAM.MSG.GET.{chkv}", f"$JS.API.DIRECT.GET.{chkv}.>",
           f"$JS.API.STREAM.PURGE.{chat_stream(s)}")
    return Permissions(pub_allow=pub, sub_allow=(f"{inbox_prefix(conn_id)}.>",))


def operator_permissions(space: str, owner: str, actor: str, conn_id: str) -> Permissions:
    """The human participant (the reference's ``operator``: ``cotal send``): post, DM and
    anycast as itself only, put its own presence key, watch the roster and read the channel
    registry. No feed, no history, no stream or registry write; replies land on its inbox."""
    s = space_token(space)
    b = bucket_names(s)
    pid = f"{owner}.{actor}"
    pres, chkv = f"KV_{b.presence}", f"KV_{b.channels}"
    pub = (
        sender_pattern(s, "chat", pid), sender_pattern(s, "inst", pid), sender_pattern(s, "svc", pid),
        presence_subject(s, pid),
        "$JS.API.INFO",
        f"$JS.API.STREAM.INFO.{pres}", f"$JS.API.CONSUMER.CREATE.{pres}.>", f"$JS.API.CONSUMER.INFO.{pres}.>",
        f"$JS.API.STREAM.INFO.{chkv}", f"$JS.API.STREAM.MSG.GET.{chkv}", f"$JS.API.DIRECT.GET.{chkv}.>",
        f"$JS.API.CONSUMER.CREATE.{chkv}.>", f"$JS.API.CONSUMER.INFO.{chkv}.>",
        "$JS.FC.>",
    )
    return Permissions(pub_allow=pub, sub_allow=(f"{inbox_prefix(conn_id)}.>",))


# ---- credentials ------------------------------------------------------------------------------


class KeyHolder:
    """What anything holding a user nkey as ``key`` derives from it: the public key (the
    connection id) and the ``_INBOX_<connId>`` prefix its scoped credential may subscribe."""

    key: NKey

    @property
    def public(self) -> str:
        return self.key.public

    @property
    def inbox_prefix(self) -> str:
        return inbox_prefix(self.key.public)


@dataclass(frozen=True, repr=False)
class Credential(KeyHolder):
    """A user JWT and its nkey, held in memory. ``caller`` is the ep caller triple a control
    credential is pinned to (``None`` for other profiles). ``remint`` (a long-lived participant)
    re-signs the same nkey's JWT: a (re)connect inside the last quarter of the lifetime, or
    after the broker ended the connection at expiry, authenticates with a fresh one, so the
    principal (``local.<nkey>``) never changes."""

    profile: str
    jwt: str
    key: NKey
    expires_at: int | None = None
    caller: tuple[str, str, str] | None = None
    remint: Callable[[], tuple[str, int]] | None = field(default=None, compare=False)
    ttl_s: int | None = None
    _live: list = field(default_factory=list, compare=False)
    # an issued instrument (§13.15): the reference its issuer records in its accepted row, under
    # the token derived from this credential's own connect name (its nkey, the inbox's connId)
    issued: IssuedRef | None = None

    @property
    def renews(self) -> bool:
        return self.remint is not None

    def current_jwt(self) -> str:
        """The JWT to authenticate with now (re-minted when near or past expiry, if it can be)."""
        jwt, exp = self._live[-1] if self._live else (self.jwt, self.expires_at)
        if self.remint is not None and exp is not None:
            margin = (self.ttl_s or CONTROL_TTL_S) / 4  # the reference renews at 75% of the lifetime
            if exp - time.time() < margin:
                jwt, exp = self.remint()
                self._live[:] = [(jwt, exp)]
        return jwt

    def creds_text(self) -> str:
        return format_creds(self.current_jwt(), self.key.seed)

    def nats_options(self) -> dict:
        """nats-py options that authenticate with this credential, no file involved (nats-py
        asks for the JWT on every connect and reconnect)."""
        def sign(nonce: str) -> bytes:
            return base64.b64encode(self.key.sign(nonce.encode()))

        return {"user_jwt_cb": lambda: self.current_jwt().encode(), "signature_cb": sign,
                "inbox_prefix": self.inbox_prefix}

    def __repr__(self) -> str:
        return f"Credential({self.profile}, {self.public})"


# ---- the root seed ---------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class RootSeed:
    """What minting needs from a mesh root: the space, its data account and the account's
    signing key (the reference's stripped ``SpaceAuth``)."""

    space: str
    account: str
    signing: NKey
    root: str = ""

    def __repr__(self) -> str:
        return f"RootSeed({self.space}, {self.account})"

    def mint(self, profile: str, permissions: Permissions | None, *, key: NKey | None = None,
             expires_at: int | None = None, caller: tuple[str, str, str] | None = None) -> Credential:
        """A user of this account (the static principal ``local.<its nkey>``, stamped in its tags)."""
        k = key or new_nkey("user")
        token = user_jwt(k.public, self.signing, account=self.account, name=profile,
                         permissions=permissions, expires_at=expires_at, tags=principal_tags(OWNER, k.public))
        return Credential(profile, token, k, expires_at, caller)


def auth_file(root: str | os.PathLike) -> Path:
    return Path(root) / ".cotal" / "auth" / AUTH_FILE


def load_root_seed(root: str | os.PathLike, space: str | None = None) -> RootSeed:
    """The trust material of the mesh recorded at ``root``; one sentence when it is missing,
    unreadable or for another space (never a fall back to an open connect)."""
    path = auth_file(root)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise AuthError(f"the static-auth mesh's root {root} holds no seed ({path} is missing); "
                        "refusing to connect without credentials") from None
    except (OSError, ValueError):
        raise AuthError(f"the seed file {path} cannot be read as the mesh's trust material") from None
    acct = doc.get("account") if isinstance(doc, dict) else None
    if not isinstance(acct, dict) or not isinstance(acct.get("pub"), str) or not acct.get("signingSeed"):
        raise AuthError(f"the seed file {path} carries no account signing seed")
    got = doc.get("space")
    if space is not None and isinstance(got, str) and space_token(got) != space_token(space):
        raise AuthError(f"the seed at {root} is for space {got!r}, not {space!r}")
    signing = nkey_from_seed(acct["signingSeed"])
    if signing.kind != "account":
        raise AuthError(f"the seed file {path} holds no account signing key")
    return RootSeed(str(got or space or ""), acct["pub"], signing, str(root))


def mint_control(seed: RootSeed, space: str, *, ttl_s: int = CONTROL_TTL_S, issued: bool = False) -> Credential:
    """A one-shot control instrument bound to a fresh caller: ``local.<nkey>`` + a lifecycle uid.

    ``issued``: the instrument is an issuance (§13.15; the reference issues its static ``DEV_OWNER``
    control instruments): a fresh generation chosen here, by the signer holder, its rows on
    ``ep.v1`` only, and ``Credential.issued`` naming the reference whose accepted row the
    issuer must write (:func:`meshview.link.issuance.issue_instrument`) before the instrument connects."""
    key = new_nkey("user")
    caller = (OWNER, key.public, mint_lifecycle_uid())
    ref = IssuedRef(space_token(space), *caller, new_generation()) if issued else None
    perms = control_caller_permissions(space, caller, key.public,
                                       issued=(ref.generation, accepted_token(key.public)) if ref else None)
    cred = seed.mint("control-caller-admin", perms, key=key, expires_at=int(time.time()) + ttl_s, caller=caller)
    return dataclasses.replace(cred, issued=ref) if ref else cred


def mint_issuer(seed: RootSeed, space: str, *, ttl_s: int = 60) -> Credential:
    """The one-shot issuer connection that writes an issued instrument's accepted row."""
    key = new_nkey("user")
    return seed.mint("issuer", issuer_permissions(space, key.public), key=key, expires_at=int(time.time()) + ttl_s)


def mint_session_caller(seed: RootSeed, space: str, session: tuple[str, str, int], grant_exp_ms: int) -> Credential:
    """The rails-only credential of one session, expiring with its grant (≤ 24 h)."""
    exp = min(int(grant_exp_ms // 1000), int(time.time()) + SESSION_TTL_CAP_S)
    key = new_nkey("user")
    return seed.mint("session-caller", session_caller_permissions(space, session, key.public), key=key,
                     expires_at=exp)


def mint_session_serving(seed: RootSeed, space: str, session: tuple[str, str, int], grant_exp_ms: int) -> Credential:
    exp = min(int(grant_exp_ms // 1000), int(time.time()) + SESSION_TTL_CAP_S)
    key = new_nkey("user")
    return seed.mint("session-serving", session_serving_permissions(space, session, key.public), key=key,
                     expires_at=exp)


def mint_purger(seed: RootSeed, space: str, *, ttl_s: int = CONTROL_TTL_S) -> Credential:
    """The one-shot history purge (``purge``), as the reference's ``cotal history clear`` mints it."""
    key = new_nkey("user")
    return seed.mint("purger", purger_permissions(space, key.public), key=key,
                     expires_at=int(time.time()) + ttl_s)


def mint_channel_purger(seed: RootSeed, space: str, *, ttl_s: int = CONTROL_TTL_S) -> Credential:
    """The one-shot channel delete (``delchan``). The reference gives this profile no default
    expiry because its dashboard holds it standing; held here for one delete, it expires with
    the other one-shot instruments."""
    key = new_nkey("user")
    return seed.mint("channel-purger", channel_purger_permissions(space, key.public), key=key,
                     expires_at=int(time.time()) + ttl_s)


def mint_operator(seed: RootSeed, space: str, *, ttl_s: int = CONTROL_TTL_S, renew: bool = False) -> Credential:
    """The human participant (``send``, ``chat``, the console's sends): principal
    ``local.<its nkey>``, the reference's one-shot ``operator`` profile. ``renew``: a participant
    that stays connected re-signs the same nkey before each (re)connect near expiry."""
    key = new_nkey("user")
    perms = operator_permissions(space, OWNER, key.public, key.public)
    cred = seed.mint("operator", perms, key=key, expires_at=int(time.time()) + ttl_s)
    if not renew:
        return cred

    def remint() -> tuple[str, int]:
        exp = int(time.time()) + ttl_s
        return seed.mint("operator", perms, key=key, expires_at=exp).jwt, exp

    return dataclasses.replace(cred, remint=remint, ttl_s=ttl_s)


def mint_view(seed: RootSeed, space: str, view: str = "admin") -> Credential:
    """The console's read credential (``admin``: DMs visible; ``observer``: channels only)."""
    key = new_nkey("user")
    perms = admin_permissions(space, key.public) if view == "admin" else observer_permissions(space, key.public)
    return seed.mint(view, perms, key=key)


# ---- user auth (``--user-auth`` meshes) ----------------------------------------------------


def user_nonce() -> str:
    """The connection name a user-mode client picks, ``ibx<uuid hex>``: the callout scopes the
    inbox ``_INBOX_<nonce>`` from it, since the client cannot know its nkey before connecting."""
    return "ibx" + uuid.uuid4().hex


def bearer_principal(bearer: str) -> tuple[str, str, str]:
    """(owner, actor, lifecycleUid) a bearer is bound to (``sub``, ``act.actor``,
    ``act.lifecycleUid``), read without verification: the broker's callout verifies."""
    claims = jwt_claims(bearer)
    act = claims.get("act")
    if not isinstance(act, dict):
        act = {}
    owner, actor, uid = claims.get("sub"), act.get("actor"), act.get("lifecycleUid")
    if not (isinstance(owner, str) and isinstance(actor, str) and isinstance(uid, str)
            and owner and actor and uid):
        raise AuthError("the bearer names no principal (sub, act.actor, act.lifecycleUid)")
    return owner, actor, uid
