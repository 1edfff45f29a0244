"""Record & replay: the model's inputs to a gzip JSON Lines file, and back into a model.

A recording holds what the observer fed one :class:`~meshview.model.MeshModel` (every accepted
message, presence change, manager lifecycle, registry and connection-state input), each with its
receipt time, plus periodic checkpoints of the whole model state. Replaying applies the same
inputs, at the same model-clock times, to a fresh model: the model is pure, so the replayed feed,
roster and NEEDS-YOU are the live ones. No broker is involved (DESIGN.md: the model must never
need a broker to be driven). Lifecycle rows derived from presence (join, crash, new incarnation)
are not stored: the model derives them again.

File: gzip, one JSON object per line. ``header`` first (format, version, space, the model's
parameters, the recording id and segment number), then ``checkpoint`` lines (``state``: the model's
attributes in a tagged JSON encoding, see :func:`encode`) and ``in`` lines (``t`` receipt time in
epoch ms, ``op`` the model method, ``k`` its category, ``a``/``kw`` its arguments). The writer
flushes a gzip sync point every second, so a recording cut off by a crash reads up to the last
second; a damaged one replays up to the damage and says so in one sentence.

Bounded: a segment rotates at half of ``max_size`` (the full one becomes ``FILE.1``, replacing an
older one), and every segment starts with a checkpoint, so either replays on its own and the two
replay as one. Nothing here records a credential: inputs are mesh data and the server as
``Target.display`` shows it; connection strings in state lines are scrubbed anyway.

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import gzip
import importlib
import json
import math
import os
import re
import time
import uuid
import weakref
import zlib
from collections import OrderedDict, abc, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import msgspec

from meshview.model import MeshModel

FORMAT = "cotal-recording"
VERSION = 1
MAX_SIZE = 100 * 1024 * 1024  # default bound of a recording on disk (both segments)
CHECKPOINT_S = 60.0  # a checkpoint per minute of recording (seeking back restores the nearest)
FLUSH_S = 1.0  # a gzip sync point at least this often: a crash loses at most this much

# Every public method of MeshModel that changes its state, with the category written beside it.
# Reads are listed in READS; tests/test_record.py fails when a method is in neither, so a new
# reducer cannot silently go unrecorded.
INPUTS: dict[str, str] = {
    "apply_message": "message",
    "flush_bursts": "message",
    "apply_rejection": "reject",
    "apply_presence": "presence",
    "apply_presence_delete": "presence",
    "presence_resync": "presence",
    "watch_delivered": "presence",
    "grace": "presence",
    "end_initial_load": "presence",
    "sweep": "presence",
    "apply_manager": "lifecycle",
    "set_channel_registry": "channels",
    "set_retained_counts": "channels",
    "set_membership": "channels",
    "set_membership_unreadable": "channels",
    "set_connection": "state",
    "set_tap": "state",
    "set_backlog": "state",
    "set_server": "state",
    "set_warning": "state",
    "tick": "time",
}
# methods that only forward to recorded inputs (recording them too would apply twice)
FORWARDS = frozenset({"apply_history", "manager_resync"})
READS = frozenset({
    "snapshot", "take_events", "entry", "seen", "name_of", "peer", "effective",
    "replay_floor", "rejection_count",
})
# recorded only when they changed something (the observer calls them ~13 times a second)
QUIET = frozenset({"tick", "sweep", "flush_bursts"})
# what a visible "event" is for stepping through a replay (←/→)
EVENT_KINDS = frozenset({"message", "presence", "lifecycle"})
NOT_STATE = frozenset({"clock", "_snap", "_events", "record_events", "events_dropped"})


class RecordingError(Exception):
    """A recording that cannot be read at all (one sentence)."""


# --------------------------------------------------------------------------- tagged JSON codec
# JSON has no tuples, sets, non-string keys or classes; the model's state has all of them. A
# value that is not plain JSON becomes a one-key object whose key starts with "$". Classes are
# named by module and qualified name and must come from ``meshview``: reading a recording can
# only ever construct the model's own value types (no pickle: a shared recording runs no code).


def encode(v: Any) -> Any:
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return v if math.isfinite(v) else {"$f": repr(v)}
    if t is list:
        return [encode(x) for x in v]
    if t is tuple:
        return {"$t": [encode(x) for x in v]}
    if t is dict:
        if all(type(k) is str and not k.startswith("$") for k in v):
            return {k: encode(x) for k, x in v.items()}
        return {"$d": [[encode(k), encode(x)] for k, x in v.items()]}
    if t is OrderedDict:
        return {"$od": [[encode(k), encode(x)] for k, x in v.items()]}
    if t is deque:
        return {"$q": [encode(x) for x in v], "m": v.maxlen}
    if t is set or t is frozenset:
        return {"$s": [encode(x) for x in v]}
    if t is bytes:
        return {"$b": v.hex()}
    if v is msgspec.UNSET:
        return {"$u": 0}
    if isinstance(v, dict):  # a dict subclass of ours (read-only names)
        return {"$o": _class_name(t), "d": [[encode(k), encode(x)] for k, x in v.items()]}
    if isinstance(v, abc.Set):  # dict key views and the like, handed to a reducer
        return {"$s": [encode(x) for x in v]}
    if isinstance(v, msgspec.Struct):
        return {"$o": _class_name(t),
                "f": {n: encode(getattr(v, n)) for n in t.__struct_fields__}}
    if dataclasses.is_dataclass(v):
        return {"$o": _class_name(t),
                "f": {f.name: encode(getattr(v, f.name)) for f in dataclasses.fields(v)}}
    return {"$o": _class_name(t), "f": {n: encode(x) for n, x in _attrs(v)}}


def _attrs(obj: Any) -> Iterator[tuple[str, Any]]:
    """An object's own attributes: its ``__dict__`` and every ``__slots__`` entry."""
    seen = set()
    for k, x in getattr(obj, "__dict__", {}).items():
        seen.add(k)
        yield k, x
    for klass in type(obj).__mro__:
        for k in getattr(klass, "__slots__", ()):
            if k not in seen and k not in ("__dict__", "__weakref__") and hasattr(obj, k):
                seen.add(k)
                yield k, getattr(obj, k)


