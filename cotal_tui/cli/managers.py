"""``cotal deregister-instance | personas | models`` and ``cotal status`` without a seat: the
managers themselves, one module for the verbs that ask a manager about itself.

    cotal deregister-instance INSTANCE [--json]  remove the registration of a manager whose host is
                                                 gone: refused unless the instance does not answer a
                                                 pinned describe AND the broker reports nothing
                                                 subscribed on its rail (``attach.control.instances``)
    cotal personas [NAME] [--json]               the manager's persona catalogue, or one persona's text
    cotal models [--agent A] [--refresh] [--json] each connector's model catalogue
    cotal status [--json]                        each live manager: runtime, custody, agents, uptime,
                                                 connectors, classSpawn, static reconciliation and
                                                 every failure with its remedy

Everything a manager says is untrusted: neutralised before it reaches the terminal, exact (JSON
escaped) with ``--json``. Exit status: 0 when it answered (or the record was removed), 1 with one
sentence on stderr when not (a refusal's condition is in it), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Awaitable, Callable


def _common(p: argparse.ArgumentParser, *, on: bool = True) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    p.add_argument("--json", action="store_true", help="the manager's answer, exact, as JSON")
    if on:
        p.add_argument("--on", metavar="INSTANCE", default=None,
                       help="ask this manager instance (its id as `cotal ps` prints it, or a unique prefix)")
    add_connection_arguments(p)


def deregister_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("instance", nargs="?", default=None,
                   help="the manager instance id (as `cotal ps` prints it, or a unique prefix)")
    p.add_argument("--instance", dest="instance_flag", metavar="INSTANCE", default=None,
                   help="the same, as the reference CLI spells it")
    _common(p, on=False)


def personas_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", default=None, help="show this persona (its text) instead of the list")
    _common(p)


def models_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", default=None, help="one connector's catalogue only")
    p.add_argument("--refresh", action="store_true", help="ask the connectors again instead of the cache")
    _common(p)


def _dump(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _call(verb: str, args: argparse.Namespace, act: Callable[[Any], Awaitable[int]], *,
          mutates: bool = False) -> int:
    from attach.control import verbs as control
    from cotal_tui.cli.control import run_verb
    from cotal_tui.cli.prefix import check_instance_prefix
    from cotal_tui.operator import read_only_from_args

    def check() -> None:
        if mutates:
            control.refuse_read_only(read_only_from_args(args))
        check_instance_prefix(getattr(args, "on", None) or getattr(args, "instance", None))

    return run_verb(verb, args, act, check)


# ---- deregister-instance -----------------------------------------------------------------------


def run_deregister(args: argparse.Namespace) -> int:
    if args.instance and args.instance_flag and args.instance != args.instance_flag:
        print("cotal deregister-instance: two different instance ids were given; name one.", file=sys.stderr)
        return 2
    args.instance = args.instance or args.instance_flag
    if not args.instance:
        print("cotal deregister-instance: name the manager instance (its id as cotal ps prints it).",
              file=sys.stderr)
        return 2

    async def act(target: Any) -> int:
        from attach.control.instances import deregister_instance
        from cotal_tui.operator import read_only_from_args
        from meshview.wire.sanitize import inline as clean

        said: list[str] = []
        report = await deregister_instance(target, args.instance, read_only=read_only_from_args(args),
                                           log=said.append)
        if args.json:
            print(_dump(report.as_json()))
        else:
            for line in said:
                print(clean(line))
        return 0

    return _call("deregister-instance", args, act, mutates=True)


# ---- personas, models ------------------------------------------------------------------------------


def run_personas(args: argparse.Namespace) -> int:
    async def act(target: Any) -> int:
        from attach.control.instances import list_personas, show_persona
        from meshview.wire.sanitize import text

        if args.name is not None:
            iid, p = await show_persona(target, args.name, on=args.on)
            if args.json:
                print(_dump({**p, "manager": iid}))
                return 0
            print(persona_head(p))
            if isinstance(p.get("persona"), str):
                print("    " + text(p["persona"], indent="    "))
            return 0
        iid, items = await list_personas(target, on=args.on)
        if args.json:
            for p in items:
                print(_dump({**p, "manager": iid}))
            return 0
        if not items:
            print(f"(manager {iid} has no personas)")
        for p in sorted(items, key=lambda p: p["name"]):
            print(persona_head(p))
        return 0

    return _call("personas", args, act)


def persona_head(p: dict) -> str:
    """``name/role · model · description`` (or its error), terminal-safe."""
    from meshview.wire.sanitize import inline as clean

    who = clean(p.get("name"), 64) + (f"/{clean(p.get('role'), 32)}" if isinstance(p.get("role"), str) else "")
    bits = [who]
    for k in ("model", "owner", "description"):
        if isinstance(p.get(k), str):
            bits.append(clean(p[k], 200))
    if isinstance(p.get("error"), str):
        bits.append(f"unreadable: {clean(p['error'], 300)}")
    return " · ".join(bits)


def run_models(args: argparse.Namespace) -> int:
    async def act(target: Any) -> int:
        from attach.control.instances import list_models
        from meshview.wire.sanitize import inline as clean

        iid, catalogs = await list_models(target, agent=args.agent, refresh=args.refresh, on=args.on)
        if args.json:
            for c in catalogs:
                print(_dump({**c, "manager": iid}))
            return 0
        if not catalogs:
            print(f"(manager {iid} lists no connectors)")
        for c in catalogs:
            agent = clean(c.get("agent"), 64)
            if isinstance(c.get("error"), str):
                print(f"{agent}: {clean(c['error'], 300)}")
                continue
            if c.get("supported") is False:
                print(f"{agent}: does not list models")
                continue
            models = [clean(m if isinstance(m, str) else (m.get("id") or m.get("name")) if isinstance(m, dict)
                            else json.dumps(m), 80) for m in (c.get("models") or [])]
            print(f"{agent}: " + (", ".join(models) if models else "(none)"))
        return 0

    return _call("models", args, act)


# ---- status of the managers ------------------------------------------------------------------------


async def print_manager_status(target: Any, args: argparse.Namespace) -> int:
    """``cotal status`` with no seat: every live manager's own status, silent ones named."""
    from attach.control import verbs as control
    from attach.control.instances import manager_status
    from attach.control.seat_text import manager_line, status_lines, stray_lines

    result = await manager_status(target, on=args.on)
    deadline_s = control.PS_DEADLINE_MS / 1000
    for m in result.managers:
        if m.state == "answered":
            if args.json:
                print(_dump({**(m.data if isinstance(m.data, dict) else {"status": m.data}),
                             "manager": m.instance_id}))
            else:
                for line in status_lines(m):
                    print(line)
        else:
            print(manager_line(m, deadline_s).replace(": refused ps (", ": refused status ("),
                  file=sys.stderr if args.json else sys.stdout)
    for line in stray_lines(result):
        print(line, file=sys.stderr if args.json else sys.stdout)
    return 0
