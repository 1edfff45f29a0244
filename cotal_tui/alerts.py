"""The console's notifications: NEEDS-YOU alerts through the App's driver.

``--notify`` (or ``COTAL_NOTIFY=1`` or ``[notify] enabled = true`` in ``config.toml``) rings the
terminal bell and sends a desktop-notification escape when an agent starts waiting, once per
waiting episode (see :mod:`meshview.lines.notify`); ``--notify-cmd`` runs a command per alert.
``--notify-run-failed`` / ``--notify-finished`` add an agent's failed run and its run closing
into idle (from its event frames). The
escapes are written through the App's driver, between its frames, so they never tear the screen.
Each alert also shows on the status line. :func:`toggle_notify` switches them at run time.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Callable

from cotal_tui.config import notify_settings
from cotal_tui.operator import Operator
from cotal_tui.session import ConsoleSession
from cotal_tui.shell import ConsoleShell
from meshview.errors import swallowed
from meshview.lines.notify import Alert, Notifier

POLL_S = 0.1


def attach_notifier(session: ConsoleSession, args: argparse.Namespace | None,
                    app: Callable[[], ConsoleShell | None]) -> Notifier:
    """A notifier on ``session``'s observer. It tracks episodes even while switched off, so
    switching on later does not ring for agents that were already waiting."""
    s = notify_settings(args)
    model = session.model

    def write(data: str) -> None:
        a = app()
        if a is not None:
            a.write_to_terminal(data)

    def on_alert(alert: Alert) -> None:
        a = app()
        if a is not None:
            a.notify_line(alert.text())

    def mine() -> tuple[str, ...]:
        op = session.operator
        if isinstance(op, Operator) and op.on_roster:
            return (op.participant.id,)
        return ()

    n = Notifier(model.space, model.status.server, write=write, terminal=s.terminal,
                 command=s.command, style=s.style, on_alert=on_alert, enabled=s.enabled,
                 ignore=mine, settle_s=s.settle_s, run_failed=s.run_failed,
                 finished=s.finished, stalled=s.stalled)
    session.notifier = n
    _watch(session, n)
    return n


def _watch(session: ConsoleSession, n: Notifier) -> None:
    """Look at NEEDS-YOU whenever the model moved, 10 times a second, until the session stops.

    Not an observer listener: those run only while the model is marked dirty, and the console's
    own drain takes that mark about as often - a listener would miss changes (an agent leaving
    waiting, so its next wait would look like the same episode)."""
    model = session.model

    async def poll() -> None:
        seen = -1
        while True:
            await asyncio.sleep(POLL_S)
            if model.version != seen:
                seen = model.version
                try:
                    n.on_model(model)
                except Exception:  # noqa: BLE001 - a notification never breaks the console [counted: COTAL_LOG]
                    swallowed("cotal_tui.alerts:_watch.poll")

    try:
        task = asyncio.get_running_loop().create_task(poll(), name="notify:poll")
    except RuntimeError:
        return  # no loop (a test building sessions by hand): nothing to watch with

    def stop_polling() -> None:
        task.cancel()

    session.on_stop.append(stop_polling)


def toggle_notify(app: ConsoleShell) -> str:
    """Switch notifications of the open console on or off; returns (and shows) one sentence.
    Switched on with nothing configured, it rings and sends the escape."""
    screen = app.console_screen()
    n = screen.session.notifier if screen is not None else None
    if n is None:
        msg = "notifications: not available here"
    else:
        n.enabled = not n.enabled
        if n.enabled and not n.terminal and n.runner is None:
            n.terminal = True
        msg = (f"notifications on ({'bell + escape' if n.terminal else 'command'}"
               f"{' + command' if n.terminal and n.runner else ''})" if n.enabled
               else "notifications off")
    app.notify_line(msg)
    return msg
