"""``--record-seats`` cost, measured side by side in one run (A/B alternating, medians: the
machine is shared and noisy).

1. Recording overhead: the same coloured log stream (4 KiB chunks, 8 MiB) parsed by a pane's
   mirror alone (A: what the pane does anyway) and by the same mirror with the seat tap writing
   every chunk into a recording (B: JSON line, gzip, periodic snapshots). Alternating
   rounds (7 by default; the median of each round's B / A). Goal: B / A ≤ 1.15 (recording costs a small fraction of the parse it rides on).
   Also: bytes on disk per MiB of output, snapshots written.
2. Replay seek: after the stream, a seek back to the middle and one back to the start: bytes
   re-fed and time to rebuild the screen from the keyframe the stream planner picks, against
   re-feeding from the stream's start (the baseline with no keyframes). Goal: a seek re-feeds
   at most one keyframe interval (256 KiB + a chunk), whatever the stream's length.

Run: ``.venv/bin/python bench/record_seats.py [--mib 8]``
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cotal_tui.recording import KEY_BYTES, SeatTap  # noqa: E402
from meshview.model.mesh import MeshModel  # noqa: E402
from meshview.record.record import Recorder  # noqa: E402
from meshview.record.replay import Replay, load_recording  # noqa: E402
from widgets.terminal_pane import TerminalPane  # noqa: E402

CHUNK = 4096


def stream(mib: int, seed: int = 7) -> list[bytes]:
    rnd = random.Random(seed)
    words = ["build", "ok", "error", "warning", "compiling", "linking", "test", "passed", "src/"]
    out, size, buf = [], 0, bytearray()
    while size < mib * 1024 * 1024:
        line = " ".join(rnd.choice(words) + str(rnd.randrange(1000)) for _ in range(rnd.randrange(3, 14)))
        buf += f"\x1b[3{rnd.randrange(8)}m{rnd.randrange(10**6):06d}\x1b[0m {line}\r\n".encode()
        while len(buf) >= CHUNK:
            out.append(bytes(buf[:CHUNK]))
            del buf[:CHUNK]
            size += CHUNK
    return out


class Link:
    def __init__(self) -> None:
        self.name = "bench"
        self.pane = TerminalPane(120, 40)
        self.state = "open"
        self._closing = False
        self.end_reason = None


def round_a(chunks: list[bytes]) -> float:
    pane = TerminalPane(120, 40)
    t0 = time.perf_counter()
    for c in chunks:
        pane.feed(c)
    return time.perf_counter() - t0


def round_b(chunks: list[bytes], path: str) -> tuple[float, Recorder]:
    clock = [1.7e12]
    model = MeshModel("bench", clock=lambda: clock[0])
    rec = Recorder(model, path, seats=True)
    tap = SeatTap(rec)
    link = Link()
    t0 = time.perf_counter()
    tap(link, "reset")
    for c in chunks:
        clock[0] += 1.0
        tap(link, "out", c)
        link.pane.feed(c)
    tap(link, "end")
    rec.close()
    return time.perf_counter() - t0, rec


def rebuild(stream_, t: float) -> tuple[int, float]:
    pane = TerminalPane(120, 40)
    before = stream_.fed
    t0 = time.perf_counter()
    while not stream_.caught_up(t):
        for step in stream_.plan(t, 128 * 1024):
            if step[0] == "reset":
                pane.reset(step[1], step[2])
            elif step[0] == "resize":
                pane.resize_remote(step[1], step[2])
            else:
                pane.feed(step[1])
    return stream_.fed - before, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    chunks = stream(a.mib)
    total = sum(map(len, chunks))
    tmp = tempfile.mkdtemp(prefix="recseats-bench-")
    path = os.path.join(tmp, "bench.jsonl.gz")
    ta, tb = [], []
    rec = None
    for i in range(a.rounds):
        ta.append(round_a(chunks))
        t, rec = round_b(chunks, path)
        tb.append(t)
        print(f"round {i + 1}: mirror {total / ta[-1] / 2**20:6.2f} MiB/s   "
              f"mirror+record {total / tb[-1] / 2**20:6.2f} MiB/s   ratio {tb[-1] / ta[-1]:.3f}")
    ma, mb = statistics.median(ta), statistics.median(tb)
    on_disk = os.path.getsize(path)
    snaps = sum(1 for x in load_recording(path).seat_lines if x.ev == "snap")
    ratio = statistics.median(b / a_ for a_, b in zip(ta, tb))  # each pair ran back to back
    print(f"\n1. recording overhead ({a.mib} MiB in {CHUNK} B chunks, medians of {a.rounds}):")
    print(f"   mirror alone {total / ma / 2**20:.2f} MiB/s | mirror + --record-seats "
          f"{total / mb / 2**20:.2f} MiB/s | time ratio (median of the rounds') {ratio:.3f} "
          f"(goal <= 1.15: "
          f"{'met' if ratio <= 1.15 else 'missed'})")
    print(f"   on disk {on_disk / (total / 2**20) / 1024:.0f} KiB per MiB of output "
          f"({on_disk / total:.3f} of the bytes), {snaps} snapshots, {rec.seat_lines} seat lines")

    r = load_recording(path)
    s = Replay(r).seat_stream("bench")
    end = s.lines[-1].t
    fed_end, t_end = rebuild(s, end)  # from nothing: jumps to the last keyframe
    mid = s.lines[len(s.lines) // 2].t
    fed_mid, t_mid = rebuild(s, mid)  # back to the middle
    # the baseline: no keyframes, a seek back re-feeds from the stream's start
    base = sum(len(x.data) for x in s.lines if x.t <= mid)
    t0 = time.perf_counter()
    p = TerminalPane(120, 40)
    for x in s.lines:
        if x.t > mid:
            break
        if x.ev == "out":
            p.feed(x.data)
    t_base = time.perf_counter() - t0
    ok = fed_mid <= KEY_BYTES + CHUNK
    print("\n2. replay seek back to the middle of the stream:")
    print(f"   keyframes: re-fed {fed_mid / 1024:.0f} KiB in {t_mid * 1000:.0f} ms | from the start: "
          f"{base / 1024:.0f} KiB in {t_base * 1000:.0f} ms | ratio {t_mid / t_base:.3f} "
          f"(goal: at most {(KEY_BYTES + CHUNK) // 1024} KiB re-fed: {'met' if ok else 'missed'})")
    print(f"   (a jump to the end from an empty pane re-fed {fed_end / 1024:.0f} KiB in "
          f"{t_end * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
