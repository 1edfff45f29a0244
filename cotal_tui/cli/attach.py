"""``cotal attach <name>``: an interactive session on a managed seat's terminal over the mesh."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    p.add_argument("name", nargs="?", default=None, help="seat name (see `cotal ps`)")
    p.add_argument("--name", dest="name_flag", metavar="NAME", default=None,
                   help="the seat name, as a flag (same as the positional)")
    p.add_argument("--on", metavar="INSTANCE", default=None,
                   help="pin one manager instance (its id or a unique prefix, as cotal managers lists it)")
    p.add_argument("--no-reconnect", action="store_true", help="exit instead of re-attaching on a link fault")
    p.add_argument("--clipboard", action="store_true", default=None,
                   help="let the seat write your clipboard (OSC 52), as tmux's set-clipboard; "
                        "off by default (also [attach] clipboard = true in config.toml)")
    p.add_argument("--no-titles", dest="titles", action="store_false", default=None,
                   help="drop the seat's window-title changes (OSC 0/1/2); kept by default "
                        "(also [attach] titles = false in config.toml)")
    add_connection_arguments(p)
    p.epilog = ("Ctrl-] alone detaches; Esc and every other key reach the seat at once. Other "
                "detach keys are opt-in: COTAL_DETACH_KEY or [attach] detach_keys in config.toml "
                "take ctrl-<c>, ^<c>, esc, or sequences such as \"esc esc\" or \"ctrl-b d\", "
                "several separated by commas (\"ctrl-], esc esc\").")


async def _preflight(target) -> str | None:
    """The space check every verb makes, before a grant is asked for."""
    from meshview.link.connect import ConnectError
    from meshview.observe.spaces import require_space

    try:
        await require_space(target)
    except ConnectError as e:
        return f"cotal attach: {e}"
    return None


async def _main(args: argparse.Namespace, detach) -> int:
    from attach.control.verbs import ControlError
    from attach.session.client import AttachSession
    from attach.control.connection import connect, session_target
    from cotal_tui.cli import prefix
    from attach.terminal.termfilter import TermFilter
    from cotal_tui.cli.connection import target_from_args
    from cotal_tui.config import attach_terminal
    from cotal_tui.cli.passthrough import run_passthrough

    # on a user-auth mesh --on is the exchange's managerInstanceId pin (ignored elsewhere)
    target = dataclasses.replace(session_target(target_from_args(args)), manager_instance=args.on)
    problem = await _preflight(target)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    try:  # a prefix of --on made the one whole instance id it starts, before a grant is asked for
        args.on = await prefix.instance(target, args.on)
    except prefix.PrefixError as e:  # none or several: named, with the candidates
        print(f"cotal attach: {e}", file=sys.stderr)
        return 2
    except ControlError as e:
        print(f"cotal attach: {e}", file=sys.stderr)
        return 1
    target = dataclasses.replace(target, manager_instance=args.on)

    def factory(**kw):
        return AttachSession(target.space, args.name, connect=lambda: connect(target),
                             reconnect=not args.no_reconnect, instance_id=args.on, **kw)

    (clipboard, _), (titles, _) = attach_terminal(args)
    _, code = await run_passthrough(factory, name=args.name, detach=detach,
                                    term_filter=TermFilter(clipboard=clipboard, titles=titles))
    return code


def seat_name(args: argparse.Namespace) -> str | None:
    """The seat from the positional or ``--name`` (both only when they agree)."""
    pos, flag = args.name, getattr(args, "name_flag", None)
    if pos and flag and pos != flag:
        return None
    return pos or flag


def run(args: argparse.Namespace) -> int:
    from attach.control.verbs import ControlError
    from attach.terminal.detach import DetachKeyError
    from cotal_tui.cli.prefix import check_instance_prefix
    from cotal_tui.config import detach_keys

    name = seat_name(args)
    if not name:
        what = "two different seats" if args.name and args.name_flag else "no seat"
        print(f"cotal attach: {what} named: give one, as `cotal attach NAME` or --name NAME.",
              file=sys.stderr)
        return 2
    args.name = name
    try:  # usage, before the network and the terminal
        check_instance_prefix(args.on)
    except ControlError as e:
        print(f"cotal attach: {e}", file=sys.stderr)
        return 2
    try:
        detach, _ = detach_keys()  # COTAL_DETACH_KEY, then [attach] detach_keys
    except DetachKeyError as e:  # validated before the terminal is touched
        print(f"cotal attach: {e}.", file=sys.stderr)
        return 2
    if not _is_tty(sys.stdin):  # keys go through raw: a pipe or file cannot drive a terminal
        print("cotal attach: stdin is not a terminal; attach passes your keys to the seat, so "
              "run it from a terminal (to read a space without one, use cotal watch --plain).",
              file=sys.stderr)
        return 1
    try:
        return asyncio.run(_main(args, detach))
    except KeyboardInterrupt:
        return 130


def _is_tty(f) -> bool:
    try:
        return f is not None and os.isatty(f.fileno())
    except (AttributeError, OSError, ValueError):
        return False
