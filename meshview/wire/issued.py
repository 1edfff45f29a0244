"""Issued caller authority (SPEC v0.5 §13.15): the accepted row a connection finds for itself.

An issuer (the auth callout on a user mesh, the signer-holding host for static control
instruments) that issues a connection a caller reference writes one create-only row to the
``cotal_accepted_<space>`` KV, keyed by a token the *client* derives from its own connect name
(its inbox nonce ``connId``). The row names ``{space, owner, actor, uid, generation}``; the
generation then rides every ``ep.v1`` subject of that connection. The token is never taken from
a request body, and the generation is an identifier, not a bearer secret.

Everything here is pure: the derivation, the bucket and key names, the row's closed shape.
Reading the row over a connection is :func:`meshview.wire.issued.direct_get_subject` plus a
caller's own request (``attach/control/endpoint.py``); writing it is the issuer's (``cotal_tui/demo``).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass

from meshview.errors import MeshviewError
from meshview.wire.names import space_token

ACCEPTED_DOMAIN = b"cotal.accepted.v1\x00"
ROW_VERSION = 1
_GENERATION = re.compile(r"^[0-9a-f]{32}$")
_TOKEN = re.compile(r"^[0-9a-f]{32}$")


class IssuedRowError(MeshviewError, ValueError):
    """An accepted row that is not the closed §13.15 shape, or names another space or caller."""


def accepted_token(conn_id: str) -> str:
    """The first 32 hex characters of SHA-256(``"cotal.accepted.v1\\0"`` + connId)."""
    if not isinstance(conn_id, str) or not conn_id:
        raise IssuedRowError("a connection id (the connect name) is required")
    return hashlib.sha256(ACCEPTED_DOMAIN + conn_id.encode("utf-8")).hexdigest()[:32]


def accepted_bucket(space: str) -> str:
    return f"cotal_accepted_{space_token(space)}"


def accepted_key(token: str) -> str:
    if not _TOKEN.match(token or ""):
        raise IssuedRowError(f"{token!r} is not an accepted-row token (32 lowercase hex)")
    return f"accepted.v1.{token}"


def direct_get_subject(space: str, token: str) -> str:
    """The JetStream direct-get subject of one accepted row (last value of its key)."""
    b = accepted_bucket(space)
    return f"$JS.API.DIRECT.GET.KV_{b}.$KV.{b}.{accepted_key(token)}"


def new_generation() -> str:
    """32 lowercase hex, 128 bits from the CSPRNG; the issuer's, never reused."""
    return secrets.token_hex(16)


def is_generation(v: object) -> bool:
    return isinstance(v, str) and bool(_GENERATION.match(v))


@dataclass(frozen=True)
class IssuedRef:
    """``{space, owner, actor, uid, generation}``: who the connection acts as, and its generation."""

    space: str
    owner: str
    actor: str
    uid: str
    generation: str

    def as_json(self) -> dict:
        return {"space": self.space, "owner": self.owner, "actor": self.actor, "uid": self.uid,
                "generation": self.generation}


def encode_row(ref: IssuedRef) -> bytes:
    return json.dumps({"version": ROW_VERSION, "ref": ref.as_json()}, separators=(",", ":")).encode()


def parse_row(data: bytes, *, space: str, triple: tuple[str, str, str] | None = None) -> IssuedRef:
    """The closed row, checked: version 1, no other field, this space, and (when given) the
    caller's own ``(owner, actor, uid)``. Raises :class:`IssuedRowError` naming what is wrong."""
    try:
        row = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise IssuedRowError("the accepted row is not JSON") from None
    if not isinstance(row, dict) or set(row) != {"version", "ref"} or row.get("version") != ROW_VERSION:
        raise IssuedRowError("the accepted row is not {version: 1, ref}")
    ref = row["ref"]
    keys = ("space", "owner", "actor", "uid", "generation")
    if not isinstance(ref, dict) or set(ref) != set(keys) or not all(isinstance(ref[k], str) for k in keys):
        raise IssuedRowError("the accepted row's ref is not {space, owner, actor, uid, generation}")
    if not is_generation(ref["generation"]):
        raise IssuedRowError("the accepted row's generation is not 32 lowercase hex")
    if ref["space"] != space:
        raise IssuedRowError(f"the accepted row names another space ({ref['space'][:64]!r})")
    out = IssuedRef(*(ref[k] for k in keys))
    if triple is not None and (out.owner, out.actor, out.uid) != tuple(triple):
        raise IssuedRowError("the accepted row names another caller than this connection's own")
    return out
