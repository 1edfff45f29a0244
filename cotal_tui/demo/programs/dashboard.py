"""A full-screen live dashboard: alternate screen, colours, cursor motion, ~5 updates/s.

Exits the alternate screen on ``q`` or SIGTERM. ``--ticks N`` stops updating after N frames
(the screen stays up), which makes its content deterministic for repaint comparisons.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import termios
import tty

CSI = "\x1b["


def frame(tick: int, cols: int, rows: int) -> str:
    out = [f"{CSI}H{CSI}2J"]
    title = " cotal demo dashboard "
    out.append(f"{CSI}1;1H{CSI}1;37;44m{title.ljust(cols)[:cols]}{CSI}0m")
    bars = ["cpu", "mem", "net", "disk", "queue", "tasks"]
    for i, name in enumerate(bars):
        y = 3 + i
        if y >= rows - 1:
            break
        val = (tick * (7 + 3 * i) + 11 * i) % 100
        width = max(0, min(cols - 20, 50))
        fill = val * width // 100
        colour = 32 if val < 60 else (33 if val < 85 else 31)
        out.append(f"{CSI}{y};2H{name:<6}{CSI}{colour}m{'#' * fill}{CSI}0m{'.' * (width - fill)} {val:3d}%")
    y = min(rows - 2, 3 + len(bars) + 1)
    out.append(f"{CSI}{y};2H{CSI}36mtick {tick:6d}{CSI}0m  {CSI}7m q quits {CSI}0m")
    out.append(f"{CSI}{rows};1H{CSI}2msize {cols}x{rows}{CSI}0m")
    out.append(f"{CSI}{3 + (tick % len(bars))};1H")
    return "".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ticks", type=int, default=0, help="stop updating after N frames")
    ap.add_argument("--hz", type=float, default=5.0)
    args = ap.parse_args()
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    stop = {"flag": False}

    def on_term(*_):
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGWINCH, lambda *_: None)
    w = sys.stdout
    tty.setraw(fd)
    w.write(f"{CSI}?1049h{CSI}?25l")
    tick = 0
    try:
        while not stop["flag"]:
            if not args.ticks or tick < args.ticks:
                tick += 1
                sz = os.get_terminal_size(w.fileno())
                w.write(frame(tick, sz.columns, sz.lines))
                w.flush()
            try:
                r, _, _ = select.select([fd], [], [], 1.0 / args.hz)
            except InterruptedError:
                continue
            if r:
                ch = os.read(fd, 64)
                if not ch or b"q" in ch:
                    break
                if args.ticks and tick >= args.ticks:
                    sz = os.get_terminal_size(w.fileno())
                    w.write(frame(tick, sz.columns, sz.lines))
                    w.flush()
    finally:
        w.write(f"{CSI}?25h{CSI}?1049l")
        w.flush()
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    return 0


if __name__ == "__main__":
    sys.exit(main())
