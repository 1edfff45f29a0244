"""``cotal spawn | stop | input | status``: one control action on the hosting manager each.

    cotal spawn PERSONA [--name N] [--on INSTANCE]   start a seat; waits for it to join the mesh
                                                     (presence), its program to exit, or the
                                                     manager's readiness deadline, and says which
    cotal stop NAME [--force] [--on INSTANCE]        graceful (SIGHUP + SIGTERM, SIGKILL after the
                                                     manager's grace) or force (SIGKILL)
    cotal input NAME TEXT... [--no-enter]            type TEXT into the seat's terminal (then Enter)
    cotal status NAME [--on INSTANCE] [--json]       the seat's row, from the manager hosting it

Each verb opens its own connection (the usual connection flags), locates the seat across the
registered managers and calls the one hosting it (``attach.control``). Exit status: 0 when it
happened; 1 with one sentence on stderr when it did not (or its outcome is unknown); 2 for bad
usage (a malformed name, persona, instance id or text). ``COTAL_READ_ONLY`` refuses spawn, stop
and input before anything touches the network.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, Awaitable, Callable


def _common(p: argparse.ArgumentParser) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    p.add_argument("--on", metavar="INSTANCE", default=None,
                   help="the manager instance to address (the whole id, as `cotal ps` prints it)")
    add_connection_arguments(p)


def spawn_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("persona", help="what to start: echo, dashboard or bash on the demo manager")
    p.add_argument("--name", default=None, help="the seat's name (default: the persona, numbered if taken)")
    _common(p)


def stop_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="seat name (see `cotal ps`)")
    p.add_argument("--force", action="store_true", help="SIGKILL at once instead of a graceful stop")
    _common(p)


def input_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="seat name (see `cotal ps`)")
    p.add_argument("text", nargs="+", help="the text to type (words are joined by one space; "
                   "put -- before text that starts with '-')")
    p.add_argument("--no-enter", action="store_true", dest="no_enter",
                   help="type the text without pressing Enter after it")
    _common(p)


def status_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="seat name (see `cotal ps`)")
    p.add_argument("--json", action="store_true", help="the row as the manager sent it")
    _common(p)


def _call(verb: str, args: argparse.Namespace, act: Callable[[Any, Any, str | None], Awaitable[int]]) -> int:
    from attach import control
    from attach.connection import session_target
    from cotal_tui.cli.connection import target_from_args
    from cotal_tui.operator import read_only_from_args

    async def main() -> int:
        from meshview.connect import ConnectError
        from meshview.spaces import require_space

        target, read_only = session_target(target_from_args(args)), read_only_from_args(args)
        try:
            # usage and read-only first (no network), then the space every verb checks
            if verb != "status":
                control.refuse_read_only(read_only)
            control.check_instance(args.on)
            if verb != "spawn":
                control.check_seat_name(args.name)
            try:
                await require_space(target)
            except ConnectError as e:
                print(f"cotal {verb}: {e}", file=sys.stderr)
                return 1
            return await act(target, control, read_only)
        except control.ControlError as e:
            print(f"cotal {verb}: {e.message}", file=sys.stderr)
            return 2 if e.code == "bad-request" else 1

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 130


def run_spawn(args: argparse.Namespace) -> int:
    async def act(target, control, read_only) -> int:
        r = await control.spawn(target, args.persona, name=args.name, on=args.on, read_only=read_only,
                                progress=lambda line: print(line, flush=True))
        where = f"manager {r.instance_id}"
        if r.outcome == "joined":
            print(f"spawned {r.name} ({r.persona}) on {where}: joined the mesh after {r.elapsed_s:.1f} s")
            return 0
        if r.outcome == "exited":
            code = r.data.get("exitCode")
            why = f" (exit status {code})" if isinstance(code, int) else ""
            print(f"cotal spawn: {r.name} exited before it joined the mesh{why}.", file=sys.stderr)
        elif r.outcome == "cancelled":
            print(f"cotal spawn: {r.name} was stopped before it joined the mesh.", file=sys.stderr)
        else:
            print(f"cotal spawn: {r.name} did not join within the {r.readiness_ms / 1000:g} s readiness "
                  f"deadline of {where}; it may still come up (see cotal ps) - do not spawn it again.",
                  file=sys.stderr)
        return 1

    return _call("spawn", args, act)


def run_stop(args: argparse.Namespace) -> int:
    async def act(target, control, read_only) -> int:
        r = await control.stop(target, args.name, force=args.force, on=args.on, read_only=read_only)
        if r.force:
            print(f"force-killed {r.name} (manager {r.instance_id})")
        elif r.graceful:
            print(f"stopped {r.name} (manager {r.instance_id})")
        else:
            print(f"stopped {r.name} (manager {r.instance_id}): it outlived the grace, so it was killed")
        return 0

    return _call("stop", args, act)


def run_input(args: argparse.Namespace) -> int:
    async def act(target, control, read_only) -> int:
        text = " ".join(args.text)
        r = await control.input_text(target, args.name, text, enter=not args.no_enter, on=args.on,
                                     read_only=read_only)
        tail = "" if args.no_enter else " and Enter"
        print(f"typed {r.bytes} bytes{tail} into {r.name} (manager {r.instance_id})")
        return 0

    return _call("input", args, act)


def run_status(args: argparse.Namespace) -> int:
    async def act(target, control, read_only) -> int:
        from meshview.sanitize import inline as clean

        row = await control.status(target, args.name, on=args.on)
        if args.json:
            print(json.dumps({**row.raw, "manager": row.instance_id}, separators=(",", ":")))
        else:
            print(f"{clean(control.status_line(row))} · manager {row.instance_id}")
        return 0

    return _call("status", args, act)
