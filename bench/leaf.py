"""Scale-out: what each console costs the broker, alone vs behind a leaf node.

For N in ``--sizes`` (default 1 5 20), N observers (``cotal watch --json`` processes, exactly
what a user runs) watch one space while the scripted team posts ``--rate`` channel msgs/s and
heartbeats presence:

  direct  - the observers connect to the broker (one nats-server with JetStream) themselves;
  leaf    - the same broker is the hub; the observers connect to a leaf node (no JetStream of
            its own; the hub names JetStream domain ``hub`` and the leaf maps ``$JS.API.>`` onto
            it, see tests/support/leaf.py), so the hub serves one leaf connection, not N.

Measured over ``--seconds`` once every observer is streaming: hub broker CPU, leaf CPU, and
the mean CPU of one observer process (shares of one core), with the load average; "hub +/obs"
is the hub's CPU above its no-observer baseline (the team alone), divided by N.

    .venv/bin/python bench/leaf.py [--sizes 1 5 20] [--seconds 10] [--rate 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the hub/leaf and `cotal watch` helpers the tests use

import nats  # noqa: E402

from cotal_tui.demo.broker import free_port  # noqa: E402
from cotal_tui.demo.provision import provision_space  # noqa: E402
from cotal_tui.demo.team import Team, TeamSchedule  # noqa: E402
from support.leaf import HubBroker, LeafBroker  # noqa: E402
from support.watchproc import WatchProc  # noqa: E402

SPACE = "scale"


def cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one(n: int, via_leaf: bool, seconds: float, rate: float) -> dict:
    leaf_port = free_port()
    hub = HubBroker(name="bench-hub",
                    extra_config=f"leafnodes {{\n  listen: 127.0.0.1:{leaf_port}\n}}").start()
    leaf = None
    watchers: list[WatchProc] = []
    nc = None
    team = None
    try:
        if via_leaf:
            leaf = LeafBroker([leaf_port], name="bench-leaf").start()
            deadline = time.monotonic() + 15
            while not leaf.leafz():
                if time.monotonic() > deadline:
                    raise SystemExit("the leaf did not connect to the hub")
                await asyncio.sleep(0.05)
        nc = await nats.connect(hub.url)
        await provision_space(nc, SPACE)
        team = Team(nc, SPACE, seed=3, agents=6, rate=rate,
                    schedule=TeamSchedule(crash_after=None, restart_after=None))
        await team.start()
        url = (leaf or hub).url
        watchers = [WatchProc.start("--json", "--server", url, "--space", SPACE) for _ in range(n)]
        for w in watchers:
            await w.wait_for(lambda w=w: len(w.objs("message")) >= 5, 60, "an observer streaming")
        await asyncio.sleep(1.0)  # the observers' start-up is not what we measure
        pids = {"hub": hub.proc.pid, "leaf": leaf.proc.pid if leaf else 0}
        c0 = {k: cpu_s(p) for k, p in pids.items()}
        w0 = [cpu_s(w.proc.pid) for w in watchers]
        m0 = [len(w.objs("message")) for w in watchers]
        t0 = time.perf_counter()
        await asyncio.sleep(seconds)
        dt = time.perf_counter() - t0
        out = {k: (cpu_s(p) - c0[k]) / dt if p else 0.0 for k, p in pids.items()}
        per = [(cpu_s(w.proc.pid) - a) / dt for w, a in zip(watchers, w0)]
        got = [(len(w.objs("message")) - a) / dt for w, a in zip(watchers, m0)]
        out.update(observer=statistics.mean(per) if per else 0.0,
                   msgs=statistics.mean(got) if got else 0.0)
        return out
    finally:
        if team is not None:
            await team.stop(graceful=False)
        for w in watchers:
            w.stop()
        if nc is not None:
            await nc.close()
        if leaf is not None:
            leaf.stop()
        hub.stop()


async def main(opts: argparse.Namespace) -> None:
    load0 = os.getloadavg()
    base = (await one(0, False, opts.seconds, opts.rate))["hub"]  # the team alone
    rows = []
    for n in opts.sizes:
        for via_leaf in (False, True):
            rows.append((n, via_leaf, await one(n, via_leaf, opts.seconds, opts.rate)))
    print(f"hub CPU with the team and no observer: {base * 100:.1f}% of a core")
    print(f"{'observers':>9} {'path':>7} {'hub CPU':>9} {'hub +/obs':>10} {'leaf CPU':>9} "
          f"{'per observer':>13} {'msgs/s each':>12}")
    for n, via_leaf, r in rows:
        print(f"{n:>9} {'leaf' if via_leaf else 'direct':>7} {r['hub'] * 100:8.1f}% "
              f"{(r['hub'] - base) * 100 / n:9.2f}% {r['leaf'] * 100:8.1f}% "
              f"{r['observer'] * 100:12.1f}% {r['msgs']:12.0f}")
    load1 = os.getloadavg()
    print(f"(team: 6 agents, {opts.rate:g} channel msgs/s + presence; {opts.seconds:g} s per row; "
          f"shares of one core; {os.cpu_count()} CPUs, load avg 1/5/15 min "
          f"{load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f} before, "
          f"{load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f} after)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 5, 20])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=200.0)
    asyncio.run(main(ap.parse_args()))
