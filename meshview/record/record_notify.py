"""What ``cotal watch --plain/--json`` runs beside the printing: its recorder (``--record``) and
its notifier (``--notify``/``--notify-cmd``).

Kept apart from the renderers in stream.py: both only listen to the model the stream prints.
Plain values in: the file and size bound, the :class:`~meshview.lines.notify.NotifySettings` the CLI
loaded, and where the terminal escapes go (the CLI's stderr when it is a terminal, else nowhere).
"""

from __future__ import annotations

import asyncio
from typing import Callable

from meshview.errors import swallowed
from meshview.model.mesh import MeshModel
from meshview.lines.notify import NotifySettings
from meshview.observe.observer import Observer


class RecordAndNotify:
    """A :class:`~meshview.record.record.Recorder` of ``model`` when ``record`` names a file, and a
    :class:`~meshview.lines.notify.Notifier` on ``obs`` when ``notify`` is enabled. ``write`` takes
    the notification escapes (None: only ``--notify-cmd`` runs); ``diag`` one sentence."""

    def __init__(self, model: MeshModel, obs: Observer, space: str, server: str, *,
                 record: str | None, max_size: int | None, notify: NotifySettings,
                 write: Callable[[str], None] | None, diag: Callable[[str], None]) -> None:
        from meshview.lines.notify import Notifier
        from meshview.record.record import MAX_SIZE, Recorder

        self.recorder = None
        if record:
            self.recorder = Recorder(model, record, max_size=max_size or MAX_SIZE)
            if self.recorder.error:
                diag(self.recorder.error)
        self.notifier = None
        if notify.enabled:
            self.notifier = Notifier(space, server, write=write, terminal=notify.terminal,
                                     command=notify.command, style=notify.style,
                                     settle_s=notify.settle_s, stalled=notify.stalled,
                                     run_failed=notify.run_failed, finished=notify.finished)
            obs.add_listener(self.notifier.on_model)

    async def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
        if self.notifier is not None:
            try:
                await asyncio.wait_for(self.notifier.close(), 0.1)
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - a slow notifier close must not hold the exit [counted: COTAL_LOG]
                swallowed("meshview.record.record_notify:RecordAndNotify.close")
