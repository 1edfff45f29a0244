"""The console's notifications: NEEDS-YOU alerts through the App's driver.

``--notify`` (or ``COTAL_NOTIFY=1`` or ``[notify] enabled = true`` in ``config.toml``) rings the
terminal bell and sends a desktop-notification escape when an agent starts waiting, once per
waiting episode (see :mod:`meshview.notify`); ``--notify-cmd`` runs a command per alert. The
escapes are written through the App's driver, between its frames, so they never tear the screen.
Each alert also shows on the status line. :func:`toggle_notify` switches them at run time.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any, Callable

from meshview.notify import Alert, Notifier, notify_settings

POLL_S = 0.1


def attach_notifier(session: Any, args: argparse.Namespace | None,
                    app: Callable[[], Any]) -> Notifier:
    """A notifier on ``session``'s observer. It tracks episodes even while switched off, so
    switching on later does not ring for agents that were already waiting."""
    s = notify_settings(args)
    model = session.model

    def write(data: str) -> None:
        driver = getattr(app(), "_driver", None)
        if driver is not None:
            driver.write(data)
            driver.flush()

    def on_alert(alert: Alert) -> None:
        a = app()
        if a is not None and hasattr(a, "notify_line"):
            a.notify_line(alert.text())

    def mine() -> tuple[str, ...]:
        op = getattr(session, "operator", None)
        if op is not None and getattr(op, "on_roster", False):
            return (op.participant.id,)
        return ()

    n = Notifier(model.space, model.status.server, write=write, terminal=s.terminal,
                 command=s.command, style=s.style, on_alert=on_alert, enabled=s.enabled,
                 ignore=mine, settle_s=s.settle_s)
    session.notifier = n
    _watch(session, n)
    return n


def _watch(session: Any, n: Notifier) -> None:
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
                except Exception:  # noqa: BLE001 - a notification never breaks the console
                    pass

    try:
        task = asyncio.get_running_loop().create_task(poll(), name="notify:poll")
    except RuntimeError:
        return  # no loop (a test building sessions by hand): nothing to watch with
    stop = session.stop

    async def stop_then_cancel() -> None:
        task.cancel()
        await stop()

    session.stop = stop_then_cancel


def toggle_notify(app: Any) -> str:
    """Switch notifications of the open console on or off; returns (and shows) one sentence.
    Switched on with nothing configured, it rings and sends the escape."""
    screen = app.console_screen() if hasattr(app, "console_screen") else None
    n = getattr(getattr(screen, "session", None), "notifier", None)
    if n is None:
        msg = "notifications: not available here"
    else:
        n.enabled = not n.enabled
        if n.enabled and not n.terminal and n.runner is None:
            n.terminal = True
        msg = (f"notifications on ({'bell + escape' if n.terminal else 'command'}"
               f"{' + command' if n.terminal and n.runner else ''})" if n.enabled
               else "notifications off")
    if hasattr(app, "notify_line"):
        app.notify_line(msg)
    return msg
