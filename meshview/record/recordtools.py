"""Working with a recording as a file: find text in it, cut a window out, export one seat.

- :func:`grep`: the recording's lines (as ``cotal watch --plain`` printed them live, plus the
  printable text of recorded seat output) that contain a text, each with its time.
- :func:`cut`: a window ``[from, to]`` written as a recording of its own that replays alone: a
  checkpoint of the model at ``from`` (the whole recording replayed up to it), the inputs and
  checkpoints inside the window, and for each recorded seat the lines since its last fresh
  screen before ``from``, stamped at ``from`` so its screen is rebuilt at the start.
- :func:`asciicast`: one seat's recorded terminal as an asciinema v2 file (header, ``o`` output,
  ``r`` resize and ``m`` marker events), so a recording opens in the tools people already use.

Pure file work on :mod:`meshview.record.replay`'s reader; no Textual or Rich import (the model layer).
"""

from __future__ import annotations

import base64
import codecs
import gzip
import json
import os
import re
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Iterator

import msgspec

from meshview.wire import sanitize
from meshview.record.record import FORMAT, VERSION
from meshview.record.replay import Recording, RecordingError, Replay
from meshview.record.seatreplay import SEAT_KEYS, SeatLine, seat_preview
from meshview.record.statecodec import checkpoint

_json = msgspec.json.Encoder().encode
_OFFSET = re.compile(r"^(?:(\d+):)?(\d+):(\d{1,2}(?:\.\d+)?)$|^(\d+(?:\.\d+)?)s?$")
CLEAR = b"\x1b[H\x1b[2J\x1b[3J"  # a fresh screen before a keyframe in a cast


def parse_offset(text: str) -> float:
    """``MM:SS``, ``H:MM:SS`` or seconds (``90``, ``90s``, ``12.5``) from the recording's start,
    in ms. Raises ValueError naming the accepted forms."""
    m = _OFFSET.match(str(text).strip())
    if not m:
        raise ValueError(f"not a time offset: {text!r} (try 00:10, 1:02:03 or 90s)")
    if m.group(4) is not None:
        return float(m.group(4)) * 1000
    h, mm, ss = int(m.group(1) or 0), int(m.group(2)), float(m.group(3))
    return ((h * 60 + mm) * 60 + ss) * 1000


