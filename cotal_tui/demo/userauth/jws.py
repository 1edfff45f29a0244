"""Compact EdDSA JWS (RFC 8037: ``alg: EdDSA``, Ed25519), signing and verifying with PyNaCl.

Both tokens of the user-auth plane are this shape: the IdP stand-in's session proofs and the
exchange's Cotal bearers (``implementations/auth/src/token.ts``: EdDSA only, embedded key material
rejected). A JWKS entry is the RFC 8037 ``OKP``/``Ed25519`` form.
"""

from __future__ import annotations

import base64
import hashlib
import json

import nacl.exceptions
import nacl.signing

from cotal_tui.errors import CotalError

EMBEDDED_KEY_HEADERS = ("jku", "jwk", "x5u", "x5c")


class JwsError(CotalError, ValueError):
    """A token that is not a compact EdDSA JWS we can verify; the message names what is wrong."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class SigningKey:
    """An Ed25519 key with a stable ``kid`` (the RFC 7638 thumbprint of its public JWK)."""

    def __init__(self, key: nacl.signing.SigningKey | None = None) -> None:
        self._key = key or nacl.signing.SigningKey.generate()
        self.verify_key = self._key.verify_key
        self.kid = jwk_thumbprint(bytes(self.verify_key))

    def __repr__(self) -> str:
        return f"SigningKey(kid={self.kid})"

    def jwk(self) -> dict:
        return {"kty": "OKP", "crv": "Ed25519", "x": b64url(bytes(self.verify_key)), "kid": self.kid,
                "alg": "EdDSA", "use": "sig"}

    def sign(self, claims: dict, *, header: dict | None = None) -> str:
        h = {"alg": "EdDSA", "typ": "JWT", "kid": self.kid, **(header or {})}
        signing_input = f"{b64url(_json(h))}.{b64url(_json(claims))}".encode()
        return signing_input.decode() + "." + b64url(self._key.sign(signing_input).signature)


def _json(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def jwk_thumbprint(public: bytes) -> str:
    doc = {"crv": "Ed25519", "kty": "OKP", "x": b64url(public)}
    return b64url(hashlib.sha256(json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()).digest())


def verify(token: str, keys: dict[str, nacl.signing.VerifyKey], *, what: str) -> tuple[dict, dict]:
    """Header and claims of ``token``, verified against the pinned ``keys`` (kid -> key) only."""
    if not isinstance(token, str) or token.count(".") != 2:
        raise JwsError(f"{what}: not a compact JWS")
    h64, p64, s64 = token.split(".")
    try:
        header = json.loads(b64url_decode(h64))
        claims = json.loads(b64url_decode(p64))
        sig = b64url_decode(s64)
    except (ValueError, UnicodeDecodeError):
        raise JwsError(f"{what}: not a compact JWS") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise JwsError(f"{what}: header and claims must be objects")
    if any(k in header for k in EMBEDDED_KEY_HEADERS):
        raise JwsError(f"{what}: embedded key material (jku/jwk/x5u/x5c) is rejected - keys resolve only "
                       "via the pinned key set")
    if header.get("alg") != "EdDSA":
        raise JwsError(f"{what}: alg must be EdDSA (got {str(header.get('alg'))[:32]})")
    candidates = [keys[header["kid"]]] if isinstance(header.get("kid"), str) and header["kid"] in keys \
        else list(keys.values())
    for vk in candidates:
        try:
            vk.verify(f"{h64}.{p64}".encode(), sig)
            return header, claims
        except (nacl.exceptions.BadSignatureError, ValueError):
            continue
    raise JwsError(f"{what}: signature verification failed")
