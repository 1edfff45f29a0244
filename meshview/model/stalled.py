"""The stalled verdict: presence ``working`` is a claim; this is what the console can observe.

An agent that says ``working`` is *stalled?* when, for ``threshold`` (default 10 minutes), none of
the facts the console sees has moved: no presence change (status, activity, condition, their
clocks), no mesh message sent by it, no ``activeAt`` advance (its presence record's or the
manager's seat row's), and - for a seat with an open session - no terminal output. DMs to it, and
anycasts to its role, that it has not answered (sent anything since) for ``threshold`` are counted.

Pure: every call takes receipt time from the caller (the model's clock); no I/O, no clock of its
own. :class:`StallTracker` folds the facts as the model receives them; :func:`verdict` judges one
peer's :class:`StallFacts`. No Textual or Rich import (the model layer).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

from meshview.timefmt import age

DEFAULT_STALL_MINUTES = 10.0
PENDING_CAP = 64  # unanswered deliveries remembered per peer (the count saturates there)

# the facts, as the ``--json`` ``signals`` list names them (each one: "has not moved")
PRESENCE, MESSAGES, OUTPUT, ACTIVE_AT = "presence", "messages", "output", "activeAt"
_SHORT = {OUTPUT: "no output", MESSAGES: "no messages"}  # what the row says in brackets


def stall_ms(minutes: float | str | None) -> float:
    """Minutes (a flag or the config) as the tracker's milliseconds; ``None``: the default.
    A non-positive or non-finite value is refused with one sentence."""
    if minutes is None:
        minutes = DEFAULT_STALL_MINUTES
    try:
        m = float(minutes)
    except (TypeError, ValueError):
        raise ValueError(f"stalled minutes must be a number, not {minutes!r}") from None
    if not (m > 0 and m < 1e7):
        raise ValueError(f"stalled minutes must be a positive number of minutes, not {minutes!r}")
    return m * 60_000.0


@dataclass(frozen=True, slots=True)
class StallFacts:
    """When each observable fact last moved (observer receipt time, ms; None: never seen to)."""

    since: float  # when the console began observing this peer
    presence: float | None = None
    message: float | None = None
    active_at: float | None = None  # when an ``activeAt`` advance was received
    output: float | None = None  # last terminal output of its seat
    session: bool = False  # the seat has a session open (output is a fact only then)
    pending: tuple[float, ...] = ()  # receipt times of DMs/anycasts to it, unanswered


@dataclass(frozen=True, slots=True)
class Stalled:
    """A verdict: silent for ``for_ms``; ``signals`` the facts checked (all silent)."""

    for_ms: float
    signals: tuple[str, ...]
    unanswered: int = 0

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` presence line's ``stalled`` field."""
        out: dict[str, Any] = {"for": int(self.for_ms // 1000), "signals": list(self.signals)}
        if self.unanswered:
            out["unanswered"] = self.unanswered
        return out

    def label(self) -> str:
        """``stalled? 14m (no output, no messages)``, ``, 2 unanswered`` when counted."""
        said = [_SHORT[s] for s in (OUTPUT, MESSAGES) if s in self.signals]
        if self.unanswered:
            said.append(f"{self.unanswered} unanswered")
        return f"stalled? {age(self.for_ms)} ({', '.join(said)})"


def verdict(status: str, facts: StallFacts, now: float, threshold_ms: float) -> Stalled | None:
    """The verdict for one peer at ``now``: None unless it claims ``working`` and no fact moved
    for ``threshold_ms`` (observation time counts: nothing is stalled before the console has
    watched it that long)."""
    if status != "working":
        return None
    quiet = now - last_moved(facts)
    if quiet < threshold_ms:
        return None
    signals = (OUTPUT, PRESENCE, MESSAGES, ACTIVE_AT) if facts.session else (
        PRESENCE, MESSAGES, ACTIVE_AT)
    old = sum(1 for t in facts.pending if now - t >= threshold_ms)
    return Stalled(for_ms=quiet, signals=signals, unanswered=old)


def last_moved(f: StallFacts | _Marks) -> float:
    """When the newest of a peer's facts moved (the verdict's quiet time counts from it): the
    start of observation, presence, messages, ``activeAt``, and terminal output when a
    session is open. Takes the tracker's own marks too, so a check over every peer need not
    build a :class:`StallFacts` for each."""
    return max(f.since, f.presence or 0.0, f.message or 0.0, f.active_at or 0.0,
               (f.output or 0.0) if f.session else 0.0)  # receipt times: all positive


@dataclass(slots=True)
class _Marks:
    since: float
    key: tuple = ()
    presence: float | None = None
    message: float | None = None
    active_at_value: float | None = None
    active_at: float | None = None
    output: float | None = None
    session: bool = False
    role: str | None = None
    pending: deque = field(default_factory=lambda: deque(maxlen=PENDING_CAP))


class StallTracker:
    """The facts per peer, folded as the model receives them (receipt times from its clock)."""

    def __init__(self) -> None:
        self._m: dict[str, _Marks] = {}

    def _marks(self, pid: str, now: float) -> _Marks:
        m = self._m.get(pid)
        if m is None:
            m = self._m[pid] = _Marks(since=now)
        return m

    def presence(self, pid: str, now: float, key: tuple, active_at: float | None,
                 role: str | None = None) -> None:
        """A presence record: ``key`` is what a change is (status, activity, condition and their
        clocks; a heartbeat moves none); ``active_at`` the record's ``activeAt``."""
        m = self._m.get(pid)
        if m is None:
            m = self._m[pid] = _Marks(since=now, key=key)
        elif key != m.key:
            m.key, m.presence = key, now
        m.role = role
        self._active(m, active_at, now)

    def active_at(self, pid: str, now: float, value: float | None) -> None:
        """An ``activeAt`` seen (a heartbeat's, or the manager's seat row's)."""
        self._active(self._marks(pid, now), value, now)

    @staticmethod
    def _active(m: _Marks, value: float | None, now: float) -> None:
        if value is None:
            return
        if m.active_at_value is not None and value > m.active_at_value:
            m.active_at = now
        if m.active_at_value is None or value > m.active_at_value:
            m.active_at_value = value

    def seat(self, pid: str, now: float, *, session_open: bool, output_at: float | None) -> None:
        """The seat behind ``pid``: whether a session is open, when it last printed."""
        m = self._marks(pid, now)
        m.session = session_open
        if output_at is not None and (m.output is None or output_at > m.output):
            m.output = output_at

    def message(self, now: float, kind: str, from_id: str, to_id: str | None,
                to_role: str | None) -> None:
        """A live delivery: the sender spoke (its unanswered count clears); a DM's recipient,
        or every peer of an anycast's role, waits for an answer."""
        m = self._m.get(from_id)
        if m is not None:
            m.message = now
            m.pending.clear()
        if kind == "dm" and to_id and to_id in self._m:
            self._m[to_id].pending.append(now)
        elif kind == "anycast" and to_role:
            for pid, other in self._m.items():
                if other.role == to_role and pid != from_id:
                    other.pending.append(now)

    def forget(self, pids: Iterable[str]) -> None:
        for pid in pids:
            self._m.pop(pid, None)

    def last_moved(self, pid: str, first_seen: float = 0.0) -> float:
        """:func:`last_moved` of ``facts(pid, first_seen)``, without building them."""
        m = self._m.get(pid)
        return first_seen if m is None else last_moved(m)

    def facts(self, pid: str, first_seen: float = 0.0) -> StallFacts:
        m = self._m.get(pid)
        if m is None:
            return StallFacts(since=first_seen)
        return StallFacts(since=m.since, presence=m.presence, message=m.message,
                          active_at=m.active_at, output=m.output, session=m.session,
                          pending=tuple(m.pending))
