"""``cotal replay FILE``: a recording (``cotal watch --record``) back in the console, no broker.

On a terminal the console opens on the recording with a timeline; ``--plain``/``--json`` (or a
non-terminal stdout) print it as the line stream would have, paced by ``--speed``. A damaged
recording replays up to the damage and says so in one sentence. Seat terminals recorded with
``--record-seats`` print as one summary line per recorded line (event, size, byte count, the
printable text): never the raw bytes.

Working on the file (:mod:`meshview.record.recordtools`): ``--grep TEXT`` prints the matching lines
with their offset and time; ``--from``/``--to`` with ``--out`` writes that window as a recording
that replays alone; ``--seat NAME --asciicast OUT`` exports one seat's terminal as asciinema v2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys


def _speed(v: str) -> float:
    try:
        x = float(v.rstrip("xX×"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number like 10 or 0.5, got {v!r}") from None
    if x < 0:
        raise argparse.ArgumentTypeError("the speed is 0 (as fast as possible) or more")
    return x


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a recording from cotal watch --record")
    p.add_argument("--speed", type=_speed, default=1.0, metavar="N",
                   help="recording seconds per second (default 1; 0 = as fast as possible)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--plain", action="store_true", help="print it as cotal watch --plain")
    out.add_argument("--json", action="store_true", help="print it as cotal watch --json")
    out.add_argument("--grep", metavar="TEXT",
                     help="print the lines (messages, presence, seat output) that contain TEXT, with their times")
    out.add_argument("--out", metavar="FILE", help="write the window --from..--to as a recording of its own")
    out.add_argument("--asciicast", metavar="FILE",
                     help="export the terminal of --seat NAME as an asciinema v2 file ('-' for stdout)")
    p.add_argument("--from", dest="start", type=_offset, default=None, metavar="TIME",
                   help="with --out: the window's start, from the recording's start (00:10, 1:02:03, 90s)")
    p.add_argument("--to", dest="end", type=_offset, default=None, metavar="TIME",
                   help="with --out: the window's end (default: the end of the recording)")
    p.add_argument("--seat", metavar="NAME", help="with --asciicast: the recorded seat to export")
    p.add_argument("--events", choices=("full", "summary", "off"), default=None,
                   help="--plain: activity frames as one line each (summary, the default), "
                        "folded in full, or off (as cotal watch --plain --events)")


def _offset(v: str) -> float:
    from meshview.record.recordtools import parse_offset

    try:
        return parse_offset(v)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _tool_usage(args: argparse.Namespace) -> str | None:
    """The flag combination's mistake, in one sentence (None: fine)."""
    if (args.start is not None or args.end is not None) and not args.out:
        return "--from/--to cut a window: add --out FILE"
    if args.seat and not args.asciicast:
        return "--seat picks the terminal to export: add --asciicast FILE"
    if args.asciicast and not args.seat:
        return "--asciicast exports one seat's terminal: add --seat NAME"
    if args.grep is not None and not args.grep:
        return "--grep needs a text to find"
    return None


def run(args: argparse.Namespace) -> int:
    from meshview.record.replay import RecordingError, load_recording

    problem = _tool_usage(args)
    if problem:
        print(f"cotal replay: {problem}", file=sys.stderr)
        return 2
    try:
        rec = load_recording(args.file)
    except RecordingError as e:
        print(f"cotal: {e}", file=sys.stderr)
        return 1
    if args.grep or args.out or args.asciicast:
        try:
            return _tool(rec, args)
        except RecordingError as e:
            print(f"cotal: {e}", file=sys.stderr)
            return 1
        except (BrokenPipeError, KeyboardInterrupt):
            return 0
    if args.json or args.plain or not sys.stdout.isatty():
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            return asyncio.run(replay_lines(rec, "json" if args.json else "plain", args.speed,
                                            events=getattr(args, "events", None) or "summary"))
        except KeyboardInterrupt:
            return 0
    from cotal_tui.cli.config import console_start
    from cotal_tui.replay_app import ReplayApp
    from meshview.record.replay import ReplaySession

    keymap, warning = console_start()
    app = ReplayApp(session=ReplaySession(rec, args.speed), keymap=keymap, notice=warning)
    return int(app.run() or 0)


def _tool(rec, args: argparse.Namespace) -> int:
    from meshview.record import recordtools as rt
    from meshview.record.replay import RecordingError

    if args.grep:
        found = 0
        for m in rt.grep(rec, args.grep):
            found += 1
            print(f"{rt.clock(m.offset)} {m.line}")
        return 0 if found else 1  # grep's convention: 1 when nothing matched
    if args.out:
        start = args.start or 0.0
        end = args.end if args.end is not None else rec.end - rec.start
        r = rt.cut(rec, start, end, args.out)
        print(f"wrote {args.out}: {rt.clock(r.start - rec.start)}-{rt.clock(r.end - rec.start)}, "
              f"{r.inputs} inputs, {r.seat_lines} seat lines", file=sys.stderr)
        return 0
    if args.asciicast == "-":
        rt.asciicast(rec, args.seat, sys.stdout)
        return 0
    tmp = args.asciicast + ".part"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            n = rt.asciicast(rec, args.seat, f)
        os.replace(tmp, args.asciicast)
    except OSError as e:
        raise RecordingError(f"cannot write {args.asciicast}: {e.strerror or e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"wrote {args.asciicast}: {n} events of seat {args.seat}", file=sys.stderr)
    return 0


async def replay_lines(rec, mode: str, speed: float, out=None, err=None,
                       events: str = "summary") -> int:
    """Print the recording as the line stream printed it live, paced by ``speed``; ``events``
    as ``cotal watch --plain --events``."""
    import json

    from meshview.wire import sanitize
    from meshview.record.replay import Player, Replay
    from meshview.record.seatreplay import seat_line_json, seat_line_text
    from meshview.lines.stream import StreamWriter, TextRenderer

    out = out or sys.stdout
    err = err or sys.stderr
    replay = Replay(rec, record_events=True)
    writer = StreamWriter(mode, out, err, events=events)
    writer.labels_of = lambda: replay.model.labels()  # the model a seek may replace
    if mode != "json":
        span = int((replay.end - replay.start) // 1000)
        writer.diag(f"replaying {sanitize.inline(rec.paths[-1])}: space "
                    f"{sanitize.inline(replay.model.space)} on {sanitize.inline(rec.header.get('server', ''))}, "
                    f"{span // 60:02d}:{span % 60:02d} at {speed:g}×" if speed else
                    f"replaying {sanitize.inline(rec.paths[-1])} as fast as possible")
    player = Player(replay, speed)
    seat_lines, si = rec.seat_lines, 0

    def seat_lines_until(t: float) -> list[str]:
        nonlocal si
        lines = []
        while si < len(seat_lines) and seat_lines[si].t <= t:
            x = seat_lines[si]
            si += 1
            if mode == "json":
                lines.append(json.dumps(seat_line_json(x), ensure_ascii=False))
            else:
                stamp = writer.text._c("2", TextRenderer._time(x.t))
                lines.append(f"{stamp} {writer.text._c('2', seat_line_text(x))}")
        return lines

    try:
        while True:
            player.advance()
            writer.write(replay.model.take_events())
            writer.follow_frames(replay.model.frames)
            more = seat_lines_until(min(replay.now, replay.end))
            if more:
                out.write("\n".join(more) + "\n")
                out.flush()
            if player.done.is_set():
                break
            await asyncio.sleep(0.05)
    except (BrokenPipeError, ValueError):
        return 0
    if replay.damage:
        writer.diag(replay.damage)
    return 0
