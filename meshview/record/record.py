"""Record & replay: the model's inputs to a gzip JSON Lines file, and back into a model.

A recording holds what the observer fed one :class:`~meshview.model.mesh.MeshModel` (every accepted
message, presence change, manager lifecycle, registry and connection-state input), each with its
receipt time, plus periodic checkpoints of the whole model state. Replaying applies the same
inputs, at the same model-clock times, to a fresh model: the model is pure, so the replayed feed,
roster and NEEDS-YOU are the live ones. No broker is involved (DESIGN.md: the model must never
need a broker to be driven). Lifecycle rows derived from presence (join, crash, new incarnation)
are not stored: the model derives them again.

File: gzip, one JSON object per line. ``header`` first (format, version, space, the model's
parameters, the recording id and segment number), then ``checkpoint`` lines (``state``: the model's
versioned state schema, meshview/record/statecodec.py) and ``in`` lines (``t`` receipt time in epoch ms,
``op`` the model input, one of meshview/model/inputs.py ``INPUTS``, ``k`` its category, ``a``/``kw`` its
arguments in the tagged JSON; a message is one ``meshview.wire.decode:Applied`` in ``a``). Format
versions 1 (checkpoints of the model's attributes) and 2 (a message as keyword arguments) still
replay. The writer flushes a gzip sync point every second, so a recording cut off by a crash
reads up to the last second; a damaged one replays up to the damage and says so in one sentence.

Seat terminals (``cotal watch --record-seats``): ``seat`` lines hold what the operator's panes
were shown (``seat`` name, ``ev``: ``open``/``reset`` a fresh screen of ``cols``×``rows``, ``out``
output bytes (``u`` when valid UTF-8, else ``b64``), ``size`` a resize, ``snap`` a snapshot that rebuilds the screen, ``note``,
``end``), stamped on the model's clock so they interleave with the inputs. Never keystrokes: the
writer has no way to be given one. :attr:`Recorder.on_segment` runs after each rotation so a new
segment starts each open seat with a ``snap`` (or a ``note`` saying it resumes mid-stream).

Bounded: a segment rotates at half of ``max_size`` (the full one becomes ``FILE.1``, replacing an
older one), and every segment starts with a checkpoint, so either replays on its own and the two
replay as one. Nothing here records a credential: inputs are mesh data and the server as
``ConnectTarget.display`` shows it; connection strings in state lines are scrubbed anyway.

Reading and playing back: meshview/record/replay.py. No Textual or Rich import (the model layer).
"""

from __future__ import annotations

import base64
import gzip
import os
import re
import time
import uuid
import weakref
import zlib
from typing import Any, Callable

import msgspec

from meshview.errors import swallowed
from meshview.model.inputs import InputCall
from meshview.model.mesh import MeshModel
from meshview.record.statecodec import checkpoint, encode
from meshview.wire.decode import Applied

FORMAT = "cotal-recording"
# 2: versioned checkpoints (meshview/record/statecodec.py) and ``refresh_clocks`` inputs;
# 3: ``apply_message`` holds one ``Applied`` value (the keyword form replays: replay.upgraded)
VERSION = 3
MAX_SIZE = 100 * 1024 * 1024  # default bound of a recording on disk (both segments)
CHECKPOINT_S = 60.0  # a checkpoint per minute of recording (seeking back restores the nearest)
FLUSH_S = 1.0  # a gzip sync point at least this often: a crash loses at most this much
SYNC_BYTES = 32 * 1024  # ... and at least every this many bytes written
LEVEL = 6  # gzip level of a recording
SEAT_LEVEL = 1  # ... with seat terminals: output dominates; 3x faster, files ~30 % bigger

# recorded only when they changed something (the observer calls the first three ~13 times a
# second; ``refresh_clocks`` declines, unchanged, when the full record must be applied)
QUIET = frozenset({"tick", "sweep", "flush_bursts", "refresh_clocks"})
# what a visible "event" is for stepping through a replay (←/→)
EVENT_KINDS = frozenset({"message", "presence", "lifecycle"})


