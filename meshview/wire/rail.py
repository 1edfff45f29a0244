"""§13.6 session rail frames: the closed schema of ``f`` / ``credit`` / ``close`` and the window
bound. The rail's behaviour (credit, acks, watchdogs) is :mod:`attach.session.rail`."""

from __future__ import annotations

import json

from meshview.errors import MeshviewError

WINDOW_DEFAULT = 64
WINDOW_MAX = 1024
MAX_SEQ = 2**53 - 2  # the last seq a side may send: seq and ack are JSON-safe integers


class FrameError(MeshviewError, ValueError):
    """A frame outside the closed rail schema (a ``garbled-frame`` fault on receipt)."""


def _nonneg_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2**53 - 1


def check_window(w: object) -> int:
    if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= WINDOW_MAX:
        raise ValueError(f"window {w!r} is not an integer in 1..{WINDOW_MAX}")
    return w


def encode_frame(frame: dict) -> bytes:
    return json.dumps(frame, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_frame(raw: bytes) -> dict:
    try:
        o = json.loads(raw.decode("utf-8", errors="strict"))
    except (UnicodeDecodeError, ValueError):
        raise FrameError("session frame is not UTF-8 JSON") from None
    if not isinstance(o, dict):
        raise FrameError("session frame is not an object")
    t = o.get("t")
    if t == "f":
        for k in o:
            if k not in ("t", "seq", "data", "ack"):
                raise FrameError(f"data frame carries unknown field {k!r}")
        if not _nonneg_int(o.get("seq")) or o["seq"] < 1:
            raise FrameError("data frame seq is not a positive integer")
        if "data" not in o:
            raise FrameError("data frame carries no data")
        if "ack" in o and not _nonneg_int(o["ack"]):
            raise FrameError("data frame ack is not a non-negative integer")
        return o
    if t == "credit":
        for k in o:
            if k not in ("t", "ack"):
                raise FrameError(f"credit frame carries unknown field {k!r}")
        if not _nonneg_int(o.get("ack")):
            raise FrameError("credit frame ack is not a non-negative integer")
        return o
    if t == "close":
        if len(o) != 1:
            raise FrameError("close frame carries unknown fields")
        return o
    raise FrameError(f"unknown session frame type {t!r}")
