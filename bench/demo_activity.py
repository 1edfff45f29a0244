"""What the demo's event plane costs: the demo mesh's own CPU with the plane on vs off.

Runs the embedded mesh (broker + scripted team, no manager) with N agents for S seconds at the
demo's real pace, twice: the event plane on, then off. Prints the team process's CPU (user+sys,
the team's thread is the only busy one), the broker's CPU (its /proc stat), the frames published
and the plane's own frame-building CPU (publish awaits excluded).

Run: .venv/bin/python bench/demo_activity.py [AGENTS [SECONDS [PACE]]]   (default 40 60 1.0)
"""

from __future__ import annotations

import os
import resource
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # before bench/ itself, whose attach.py would shadow the package

from cotal_tui.demo.mesh import DemoMesh  # noqa: E402
from cotal_tui.demo.team import TeamSchedule  # noqa: E402


def _proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one(agents: int, seconds: float, pace: float, activity: bool) -> dict:
    sched = TeamSchedule(crash_after=None, restart_after=None, activity=activity, activity_pace=pace)
    mesh = DemoMesh(agents=agents, manager=False, schedule=sched).start()
    try:
        time.sleep(3.0)  # past the start-up burst
        assert mesh.team is not None
        plane = mesh.team.activity
        f0 = plane.stats.frames if plane else 0
        b0, c0, s0 = _proc_cpu(mesh.broker.proc.pid), _self_cpu(), plane.stats.build_cpu_s if plane else 0.0
        t0 = time.monotonic()
        time.sleep(seconds)
        wall = time.monotonic() - t0
        out = {"wall": wall, "team_cpu": (_self_cpu() - c0) / wall,
               "broker_cpu": (_proc_cpu(mesh.broker.proc.pid) - b0) / wall,
               "frames_s": ((plane.stats.frames if plane else 0) - f0) / wall,
               "build_cpu": ((plane.stats.build_cpu_s if plane else 0.0) - s0) / wall,
               "runs": plane.stats.runs if plane else 0, "errors": plane.stats.errors if plane else 0,
               "skipped": list(plane.stats.skipped) if plane else []}
    finally:
        mesh.stop()
    return out


def main() -> None:
    agents = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    pace = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    on = one(agents, seconds, pace, True)
    off = one(agents, seconds, pace, False)
    print(f"{agents} agents, {seconds:.0f} s, pace {pace}")
    for name, r in (("plane on", on), ("plane off", off)):
        print(f"  {name:9s}: team process {r['team_cpu'] * 100:5.2f}% of a core, broker "
              f"{r['broker_cpu'] * 100:5.2f}%, {r['frames_s']:.1f} frames/s, frame building "
              f"{r['build_cpu'] * 100:.3f}%")
    print(f"  the plane adds {(on['team_cpu'] - off['team_cpu']) * 100:.2f}% of a core to the team, "
          f"{(on['broker_cpu'] - off['broker_cpu']) * 100:.2f}% to the broker; runs {on['runs']}, "
          f"failed {on['errors']}, skipped {on['skipped']}")


if __name__ == "__main__":
    main()
