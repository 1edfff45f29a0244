"""Line sink benchmark, measured side by side in one run.

Three ways to print the line stream, on the same lines (~300 B JSON-ish, in batches of 500 like
one observer tick):

- ``bare``: a blocking ``os.write`` of the joined batch (what ``sys.stdout.write`` + ``flush``
  amounts to; the floor, and the thing that freezes the loop when the reader stalls);
- ``ours``: :class:`meshview.lines.lineout.LineSink` (non-blocking fd + ``loop.add_writer``) inside
  an asyncio loop;
- ``thread``: the alternative, a writer thread doing blocking writes from a bounded deque.

Targets: ``/dev/null`` and a pipe drained by ``cat > /dev/null`` (a fast reader; every variant
gets the 1 MiB pipe LineSink asks for, so only the write path differs). Throughput
runs never shed (the producer waits whenever 2 MiB are pending). Then a stalled reader: how long
the producer's calls take while nobody reads (``bare`` blocks for good; the others shed).

Usage: .venv/bin/python bench/lineout.py [--lines 400000] [--batch 500]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import subprocess
import sys
import threading
import time
from collections import deque

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from meshview.lines.lineout import MAX_BYTES, MAX_LINES, PIPE_SIZE, LineSink  # noqa: E402

HIGH = 2 << 20


def make_lines(n: int) -> list[str]:
    return [('{"type":"message","id":"%08d","ts":1796027081595,"kind":"channel","from":'
             '{"id":"local.cleo","name":"cleo","role":"frontend"},"channel":"general",'
             '"text":"message number %d with some words in it","parts":[{"kind":"text",'
             '"text":"message number %d with some words in it"}],"historical":false}')
            % (i, i, i) for i in range(n)]


class ThreadSink:
    """The alternative design: a writer thread, blocking writes, a bounded deque that sheds."""

    def __init__(self, fd: int, max_bytes: int = MAX_BYTES, max_lines: int = MAX_LINES) -> None:
        self.fd, self.max_bytes, self.max_lines = fd, max_bytes, max_lines
        self.q: deque[bytes] = deque()
        self.bytes = self.inflight = self.dropped = 0
        self.cv = threading.Condition()
        self.closed = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def write_lines(self, lines: list[str]) -> None:
        items = [(s + "\n").encode("utf-8", "backslashreplace") for s in lines]
        with self.cv:
            self.q.extend(items)
            self.bytes += sum(map(len, items))
            while self.q and (self.bytes > self.max_bytes or len(self.q) > self.max_lines):
                self.bytes -= len(self.q.popleft())
                self.dropped += 1
            self.cv.notify()

    @property
    def pending_bytes(self) -> int:
        return self.bytes + self.inflight

    def _run(self) -> None:
        while True:
            with self.cv:
                while not self.q and not self.closed:
                    self.cv.wait()
                if not self.q:
                    return
                chunk = [self.q.popleft() for _ in range(min(1024, len(self.q)))]
                n = sum(map(len, chunk))
                self.bytes -= n
                self.inflight = n
            view = memoryview(b"".join(chunk))
            while view:
                try:
                    view = view[os.write(self.fd, view):]
                except OSError:
                    return
            with self.cv:
                self.inflight = 0
                self.cv.notify_all()

    def drain(self, timeout: float | None = None) -> bool:
        with self.cv:
            return self.cv.wait_for(lambda: not self.q and not self.inflight, timeout)

    def close(self) -> None:
        with self.cv:
            self.closed = True
            self.cv.notify_all()


def open_target(kind: str) -> tuple[int, subprocess.Popen | None]:
    if kind == "/dev/null":
        return os.open(os.devnull, os.O_WRONLY), None
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_SIZE)  # as LineSink grows it: same pipe for all
    cmd = "cat > /dev/null" if kind == "fast pipe" else "sleep 600"
    p = subprocess.Popen(["sh", "-c", cmd], stdin=r)
    os.close(r)
    return w, p


def close_target(fd: int, p: subprocess.Popen | None) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
    if p is not None:
        if p.args[-1].startswith("sleep"):
            p.kill()
        p.wait(10)


def run_bare(fd: int, batches: list[list[str]]) -> float:
    t = time.perf_counter()
    for b in batches:
        view = memoryview(("\n".join(b) + "\n").encode("utf-8", "backslashreplace"))
        while view:
            view = view[os.write(fd, view):]
    return time.perf_counter() - t


def run_ours(fd: int, batches: list[list[str]]) -> tuple[float, int]:
    async def go() -> tuple[float, int]:
        sink = LineSink(fd)
        t = time.perf_counter()
        for b in batches:
            sink.write_lines(b)
            if sink.pending_bytes > HIGH:
                await sink.drain()
        await sink.drain()
        took = time.perf_counter() - t
        sink.close()
        return took, sink.dropped
    return asyncio.run(go())


def run_thread(fd: int, batches: list[list[str]]) -> tuple[float, int]:
    sink = ThreadSink(fd)
    t = time.perf_counter()
    for b in batches:
        sink.write_lines(b)
        if sink.pending_bytes > HIGH:
            sink.drain()
    sink.drain()
    took = time.perf_counter() - t
    sink.close()
    sink.t.join(5)
    return took, sink.dropped


def stalled(batches: list[list[str]]) -> None:
    """Nobody reads: the producer's worst call, and whether it returns at all."""
    print("\nstalled reader (a pipe nobody reads), same batches:")
    fd, p = open_target("stalled pipe")
    box: dict[str, float] = {}

    def bare() -> None:
        try:
            for i, b in enumerate(batches):
                box["batches"] = i
                os.write(fd, ("\n".join(b) + "\n").encode())
            box["done"] = 1
        except OSError:
            pass

    threading.Thread(target=bare, daemon=True).start()
    time.sleep(1.0)
    print(f"  bare    blocked for good in batch {int(box.get('batches', 0))} (pipe full)"
          if "done" not in box else "  bare    did not block?")
    close_target(fd, p)  # (the blocked daemon thread gets EPIPE and ends)

    for name in ("ours", "thread"):
        fd, p = open_target("stalled pipe")
        worst = 0.0

        async def go() -> tuple[float, int]:
            nonlocal worst
            sink = LineSink(fd) if name == "ours" else ThreadSink(fd)
            t0 = time.perf_counter()
            for b in batches:
                t = time.perf_counter()
                sink.write_lines(b)
                worst = max(worst, time.perf_counter() - t)
                await asyncio.sleep(0)
            took = time.perf_counter() - t0
            sink.close()
            return took, sink.dropped
        took, dropped = asyncio.run(go())
        n = sum(map(len, batches))
        print(f"  {name:7} {n / took:12,.0f} lines/s offered, worst call {worst * 1000:6.2f} ms, "
              f"{dropped:,} shed and counted")
        close_target(fd, p)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=400_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3, help="best of N per cell")
    a = ap.parse_args()
    lines = make_lines(a.lines)
    batches = [lines[i:i + a.batch] for i in range(0, len(lines), a.batch)]
    size = sum(map(len, lines)) + len(lines)
    print(f"{a.lines:,} lines ({size / a.lines:.0f} B each, {size / 1e6:.0f} MB) in batches "
          f"of {a.batch}; best of {a.rounds}; lines/s (ratio to bare)")
    for target in ("/dev/null", "fast pipe"):
        best: dict[str, float] = {}
        for _ in range(a.rounds):
            for name in ("bare", "ours", "thread"):
                fd, p = open_target(target)
                if name == "bare":
                    took, dropped = run_bare(fd, batches), 0
                elif name == "ours":
                    took, dropped = run_ours(fd, batches)
                else:
                    took, dropped = run_thread(fd, batches)
                close_target(fd, p)
                assert dropped == 0, (name, dropped)
                best[name] = min(best.get(name, 1e9), took)
        row = "  ".join(f"{name} {a.lines / best[name]:11,.0f} ({best['bare'] / best[name]:.2f})"
                        for name in ("bare", "ours", "thread"))
        print(f"{target:10} {row}")
    stalled(batches[: max(1, 60_000 // a.batch)])


if __name__ == "__main__":
    main()
