"""Startup benchmark: process start -> first frame -> roster filled, side by side with bare baselines.

One demo mesh (``cotal demo --headless``: embedded broker, scripted team, pty manager) is started,
then each measurement runs ``--runs`` times and reports the median and worst:

1. ``cotal --help`` and ``cotal watch --help`` wall time, against ``python -c pass`` (the
   interpreter's own floor); goal: ``cotal --help`` <= 3x.
2. ``cotal watch --plain``: the first line, and the first line that names a team agent
   (the roster's first row), against a bare nats-py connect + one KV read of the presence bucket
   in a fresh interpreter.
3. ``cotal watch`` (the console) in a real pty, the screen rendered by pyte: the first frame
   (the alternate screen entered and text painted), and the roster filled (every team agent's
   name on screen), against a bare Textual app that paints the same names (its first frame);
   goals: first frame <= 2x the bare app's, roster filled <= 0.6 s.

Our packages are byte-compiled first (``compileall``), as a pip install does: under
``PYTHONDONTWRITEBYTECODE=1`` (set on these machines) a checkout recompiled every module of
ours on every start, ~250 ms the installed console never pays, while the baselines' site-packages
were compiled at install.

Usage: .venv/bin/python bench/startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import pyte

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable
COTAL = [PY, "-m", "cotal_tui"]
TEAM = ("ada", "bram", "cleo", "dax", "eve", "finn")
GOAL_HELP_RATIO = 3.0  # issue 40: `cotal --help` <= 3x `python -c pass`
GOAL_FRAME_RATIO = 2.0  # issue 40: the console's first frame <= 2x a bare Textual app's
GOAL_ROSTER_S = 0.6  # issue 40: roster filled on an open demo mesh
COLS, ROWS = 140, 40

BARE_TEXTUAL = """
from textual.app import App
from textual.widgets import Static
NAMES = {names!r}
class Bare(App):
    def compose(self):
        for n in NAMES:
            yield Static(n)
Bare().run()
"""

BARE_NATS = """
import asyncio, nats
async def main():
    nc = await nats.connect({url!r})
    kv = await nc.jetstream().key_value("cotal_presence_" + {space!r})
    try:
        keys = await kv.keys()
        await kv.get(keys[0])
    except Exception:
        pass
    print("ready", flush=True)
    await nc.close()
asyncio.run(main())
"""


def say(*a: object) -> None:
    print("  ..", *a, file=sys.stderr, flush=True)


def wall(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, cwd=ROOT)
    return time.perf_counter() - t0


def lines_until(argv: list[str], want: re.Pattern, timeout: float = 20.0) -> tuple[float, float]:
    """(first line, first line matching ``want``), seconds from the spawn."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT, text=True, bufsize=1)
    first = hit = None
    try:
        deadline = t0 + timeout
        while time.perf_counter() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            now = time.perf_counter() - t0
            first = now if first is None else first
            if want.search(line):
                hit = now
                break
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if first is None or hit is None:
        raise SystemExit(f"{argv[2:]} printed no line matching {want.pattern} within {timeout} s")
    return first, hit


def screen_until(argv: list[str], names: tuple[str, ...], env: dict, timeout: float = 20.0) -> tuple[float, float]:
    """(first frame, every name on screen), seconds from the spawn, in a real pty."""
    screen = pyte.Screen(COLS, ROWS)
    stream = pyte.ByteStream(screen)
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(ROOT)
        os.execvpe(argv[0], argv, env)
    t0 = time.perf_counter()
    import fcntl
    import struct
    import termios
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    first = full = None
    try:
        deadline = t0 + timeout
        while time.perf_counter() < deadline and full is None:
            r, _, _ = select.select([fd], [], [], 0.01)
            if not r:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            stream.feed(data)
            text = "\n".join(screen.display)
            now = time.perf_counter() - t0
            if first is None and text.strip():
                first = now
            if all(n in text for n in names):
                full = now
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                r, _, _ = select.select([fd], [], [], 0.05)
                if r:
                    os.read(fd, 65536)
            except OSError:
                pass
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    if first is None or full is None:
        raise SystemExit(f"{argv[2:4]}: the screen never showed {', '.join(names)} within {timeout} s")
    return first, full


