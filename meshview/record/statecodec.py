"""The model's state as JSON: a tagged encoding for checkpoints and recorded inputs, and the
versioned state schema a checkpoint is written in.

JSON has no tuples, sets, non-string keys or classes; the model's state has all of them. A
value that is not plain JSON becomes a one-key object whose key starts with ``$``. Classes are
named by module and qualified name and must come from ``meshview``: reading a recording can only
ever construct the model's own value types (no pickle: a shared recording runs no code).

A checkpoint is :class:`~meshview.model.state.ModelState` (the model's declared state):
``{"v": STATE_VERSION, field: value, ...}``, one entry per field, a part that is a declared
dataclass written as its fields (no class name), so the format names what the state is, not how
the model spells its attributes. Older schemas are read into the same type: version 2 (a table
of the model's attributes) through :data:`V2_FIELDS`, version 1 (``vars(model)``, recording
format 1) through :data:`V1_FIELDS`.

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections import OrderedDict, abc, deque
from functools import lru_cache
from typing import Any, Callable, get_type_hints

import msgspec

from meshview.model.feedring import FeedRing
from meshview.model.mesh import MeshModel
from meshview.model.state import STATE_VERSION, Burst, ModelState
from meshview.model.traffic import DmRollup, HopLog


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
        out = {}
        for k, x in v.items():
            if type(k) is not str or k[:1] == "$":
                return {"$d": [[encode(k), encode(x)] for k, x in v.items()]}
            tx = type(x)  # scalars inline: inputs are mostly flat keyword arguments
            out[k] = x if tx is str or tx is int or tx is bool or x is None else encode(x)
        return out
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
    # an object with state of its own says it (``state()``): never its attributes
    raise TypeError(f"cannot record a {t.__module__}.{t.__qualname__}")


def _class_name(t: type) -> str:
    mod = t.__module__
    if not (mod == "meshview" or mod.startswith("meshview.")):
        raise TypeError(f"cannot record a {mod}.{t.__qualname__}")
    return f"{mod}:{t.__qualname__}"


# a class a recording of then names by a name it no longer has (format 1 names every object)
RENAMED = {"meshview.traffic:TopologyFold": "meshview.traffic:HopLog",
           "meshview.model:_Burst": "meshview.model.state:Burst"}

# the modules recordings made before meshview was grouped into folders name their classes by
# (issue 36): a recording names ``meshview.snapshot:FeedEntry``, the class now lives in
# ``meshview.model.snapshot``
MOVED = {f"meshview.{old}": f"meshview.{new}" for old, new in (
    ("model", "model.mesh"), ("roster", "model.roster"), ("feedring", "model.feedring"),
    ("snapshot", "model.snapshot"), ("traffic", "model.traffic"), ("runs_state", "model.runs_state"),
    ("stalled", "model.stalled"), ("topology", "model.topology"), ("inputs", "model.inputs"),
    ("labels", "model.labels"), ("originals", "model.originals"), ("resolve", "model.resolve"),
    ("markers", "record.markers"), ("seatreplay", "record.seatreplay"), ("notify", "lines.notify"),
    ("send", "act.send"), ("sanitize", "wire.sanitize"),
)}


@lru_cache(maxsize=256)  # a replay names a few classes once per input: look each up once
def _class(name: str) -> type:
    mod, _, qual = RENAMED.get(str(name), str(name)).partition(":")
    mod = MOVED.get(mod, mod)
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
        if not dataclasses.is_dataclass(cls):  # format 1 named the attributes of our objects:
            from_v1 = _V1_OBJECTS.get(cls)  # the class itself reads its names of then
            if from_v1 is None:
                raise ValueError(f"not a recorded value type: {v['$o']!r}")
            return from_v1(fields)
        obj = cls.__new__(cls)
        for k, x in fields.items():
            object.__setattr__(obj, k, x)  # frozen dataclasses included: restored, not built
        for f in dataclasses.fields(cls):  # written before a field existed: its default
            if f.name not in fields:
                if f.default is not dataclasses.MISSING:
                    object.__setattr__(obj, f.name, f.default)
                elif f.default_factory is not dataclasses.MISSING:
                    object.__setattr__(obj, f.name, f.default_factory())
        return obj
    # a plain dict whose first key happens to start with "$" is always written as "$d"
    raise ValueError(f"unknown tag {next(iter(v))!r}")


def _key(k: Any) -> Any:
    return tuple(_key(x) for x in k) if isinstance(k, list) else k




# --------------------------------------------------------------------------- the state schema

# the classes format 1 wrote by their attributes, each reading its own names of then
_V1_OBJECTS: dict[type, Callable[[dict[str, Any]], Any]] = {
    FeedRing: FeedRing.from_v1, DmRollup: DmRollup.from_v1, HopLog: HopLog.from_v1,
}

_HINTS = get_type_hints(ModelState)
_FIELDS = tuple(f.name for f in dataclasses.fields(ModelState) if f.name != "version")


def _declared(x: Any) -> dict[str, Any]:
    """A declared part as its fields (its type is the schema's, so no class name)."""
    return {f.name: encode(getattr(x, f.name)) for f in dataclasses.fields(x)}


def _undeclared(cls: type, v: dict[str, Any]) -> Any:
    """A declared part back from its fields; one written before a field existed: its default."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: decode(x) for k, x in v.items() if k in names})


def _encode_field(name: str, x: Any) -> Any:
    if name == "bursts":
        return [_declared(b) for b in x]
    return _declared(x) if dataclasses.is_dataclass(_HINTS[name]) else encode(x)


def _decode_field(name: str, v: Any) -> Any:
    if name == "bursts":
        return [_undeclared(Burst, b) for b in v]
    cls = _HINTS[name]
    return _undeclared(cls, v) if isinstance(cls, type) and dataclasses.is_dataclass(cls) else decode(v)


def encode_state(st: ModelState) -> dict[str, Any]:
    """A :class:`ModelState` as JSON: ``"v"`` and one entry per field."""
    out: dict[str, Any] = {"v": st.version}
    for name in _FIELDS:
        out[name] = _encode_field(name, getattr(st, name))
    return out


def checkpoint(model: MeshModel) -> dict[str, Any]:
    """The model's state in the current schema (``"v"`` and one entry per ModelState field)."""
    return encode_state(model.state())


# Version 2 checkpoints: each entry, by its name there, and where it lives in ModelState (a part
# and its field, or a field). Written out: renaming a field of ModelState must not change what
# an old checkpoint means; map it here.
V2_FIELDS: dict[str, tuple[str, ...]] = {
    "space": ("space",), "feed_cap": ("feed_cap",), "ttl_ms": ("ttl_ms",),
    "burst_ms": ("burst_ms",), "version": ("changes",), "feed": ("feed",),
    "bursts": ("bursts",),
    **{k: ("roster", k) for k in ("peers", "names", "agent_ids", "endpoint_ids", "peer_ids",
                                  "spans", "watch_last", "initial_load")},
    "roster_changed": ("roster", "changed"),
    **{k: ("channels", k) for k in ("registry", "defaults", "retained", "arrivals",
                                    "arrivals_at_poll")},
    "chan_last": ("channels", "last"),
    "dms": ("dms",), "topology": ("topology",),
    **{k: ("rates", k) for k in ("buckets", "bucket_start", "recent", "total")},
    "rate_origin": ("rates", "origin"),
    "rejections": ("rejections",), "cuts": ("cuts",),
    "membership_members": ("membership", "members"),
    "membership_feed_at": ("membership", "feed_at"),
    "membership_read": ("membership", "read"),
    "membership_unreadable": ("membership", "unreadable"),
    "managers": ("managers",), "status": ("status",), "runs": ("runs",),
}

# Version 1 checkpoints were ``vars(model)``: the attributes the model had then (plus ``dirty``,
# which restoring always sets), each in the tagged encoding; by each, the version 2 entry it
# is (None: derived from the rest, not read).
V1_FIELDS: dict[str, str | None] = {
    "space": "space", "feed_cap": "feed_cap", "ttl_ms": "ttl_ms", "burst_ms": "burst_ms",
    "version": "version", "_ring": "feed", "_bursts": "bursts", "_peers": "peers",
    "_roster_changed": "roster_changed", "_agents": None, "_endpoints": None,
    "_agent_ids": "agent_ids", "_endpoint_ids": "endpoint_ids", "_peer_ids": "peer_ids",
    "_spans": "spans", "_names": "names", "_watch_last": "watch_last",
    "_initial_load": "initial_load", "_registry": "registry", "_defaults": "defaults",
    "_retained": "retained", "_arrivals": "arrivals", "_arrivals_at_poll": "arrivals_at_poll",
    "_chan_last": "chan_last", "_dms": "dms", "_topology": "topology", "_buckets": "buckets",
    "_bucket_start": "bucket_start", "_recent": "recent", "_rate_origin": "rate_origin",
    "_total": "total", "_rejections": "rejections",
    "_membership_members": "membership_members", "_membership_feed_at": "membership_feed_at",
    "_membership_read": "membership_read", "_membership_unreadable": "membership_unreadable",
    "_managers": "managers", "_status": "status",
}


def _v1_value(name: str, x: Any) -> Any:
    """A version 1 attribute's value as version 2 held it (objects by their ``state()``)."""
    if name in ("feed", "dms", "topology"):
        return x.state()
    if name == "bursts":
        return list(x.values())
    return x


def _read_old(state: dict[str, Any], v: int) -> dict[tuple[str, ...], Any]:
    """A version 1 or 2 checkpoint's entries by where they live in ModelState, decoded."""
    named: dict[str, Any]
    if v == 1:
        named = {}
        for k, x in state.items():
            name = V1_FIELDS.get(k)
            if name is not None:
                named[name] = _v1_value(name, decode(x))
    else:
        named = {k: [Burst(**decode(b)) for b in x] if k == "bursts" else decode(x)
                 for k, x in state.items() if k in V2_FIELDS}
    return {V2_FIELDS[k]: x for k, x in named.items()}


def read_state(state: dict[str, Any], base: ModelState) -> ModelState:
    """A checkpoint of any schema as a :class:`ModelState`; what it lacks (an older model)
    is ``base``'s (a fresh model's)."""
    v = state.get("v", 1)
    if type(v) is not int or not 1 <= v <= STATE_VERSION:
        raise ValueError(f"a checkpoint in state schema {v!r} (this reads 1 to {STATE_VERSION})")
    found: dict[tuple[str, ...], Any]
    if v == STATE_VERSION:
        found = {(k,): _decode_field(k, state[k]) for k in _FIELDS if k in state}
    else:
        found = _read_old(state, v)
    top: dict[str, Any] = {}
    parts: dict[str, dict[str, Any]] = {}
    for path, x in found.items():
        if len(path) == 1:
            top[path[0]] = x
        else:
            parts.setdefault(path[0], {})[path[1]] = x
    for part, changes in parts.items():
        top[part] = dataclasses.replace(top.get(part, getattr(base, part)), **changes)
    return dataclasses.replace(base, **top, version=STATE_VERSION)


def restore(model: MeshModel, state: dict[str, Any]) -> None:
    """Put ``state`` (from :func:`checkpoint`, any version) into ``model`` in place. Fields the
    checkpoint lacks (an older model) keep a fresh model's defaults. ``version`` only grows, so
    a console holding the model sees the change. The input tap and the clock stay as they are."""
    fresh = MeshModel(model.space, clock=model.clock, feed_cap=model.feed_cap,
                      ttl_ms=model.ttl_ms, burst_ms=model.burst_ms)
    model.restore(read_state(state, fresh.state()))
