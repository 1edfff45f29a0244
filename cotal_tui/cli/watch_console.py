"""``cotal watch`` on a terminal: connect, observe, run the console, restore the terminal.

One NATS connection for the whole console; one observer (and model) per opened space. The
observer runs on the App's own event loop: NATS callbacks only enqueue, the observer applies
batches to the model, and the console drains the model ≤ 30 times a second.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import sys
from typing import Any, Awaitable, Callable

from typing import TYPE_CHECKING

from cotal_tui.cli.connection import target_from_args
from cotal_tui.gcpace import HOLD as GC_HOLD
from meshview.errors import swallowed

if TYPE_CHECKING:
    from cotal_tui.session import LiveSession, SessionOptions
    from meshview.link.connect import ConnectTarget


def session_options(args: argparse.Namespace) -> SessionOptions:
    """The live session's options from a command's flags. getattr: every ``cotal`` command
    that opens a console builds its own Namespace, and not every one has these flags."""
    from cotal_tui.config import notify_settings, ui_health
    from cotal_tui.operator import read_only_from_args
    from cotal_tui.session import SessionOptions

    backfill = getattr(args, "backfill", None)
    return SessionOptions(backfill=50 if backfill is None else int(backfill),
                          dms=not getattr(args, "no_dms", False),
                          as_name=getattr(args, "as_name", None),
                          read_only=read_only_from_args(args),
                          stall_ms=notify_settings(args).stalled_minutes * 60_000.0,
                          health=ui_health(args)[0])


def record_and_notify(session: LiveSession, args: argparse.Namespace, app: Any) -> None:
    """The recorder (``--record``) and the notifier (``--notify``; always there to toggle)."""
    from cotal_tui.alerts import attach_notifier
    from cotal_tui.recording import start_recording

    attach_notifier(session, args, app)
    if getattr(args, "record", None) and getattr(args, "_recording_taken", None) is None:
        args._recording_taken = session.space  # one file records the first space opened
        from cotal_tui.config import recording_max_size

        start_recording(session, args.record, max_size=recording_max_size(args)[0],
                        seats=getattr(args, "record_seats", False), app=app)


class SpaceLister:
    """The overview's ``list_spaces`` coroutine, plus the link it lists over: ``link()`` is
    the connection's state now and ``server`` where it goes (shown on the status bar)."""

    def __init__(self, nc: Any, server: str, lister: Any) -> None:
        self.nc, self.server, self._lister = nc, server, lister

    async def __call__(self) -> list:
        return await self._lister(self.nc)

    async def stranded(self, space: str) -> int | None:
        """How many of ``space``'s seats are stuck (running, no presence), by the rule the
        roster and ``cotal ps`` use (``attach.control.managed.stranded``); None: unreadable."""
        from attach.control.managed import space_stranded

        seats = await space_stranded(self.nc, space)
        return None if seats is None else len(seats)

    def link(self) -> str:
        nc = self.nc
        if nc.is_closed:
            return "closed"
        return "connected" if nc.is_connected else "reconnecting"


def may_ask(args: argparse.Namespace) -> bool:
    """Resolving the target may ask on the terminal (several registered meshes, none current):
    only when the command line names neither a server nor a space."""
    return not (getattr(args, "server", None) or getattr(args, "space", None))


def wants_picker(args: argparse.Namespace, target: ConnectTarget) -> bool:
    """An open mesh named by URL, no ``--space``: the admin overview first."""
    return (getattr(args, "space", None) is None and target.source in ("flag", "default")
            and not target.has_credential)


async def _run(args: argparse.Namespace) -> int:
    """Ctrl-C (a SIGINT until Textual makes the terminal raw) and SIGTERM: while connecting they
    cancel the wait; once the App exists they ask it to exit (:meth:`CotalApp.stop_signal`).
    asyncio's own SIGINT handler cancelled this task wherever it was, mid-mount too: a screen
    taken down while it mounted printed a ``NoMatches`` traceback.

    The App starts before the connect, on its boot screen (``cotal_tui/boot.py``): the steps
    below (the keymap, the detach keys, the connect, the space check, the session) run behind
    that first frame, and what they refuse is printed here once the terminal is restored."""
    app: Any = None
    main = asyncio.current_task()

    def stop() -> None:
        if app is None:
            if main is not None:
                main.cancel()
        else:
            app.stop_signal()

    loop = asyncio.get_running_loop()
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop)
    except (NotImplementedError, RuntimeError):
        pass
    from cotal_tui.app import CotalApp
    from cotal_tui.boot import Boot
    from cotal_tui.themes import UnknownTheme, console_theme

    from attach.terminal.detach import DetachKeyError
    from cotal_tui.config import detach_keys

    try:  # before the terminal is touched: a detach key the panes could not honour is refused
        detach_keys()
    except DetachKeyError as e:
        print(f"cotal: {e}.", file=sys.stderr)
        return 2
    try:
        theme, _, theme_warning = console_theme(getattr(args, "theme", None))
    except UnknownTheme as e:  # cotal watch checked it already; other callers get it here
        print(f"cotal: {e}.", file=sys.stderr)
        return 2
    target = None
    if may_ask(args):  # a registry pick may ask on the terminal: before Textual takes it
        # (else the target is resolved behind the first frame: nats-py's import is ~70 ms of it)
        from meshview.link.connect import ConnectError

        try:
            target = target_from_args(args)
        except ConnectError as e:
            print(f"cotal: {e}", file=sys.stderr)
            return 1
    links: list[Any] = []  # the connection, once made (closed here on the way out)

    async def steps(boot: Boot, app: Any) -> None:
        await _boot_steps(boot, app, args, target, links)

    boot = Boot(server=target.display if target is not None else "", steps=steps)
    app = CotalApp(boot=boot, theme=theme, notice=theme_warning)
    gc.set_threshold(*GC_THRESHOLDS)  # the collect and freeze: once the boot has imported all
    try:
        rc = await app.run_async()
    finally:
        running = boot.task  # the steps, still running when the App was quit as it connected
        if running is not None and not running.done():
            running.cancel()
            await asyncio.wait([running], timeout=3.0)
        opened = list(app.sessions) + [s for s in (app.session, boot.session) if s is not None]
        for s in {id(s): s for s in opened}.values():
            try:
                await asyncio.wait_for(s.stop(), 3.0)
            except Exception:  # noqa: BLE001 - the console has ended; a stuck stop must not hold the exit [counted: COTAL_LOG]
                swallowed("cotal_tui.cli.watch_console:_run")
        for nc in links:
            try:
                await asyncio.wait_for(nc.close(), 2.0)
            except Exception:  # noqa: BLE001 - a slow close must not hold the exit [counted: COTAL_LOG]
                swallowed("cotal_tui.cli.watch_console:_run#2")
    if boot.error is not None:
        print(f"cotal: {boot.error}", file=sys.stderr)
        return boot.rc
    return int(rc or 0)


