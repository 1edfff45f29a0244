"""Operator send latency, measured side by side in one run on loopback.

A: ``Participant.send()`` - envelope from ``meshview.wire``, JetStream publish with
   ``Nats-Msg-Id``, denial watch, retry loop - until the agent's inbox subscription sees it.
B: a bare nats-py ``js.publish()`` of a pre-built envelope with its ``Nats-Msg-Id`` on the
   same subject shape, until the same kind of subscription sees it.

One message in flight at a time; A and B alternate so drift hits both. The agent is a core
subscription on its DM inbox (how an agent reads live) on its own connection. Prints p50 / p99
/ mean of send -> receipt, and send -> ack, for both, and the A/B ratios.

Usage: .venv/bin/python bench/send.py [--n 2000] [--warmup 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SPACE = "sendbench"


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


async def main(n: int, warmup: int) -> None:
    import nats

    from cotal_tui.demo.broker import Broker
    from cotal_tui.demo.provision import provision_space
    from meshview.link.connect import ConnectTarget
    from meshview.act.participant import Participant, RosterEntry
    from meshview.act.send import Send

    broker = Broker(name="cotal-sendbench").start()
    try:
        infra = await nats.connect(broker.url)
        await provision_space(infra, SPACE)
        agent = await nats.connect(broker.url, name="bench-agent")
        bare = await nats.connect(broker.url, name="bench-bare")
        bjs = bare.jetstream(timeout=5)
        waiting: dict[str, asyncio.Future] = {}

        async def on_msg(m) -> None:
            t = time.perf_counter()
            mid = (m.headers or {}).get("Nats-Msg-Id")
            f = waiting.pop(mid, None)
            if f is not None and not f.done():
                f.set_result(t)

        await agent.subscribe(f"cotal.{SPACE}.inst.local.bram.local.bare", cb=on_msg)
        await agent.flush()
        rows = [RosterEntry("local.bram", "bram", "agent")]
        p = Participant(ConnectTarget((broker.url,), SPACE), roster=lambda: rows, user="bench")
        await p.send(Send("dm", "bram", "warm the peer up"))  # the one start is not part of the figures

        loop = asyncio.get_running_loop()
        text = "please review PR 42 when you have a minute"
        a_rx: list[float] = []
        a_ack: list[float] = []
        b_rx: list[float] = []
        b_ack: list[float] = []
        subj = f"cotal.{SPACE}.inst.local.bram.local.bare"

        async def run_a(keep: bool) -> None:
            # dm() mints the id, so A's receipt is keyed by its own subscription (one in flight)
            fut = loop.create_future()
            t0 = time.perf_counter()
            waiting["__a__"] = fut
            sent = await p.send(Send("dm", "bram", text))
            t_ack = time.perf_counter()
            t_rx = await asyncio.wait_for(fut, 10)
            assert sent.seq > 0
            if keep:
                a_rx.append((t_rx - t0) * 1e3)
                a_ack.append((t_ack - t0) * 1e3)

        async def run_b(keep: bool) -> None:
            mid = str(uuid.uuid4())
            env = {"id": mid, "ts": int(time.time() * 1000), "space": SPACE,
                   "from": {"id": "local.bare", "name": "bare"}, "to": "local.bram",
                   "parts": [{"kind": "text", "text": text}]}
            data = json.dumps(env, separators=(",", ":")).encode()
            fut = loop.create_future()
            waiting[mid] = fut
            t0 = time.perf_counter()
            await bjs.publish(subj, data, headers={"Nats-Msg-Id": mid})
            t_ack = time.perf_counter()
            t_rx = await asyncio.wait_for(fut, 10)
            if keep:
                b_rx.append((t_rx - t0) * 1e3)
                b_ack.append((t_ack - t0) * 1e3)

        # A's receipt: every operator message to bram resolves the "__a__" waiter
        async def on_a(m) -> None:
            t = time.perf_counter()
            if m.subject.endswith(".local.bench_console"):
                f = waiting.pop("__a__", None)
                if f is not None and not f.done():
                    f.set_result(t)

        await agent.subscribe(f"cotal.{SPACE}.inst.local.bram.local.bench_console", cb=on_a)
        await agent.flush()

        for i in range(warmup + n):
            keep = i >= warmup
            if i % 2:
                await run_b(keep)
                await run_a(keep)
            else:
                await run_a(keep)
                await run_b(keep)

        def row(name: str, rx: list[float], ack: list[float]) -> str:
            return (f"{name:<28} receipt p50 {pct(rx, 50):6.3f} ms  p99 {pct(rx, 99):6.3f} ms  "
                    f"mean {statistics.fmean(rx):6.3f} ms   ack p50 {pct(ack, 50):6.3f} ms  "
                    f"p99 {pct(ack, 99):6.3f} ms")

        print(f"send -> agent receipt on loopback, {n} messages each, one in flight, "
              f"A/B alternating (nats-server {'.'.join(map(str, broker.version or ()))})")
        print(row("A  Participant.send()", a_rx, a_ack))
        print(row("B  bare js.publish()", b_rx, b_ack))
        print(f"ratio A/B receipt: p50 {pct(a_rx, 50) / pct(b_rx, 50):.2f}x  "
              f"p99 {pct(a_rx, 99) / pct(b_rx, 99):.2f}x")
        await p.close()
        for c in (agent, bare, infra):
            await c.close()
    finally:
        broker.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=100)
    a = ap.parse_args()
    asyncio.run(main(a.n, a.warmup))
