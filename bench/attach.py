"""Attach benchmark: mesh vs local pty, side by side in one run.

  keystroke echo latency  - a byte typed through the mesh into `cat` on a pty, until its echo is back,
                            vs the same on a local pty (p50 / p99)
  output throughput       - bytes/s a client receives from a flooding program through the mesh,
                            vs reading the same program's pty directly; ROUNDS rounds, A/B
                            alternating (local, mesh, local, ...), medians and per-round ratios
  snapshot serialization  - Mirror.snapshot() of a busy 120x32 screen

The serving side runs as in real use: a manager process of its own (this file with ``--serve``:
a broker-connected DemoManager with a `cat` seat, plus the flood seat on request), while the
client (AttachSession) runs in this process, like `cotal attach`.

Run: .venv/bin/python bench/attach.py
"""

from __future__ import annotations

import asyncio
import os
import pty
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nats  # noqa: E402

from attach.client import AttachSession  # noqa: E402
from attach.mirror import Mirror  # noqa: E402
from cotal_tui.demo.broker import Broker  # noqa: E402
from cotal_tui.demo.manager import DemoManager, SeatSpec  # noqa: E402
from cotal_tui.demo.programs.dashboard import frame  # noqa: E402
from cotal_tui.demo.provision import provision_space  # noqa: E402

