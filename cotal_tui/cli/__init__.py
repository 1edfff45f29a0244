"""The ``cotal`` / ``cotal-tui`` entry point: one subcommand per module, imported when used.

This package is the one home of the command line: argparse, signal handling, stdout/stderr and
the process's exit code live here (and in the command modules), never in ``meshview``, which
takes plain values. The process itself is set up in :mod:`cotal_tui.cli.process`; the
connection flags every command shares are :mod:`cotal_tui.cli.connection`.

The table below is all ``cotal --help`` needs; the one module named on the command line is
imported to add its flags and run. Command modules keep their heavy imports inside ``run``,
so ``cotal watch`` never loads the demo broker and ``cotal ps`` never loads Textual."""

from __future__ import annotations

import os
import sys

try:  # a Ctrl-C while the entry script imports this package: exit 0, not a traceback
    import argparse
    import importlib

    from meshview.errors import swallowed
except KeyboardInterrupt:
    raise SystemExit(0) from None

# subcommand -> module exposing add_arguments(parser) and run(args) -> int ("module:verb": the
# module's <verb>_arguments and run_<verb>, for verbs that share one module)
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("cotal_tui.cli.demo", "embedded broker + scripted team + manager + console"),
    "watch": ("cotal_tui.cli.watch", "observe a space: console on a TTY, else a line stream"),
    "attach": ("cotal_tui.cli.attach", "interactive session on a managed agent's terminal"),
    "ps": ("cotal_tui.cli.ps", "list managed seats, per manager"),
    "spawn": ("cotal_tui.cli.control:spawn", "start a managed seat from a persona; waits for it to join"),
    "stop": ("cotal_tui.cli.control:stop", "stop a managed seat (graceful, or --force)"),
    "input": ("cotal_tui.cli.control:input", "type text into a managed seat's terminal"),
    "status": ("cotal_tui.cli.control:status", "one managed seat's row; without a seat, the managers themselves"),
    "runs": ("cotal_tui.cli.runs", "workflow runs: ps, journal, answer a checkpoint, start, resume"),
    "deregister-instance": ("cotal_tui.cli.managers:deregister",
                            "remove a gone manager's stale registration (refused while it answers)"),
    "personas": ("cotal_tui.cli.managers:personas", "the manager's personas, or one persona's text"),
    "models": ("cotal_tui.cli.managers:models", "each connector's model catalogue, from a manager"),
    "send": ("cotal_tui.cli.send", "send one message: a channel post, a DM, an ask or a reply"),
    "deliver": ("cotal_tui.cli.deliver", "pending NAME: what the broker holds for one DM recipient"),
    "chat": ("cotal_tui.cli.chat", "line-mode chat: the live stream above a prompt that sends"),
    "replay": ("cotal_tui.cli.replay", "replay a recording (cotal watch --record) with no broker"),
    "config": ("cotal_tui.cli.config", "the effective configuration and where each key came from"),
    "version": ("cotal_tui.cli.version", "which cotal this is: versions of the package, protocol, contract, libraries"),
    "completion": ("cotal_tui.cli.completion", "print a shell completion script (bash, zsh or fish)"),
}
COMPLETE = "__complete"  # the hidden query the completion scripts call (cli/completion.py)
PROGRAMS = ("cotal", "cotal-tui")  # the entry points, one CLI (pyproject.toml [project.scripts])


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line of usage on bad flags (never a traceback)."""


def chosen_command(argv: list[str]) -> str | None:
    """The subcommand named on the command line (``cotal`` itself takes no option but ``-h``)."""
    return next((a for a in argv if not a.startswith("-")), None)


def program_name() -> str:
    """The name usage and errors go by: ``cotal-tui`` when run as that, else ``cotal``."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return name if name in PROGRAMS else PROGRAMS[0]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every subcommand listed, and the flags of ``command`` only (``None``:
    of every command, which imports them all; ``""``: of none)."""
    from cotal_tui.cli.version import VersionAction

    p = _Parser(prog=program_name(), description="Terminal console for Cotal meshes.")
    p.add_argument("--version", action=VersionAction)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    p.set_defaults(_subparsers={})
    for name, (mod, help_) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_, description=help_)
        p.get_default("_subparsers")[name] = sp
        if command is not None and name != command:
            continue
        mod, _, verb = mod.partition(":")
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
            sp.set_defaults(_missing=name)
            continue
        add, run = ((getattr(module, f"{verb}_arguments"), getattr(module, f"run_{verb}")) if verb
                    else (module.add_arguments, module.run))
        add(sp)
        if "--version" not in sp._option_string_actions:  # a command's own --version wins
            sp.add_argument("--version", action=VersionAction)
        sp.set_defaults(_run=run)
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse, set the process up, run one command; every failure it did not handle becomes
    one sentence on stderr and exit 1 (a traceback only with ``COTAL_DEBUG``). Ctrl-C at any
    moment exits 0, also while the modules load (a ``KeyboardInterrupt`` traceback otherwise:
    they load here, not when the entry script imports this package)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 0


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if chosen_command(argv) is not None:  # `cotal --help` loads no command: no process set-up (logging...)
        from cotal_tui.cli.process import prepare_process

        prepare_process()
    if argv[:1] == [COMPLETE]:  # not a command: no parser, no log file, never a word on stderr
        from cotal_tui.cli.completion import run_query

        return run_query(argv[1:])
    prog = program_name()
    parser = build_parser(chosen_command(argv) or "")
    args, extra = parser.parse_known_args(argv)
    if extra:  # the subcommand's own usage, not the top-level one (`cotal watch --bogus`)
        sub = parser.get_default("_subparsers").get(args.command) if args.command else None
        (sub or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if not args.command:
        parser.print_help()
        return 2
    if getattr(args, "_missing", None):
        print(f"{prog}: '{args._missing}' is not available in this build.", file=sys.stderr)
        return 2
    from cotal_tui.cli.process import prepare_process, quiet_library_logs, start_log_file, steady_malloc

    prepare_process()  # already done above; here too, so no command ever runs without it
    quiet_library_logs()
    start_log_file(args.command)
    steady_malloc()
    try:
        return int(args._run(args) or 0)
    except Exception as e:  # noqa: BLE001 - the one edge where a failure becomes a sentence
        if os.environ.get("COTAL_DEBUG", "").strip() not in ("", "0"):
            raise
        print(f"{prog} {args.command}: {failure_sentence(e)}", file=sys.stderr)
        return 1


DEBUG_HINT = "run it again with COTAL_DEBUG=1 for the traceback"


def failure_sentence(e: BaseException) -> str:
    """The one sentence for a failure a command did not handle itself: a known transport
    failure (a socket error, a timeout, a nats error) in words, from :func:`meshview.link.connect.
    explain_error`; an error of one of the layers' roots (``cotal_tui.errors.LAYER_ROOTS``) by its
    own text, the first line of it; anything else is a bug, said as one, with the way to see its traceback.
    Never the exception's class name, an errno or a repr (a bug's own text may be all three,
    so it is not shown: the traceback has it)."""
    try:
        from meshview.link.connect import explain_error

        said = explain_error(e)
    except Exception:  # noqa: BLE001 - the translation itself must never be the next traceback [counted: COTAL_LOG]
        swallowed("cotal_tui.cli:failure_sentence")
        said = None
    if said:
        return f"{said}; nothing more was done (if this persists, {DEBUG_HINT})."
    told = _own_sentence(e)
    if told:
        return f"{told}."
    return f"it stopped on an internal error (a bug in cotal, not your input); {DEBUG_HINT} and report it."


def _own_sentence(e: BaseException) -> str | None:
    """A layer's own error already says what happened in words: its first line, unstopped."""
    from cotal_tui.errors import LAYER_ROOTS

    if not isinstance(e, LAYER_ROOTS):
        return None
    lines = str(e).strip().splitlines()
    return lines[0].strip().rstrip(".") if lines else None

