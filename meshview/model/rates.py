"""msg/s and the sparkline: deliveries counted in rolling buckets (a part of the model's state).

Only chat, DM and anycast deliveries count (the model decides which); endpoint, session and
event-channel traffic and rejected frames are not messages. No clock of its own: every call
takes the model's time.

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

RATE_BUCKETS = 15
RATE_BUCKET_MS = 4000.0
RATE_WINDOW_MS = 10_000.0  # msg/s is the mean over this much of the recent past (smoothed)


@dataclass(slots=True)
class RatesState:
    """What a checkpoint keeps of the rates (meshview/model/state.py)."""

    buckets: deque[int] = field(
        default_factory=lambda: deque([0] * RATE_BUCKETS, maxlen=RATE_BUCKETS))
    bucket_start: float | None = None  # when the newest bucket began (None: nothing yet)
    recent: deque[list[int]] = field(default_factory=deque)  # [second, arrivals] in the window
    origin: float | None = None  # when the rate began to be measured
    total: int = 0


class RateMeter:
    """Arrivals per bucket, and per second within :data:`RATE_WINDOW_MS`."""

    __slots__ = ("_bucket_start", "_buckets", "_counted_at", "_origin", "_recent", "total")

    def __init__(self) -> None:
        self._set(RatesState())

    def _set(self, st: RatesState) -> None:
        self._buckets = deque(st.buckets, maxlen=RATE_BUCKETS)
        self._bucket_start = st.bucket_start
        self._recent: deque[list[int]] = deque([list(r) for r in st.recent])
        self._origin = st.origin
        self.total = st.total
        self._counted_at: float | None = None  # the ``now`` of the last count, until a roll

    def state(self) -> RatesState:
        return RatesState(deque(self._buckets, maxlen=RATE_BUCKETS), self._bucket_start,
                          deque([list(r) for r in self._recent]), self._origin, self.total)

    @classmethod
    def from_state(cls, st: RatesState) -> RateMeter:
        meter = cls.__new__(cls)
        meter._set(st)
        return meter

    def roll(self, now: float) -> None:
        """Bring the buckets and the window up to ``now``."""
        self._counted_at = None  # the next count rolls (the window may have moved)
        if self._bucket_start is None:
            self._bucket_start = self._origin = now
            return
        steps = int((now - self._bucket_start) // RATE_BUCKET_MS)
        if steps > 0:
            for _ in range(min(steps, RATE_BUCKETS)):
                self._buckets.append(0)
            self._bucket_start += steps * RATE_BUCKET_MS
        cut = (now - RATE_WINDOW_MS) // 1000
        r = self._recent
        while r and r[0][0] <= cut:
            r.popleft()

    def count(self, now: float) -> None:
        """One delivery towards msg/s and the sparkline."""
        if now == self._counted_at:  # the observer applies a slice at one ``now``: no roll
            self._buckets[-1] += 1
            self.total += 1
            self._recent[-1][1] += 1
            return
        self.roll(now)
        self._buckets[-1] += 1
        self.total += 1
        sec = int(now // 1000)
        r = self._recent
        if r and r[-1][0] == sec:
            r[-1][1] += 1
        else:
            r.append([sec, 1])
        self._counted_at = now

    def buckets(self) -> tuple[int, ...]:
        return tuple(self._buckets)

    def per_sec(self, now: float) -> float:
        """The mean rate over the last ``RATE_WINDOW_MS`` (over the time observed so far when
        that is shorter, but never less than a second): steady under sparse traffic instead
        of flipping between 0 and 1."""
        n = sum(c for _, c in self._recent)
        if not n:
            return 0.0
        seen = now - (self._origin if self._origin is not None else now)
        return n / (max(1000.0, min(RATE_WINDOW_MS, seen)) / 1000.0)
