"""``cotal ps``: the seats every registered manager of a space hosts (one ``ps`` scatter).

Rows are grouped per manager; the MANAGER column is the instance that answered (taken from the
reply subject, never from the row), printed whole because ``--on`` takes nothing shorter. A
manager that refused is named with the refusal; one that stayed silent past the deadline is
named with what the broker says about it: nothing subscribed on its rail means its host is gone
and its registration is stale; something subscribed but silent means alive but slow, or wedged.
Exit status: 0 with the answer (partial answers included: they name what is missing), 1 when
nothing could be asked (one sentence on stderr), 2 for a malformed ``--on``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from meshview.timefmt import uptime

KIND_W, NAME_W, PROC_W, MESH_W = 11, 16, 18, 16


def add_arguments(p: argparse.ArgumentParser) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    p.add_argument("--json", action="store_true", help="one JSON object per row (with its manager)")
    p.add_argument("--on", metavar="INSTANCE", default=None,
                   help="ask one manager instance only (the whole id, as ps prints it)")
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


def manager_line(m, deadline_s: float) -> str:
    """What one manager that gave no rows says (refused or silent), for the operator."""
    if m.state == "refused":
        return f"manager {m.instance_id}: refused ps ({m.code}): {m.message}"
    if m.liveness == "gone":
        return (f"manager {m.instance_id}: registration is stale - nothing is subscribed on its rail; "
                "its host is gone and it never deregistered")
    if m.liveness == "probe-refused":
        return (f"manager {m.instance_id}: registered, no answer within the {deadline_s:g} s deadline "
                "(the broker refused the liveness probe)")
    return (f"manager {m.instance_id}: registered, no answer within the {deadline_s:g} s deadline "
            "(something holds its rail: alive but slow, or wedged)")


def render(result, deadline_s: float, out=sys.stdout) -> None:
    from meshview.sanitize import inline as clean  # rows are untrusted text

    answered = [m for m in result.managers if m.state == "answered"]
    rows = [(m, r) for m in answered for r in sorted(m.rows, key=lambda r: r.name)]
    if rows:
        print(f"{'NAME':<{NAME_W}} {'KIND':<{KIND_W}} {'PROCESS':<{PROC_W}} {'MESH':<{MESH_W}} MANAGER", file=out)
        for m, r in rows:
            process, mesh = describe_row(r.raw)
            print(f"{clean(r.name)[:NAME_W]:<{NAME_W}} {clean(r.agent)[:KIND_W]:<{KIND_W}} "
                  f"{process:<{PROC_W}} {clean(mesh)[:MESH_W]:<{MESH_W}} {m.instance_id}", file=out)
    else:
        print("(no managed agents)", file=out)
    if len(result.managers) > 1:
        for m in answered:
            if not m.rows:
                print(f"manager {m.instance_id}: no managed agents", file=out)
    for m in result.managers:
        if m.state != "answered":
            print(clean(manager_line(m, deadline_s)), file=out)


async def _main(args: argparse.Namespace) -> int:
    from attach import control
    from attach.connection import session_target
    from cotal_tui.cli.connection import target_from_args

    from meshview.connect import ConnectError
    from meshview.spaces import require_space

    target = session_target(target_from_args(args))
    try:
        control.check_instance(args.on)  # usage before the network
        await require_space(target)
        result = await control.ps(target, on=args.on)
    except ConnectError as e:
        print(f"cotal ps: {e}", file=sys.stderr)
        return 1
    except control.ControlError as e:
        print(f"cotal ps: {e.message}", file=sys.stderr)
        return 2 if e.code == "bad-request" else 1
    if not result.managers:
        print(f"cotal ps: no manager is registered in space {target.space} on {target.display}.", file=sys.stderr)
        return 1
    deadline_s = control.PS_DEADLINE_MS / 1000
    if args.json:
        for m in result.managers:
            for r in m.rows:
                print(json.dumps({**r.raw, "manager": m.instance_id}, separators=(",", ":")))
        for m in result.managers:
            if m.state != "answered":
                print(f"cotal ps: {manager_line(m, deadline_s)}", file=sys.stderr)
        return 0
    render(result, deadline_s)
    return 0


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_main(args))
