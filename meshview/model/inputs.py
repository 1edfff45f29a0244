"""The model's input seam: which :class:`~meshview.model.mesh.MeshModel` methods are inputs, and the
one tap every input call passes.

A reducer decorated with :func:`model_input` is an *input*: something the observer feeds the
model (a message, a presence record, a connection state, the passing of time). The recorder
(meshview/record/record.py) sets ``model.input_tap`` and sees every outermost input call once it has
applied; a replay (meshview/record/replay.py) applies recorded inputs back through
:meth:`MeshModel.apply_input`, which knows only the names in :data:`INPUTS`. Nothing else
wraps or replaces a model method.

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

import functools
from collections import abc
from dataclasses import dataclass
from typing import Any, Callable, TypeVar, cast

INPUTS: dict[str, str] = {}
"""Every input of the model by name, with its category (``message``, ``presence``, ...)."""

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class InputCall:
    """One outermost input call, as the tap sees it after the model applied it."""

    name: str
    category: str
    args: tuple[Any, ...]  # iterators already made lists: what the reducer was given
    kw: dict[str, Any]
    t: float  # the model clock when the call began; every clock read inside it saw this
    result: Any
    changed: bool  # the model's version moved


InputTap = Callable[[InputCall], None]

_PLAIN = (str, int, float, bool, type(None), tuple, list, dict)


def settle(v: Any) -> Any:
    """An iterator argument made a list before the call (the tap must not consume it)."""
    return list(v) if type(v) not in _PLAIN and isinstance(v, abc.Iterator) else v


def model_input(category: str) -> Callable[[F], F]:
    """Register a model method as an input of ``category``. Tapped, a call goes through
    ``MeshModel._tapped_input``; untapped, it costs nothing: :func:`untapped` binds the
    method's own function on the instance, so the wrapper is not even called."""

    def register(fn: F) -> F:
        name = fn.__name__
        if name in INPUTS:
            raise ValueError(f"model input {name!r} registered twice")
        INPUTS[name] = category

        @functools.wraps(fn)
        def call(self: Any, *args: Any, **kw: Any) -> Any:
            if self._input_tap is None:
                return fn(self, *args, **kw)
            return self._tapped_input(name, fn, args, kw)

        return cast(F, call)

    return register


def untapped(obj: Any, tapped: bool) -> None:
    """Make ``obj``'s inputs tapped (every call goes through its wrapper) or untapped (the
    instance holds each input's own function, bound: a hot input such as a heartbeat's
    ``refresh_clocks`` then costs one call, not two and an argument repack). The model
    calls it whenever its ``input_tap`` is set; nothing else does."""
    d = obj.__dict__
    for name in INPUTS:
        wrapper = getattr(type(obj), name, None)
        fn = getattr(wrapper, "__wrapped__", None)
        if fn is None:
            continue
        held = d.get(name)
        if tapped:
            if held is not None and getattr(held, "__func__", None) is fn:
                del d[name]
        elif held is None:
            d[name] = fn.__get__(obj)
