"""``cotal ps``: the seats every registered manager of a space hosts (one ``ps`` scatter).

Rows are grouped per manager; the MANAGER column is the instance that answered (taken from the
reply subject, never from the row), printed whole because ``--on`` takes nothing shorter. The MESH
column says what the manager reads of the seat's presence in the reference CLI's words: the status
with its harness condition and last work event (``mesh waiting (rate_limit for 40m) · active 40m
ago``), ``mesh offline for 3.5h`` from ``offlineSince``, ``mesh unknown (<why>)`` when the
manager's presence view is not current. ``--wide`` prints one facts line under each seat (model and
variant, provider, cwd, pid, spawner, host, lifecycle uid, the session it forked from); ``--json``
the manager's row verbatim, one object per line; ``--slots`` the managers' durable static-slot rows.

A manager that refused is named with the refusal; one that stayed silent past the deadline is
named with what the broker says about it: nothing subscribed on its rail means its host is gone
and its registration is stale (``cotal deregister-instance`` removes it); something subscribed but
silent means alive but slow, or wedged. Only live registrations are asked (an exited, escalated or
deregistered manager is not, nor one that holds only a lease); an escalated one is named. A row
whose known field has another type than the contract's is rejected by name; the others show.
Exit status: 0 with every asked manager's answer; 1 when nothing could be asked (one sentence on
stderr), or when the answer is partial (a manager did not answer, or a row was rejected: what
was read is printed, then what is missing); 2 for a malformed ``--on``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

def add_arguments(p: argparse.ArgumentParser) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    p.add_argument("--json", action="store_true", help="one JSON object per row (with its manager)")
    p.add_argument("--wide", action="store_true",
                   help="a facts line under each seat: model, provider, cwd, pid, spawner, host, uid, fork origin")
    p.add_argument("--slots", action="store_true", help="the managers' durable static-slot rows instead of seats")
    p.add_argument("--on", metavar="INSTANCE", default=None,
                   help="ask one manager instance only (its id as ps prints it, or a unique prefix)")
    add_connection_arguments(p)


async def _main(args: argparse.Namespace) -> int:
    from attach.control import verbs as control
    from attach.control.connection import session_target
    from attach.control.instances import manager_slots
    from attach.control.managed import is_stranded, ps_seats, stranded
    from attach.control.row_facts import RowRejected, check_row
    from attach.control.seat_text import (manager_line, partial, rejected_line, render_ps, slot_lines,
                                          stranded_line, stray_lines)
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
        if args.slots:
            result = await manager_slots(target, on=args.on)
        else:
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
    missing = partial(result)
    if args.slots:
        lines = slot_lines(result)
        if args.json:
            for m in result.managers:
                if m.state == "answered" and isinstance(m.data, list):
                    for row in m.data:
                        print(json.dumps({**row, "manager": m.instance_id} if isinstance(row, dict) else row,
                                         separators=(",", ":")))
        else:
            for line in lines or ["(no static slots)"]:
                print(line)
        for m in result.managers:
            if m.state != "answered":
                print(f"cotal ps: {manager_line(m, deadline_s).replace(': refused ps (', ': refused slots (')}",
                      file=sys.stderr)
        return 1 if missing else 0
    seats = ps_seats(result)  # the answered rows in order, as the console's poll reads them
    stuck = stranded(s for _, s in seats)
    if args.json:
        bad = 0
        for r, seat in seats:
            try:
                check_row(r.raw)
            except RowRejected as e:
                bad += 1
                print(f"cotal ps: {rejected_line(r.instance_id, r.name, e)}", file=sys.stderr)
                continue
            print(json.dumps({**r.raw, "manager": r.instance_id, "stranded": is_stranded(seat)},
                             separators=(",", ":")))
        for m in result.managers:
            if m.state != "answered":
                print(f"cotal ps: {manager_line(m, deadline_s)}", file=sys.stderr)
        for line in stray_lines(result):
            print(f"cotal ps: {line}", file=sys.stderr)
        return 1 if missing or bad else 0
    bad = render_ps(result, deadline_s, sys.stdout, wide=args.wide)
    if stuck:  # beside the table, as the pinned note: the rows say "running … not in roster"
        print(f"cotal ps: {stranded_line(stuck)}", file=sys.stderr)
    if getattr(result, "pinned", None):
        print(f"cotal ps: manager {result.pinned}'s view only (a user-auth mesh pins one manager; "
              "no scatter)", file=sys.stderr)
    if missing:
        n = len(missing)
        print(f"cotal ps: partial answer: {n} manager{'s' if n != 1 else ''} did not answer "
              f"(named above); these rows are not the whole space.", file=sys.stderr)
    return 1 if missing or bad else 0


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_main(args))
