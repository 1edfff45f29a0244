"""Soak: an hour of mesh traffic compressed into one long run, watching the observer's RSS
and open file descriptors for growth.

    python bench/soak.py                       # 10 min at 2000 msgs/s
    python bench/soak.py --minutes 2 --rate 500
    python bench/soak.py --cmd "{python} -m cotal_tui.cli watch --plain --server {url} --space {space}"

It starts a real nats-server, provisions a space, runs the scripted team with a channel
flood of ``--rate`` msgs/s plus the usual DMs/anycast/presence, and churns agents (crash one,
restart another as a new incarnation, every ``--churn`` seconds). The measured process is
``cotal watch --json`` by default (``--cmd`` to measure anything else, e.g. the console
headless); its stdout is read and counted so it never blocks on a full pipe.

Every ``--interval`` seconds it samples the process's RSS (``/proc/<pid>/status`` VmRSS) and
open FDs (``/proc/<pid>/fd``). At the end it prints start/end/max and the least-squares slope
of each, over the whole run and after the first minute (warm-up: caches, rings and rate
buckets fill), and a verdict. Exit status: 0 flat, 1 growth past the thresholds, 2 the
measured process died.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cotal_tui.demo.mesh import DemoMesh  # noqa: E402
from cotal_tui.demo.team import TeamSchedule  # noqa: E402

DEFAULT_CMD = "{python} -m cotal_tui.cli watch --json --server {url} --space {space}"


@dataclass
class Sample:
    t: float  # seconds since start
    rss_kb: int
    fds: int
    lines: int


@dataclass
class Reader:
    """Drains the measured process's stdout on a thread, counting lines by JSON type."""

    proc: subprocess.Popen
    lines: int = 0
    by_type: collections.Counter = field(default_factory=collections.Counter)
    states: list[tuple[float, str]] = field(default_factory=list)
    t0: float = field(default_factory=time.monotonic)

    def start(self) -> "Reader":
        threading.Thread(target=self._run, name="soak-reader", daemon=True).start()
        return self

    def _run(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines += 1
            if raw[:1] == b"{":
                try:
                    o = json.loads(raw)
                except ValueError:
                    self.by_type["<unparseable>"] += 1
                    continue
                typ = o.get("type", "?")
                self.by_type[typ] += 1
                if typ == "state":
                    self.states.append((time.monotonic() - self.t0, o.get("connection")))
            else:
                self.by_type["text"] += 1


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope dy/dx (0 for fewer than two points)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    if den == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den


def summarize(samples: list[Sample], warmup_s: float) -> dict:
    def stats(vals: list[float], ts: list[float]) -> dict:
        late = [(t, v) for t, v in zip(ts, vals) if t >= warmup_s]
        return {
            "start": vals[0], "end": vals[-1], "max": max(vals), "min": min(vals),
            "slope_per_min": slope(ts, vals) * 60,
            "slope_per_min_after_warmup": (slope([t for t, _ in late], [v for _, v in late]) * 60
                                           if len(late) >= 2 else None),
        }

    ts = [s.t for s in samples]
    return {
        "samples": len(samples),
        "rss_mb": stats([s.rss_kb / 1024 for s in samples], ts),
        "fds": stats([float(s.fds) for s in samples], ts),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0, help="run length (default 10)")
    ap.add_argument("--rate", type=float, default=2000.0, help="channel msgs/s flood (2000)")
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--interval", type=float, default=10.0, help="sample period s (10)")
    ap.add_argument("--churn", type=float, default=20.0,
                    help="crash one agent and restart another every N s (20)")
    ap.add_argument("--warmup", type=float, default=60.0,
                    help="seconds excluded from the after-warm-up slope (60)")
    ap.add_argument("--max-rss-slope", type=float, default=0.5,
                    help="fail if RSS grows faster than this many MB/min after warm-up (0.5)")
    ap.add_argument("--max-fd-growth", type=int, default=4,
                    help="fail if open FDs end more than this above the warm-up level (4)")
    ap.add_argument("--cmd", default=DEFAULT_CMD,
                    help="measured command; {python} {url} {space} are substituted")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)

    space = "soak"
    sched = TeamSchedule(crash_after=None, restart_after=None, chat_interval=0.5)
    mesh = DemoMesh(space=space, seed=args.seed, agents=args.agents, rate=args.rate,
                    manager=False, schedule=sched).start()
    cmd = shlex.split(args.cmd.format(python=sys.executable, url=mesh.url, space=space))
    log = open(os.path.join(os.path.dirname(mesh.broker.store_dir or "/tmp"), "soak-stderr.log"),
               "wb")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                            cwd=str(ROOT))
    reader = Reader(proc).start()
    # the clock starts once the observer is up (first output line), not at exec
    ready_by = time.monotonic() + 30
    while reader.lines == 0 and proc.poll() is None and time.monotonic() < ready_by:
        time.sleep(0.05)
    samples: list[Sample] = []
    published0 = mesh.team.published if mesh.team else 0
    t0 = time.monotonic()
    end = t0 + args.minutes * 60
    next_sample = t0
    next_churn = t0 + args.churn
    churned = 0
    died = False
    try:
        while time.monotonic() < end:
            now = time.monotonic()
            if proc.poll() is not None:
                died = True
                break
            if now >= next_sample:
                try:
                    samples.append(Sample(now - t0, rss_kb(proc.pid), open_fds(proc.pid),
                                          reader.lines))
                except (FileNotFoundError, ProcessLookupError):
                    died = True
                    break
                s = samples[-1]
                print(f"[{s.t:7.1f}s] rss {s.rss_kb / 1024:7.1f} MB  fds {s.fds:3d}  "
                      f"lines {s.lines}", file=sys.stderr, flush=True)
                next_sample += args.interval
            if now >= next_churn and mesh.team is not None:
                team = mesh.team
                alive = [a.name for a in team.members if a.alive]
                dead = [a.name for a in team.members if not a.alive]
                if len(alive) > 2:
                    mesh.call(team.crash(alive[churned % len(alive)]))
                if dead:
                    mesh.call(team.restart_incarnation(dead[0]))
                churned += 1
                next_churn += args.churn
            time.sleep(min(0.25, max(0.0, min(next_sample, next_churn, end) - time.monotonic())))
    finally:
        elapsed = time.monotonic() - t0
        published = (mesh.team.published if mesh.team else 0) - published0
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        mesh.stop()
        log.close()

    if len(samples) < 2:
        print("soak: too few samples (the measured process died early?)", file=sys.stderr)
        return 2
    summary = summarize(samples, args.warmup)
    summary.update({
        "command": " ".join(cmd[1:]) if cmd[0] == sys.executable else " ".join(cmd),
        "minutes": round(elapsed / 60, 2), "rate_target": args.rate,
        "published": published, "published_per_s": round(published / elapsed, 1),
        "lines_out": reader.lines, "lines_by_type": dict(reader.by_type),
        "churn_events": churned, "exit": proc.returncode, "died": died,
        "connection_states": reader.states[:20],
    })
    rss, fds = summary["rss_mb"], summary["fds"]
    late_slope = rss["slope_per_min_after_warmup"]
    warm = [s.fds for s in samples if s.t >= args.warmup] or [samples[0].fds]
    fd_growth = samples[-1].fds - min(warm)
    flat = (not died and (late_slope is None or late_slope <= args.max_rss_slope)
            and fd_growth <= args.max_fd_growth)
    summary["verdict"] = "died" if died else ("flat" if flat else "growing")
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"soak: {summary['minutes']} min, {summary['published_per_s']} msgs/s published "
              f"({published} total), {reader.lines} lines out, {churned} churn events")
        for name, st, unit in (("RSS", rss, "MB"), ("FDs", fds, "")):
            after = st["slope_per_min_after_warmup"]
            print(f"  {name}: start {st['start']:.1f}{unit} end {st['end']:.1f}{unit} "
                  f"max {st['max']:.1f}{unit}  slope {st['slope_per_min']:+.3f}{unit}/min "
                  f"(after warm-up {after:+.3f}{unit}/min)" if after is not None else
                  f"  {name}: start {st['start']:.1f} end {st['end']:.1f} max {st['max']:.1f} "
                  f"slope {st['slope_per_min']:+.3f}/min")
        print(f"  lines by type: {dict(reader.by_type)}")
        print(f"  verdict: {summary['verdict']}")
    return {"flat": 0, "growing": 1, "died": 2}[summary["verdict"]]


if __name__ == "__main__":
    sys.exit(main())
