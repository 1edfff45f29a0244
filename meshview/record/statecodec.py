"""The model's state as JSON: a tagged encoding for checkpoints and recorded inputs, and the
versioned state schema a checkpoint is written in.

JSON has no tuples, sets, non-string keys or classes; the model's state has all of them. A
value that is not plain JSON becomes a one-key object whose key starts with ``$``. Classes are
named by module and qualified name and must come from ``meshview``: reading a recording can only
ever construct the model's own value types (no pickle: a shared recording runs no code).

A checkpoint is ``{"v": STATE_VERSION, field: value, ...}`` over the fields of :data:`STATE`, each
with its own encode/decode, so the format names what the state is, not how the model spells its
attributes; renaming an attribute changes one row of :data:`STATE`. A checkpoint without ``"v"``
is version 1 (recording format 1): the model's attributes as they were, read by
:func:`_restore_v1`.

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections import OrderedDict, abc, deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Iterator

import msgspec

from meshview.model.feedring import FeedRing
from meshview.model.mesh import MeshModel, _Burst
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
    attrs = dict(_attrs(v))
    if t is FeedRing:  # its evicted rows wait in the list until a compaction: not state
        live = attrs["_base"] - attrs["_off"]
        attrs["_buf"], attrs["_off"] = attrs["_buf"][live:], attrs["_base"]
    return {"$o": _class_name(t), "f": {n: encode(x) for n, x in attrs.items()}}


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


# a class a recording of then names by a name it no longer has (format 1 names every object)
RENAMED = {"meshview.traffic:TopologyFold": "meshview.traffic:HopLog"}

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
        obj = cls.__new__(cls)
        for k, x in fields.items():
            object.__setattr__(obj, k, x)  # frozen dataclasses included: restored, not built
        if dataclasses.is_dataclass(cls):  # written before a field existed: its default
            for f in dataclasses.fields(cls):
                if f.name not in fields:
                    if f.default is not dataclasses.MISSING:
                        object.__setattr__(obj, f.name, f.default)
                    elif f.default_factory is not dataclasses.MISSING:
                        object.__setattr__(obj, f.name, f.default_factory())
        after = getattr(obj, "_after_restore", None)
        if after is not None:  # an object that derives working state from what was written
            after()
        return obj
    # a plain dict whose first key happens to start with "$" is always written as "$d"
    raise ValueError(f"unknown tag {next(iter(v))!r}")


def _key(k: Any) -> Any:
    return tuple(_key(x) for x in k) if isinstance(k, list) else k


# --------------------------------------------------------------------------- the state schema

STATE_VERSION = 2


@dataclass(frozen=True, slots=True)
class StateField:
    """One field of a checkpoint: its name there, the model attribute it holds, and how its
    value is written and read back (the tagged encoding unless said otherwise)."""

    name: str
    attr: str
    encode: Callable[[Any], Any] = encode
    decode: Callable[[Any], Any] = decode


def _encode_bursts(bursts: dict[tuple[str, str], _Burst]) -> Any:
    return [encode({f.name: getattr(b, f.name) for f in dataclasses.fields(b)})
            for b in bursts.values()]


def _decode_bursts(v: Any) -> dict[tuple[str, str], _Burst]:
    out = {}
    for d in v:
        b = _Burst(**decode(d))
        out[(b.from_id, b.text)] = b
    return out


def _owned(name: str, attr: str,
           cls: type[FeedRing] | type[DmRollup] | type[HopLog]) -> StateField:
    """A field whose object says its own state (``state()`` / ``from_state()``)."""
    return StateField(name, attr, lambda x: encode(x.state()),
                      lambda v: cls.from_state(decode(v)))


STATE: tuple[StateField, ...] = (
    # parameters (a replay builds its model from the header, then restores these)
    StateField("space", "space"),
    StateField("feed_cap", "feed_cap"),
    StateField("ttl_ms", "ttl_ms"),
    StateField("burst_ms", "burst_ms"),
    StateField("version", "version"),
    # feed
    _owned("feed", "_ring", FeedRing),
    StateField("bursts", "_bursts", _encode_bursts, _decode_bursts),
    # roster, and its order as last sorted (heartbeat rewrites do not re-sort)
    StateField("peers", "_peers"),
    StateField("names", "_names"),
    StateField("roster_changed", "_roster_changed"),
    StateField("agent_ids", "_agent_ids"),
    StateField("endpoint_ids", "_endpoint_ids"),
    StateField("peer_ids", "_peer_ids"),
    StateField("spans", "_spans"),
    StateField("watch_last", "_watch_last"),
    StateField("initial_load", "_initial_load"),
    # channels
    StateField("registry", "_registry"),
    StateField("defaults", "_defaults"),
    StateField("retained", "_retained"),
    StateField("arrivals", "_arrivals"),
    StateField("arrivals_at_poll", "_arrivals_at_poll"),
    StateField("chan_last", "_chan_last"),
    # traffic
    _owned("dms", "_dms", DmRollup),
    _owned("topology", "_topology", HopLog),
    # rates
    StateField("buckets", "_buckets"),
    StateField("bucket_start", "_bucket_start"),
    StateField("recent", "_recent"),
    StateField("rate_origin", "_rate_origin"),
    StateField("total", "_total"),
    # rejections, membership, managers, connection
    StateField("rejections", "_rejections"),
    StateField("cuts", "_cuts"),
    StateField("membership_members", "_membership_members"),
    StateField("membership_feed_at", "_membership_feed_at"),
    StateField("membership_read", "_membership_read"),
    StateField("membership_unreadable", "_membership_unreadable"),
    StateField("managers", "_managers"),
    StateField("status", "_status"),
    # workflow runs as the managers last reported them (meshview/model/runs_state.py)
    StateField("runs", "_runs"),
)

# the last sort's rows and the kept order: a fresh model's (which sorts everything) until it
# sorts again
_DERIVED = ("_sort_keys", "_sorted", "_resort", "_live_seen",
            "_live_floor", "_offline", "_chan_info", "_chan_names", "_chan_dirty",
            "_chan_tuple", "_labels")

# Version 1 checkpoints were ``vars(model)``: the attributes the model had then (plus ``dirty``,
# which restoring always sets), each in the tagged encoding. Written out, not derived from
# STATE: renaming an attribute must not change what an old checkpoint means; map it here.
_V1_ATTRS = frozenset({
    "space", "feed_cap", "ttl_ms", "burst_ms", "version", "_ring", "_bursts", "_peers",
    "_roster_changed", "_agents", "_endpoints", "_agent_ids", "_endpoint_ids", "_peer_ids",
    "_spans", "_names", "_watch_last", "_initial_load", "_registry", "_defaults", "_retained",
    "_arrivals", "_arrivals_at_poll", "_chan_last", "_dms", "_topology", "_buckets",
    "_bucket_start", "_recent", "_rate_origin", "_total", "_rejections", "_membership_members",
    "_membership_feed_at", "_membership_read", "_membership_unreadable", "_managers", "_status",
})


def checkpoint(model: MeshModel) -> dict[str, Any]:
    """The model's state in the current schema (``"v"`` and one entry per :data:`STATE` field)."""
    out: dict[str, Any] = {"v": STATE_VERSION}
    for f in STATE:
        out[f.name] = f.encode(getattr(model, f.attr))
    return out


