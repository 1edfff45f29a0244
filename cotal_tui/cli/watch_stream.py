"""``cotal watch --plain`` / ``--json`` as a process: the signals, stdout and stderr, the
connect and the exit code around :func:`meshview.lines.stream.stream_space`, which prints.

SIGINT and SIGTERM both stop the stream with exit 0, at any moment (while connecting too);
a connect that fails or a space that does not exist is one sentence on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import TYPE_CHECKING, Callable, TextIO

from meshview.lines.lineout import LineSink

if TYPE_CHECKING:
    from meshview.lines.stream import StreamOptions


def run_stream(args: argparse.Namespace, mode: str) -> int:
    """Run the line stream to its end; the process's exit code."""
    # SIGTERM like Ctrl-C until the stream's loop takes both over (and ignored once it has
    # finished): exit 0 at any moment, never a default-action kill or a stray traceback.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return asyncio.run(_stream(args, mode))
    except KeyboardInterrupt:
        return 0
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)


def stream_options(args: argparse.Namespace, mode: str) -> StreamOptions:
    """The watch flags the line stream needs, as plain values (notify from the config loader)."""
    from cotal_tui.config import notify_settings
    from meshview.lines.stream import StreamOptions

    return StreamOptions(mode=mode, backfill=int(args.backfill or 0), dms=not args.no_dms,
                         notify=notify_settings(args),
                         events=getattr(args, "events", None) or "summary")


async def _stream(args: argparse.Namespace, mode: str) -> int:
    from cotal_tui.cli.connection import target_from_args
    from meshview.link.connect import ConnectError, connect
    from meshview.observe.spaces import missing_space
    from meshview.lines.stream import stream_space

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):  # first: a SIGTERM while connecting is exit 0 too
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        connecting = asyncio.create_task(connect(target_from_args(args)))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([connecting, stopped], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if not connecting.done():
            connecting.cancel()
            return 0
        nc, target = connecting.result()
    except ConnectError as e:
        print(f"cotal: {e}", file=sys.stderr, flush=True)
        return 1
    missing = await missing_space(nc, target.space, target.display)
    if missing:  # one sentence and exit 1, never a stream that waits on nothing
        print(f"cotal: {missing}", file=sys.stderr, flush=True)
        await nc.close()
        return 1
    options = stream_options(args, mode)
    from cotal_tui.config import config_problems, read_config

    for problem in config_problems(read_config()):  # once, before the stream: the rest applies
        print(f"cotal: {problem}", file=sys.stderr)
    for f in (sys.stdout, sys.stderr):  # what was printed so far goes before the sinks' lines
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    err = _sink(sys.stderr, gap_line=lambda gap, total:
                f"! {gap} diagnostic lines dropped (stderr was not being read)") or sys.stderr
    out = _sink(sys.stdout) or sys.stdout
    return await stream_space(nc, target, options, out, err, stop,
                              runs_poll=lambda model: _runs_poll(target, model),
                              beside=lambda model, obs, diag: _beside(args, target, options, model, obs, diag))


def _beside(args, target, options, model, obs, diag):
    """``--record`` and ``--notify`` beside the printing; the notifier's escapes go to the
    terminal on stderr (never into stdout's data), or nowhere when stderr is not one."""
    from cotal_tui.config import recording_max_size
    from meshview.record.record_notify import RecordAndNotify

    return RecordAndNotify(model, obs, target.space, target.display, record=args.record,
                           max_size=recording_max_size(args)[0], notify=options.notify,
                           write=_terminal_write if _isatty(sys.stderr) else None, diag=diag)


def _runs_poll(target, model):
    """``run`` lines: the managers' runs polled beside the observer (never on its connection)."""
    from attach.control.runs_poll import RunsPoller, target_client

    poller = RunsPoller(target_client(target, target.space), model)
    poller.start()
    return poller.stop


def _sink(f: TextIO, gap_line: Callable[[int, int], str | None] | None = None) -> LineSink | None:
    """A LineSink on a standard stream's fd; None when it has none (an embedding's StringIO)."""
    try:
        return LineSink(f.fileno(), gap_line=gap_line)
    except (AttributeError, OSError, ValueError):
        return None


def _isatty(f: TextIO) -> bool:
    try:
        return f.isatty()
    except (AttributeError, ValueError):
        return False


def _terminal_write(data: str) -> None:
    """``--notify``'s escapes: to the terminal on stderr, never into stdout's data."""
    os.write(2, data.encode("utf-8", "replace"))
