"""Markers in a recording: the moments worth jumping to.

Automatic markers are derived from what the recording holds, by replaying it once
(:func:`auto_markers`): an agent starting to wait (NEEDS-YOU), a crash (heartbeat lapsed), a new
incarnation, a manager going up or down, a run's pause opening or settling, a burst of rejected
input (a forged or malformed message; one marker per burst). Hand markers are ``mark`` lines the operator wrote with ``m``
(``{"type": "mark", "t", "label"}``; ``"kind": "action"`` for an operator action the console's
action log saw): :meth:`meshview.record.record.Recorder.mark` while recording, and
:func:`append_mark` on a finished recording (a new gzip member at its end, which every gzip
reader, ours included, reads as the same stream).

Pure, no Textual or Rich import (the model layer). Deriving markers replays the whole recording:
callers run it off the event loop (the replay console uses a thread worker).
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from typing import Any

from meshview.wire import sanitize

LABEL_CELLS = 80
REJECT_BURST_MS = 5_000  # rejections closer than this are one marker


@dataclass(frozen=True, order=True)
class Marker:
    t: float  # the recording's clock (epoch ms)
    kind: str  # mark | action | waiting | crash | incarnation | manager | run | rejected
    label: str  # printable, one line


def clean_label(text: str) -> str:
    """A hand marker's label: one printable line, bounded."""
    s = sanitize.inline(str(text or "")).strip()
    return s[:LABEL_CELLS] or "mark"


MARK_KINDS = ("mark", "action")  # a hand marker; an operator action (the action log)


def mark_line(t: float, label: str, *, kind: str = "mark") -> dict[str, Any]:
    line: dict[str, Any] = {"type": "mark", "t": float(t), "label": clean_label(label)}
    if kind != "mark":
        line["kind"] = kind if kind in MARK_KINDS else "mark"
    return line


def parse_mark(obj: dict) -> Marker:
    """A ``mark`` line (ValueError/KeyError/TypeError when malformed)."""
    t = float(obj["t"])
    label = obj.get("label")
    if not isinstance(label, str):
        raise ValueError("a mark's label is text")
    kind = obj.get("kind", "mark")
    return Marker(t, kind if kind in MARK_KINDS else "mark", clean_label(label))


def append_mark(path: str, t: float, label: str) -> Marker:
    """Store a hand marker at the end of a finished recording (a gzip member of its own).
    Raises OSError when the file cannot be written."""
    line = mark_line(t, label)
    data = gzip.compress(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n", mtime=0)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return Marker(line["t"], "mark", line["label"])


def auto_markers(rec: Any) -> list[Marker]:
    """The automatic markers of ``rec`` (a :class:`meshview.record.replay.Recording`), in time order."""
    from meshview.record.replay import Replay
    from meshview.model.runs_state import RunEvent
    from meshview.model.snapshot import FeedEntry, PresenceEvent

    replay = Replay(rec, record_events=True)
    out: list[Marker] = []
    waiting: set[str] = set()
    last_reject = -float("inf")
    entries = rec.entries
    for i in range(replay.limit):
        e = entries[i]
        replay.apply_until(i + 1)
        replay.now = e.t
        if e.op == "apply_rejection":
            if e.t - last_reject > REJECT_BURST_MS:
                out.append(Marker(e.t, "rejected", "rejected input"))
            last_reject = e.t
        for ev in replay.model.take_events():
            if isinstance(ev, PresenceEvent):
                p = ev.peer
                name = sanitize.inline(p.name)
                if p.status == "waiting" and p.id not in waiting and not ev.initial:
                    c = p.condition
                    why = f": {sanitize.inline(c.code)}" if c is not None and getattr(c, "code", None) else ""
                    out.append(Marker(e.t, "waiting", f"{name} waits{why}"))
                if p.status == "waiting":
                    waiting.add(p.id)
                else:
                    waiting.discard(p.id)
                if ev.event == "incarnation":
                    out.append(Marker(e.t, "incarnation", f"{name}: a new incarnation"))
            elif isinstance(ev, RunEvent) and ev.kind in ("pause-open", "pause-settled"):
                run = sanitize.inline(ev.run_id)[:12]
                step = sanitize.inline(ev.step_key or "")
                what = "waits at" if ev.kind == "pause-open" else "settled"
                out.append(Marker(e.t, "run", f"{run}… {what} {step}"))
            elif isinstance(ev, FeedEntry) and ev.kind == "lifecycle":
                name = sanitize.inline(ev.from_name or "")
                if ev.lifecycle == "crash":
                    out.append(Marker(e.t, "crash", f"{name} crashed (heartbeat lapsed)"))
                elif ev.lifecycle in ("manager-up", "manager-down"):
                    out.append(Marker(e.t, "manager", f"manager {name} {ev.lifecycle[8:]}"))
    return sorted(out)
