"""Terminal pane benchmarks, measured side by side in one run (A/B alternating, medians: the
machine is shared and noisy).

1. Throughput: the same coloured log stream (4 KiB chunks) into a bare ``Mirror`` and into a
   ``TerminalPane`` inside a headless Textual app that keeps painting frames, 9 rounds
   alternating A/B and B/A. Goal: pane / mirror ≥ 0.9 (the frame tick must cost little next to
   the parse). Rates per second of CPU time (what the pane costs) and of wall time; the
   per-round ratios' spread says how noisy the machine was.
2. Four tiled panes under continuous output (each fed at a fixed rate for 4 s): process CPU
   with the panes vs the same bytes into four bare mirrors, frames per second; 3 rounds.
   Goal: 400 KB/s in total under 60 % of a core.
3. Key-to-remote latency during output: a real manager (own process) serving a real pty whose
   program floods output and logs each byte it reads with CLOCK_MONOTONIC; the attach screen
   sends keys through the real session; worst and median press → pty-read time, and how late
   the console's event loop wakes a 5 ms sleeper meanwhile. Goals during an all-out flood:
   keys worst < 50 ms, median < 10 ms; loop lateness worst < 50 ms. 3 flood runs. The manager
   runs in a session of its own, as a real one does (with the kernel's autogroup scheduling a
   manager in the console's session shares its CPU share: ``--shared-session``).

The process runs with the console's collector settings (``cotal_tui.cli.watch_console.tune_gc``; ``--default-gc``
keeps Python's).

Run: ``.venv/bin/python bench/pane.py [--parts throughput,tiles,keys] [--rounds 9] [--flood-runs 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textual.app import App  # noqa: E402

from attach.terminal.mirror import Mirror  # noqa: E402
from widgets.terminal_pane import TerminalPane  # noqa: E402
from widgets.tile_grid import TileGrid, TilePane  # noqa: E402

CHUNK = 4096


def log_stream(n_bytes: int, seed: int = 7) -> bytes:
    rnd = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda"]
    out = []
    size = 0
    i = 0
    while size < n_bytes:
        c = 31 + i % 7
        line = (f"\x1b[2m{i:07d}\x1b[0m \x1b[{c}mINFO\x1b[0m "
                + " ".join(rnd.choice(words) for _ in range(rnd.randint(6, 14))) + "\r\n")
        b = line.encode()
        out.append(b)
        size += len(b)
        i += 1
    return b"".join(out)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# ---- 1. throughput ---------------------------------------------------------------------------

def mirror_rate(data: bytes, cols: int, rows: int) -> tuple[float, float]:
    """Bytes per second of wall time and per second of CPU time."""
    m = Mirror(cols, rows)
    t, c = time.perf_counter(), time.process_time()
    for i in range(0, len(data), CHUNK):
        m.feed(data[i:i + CHUNK])
        m.take_dirty()
    return len(data) / (time.perf_counter() - t), len(data) / (time.process_time() - c)


class OnePane(App):
    def __init__(self, pane: TerminalPane) -> None:
        super().__init__()
        self.pane = pane

    def compose(self):
        yield self.pane


async def pane_rate(data: bytes, cols: int, rows: int) -> tuple[float, float, int]:
    pane = TerminalPane(cols, rows)
    app = OnePane(pane)
    async with app.run_test(size=(cols, rows)) as pilot:
        await pilot.pause()
        t, c = time.perf_counter(), time.process_time()
        for i in range(0, len(data), CHUNK):
            pane.feed(data[i:i + CHUNK])
            await asyncio.sleep(0)  # as a session's on_output does: the loop (and the frames) run
        if pane._timer is not None:  # paint the last frame now: its timer's gap is idle, not work
            pane._timer.stop()
            pane._frame()
        await pilot.pause()
        dt, dc = time.perf_counter() - t, time.process_time() - c
        return len(data) / dt, len(data) / dc, pane.frames


# ---- 2. four tiled panes ---------------------------------------------------------------------

class Tiled(App):
    def __init__(self, panes) -> None:
        super().__init__()
        self.panes = panes

    def compose(self):
        with TileGrid():
            yield from self.panes


async def tiled_cpu(rate_per_pane: int, seconds: float) -> dict:
    streams = [log_stream(int(rate_per_pane * seconds) + CHUNK, seed=s) for s in range(4)]
    per_tick = max(1, rate_per_pane // 100)  # feed every 10 ms

    async def drive(feeders) -> tuple[float, float]:
        c0, t0 = cpu(), time.perf_counter()
        pos = 0
        n = int(seconds * 100)
        for k in range(n):
            for s, feed in zip(streams, feeders):
                feed(s[pos:pos + per_tick])
            pos += per_tick
            await asyncio.sleep(max(0.0, t0 + (k + 1) * 0.01 - time.perf_counter()))
        return cpu() - c0, time.perf_counter() - t0

    mirrors = [Mirror(100, 30) for _ in range(4)]

    def bare(m):
        def f(b):
            m.feed(b)
            m.take_dirty()
        return f

    base_cpu, base_wall = await drive([bare(m) for m in mirrors])
    panes = [TilePane(f"seat{i}", 100, 30) for i in range(4)]
    app = Tiled(panes)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        frames0 = sum(p.frames for p in panes)
        pane_cpu, pane_wall = await drive([p.feed for p in panes])
        frames = sum(p.frames for p in panes) - frames0
        rows = sum(p.rows_refreshed for p in panes)
    return {
        "rate": rate_per_pane * 4, "mirror_cpu": 100 * base_cpu / base_wall,
        "pane_cpu": 100 * pane_cpu / pane_wall, "frames_per_s": frames / pane_wall / 4,
        "rows": rows,
    }


# ---- 3. key-to-remote latency ----------------------------------------------------------------

FLOOD = textwrap.dedent("""
    import os, select, sys, time, tty
    tty.setraw(0)
    log = open(sys.argv[1], "a", buffering=1)
    rate = int(sys.argv[2])  # bytes/s of output; 0: as fast as the pty takes it
    line = ("x" * 70 + "\\r\\n").encode()
    i = 0
    t0 = time.monotonic()
    sent = 0
    while True:
        ahead = rate and sent > rate * (time.monotonic() - t0)
        r, w, _ = select.select([0], [] if ahead else [1], [], 0.005 if ahead else 0.05)
        if r:
            d = os.read(0, 4096)
            now = time.monotonic()
            for b in d:
                log.write(f"{now:.6f} {b}\\n")
        if w:
            i += 1
            sent += os.write(1, f"\\x1b[3{i % 7 + 1}m{i:08d}\\x1b[0m ".encode() + line)
