"""The ``cotal`` entry point: one subcommand per module, imported only when used."""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> module exposing add_arguments(parser) and run(args) -> int
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("cotal_tui.cmd_demo", "embedded broker + scripted team + manager + console"),
    "watch": ("cotal_tui.cmd_watch", "observe a space: console on a TTY, else a line stream"),
    "attach": ("cotal_tui.cmd_attach", "interactive session on a managed agent's terminal"),
    "ps": ("cotal_tui.cmd_ps", "list managed seats"),
}


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line of usage on bad flags (never a traceback)."""


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cotal", description="Terminal console for Cotal meshes.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, (mod, help_) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_, description=help_)
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
            sp.set_defaults(_missing=name)
            continue
        module.add_arguments(sp)
        sp.set_defaults(_run=module.run)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    if getattr(args, "_missing", None):
        print(f"cotal: '{args._missing}' is not available in this build.", file=sys.stderr)
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