N_KEYS = 300
FLOOD_BYTES = 8 * 1024 * 1024
ROUNDS = int(os.environ.get("ROUNDS", "5"))
FLOOD = [sys.executable, "-c",
         "import sys\nline=(b'0123456789abcdef'*6)[:95]+b'\\n'\nn=%d//len(line)\n"
         "w=sys.stdout.buffer\nfor i in range(n): w.write(line)\nw.write(b'FLOOD-END\\n'); w.flush()\n"
         "import time; time.sleep(60)" % FLOOD_BYTES]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def local_echo_latency() -> list[float]:
    master, slave = pty.openpty()
    p = subprocess.Popen(["cat"], stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    out = []
    time.sleep(0.2)
    for i in range(N_KEYS):
        ch = bytes([97 + i % 26])
        t0 = time.perf_counter()
        os.write(master, ch)
        buf = b""
        while ch not in buf:
            buf += os.read(master, 1024)
        out.append((time.perf_counter() - t0) * 1000)
    p.kill()
    os.close(master)
    return out


def local_throughput() -> float:
    master, slave = pty.openpty()
    p = subprocess.Popen(FLOOD, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    got = 0
    tail = b""
    t0 = time.perf_counter()
    while b"FLOOD-END" not in tail:
        b = os.read(master, 65536)
        got += len(b)
        tail = (tail + b)[-32:]
    dt = time.perf_counter() - t0
    p.kill()
    os.close(master)
    return got / dt


def flood_spec(name: str) -> SeatSpec:
    return SeatSpec(name, f"local.{name}", argv=[sys.executable, "-c", "import time; time.sleep(0.5)\n" + FLOOD[2]],
                    cols=120, rows=32)


async def serve(url: str) -> None:
    """The manager side, in a process of its own: `ready` once serving, `flood <name>` spawns a
    flood seat (answered `spawned`), end of stdin stops it."""
    nc = await nats.connect(url)
    await provision_space(nc, "bench")
    m = DemoManager(nc, "bench", [SeatSpec("cat", "local.cat", argv=["cat"], cols=120, rows=32)])
    await m.start()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("ready", flush=True)
    while line := await reader.readline():
        words = line.split()
        if words[:1] == [b"flood"]:
            m._spawn(flood_spec(words[1].decode()))
            print("spawned", flush=True)
    await m.stop()
    await nc.close()


async def _line(proc: asyncio.subprocess.Process, want: bytes) -> None:
    assert proc.stdout is not None
    while (got := await asyncio.wait_for(proc.stdout.readline(), 30)).strip() != want:
        if not got:
            raise RuntimeError(f"manager process ended before {want!r}")


async def mesh_figures(url: str) -> dict:
    mgr = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--serve", url, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        await _line(mgr, b"ready")
        return await _client_figures(url, mgr)
    finally:
        assert mgr.stdin is not None
        mgr.stdin.close()
        try:
            await asyncio.wait_for(mgr.wait(), 15)
        except asyncio.TimeoutError:
            mgr.kill()
            await mgr.wait()


async def _client_figures(url: str, mgr: asyncio.subprocess.Process) -> dict:
    ncc = await nats.connect(url)

    # echo latency
    got = asyncio.Event()
    want = {"b": b""}
    seen = bytearray()

    def on_out(b: bytes) -> None:
        seen.extend(b)
        if want["b"] and want["b"] in seen:
            got.set()

    s = AttachSession("bench", "cat", nc=ncc, on_output=on_out)
    await s.open()
    runner = asyncio.create_task(s.run())
    await asyncio.sleep(0.3)
    lat = []
    for i in range(N_KEYS):
        ch = bytes([97 + i % 26])
        seen.clear()
        got.clear()
        want["b"] = ch
        t0 = time.perf_counter()
        await s.send_keys(ch)
        await asyncio.wait_for(got.wait(), 5)
        lat.append((time.perf_counter() - t0) * 1000)
    await s.close()
    await runner

    local_tp, mesh_tp, dropped, n_bytes = [], [], 0, 0
    for r in range(ROUNDS):
        local_tp.append(local_throughput())
        tp, d, n = await _mesh_throughput(ncc, mgr, f"flood{r}")
        mesh_tp.append(tp)
        dropped += d
        n_bytes += n
    await ncc.close()
    return {"lat": lat, "tp": mesh_tp, "local_tp": local_tp, "dropped": dropped, "flood_bytes": n_bytes}


async def _mesh_throughput(ncc, mgr: asyncio.subprocess.Process, name: str) -> tuple[float, int, int]:
    """Attach to a fresh flood seat (its program waits 0.5 s) and time the first live byte to
    FLOOD-END."""
    assert mgr.stdin is not None
    mgr.stdin.write(b"flood %s\n" % name.encode())
    await _line(mgr, b"spawned")
    counter = {"n": 0, "t0": 0.0, "t1": 0.0}
    tail = bytearray()
    done = asyncio.Event()

    def on_flood(b: bytes) -> None:
        if not counter["t0"]:
            counter["t0"] = time.perf_counter()
        counter["n"] += len(b)
        tail.extend(b)
        found = b"FLOOD-END" in tail  # (in a repaint it sits mid-chunk: look before trimming)
        del tail[:-64]
        if found:
            counter["t1"] = time.perf_counter()
            done.set()

    s2 = AttachSession("bench", name, nc=ncc, on_output=on_flood)
    await s2.open()
    r2 = asyncio.create_task(s2.run())
    try:
        await asyncio.wait_for(done.wait(), 120)
    except asyncio.TimeoutError:
        raise RuntimeError(f"{name}: no FLOOD-END after {counter['n']} bytes; tail {bytes(tail)!r}") from None
    await s2.close()
    await r2
    return counter["n"] / (counter["t1"] - counter["t0"]), s2.bytes_dropped, counter["n"]


def snapshot_time() -> float:
    mirror = Mirror(cols=120, rows=32)
    mirror.feed(b"\x1b[?1049h")
    for t in range(1, 30):
        mirror.feed(frame(t, 120, 32).encode())
    mirror.feed("".join(f"\x1b[{y};1H\x1b[3{y % 8};4{(y + 3) % 8}m" + ("cotal ☃ " * 15)[:119]
                        for y in range(12, 31)).encode())
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        mirror.snapshot()
    return (time.perf_counter() - t0) / n * 1000


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(serve(sys.argv[2]))
        return
    load0 = os.getloadavg()
    b = Broker(name="cotal-bench").start()
    try:
        mesh = asyncio.run(mesh_figures(b.url))
    finally:
        b.stop()
    local = local_echo_latency()
    local_tp = statistics.median(mesh["local_tp"])
    mesh_tp = statistics.median(mesh["tp"])
    ratios = " ".join(f"{m / loc:.2f}" for m, loc in zip(mesh["tp"], mesh["local_tp"]))
    snap = snapshot_time()
    lp50, lp99 = pct(local, 50), pct(local, 99)
    mp50, mp99 = pct(mesh["lat"], 50), pct(mesh["lat"], 99)
    print(f"{'':34}{'mesh':>14}{'local pty':>14}{'added / ratio':>16}")
    print(f"{'keystroke echo p50 (ms)':34}{mp50:14.3f}{lp50:14.3f}{mp50 - lp50:16.3f}   goal < 2")
    print(f"{'keystroke echo p99 (ms)':34}{mp99:14.3f}{lp99:14.3f}{mp99 - lp99:16.3f}   goal < 10")
    print(f"{'output throughput (MB/s), median':34}{mesh_tp / 1e6:14.2f}{local_tp / 1e6:14.2f}"
          f"{mesh_tp / local_tp:15.2f}x   goal >= 0.5x   (rounds: {ratios})")
    print(f"{'  bytes received / dropped':34}{mesh['flood_bytes']:14d}{mesh['dropped']:14d}")
    print(f"{'snapshot 120x32 (ms/snapshot)':34}{snap:14.3f}")
    load1 = os.getloadavg()
    print(f"(n={N_KEYS} keystrokes, {ROUNDS} x flood {FLOOD_BYTES // (1024 * 1024)} MiB, window 64, loopback, "
          f"{os.cpu_count()} cpus, manager in its own process; load avg 1/5/15 min "
          f"{load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f} before, {load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f} after)")


if __name__ == "__main__":
    main()