def _class_name(t: type) -> str:
    mod = t.__module__
    if not (mod == "meshview" or mod.startswith("meshview.")):
        raise TypeError(f"cannot record a {mod}.{t.__qualname__}")
    return f"{mod}:{t.__qualname__}"


def _class(name: str) -> type:
    mod, _, qual = str(name).partition(":")
    if not (mod == "meshview" or mod.startswith("meshview.")) or not qual:
        raise ValueError(f"not a model type: {name!r}")
    obj: Any = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise ValueError(f"not a model type: {name!r}")
    return obj


def decode(v: Any) -> Any:
    t = type(v)
    if t is list:
        return [decode(x) for x in v]
    if t is not dict:
        return v
    if not v or not next(iter(v)).startswith("$"):
        return {k: decode(x) for k, x in v.items()}
    if "$t" in v:
        return tuple(decode(x) for x in v["$t"])
    if "$d" in v:
        return {_key(decode(k)): decode(x) for k, x in v["$d"]}
    if "$od" in v:
        return OrderedDict((_key(decode(k)), decode(x)) for k, x in v["$od"])
    if "$q" in v:
        return deque((decode(x) for x in v["$q"]), maxlen=v.get("m"))
    if "$s" in v:
        return {_key(decode(x)) for x in v["$s"]}
    if "$f" in v:
        return float(v["$f"])
    if "$b" in v:
        return bytes.fromhex(v["$b"])
    if "$u" in v:
        return msgspec.UNSET
    if "$o" in v:
        cls = _class(v["$o"])
        if "d" in v:
            return cls((_key(decode(k)), decode(x)) for k, x in v["d"])
        fields = {k: decode(x) for k, x in v.get("f", {}).items()}
        if issubclass(cls, msgspec.Struct):
            return cls(**fields)
        obj = cls.__new__(cls)
        for k, x in fields.items():
            object.__setattr__(obj, k, x)  # frozen dataclasses included: restored, not built
        return obj
    # a plain dict whose first key happens to start with "$" is always written as "$d"
    raise ValueError(f"unknown tag {next(iter(v))!r}")


def _key(k: Any) -> Any:
    return tuple(_key(x) for x in k) if isinstance(k, list) else k


# --------------------------------------------------------------------------- checkpoints


def checkpoint(model: MeshModel) -> dict[str, Any]:
    """The model's whole state (its attributes, minus the clock, caches and the event queue)."""
    return {k: encode(v) for k, v in vars(model).items()
            if k not in NOT_STATE and not k.startswith("__") and not callable(v)}


