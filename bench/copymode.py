"""Copy-mode benchmark: search over a full scrollback with the event loop measured, and the
memory a pane's full scrollback holds.

1. A pane mirror fed 10,000+ lines of 120 columns (the default history bound) holds them in its
   scrollback; its size (tracemalloc) is printed against the same text as one bare Python list.
2. Copy mode searches those lines the way the pane does (a slice of lines, then the loop), while a
   1 ms ticker on the same loop measures lateness; goal: worst lateness < 50 ms. Printed beside a
   bare, unsliced scan of the same lines (the loop held for all of it).

Usage: .venv/bin/python bench/copymode.py [--lines 10000] [--cols 120]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from attach.terminal.mirror import Mirror  # noqa: E402
from attach.terminal.scrollback import Scrollback  # noqa: E402
from widgets.copy_mode import CopyMode  # noqa: E402

GOAL_LATE_MS = 50.0


def text_lines(n: int, cols: int) -> list[bytes]:
    rnd = random.Random(7)
    words = ["build", "test", "PASS", "FAIL", "src/app.py", "warning:", "cache", "retry", "ok", "12ms"]
    out = []
    for i in range(n):
        s = f"{i:06d} " + " ".join(rnd.choice(words) for _ in range(cols // 6))
        out.append(s[:cols].encode() + b"\r\n")
    return out


async def lateness_during(fn) -> tuple[float, float]:
    """(worst lateness ms of a 1 ms ticker, seconds fn took) while ``fn`` runs on the loop."""
    worst = 0.0
    stop = False

    async def ticker() -> None:
        nonlocal worst
        while not stop:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            worst = max(worst, (time.perf_counter() - t - 0.001) * 1000)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    t0 = time.perf_counter()
    await fn()
    took = time.perf_counter() - t0
    stop = True
    await task
    return worst, took


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--cols", type=int, default=120)
    args = ap.parse_args()
    data = text_lines(args.lines + 40, args.cols)
    tracemalloc.start()
    m = Mirror(args.cols, 40)
    h = Scrollback()
    m.keep_history(h)
    before = tracemalloc.get_traced_memory()[0]
    for chunk in data:
        m.feed(chunk)
    hist_bytes = tracemalloc.get_traced_memory()[0] - before
    base0 = tracemalloc.get_traced_memory()[0]
    bare = [c.decode().rstrip() for c in data[: len(h)]]
    bare_bytes = tracemalloc.get_traced_memory()[0] - base0
    tracemalloc.stop()
    cm = CopyMode.open(list(h.lines), m.text_lines(), 39, header="", alt=False, cursor_row=0)

    async def sliced() -> None:
        cm.start_search("FAIL src", True)
        while not cm.search_slice():
            await asyncio.sleep(0)

    async def unsliced() -> None:
        q = "fail src"
        sum(1 for line in bare for _ in [line.lower().find(q)] if _ >= 0)

    late, took = await lateness_during(sliced)
    bare_late, bare_took = await lateness_during(unsliced)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"scrollback: {len(h)} lines of {args.cols} columns held, {hist_bytes / 1e6:.1f} MB traced "
          f"(bare list of the same text: {bare_bytes / 1e6:.1f} MB, ratio {hist_bytes / max(1, bare_bytes):.2f}x)")
    print(f"search {len(cm.lines)} lines: {len(cm.matches)} matches in {took * 1000:.1f} ms, worst loop "
          f"lateness {late:.1f} ms (goal < {GOAL_LATE_MS:.0f} ms: {'MET' if late < GOAL_LATE_MS else 'MISSED'})")
    print(f"  bare unsliced scan: {bare_took * 1000:.1f} ms, worst lateness {bare_late:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
