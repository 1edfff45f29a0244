"""The broker's order of stored messages: what history and reply look-ups sort by.

A sender's ``ts`` is self-asserted (a forger sets any value); the order a stream stored rows in
is not. Each stream's rows go by stream sequence; rows of several streams (CHAT, DM) are merged
by the time each stream stored its row, a merge that never reorders a stream's own rows (ties
go in the order the streams are given).
"""

from __future__ import annotations

import heapq
from typing import Any, Iterable, NamedTuple

from meshview.wire.decode import Delivery


class Stored(NamedTuple):
    """A history row with where the broker keeps it: its stream, stream sequence and the
    time the stream stored it (epoch ms; 0 when the broker did not say)."""

    stream: str
    seq: int
    stored_ms: float
    delivery: Delivery


def stored_ms(msg: Any) -> float:
    """The broker's store time of a JetStream message, epoch ms (0.0 when unknown)."""
    try:
        return msg.metadata.timestamp.timestamp() * 1000.0
    except Exception:  # noqa: BLE001 - no metadata (not a JetStream delivery)
        return 0.0


def stream_order(*streams: Iterable[Stored]) -> list[Delivery]:
    """Rows of several streams in one order: each stream by sequence, the streams merged by
    store time (ties: the order the streams are given). A stream's own order always holds."""
    ordered = [sorted(rows, key=lambda r: r.seq) for rows in streams]
    merged = heapq.merge(*([(r.stored_ms, k, r.seq, r) for r in rows]
                           for k, rows in enumerate(ordered)))
    return [m[3].delivery for m in merged]
