"""Frame constants: the ``ag-ui.frame`` envelope's pinned vocabulary, and the §13.6
terminal-session profile carried inside rail data frames.

caller→serving: ``ready`` / ``data`` (keystrokes) / ``resize``;
serving→caller: ``data`` (pty output and snapshots) / ``drop`` / ``end``.
Closed schema, strict standard base64, bounded kebab ``end.reason``.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any, TypeGuard

from meshview.errors import MeshviewError

# ---- ag-ui.frame envelope (events.md §2) ---------------------------------------------------------
AGUI_PROTOCOL = "ag-ui/0.0.57"
"""The AG-UI vocabulary version this console reads; another ``protocol`` renders flagged as skew."""
FIRST_SEQ = 1
"""A writer chain's ``(from.id, epoch, threadId)`` first frame seq; a chain first seen above it
joined after its start (its prefix rolled off retention)."""
MAX_SEQ = 2**53 - 1
"""The largest seq a frame may carry (a JavaScript safe integer); past it the seq is unknown."""

# ---- terminal-session profile --------------------------------------------------------------------
MAX_B64_CHARS = 4 * 1024 * 1024
REASON_RE = re.compile(r"^[a-z][a-z0-9-]{0,47}$")

# Local end reasons: rail faults and link loss are transient (re-establish); the rest are final.
FAULTS = (
    "garbled-frame", "gap", "credit-overrun", "flood", "subscription",
    "stall", "handler", "publish", "seq-exhausted",
)
TRANSIENT_REASONS = frozenset(FAULTS) | {"peer-closed", "closed", "connection-closed"}
FINAL_REASONS = frozenset({"detached", "process-exit", "target-despawn", "manager-restart", "expired"})
MANAGER_REASONS = ("process-exit", "closed", "expired", "target-despawn", "manager-restart")


class TerminalFrameError(MeshviewError, ValueError):
    """A frame that does not parse under the closed terminal-profile schema."""


@dataclass(frozen=True)
class Ready:
    pass


@dataclass(frozen=True)
class Data:
    payload: bytes


@dataclass(frozen=True)
class Resize:
    cols: int
    rows: int


@dataclass(frozen=True)
class End:
    reason: str


@dataclass(frozen=True)
class Drop:
    bytes: int


TerminalFrame = Ready | Data | Resize | End | Drop


def b64encode(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def b64decode_strict(s: object) -> bytes:
    if not isinstance(s, str):
        raise TerminalFrameError("data payload is not a string")
    if len(s) > MAX_B64_CHARS:
        raise TerminalFrameError(f"data payload is {len(s)} base64 chars, over {MAX_B64_CHARS}")
    # one C pass: strict_mode refuses anything outside [A-Za-z0-9+/=] and padding anywhere but
    # the end; a length that is no multiple of 4 or a third "=" is refused here
    if len(s) % 4 or s.endswith("==="):
        raise TerminalFrameError("data payload is not valid standard base64")
    try:
        return binascii.a2b_base64(s, strict_mode=True)
    except (binascii.Error, ValueError) as e:
        raise TerminalFrameError(f"data payload is not valid base64: {e}") from None


def valid_reason(r: object) -> TypeGuard[str]:
    return isinstance(r, str) and bool(REASON_RE.fullmatch(r))


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _dimension(data: dict[str, Any], name: str) -> int:
    """A resize frame's ``cols`` or ``rows``, refused unless a bounded positive integer."""
    v = data.get(name)
    if not _is_int(v) or not 1 <= v <= 100_000:
        raise TerminalFrameError(f"resize {name} is not a bounded positive integer")
    return v


def _only(o: dict, keys: set[str], kind: str, lenient: bool = False) -> None:
    if lenient:
        return
    for k in o:
        if k not in keys:
            raise TerminalFrameError(f"{kind} frame carries the unknown field {k!r}")


def data_json(payload: bytes) -> bytes:
    """The JSON text of ``encode(Data(payload))``, built without a JSON encoder (base64 needs
    no escaping): the serving side's hot path, for :meth:`attach.session.rail.Rail.send_json`."""
    return b'{"k":"data","b":"' + binascii.b2a_base64(payload, newline=False) + b'"}'


def encode(frame: TerminalFrame) -> dict:
    """The JSON value for a rail data frame's ``data`` field."""
    if isinstance(frame, Ready):
        return {"k": "ready"}
    if isinstance(frame, Data):
        return {"k": "data", "b": b64encode(frame.payload)}
    if isinstance(frame, Resize):
        return {"k": "resize", "cols": frame.cols, "rows": frame.rows}
    if isinstance(frame, End):
        if not valid_reason(frame.reason):
            raise TerminalFrameError(f"end reason {frame.reason!r} is not a bounded kebab token")
        return {"k": "end", "reason": frame.reason}
    if isinstance(frame, Drop):
        return {"k": "drop", "bytes": frame.bytes}
    raise TypeError(frame)


def decode(data: object, *, lenient: bool = False) -> TerminalFrame | None:
    """One frame under the closed schema. ``lenient`` (the caller reading a manager, which may
    be newer): fields it does not know are ignored and a kind it does not know is None (nothing
    to do), instead of an error that would break the session; a known kind with a bad value is
    still an error."""
    if not isinstance(data, dict):
        raise TerminalFrameError("frame is not an object")
    k = data.get("k")
    if k == "ready":
        _only(data, {"k"}, "ready", lenient)
        return Ready()
    if k == "data":
        _only(data, {"k", "b"}, "data", lenient)
        return Data(b64decode_strict(data.get("b")))
    if k == "resize":
        _only(data, {"k", "cols", "rows"}, "resize", lenient)
        return Resize(_dimension(data, "cols"), _dimension(data, "rows"))
    if k == "end":
        _only(data, {"k", "reason"}, "end", lenient)
        r = data.get("reason")
        if not valid_reason(r):
            raise TerminalFrameError(f"end reason {r!r} is not a bounded kebab token")
        return End(r)
    if k == "drop":
        _only(data, {"k", "bytes"}, "drop", lenient)
        n = data.get("bytes")
        if not _is_int(n) or n < 1:
            raise TerminalFrameError("drop bytes is not a positive integer")
        return Drop(n)
    if lenient and isinstance(k, str) and k:
        return None
    raise TerminalFrameError(f"unknown terminal-session frame kind {k!r}")
