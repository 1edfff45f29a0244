"""Mint a NATS operator-mode trust chain for a secured demo/test space, without ``nsc``.

A Cotal space under static auth is one NATS account; every client is a user in it, and the
broker trusts the chain operator → account (→ account signing key) → user (wire.md §9, §10).
This module builds that chain from fresh nkeys, writes ``.creds`` files in the standard
decorated format with mode 0600, and renders the ``nats-server`` config lines
(``operator``, ``system_account``, ``resolver: MEMORY``, ``resolver_preload``).

It also holds the permission profiles a read-only console meets in the field — ``observer``
and ``admin`` (wire.md §9 / SPEC App. B) and a minimal self-scoped ``agent`` — so that tests
prove the console against the same broker-enforced boundaries a real deployment has.

JWT format (nats-io/jwt v2): ``b64url(header).b64url(claims).b64url(ed25519 signature)``,
header ``{"typ":"JWT","alg":"ed25519-nkey"}``, signature over the first two parts, ``jti`` =
base32 (no padding) of the SHA-256 of the claims serialized without ``jti``.

Secrets (seeds) only ever leave this module inside a creds file or the in-memory
:class:`NKey`; nothing here prints or logs them, and ``repr`` of a key shows only its public
half.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import nkeys

JWT_HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}

_PREFIX = {
    "operator": nkeys.PREFIX_BYTE_OPERATOR,
    "account": nkeys.PREFIX_BYTE_ACCOUNT,
    "user": nkeys.PREFIX_BYTE_USER,
}

UNLIMITED = -1


# -- keys -----------------------------------------------------------------------------------


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

    def __repr__(self) -> str:  # dataclass repr already hides _seed; be explicit anyway
        return f"NKey({self.kind}, {self.public})"


def new_nkey(kind: str) -> NKey:
    """A fresh operator/account/user nkey from 32 CSPRNG bytes."""
    if kind not in _PREFIX:
        raise ValueError(f"unknown nkey kind {kind!r}")
    seed = nkeys.encode_seed(os.urandom(32), _PREFIX[kind])
    kp = nkeys.from_seed(seed)
    return NKey(kind, kp.public_key.decode(), seed)


def nkey_from_seed(seed: bytes | str) -> NKey:
    if isinstance(seed, str):
        seed = seed.encode()
    kp = nkeys.from_seed(seed)
    public = kp.public_key.decode()
    kind = {"O": "operator", "A": "account", "U": "user"}.get(public[0], "unknown")
    return NKey(kind, public, seed)


# -- JWT encode / decode --------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64url_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=False).encode()


def claims_id(claims: dict) -> str:
    """``jti``: base32 (unpadded) SHA-256 of the claims serialized without ``jti``."""
    body = {k: v for k, v in claims.items() if k != "jti"}
    return base64.b32encode(hashlib.sha256(_json(body)).digest()).rstrip(b"=").decode()


def encode_jwt(claims: dict, signer: NKey) -> str:
    """Sign ``claims`` (``iss`` is forced to the signer's public key, ``jti`` recomputed)."""
    c = dict(claims)
    c.pop("jti", None)
    c["iss"] = signer.public
    c.setdefault("iat", int(time.time()))
    c = {"jti": claims_id(c), **c}
    head = _b64url(_json(JWT_HEADER)) + "." + _b64url(_json(c))
    return head + "." + _b64url(signer.sign(head.encode()))


def decode_jwt(token: str, *, verify: bool = True) -> dict:
    """Claims of ``token``; with ``verify`` the ed25519 signature is checked against ``iss``."""
    try:
        h, c, s = token.split(".")
        header = json.loads(_b64url_decode(h))
        claims = json.loads(_b64url_decode(c))
    except (ValueError, json.JSONDecodeError) as e:
        raise ValueError("not a NATS JWT") from e
    if header.get("alg") not in ("ed25519-nkey", "ed25519"):
        raise ValueError(f"unsupported JWT alg {header.get('alg')!r}")
    if verify:
        import nacl.exceptions
        import nacl.signing

        raw = base64.b32decode(claims["iss"] + "=" * (-len(claims["iss"]) % 8))
        vk = nacl.signing.VerifyKey(raw[1:-2])
        try:
            vk.verify(f"{h}.{c}".encode(), _b64url_decode(s))
        except nacl.exceptions.BadSignatureError as e:
            raise ValueError("JWT signature does not verify") from e
    return claims


# -- claims ---------------------------------------------------------------------------------


def operator_jwt(op: NKey, *, name: str, system_account: str,
                 signing_keys: list[str] | None = None) -> str:
    nats: dict = {"type": "operator", "version": 2, "system_account": system_account}
    if signing_keys:
        nats["signing_keys"] = list(signing_keys)
    return encode_jwt({"name": name, "sub": op.public, "nats": nats}, op)


def account_limits(*, jetstream: bool) -> dict:
    lim = {
        "subs": UNLIMITED, "data": UNLIMITED, "payload": UNLIMITED, "imports": UNLIMITED,
        "exports": UNLIMITED, "wildcards": True, "conn": UNLIMITED, "leaf": UNLIMITED,
    }
    if jetstream:  # JetStream is enabled for an account iff a storage limit is non-zero
        lim.update({"mem_storage": UNLIMITED, "disk_storage": UNLIMITED,
                    "streams": UNLIMITED, "consumer": UNLIMITED})
    return lim


def account_jwt(acct: NKey, operator: NKey, *, name: str, jetstream: bool = True,
                signing_keys: list[str] | None = None,
                revocations: dict[str, int] | None = None) -> str:
    nats: dict = {
        "type": "account", "version": 2,
        "limits": account_limits(jetstream=jetstream),
        "default_permissions": {"pub": {}, "sub": {}},
    }
    if signing_keys:
        nats["signing_keys"] = list(signing_keys)
    if revocations:
        nats["revocations"] = dict(revocations)
    return encode_jwt({"name": name, "sub": acct.public, "nats": nats}, operator)


@dataclass(frozen=True)
class Permissions:
    """A NATS user permission set: default-deny allow lists plus optional denies."""

    pub_allow: tuple[str, ...] = ()
    pub_deny: tuple[str, ...] = ()
    sub_allow: tuple[str, ...] = ()
    sub_deny: tuple[str, ...] = ()

    def claims(self) -> dict:
        def side(allow, deny):
            d: dict = {}
            if allow:
                d["allow"] = list(allow)
            if deny:
                d["deny"] = list(deny)
            return d

        return {"pub": side(self.pub_allow, self.pub_deny),
                "sub": side(self.sub_allow, self.sub_deny)}


def user_jwt(user_public: str, signer: NKey, *, account: str, name: str,
             permissions: Permissions | None, issued_at: int | None = None,
             expires_at: int | None = None, tags: list[str] | None = None) -> str:
    """A user JWT. ``signer`` is the account key or one of its signing keys; with a signing
    key ``issuer_account`` names the account. ``permissions=None`` means allow-all (infra)."""
    nats: dict = {"type": "user", "version": 2,
                  "subs": UNLIMITED, "data": UNLIMITED, "payload": UNLIMITED}
    if permissions is not None:
        nats.update(permissions.claims())
    if signer.public != account:
        nats["issuer_account"] = account
    if tags:
        nats["tags"] = list(tags)
    claims: dict = {"name": name, "sub": user_public, "nats": nats,
                    "iat": int(time.time()) if issued_at is None else issued_at}
    if expires_at is not None:
        claims["exp"] = expires_at
    return encode_jwt(claims, signer)


# -- creds files ----------------------------------------------------------------------------


def format_creds(jwt: str, seed: bytes | str) -> str:
    """The standard decorated creds text (what ``nsc``/``@nats-io/jwt`` ``fmtCreds`` emit)."""
    s = seed.decode() if isinstance(seed, bytes) else seed
    return (
        "-----BEGIN NATS USER JWT-----\n"
        f"{jwt}\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "NKEY Seed printed below can be used to sign and prove identity.\n"
        "NKEYs are sensitive and should be treated as secrets.\n\n"
        "-----BEGIN USER NKEY SEED-----\n"
        f"{s}\n"
        "------END USER NKEY SEED------\n\n"
        "*************************************************************\n"
    )


def write_creds(path: str | os.PathLike, jwt: str, seed: bytes | str, mode: int = 0o600) -> Path:
    """Write a creds file created with ``mode`` (0600 unless a test wants a loose one)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.exists():
        p.unlink()
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.write(fd, format_creds(jwt, seed).encode())
    finally:
        os.close(fd)
    os.chmod(p, mode)  # umask may have narrowed an intentionally loose mode
    return p


def read_creds_jwt(path: str | os.PathLike) -> str:
    """The JWT of a creds file (public half only)."""
    lines = Path(path).read_text().splitlines()
    for i, line in enumerate(lines):
        if "BEGIN NATS USER JWT" in line:
            return lines[i + 1].strip()
    raise ValueError(f"{path} has no NATS USER JWT block")


# -- permission profiles (wire.md §9, SPEC App. B) ------------------------------------------


def inbox_prefix(conn_id: str) -> str:
    """``_INBOX_<connId>`` (§10): the only reply inbox a scoped cred may subscribe."""
    return f"_INBOX_{conn_id}"


def _kv_read_rows(stream: str, *, msg_get: bool, watch: bool) -> list[str]:
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
    s = space
    chat = f"CHAT_{s}"
    pub = [
        "$JS.API.INFO",
        f"$JS.API.STREAM.INFO.{chat}",
        f"$JS.API.CONSUMER.CREATE.{chat}",  # bare form: multi-filter ephemeral history
        f"$JS.API.CONSUMER.CREATE.{chat}.>",
        f"$JS.API.CONSUMER.INFO.{chat}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{chat}.>",
        f"$JS.API.CONSUMER.DELETE.{chat}.>",
        f"$JS.ACK.{chat}.>",
        *_kv_read_rows(f"KV_cotal_presence_{s}", msg_get=False, watch=True),
        *_kv_read_rows(f"KV_cotal_channels_{s}", msg_get=True, watch=True),
        *_kv_read_rows(f"KV_cotal_membership_{s}", msg_get=True, watch=True),
        *_kv_read_rows(f"KV_cotal_delivery_{s}", msg_get=True, watch=False),
        "$JS.FC.>",
    ]
    sub = [f"cotal.{s}.chat.>", f"{inbox_prefix(conn_id)}.>"]
    return Permissions(pub_allow=tuple(pub), sub_allow=tuple(sub))


def admin_permissions(space: str, conn_id: str) -> Permissions:
    """Observer plus live DMs and anycast (three taps, never ``cotal.<s>.>``) and DM history."""
    base = observer_permissions(space, conn_id)
    dm = f"DM_{space}"
    pub = list(base.pub_allow) + [
        f"$JS.API.STREAM.INFO.{dm}",
        f"$JS.API.CONSUMER.CREATE.{dm}",
        f"$JS.API.CONSUMER.CREATE.{dm}.>",
        f"$JS.API.CONSUMER.INFO.{dm}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{dm}.>",
        f"$JS.API.CONSUMER.DELETE.{dm}.>",
        f"$JS.ACK.{dm}.>",
    ]
    sub = [f"cotal.{space}.chat.>", f"cotal.{space}.inst.>", f"cotal.{space}.svc.>",
           f"{inbox_prefix(conn_id)}.>"]
    return Permissions(pub_allow=tuple(pub), sub_allow=tuple(sub))


def agent_permissions(space: str, owner: str, actor: str, conn_id: str, *,
                      publish_channels: list[str], subscribe_channels: list[str]) -> Permissions:
    """A self-scoped agent: post/DM/anycast only as itself, put only its own presence key,
    watch the roster, read its declared channels. Create on DM/TASK explicitly denied."""
    s = space
    pres = f"KV_cotal_presence_{s}"
    pub = [
        *[f"cotal.{s}.chat.{owner}.{actor}.{ch}" for ch in publish_channels],
        f"cotal.{s}.inst.*.*.{owner}.{actor}",
        f"cotal.{s}.svc.*.{owner}.{actor}",
        f"$KV.cotal_presence_{s}.{owner}.{actor}",
        "$JS.API.INFO",
        f"$JS.API.STREAM.INFO.CHAT_{s}",
        f"$JS.API.STREAM.INFO.{pres}",
        f"$JS.API.STREAM.INFO.KV_cotal_channels_{s}",
        f"$JS.API.CONSUMER.CREATE.{pres}.>",
        f"$JS.API.CONSUMER.INFO.{pres}.>",
        f"$JS.API.CONSUMER.DELETE.{pres}.>",
        "$JS.FC.>",
    ]
    deny = [f"$JS.API.CONSUMER.CREATE.DM_{s}", f"$JS.API.CONSUMER.CREATE.DM_{s}.>",
            f"$JS.API.CONSUMER.DURABLE.CREATE.DM_{s}.>",
            f"$JS.API.CONSUMER.CREATE.TASK_{s}", f"$JS.API.CONSUMER.CREATE.TASK_{s}.>",
            f"$JS.API.CONSUMER.DURABLE.CREATE.TASK_{s}.>"]
    sub = [f"{inbox_prefix(conn_id)}.>",
           *[f"cotal.{s}.chat.*.*.{ch}" for ch in subscribe_channels]]
    return Permissions(pub_allow=tuple(pub), pub_deny=tuple(deny), sub_allow=tuple(sub))


# -- a whole secured space ------------------------------------------------------------------


@dataclass
class MintedUser:
    name: str
    key: NKey = field(repr=False)
    jwt: str = field(repr=False)
    creds: Path | None = None

    @property
    def public(self) -> str:
        return self.key.public

    @property
    def inbox_prefix(self) -> str:
        return inbox_prefix(self.key.public)


@dataclass
class AuthSpace:
    """Operator + system account + one data account (with a signing key) for ``space``.

    ``mint_user`` signs with the account signing key (as the reference does), so a leaked
    user cred never carries account authority. ``revoke`` adds an account revocation and
    re-renders the account JWT; call ``server_config()`` again and restart/reload to apply.
    """

    space: str
    operator_name: str = "cotal-test"
    operator: NKey = field(default_factory=lambda: new_nkey("operator"), repr=False)
    system: NKey = field(default_factory=lambda: new_nkey("account"), repr=False)
    account: NKey = field(default_factory=lambda: new_nkey("account"), repr=False)
    signing: NKey = field(default_factory=lambda: new_nkey("account"), repr=False)
    revocations: dict[str, int] = field(default_factory=dict)

    @property
    def operator_jwt(self) -> str:
        return operator_jwt(self.operator, name=self.operator_name,
                            system_account=self.system.public)

    @property
    def system_jwt(self) -> str:
        return account_jwt(self.system, self.operator, name="SYS", jetstream=False)

    @property
    def account_jwt(self) -> str:
        return account_jwt(self.account, self.operator, name=self.space, jetstream=True,
                           signing_keys=[self.signing.public], revocations=self.revocations)

    def mint_user(self, name: str, permissions: Permissions | None, *,
                  key: NKey | None = None, expires_at: int | None = None,
                  issued_at: int | None = None, tags: list[str] | None = None) -> MintedUser:
        k = key or new_nkey("user")
        token = user_jwt(k.public, self.signing, account=self.account.public, name=name,
                         permissions=permissions, issued_at=issued_at,
                         expires_at=expires_at, tags=tags)
        return MintedUser(name, k, token)

    def revoke(self, user: MintedUser) -> None:
        """Revoke every JWT for ``user`` issued at or before now (account ``revocations``)."""
        iat = decode_jwt(user.jwt, verify=False)["iat"]
        self.revocations[user.public] = max(int(time.time()), iat)

    def server_config(self) -> str:
        """Config lines for ``nats-server``: operator mode with a preloaded MEMORY resolver."""
        return "\n".join([
            f"operator: {self.operator_jwt}",
            f"system_account: {self.system.public}",
            "resolver: MEMORY",
            "resolver_preload: {",
            f"  {self.system.public}: {self.system_jwt}",
            f"  {self.account.public}: {self.account_jwt}",
            "}",
        ])
