"""Replaying a recording (meshview/record/record.py): read it back, drive a pure model, pace it.

:func:`load_recording` reads a file (and its rotated first half ``FILE.1`` when that belongs to
it); damage after a usable start ends the read with one sentence in ``Recording.damage``.
:class:`Replay` applies the recorded inputs to a fresh :class:`~meshview.model.mesh.MeshModel` at the
recorded model-clock times, so it ends where the live model ended; seeking back restores the
nearest checkpoint. :class:`Player` paces it against the wall clock; :class:`ReplaySession` is
what the console needs from a session. No broker anywhere.

Seat terminals (``--record-seats``) are read into ``Recording.seat_lines`` and played by
meshview/record/seatreplay.py (:meth:`Replay.seat_stream`).

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

import asyncio
import bisect
import gzip
import json
import os
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from meshview.errors import MeshviewError
from meshview.record.markers import Marker, append_mark, clean_label, parse_mark
from meshview.model.agent_activity import ActivityRead, frames_of
from meshview.model.mesh import MeshModel
from meshview.record.record import EVENT_KINDS, FORMAT, VERSION
from meshview.record.seatreplay import SeatLine, SeatStream, _seat_line
from meshview.record.statecodec import decode, restore
from meshview.tasks import reap
from meshview.wire.decode import Applied


class RecordingError(MeshviewError):
    """A recording that cannot be read at all (one sentence)."""


@dataclass(slots=True)
class Entry:
    t: float
    op: str
    kind: str
    args: Any = None
    kw: Any = None


@dataclass
class Recording:
    header: dict[str, Any]
    entries: list[Entry] = field(default_factory=list)
    checkpoints: list[tuple[int, float, dict]] = field(default_factory=list)  # (index, t, state)
    damage: str | None = None  # one sentence when the file ends in damage
    paths: list[str] = field(default_factory=list)
    seat_lines: list[SeatLine] = field(default_factory=list)  # --record-seats, in time order
    marks: list[Marker] = field(default_factory=list)  # hand markers (``m``), in file order

    @property
    def start(self) -> float:
        return self.checkpoints[0][1] if self.checkpoints else float(self.header.get("started", 0))

    @property
    def end(self) -> float:
        t = self.entries[-1].t if self.entries else self.start
        return max(t, self.seat_lines[-1].t) if self.seat_lines else t

    @property
    def seats(self) -> list[str]:
        """The seats whose terminal was recorded, in the order they first appear."""
        return list(dict.fromkeys(line.seat for line in self.seat_lines))


def _read_segment(path: str, rec: Recording | None) -> Recording:
    """Read one segment, appending to ``rec`` when given. Damage ends the read with a sentence."""
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise RecordingError(f"cannot read {path}: {e.strerror or e}") from None
    with raw:
        gz = gzip.GzipFile(fileobj=raw, mode="rb")
        first = True
        n = 0
        it = iter(gz)
        while True:
            try:
                line = next(it)
            except StopIteration:
                break
            except (EOFError, OSError, zlib.error) as e:
                if rec is None:
                    raise RecordingError(f"{path} is not a cotal recording ({_why(e)})") from None
                rec.damage = _damage(path, rec, _why(e))
                return rec
            n += 1
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("not an object")
            except ValueError:
                if rec is None:
                    raise RecordingError(f"{path} is not a cotal recording") from None
                cut = not line.endswith(b"\n")
                rec.damage = _damage(path, rec, "it ends mid-line" if cut
                                     else f"line {n} is not JSON")
                return rec
            typ = obj.get("type")
            if first:
                first = False
                if typ != "header" or obj.get("format") != FORMAT:
                    raise RecordingError(f"{path} is not a cotal recording")
                if int(obj.get("version", 0)) > VERSION:
                    raise RecordingError(f"{path} is a newer recording format "
                                         f"(version {obj.get('version')}); upgrade cotal-tui")
                if rec is None:
                    rec = Recording(header=obj)
                rec.paths.append(path)
                continue
            assert rec is not None
            try:
                if typ == "in":
                    rec.entries.append(Entry(float(obj["t"]), str(obj["op"]),
                                             str(obj.get("k", "")), obj.get("a"), obj.get("kw")))
                elif typ == "checkpoint":
                    rec.checkpoints.append((len(rec.entries), float(obj["t"]),
                                            obj["state"]))
                elif typ == "seat":
                    rec.seat_lines.append(_seat_line(obj))
                elif typ == "mark":
                    rec.marks.append(parse_mark(obj))
            except (KeyError, TypeError, ValueError, AttributeError):
                rec.damage = _damage(path, rec, f"line {n} is malformed")
                return rec
    if rec is None:
        raise RecordingError(f"{path} is empty: not a cotal recording")
    return rec


def _why(e: BaseException) -> str:
    if isinstance(e, EOFError):
        return "it was cut off"
    return f"the compressed data is corrupt: {e}"


def _damage(path: str, rec: Recording, why: str) -> str:
    span = _clock(rec.end - rec.start)
    seats = f", {len(rec.seat_lines)} seat lines" if rec.seat_lines else ""
    return (f"{os.path.basename(path)} is damaged ({why}): replaying the first {span} "
            f"({len(rec.entries)} inputs{seats}), up to the damage.")


def _clock(ms: float) -> str:
    s = max(0, int(ms // 1000))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


def load_recording(path: str) -> Recording:
    """Read a recording (and its rotated-out first half ``FILE.1`` when that belongs to it).

    Raises :class:`RecordingError` (one sentence) only when nothing can be replayed; damage
    after a usable start is reported in :attr:`Recording.damage`."""
    rec = _read_segment(path, None)
    older = path + ".1"
    if os.path.exists(older) and rec.header.get("segment", 0) > 0:
        try:
            prev = _read_segment(older, None)
        except RecordingError:
            prev = None
        if (prev is not None and prev.damage is None
                and prev.header.get("recording") == rec.header.get("recording")
                and prev.header.get("segment") == rec.header["segment"] - 1):
            base = len(prev.entries)
            prev.entries += rec.entries
            prev.seat_lines += rec.seat_lines
            prev.marks += rec.marks
            prev.checkpoints += [(i + base, t, s) for i, t, s in rec.checkpoints]
            prev.damage, prev.paths = rec.damage, prev.paths + rec.paths
            rec = prev
    if not rec.checkpoints:
        raise RecordingError(f"{path} holds no model state to start from")
    return rec


# --------------------------------------------------------------------------- replaying


class Replay:
    """A model driven by a recording. ``now`` is the replay time (the recording's clock, ms);
    the model's clock reads it. Seeking back restores the nearest checkpoint and re-applies."""

    def __init__(self, rec: Recording, *, record_events: bool = False) -> None:
        self.rec = rec
        p = rec.header.get("model") or {}
        self.now = rec.start
        self.model = MeshModel(
            str(rec.header.get("space") or "main"), clock=lambda: self.now,
            feed_cap=int(p.get("feed_cap") or 10_000),
            ttl_ms=float(p.get("ttl_ms") or 6000), burst_ms=float(p.get("burst_ms", 400)),
            record_events=record_events, server=str(rec.header.get("server") or ""),
        )
        self.pos = 0  # entries applied
        self.damage = rec.damage  # grows a sentence if an input fails to apply
        self.limit = len(rec.entries)  # inputs that can be applied (less after apply damage)
        self._times = [e.t for e in rec.entries]
        self._cp_index = [i for i, _, _ in rec.checkpoints]
        marks: list[int] = []
        last: dict[str, str] = {}  # the roster-visible fields last seen, per peer (``_visible``)
        for i, e in enumerate(rec.entries):
            if e.kind in EVENT_KINDS and _visible(e, last):
                marks.append(i)
        self.marks = marks  # indices of the inputs that are "events" for ←/→
        self._restore(0)

    @property
    def start(self) -> float:
        return self.rec.start

    @property
    def end(self) -> float:
        if self.limit < len(self.rec.entries):  # an input failed: nothing after it plays
            return self._times[self.limit - 1] if self.limit else self.rec.start
        return self.rec.end

    def seat_stream(self, name: str) -> SeatStream | None:
        """``name``'s recorded terminal, up to where this replay ends (``None``: not recorded)."""
        lines = [s for s in self.rec.seat_lines if s.seat == name and s.t <= self.end]
        return SeatStream(name, lines) if lines else None

    @property
    def at_end(self) -> bool:
        return self.pos >= self.limit

    def _restore(self, k: int) -> None:
        i, t, state = self.rec.checkpoints[k]
        self.now = t
        restore(self.model, state)
        self.pos = i

    def _apply(self, e: Entry) -> bool:
        self.now = e.t
        try:
            args = decode(e.args) if e.args is not None else []
            kw = decode(e.kw) if e.kw is not None else {}
            self.model.apply_input(e.op, *upgraded(e.op, args, kw))
        except Exception as ex:  # noqa: BLE001 - a bad input ends the replay, never a traceback
            self.limit = self.pos
            where = _clock(e.t - self.start)
            self.damage = (f"input {self.pos + 1} ({e.op} at {where}) cannot be applied "
                           f"({type(ex).__name__}): replaying up to there.")
            return False
        self.pos += 1
        return True

    def apply_until(self, index: int) -> None:
        """Apply inputs until ``index`` of them are applied (restoring first if behind)."""
        index = max(0, min(index, self.limit))
        if index < self.pos:
            k = max(0, bisect.bisect_right(self._cp_index, index) - 1)
            self._restore(k)
        entries = self.rec.entries
        while self.pos < index:
            if not self._apply(entries[self.pos]):
                break

    def seek(self, t: float) -> None:
        """Replay time ``t``: every input at or before it applied, none after."""
        t = max(self.start, min(t, self.end))
        before = self.model.version
        self.apply_until(bisect.bisect_right(self._times, t, 0, self.limit))
        moved_second = int(t // 1000) != int(self.now // 1000)
        self.now = t
        if moved_second and self.model.version == before:
            self.model.touch()  # ages shown move with replay time, once a second

    def step(self, delta: int) -> None:
        """Jump to the next (``+1``) or previous (``-1``) event: the replay stops just after it."""
        marks = [m for m in self.marks if m < self.limit]
        if not marks:
            return
        cur = self.pos - 1  # index of the last applied input
        if delta > 0:
            k = bisect.bisect_right(marks, cur)
            if k >= len(marks):
                self.seek(self.end)
                return
            target = marks[k]
        else:  # back to just after the event before the last one applied (by count, so a
            # position between events — after a seek — still steps back one event)
            k = bisect.bisect_left(marks, self.pos) - 2
            if k < 0:
                self.seek(self.start)
                return
            target = marks[k]
        self.apply_until(target + 1)
        self.now = self.rec.entries[target].t
        self.model.touch()

    def event_number(self) -> tuple[int, int]:
        """(events applied so far, events in the recording)."""
        marks = self.marks
        return bisect.bisect_left(marks, self.pos), len([m for m in marks if m < self.limit])


def upgraded(op: str, args: list[Any], kw: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """A recorded input in the form the model takes now. ``apply_message`` took its delivery
    as keyword arguments until it took one :class:`~meshview.wire.decode.Applied` (issue 36):
    recordings of either format version made before then hold those, and replay as the value
    (an unknown keyword still fails, and ends the replay with a sentence)."""
    if op == "apply_message" and kw and not args:
        return [Applied(**kw)], {}
    return args, kw


def _visible(e: Entry, last: dict[str, str]) -> bool:
    """Whether an input shows as an event: a message, a lifecycle change, a presence record
    that changed what the roster says (heartbeat rewrites and watch bookkeeping do not)."""
    if e.op in ("apply_message", "apply_manager", "apply_presence_delete", "apply_absent",
                "apply_stranded_seat"):
        return True
    if e.op != "apply_presence":
        return e.op == "sweep"
    try:
        f = (e.args or [{}])[0].get("f", {})
    except (AttributeError, IndexError):
        return False
    key = json.dumps([f.get("status"), f.get("activity"), f.get("condition"),
                      f.get("lifecycle_uid")], sort_keys=True, default=str)
    pid = str(f.get("id"))
    changed = last.get(pid) != key
    last[pid] = key
    return changed


class Player:
    """Paces a :class:`Replay` against the wall clock: ``speed`` recording seconds per second
    (0 = as fast as possible). ``paused`` holds the replay time still."""

    def __init__(self, replay: Replay, speed: float = 1.0,
                 on_advance: Callable[[Replay], Any] | None = None,
                 wall: Callable[[], float] = time.monotonic) -> None:
        self.replay = replay
        self.speed = max(0.0, float(speed))
        self.on_advance = on_advance
        self.wall = wall
        self.paused = False
        self._anchor = (wall(), replay.now)
        self.done = asyncio.Event()

    def position(self) -> float:
        """Where the replay should be now."""
        if self.paused:
            return self.replay.now
        w0, t0 = self._anchor
        if self.speed == 0:
            return self.replay.end
        return t0 + (self.wall() - w0) * 1000.0 * self.speed

    def rebase(self) -> None:
        """Call after a seek or a pause toggle: playing resumes from the replay's time."""
        self._anchor = (self.wall(), self.replay.now)

    def toggle_pause(self) -> bool:
        self.paused = not self.paused
        self.rebase()
        return self.paused

    def advance(self) -> None:
        r = self.replay
        if r.at_end and r.now >= r.end:
            self.done.set()
            return
        r.seek(min(self.position(), r.end))
        if self.on_advance is not None:
            self.on_advance(r)
        if r.at_end and r.now >= r.end:
            self.done.set()

    async def run(self, period: float = 0.05) -> None:
        """Advance every ``period`` seconds until cancelled (it stays alive at the end, so a
        console can seek back)."""
        while True:
            if not self.paused:
                self.advance()
            await asyncio.sleep(period)


# --------------------------------------------------------------------------- a console session


class ReplayOperator:
    """The replay console's operator: it never sends."""

    read_only = "this is a replay of a recording"
    on_roster = False

    def refusal(self) -> str | None:
        """Why nothing can be sent: always (the console's operator interface)."""
        return f"read-only - {self.read_only}; nothing is sent"


class ReplaySession:
    """A console session (``cotal_tui.session.ConsoleSession``, kept by shape: this layer does
    not import the console) fed by a recording instead of an observer. ``player`` pauses, steps
    and seeks; there is no mesh: no target, no managers, no seats, nothing sent."""

    kind: Literal["replay"] = "replay"

    def __init__(self, rec: Recording, speed: float = 1.0) -> None:
        self.recording = rec
        self.replay = Replay(rec)
        self.model = self.replay.model
        self.space = self.model.space
        self.player = Player(self.replay, speed)
        self.operator = ReplayOperator()
        self.target = None
        self.managed = None
        self.health = None  # a replay probes no plane
        self.seat_sessions = None
        self.recorder: Any = None  # a replay is never recorded again
        self.notifier: Any = None
        self.skills: dict[str, list[tuple[str, str]]] = {}
        self.started = False
        self.on_stop: list[Callable[[], None]] = []
        self._task: asyncio.Task | None = None
        self._hand: list[Marker] = list(rec.marks)
        self._auto: list[Marker] = []
        self.markers_ready = False  # the automatic markers are derived (a worker sets them)
        self.markers: list[Marker] = sorted(self._hand)
        self.find_query = ""  # the replay's ``/``: the text last found, and its matches
        self.find_matches: list | None = None

    # -- markers (meshview/record/markers.py) --------------------------------------------------------

    def set_auto_markers(self, found: list[Marker]) -> None:
        self._auto = list(found)
        self.markers_ready = True
        self.markers = sorted(self._hand + self._auto)

    def marker_near(self, delta: int) -> Marker | None:
        """The first marker after (``delta`` > 0) or before the replay's time (one the replay
        stands on is neither, so repeated presses walk the list)."""
        now = self.replay.now
        if delta > 0:
            return next((m for m in self.markers if m.t > now + 1), None)
        return next((m for m in reversed(self.markers) if m.t < now - 1), None)

    def add_mark(self, label: str) -> tuple[Marker, str | None]:
        """A hand marker at the replay's time, stored at the end of the newest recording file;
        (the marker, why it could not be stored or None)."""
        problem = None
        path = self.recording.paths[-1] if self.recording.paths else None
        m = Marker(self.replay.now, "mark", clean_label(label))  # kept here whatever the file says
        if self.recording.damage:
            problem = "the recording is damaged"
        elif path is None:
            problem = "no recording file"
        else:
            try:
                m = append_mark(path, self.replay.now, label)
            except OSError as e:
                problem = f"cannot write {path}: {e.strerror or e}"
        self._hand.append(m)
        self.markers = sorted(self._hand + self._auto)
        return m, problem

    async def start(self) -> None:
        self.started = True
        self.player.rebase()
        self._task = asyncio.create_task(self.player.run(), name="replay:player")

    async def read_activity(self, agent_id: str, limit: int) -> ActivityRead:
        """The activity lens's history read, from the recording as played so far: the agent's
        own frames among the model's feed rows (no mesh behind a replay)."""
        return ActivityRead(frames_of(self.model.snapshot().feed, agent_id, limit))

    async def stop(self) -> None:
        self.started = False
        if self._task is not None:
            await reap([self._task])
            self._task = None
        for hook in list(self.on_stop):
            hook()
