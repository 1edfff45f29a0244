"""Owning background tasks, and ending them within a bound.

Every task the product starts is held by someone: a field its owner cancels, or a
:class:`TaskOwner`, which keeps a fire-and-forget task alive until it ends and logs (logger
``cotal.tasks``) and counts a failure, so no exception is lost with a dropped task.

A task is cancelled, then awaited for at most ``timeout`` seconds: a library call that swallows
its cancel (a JetStream fetch or KV watch racing the cancel can turn it into a timeout and loop)
must not hang a console's quit or a test's teardown. Whatever is still running is cancelled once
more and left to the loop; its name is returned so a caller can say which one would not stop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any, Awaitable, Coroutine, Iterable

log = logging.getLogger("cotal.tasks")

STOP_TIMEOUT_S = 5.0


async def reap(tasks: Iterable[asyncio.Task | None], timeout: float = STOP_TIMEOUT_S) -> list[str]:
    """Cancel ``tasks`` and wait for them, bounded; returns the names of those that did not end."""
    live = [t for t in tasks if t is not None and not t.done()]
    for t in live:
        t.cancel()
    if not live:
        return []
    _, stuck = await asyncio.wait(live, timeout=timeout)
    for t in stuck:
        t.cancel()
        log.warning("task %s did not stop within %.1f s of its cancel", t.get_name(), timeout)
    for t in live:  # retrieve outcomes so none is reported as never retrieved
        if t.done() and not t.cancelled():
            t.exception()
    return sorted(t.get_name() for t in stuck)


_failed: Counter[str] = Counter()


def task_failures() -> dict[str, int]:
    """Owned tasks that ended in an exception, by task name (``cotal version --debug`` prints it)."""
    return dict(_failed)


class TaskOwner:
    """Holds fire-and-forget tasks until they end; a failure is logged and counted, never lost."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._live: set[asyncio.Task] = set()

    def spawn(self, coro: Awaitable[Any], name: str | None = None) -> asyncio.Task:
        """Start ``coro`` on the running loop, held here until it ends."""
        if not asyncio.iscoroutine(coro):
            coro = _wait_for(coro)
        t = asyncio.get_running_loop().create_task(coro, name=f"{self.name}:{name or _coro_name(coro)}")
        self._live.add(t)
        t.add_done_callback(self._ended)
        return t

    def _ended(self, t: asyncio.Task) -> None:
        self._live.discard(t)
        if t.cancelled():
            return
        exc = t.exception()
        if exc is not None:
            _failed[t.get_name()] += 1
            log.error("task %s failed", t.get_name(), exc_info=exc)

    def __len__(self) -> int:
        return len(self._live)

    async def close(self, timeout: float = STOP_TIMEOUT_S) -> list[str]:
        """Cancel what is still running, bounded (see :func:`reap`)."""
        return await reap(list(self._live), timeout)


async def _wait_for(aw: Awaitable[Any]) -> Any:
    return await aw


def _coro_name(coro: Coroutine[Any, Any, Any]) -> str:
    return getattr(coro, "__qualname__", None) or type(coro).__name__
