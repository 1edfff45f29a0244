"""``cotal replay FILE``: a recording (``cotal watch --record``) back in the console, no broker.

On a terminal the console opens on the recording with a timeline; ``--plain``/``--json`` (or a
non-terminal stdout) print it as the line stream would have, paced by ``--speed``. A damaged
recording replays up to the damage and says so in one sentence. Seat terminals recorded with
``--record-seats`` print as one summary line per recorded line (event, size, byte count, the
printable text): never the raw bytes.
"""

from __future__ import annotations

import argparse
import asyncio
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


def run(args: argparse.Namespace) -> int:
    from meshview.replay import RecordingError, load_recording

    try:
        rec = load_recording(args.file)
    except RecordingError as e:
        print(f"cotal: {e}", file=sys.stderr)
        return 1
    if args.json or args.plain or not sys.stdout.isatty():
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            return asyncio.run(replay_lines(rec, "json" if args.json else "plain", args.speed))
        except KeyboardInterrupt:
            return 0
    from cotal_tui.cli.config import console_start
    from cotal_tui.replay_app import ReplayApp
    from meshview.replay import ReplaySession

    keymap, warning = console_start()
    app = ReplayApp(session=ReplaySession(rec, args.speed), keymap=keymap, notice=warning)
    return int(app.run() or 0)


async def replay_lines(rec, mode: str, speed: float, out=None, err=None) -> int:
    """Print the recording as the line stream printed it live, paced by ``speed``."""
    import json

    from meshview import sanitize
    from meshview.replay import Player, Replay
    from meshview.seatreplay import seat_line_json, seat_line_text
    from meshview.stream import StreamWriter, TextRenderer

    out = out or sys.stdout
    err = err or sys.stderr
    replay = Replay(rec, record_events=True)
    writer = StreamWriter(mode, out, err)
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