def clock(ms: float) -> str:
    s = max(0, int(ms // 1000))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


# ---- grep ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    t: float  # the recording's clock (epoch ms)
    offset: float  # ms from the recording's start
    line: str  # printable, one line


def grep(rec: Recording, text: str, *, ignore_case: bool = True) -> Iterator[Match]:
    """Every line of the recording that contains ``text``, in time order: the line stream's
    rendering of each event (messages, presence, lifecycle) and, for recorded seats, the
    printable text of each output line. Bounded work per event; nothing raw is returned."""
    from meshview.lines.stream import StreamWriter

    want = text.casefold() if ignore_case else text
    hit = (lambda s: want in s.casefold()) if ignore_case else (lambda s: want in s)
    replay = Replay(rec, record_events=True)
    writer = StreamWriter("plain", _Null(), _Null(), colour=False)
    seats, si = rec.seat_lines, 0
    start = rec.start
    out: list[Match] = []

    def seat_until(t: float) -> None:
        nonlocal si
        while si < len(seats) and seats[si].t <= t:
            x = seats[si]
            si += 1
            if x.ev == "out" and x.data:
                s = seat_preview(x.data, limit=400)
                if hit(s):
                    out.append(Match(x.t, x.t - start, f"[{sanitize.inline(x.seat)}] {s}"))

    for i in range(replay.limit):
        replay.apply_until(i + 1)
        t = rec.entries[i].t
        replay.now = t
        seat_until(t)
        for ev in replay.model.take_events():
            line = writer.render(ev)
            if line and hit(line):
                out.append(Match(t, t - start, line))
        if out:
            yield from out
            out.clear()
    seat_until(float("inf"))
    yield from out


class _Null:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


# ---- cut -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CutResult:
    path: str
    inputs: int
    seat_lines: int
    start: float
    end: float


def _seat_json(x: SeatLine, t: float) -> dict:
    line: dict = {"type": "seat", "t": t, "seat": x.seat, "ev": x.ev}
    if x.cols and x.rows:
        line["cols"], line["rows"] = x.cols, x.rows
    if x.data:
        try:
            line["u"] = x.data.decode("utf-8")
        except UnicodeDecodeError:
            line["b64"] = base64.b64encode(x.data).decode("ascii")
    if x.text:
        line["text"] = x.text
    return line


def cut(rec: Recording, start_ms: float, end_ms: float, out_path: str) -> CutResult:
    """Write the window ``[start, end]`` (offsets from the recording's start, ms) to
    ``out_path`` as a recording that replays alone. Raises :class:`RecordingError` naming what
    is wrong with the window or the output."""
    t0, t1 = rec.start + start_ms, rec.start + end_ms
    if start_ms < 0 or end_ms <= start_ms:
        raise RecordingError("the window must end after it starts (--from before --to)")
    if t0 > rec.end:
        raise RecordingError(f"the recording is only {clock(rec.end - rec.start)} long; "
                             f"--from {clock(start_ms)} is past its end")
    t1 = min(t1, rec.end)
    replay = Replay(rec)
    replay.seek(t0)
    first = replay.pos
    state = checkpoint(replay.model)
    header = {
        "type": "header", "format": FORMAT, "version": VERSION, "recording": uuid.uuid4().hex[:16],
        "segment": 0, "space": rec.header.get("space"), "server": rec.header.get("server", ""),
        "started": t0, "seats": bool(rec.header.get("seats")),
        "model": rec.header.get("model") or {},
        "cut": {"from": rec.header.get("recording"), "start": t0, "end": t1},
    }
    lines: list[dict] = [header, {"type": "checkpoint", "t": t0, "state": state}]
    # each seat's screen at ``t0``: its lines since the last keyframe at or before it, at t0
    by_seat: dict[str, list[SeatLine]] = {}
    for x in rec.seat_lines:
        if x.t > t0:
            break
        if x.ev in SEAT_KEYS:
            by_seat[x.seat] = [x]
        elif x.ev == "end":
            by_seat.pop(x.seat, None)
        elif x.seat in by_seat:
            by_seat[x.seat].append(x)
    seat_lines = [(t0, x) for xs in by_seat.values() for x in xs]
    seat_lines += [(x.t, x) for x in rec.seat_lines if t0 < x.t <= t1]
    cps = {i: (t, s) for i, t, s in rec.checkpoints}
    inputs = []
    for i in range(first, min(replay.limit, len(rec.entries))):
        e = rec.entries[i]
        if e.t > t1:
            break
        if i in cps and i != first and cps[i][0] > t0:
            inputs.append((cps[i][0], 0, {"type": "checkpoint", "t": cps[i][0], "state": cps[i][1]}))
        line = {"type": "in", "t": e.t, "op": e.op, "k": e.kind}
        if e.args is not None:
            line["a"] = e.args
        if e.kw is not None:
            line["kw"] = e.kw
        inputs.append((e.t, 1, line))
    merged = inputs + [(t, 2, _seat_json(x, t)) for t, x in seat_lines]
    merged.sort(key=lambda r: r[0])  # stable: inputs before seat lines at one instant
    lines += [obj for _, _, obj in merged]
    tmp = out_path + ".part"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            for obj in lines:
                gz.write(_json(obj) + b"\n")
        os.replace(tmp, out_path)
    except OSError as e:
        with _quiet():
            os.unlink(tmp)
        raise RecordingError(f"cannot write {out_path}: {e.strerror or e}") from None
    n_in = sum(1 for _, k, _ in merged if k == 1)
    return CutResult(out_path, n_in, len(seat_lines), t0, t1)


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        return typ is not None and issubclass(typ, OSError)


# ---- asciicast -----------------------------------------------------------------------------


def asciicast(rec: Recording, seat: str, out: IO[str]) -> int:
    """Write ``seat``'s recorded terminal to ``out`` as asciinema v2; returns the events
    written. Raises :class:`RecordingError` when the recording holds no such seat."""
    lines = [x for x in rec.seat_lines if x.seat == seat]
    if not lines:
        have = ", ".join(rec.seats) or "none (record with cotal watch --record-seats)"
        raise RecordingError(f"the recording holds no terminal of seat {seat!r}; recorded seats: {have}")
    sized = next((x for x in lines if x.cols and x.rows), None)
    cols, rows = (sized.cols, sized.rows) if sized else (80, 24)
    t0 = lines[0].t
    header = {"version": 2, "width": cols, "height": rows, "timestamp": int(t0 // 1000),
              "title": f"{seat} - {rec.header.get('space', '')}",
              "env": {"TERM": "xterm-256color"}}
    out.write(json.dumps(header, ensure_ascii=False) + "\n")
    n = 0
    size = (cols, rows)
    text = codecs.getincrementaldecoder("utf-8")("replace")  # a character split across lines

    def ev(t: float, kind: str, data: str) -> None:
        nonlocal n
        out.write(json.dumps([round((t - t0) / 1000, 6), kind, data], ensure_ascii=False) + "\n")
        n += 1

    for x in lines:
        if x.ev in ("open", "reset", "snap", "size") and (x.cols, x.rows) != size:
            size = (x.cols, x.rows)
            ev(x.t, "r", f"{x.cols}x{x.rows}")
        if x.ev in SEAT_KEYS:
            text.reset()
            ev(x.t, "o", text.decode(CLEAR + x.data))
        elif x.ev == "out" and x.data:
            s = text.decode(x.data)
            if s:
                ev(x.t, "o", s)
        elif x.ev == "note" and x.text:
            ev(x.t, "m", sanitize.inline(x.text))
    return n
