"""No garbage collection under the operator's keys.

At 10k agents the heap the collector walks is large: a young collection took 4-14 ms, a gen1
10-13 ms and a full one 36-44 ms, and whichever fell between a j/k press and its repaint was
added to that press (half of the presses over 50 ms in ``bench/scale.py`` had one inside).
While keys come the collector waits; it catches up in the first quiet moment (``QUIET_S``
without a key), or after ``MAX_HOLD_S`` of unbroken keys, whichever is first, and is then left
alone for ``COOL_S`` so the collection it owes does run. Reference counting frees everything
acyclic all along, so what waits is cyclic garbage of at most ``MAX_HOLD_S``.

Process-wide, like the collector: off until the console's CLI turns it on
(``cotal_tui.cli.watch_console.tune_gc``); a collector someone else disabled is never
enabled here.
"""

from __future__ import annotations

import gc

QUIET_S = 0.5  # no key for this long: the collector runs again
MAX_HOLD_S = 10.0  # keys for longer than this: it runs anyway ...
COOL_S = 1.0  # ... and is not held again for this long


class GcHold:
    """The hold's state: :meth:`key` on each key, :meth:`tick` often while :attr:`held`."""

    def __init__(self) -> None:
        self.active = False  # turned on by the console's CLI
        self._since: float | None = None  # when this hold disabled the collector
        self._released = -COOL_S  # when the last hold ended

    @property
    def held(self) -> bool:
        """The collector is disabled by this hold."""
        return self._since is not None

    def key(self, now: float) -> bool:
        """A key at ``now``: hold the collector (True when this started a hold)."""
        if (not self.active or self._since is not None or now - self._released < COOL_S
                or not gc.isenabled()):
            return False
        gc.disable()
        self._since = now
        return True

    def tick(self, now: float, key_at: float) -> bool:
        """Release the hold when keys paused or it lasted too long (True when released)."""
        if self._since is None:
            return False
        if now - key_at < QUIET_S and now - self._since < MAX_HOLD_S:
            return False
        self.release(now)
        return True

    def release(self, now: float) -> None:
        """End the hold now (also when the console exits)."""
        if self._since is not None:
            self._since, self._released = None, now
            gc.enable()


HOLD = GcHold()  # the process's one hold (the collector is one per process)
