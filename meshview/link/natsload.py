"""nats-py without aiohttp until a websocket URL needs it.

nats-py's transport module imports aiohttp (installed here for ``--web``) at import time, for
``ws://``/``wss://`` servers only. That import costs ~450 ms of CPU, which every ``cotal``
command paid before its first byte (``cotal status`` to a dead broker: 0.7 s CPU, 0.45 s of
it aiohttp). :func:`install` makes that one import see no aiohttp - nats-py already handles
its absence - and :func:`websocket_ready` hands nats-py the real module before a websocket
connect. aiohttp itself stays importable for everyone else (textual-serve).

Only the ``cotal`` entry point installs it (``cotal_tui.cli.process``): importing ``meshview``
leaves a host program's imports alone.
"""

from __future__ import annotations

import importlib.machinery
import sys
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

TRANSPORT = "nats.aio.transport"


class _Loader:
    """A loader by protocol (``create_module``/``exec_module``): no ``importlib.abc``, whose
    import (importlib.resources, tempfile, random...) every ``cotal`` start paid for it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        hide = "aiohttp" not in sys.modules
        if hide:
            # a None entry is how `import aiohttp` is made an ImportError; typeshed allows modules only
            sys.modules["aiohttp"] = None  # type: ignore[assignment]
        try:
            self.inner.exec_module(module)
        finally:
            if hide and "aiohttp" in sys.modules and sys.modules["aiohttp"] is None:
                del sys.modules["aiohttp"]


class _Finder:
    """A meta path finder by protocol (``find_spec``), for the same reason."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != TRANSPORT or "aiohttp" in sys.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = cast("Loader", _Loader(spec.loader))
        return spec


def install() -> None:
    """Defer aiohttp for nats-py in this process (a no-op once nats-py's transport is loaded)."""
    if TRANSPORT not in sys.modules and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def websocket_ready() -> None:
    """Give nats-py its websocket transport's library: call before connecting to ``ws://``."""
    import nats.aio.transport as transport

    if getattr(transport, "aiohttp", None) is None:
        import aiohttp

        transport.aiohttp = aiohttp
