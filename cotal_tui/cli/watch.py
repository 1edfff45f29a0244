"""``cotal watch``: the console on a TTY, else a plain or JSON Lines stream of the space.

The command's flags and its choice of mode live here; each mode is the module beside it:
:mod:`~cotal_tui.cli.watch_console` (the full-screen console, with its recorder and notifier),
:mod:`~cotal_tui.cli.watch_stream` (``--plain``/``--json``, printing through
:mod:`meshview.lines.stream`), :mod:`~cotal_tui.cli.watch_web` (``--web``). Settings such as
``--notify`` fall back to the environment and ``config.toml`` through :mod:`cotal_tui.config`.
"""

from __future__ import annotations

import argparse
import sys


def _minutes(v: str) -> float:
    """``--stalled-minutes``: a positive number of minutes, else one sentence (exit 2)."""
    from meshview.model.stalled import stall_ms

    try:
        return stall_ms(v) / 60_000.0
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    add_connection_arguments(parser)
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--plain", action="store_true",
                     help="one line per event (default when stdout is not a terminal)")
    out.add_argument("--json", action="store_true", help="JSON Lines, one object per event")
    parser.add_argument("--backfill", type=int, default=None, metavar="N",
                        help="print the newest N messages per channel first, marked historical "
                             "(stream default 0: live only; console default 50)")
    parser.add_argument("--events", choices=("full", "summary", "off"), default=None,
                        help="--plain: the agents' activity frames as one line each (summary, "
                             "the default), folded in full, or off (the console: E toggles them)")
    parser.add_argument("--no-dms", action="store_true",
                        help="watch channels only (no DMs or anycast)")
    parser.add_argument("--read-only", action="store_true", dest="read_only",
                        help="the console never sends or controls (also COTAL_READ_ONLY=1)")
    parser.add_argument("--as", metavar="NAME", dest="as_name",
                        help="the operator's name on the mesh once it sends "
                             "(default: the creds' principal, else <user>-console)")
    parser.add_argument("--health", action="store_true",
                        help="the console's status bar shows plane health (broker, manager and "
                             "delivery planes), probing every 15 s (also [ui] health = true); "
                             "without it the console sends no probe")
    parser.add_argument("--theme", metavar="NAME",
                        help="the console's colours: cotal-dark (default), cotal-light or any "
                             "Textual theme (also COTAL_THEME or [ui] theme in config.toml; "
                             "the : palette's theme switches live)")
    add_extra_arguments(parser)


def add_extra_arguments(parser: argparse.ArgumentParser) -> None:
    """Browser mode, notifications and recording."""
    from meshview.lines.notify import STYLES

    def size(v: str) -> int:
        from meshview.record.record import parse_size  # only when the flag is given: --help stays light

        try:
            return parse_size(v)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    g = parser.add_argument_group("browser, notifications, recording")
    g.add_argument("--web", nargs="?", const="127.0.0.1:8765", metavar="HOST:PORT",
                   help="serve the console to browsers (default 127.0.0.1:8765; one observer "
                        "per browser session; a non-loopback HOST needs --web-token)")
    g.add_argument("--web-token", metavar="TOKEN",
                   help="the token browsers must give (?token=TOKEN); ps shows it, so prefer "
                        "--web-token-file or COTAL_WEB_TOKEN; none given: one is generated "
                        "and printed once")
    g.add_argument("--web-token-file", metavar="PATH",
                   help="read the --web token from the first line of this file")
    g.add_argument("--web-host", metavar="NAME", action="append", default=None,
                   help="another Host name browsers may use for --web (NAME or NAME:PORT; "
                        "repeatable); by default only the bound address is answered")
    g.add_argument("--notify", action="store_true",
                   help="bell + desktop notification when an agent starts waiting "
                        "(also COTAL_NOTIFY=1 or [notify] enabled in config.toml)")
    g.add_argument("--notify-cmd", metavar="CMD",
                   help="run CMD per waiting episode, with COTAL_AGENT, COTAL_AGENT_ID, "
                        "COTAL_CONDITION, COTAL_SPACE... in its environment")
    g.add_argument("--notify-escape", choices=STYLES, default=None,
                   help="which notification escape: osc9 (default), osc777, both, bell")
    g.add_argument("--notify-stalled", action="store_true", dest="notify_stalled",
                   help="also alert when a working agent looks stalled: nothing observed from it "
                        "for --stalled-minutes (implies --notify; [notify] stalled in config.toml)")
    g.add_argument("--notify-run-failed", action="store_true", dest="notify_run_failed",
                   help="also alert when an agent's run fails (RUN_ERROR on its event frames; "
                        "COTAL_EVENT=run-failed; implies --notify; [notify] run_failed)")
    g.add_argument("--notify-finished", action="store_true", dest="notify_finished",
                   help="also alert when an agent's run closed and it went idle "
                        "(COTAL_EVENT=finished; implies --notify; [notify] finished)")
    g.add_argument("--stalled-minutes", type=_minutes, default=None, metavar="N", dest="stalled_minutes",
                   help="minutes without presence change, message, activeAt or terminal output "
                        "before a working agent is flagged stalled? (default 10; "
                        "[notify] stalled_minutes)")
    g.add_argument("--record", metavar="FILE",
                   help="record the session to FILE (gzip JSON Lines; cotal replay FILE)")
    g.add_argument("--record-seats", action="store_true", dest="record_seats",
                   help="with --record: also record the terminal output of the seats you "
                        "attach to, peek at or tile in the console (only those - none is opened "
                        "for the recording); cotal replay shows it in the pane. Your keystrokes "
                        "are never recorded (they may be passwords), but what the program "
                        "prints is, its echo of your typing included")
    g.add_argument("--max-size", type=size, default=None, metavar="SIZE",
                   help="bound of a recording on disk, rotating at half (default 100M)")


def run(args: argparse.Namespace) -> int:
    if args.backfill is not None and args.backfill < 0:
        print("cotal: --backfill must be 0 or more.", file=sys.stderr)
        return 2
    if getattr(args, "theme", None) is not None:
        from cotal_tui.themes import UnknownTheme, console_theme

        try:
            console_theme(args.theme)
        except UnknownTheme as e:
            print(f"cotal: {e}.", file=sys.stderr)
            return 2
    if getattr(args, "record_seats", False) and not getattr(args, "record", None):
        print("cotal: --record-seats adds the terminals you open to a recording: "
              "give --record FILE too.", file=sys.stderr)
        return 2
    if getattr(args, "web", None):
        from cotal_tui.cli.watch_web import serve

        return serve(args)
    if getattr(args, "record", None):
        from pathlib import Path

        parent = Path(args.record).expanduser().resolve().parent
        if not parent.is_dir():
            print(f"cotal: cannot record to {args.record}: no folder {parent}.", file=sys.stderr)
            return 2
    mode = "json" if args.json else "plain"
    if not args.json and not args.plain and sys.stdout.isatty():
        from cotal_tui.cli.watch_console import run_console

        return int(run_console(args) or 0)
    if getattr(args, "record_seats", False):
        print("cotal: --record-seats records the terminals you open in the console; the line "
              "stream (--plain, --json, or stdout not a terminal) opens none.", file=sys.stderr)
        return 2
    from cotal_tui.cli.watch_stream import run_stream

    return run_stream(args, mode)