def restore(model: MeshModel, state: dict[str, Any]) -> None:
    """Put ``state`` (from :func:`checkpoint`) into ``model`` in place. Attributes the checkpoint
    lacks (a newer model) keep a fresh model's defaults. ``version`` only grows, so a console
    holding the model sees the change."""
    prev_version = model.version
    fresh = MeshModel(model.space, clock=model.clock, feed_cap=model.feed_cap,
                      ttl_ms=model.ttl_ms, burst_ms=model.burst_ms,
                      record_events=model.record_events)
    for k, v in vars(fresh).items():
        if k not in NOT_STATE:
            setattr(model, k, v)
    for k, v in state.items():
        if k not in NOT_STATE and not k.startswith("__"):
            setattr(model, k, decode(v))
    model.version = max(prev_version, model.version) + 1
    model.dirty = True
    model._snap = None
    model._events.clear()


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
    if op in ("set_warning", "set_connection", "set_server"):
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


_ACTIVE: weakref.WeakKeyDictionary[MeshModel, Recorder] = weakref.WeakKeyDictionary()


def active_recorder(model: MeshModel) -> Recorder | None:
    """The recorder currently recording ``model``, if any."""
    r = _ACTIVE.get(model)
    return r if r is not None and not r.closed else None


class Recorder:
    """Records every input of ``model`` to ``path`` from now until :meth:`close`.

    It wraps the model's input methods on this instance only; only the outermost call is
    written (a reducer calling another is one input), with the model's clock held at the call's
    receipt time so the same call replays identically. A write error stops the recording with
    :attr:`error` set: it never reaches the observer or the console."""

    def __init__(self, model: MeshModel, path: str, *, max_size: int = MAX_SIZE,
                 checkpoint_s: float = CHECKPOINT_S, server: str | None = None) -> None:
        self.model = model
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
        self._depth = 0
        self._frozen: float | None = None
        self._last_flush = 0.0
        self._last_checkpoint = 0.0
        self._clock = model.clock
        self._wrapped: list[str] = []
        if active_recorder(model) is not None:
            self.error = f"already recording to {_ACTIVE[model].path}"
            self.closed = True
            return
        try:
            self._open()
        except OSError as e:
            self.error = f"cannot record to {self.path}: {e.strerror or e}"
            self.closed = True
            return
        _ACTIVE[model] = self
        model.clock = self._model_clock
        for name in INPUTS:
            orig = getattr(model, name)
            setattr(model, name, self._wrap(name, orig))
            self._wrapped.append(name)

    # -- the model side ---------------------------------------------------------------------

    def _model_clock(self) -> float:
        f = self._frozen
        return self._clock() if f is None else f

    def _wrap(self, name: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        model = self.model

        def call(*args: Any, **kw: Any) -> Any:
            if self._depth or self.closed:
                return orig(*args, **kw)
            t = self._clock()
            args = [list(a) if isinstance(a, Iterator) else a for a in args]
            kw = {k: list(v) if isinstance(v, Iterator) else v for k, v in kw.items()}
            before = model.version
            self._depth += 1
            self._frozen = t
            try:
                result = orig(*args, **kw)
            finally:
                self._frozen = None
                self._depth -= 1
            changed = model.version != before
            if not (name in QUIET and not changed) and not (name == "apply_message"
                                                            and result is False):
                self._write_input(t, name, args, kw)
            self._housekeep(t)
            return result

        return call

    def _write_input(self, t: float, op: str, args: list, kw: dict) -> None:
        args, kw = _scrub_state(op, args, kw)
        line: dict[str, Any] = {"type": "in", "t": t, "op": op, "k": INPUTS[op]}
        try:
            if args:
                line["a"] = encode(args)
            if kw:
                line["kw"] = encode(kw)
            self._write(line)
        except Exception as e:  # noqa: BLE001 - a recording problem never breaks the model
            self._fail(e)
            return
        self.inputs += 1
        self._seg_inputs += 1

    def _housekeep(self, t: float) -> None:
        if self.closed:
            return
        try:
            if t - self._last_checkpoint >= self.checkpoint_s * 1000.0:
                self._write_checkpoint(t)
            if self._seg_inputs and self._raw.tell() >= self.max_size // 2:
                self._rotate(t)
            if time.monotonic() - self._last_flush >= FLUSH_S:
                self.flush()
        except Exception as e:  # noqa: BLE001
            self._fail(e)

    # -- the file side ----------------------------------------------------------------------

    def _open(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._raw = os.fdopen(fd, "wb")
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=6, mtime=0)
        self._seg_inputs = 0
        m = self.model
        self._write({
            "type": "header", "format": FORMAT, "version": VERSION, "recording": self.id,
            "segment": self.segment, "space": m.space, "server": scrub(self.server or ""),
            "started": self._clock(),
            "model": {"feed_cap": m.feed_cap, "ttl_ms": m.ttl_ms, "burst_ms": m.burst_ms},
        })
        self._write_checkpoint(self._clock())
        self.flush()

    def _write(self, obj: dict[str, Any]) -> None:
        assert self._gz is not None
        self._gz.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode())
        self._gz.write(b"\n")

    def _write_checkpoint(self, t: float) -> None:
        self._last_checkpoint = t
        self._write({"type": "checkpoint", "t": t, "state": checkpoint(self.model)})

    def _rotate(self, t: float) -> None:
        self._close_file()
        self.written += os.path.getsize(self.path)
        os.replace(self.path, self.path + ".1")
        self.segment += 1
        self._open()

    def flush(self) -> None:
        """A gzip sync point: everything so far is readable even if we die now."""
        if self._gz is not None and not self.closed:
            self._gz.flush(zlib.Z_SYNC_FLUSH)
            self._raw.flush()
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
        self.error = f"recording stopped: {getattr(e, 'strerror', None) or e}"
        self.close()

    @property
    def size(self) -> int:
        """Compressed bytes on disk so far (the current segment and rotated ones)."""
        try:
            cur = self._raw.tell() if self._raw is not None else os.path.getsize(self.path)
        except (OSError, ValueError):
            cur = 0
        return self.written + cur

    def close(self) -> None:
        """Stop recording: unwrap the model and finish the file (idempotent)."""
        if self.closed and self._gz is None:
            return
        self.closed = True
        if _ACTIVE.get(self.model) is self:
            del _ACTIVE[self.model]
        for name in self._wrapped:
            self.model.__dict__.pop(name, None)
        self._wrapped.clear()
        if self.model.__dict__.get("clock") is self._model_clock:
            self.model.clock = self._clock
        try:
            self._close_file()
        except OSError as e:
            self.error = self.error or f"recording not finished: {e.strerror or e}"

    def summary(self) -> str:
        return f"{self.path} ({self.inputs} inputs, {human_size(self.size)})"


