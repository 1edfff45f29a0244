"""RFC 8785 (JCS) canonical JSON for our own contract documents, and their sha256 digests.

Contract artifacts are addressed by ``sha256:<hex>`` over their canonical form (SPEC §13.7). Our
documents hold only objects, arrays, strings, booleans, null and integers, so the number rule
reduces to ECMAScript integer printing; a non-integral float is refused rather than guessed.
"""

from __future__ import annotations

import hashlib
import json
import math
import re

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_MAX_SAFE = 2**53 - 1


def _enc(v: object, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, int):
        if abs(v) > _MAX_SAFE:
            raise ValueError(f"integer {v} is outside the I-JSON safe range")
        out.append(str(v))
    elif isinstance(v, float):
        if not math.isfinite(v) or v != int(v) or abs(v) > _MAX_SAFE:
            raise ValueError(f"number {v!r} has no canonical form here (integers only)")
        out.append(str(int(v)))
    elif isinstance(v, str):
        # JCS string escaping is exactly JSON.stringify's: ensure_ascii=False keeps non-ASCII raw
        out.append(json.dumps(v, ensure_ascii=False))
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _enc(item, out)
        out.append("]")
    elif isinstance(v, dict):
        # keys sorted by their UTF-16 code units
        keys = sorted(v, key=lambda k: k.encode("utf-16-be"))
        out.append("{")
        for i, k in enumerate(keys):
            if not isinstance(k, str):
                raise ValueError("object keys must be strings")
            if i:
                out.append(",")
            out.append(json.dumps(k, ensure_ascii=False))
            out.append(":")
            _enc(v[k], out)
        out.append("}")
    else:
        raise ValueError(f"{type(v).__name__} is not a JSON value")


def canonical_bytes(value: object) -> bytes:
    out: list[str] = []
    _enc(value, out)
    return "".join(out).encode("utf-8")


def digest_hex(value: object) -> str:
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def digest(value: object) -> str:
    """``sha256:<hex>`` over the RFC 8785 form of ``value``."""
    return "sha256:" + digest_hex(value)


def manifest_for(root_digest: str) -> dict:
    """The §13.7 closure manifest of a single self-contained document."""
    return {"v": 1, "root": root_digest, "members": []}


def closure_digest(document: object) -> str:
    """Closure digest of a single-document closure: the digest of its manifest, not the root."""
    return digest(manifest_for(digest(document)))


VOID_SCHEMA: dict = {"type": "null"}
