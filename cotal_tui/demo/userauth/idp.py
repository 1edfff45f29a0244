"""The IdP stand-in and the exchange's check of its tokens.

The reference trusts one external IdP (Better Auth in its smokes) that publishes an Ed25519 JWKS
and mints ``iss``/``aud``/``sub``/``exp`` JWTs; the exchange verifies them offline against the
pinned key, issuer and audience (``implementations/auth/src/idp.ts`` ``verifyIdpToken``). The demo
and the tests need no login flow: :class:`IdentityProvider` signs a session proof for a named user
directly. The owner a user lands as is derived from ``[issuer, sub]`` with the space's secret
(``derive.ts``), so the ledger row granted to ``u_…`` matches what the exchange derives.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field

from cotal_tui.demo.userauth.jws import JwsError, SigningKey, verify
from cotal_tui.errors import CotalError

DERIVATION_CONTEXT = "cotal-owner-v1"
_B32 = "abcdefghijklmnopqrstuvwxyz234567"
CLOCK_TOLERANCE_S = 5


class IdpTokenError(CotalError, ValueError):
    """An IdP token the exchange refuses; the message is the reference's sentence."""


def _base32_lower(data: bytes) -> str:
    bits = acc = 0
    out = []
    for b in data:
        acc = (acc << 8) | b
        bits += 8
        while bits >= 5:
            out.append(_B32[(acc >> (bits - 5)) & 31])
            bits -= 5
    if bits:
        out.append(_B32[(acc << (5 - bits)) & 31])
    return "".join(out)


def derive_owner(space_secret: bytes, idp_issuer: str, sub: str) -> str:
    """``u_`` + 26 base32 of HMAC-SHA256(secret, ``cotal-owner-v1:`` + JSON [issuer, sub])[:16]."""
    if len(space_secret) < 32:
        raise ValueError("the owner-derivation secret must be at least 32 bytes")
    if not idp_issuer or not sub:
        raise ValueError("an IdP issuer and subject are required to derive an owner")
    encoded = json.dumps([idp_issuer, sub], separators=(",", ":"), ensure_ascii=False)
    mac = hmac.new(space_secret, f"{DERIVATION_CONTEXT}:{encoded}".encode(), hashlib.sha256).digest()
    return "u_" + _base32_lower(mac[:16])


@dataclass(repr=False)
class IdentityProvider:
    """One IdP: its pinned issuer and audience, and the Ed25519 key its tokens are signed with."""

    issuer: str = "https://idp.cotal.invalid"
    audience: str = "cotal-cli"
    key: SigningKey = field(default_factory=SigningKey)

    def __repr__(self) -> str:
        return f"IdentityProvider({self.issuer}, kid={self.key.kid})"

    def token(self, sub: str, *, ttl_s: int = 3600, now: float | None = None, **extra) -> str:
        """A session proof for ``sub`` (``extra`` overrides claims, for the refusal tests)."""
        t = int(now if now is not None else time.time())
        claims = {"iss": self.issuer, "aud": self.audience, "sub": sub, "iat": t, "exp": t + ttl_s,
                  "jti": secrets.token_hex(8), **extra}
        return self.key.sign({k: v for k, v in claims.items() if v is not None})

    def jwks(self) -> dict:
        return {"keys": [self.key.jwk()]}


def verify_idp_token(token: str, idp: IdentityProvider, *, now: float | None = None) -> tuple[str, int]:
    """The token's ``(sub, exp)`` once it verifies against the pinned key, issuer and audience."""
    t = now if now is not None else time.time()
    try:
        _, claims = verify(token, {idp.key.kid: idp.key.verify_key}, what="idp token")
    except JwsError as e:
        raise IdpTokenError(str(e)) from None
    if claims.get("iss") != idp.issuer:
        raise IdpTokenError('idp token: unexpected "iss" claim value')
    aud = claims.get("aud")
    if aud != idp.audience and not (isinstance(aud, list) and aud == [idp.audience]):
        raise IdpTokenError("idp token: aud must be exactly the configured audience - a multi-audience "
                            "session proof is rejected")
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, (int, float)):
        raise IdpTokenError("idp token: exp is required - an IdP session proof must expire")
    if exp <= t - CLOCK_TOLERANCE_S:
        raise IdpTokenError('idp token: "exp" claim timestamp check failed')
    if not isinstance(iat, (int, float)):
        raise IdpTokenError("idp token: iat is required")
    if iat > t + CLOCK_TOLERANCE_S:
        raise IdpTokenError("idp token: iat is in the future")
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub:
        raise IdpTokenError("idp token: sub must be a non-empty string user id - no coercion at a trust boundary")
    return sub, int(exp)
