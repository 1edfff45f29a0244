"""The loop every poller of the console runs: one round at a time, then the period (or a poke).

A subclass provides ``poll_once()`` (one round), ``period`` (seconds between rounds) and may
override :meth:`round_failed` (a round that raised: counted, said, retried next period) and
:meth:`finished` (stop asking for good, e.g. the credential may not read what it polls). The
instance holds ``_task``, ``_wake`` and ``_stopped`` (made by :meth:`_init_loop`, or as dataclass
fields). :meth:`stop` is bounded and repeats its cancel: on 3.11 a cancel can be lost
(``wait_for`` returns the inner result when both land together, and a library may swallow it
mid-connect), so the loop also checks the flag — never a hang.
"""

from __future__ import annotations

import asyncio
import contextlib


class RoundLoop:
    period: float
    last_error: str | None
    task_name = "poller"
    _task: asyncio.Task | None
    _wake: asyncio.Event
    _stopped: bool

    def _init_loop(self) -> None:
        self._task = None
        self._wake = asyncio.Event()
        self._stopped = False

    async def poll_once(self) -> None:  # pragma: no cover - every subclass has its own
        raise NotImplementedError

    def round_failed(self, e: Exception) -> None:
        self.last_error = f"{type(e).__name__}: {e}"

    def finished(self) -> bool:
        return self._stopped

    async def run(self) -> None:
        while not self._stopped:
            try:
                await self.poll_once()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - a failed round is reported and retried next period
                self.round_failed(e)
            if self.finished():
                return
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.period)

    def start(self) -> None:
        if self._task is None:
            self._stopped = False
            self._task = asyncio.get_running_loop().create_task(self.run(), name=self.task_name)

    @property
    def loop_ended(self) -> bool:
        """The loop was started and its task has returned (it stopped asking; tests read it)."""
        return self._task is not None and self._task.done()

    def poke(self) -> None:
        """Ask now (after the round in flight, if any)."""
        self._wake.set()

    def close(self) -> None:
        """Stop asking (synchronous: a session's stop hook)."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def stop(self) -> None:
        """End the poll, bounded: the cancel is repeated until the task is done."""
        self._stopped = True
        task, self._task = self._task, None
        while task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)
        if task is not None and not task.cancelled():
            task.exception()  # retrieved: a failed last round is not an unhandled-task warning
