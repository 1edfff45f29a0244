"""The model's state as JSON: a tagged encoding for checkpoints and recorded inputs.

JSON has no tuples, sets, non-string keys or classes; the model's state has all of them. A
value that is not plain JSON becomes a one-key object whose key starts with ``$``. Classes are
named by module and qualified name and must come from ``meshview``: reading a recording can only
ever construct the model's own value types (no pickle: a shared recording runs no code).

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections import OrderedDict, abc, deque
from typing import Any, Iterator

import msgspec

from meshview.feedring import FeedRing
from meshview.model import MeshModel

NOT_STATE = frozenset({"clock", "_snap", "_events", "record_events", "events_dropped"})


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
