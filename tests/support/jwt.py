"""Test-side helpers for secured meshes: the production minting lives in :mod:`meshview.auth`.

This module re-exports it (keys, JWTs, creds files, the observer/admin profiles, the trust
chain) and adds what only tests need: a self-scoped ``agent`` profile, revocations, and
:class:`MintedUser` records with creds files on disk.

Secrets (seeds) only ever leave here inside a creds file or an in-memory key; nothing prints
or logs them, and ``repr`` of a key shows only its public half.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from meshview.auth import (  # noqa: F401 - re-exported for the tests
    JWT_HEADER,
    UNLIMITED,
    KeyHolder,
    NKey,
    Permissions,
    SpaceTrust,
    account_jwt,
    account_limits,
    admin_permissions,
    claims_id,
    decode_jwt,
    encode_jwt,
    format_creds,
    inbox_prefix,
    new_nkey,
    nkey_from_seed,
    observer_permissions,
    operator_jwt,
    user_jwt,
    write_creds,
)


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
    """:class:`meshview.auth.SpaceTrust` plus user minting and revocation for tests.

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