def start_demo() -> tuple[subprocess.Popen, str, str]:
    p = subprocess.Popen([*COTAL, "demo", "--headless"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, cwd=ROOT, bufsize=1)
    server = space = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (server and space):
        line = p.stdout.readline()
        if not line:
            break
        if line.startswith("server:"):
            server = line.split()[1]
        elif line.startswith("space:"):
            space = line.split()[1]
    if not (server and space):
        p.kill()
        raise SystemExit("cotal demo --headless did not print its server and space")
    return p, server, space


def fmt(xs: list[float]) -> str:
    return f"median {statistics.median(xs) * 1000:6.0f} ms  worst {max(xs) * 1000:6.0f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    compiled = dict(os.environ)
    compiled.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([PY, "-m", "compileall", "-q", "meshview", "attach", "widgets", "cotal_tui"],
                   cwd=ROOT, env=compiled, check=True, stdout=subprocess.DEVNULL)
    demo, server, space = start_demo()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(COLS), LINES=str(ROWS))
    env.pop("NO_COLOR", None)
    with tempfile.TemporaryDirectory() as home:
        env["COTAL_HOME"] = home  # no registry, no config: the flags name the mesh
        tmp_textual = os.path.join(home, "bare_textual.py")
        with open(tmp_textual, "w") as f:
            f.write(BARE_TEXTUAL.format(names=TEAM))
        tmp_nats = os.path.join(home, "bare_nats.py")
        with open(tmp_nats, "w") as f:
            f.write(BARE_NATS.format(url=server, space=space))
        try:
            # the team is up once a plain watcher sees its first member
            lines_until([*COTAL, "watch", "--server", server, "--space", space, "--plain"],
                        re.compile(r"\bjoin\s+ada/"), timeout=30)
            rows: dict[str, list[float]] = {k: [] for k in (
                "help", "watch_help", "python", "plain_first", "plain_agent", "bare_nats",
                "console_frame", "console_roster", "textual_frame")}
            for i in range(args.runs):
                say(f"run {i + 1}/{args.runs}")
                rows["help"].append(wall([*COTAL, "--help"]))
                rows["watch_help"].append(wall([*COTAL, "watch", "--help"]))
                rows["python"].append(wall([PY, "-c", "pass"]))
                a, b = lines_until([*COTAL, "watch", "--server", server, "--space", space, "--plain"],
                                   re.compile(r"\bjoin\s+(" + "|".join(TEAM) + r")/"))
                rows["plain_first"].append(a)
                rows["plain_agent"].append(b)
                rows["bare_nats"].append(lines_until([PY, tmp_nats], re.compile("ready"))[1])
                a, b = screen_until([*COTAL, "watch", "--server", server, "--space", space], TEAM, env)
                rows["console_frame"].append(a)
                rows["console_roster"].append(b)
                rows["textual_frame"].append(screen_until([PY, tmp_textual], TEAM, env)[1])
        finally:
            demo.send_signal(signal.SIGINT)
            try:
                demo.wait(10)
            except subprocess.TimeoutExpired:
                demo.kill()
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}   runs: {args.runs}")
    help_ratio = med["help"] / med["python"]
    print(f"cotal --help                 {fmt(rows['help'])}   ratio {help_ratio:.2f}x  "
          f"goal <= {GOAL_HELP_RATIO:g}x  {'MET' if help_ratio <= GOAL_HELP_RATIO else 'MISSED'}")
    print(f"cotal watch --help           {fmt(rows['watch_help'])}   ratio "
          f"{med['watch_help'] / med['python']:.2f}x")
    print(f"  python -c pass (baseline)  {fmt(rows['python'])}")
    print(f"--plain first line           {fmt(rows['plain_first'])}")
    print(f"--plain first agent row      {fmt(rows['plain_agent'])}")
    print(f"  bare nats-py connect+KV    {fmt(rows['bare_nats'])}   ratio {med['plain_agent'] / med['bare_nats']:.2f}x")
    frame_ratio = med["console_frame"] / med["textual_frame"]
    print(f"console first frame          {fmt(rows['console_frame'])}   ratio {frame_ratio:.2f}x  "
          f"goal <= {GOAL_FRAME_RATIO:g}x  {'MET' if frame_ratio <= GOAL_FRAME_RATIO else 'MISSED'}")
    print(f"console roster filled        {fmt(rows['console_roster'])}   goal <= "
          f"{GOAL_ROSTER_S * 1000:.0f} ms  {'MET' if med['console_roster'] <= GOAL_ROSTER_S else 'MISSED'}")
    print(f"  bare Textual first frame   {fmt(rows['textual_frame'])}   roster filled "
          f"{med['console_roster'] / med['textual_frame']:.2f}x")


if __name__ == "__main__":
    main()
