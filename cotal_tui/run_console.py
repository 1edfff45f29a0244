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
from typing import Any

import msgspec

from attach.control import ps_poller
from cotal_tui.operator import Operator, read_only_reason
from meshview.connect import ConnectError, Target, connect, resolve_target
from meshview.model import MeshModel
from meshview.observer import Observer, ObserverOptions

SKILLS_CAP = 2000


class ConsoleObserver(Observer):
    """The observer plus the one card field the model does not keep: skills (agent card).

    An adapter, not a fork: it re-reads ``card.skills`` from the same presence entries the
    observer just applied, bounded, for the agent detail card."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.skills: dict[str, list[tuple[str, str]]] = {}

    def _on_presence(self, e: Any, initial: bool) -> None:
        super()._on_presence(e, initial)
        if (e.operation or "PUT") != "PUT" or not e.value:
            return
        try:
            rec = msgspec.json.decode(e.value)
            skills = rec.get("card", {}).get("skills") or []
            out = []
            for s in skills[:50]:
                if isinstance(s, dict):
                    out.append((str(s.get("name") or s.get("id") or "?")[:64],
                                str(s.get("description") or "")[:200]))  # bounded
        except Exception:  # noqa: BLE001 - the observer already judged the record
            return
        if len(self.skills) >= SKILLS_CAP and e.key not in self.skills:
            self.skills.pop(next(iter(self.skills)))
        self.skills[e.key] = out


class LiveSession:
    """One observed space: what the App needs (``model``, ``start``, ``stop``), plus how the
    console reaches the space's managed seats: ``managed`` (a ``ps`` poller over the observer's
    connection, feeding the roster markers and agent cards) and ``seat_sessions`` (attach
    sessions on fresh connections made with the console's own target: same servers, creds,
    nkey and TLS, so attach works wherever the console connects)."""

    def __init__(self, nc: Any, target: Target, space: str, args: argparse.Namespace) -> None:
        backfill = getattr(args, "backfill", None)
        backfill = 50 if backfill is None else int(backfill)
        self.space = space
        self.target = target
        self.model = MeshModel(space, server=target.display)
        self.observer = ConsoleObserver(
            nc, space, self.model, has_credential=target.has_credential,
            options=ObserverOptions(dms=not getattr(args, "no_dms", False), backfill=backfill,
                                    dm_backfill=min(1000, max(backfill, 0) * 20)))
        self.managed = ps_poller(nc, target, space)  # static mesh: a minted instrument per round
        self.operator = Operator(target, space, name=getattr(args, "as_name", None),
                                 read_only=read_only_reason(args),
                                 roster=lambda: self.model.snapshot().peers)
        self._seat_sessions: Any = None
        self.started = False

    @property
    def skills(self) -> dict[str, list[tuple[str, str]]]:
        return self.observer.skills

    @property
    def seat_sessions(self) -> Any:
        """The attach side (made on first use)."""
        if self._seat_sessions is None:
            from cotal_tui.seats import SeatSessions

            self._seat_sessions = SeatSessions(self.space, self._seat_connect)
        return self._seat_sessions

    async def _seat_connect(self) -> Any:
        """A fresh connection for one attach session through the console's own target, made
        the way ``cotal attach`` makes it (the session owns reconnects)."""
        from attach.connection import connect as attach_connect, session_target

        return await attach_connect(session_target(self.target))

    async def start(self) -> None:
        self.started = True
        await self.observer.start()
        self.managed.start()

    async def stop(self) -> None:
        if self.started:
            self.started = False
            await self.managed.stop()
            await self.observer.stop()
        await self.operator.close()  # the operator's offline record, if it ever sent


def attach_extras(session: LiveSession, args: argparse.Namespace, app: Any) -> None:
    """The recorder (``--record``) and the notifier (``--notify``; always there to toggle)."""
    from cotal_tui.alerts import attach_notifier
    from cotal_tui.recording import start_recording

    attach_notifier(session, args, app)
    if getattr(args, "record", None) and getattr(args, "_recording_taken", None) is None:
        args._recording_taken = session.space  # one file records the first space opened
        start_recording(session, args.record, max_size=args.max_size or 100 * 1024 * 1024,
                        seats=getattr(args, "record_seats", False), app=app)


class SpaceLister:
    """The overview's ``list_spaces`` coroutine, plus the link it lists over: ``link()`` is
    the connection's state now and ``server`` where it goes (shown on the status bar)."""

    def __init__(self, nc: Any, server: str, lister: Any) -> None:
        self.nc, self.server, self._lister = nc, server, lister

    async def __call__(self) -> list:
        return await self._lister(self.nc)

    def link(self) -> str:
        nc = self.nc
        if nc.is_closed:
            return "closed"
        return "connected" if nc.is_connected else "reconnecting"