""")

SERVE = textwrap.dedent("""
    import asyncio, sys, tempfile
    sys.path.insert(0, sys.argv[1])
    import nats
    from cotal_tui.demo.broker import Broker
    from cotal_tui.demo.provision import provision_space
    from cotal_tui.demo.manager import DemoManager, SeatSpec
    async def main():
        b = Broker(name="bench-pane").start()
        nc = await nats.connect(b.url)
        await provision_space(nc, "bench")
        spec = SeatSpec(name="flood", principal_id="local.flood", cols=100, rows=30,
                        argv=[sys.executable, sys.argv[2], sys.argv[3], sys.argv[4]])
        mgr = DemoManager(nc, "bench", [spec], root=tempfile.mkdtemp())
        await mgr.start()
        print(b.url, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await mgr.stop(); await nc.close(); b.stop()
    asyncio.run(main())
""")


async def _lateness(out: list[float], period: float = 0.005) -> None:
    """How late the console's event loop wakes a 5 ms sleeper (every wake-up recorded)."""
    loop = asyncio.get_running_loop()
    while True:
        t = loop.time()
        await asyncio.sleep(period)
        out.append(max(0.0, loop.time() - t - period))


async def key_latency(presses: int = 40, rate: int = 0, own_session: bool = True) -> dict:
    import nats

    from cotal_tui.screens.attach import AttachScreen
    from cotal_tui.seats import SeatSessions

    tmp = Path(tempfile.mkdtemp())
    (tmp / "flood.py").write_text(FLOOD)
    (tmp / "serve.py").write_text(SERVE)
    log = tmp / "keys.log"
    log.write_text("")
    root = str(Path(__file__).resolve().parents[1])
    # the manager (and the broker it starts) is a service of its own, as in real use (``cotal
    # demo`` or a manager in another terminal): its own session, so the kernel's autogroup
    # scheduler gives it its own CPU share instead of charging it to the console's
    proc = subprocess.Popen([sys.executable, str(tmp / "serve.py"), root, str(tmp / "flood.py"), str(log), str(rate)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=own_session)
    try:
        url = proc.stdout.readline().strip()
        sessions = SeatSessions("bench", lambda: nats.connect(url, allow_reconnect=False), default_size=(100, 30))
        app = App()
        async with app.run_test(size=(110, 34)) as pilot:
            screen = AttachScreen(sessions, "flood")
            app.push_screen(screen)
            t0 = time.monotonic()
            while screen.link.state != "open" or screen.pane.bytes_fed == 0:
                assert time.monotonic() - t0 < 20, "the session never opened"
                await pilot.pause(0.02)
            await pilot.pause(1.0)  # the program is flooding from its start: let it run a while
            fed0, t_fed = screen.pane.bytes_fed, time.monotonic()
            late: list[float] = []
            probe = asyncio.create_task(_lateness(late))
            c0, t_c0 = cpu(), time.monotonic()
            sent: list[tuple[float, int]] = []
            keys = "abcdefghijklmnopqrstuvwxyz"
            for i in range(presses):
                k = keys[i % len(keys)]
                sent.append((time.monotonic(), ord(k)))
                await pilot.press(k)
                await asyncio.sleep(0.1)
            t_end = time.monotonic()
            probe.cancel()
            console_cpu = 100 * (cpu() - c0) / (t_end - t_c0)
            while len(log.read_text().splitlines()) < presses and time.monotonic() - t_end < 10:
                await asyncio.sleep(0.05)
            rate = (screen.pane.bytes_fed - fed0) / (time.monotonic() - t_fed)
            link = screen.link
            skips = (link.skips, link.repaints, link.session.bytes_dropped if link.session else 0)
            await screen.action_leave()
        got = [(float(a), int(b)) for a, b in (ln.split() for ln in log.read_text().splitlines())]
        lat = [g[0] - s[0] for s, g in zip(sent, got) if s[1] == g[1]]
        lat.sort()
        late.sort()
        return {"n": len(lat), "worst_ms": 1000 * lat[-1], "median_ms": 1000 * lat[len(lat) // 2],
                "output_rate": rate, "lost": presses - len(lat), "skips": skips, "cpu": console_cpu,
                "late_worst_ms": 1000 * late[-1], "late_p99_ms": 1000 * late[int(0.99 * (len(late) - 1))]}
    finally:
        proc.stdin.close()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


async def main(opts: argparse.Namespace) -> None:
    med = statistics.median
    parts = set(opts.parts.split(","))
    if opts.console_gc:  # the pane lives in the console: measure it with the console's collector settings
        from cotal_tui.cli.watch_console import tune_gc

        tune_gc()
    if "throughput" in parts:
        data = log_stream(2_000_000)
        cols, rows = 120, 40
        ms, ps, mc, pc, frames = [], [], [], [], []
        for k in range(opts.rounds):
            for side in ("mirror", "pane") if k % 2 == 0 else ("pane", "mirror"):  # A/B, then B/A
                gc.collect()  # neither side pays for the other's garbage
                if side == "mirror":
                    w, c = mirror_rate(data, cols, rows)
                    ms.append(w)
                    mc.append(c)
                else:
                    w, c, f = await pane_rate(data, cols, rows)
                    ps.append(w)
                    pc.append(c)
                    frames.append(f)
        print(f"1. throughput, {len(data) / 1e6:.1f} MB of coloured log lines at {cols}x{rows}, {CHUNK} B chunks, "
              f"{opts.rounds} rounds alternating A/B and B/A, medians")
        for what, m, p in (("CPU time", mc, pc), ("wall time", ms, ps)):
            r = sorted(a / b for a, b in zip(p, m))
            print(f"   per {what:9}: mirror alone {med(m) / 1e6:5.2f} MB/s   pane (+frames) {med(p) / 1e6:5.2f} MB/s"
                  f"   ratio {med(p) / med(m):.2f} (goal >= 0.9)   per-round ratios {r[0]:.2f}-{r[-1]:.2f},"
                  f" median {med(r):.2f}   best of each {max(p) / max(m):.2f}")
        print(f"   ({med(frames):.0f} frames; CPU time is what the pane costs, wall time also carries "
              "whatever else the machine runs)")
    if "tiles" in parts:
        for rate, n in ((25_000, 1), (100_000, 3)):
            rs = [await tiled_cpu(rate, 4.0) for _ in range(n)]
            mc, pc = med([r["mirror_cpu"] for r in rs]), med([r["pane_cpu"] for r in rs])
            goal = "   (goal < 60%)" if rate == 100_000 else ""
            print(f"2. four tiled 100x30 panes, {rs[0]['rate'] / 1e3:.0f} KB/s total continuous output, 4 s, "
                  f"{n} round(s), medians")
            print(f"   4 bare mirrors: {mc:5.1f}% CPU   4 panes in a tile: {pc:5.1f}% CPU{goal}"
                  f"   frame tick + paint: {pc - mc:+5.1f}%   {med([r['frames_per_s'] for r in rs]):.0f} frames/s/pane"
                  + ("   rounds: " + " ".join(f"{r['pane_cpu']:.0f}" for r in rs) if n > 1 else ""))
    if "keys" in parts:
        for rate, n, what in ((100_000, 1, "program writing 100 KB/s"),
                              (0, opts.flood_runs, "program flooding as fast as the pty takes it")):
            runs = [await key_latency(rate=rate, own_session=not opts.shared_session) for _ in range(n)]
            for lat in runs:
                sk, rp, dropped = lat["skips"]
                print(f"3. key → remote pty, {what}: {lat['output_rate'] / 1e3:.0f} KB/s parsed by the pane, "
                      f"{lat['n']} presses every 100 ms; pane skipped ahead {sk}x "
                      f"({dropped / 1e6:.1f} MB dropped by the manager, {rp} repaints asked)")
                print(f"   worst {lat['worst_ms']:.1f} ms   median {lat['median_ms']:.1f} ms   lost {lat['lost']}"
                      f"   loop lateness worst {lat['late_worst_ms']:.1f} ms, p99 {lat['late_p99_ms']:.1f} ms"
                      f"   console CPU {lat['cpu']:.0f}%")
            if n > 1:
                print(f"   median of {n} runs: keys worst {med([r['worst_ms'] for r in runs]):.1f} ms (goal < 50), "
                      f"median {med([r['median_ms'] for r in runs]):.1f} ms (goal < 10); loop lateness worst "
                      f"{med([r['late_worst_ms'] for r in runs]):.1f} ms (goal < 50; runs "
                      f"{' '.join(str(round(r['late_worst_ms'])) for r in runs)})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="throughput,tiles,keys",
                    help="comma-separated: throughput, tiles, keys (default: all)")
    ap.add_argument("--rounds", type=int, default=9, help="A/B rounds of the throughput bench")
    ap.add_argument("--flood-runs", type=int, default=3, help="runs of the all-out flood key bench")
    ap.add_argument("--default-gc", dest="console_gc", action="store_false",
                    help="keep Python's default GC thresholds (the console runs watch_console.tune_gc)")
    ap.add_argument("--shared-session", action="store_true",
                    help="run the manager in this process's session (one autogroup CPU share with the console)")
    asyncio.run(main(ap.parse_args()))
