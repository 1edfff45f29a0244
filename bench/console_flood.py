"""Console under a flood: does the UI keep up with the model, and does the loop stay live?

One run, side by side:

1. the mesh: ``cotal demo --headless`` (broker + scripted team, presence live) in its own
   process, and the flood from ``--publishers`` N processes of their own (this file with
   ``--publish``), each publishing channel messages on core NATS with ``Nats-Msg-Id`` (the CHAT
   stream captures them), ``--rate`` msgs/s in total (0: each as fast as it can), so one
   generator's ceiling is not the offer; the offer counted is what the broker accepted (the
   stream's sequence), not what was attempted;
2. *model only*: the real observer + MeshModel ingest for ``--model-seconds``;
3. *console*: the same observer with the headless console App draining it (30 Hz, Line-API
   feed, every widget live) for ``--console-seconds``, while a 10 ms probe task measures
   event-loop lateness.

Printed: accepted offer (broker stream sequence) in each phase, model-only ingest rate,
console ingest rate, their ratio (goal ≥ 0.8), drops in each phase, worst and p99 probe
lateness (goal < 50 ms), main-thread CPU (observer + UI), RSS at the end, the load average.

    .venv/bin/python bench/console_flood.py [--publishers 4] [--rate 60000] [--console-seconds 60]
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
from meshview.link.connect import connect  # noqa: E402
from meshview.model.mesh import MeshModel  # noqa: E402
from meshview.observe.observer import Observer, ObserverOptions  # noqa: E402


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
    for attempt in range(4):
        try:  # a flooded broker answers its JS API late: a long timeout, not a short one
            si = await nc.jsm(timeout=10).stream_info(f"CHAT_{space}")
            return int(si.state.last_seq)
        except Exception:  # noqa: BLE001 - a busy broker: try again
            await asyncio.sleep(0.5 * (attempt + 1))
    return None


def offered(s0: int | None, s1: int | None, dt: float) -> float | None:
    return (s1 - s0) / dt if s0 is not None and s1 is not None and s1 >= s0 else None


async def publish_flood(url: str, space: str, rate: float, idx: int) -> None:
    """One publisher process: channel messages as the team would post them, on core NATS
    (no per-message ack: the broker's stream sequence says what was accepted), ``rate`` msgs/s
    in 10 ms slices, or as fast as the connection takes them when ``rate`` is 0. Ends when stdin
    closes; prints how many it published."""
    import json

    import nats

    from cotal_tui.demo.team import CHANNELS, Team
    from meshview.wire.subjects import chat_subject

    nc = await nats.connect(url, pending_size=8 * 1024 * 1024)
    members = Team(nc, space, seed=1, agents=6).members  # the demo team's ids (same seed)
    heads = []
    for a in members:
        for ch in CHANNELS:
            head = json.dumps({"space": space, "from": {"id": a.id, "name": a.name, "role": a.role},
                               "channel": ch}, separators=(",", ":"))[1:-1]
            heads.append((chat_subject(space, a.id, ch), head.encode()))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), stop.set)
    n = 0
    tick = 0.01
    owed = 0.0
    next_t = time.monotonic()
    while not stop.is_set():
        if rate:
            owed += rate * tick
            batch = int(owed)
            owed -= batch
        else:
            batch = 200
        ts = int(time.time() * 1000)
        for _ in range(batch):
            n += 1
            subject, head = heads[n % len(heads)]
            mid = "%08x-0000-4000-8%03x-%012x" % (os.getpid() & 0xFFFFFFFF, idx, n)
            data = b'{"id":"%s","ts":%d,%s,"parts":[{"kind":"text","text":"load %d.%d"}]}' % (
                mid.encode(), ts, head, idx, n)
            await nc.publish(subject, data, headers={"Nats-Msg-Id": mid})
        if rate:
            next_t += tick
            now = time.monotonic()
            if now - next_t > 0.1:  # fell behind (a busy box): no catch-up burst, resume the rate
                next_t, owed = now, 0.0
            await asyncio.sleep(max(0.0, next_t - now))
        else:
            await asyncio.sleep(0)
    await nc.flush()
    await nc.close()
    print(n, flush=True)


def start_publishers(url: str, space: str, n: int, rate: float) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, __file__, "--publish", url, space, str(rate / n), str(i)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for i in range(n)]


def stop_publishers(pubs: list[subprocess.Popen]) -> int:
    total = 0
    for p in pubs:
        try:
            out, _ = p.communicate("", timeout=15)
            total += int(out.split()[-1]) if out.split() else 0
        except (subprocess.TimeoutExpired, ValueError):
            p.kill()
            p.wait()
    return total


async def measure_model(nc, target, space: str, seconds: float) -> dict:
    model = MeshModel(space)
    obs = Observer(nc, space, model, options=ObserverOptions(backfill=0, dm_backfill=0))
    await obs.start()
    await asyncio.sleep(1.0)  # settle
    t0, c0, n0, s0 = time.perf_counter(), time.thread_time(), model.total, await stream_seq(nc, space)
    await asyncio.sleep(seconds)
    t1, c1, n1, s1 = time.perf_counter(), time.thread_time(), model.total, await stream_seq(nc, space)
    await obs.stop()
    dt = t1 - t0
    return {"ingest": (n1 - n0) / dt, "offered": offered(s0, s1, dt), "cpu": (c1 - c0) / dt,
            "dropped": getattr(model.status, "dropped", 0)}


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
        t0, c0, n0, s0 = time.perf_counter(), time.thread_time(), model.total, await stream_seq(nc, space)
        v0 = screen._version
        drains = 0
        end = t0 + seconds
        last_v = v0
        while time.perf_counter() < end:
            await asyncio.sleep(0.25)
            if screen._version != last_v:
                drains += 1
                last_v = screen._version
        t1, c1, n1, s1 = time.perf_counter(), time.thread_time(), model.total, await stream_seq(nc, space)
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
    cmd = [str(Path(sys.executable).with_name("cotal")), "demo", "--headless",
           "--space", space, "--agents", str(agents)] + (["--rate", str(rate)] if rate else [])
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


def pin(proc: subprocess.Popen, pubs: list[subprocess.Popen] = ()) -> str:
    """On ≥ 2 CPUs: the flood (team + broker) on the last CPU, this process (observer + UI) on
    the first, so the figures measure our code and not CPU contention."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) < 2 or not shutil.which("taskset"):
        return "unpinned (fewer than 2 CPUs)"
    last = cpus[-1]
    pids = [proc.pid] + [int(p) for p in subprocess.run(
        ["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()]
    pids += [p.pid for p in pubs]
    for pid in pids:
        subprocess.run(["taskset", "-a", "-p", "-c", str(last), str(pid)],
                       capture_output=True)
    os.sched_setaffinity(0, {cpus[0]})
    return f"mesh + publishers pinned to CPU {last}, console to CPU {cpus[0]}"


async def main(opts: argparse.Namespace) -> int:
    proc, url = start_flood(0, opts.space, opts.agents)
    pubs = start_publishers(url, opts.space, opts.publishers, opts.rate)
    placement = pin(proc, pubs) if opts.pin else "unpinned"
    load0 = os.getloadavg()
    published = 0
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
        published = stop_publishers(pubs)
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
    ratio = console["ingest"] / model["ingest"] if model["ingest"] else 0.0
    target_txt = f"{opts.rate:,.0f} msgs/s" if opts.rate else "as fast as each can"
    print(f"flood offer         {opts.publishers:>10} publisher processes, {target_txt}; "
          f"{published:,} published over the whole run, start-up included "
          f"({opts.agents} agents' presence from the demo team; "
          f"{placement})")
    def rate(v: float | None) -> str:
        return "n/a" if v is None else f"{v:,.0f}"

    def keep(ph: dict) -> str:
        o = ph["offered"]
        return f"{ph['ingest'] / o:.2f} of offered" if o else "offered n/a"

    print(f"offered (broker)    {rate(model['offered']):>10} msgs/s  model phase; "
          f"{rate(console['offered'])} console phase (the flood's rate drifts with load)")
    print(f"model-only ingest   {model['ingest']:>10,.0f} msgs/s  main-thread CPU "
          f"{model['cpu'] * 100:.0f}%  ({opts.model_seconds:g} s; {keep(model)}; "
          f"{model['dropped']:,} dropped)")
    print(f"console ingest      {console['ingest']:>10,.0f} msgs/s  main-thread CPU "
          f"{console['cpu'] * 100:.0f}% (observer + UI)  ({opts.console_seconds:g} s; "
          f"{keep(console)}; {console['dropped']:,} dropped)")
    print(f"console / model     {ratio:>10.2f}         goal >= 0.8  "
          f"{'PASS' if ratio >= 0.8 else 'MISS'}")
    print(f"probe lateness      {console['late_max']:>10.1f} ms worst, "
          f"{console['late_p99']:.1f} ms p99   goal < 50 ms  "
          f"{'PASS' if console['late_max'] < 50 else 'MISS'}")
    load1 = os.getloadavg()
    print(f"load average        {load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f} before, "
          f"{load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f} after (1/5/15 min; {os.cpu_count()} CPUs; "
          "other work skews every figure)")
    print(f"RSS at end          {console['rss']:>10.0f} MB     feed ring "
          f"{console['feed_rows']:,}/{console['feed_cap']:,} rows")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--publish"]:
        url, space, rate, idx = sys.argv[2:6]
        asyncio.run(publish_flood(url, space, float(rate), int(idx)))
        sys.exit(0)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=60_000,
                    help="total offer in msgs/s over all publishers (default 60000, past the "
                         "observer-alone rate on the development box; 0: each flat out, which "
                         "swamps a 2-core box's broker)")
    ap.add_argument("--publishers", type=int, default=4,
                    help="publisher processes (default 4; one tops out near 20k msgs/s)")
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
