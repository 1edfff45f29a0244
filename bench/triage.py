"""Triage screen benchmark: 20 waiting managed seats, the console's cost.

A real broker; a real DemoManager in a process of its own (this file with ``--serve``) hosting
SEATS asking seats (programs/migrate_ask.py: each heartbeats ``waiting`` on ``approval``); in
this process the console as ``cotal watch`` builds it (a LiveSession on the broker, the App
headless at 160×50) with the triage screen open. Measured over MEASURE_S, after the cards and
their terminal excerpts are up: the console process's CPU (% of one core), the event loop's
lateness (a 5 ms sleeper, worst and p99), the peek sessions open (the screen keeps at most
MAX_PEEKS: the visible cards), and the same with the cursor walking the cards (j every 0.3 s,
so peeks open and close as cards scroll). Goals: CPU ≤ 30 % of a core, lateness < 50 ms.

Run: ``.venv/bin/python bench/triage.py [--seats 20] [--seconds 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nats  # noqa: E402


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


async def serve(url: str, space: str, root: str, seats: int) -> None:
    from cotal_tui.demo.asking import asking_seat
    from cotal_tui.demo.manager import DemoManager

    nc = await nats.connect(url)
    specs = [asking_seat(root, name=f"ask{i:02d}", question="Proceed? [y/N] ", pause_s=600)
             for i in range(seats)]
    mgr = DemoManager(nc, space, specs, root=root)
    await mgr.start()
    print("ready", flush=True)
    try:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    finally:
        await mgr.stop()
        await nc.close()


async def lateness(stop: asyncio.Event, out: list[float]) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(0.005)
        out.append(max(0.0, time.perf_counter() - t0 - 0.005))


async def console(url: str, space: str, seats: int, seconds: float) -> dict:
    from cotal_tui.app import CotalApp
    from cotal_tui.cli.connection import target_from_args
    from cotal_tui.cli.watch_console import session_options, tune_gc
    from cotal_tui.screens.triage import TriageScreen
    from cotal_tui.session import LiveSession

    tune_gc()
    nc = await nats.connect(url)
    args = argparse.Namespace(server=[url], space=space, backfill=20, no_dms=False)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    res: dict = {}
    async with app.run_test(size=(160, 50)) as pilot:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            scr = app.console_screen()
            snap = scr.snap if scr is not None else None
            if (snap is not None and len(snap.signals.needs_you) >= seats and scr.managed is not None
                    and scr.managed.rounds):
                break
            await pilot.pause(0.1)
        else:
            raise SystemExit("the seats did not all start waiting within 60 s")
        res["baseline"] = await measure(pilot, None, seats, seconds)  # the console, triage closed
        app.open_triage()
        await pilot.pause(0.2)
        tri = app.screen
        assert isinstance(tri, TriageScreen)
        while time.monotonic() < deadline and not any("│ Proceed?" in t for t in
                                                      tri.query_one("#triage-list").line_texts()):
            await pilot.pause(0.1)
        for phase in ("still", "walking"):
            res[phase] = await measure(pilot, tri, seats, seconds, walk=phase == "walking")
    await session.stop()
    await nc.close()
    return res


async def measure(pilot, tri, seats: int, seconds: float, walk: bool = False) -> dict:
    """One phase: CPU, loop lateness and peeks over ``seconds`` (``walk``: j/k every 0.3 s)."""
    stop = asyncio.Event()
    lat: list[float] = []
    task = asyncio.get_running_loop().create_task(lateness(stop, lat))
    opened0 = tri.peeks_opened if tri is not None else 0
    c0, w0 = cpu_s(), time.perf_counter()
    peaks = 0
    end = time.monotonic() + seconds
    step = 1
    while time.monotonic() < end:
        if walk and tri is not None:
            await pilot.press("j" if step > 0 else "k")
            if tri.query_one("#triage-list").cursor_index in (0, seats - 1):
                step = -step
        await pilot.pause(0.3)
        peaks = max(peaks, len(tri.peeks) if tri is not None else 0)
    c1, w1 = cpu_s(), time.perf_counter()
    stop.set()
    await task
    lat.sort()
    return {
        "cpu_pct": 100 * (c1 - c0) / (w1 - w0),
        "late_worst_ms": 1000 * lat[-1] if lat else 0.0,
        "late_p99_ms": 1000 * lat[int(0.99 * (len(lat) - 1))] if lat else 0.0,
        "late_median_ms": 1000 * statistics.median(lat) if lat else 0.0,
        "peeks_open_max": peaks,
        "peeks_opened": (tri.peeks_opened - opened0) if tri is not None else 0,
        "cards": len(tri.cards) if tri is not None else 0,
    }


async def main(seats: int, seconds: float) -> None:
    from cotal_tui.demo.broker import Broker
    from cotal_tui.demo.provision import provision_space

    broker = Broker(name="bench-triage").start()
    try:
        nc = await nats.connect(broker.url)
        space = "benchtriage"
        await provision_space(nc, space)
        await nc.close()
        with tempfile.TemporaryDirectory() as root:
            mgr = subprocess.Popen([sys.executable, __file__, "--serve", broker.url, space, root,
                                    "--seats", str(seats)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True, start_new_session=True)
            try:
                assert mgr.stdout is not None and mgr.stdout.readline().strip() == "ready"
                res = await console(broker.url, space, seats, seconds)
            finally:
                if mgr.stdin is not None:
                    mgr.stdin.write("\n")
                    mgr.stdin.flush()
                try:
                    mgr.wait(15)
                except subprocess.TimeoutExpired:
                    mgr.kill()
    finally:
        broker.stop()
    print(f"triage screen, {seats} waiting managed seats, {seconds:.0f} s per phase (console process)")
    for phase, r in res.items():
        ok = r["cpu_pct"] <= 30 and r["late_worst_ms"] < 50
        print(f"  {phase:8s} cpu {r['cpu_pct']:5.1f} % of a core · loop lateness worst "
              f"{r['late_worst_ms']:5.1f} ms p99 {r['late_p99_ms']:4.1f} ms median {r['late_median_ms']:4.2f} ms"
              f" · peeks open ≤ {r['peeks_open_max']} (opened {r['peeks_opened']}) · {r['cards']} cards"
              f" · {'ok' if ok else 'OVER GOAL'}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", nargs=3, metavar=("URL", "SPACE", "ROOT"))
    ap.add_argument("--seats", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    if a.serve:
        asyncio.run(serve(*a.serve, a.seats))
    else:
        asyncio.run(main(a.seats, a.seconds))
