"""``cotal ps``: the seats every live manager of a space hosts (one ``ps`` scatter)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from meshview.timefmt import uptime


def add_arguments(p: argparse.ArgumentParser) -> None:
    from meshview.connect import add_connection_arguments

    p.add_argument("--json", action="store_true", help="one JSON object per row")
    p.add_argument("--on", metavar="INSTANCE", default=None, help="ask one manager instance only")
    add_connection_arguments(p)


def describe_row(row: dict) -> tuple[str, str]:
    up = uptime(int(row.get("uptimeMs") or 0))
    process = f"running {up}" if row.get("status") == "running" else f"exited after {up}"
    mesh = row.get("mesh")
    if row.get("meshView", "current") != "current":
        m = "mesh unknown"
    elif mesh == "absent":
        m = "not in roster"
    elif mesh == "offline":
        m = "mesh offline"
    else:
        m = f"mesh {mesh}"
    return process, m


async def _main(args: argparse.Namespace) -> int:
    from attach.client import live_instances
    from attach.endpoint import EndpointClient, EndpointError
    from attach.connection import connect, resolve
    from meshview.connect import ConnectError
    from meshview.sanitize import inline as clean  # neutralise untrusted text

    target = resolve(args)
    space, where = target.space, target.display
    try:
        nc = await connect(target)
    except ConnectError as e:
        print(f"cotal ps: {e}", file=sys.stderr)
        return 1
    try:
        ep = EndpointClient(nc, space)
        try:
            expected = {args.on} if args.on else await live_instances(nc, space)
        except Exception:
            print(f"cotal ps: space {space!r} is not provisioned on {where}.", file=sys.stderr)
            return 1
        if not expected:
            print(f"cotal ps: no manager is serving space {space!r}.", file=sys.stderr)
            return 1
        try:
            if args.on:
                replies = [await ep.call("ps", None, instance_id=args.on, deadline_ms=5000)]
            else:
                replies = await ep.scatter("ps", None, deadline_ms=3000, expected=expected)
        except EndpointError as e:
            print(f"cotal ps: {e.message}.", file=sys.stderr)
            return 1
        rows: list[dict] = []
        answered = set()
        for r in replies:
            answered.add(r.instance_id)
            if r.ok and isinstance(r.data, list):
                rows += [row for row in r.data if isinstance(row, dict)]
            elif r.error is not None:
                print(f"cotal ps: manager {r.instance_id[:8]} refused: {r.error.code}", file=sys.stderr)
        if args.json:
            for row in rows:
                print(json.dumps(row, separators=(",", ":")))
        else:
            print(f"{'NAME':<16} {'AGENT':<11} {'PROCESS':<18} {'MESH':<14} MANAGER")
            for row in sorted(rows, key=lambda r: str(r.get("name"))):
                process, mesh = describe_row(row)
                print(f"{clean(str(row.get('name')))[:16]:<16} {clean(str(row.get('agent')))[:11]:<11} "
                      f"{process:<18} {mesh:<14} {str(row.get('instanceId', ''))[:8]}")
        for iid in sorted(expected - answered):
            print(f"manager {iid[:8]}: registered, no answer within the deadline", file=sys.stderr)
        return 0
    finally:
        await nc.close()


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_main(args))
