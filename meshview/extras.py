"""What ``cotal watch --plain/--json`` runs beside the printing: ``--record`` and ``--notify``.

Kept apart from the renderers in stream.py: both only listen to the model the stream prints.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, Callable

from meshview.model import MeshModel
from meshview.observer import Observer


class StreamExtras:
    """``--record`` and ``--notify``/``--notify-cmd`` for the line stream. The escapes go to the
    terminal on stderr (never into stdout's data), and only when stderr is a terminal."""

    def __init__(self, model: MeshModel, obs: Observer, args: Any, space: str, server: str,
                 diag: Callable[[str], None]) -> None:
        from meshview.notify import Notifier, notify_settings
        from meshview.record import MAX_SIZE, Recorder

        self.recorder = None
        if getattr(args, "record", None):
            self.recorder = Recorder(model, args.record,
                                     max_size=getattr(args, "max_size", None) or MAX_SIZE)
            if self.recorder.error:
                diag(self.recorder.error)
        self.notifier = None
        s = notify_settings(args)
        if s.enabled:
            tty = False
            try:
                tty = sys.stderr.isatty()
            except (AttributeError, ValueError):
                pass
            self.notifier = Notifier(space, server, write=self._tty_write if tty else None,
                                     terminal=s.terminal, command=s.command, style=s.style,
                                     settle_s=s.settle_s)
            obs.add_listener(self.notifier.on_model)

    @staticmethod
    def _tty_write(data: str) -> None:
        os.write(2, data.encode("utf-8", "replace"))

    async def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
        if self.notifier is not None:
            try:
                await asyncio.wait_for(self.notifier.close(), 0.1)
            except (Exception, asyncio.CancelledError):
                pass