CONNECTING_AFTER_S = 0.2  # a broker that answers this fast needs no line
CONNECTING_EVERY_S = 0.5


async def connect_showing(target: Target, out: Any = None) -> tuple[Any, Target]:
    """``connect`` while the terminal says so: ``connecting to <server> … 3s``, rewritten in
    place as the seconds go by, until connected (the line is wiped) or failed. Only on a
    terminal: a pipe gets nothing but the outcome."""
    out = sys.stderr if out is None else out
    task = asyncio.ensure_future(connect(target))
    if not getattr(out, "isatty", lambda: False)():
        return await task
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    shown = False
    try:
        done, _ = await asyncio.wait({task}, timeout=CONNECTING_AFTER_S)
        while not done:
            shown = True
            out.write(f"\r\x1b[Kconnecting to {target.display} … {loop.time() - t0:.0f}s")
            out.flush()
            done, _ = await asyncio.wait({task}, timeout=CONNECTING_EVERY_S)
        return task.result()
    finally:
        if not task.done():
            task.cancel()
        if shown:
            out.write("\r\x1b[K")
            out.flush()


def wants_picker(args: argparse.Namespace, target: Target) -> bool:
    """An open mesh named by URL, no ``--space``: the admin overview first."""
    return (getattr(args, "space", None) is None and target.source in ("flag", "default")
            and not target.has_credential)


async def _run(args: argparse.Namespace) -> int:
    from cotal_tui.app import CotalApp
    from cotal_tui.keymap import load_keymap
    from meshview.spaces import list_spaces

    keymap, keymap_warning = load_keymap()
    try:
        target = resolve_target(args)
        nc, target = await connect_showing(target)
    except ConnectError as e:
        print(f"cotal: {e}", file=sys.stderr)
        return 1
    picker = wants_picker(args, target)
    if not picker:
        from meshview.spaces import missing_space

        missing = await missing_space(nc, target.space, target.display)
        if missing:  # one sentence and exit 1, not an empty console
            print(f"cotal: {missing}", file=sys.stderr)
            await nc.close()
            return 1

    def open_space(space: str) -> LiveSession:
        session = LiveSession(nc, target, space, args)
        attach_extras(session, args, lambda: app)  # --record, --notify (issue 15)
        return session

    app = CotalApp(
        session=None if picker else open_space(target.space),
        open_space=open_space,
        list_spaces=SpaceLister(nc, target.display, list_spaces) if picker else None,
        keymap=keymap,
        notice=keymap_warning,
    )
    loop = asyncio.get_running_loop()
    tune_gc()
    try:
        loop.add_signal_handler(signal.SIGTERM, lambda: app.exit(0))
    except (NotImplementedError, RuntimeError):
        pass
    try:
        rc = await app.run_async()
    finally:
        for s in list(app.sessions) + ([app.session] if app.session is not None else []):
            try:
                await asyncio.wait_for(s.stop(), 3.0)
            except Exception:
                pass
        try:
            await asyncio.wait_for(nc.close(), 2.0)
        except Exception:
            pass
    return int(rc or 0)


# Short pauses over few collections: feed rows are untracked (``gc=False`` Structs), so what the
# collector walks is UI churn (Strips and their caches). A large gen0 (20k) made each young
# collection ~35 ms CPU and each gen1 (x20) ~130 ms; 4k/x5 keeps them ~6 ms and ~10 ms, and
# full collections stay rare (CPython runs one only when the long-lived set grew by 25%).
GC_THRESHOLDS = (4_000, 5, 20)


def tune_gc() -> None:
    """Short, bounded collections (see ``GC_THRESHOLDS``). Objects alive at start-up (Textual,
    modules) are frozen out of every later scan."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def run_console(args: argparse.Namespace) -> int:
    """Run the full-screen console until ``q``; Textual restores the terminal on exit,
    on errors and on SIGTERM."""
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 0
