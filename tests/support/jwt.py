"""Test-side helpers for secured meshes: the production minting lives in :mod:`meshview.link.auth`,
the demo's trust chain in :mod:`cotal_tui.demo.trust`.

This module re-exports them (keys, JWTs, the observer/admin profiles, the trust chain) and adds
what only tests need: JWT signature checks, creds files on disk, a self-scoped ``agent``
profile, revocations, and :class:`MintedUser` records.

Secrets (seeds) only ever leave here inside a creds file or an in-memory key; nothing prints
or logs them, and ``repr`` of a key shows only its public half.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from cotal_tui.demo.trust import SpaceTrust, account_jwt, account_limits, operator_jwt  # noqa: F401
from meshview.link.auth import (  # noqa: F401 - re-exported for the tests
    JWT_HEADER,
    UNLIMITED,
    KeyHolder,
    NKey,
    Permissions,
    admin_permissions,
    claims_id,
    encode_jwt,
    format_creds,
    inbox_prefix,
    new_nkey,
    nkey_from_seed,
    observer_permissions,
    user_jwt,
)


def _b64url_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def decode_jwt(token: str, *, verify: bool = True) -> dict:
    """Claims of a NATS JWT; with ``verify`` the ed25519 signature is checked against ``iss``."""
    try:
        h, c, s = token.split(".")
        header = json.loads(_b64url_decode(h))
        claims = json.loads(_b64url_decode(c))
    except ValueError as e:
        raise ValueError("not a NATS JWT") from e
    if header.get("alg") not in ("ed25519-nkey", "ed25519"):
        raise ValueError(f"unsupported JWT alg {header.get('alg')!r}")
    if verify:
        import nacl.exceptions
        import nacl.signing

        raw = base64.b32decode(claims["iss"] + "=" * (-len(claims["iss"]) % 8))
        try:
            nacl.signing.VerifyKey(raw[1:-2]).verify(f"{h}.{c}".encode(), _b64url_decode(s))
        except nacl.exceptions.BadSignatureError as e:
            raise ValueError("JWT signature does not verify") from e
    return claims


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
    os.chmod(p, mode)
    return p


def read_creds_jwt(path) -> str:
    """The JWT of a creds file (public half only)."""
    lines = Path(path).read_text().splitlines()
    for i, line in enumerate(lines):
        if "BEGIN NATS USER JWT" in line:
            return lines[i + 1].strip()
    raise ValueError(f"{path} has no NATS USER JWT block")


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
class MintedUser(KeyHolder):
    """A minted user with its creds file; ``public`` and ``inbox_prefix`` as a credential's."""

    name: str
    key: NKey = field(repr=False)
    jwt: str = field(repr=False)
    creds: Path | None = None


@dataclass(repr=False)
class AuthSpace(SpaceTrust):
    """:class:`meshview.link.auth.SpaceTrust` plus user minting and revocation for tests.

    ``mint_user`` signs with the account signing key (as the reference does), so a leaked user
    cred never carries account authority. ``revoke`` adds an account revocation; render
    ``server_config()`` again and restart/reload to apply it."""

    operator_name: str = "cotal-test"

    def mint_user(self, name: str, permissions: Permissions | None, *, key: NKey | None = None,
                  expires_at: int | None = None, issued_at: int | None = None) -> MintedUser:
        k = key or new_nkey("user")
        token = user_jwt(k.public, self.signing, account=self.account.public, name=name,
                         permissions=permissions, issued_at=issued_at, expires_at=expires_at)
        return MintedUser(name, k, token)

    def revoke(self, user: MintedUser) -> None:
        """Revoke every JWT for ``user`` issued at or before now (account ``revocations``)."""
        iat = decode_jwt(user.jwt, verify=False)["iat"]
        self.revocations[user.public] = max(int(time.time()), iat)
