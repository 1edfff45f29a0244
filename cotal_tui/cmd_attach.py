"""``cotal attach <name>``: an interactive session on a managed seat's terminal over the mesh."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    from meshview.connect import add_connection_arguments

    p.add_argument("name", help="seat name (see `cotal ps`)")
    p.add_argument("--on", metavar="INSTANCE", default=None, help="pin one manager instance")
    p.add_argument("--no-reconnect", action="store_true", help="exit instead of re-attaching on a link fault")
    add_connection_arguments(p)


async def _preflight(target) -> str | None:
    from attach.connection import connect
    from meshview.connect import ConnectError

    try:
        nc = await connect(target)
    except ConnectError as e:
        return f"cotal attach: {e}"
    await nc.close()
    return None


async def _main(args: argparse.Namespace, detach_byte: int) -> int:
    from attach.client import AttachSession
    from attach.connection import connect, resolve
    from attach.passthrough import run_passthrough

    target = resolve(args)
    problem = await _preflight(target)
    if problem:
        print(problem, file=sys.stderr)
        return 1

    def factory(**kw):
        return AttachSession(target.space, args.name, connect=lambda: connect(target),
                             reconnect=not args.no_reconnect, instance_id=args.on, **kw)

    _, code = await run_passthrough(factory, name=args.name, detach_byte=detach_byte)
    return code


def run(args: argparse.Namespace) -> int:
    from attach.passthrough import DetachKeyError, parse_detach_key

    try:
        detach_byte = parse_detach_key(os.environ.get("COTAL_DETACH_KEY"))
    except DetachKeyError as e:  # validated before the terminal is touched
        print(f"cotal attach: {e}.", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_main(args, detach_byte))
    except KeyboardInterrupt:
        return 130