async def _boot_steps(boot: Any, app: Any, args: argparse.Namespace, target: Any,
                      links: list[Any]) -> None:
    """Behind the boot screen: what ``cotal watch`` checks and opens before its console. The
    connect starts first: its round trips go on while the checks and the App import the rest."""
    from meshview.link.connect import ConnectError, connect

    if target is None:
        try:
            target = target_from_args(args)
        except ConnectError as e:
            boot.fail(str(e))
            return
        boot.server = target.display
    connecting = asyncio.ensure_future(connect(target))

    def made(t: asyncio.Future) -> None:  # whatever happens next, _run closes it on the way out
        if not t.cancelled() and t.exception() is None:
            links.append(t.result()[0])

    connecting.add_done_callback(made)
    try:
        from cotal_tui.cli.config import console_start

        boot.keymap, boot.notice = console_start()
        try:
            nc, target = await connecting
        except ConnectError as e:
            boot.fail(str(e))
            return
    finally:
        if not connecting.done():  # the App is closing (Ctrl-C while it connects)
            connecting.cancel()
            await asyncio.wait([connecting], timeout=1.0)
    from meshview.observe.spaces import list_spaces, missing_space

    picker = wants_picker(args, target)
    if not picker:
        boot.doing = f"opening space {target.space}"
        missing = await missing_space(nc, target.space, target.display)
        if missing:  # one sentence and exit 1, not an empty console
            boot.fail(missing)
            return

    from cotal_tui.session import LiveSession

    def open_space(space: str) -> LiveSession:
        session = LiveSession(nc, target, space, session_options(args))
        record_and_notify(session, args, lambda: app)
        return session

    boot.open_space = open_space
    if picker:
        boot.lister = SpaceLister(nc, target.display, list_spaces)
        tune_gc()
    else:
        first = boot.session = open_space(target.space)  # a LiveSession: its observer settles gc
        tune_gc(settle=first.observer.presence_loaded)


# Short pauses over few collections: feed rows are untracked (``gc=False`` Structs), so what the
# collector walks is UI churn (Strips and their caches). A large gen0 (20k) made each young
# collection ~35 ms CPU and each gen1 (x20) ~130 ms; 4k/x5 keeps them ~6 ms and ~10 ms, and
# full collections stay rare (CPython runs one only when the long-lived set grew by 25%).
GC_THRESHOLDS = (4_000, 5, 20)


def tune_gc(settle: Callable[[], Awaitable[None]] | None = None) -> None:
    """Short, bounded collections (see ``GC_THRESHOLDS``), none while the operator's keys come
    (:mod:`cotal_tui.gcpace`). Objects alive at start-up (Textual,
    modules) are frozen out of every later scan; with ``settle`` (the first space's observer's
    ``presence_loaded``), so is what its first load builds, once it is in (:func:`_settle_gc`)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    GC_HOLD.active = True  # and none under the operator's keys (cotal_tui/gcpace.py)
    if settle is not None:
        task = asyncio.get_running_loop().create_task(_settle_gc(settle))
        _SETTLING.add(task)
        task.add_done_callback(_SETTLING.discard)


_SETTLING: set[asyncio.Task] = set()


def gc_settling() -> bool:
    """A :func:`tune_gc` settle is still waiting to freeze the first load (tests read it)."""
    return bool(_SETTLING)


SETTLE_S = 1.0  # after the roster is in: the first drains have built the widgets' rows


async def _settle_gc(loaded: Callable[[], Awaitable[None]]) -> None:
    """The first load (10k agents' peers, their rows) lives as long as the console: one full
    collection once it is in, then it is frozen out of every later scan. Unfrozen, each full
    collection walked all of it: a 40-60 ms stall under the operator's keys at 10k agents.
    Frozen objects are still freed by reference counting when they are replaced."""
    try:
        await asyncio.wait_for(loaded(), 120.0)
        await asyncio.sleep(SETTLE_S)
    except (asyncio.TimeoutError, asyncio.CancelledError):
        return
    gc.collect()
    gc.freeze()


def run_console(args: argparse.Namespace) -> int:
    """Run the full-screen console until ``q``; Textual restores the terminal on exit,
    on errors and on SIGTERM."""
    try:
        return asyncio.run(_run(args))
    except (KeyboardInterrupt, asyncio.CancelledError):  # stopped while connecting
        return 0
