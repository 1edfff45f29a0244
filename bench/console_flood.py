"""Console under a flood: does the UI keep up with the model, and does the loop stay live?

One run, side by side:

1. a scripted team floods a space at ``--rate`` msgs/s (its own process: ``cotal demo
   --headless --rate N``), so its CPU is not ours;
2. *model only*: the real observer + MeshModel ingest for ``--model-seconds``;
3. *console*: the same observer with the headless console App draining it (30 Hz, Line-API
   feed, every widget live) for ``--console-seconds``, while a 10 ms probe task measures
   event-loop lateness.

Printed: offered rate (broker stream sequence), model-only ingest rate, console ingest rate,
their ratio (goal ≥ 0.8), worst and p99 probe lateness (goal < 100 ms), main-thread CPU
(observer + UI), and RSS at the end (bounded by the feed ring and caps).

    .venv/bin/python bench/console_flood.py [--rate 20000] [--console-seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cotal_tui.cli.connection import target_from_args  # noqa: E402
from meshview.connect import connect  # noqa: E402
from meshview.model import MeshModel  # noqa: E402
from meshview.observer import Observer, ObserverOptions  # noqa: E402


def rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def stream_seq(nc, space: str) -> int | None:
    """The CHAT stream's last sequence (what the broker accepted); retried under load, None
    when the broker never answered (the offered rate is then unknown, not negative)."""
    for attempt in range(5):
        try:
            si = await nc.jsm().stream_info(f"CHAT_{space}")
            return int(si.state.last_seq)
        except Exception:  # noqa: BLE001 - a busy broker: try again
            await asyncio.sleep(0.5 * (attempt + 1))
    return None


def offered(s0: int | None, s1: int | None, dt: float) -> float | None:
    return (s1 - s0) / dt if s0 is not None and s1 is not None and s1 >= s0 else None


async def measure_model(nc, target, space: str, seconds: float) -> dict:
    model = MeshModel(space)
    obs = Observer(nc, space, model, options=ObserverOptions(backfill=0, dm_backfill=0))
    await obs.start()
    await asyncio.sleep(1.0)  # settle
    t0, c0, n0, s0 = time.perf_counter(), time.thread_time(), model._total, await stream_seq(nc, space)
    await asyncio.sleep(seconds)
    t1, c1, n1, s1 = time.perf_counter(), time.thread_time(), model._total, await stream_seq(nc, space)
    await obs.stop()
    dt = t1 - t0
    return {"ingest": (n1 - n0) / dt, "offered": offered(s0, s1, dt), "cpu": (c1 - c0) / dt}


async def measure_console(nc, target, space: str, seconds: float) -> dict:
    from cotal_tui.app import CotalApp
    from cotal_tui.session import LiveSession, SessionOptions

    session = LiveSession(nc, target, space, SessionOptions(backfill=0))
    app = CotalApp(session=session)
    lateness: list[float] = []
    stop = asyncio.Event()
    diag = Diag() if DIAG else None

    async def probe() -> None:
        period = 0.010
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            t = loop.time()
            await asyncio.sleep(period)
            lateness.append(loop.time() - t - period)

    async with app.run_test(size=(160, 50)) as pilot:
        for _ in range(200):
            if session.started and session.observer._started:
                break
            await pilot.pause(0.05)
        await asyncio.sleep(1.0)
        model = session.model
        screen = app.screen
        p = asyncio.create_task(probe())
        if diag:
            diag.start()
        t0, c0, n0, s0 = time.perf_counter(), time.thread_time(), model._total, await stream_seq(nc, space)
        v0 = screen._version
        drains = 0
        end = t0 + seconds
        last_v = v0
        while time.perf_counter() < end:
            await asyncio.sleep(0.25)
            if screen._version != last_v:
                drains += 1
                last_v = screen._version
        t1, c1, n1, s1 = time.perf_counter(), time.thread_time(), model._total, await stream_seq(nc, space)
        stop.set()
        await p
        if diag:
            diag.stop()
        feed = screen.query_one("#feed")
        shown_rows = len(feed.rows)
        rss = rss_mb()
        await pilot.press("q")
    await session.stop()
    dt = t1 - t0
    lateness.sort()
    if diag:
        diag.report()
    return {
        "ingest": (n1 - n0) / dt, "offered": offered(s0, s1, dt), "cpu": (c1 - c0) / dt,
        "dropped": getattr(model.status, "dropped", 0),
        "late_max": lateness[-1] * 1000 if lateness else 0.0,
        "late_p99": lateness[int(len(lateness) * 0.99) - 1] * 1000 if lateness else 0.0,
        "rss": rss, "feed_rows": shown_rows, "feed_cap": model.feed_cap,
    }


DIAG = False


class Diag:
    """``--diag``: time every garbage collection (by generation; wall and CPU) and every
    event-loop callback over 20 ms (by task coroutine, GC time taken out), to say what the
    probe's worst lateness is made of."""

    def __init__(self) -> None:
        import gc

        self.gc = gc
        self.gcs: dict[int, list[tuple[float, float]]] = {0: [], 1: [], 2: []}
        self.gc_wall = 0.0  # running total, to take GC out of callback times
        self.slow: dict[str, list[tuple[float, float]]] = {}
        self._t = self._c = 0.0

    def _cb(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t, self._c = time.perf_counter(), time.thread_time()
        else:
            d = time.perf_counter() - self._t
            self.gc_wall += d
            self.gcs[info["generation"]].append((d, time.thread_time() - self._c))

    @staticmethod
    def _name(h) -> str:  # noqa: ANN001
        cb = getattr(h, "_callback", None)
        owner = getattr(cb, "__self__", None)
        if isinstance(owner, asyncio.Task):
            coro = owner.get_coro()
            code = getattr(coro, "cr_code", None)
            frame = getattr(coro, "cr_frame", None)
            where = ""
            if frame is not None:
                inner = coro
                while getattr(inner, "cr_await", None) is not None and hasattr(inner.cr_await, "cr_code"):
                    inner = inner.cr_await
                where = f" (awaiting in {inner.cr_code.co_qualname})"
            timer = getattr(frame, "f_locals", {}).get("self") if frame is not None else None
            if timer is not None and type(timer).__name__ == "Timer":
                cbk = getattr(timer, "_callback", None)
                where += f" timer {timer.name} -> {getattr(cbk, '__qualname__', cbk)!r}"
            return f"task {code.co_qualname if code else coro!r}{where}"
        return getattr(cb, "__qualname__", None) or repr(cb)[:80]

    def start(self) -> None:
        self.gc.callbacks.append(self._cb)
        run = asyncio.events.Handle._run
        slow, name, me = self.slow, self._name, self
        self._orig = run

        def timed(h):  # noqa: ANN001
            t, c, g = time.perf_counter(), time.thread_time(), me.gc_wall
            who = name(h)  # before running: a finished task no longer says where it was
            run(h)
            d = time.perf_counter() - t - (me.gc_wall - g)
            if d > 0.020:
                slow.setdefault(who, []).append((d, time.thread_time() - c))

        asyncio.events.Handle._run = timed

    def stop(self) -> None:
        self.gc.callbacks.remove(self._cb)
        asyncio.events.Handle._run = self._orig

    def report(self) -> None:
        for g, ts in self.gcs.items():
            if ts:
                ts.sort()
                print(f"gc gen{g}: {len(ts)} runs, max {ts[-1][0] * 1000:.1f} ms wall "
                      f"{max(c for _, c in ts) * 1000:.1f} ms cpu, total "
                      f"{sum(w for w, _ in ts) * 1000:.0f} ms", file=sys.stderr)
        print(f"gc objects tracked {len(self.gc.get_objects()):,}, frozen "
              f"{self.gc.get_freeze_count():,}, counts {self.gc.get_count()}", file=sys.stderr)
        from collections import Counter

        top = Counter(type(o).__qualname__ for o in self.gc.get_objects()).most_common(8)
        tup = Counter((len(o), type(o[0]).__qualname__ if o else "") for o in self.gc.get_objects()
                      if type(o) is tuple).most_common(6)
        print("gc tracked tuples (len, first item): " + ", ".join(f"{k} {v:,}" for k, v in tup),
              file=sys.stderr)
        print("gc tracked by type: " + ", ".join(f"{k} {v:,}" for k, v in top), file=sys.stderr)
        for who, ds in sorted(self.slow.items(), key=lambda kv: -max(w for w, _ in kv[1]))[:12]:
            print(f"slow cb {who}: {len(ds)} over 20 ms (GC excluded), max "
                  f"{max(w for w, _ in ds) * 1000:.0f} ms wall {max(c for _, c in ds) * 1000:.0f}"
                  f" ms cpu", file=sys.stderr)


def start_flood(rate: int, space: str, agents: int) -> tuple[subprocess.Popen, str]:
    cmd = [str(Path(sys.executable).with_name("cotal")), "demo", "--headless", "--rate", str(rate),
           "--space", space, "--agents", str(agents)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = None
    assert proc.stdout is not None
    deadline = time.time() + 30
    while time.time() < deadline:
        line = proc.stdout.readline()
        m = re.match(r"server:\s+(\S+)", line)
        if m:
            url = m.group(1)
            break
    if url is None:
        proc.kill()
        raise SystemExit("the flood mesh did not start")
    return proc, url


def pin(proc: subprocess.Popen) -> str:
    """On ≥ 2 CPUs: the flood (team + broker) on the last CPU, this process (observer + UI) on
    the first, so the figures measure our code and not CPU contention."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) < 2 or not shutil.which("taskset"):
        return "unpinned (fewer than 2 CPUs)"
    last = cpus[-1]
    pids = [proc.pid] + [int(p) for p in subprocess.run(
        ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()]
    for pid in pids:
        subprocess.run(["taskset", "-a", "-p", "-c", str(last), str(pid)],
                       capture_output=True)
    os.sched_setaffinity(0, {cpus[0]})
    return f"flood pinned to CPU {last}, console to CPU {cpus[0]}"


async def main(opts: argparse.Namespace) -> int:
    proc, url = start_flood(opts.rate, opts.space, opts.agents)
    placement = pin(proc) if opts.pin else "unpinned"
    try:
        ns = argparse.Namespace(server=[url], space=opts.space)
        target = target_from_args(ns)
        nc, target = await connect(target)
        nc._max_pending_msgs = 4_000_000  # noqa: SLF001 - bench: let the observer's queue judge
        from cotal_tui.cli.watch_console import tune_gc

        tune_gc()  # as the console does, for both phases
        await asyncio.sleep(2.0)  # let the flood reach its rate
        model = await measure_model(nc, target, opts.space, opts.model_seconds)
        console = await measure_console(nc, target, opts.space, opts.console_seconds)
        await nc.close()
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    ratio = console["ingest"] / model["ingest"] if model["ingest"] else 0.0
    print(f"flood target        {opts.rate:>10,} msgs/s  ({opts.agents} agents, own process; "
          f"{placement})")
    def rate(v: float | None) -> str:
        return "n/a" if v is None else f"{v:,.0f}"

    def keep(ph: dict) -> str:
        o = ph["offered"]
        return f"{ph['ingest'] / o:.2f} of offered" if o else "offered n/a"

    print(f"offered (broker)    {rate(model['offered']):>10} msgs/s  model phase; "
          f"{rate(console['offered'])} console phase (the flood's rate drifts with load)")
    print(f"model-only ingest   {model['ingest']:>10,.0f} msgs/s  main-thread CPU "
          f"{model['cpu'] * 100:.0f}%  ({opts.model_seconds:g} s; {keep(model)})")
    print(f"console ingest      {console['ingest']:>10,.0f} msgs/s  main-thread CPU "
          f"{console['cpu'] * 100:.0f}% (observer + UI)  ({opts.console_seconds:g} s; "
          f"{keep(console)}; {console['dropped']:,} dropped)")
    print(f"console / model     {ratio:>10.2f}         goal >= 0.8  "
          f"{'PASS' if ratio >= 0.8 else 'MISS'}")
    print(f"probe lateness      {console['late_max']:>10.1f} ms worst, "
          f"{console['late_p99']:.1f} ms p99   goal < 100 ms  "
          f"{'PASS' if console['late_max'] < 100 else 'MISS'}")
    print(f"load average        {os.getloadavg()[0]:>10.2f}         at the end (2 CPUs; other work "
          "skews every figure)")
    print(f"RSS at end          {console['rss']:>10.0f} MB     feed ring "
          f"{console['feed_rows']:,}/{console['feed_cap']:,} rows")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--agents", type=int, default=6)
    ap.add_argument("--space", default="flood")
    ap.add_argument("--model-seconds", type=float, default=10.0)
    ap.add_argument("--console-seconds", type=float, default=60.0)
    ap.add_argument("--diag", action="store_true",
                    help="time garbage collections and slow event-loop callbacks (stderr)")
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="do not pin the flood and the console to separate CPUs")
    opts = ap.parse_args()
    DIAG = opts.diag
    sys.exit(asyncio.run(main(opts)))
