"""``cotal ps``: the seats every registered manager of a space hosts (one ``ps`` scatter).

Rows are grouped per manager; the MANAGER column is the instance that answered (taken from the
reply subject, never from the row), printed whole because ``--on`` takes nothing shorter. A
manager that refused is named with the refusal; one that stayed silent past the deadline is
named with what the broker says about it: nothing subscribed on its rail means its host is gone
and its registration is stale (``cotal deregister-instance`` removes it); something subscribed but
silent means alive but slow, or wedged. Only live registrations are asked (an exited, escalated or
deregistered manager is not, nor one that holds only a lease); an escalated one is named.
Exit status: 0 with the answer (partial answers included: they name what is missing), 1 when
nothing could be asked (one sentence on stderr), 2 for a malformed ``--on``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

def add_arguments(p: argparse.ArgumentParser) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    p.add_argument("--json", action="store_true", help="one JSON object per row (with its manager)")
    p.add_argument("--on", metavar="INSTANCE", default=None,
                   help="ask one manager instance only (its id as ps prints it, or a unique prefix)")
    add_connection_arguments(p)


async def _main(args: argparse.Namespace) -> int:
    from attach.control import verbs as control
    from attach.control.connection import session_target
    from attach.control.managed import is_stranded, ps_seats, stranded
    from attach.control.seat_text import manager_line, render_ps, stranded_line, stray_lines
    from cotal_tui.cli.connection import target_from_args
    from cotal_tui.cli.prefix import PrefixError, check_instance_prefix
    from cotal_tui.cli.prefix import instance as prefix_instance
    from meshview.link.connect import ConnectError
    from meshview.observe.spaces import require_space

    target = session_target(target_from_args(args))
    try:
        check_instance_prefix(args.on)  # usage before the network
        await require_space(target)
        args.on = await prefix_instance(target, args.on)
        result = await control.ps(target, on=args.on)
    except ConnectError as e:
        print(f"cotal ps: {e}", file=sys.stderr)
        return 1
    except PrefixError as e:
        print(f"cotal ps: {e}", file=sys.stderr)
        return 2
    except control.ControlError as e:
        if e.code == "failed-precondition" and e.message.startswith("no "):  # the frozen set is empty
            print(f"cotal ps: {e.message.rstrip('.')} on {target.display}.", file=sys.stderr)
            return 1
        print(f"cotal ps: {e.message}", file=sys.stderr)
        return 2 if e.code == "bad-request" else 1
    deadline_s = control.PS_DEADLINE_MS / 1000
    seats = ps_seats(result)  # the answered rows in order, as the console's poll reads them
    stuck = stranded(s for _, s in seats)
    if args.json:
        for r, seat in seats:
            print(json.dumps({**r.raw, "manager": r.instance_id, "stranded": is_stranded(seat)},
                             separators=(",", ":")))
        for m in result.managers:
            if m.state != "answered":
                print(f"cotal ps: {manager_line(m, deadline_s)}", file=sys.stderr)
        for line in stray_lines(result):
            print(f"cotal ps: {line}", file=sys.stderr)
        return 0
    render_ps(result, deadline_s, sys.stdout)
    if stuck:  # beside the table, as the pinned note: the rows say "running … not in roster"
        print(f"cotal ps: {stranded_line(stuck)}", file=sys.stderr)
    if getattr(result, "pinned", None):
        print(f"cotal ps: manager {result.pinned}'s view only (a user-auth mesh pins one manager; "
              "no scatter)", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_main(args))
