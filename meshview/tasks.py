"""Ending background tasks within a bound.

A task is cancelled, then awaited for at most ``timeout`` seconds: a library call that swallows
its cancel (a JetStream fetch or KV watch racing the cancel can turn it into a timeout and loop)
must not hang a console's quit or a test's teardown. Whatever is still running is cancelled once
more and left to the loop; its name is returned so a caller can say which one would not stop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Iterable

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