# --------------------------------------------------------------------------- reading


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

    @property
    def start(self) -> float:
        return self.checkpoints[0][1] if self.checkpoints else float(self.header.get("started", 0))

    @property
    def end(self) -> float:
        return self.entries[-1].t if self.entries else self.start


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
            except (KeyError, TypeError, ValueError):
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
    return (f"{os.path.basename(path)} is damaged ({why}): replaying the first {span} "
            f"({len(rec.entries)} inputs), up to the damage.")


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
                and prev.header.get("segment") == rec.header.get("segment") - 1):
            base = len(prev.entries)
            prev.entries += rec.entries
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
        marks, last = [], {}
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
        return self._times[self.limit - 1] if self.limit else self.rec.start

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
            getattr(self.model, e.op)(*args, **kw)
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
            self.model._touch()  # ages shown move with replay time, once a second

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
        else:
            k = bisect.bisect_left(marks, cur) - 1
            if k < 0:
                self.seek(self.start)
                return
            target = marks[k]
        self.apply_until(target + 1)
        self.now = self.rec.entries[target].t
        self.model._touch()

    def event_number(self) -> tuple[int, int]:
        """(events applied so far, events in the recording)."""
        marks = self.marks
        return bisect.bisect_left(marks, self.pos), len([m for m in marks if m < self.limit])


def _visible(e: Entry, last: dict[str, tuple]) -> bool:
    """Whether an input shows as an event: a message, a lifecycle change, a presence record
    that changed what the roster says (heartbeat rewrites and watch bookkeeping do not)."""
    if e.op in ("apply_message", "apply_manager", "apply_presence_delete"):
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


class ReplaySession:
    """What the console needs from a session (``model``, ``start``, ``stop``), fed by a
    recording instead of an observer. ``player`` pauses, steps and seeks."""

    started = False
    managed = None
    skills: dict = {}

    def __init__(self, rec: Recording, speed: float = 1.0) -> None:
        self.recording = rec
        self.replay = Replay(rec)
        self.model = self.replay.model
        self.space = self.model.space
        self.player = Player(self.replay, speed)
        self.operator = ReplayOperator()
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        self.started = True
        self.player.rebase()
        self._task = asyncio.create_task(self.player.run(), name="replay:player")

    async def stop(self) -> None:
        self.started = False
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
