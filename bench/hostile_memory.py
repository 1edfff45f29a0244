"""Memory under a hostile peer: the console's RSS after ~1 GB of megabyte names, roles, ids,
ag-ui frames and presence cards, beside the same volume of plain text, in one run.

What is measured: a child process holding the observer and the MeshModel exactly as the
console holds them (``record_events`` off, the console's feed cap, glibc's mmap threshold
pinned as the CLI pins it). The console's own state above the model is bounded by the screen
(its strip and layout caches hold a few screens of rows), so the model is where a peer's bytes
could pile up; a headless Textual app would only add CPU on a shared machine and slow the
ingest. Each phase is a fresh child and a fresh broker space, fed the same number of bytes:

* ``hostile``: per four envelopes one each of: a 300 KB name + 200 KB role + 200 KB id +
  100 KB replyTo/contextId; an ag-ui frame whose 8 CUSTOM events carry 880 KB of fields the
  renderer never reads (its text is 8 short lines, so no text bound cuts it); 28k empty
  parts; and one presence card under a new key (open mode: anyone may write one) with a
  300 KB name, 300 KB activity and 300 KB of meta;
* ``plain``: the same count of 900 KB text messages (bounded per row since before issue 35).

The publisher is a raw socket (``tests/support/hostile.py``'s), paced by what the child has
applied, so nothing is dropped for a slow consumer. Printed: each phase's RSS at the end and
its peak, rows, roster size and cut count, and hostile/plain. Target: hostile RSS < 300 MB.

    .venv/bin/python bench/hostile_memory.py [--mb 1024]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

FRAME = 900 * 1024  # bytes per envelope: under the broker's 1 MiB max_payload


def _status_mb(pid: int | str, key: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


# -- the child: observer + model, as the console holds them --------------------------------

async def _child(url: str, space: str) -> None:
    from cotal_tui.cli.process import steady_malloc
    from meshview.connect import ConnectTarget, connect
    from meshview.model import MeshModel
    from meshview.observer import Observer, ObserverOptions

    steady_malloc()
    nc, target = await connect(ConnectTarget((url,), space, timeout=5))
    model = MeshModel(space)
    obs = Observer(nc, space, model, has_credential=target.has_credential,
                   options=ObserverOptions(backfill=0))
    await obs.start()
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    loop.add_reader(sys.stdin.fileno(),
                    lambda: stop.done() or (sys.stdin.readline() or stop.set_result(None)))
    while not stop.done():
        s = model.snapshot()
        general = next((c.arrivals for c in s.channels if c.name == "general"), 0)
        cuts = getattr(model, "cut_count", lambda: 0)()  # (0 on a build before the bounds)
        print(json.dumps({"rows": general, "peers": len(s.agents) + len(s.endpoints),
                          "cuts": cuts, "dropped": obs.dropped_total,
                          "rss": _status_mb("self", "VmRSS"),
                          "peak": _status_mb("self", "VmHWM")}), flush=True)
        await asyncio.sleep(0.25)
    await obs.stop()
    await nc.close()


# -- the traffic ------------------------------------------------------------------------------

def _env(space: str, mid: str, **kw) -> dict:
    return {"id": mid, "ts": int(time.time() * 1000), "space": space, "channel": "general",
            "from": {"id": "local.mallory", "name": "mallory"},
            "parts": [{"kind": "text", "text": "hi"}], **kw}


def hostile(space: str, i: int) -> tuple[bytes, bytes]:
    """Envelope ``i`` of the hostile mix (about :data:`FRAME` bytes each)."""
    subj = f"cotal.{space}.chat.local.mallory.general".encode()
    k = i % 4
    if k == 0:
        env = _env(space, f"{i:08d}" + "i" * 200_000, replyTo="r" * 100_000,
                   contextId="c" * 100_000)
        env["from"] = {"id": "local.mallory", "name": f"{i}" + "n" * 300_000,
                       "role": "r" * 200_000}
    elif k == 1:
        # a short fold ("• custom x", 8 lines) over 880 KB of fields nobody reads
        ev = [{"type": "CUSTOM", "name": "x", "value": {"junk": ["j" * 1000] * 110}}
              for _ in range(8)]
        env = _env(space, f"f{i}", parts=[{"kind": "ag-ui.frame", "events": ev}])
    elif k == 2:
        env = _env(space, f"p{i}", parts=[{"kind": "text", "text": ""}] * 28_000)
    else:
        pid = f"local.card{i:07d}"
        rec = {"card": {"id": pid, "name": "N" * 300_000, "kind": "agent",
                        "meta": {f"k{j}": "m" * 10_000 for j in range(30)}},
               "status": "working", "ts": int(time.time() * 1000), "lifecycleUid": "a" * 26,
               "activity": "A" * 300_000}
        from meshview.wire.names import bucket_names
        return (f"$KV.{bucket_names(space).presence}.{pid}".encode(),
                json.dumps(rec).encode())
    return subj, json.dumps(env).encode()


def plain(space: str, i: int) -> tuple[bytes, bytes]:
    env = _env(space, f"t{i}", parts=[{"kind": "text", "text": f"{i:08d}" + "T" * FRAME}])
    return f"cotal.{space}.chat.local.mallory.general".encode(), json.dumps(env).encode()


async def _provision(url: str, space: str) -> None:
    """Only the presence bucket: the observer's live tap carries the load, no stream
    stores it (as tests/fuzz/test_fuzz_memory.py)."""
    import nats
    from nats.js.api import KeyValueConfig

    from meshview.wire.names import bucket_names

    nc = await nats.connect(url)
    try:
        await nc.jetstream().create_key_value(KeyValueConfig(bucket_names(space).presence,
                                                             ttl=6))
    finally:
        await nc.close()


def run_phase(url: str, space: str, kind: str, mb: float, *, quiet: bool = False) -> dict:
    """Feed a fresh child ``mb`` MB of ``kind`` traffic; its last report, plus ``sent``."""
    from support.hostile import RawPublisher

    asyncio.run(_provision(url, space))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, __file__, "--child", url, space],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    make = hostile if kind == "hostile" else plain
    last: dict = {}
    try:
        assert child.stdout is not None and child.stdin is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("the child did not start")
        sent = msgs = 0
        n = int(mb * 2**20 / FRAME)
        t0 = time.monotonic()
        with RawPublisher.to(url) as pub:
            for i in range(n):
                subj, payload = make(space, i)
                pub.publish(subj, payload)
                sent += len(payload)
                msgs += not subj.startswith(b"$KV")
                if i % 16 == 15 or i == n - 1:
                    pub.flush()
                    while True:  # pace: the child applies what was sent before more goes
                        last = json.loads(child.stdout.readline())
                        if last["rows"] + last["dropped"] >= msgs - 8:
                            break
                    if not quiet and i % 256 == 255:
                        print(f"  {kind}: {sent / 2**20:.0f} MB, rss {last['rss']:.0f} MB",
                              flush=True)
        while last["rows"] + last["dropped"] < msgs:
            last = json.loads(child.stdout.readline())
        for _ in range(4):  # settle: a second of reports after the last row
            last = json.loads(child.stdout.readline())
        last["sent_mb"] = sent / 2**20
        last["seconds"] = time.monotonic() - t0
        return last
    finally:
        if child.stdin:
            child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=1024.0, help="MB of traffic per phase")
    ap.add_argument("--child", nargs=2, metavar=("URL", "SPACE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        asyncio.run(_child(*args.child))
        return
    from cotal_tui.demo.broker import Broker

    b = Broker(name="cotal-hostile-mem").start()
    try:
        out = {}
        for kind in ("plain", "hostile"):
            out[kind] = r = run_phase(b.url, f"mem{kind}", kind, args.mb)
            print(f"{kind:8s} sent {r['sent_mb']:.0f} MB in {r['seconds']:.0f} s: "
                  f"RSS {r['rss']:.0f} MB (peak {r['peak']:.0f}), messages {r['rows']}, "
                  f"roster {r['peers']}, cuts {r['cuts']}, dropped {r['dropped']}", flush=True)
        h, p = out["hostile"], out["plain"]
        verdict = "ok" if h["rss"] < 300 and h["peak"] < 300 else "OVER"
        print(f"hostile/plain RSS {h['rss'] / p['rss']:.2f}x, peak {h['peak'] / p['peak']:.2f}x; "
              f"target hostile < 300 MB: {verdict}")
    finally:
        b.stop()


if __name__ == "__main__":
    main()