# --------------------------------------------------------------------------- writing

_URL_CREDS = re.compile(r"([a-zA-Z][\w+.-]*://)[^/@\s]+@")
_SEED = re.compile(r"\bS[A-Z][A-Z2-7]{54,}\b")  # nkey seeds: SU…, SA…, SO…
_JWT = re.compile(r"\beyJ[\w-]+\.[\w-]+\.[\w-]*")


def scrub(s: str) -> str:
    """A connection-state string with anything credential-shaped masked."""
    s = _URL_CREDS.sub(r"\1***@", s)
    s = _SEED.sub("***", s)
    return _JWT.sub("***", s)


def _scrub_state(op: str, args: list, kw: dict) -> tuple[list, dict]:
    if op in ("set_warning", "set_connection", "set_server", "set_listener_errors"):
        args = [scrub(a) if isinstance(a, str) else a for a in args]
        kw = {k: scrub(v) if isinstance(v, str) else v for k, v in kw.items()}
    return args, kw


def parse_size(text: str) -> int:
    """``100M``, ``1.5G``, ``512k`` or a plain byte count."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)[iI]?[bB]?\s*", str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (try 100M)")
    n = float(m.group(1)) * {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}[m.group(2).lower()]
    if n < 64 * 1024:
        raise ValueError(f"a recording needs at least 64k, got {text}")
    return int(n)


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


_APPLIED_NAME = f"{Applied.__module__}:{Applied.__qualname__}"
_APPLIED_FIELDS = msgspec.structs.fields(Applied)


def _applied(v: Applied) -> dict[str, Any]:
    """A message as the tagged encoding writes a Struct, less the fields still at their default
    (a decode gives them back): a line holds what the message says, and replays faster."""
    out: dict[str, Any] = {}
    for f in _APPLIED_FIELDS:
        x = getattr(v, f.name)
        if f.required or x != f.default:
            out[f.name] = encode(x)
    return {"$o": _APPLIED_NAME, "f": out}


_json = msgspec.json.Encoder().encode  # the tagged encoding leaves only JSON types (finite floats)


_ACTIVE: weakref.WeakKeyDictionary[MeshModel, Recorder] = weakref.WeakKeyDictionary()


def active_recorder(model: MeshModel) -> Recorder | None:
    """The recorder currently recording ``model``, if any."""
    r = _ACTIVE.get(model)
    return r if r is not None and not r.closed else None


class Recorder:
    """Records every input of ``model`` to ``path`` from now until :meth:`close`.

    It is the model's ``input_tap`` (meshview/model/inputs.py) until closed: the model hands it every
    outermost input call with its receipt time, and the clock held there during the call, so
    the same call replays identically. One recorder per model. A write error stops the
    recording with :attr:`error` set: it never reaches the observer or the console."""

    def __init__(self, model: MeshModel, path: str, *, max_size: int = MAX_SIZE,
                 checkpoint_s: float = CHECKPOINT_S, server: str | None = None,
                 seats: bool = False) -> None:
        self.model = model
        self.seats = bool(seats)  # seat terminal lines are written (see :meth:`seat`)
        # terminal output is most of a recording with seats: gzip's fastest level then
        self.level = SEAT_LEVEL if self.seats else LEVEL
        self.sync_bytes = SYNC_BYTES * (4 if self.seats else 1)  # (each sync costs a deflate flush)
        self.seat_lines = 0
        self.on_error: Callable[[str], None] | None = None  # told once, when recording stops
        self.on_segment: list[Callable[[], None]] = []  # after a rotation opened a new segment
        self._rotating = False
        self.path = str(path)
        self.max_size = int(max_size)
        self.checkpoint_s = float(checkpoint_s)
        self.server = server if server is not None else model.status.server
        self.id = uuid.uuid4().hex[:16]
        self.segment = 0
        self.inputs = 0  # inputs written, all segments
        self.written = 0  # compressed bytes of the rotated-out segments
        self.error: str | None = None
        self.closed = False
        self._raw: Any = None
        self._gz: gzip.GzipFile | None = None
        self._seg_inputs = 0
        self._pending = 0  # bytes written since the last sync point
        self._last_flush = 0.0
        self._last_checkpoint = 0.0
        self._tap = self._on_input  # one bound method: ``close`` clears only its own tap
        if active_recorder(model) is not None:
            self.error = f"already recording to {_ACTIVE[model].path}"
            self.closed = True
            return
        if model.input_tap is not None:
            self.error = "the model's inputs are tapped already"
            self.closed = True
            return
        try:
            self._open()
        except OSError as e:
            self.error = f"cannot record to {self.path}: {e.strerror or e}"
            self.closed = True
            return
        _ACTIVE[model] = self
        model.input_tap = self._tap

    # -- the model side ---------------------------------------------------------------------

    def _on_input(self, call: InputCall) -> None:
        """The tap: write the call (a quiet one only when it changed something, a duplicate
        message never), then checkpoint, rotate and flush as due."""
        if self.closed:
            return
        if not (call.name in QUIET and not call.changed) and not (
                call.name == "apply_message" and call.result is False):
            self._write_input(call.t, call.name, call.category, list(call.args), call.kw)
        self._housekeep(call.t)

    def _write_input(self, t: float, op: str, kind: str, args: list, kw: dict) -> None:
        args, kw = _scrub_state(op, args, kw)
        line: dict[str, Any] = {"type": "in", "t": t, "op": op, "k": kind}
        try:
            if args:
                line["a"] = ([_applied(args[0])] if type(args[0]) is Applied and len(args) == 1
                             else encode(args))
            if kw:
                line["kw"] = encode(kw)
            self._write(line)
        except Exception as e:  # noqa: BLE001 - a recording problem never breaks the model
            self._fail(e)
            return
        self.inputs += 1
        self._seg_inputs += 1

    def mark(self, label: str, *, kind: str = "mark") -> dict | None:
        """A marker at the model's clock: a hand one (the operator's ``m``) or ``action`` (an
        operator action from the action log); the line written, or None when not recording."""
        if self.closed:
            return None
        from meshview.record.markers import mark_line

        line = mark_line(self.model.clock(), label, kind=kind)
        try:
            self._write(line)
            self.flush()
        except Exception as e:  # noqa: BLE001 - a recording problem never breaks the console
            self._fail(e)
            return None
        return line

    def seat(self, name: str, ev: str, data: bytes = b"", *, cols: int | None = None,
             rows: int | None = None, text: str | None = None) -> None:
        """A seat terminal line (``--record-seats``): ``ev`` is ``open``/``reset``/``snap``/
        ``size`` (with ``cols``/``rows``), ``out`` (``data``, the bytes the pane was given),
        ``note`` (``text``) or ``end``. Every byte is kept: ``u`` when the bytes are valid
        UTF-8, else ``b64``."""
        if self.closed or not self.seats:
            return
        t = self.model.clock()
        line: dict[str, Any] = {"type": "seat", "t": t, "seat": name, "ev": ev}
        if cols is not None and rows is not None:
            line["cols"], line["rows"] = int(cols), int(rows)
        if data:
            try:  # UTF-8 text as it is (smaller and cheaper to compress), anything else base64
                line["u"] = data.decode("utf-8")
            except UnicodeDecodeError:
                line["b64"] = base64.b64encode(data).decode("ascii")
        if text:
            line["text"] = text
        try:
            self._write(line)
        except Exception as e:  # noqa: BLE001 - a recording problem never breaks a pane
            self._fail(e)
            return
        self.seat_lines += 1
        self._housekeep(t)

    def _housekeep(self, t: float) -> None:
        if self.closed or self._rotating:
            return
        try:
            if t - self._last_checkpoint >= self.checkpoint_s * 1000.0:
                self._write_checkpoint(t)
            size = self._raw.tell()
            # at half the bound; and never for a segment that is mostly its first checkpoint
            # (a model bigger than the bound would otherwise rotate on every input)
            if size >= self.max_size // 2 and size - self._seg_base >= self.max_size // 4:
                self._rotate(t)
            if time.monotonic() - self._last_flush >= FLUSH_S:
                self.flush()
                if os.fstat(self._raw.fileno()).st_nlink == 0:  # writing on into nothing
                    raise FileNotFoundError(f"{os.path.basename(self.path)} was removed")
        except Exception as e:  # noqa: BLE001
            self._fail(e)

    # -- the file side ----------------------------------------------------------------------

    def _open(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._raw = os.fdopen(fd, "wb")
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=self.level, mtime=0)
        self._seg_inputs = 0
        m = self.model
        self._write({
            "type": "header", "format": FORMAT, "version": VERSION, "recording": self.id,
            "segment": self.segment, "space": m.space, "server": scrub(self.server or ""),
            "started": m.clock(), "seats": self.seats,
            "model": {"feed_cap": m.feed_cap, "ttl_ms": m.ttl_ms, "burst_ms": m.burst_ms},
        })
        self._write_checkpoint(m.clock())
        self.flush()
        self._seg_base = self._raw.tell()  # the segment's header and first checkpoint

    def _write(self, obj: dict[str, Any]) -> None:
        assert self._gz is not None
        data = _json(obj) + b"\n"
        self._gz.write(data)
        self._pending += len(data)
        if self._pending >= self.sync_bytes:
            self.flush()  # the size on disk stays within a sync's worth of the truth

    def _write_checkpoint(self, t: float) -> None:
        self._last_checkpoint = t
        self._write({"type": "checkpoint", "t": t, "state": checkpoint(self.model)})

    def _rotate(self, t: float) -> None:
        self._close_file()
        self.written += os.path.getsize(self.path)
        os.replace(self.path, self.path + ".1")
        self.segment += 1
        self._open()
        self._rotating = True  # the seats' fresh starts below never rotate again
        try:
            for fn in list(self.on_segment):
                fn()
        finally:
            self._rotating = False

    def flush(self) -> None:
        """A gzip sync point: everything so far is readable even if we die now."""
        if self._gz is not None and not self.closed:
            self._gz.flush(zlib.Z_SYNC_FLUSH)
            self._raw.flush()
        self._pending = 0
        self._last_flush = time.monotonic()

    def _close_file(self) -> None:
        gz, raw, self._gz, self._raw = self._gz, self._raw, None, None
        try:
            if gz is not None:
                gz.close()
        finally:
            if raw is not None:
                raw.close()

    def _fail(self, e: Exception) -> None:
        if self.closed:
            return
        self.error = f"recording stopped: {getattr(e, 'strerror', None) or e}"
        self.close()
        if self.on_error is not None:
            try:
                self.on_error(self.error)
            except Exception:  # noqa: BLE001 - telling must not break the caller either [counted: COTAL_LOG]
                swallowed("meshview.record.record:Recorder._fail")

    @property
    def size(self) -> int:
        """Compressed bytes on disk so far (the current segment and rotated ones)."""
        try:
            cur = self._raw.tell() if self._raw is not None else os.path.getsize(self.path)
        except (OSError, ValueError):
            cur = 0
        return self.written + cur

    def close(self) -> None:
        """Stop recording: untap the model and finish the file (idempotent)."""
        if self.closed and self._gz is None:
            return
        self.closed = True
        if _ACTIVE.get(self.model) is self:
            del _ACTIVE[self.model]
        if self.model.input_tap is self._tap:
            self.model.input_tap = None
        try:
            self._close_file()
        except OSError as e:
            self.error = self.error or f"recording not finished: {e.strerror or e}"

    def summary(self) -> str:
        seats = f", {self.seat_lines} seat lines" if self.seats else ""
        return f"{self.path} ({self.inputs} inputs{seats}, {human_size(self.size)})"