def restore(model: MeshModel, state: dict[str, Any]) -> None:
    """Put ``state`` (from :func:`checkpoint`, any version) into ``model`` in place. Fields the
    checkpoint lacks (an older model) keep a fresh model's defaults. ``version`` only grows, so
    a console holding the model sees the change. The input tap and the clock stay as they are."""
    v = state.get("v", 1)
    if type(v) is not int or not 1 <= v <= STATE_VERSION:
        raise ValueError(f"a checkpoint in state schema {v!r} (this reads 1 to {STATE_VERSION})")
    prev_version = model.version
    fresh = MeshModel(model.space, clock=model.clock, feed_cap=model.feed_cap,
                      ttl_ms=model.ttl_ms, burst_ms=model.burst_ms,
                      record_events=model.record_events)
    for attr in (*(f.attr for f in STATE), *_DERIVED):
        setattr(model, attr, getattr(fresh, attr))
    if v == 1:
        _restore_v1(model, state)
    else:
        for f in STATE:
            if f.name in state:
                setattr(model, f.attr, f.decode(state[f.name]))
    model.version = max(prev_version, model.version) + 1
    model.dirty = True
    model._snap = None
    model._runs_snap = None
    model._events.clear()


def _restore_v1(model: MeshModel, state: dict[str, Any]) -> None:
    """A version 1 checkpoint: the model's attributes by their names of then."""
    for k, x in state.items():
        if k in _V1_ATTRS:
            setattr(model, k, decode(x))
