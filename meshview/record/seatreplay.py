"""Seat terminals in a recording (``cotal watch --record-seats``), read back and played.

A ``seat`` line (meshview/record/record.py ``Recorder.seat``) becomes a :class:`SeatLine`;
:class:`SeatStream` turns one seat's lines into steps for a screen (fresh screen, resize, bytes
to feed) up to a replay time, a bounded number of bytes at a time; seeking back restarts from the
last fresh screen or snapshot before the target. :func:`seat_line_text` / :func:`seat_line_json`
summarize a line for the line stream: never its raw bytes.

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

import binascii
import bisect
import re
from dataclasses import dataclass
from typing import Any

from meshview.wire import sanitize


def _clock(ms: float) -> str:
    s = max(0, int(ms // 1000))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"

SEAT_EVENTS = frozenset({"open", "reset", "snap", "size", "out", "note", "end"})
SEAT_KEYS = frozenset({"open", "reset", "snap"})  # a line that starts a screen afresh
_SIZED = frozenset({"open", "reset", "snap", "size"})


@dataclass(slots=True)
class SeatLine:
    """One seat terminal line (meshview/record/record.py ``Recorder.seat``)."""

    t: float
    seat: str
    ev: str
    data: bytes = b""
    cols: int = 0
    rows: int = 0
    text: str = ""


def _seat_line(obj: dict) -> SeatLine:
    ev, seat = obj["ev"], obj["seat"]
    if ev not in SEAT_EVENTS or not isinstance(seat, str) or not seat:
        raise ValueError("not a seat line")
    cols, rows = obj.get("cols", 0), obj.get("rows", 0)
    if type(cols) is not int or type(rows) is not int or not (0 <= cols <= 1000 and 0 <= rows <= 1000):
        raise ValueError("bad size")
    if ev in _SIZED and not (cols and rows):
        raise ValueError("no size")
    b64, u = obj.get("b64", ""), obj.get("u", "")
    if u:
        data = u.encode("utf-8")  # a str, or AttributeError → malformed
    else:
        data = binascii.a2b_base64(b64, strict_mode=True) if b64 else b""  # binascii.Error
    return SeatLine(float(obj["t"]), seat, ev, data, cols, rows, str(obj.get("text") or ""))


class SeatStream:
    """One seat's recorded terminal, played onto a screen by steps.

    :meth:`plan` returns what brings a screen that shows the first :attr:`pos` lines to the
    screen at replay time ``t``: ``("reset", cols, rows)`` a fresh screen, ``("resize", cols,
    rows)``, ``("feed", bytes)``. It feeds at most ``budget`` bytes per call (at least one line),
    so a caller ticking it never holds its loop; the next call goes on. Back in time (or far
    ahead) it starts from the last fresh screen or snapshot at or before ``t``: the work is what
    was recorded since that keyframe, not since the stream began."""

    def __init__(self, name: str, lines: list[SeatLine]) -> None:
        self.name = name
        self.lines = lines
        self.times = [x.t for x in lines]
        self.keys = [i for i, x in enumerate(lines) if x.ev in SEAT_KEYS]
        self._marks = [i for i, x in enumerate(lines) if x.ev in SEAT_KEYS or x.ev == "note"]
        self.pos = 0  # lines applied
        self.fed = 0  # bytes handed out to feed, all calls (for tests and the bench)

    @property
    def start(self) -> float:
        return self.times[0]

    def target(self, t: float) -> int:
        """How many lines are at or before replay time ``t``."""
        return bisect.bisect_right(self.times, t)

    def caught_up(self, t: float) -> bool:
        return self.pos == self.target(t)

    def plan(self, t: float, budget: int = 256 * 1024) -> list[tuple]:
        target = self.target(t)
        steps: list[tuple] = []
        if target != self.pos:
            k = bisect.bisect_right(self.keys, target - 1) - 1  # the last keyframe before target
            key = self.keys[k] if k >= 0 else None
            if target < self.pos:  # back in time: rebuild
                self.pos = key if key is not None else 0
                if key is None:
                    first = self.lines[0]
                    steps.append(("reset", first.cols or 80, first.rows or 24))
            elif key is not None and key > self.pos:  # far ahead: skip what a keyframe covers
                self.pos = key
        lines = self.lines
        while self.pos < target and (budget > 0 or not steps):
            x = lines[self.pos]
            self.pos += 1
            if x.ev in ("open", "reset"):
                steps.append(("reset", x.cols, x.rows))
            elif x.ev == "snap":
                steps.append(("reset", x.cols, x.rows))
                steps.append(("feed", x.data))
            elif x.ev == "size" or (x.ev == "note" and x.cols and x.rows):
                steps.append(("resize", x.cols, x.rows))
            if x.ev in ("out", "snap") and x.data:
                if x.ev == "out":
                    steps.append(("feed", x.data))
                budget -= len(x.data)
                self.fed += len(x.data)
        return steps

    def status(self, t: float) -> str:
        """One line about the stream at replay time ``t`` (empty while it plays normally)."""
        n = self.target(t)
        if n == 0:
            wait = -(-(self.start - t) // 1000) * 1000  # whole seconds, rounded up
            return (f"[cotal: {self.name}'s terminal is not open yet in this recording "
                    f"(it opens in {_clock(wait)})]")
        last = self.lines[n - 1]
        if last.ev == "end":
            return f"[cotal: {self.name}'s terminal was closed here ({sanitize.inline(last.text, 80)})]"
        k = bisect.bisect_right(self._marks, n - 1) - 1  # the last fresh start or note so far
        note = self.lines[self._marks[k]] if k >= 0 else None
        if note is not None and note.ev == "note":
            return (f"[cotal: the recording of {self.name} {sanitize.inline(note.text, 80)}: "
                    f"the screen fills in as the program repaints]")
        return ""


_ESCAPES = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|[ -/]+[0-~]|.)|[\x00-\x1f\x7f\x9b]", re.S)
_MOVES = frozenset("ABCDEFGHJKdfr")  # cursor moves and erases: where words part on screen


def _gap(m: re.Match) -> str:
    final = m.group(1)
    if final is not None:
        return " " if final in _MOVES else ""
    return " " if m.group(0) in ("\n", "\r", "\t") else ""


def seat_preview(data: bytes, limit: int = 60) -> str:
    """The printable text of some terminal output, one line: escape sequences and controls
    removed (a cursor move or a line break leaves a space), whatever is left neutralized
    (never a raw control byte)."""
    text = _ESCAPES.sub(_gap, data.decode("utf-8", "replace"))
    return sanitize.inline(" ".join(text.split()), limit)


_SEAT_WORDS = {"open": "opened", "reset": "fresh screen", "snap": "snapshot", "size": "resized",
               "out": "output", "note": "note", "end": "closed"}


def seat_line_text(x: SeatLine) -> str:
    """A seat line as one summary line of the plain stream (after the time stamp)."""
    parts = [f"seat {sanitize.inline(x.seat, 64)}", _SEAT_WORDS.get(x.ev, x.ev)]
    if x.ev in _SIZED:
        parts.append(f"{x.cols}×{x.rows}")
    if x.data:
        parts.append(f"{len(x.data)} B")
        if x.ev == "out":
            preview = seat_preview(x.data)
            if preview:
                parts.append(f"“{preview}”")
    if x.text:
        parts.append(f"({sanitize.inline(x.text, 120)})" if x.ev == "end"
                     else sanitize.inline(x.text, 120))
    return "  ".join(parts)


def seat_line_json(x: SeatLine) -> dict[str, Any]:
    """A seat line for the JSON stream: what happened and how much, not the bytes."""
    d: dict[str, Any] = {"type": "seat", "seat": x.seat, "event": x.ev, "ts": int(x.t)}
    if x.ev in _SIZED:
        d["cols"], d["rows"] = x.cols, x.rows
    if x.data:
        d["bytes"] = len(x.data)
    if x.ev == "out":
        d["text"] = seat_preview(x.data, 200)
    if x.text:
        d["note"] = x.text
    return d
