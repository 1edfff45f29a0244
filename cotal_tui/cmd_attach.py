"""``cotal attach <name>``: an interactive session on a managed seat's terminal over the mesh."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="seat name (see `cotal ps`)")
    p.add_argument("--server", default="nats://127.0.0.1:4222", help="NATS URL (default: %(default)s)")
    p.add_argument("--space", default="main", help="space name (default: %(default)s)")
    p.add_argument("--on", metavar="INSTANCE", default=None, help="pin one manager instance")
    p.add_argument("--no-reconnect", action="store_true", help="exit instead of re-attaching on a link fault")


async def connect(server: str):
    """One bare connection, no automatic reconnect (a session owns its re-establishment).

    Kept in one place so it can be swapped for ``meshview.connect`` later."""
    import nats

    async def quiet(_e: Exception) -> None:  # failures are reported once, by the caller
        pass

    return await nats.connect(
        server, allow_reconnect=False, connect_timeout=2, max_reconnect_attempts=1,
        reconnect_time_wait=0.1, ping_interval=10, name="cotal-attach",
        error_cb=quiet, disconnected_cb=None,
    )


async def _preflight(server: str) -> str | None:
    try:
        nc = await connect(server)
    except Exception:
        return f"cotal attach: cannot reach the broker at {server}."
    await nc.close()
    return None


async def _main(args: argparse.Namespace, detach_byte: int) -> int:
    from attach.client import AttachSession
    from attach.passthrough import run_passthrough

    problem = await _preflight(args.server)
    if problem:
        print(problem, file=sys.stderr)
        return 1

    def factory(**kw):
        return AttachSession(args.space, args.name, connect=lambda: connect(args.server),
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
