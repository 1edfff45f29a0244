"""Attach benchmark: mesh vs local pty, side by side in one run.

  keystroke echo latency  - a byte typed through the mesh into `cat` on a pty, until its echo is back,
                            vs the same on a local pty (p50 / p99)
  output throughput       - bytes/s a client receives from a flooding program through the mesh,
                            vs reading the same program's pty directly; ROUNDS rounds, A/B
                            alternating (local, mesh, local, ...), medians and per-round ratios
  snapshot serialization  - Mirror.snapshot() of a busy 120x32 screen
  per-hop rates           - each hop of the byte path alone, on the same flood cut the way the pty
                            hands it out: pty read (the raw figure), host framing (the bridge's
                            coalesce into CHUNK frames), base64/JSON (data_json + the rail frame),
                            NATS publish -> broker -> subscriber (a bare nats-py pair), client
                            decode (rail parse + base64 decode), the terminal filter (raw
                            attach's OSC 52 drop), stdout write (into a pty that a
                            reader drains, like a terminal); then where each process's time goes

The serving side runs as in real use: a manager process of its own (this file with ``--serve``:
a broker-connected DemoManager with a `cat` seat, plus the flood seat on request), while the
client (AttachSession) runs in this process, like `cotal attach`.

The mesh clock starts at the first byte of the program's flood, the local one at the first pty
read: the attach repaint arrives ~0.5 s earlier (the flood seat's program sleeps first), and
counting from it measured that sleep (the 0.29x of issue 26 was mostly that).

Run: .venv/bin/python bench/attach.py   (ROUNDS=5 by default; ATTACH_PROFILE=/tmp/mgr.prof
also writes the manager process's cProfile top rows there)
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
from attach.termfilter import TermFilter  # noqa: E402
from cotal_tui.demo.broker import Broker  # noqa: E402
from cotal_tui.demo.manager import DemoManager, SeatSpec  # noqa: E402
from cotal_tui.demo.programs.dashboard import frame  # noqa: E402
from cotal_tui.demo.provision import provision_space  # noqa: E402

N_KEYS = 300
FLOOD_MARK = b"0123456789abcdef"
FLOOD_BYTES = 8 * 1024 * 1024
ROUNDS = int(os.environ.get("ROUNDS", "5"))
FLOOD = [sys.executable, "-c",
         "import sys\nline=(b'0123456789abcdef'*6)[:95]+b'\\n'\nn=%d//len(line)\n"
         "w=sys.stdout.buffer\nfor i in range(n): w.write(line)\nw.write(b'FLOOD-END\\n'); w.flush()\n"
         "import time; time.sleep(60)" % FLOOD_BYTES]


def cpu_s(pid: int) -> float:
    """utime + stime of one process, in seconds (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except OSError:
                pass
    return out


PIDS: dict[str, int] = {}  # broker pid, set by main
CPU: list[dict[str, float]] = []  # per mesh round: share of a core per process over the flood


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


def local_throughput(chunks: list[bytes] | None = None) -> float:
    master, slave = pty.openpty()
    p = subprocess.Popen(FLOOD, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    got = 0
    tail = b""
    first = os.read(master, 65536)  # the clock starts at the first byte, as on the mesh side
    t0 = time.perf_counter()
    got, tail = len(first), first[-32:]
    if chunks is not None:
        chunks.append(first)
    while b"FLOOD-END" not in tail:
        b = os.read(master, 65536)
        got += len(b)
        tail = (tail + b)[-32:]
        if chunks is not None:
            chunks.append(b)
    dt = time.perf_counter() - t0
    p.kill()
    os.close(master)
    return got / dt


# ---- the byte path, hop by hop ----------------------------------------------------------------

def _rate(nbytes: int, fn, reps: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return nbytes * reps / (time.perf_counter() - t0)


def hop_framing(chunks: list[bytes]) -> tuple[float, list[bytes]]:
    """The ServingBridge's own queue + coalesce (its real method) into <= CHUNK pieces."""
    from collections import deque

    from attach.host import CHUNK, ServingBridge
    b = ServingBridge.__new__(ServingBridge)
    pieces: list[bytes] = []

    def run() -> None:
        pieces.clear()
        b._out = deque(("data", c) for c in chunks)
        while b._out:
            data = b._out[0][1]
            if len(data) < CHUNK and len(b._out) > 1 and b._out[1][0] == "data":
                data = b._coalesce()
            piece, rest = data[:CHUNK], data[CHUNK:]
            pieces.append(piece)
            if rest:
                b._out[0] = ("data", rest)
            else:
                b._out.popleft()
    return _rate(sum(map(len, chunks)), run, 3), pieces


def hop_encode(pieces: list[bytes]) -> tuple[float, list[bytes]]:
    """tf.data_json + Rail._send's frame wrap (a real Rail, publish into a list)."""
    from attach.rail import Rail
    from meshview.wire import frames as tf
    out: list[bytes] = []

    async def pub(_s: str, raw: bytes) -> None:
        out.append(raw)

    async def run() -> float:
        t0 = time.perf_counter()
        for _ in range(3):
            out.clear()
            r = Rail(egress="o", ingress="i", publish=pub, on_data=lambda d, s: None,
                     window=1024, idle_credit_ms=0, stall_timeout_ms=0)
            for p in pieces:
                await r.send_json(tf.data_json(p))
                r.acked_through = r.seq
        return sum(map(len, pieces)) * 3 / (time.perf_counter() - t0)
    return asyncio.run(run()), list(out)


def hop_decode(frames: list[bytes]) -> float:
    """A receiving Rail's feed (JSON parse, seq) + the caller's tf.decode (base64)."""
    from attach.rail import Rail
    from meshview.wire import frames as tf
    n = {"b": 0}

    async def pub(_s: str, _raw: bytes) -> None:
        return None

    def on_data(d, _seq) -> None:
        n["b"] += len(tf.decode(d, lenient=True).payload)

    async def run() -> float:
        t0 = time.perf_counter()
        for _ in range(3):
            r = Rail(egress="o", ingress="i", publish=pub, on_data=on_data,
                     window=1024, idle_credit_ms=0, stall_timeout_ms=0)
            for f in frames:
                await r.feed(f)
            await r.idle()
        return n["b"] / (time.perf_counter() - t0)
    return asyncio.run(run())


async def hop_nats(url: str, frames: list[bytes]) -> float:
    """Bare nats-py: publish every frame, a second connection receives them all."""
    pc, sc = await nats.connect(url), await nats.connect(url)
    total = sum(map(len, frames))
    got = {"n": 0}
    done = asyncio.Event()

    async def cb(msg) -> None:
        got["n"] += 1
        if got["n"] == len(frames):
            done.set()
    await sc.subscribe("bench.hop", cb=cb)
    await sc.flush()
    t0 = time.perf_counter()
    for f in frames:
        await pc.publish("bench.hop", f)
    await pc.flush()
    await asyncio.wait_for(done.wait(), 60)
    dt = time.perf_counter() - t0
    await pc.close()
    await sc.close()
    return total / dt


def hop_stdout(pieces: list[bytes]) -> float:
    """os.write of each frame's bytes into a pty slave while a thread drains the master."""
    import threading
    master, slave = pty.openpty()
    import tty
    tty.setraw(slave)
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            try:
                os.read(master, 65536)
            except OSError:
                return
    th = threading.Thread(target=drain, daemon=True)
    th.start()

    def run() -> None:
        for p in pieces:
            view = memoryview(p)
            while view:
                view = view[os.write(slave, view):]
    r = _rate(sum(map(len, pieces)), run)
    stop.set()
    os.close(slave)
    os.close(master)
    return r


def hop_filter(pieces: list[bytes]) -> float:
    """raw attach's terminal filter (clipboard writes out) over each frame's bytes."""
    f = TermFilter()
    return _rate(sum(map(len, pieces)), lambda: [f.feed(p) for p in pieces])


def hop_figures(url: str) -> dict:
    chunks: list[bytes] = []
    raw = local_throughput(chunks)
    framing, pieces = hop_framing(chunks)
    encode, frames = hop_encode(pieces)
    return {"pty read (raw)": raw, "host framing": framing, "base64/JSON + rail frame": encode,
            "NATS publish->broker->sub": asyncio.run(hop_nats(url, frames)),
            "client decode (rail+base64)": hop_decode(frames),
            "terminal filter (OSC 52 out)": hop_filter(pieces),
            "stdout write (into a pty)": hop_stdout(pieces),
            "_reads": len(chunks), "_read_median": statistics.median(map(len, chunks)),
            "_frames": len(frames), "_frame_bytes": statistics.median(map(len, frames))}


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
    procs: dict[str, list[int]] = {}
    c0: dict[str, float] = {}
    tail = bytearray()
    done = asyncio.Event()

    filt = TermFilter()  # what `cotal attach` does to each chunk before the terminal

    def on_flood(b: bytes) -> None:
        b = filt.feed(b)
        # the clock starts at the first byte of the program's flood, not at the attach repaint
        # (the screen snapshot arrives ~0.5 s before: the program sleeps first, so the repaint
        # counted in would measure the sleep, not the byte path)
        if not counter["t0"]:
            if FLOOD_MARK not in b:
                return
            counter["t0"] = time.perf_counter()
            c0.update({k: sum(cpu_s(p) for p in v) for k, v in procs.items()})
            c0["client (this process)"] = time.process_time()
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
    kids = children(mgr.pid)  # the seat programs and the mirror worker
    def label(pid: int) -> str:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            return "gone"
        return "flood program" if b"FLOOD-END" in cmd else "mirror worker" if b"mirror" in cmd else "other child"
    by: dict[str, list[int]] = {}
    for k in kids:
        by.setdefault(label(k), []).append(k)
    procs.update({"manager": [mgr.pid], **{f"manager child: {k}": v for k, v in sorted(by.items())},
             "broker": [PIDS.get("broker", 0)]})
    try:
        await asyncio.wait_for(done.wait(), 120)
    except asyncio.TimeoutError:
        raise RuntimeError(f"{name}: no FLOOD-END after {counter['n']} bytes; tail {bytes(tail)!r}") from None
    wall = counter["t1"] - counter["t0"]
    cpu = {k: (sum(cpu_s(p) for p in procs[k]) - c0[k]) / wall for k in procs}
    cpu["client (this process)"] = (time.process_time() - c0["client (this process)"]) / wall
    CPU.append(cpu)
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
        if os.environ.get("ATTACH_PROFILE"):  # where the manager's time goes: cProfile, top rows
            import cProfile
            import pstats
            prof = cProfile.Profile()
            prof.runcall(asyncio.run, serve(sys.argv[2]))
            with open(os.environ["ATTACH_PROFILE"], "w") as f:
                pstats.Stats(prof, stream=f).sort_stats("tottime").print_stats(18)
            return
        asyncio.run(serve(sys.argv[2]))
        return
    load0 = os.getloadavg()
    b = Broker(name="cotal-bench").start()
    assert b.proc is not None
    PIDS["broker"] = b.proc.pid
    try:
        mesh = asyncio.run(mesh_figures(b.url))
        hops = hop_figures(b.url)
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
    print("share of a core per process during the mesh flood (median over rounds):")
    for k in CPU[0]:
        print(f"  {k:40}{statistics.median(c.get(k, 0.0) for c in CPU) * 100:8.1f} %")
    print(f"per hop, alone (MB/s; x = hop / raw pty read; {hops['_reads']} pty reads of median "
          f"{hops['_read_median']:.0f} B -> {hops['_frames']} frames of {hops['_frame_bytes']:.0f} B):")
    raw = hops["pty read (raw)"]
    for k, v in hops.items():
        if not k.startswith("_"):
            print(f"  {k:32}{v / 1e6:14.2f}{v / raw:13.2f}x")
    load1 = os.getloadavg()
    print(f"(n={N_KEYS} keystrokes, {ROUNDS} x flood {FLOOD_BYTES // (1024 * 1024)} MiB, window 64, loopback, "
          f"{os.cpu_count()} cpus, manager in its own process; load avg 1/5/15 min "
          f"{load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f} before, {load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f} after)")


if __name__ == "__main__":
    main()
