"""Cluster failover under a running team: SIGKILL the node ``cotal watch`` is connected to.

One scenario (module fixture) on a real 3-node cluster with R3 streams and KV, asserted on
by several tests: the JSON stream says ``reconnecting`` then ``connected``, the feed and
presence continue on a surviving node, no message id is printed twice, and the retained
history on the cluster still holds every message the watcher saw before the kill.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import time
import urllib.request
from dataclasses import dataclass, field

import nats
import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from cotal_tui.demo.broker import Cluster
from cotal_tui.demo.provision import provision_space
from cotal_tui.demo.team import Team, TeamSchedule
from support.watchproc import WatchProc

pytestmark = pytest.mark.slow  # a broker scenario over ~10 s

SPACE = "fo"


def _connz_names(monitor_port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{monitor_port}/connz?limit=1024",
                                timeout=2) as r:
        return [c.get("name", "") for c in json.loads(r.read()).get("connections", [])]


async def _retry(fn, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await fn()
        except Exception:  # noqa: BLE001 - a JS API timeout while leaders are elected
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def _read_ids(js, count: int, kind: str = "chat", stream: str = "CHAT") -> set[str]:
    ids: set[str] = set()
    psub = await js.pull_subscribe(f"cotal.{SPACE}.{kind}.>", stream=f"{stream}_{SPACE}",
                                   config=ConsumerConfig(ack_policy=AckPolicy.NONE,
                                                         deliver_policy=DeliverPolicy.ALL))
    try:
        left = count
        while left > 0:
            batch = await psub.fetch(min(500, left), timeout=5)
            for m in batch:
                ids.add(json.loads(m.data)["id"])
            left -= len(batch)
    finally:
        try:
            await psub.unsubscribe()
        except Exception:
            pass
    return ids


@dataclass
class Run:
    urls: list[str]
    killed: int = -1
    t_kill: float = 0.0
    t_reconnecting: float | None = None
    t_connected: float | None = None
    watch: WatchProc | None = None
    pre_kill_ids: set[str] = field(default_factory=set)
    stream_ids: set[str] = field(default_factory=set)
    dm_ids: set[str] = field(default_factory=set)
    stream_msgs_before: int = 0
    stream_msgs_after: int = 0
    backfill: WatchProc | None = None
    errors: list[str] = field(default_factory=list)


async def _scenario(c: Cluster) -> Run:
    run = Run(c.urls)
    nc = await nats.connect(servers=c.urls, max_reconnect_attempts=-1, reconnect_time_wait=0.2,
                            name="fo-team")
    team = None
    w = None
    try:
        await provision_space(nc, SPACE, replicas=3)
        team = Team(nc, SPACE, seed=5, agents=6, rate=40,
                    schedule=TeamSchedule(crash_after=None, restart_after=None,
                                          chat_interval=0.3))
        await team.start()
        w = run.watch = WatchProc.start("--json", "--server", ",".join(c.urls),
                                        "--space", SPACE)
        await w.wait_for(lambda: len(w.objs("message")) >= 40 and len(w.objs("presence")) >= 6,
                         30, "steady traffic before the kill")
        # which node holds the watcher's connection (client name set by meshview.link.connect)
        idx = None
        for i, n in enumerate(c.nodes):
            if "cotal-watch" in _connz_names(n.monitor_port):
                idx = i
        assert idx is not None, "the watcher is on no node"
        run.killed = idx
        js = nc.jetstream(timeout=5)
        run.stream_msgs_before = (await _retry(lambda: js.stream_info(f"CHAT_{SPACE}"))
                                  ).state.messages
        run.pre_kill_ids = {o["id"] for o in w.objs("message") if o.get("kind") == "channel"}
        run.t_kill = time.monotonic()
        c.nodes[idx].kill()  # SIGKILL

        def after(state: str, t: float):
            return next((at for at, s in w.states() if s == state and at >= t), None)

        run.t_reconnecting = await w.wait_for(lambda: after("reconnecting", run.t_kill), 20,
                                              "a reconnecting state line")
        run.t_connected = await w.wait_for(lambda: after("connected", run.t_reconnecting), 30,
                                           "a connected state line after reconnecting")
        t = run.t_connected
        await w.wait_for(lambda: len([ln for ln in w.lines_after(t) if ln.obj
                                      and ln.obj.get("type") == "message"]) >= 40,
                         30, "the feed continuing after failover")
        await w.wait_for(lambda: [ln for ln in w.lines_after(t) if ln.obj
                                  and ln.obj.get("type") == "presence"],
                         30, "presence continuing after failover")
        await team.stop(graceful=False)
        team = None
        # retained history on the surviving quorum (the JS API may time out while the
        # stream leaders settle after the kill: retry, and wait for in-flight async
        # publishes to land so the snapshot is final)
        last = -1
        for _ in range(40):
            info = await _retry(lambda: js.stream_info(f"CHAT_{SPACE}"))
            if info.state.messages == last:
                break
            last = info.state.messages
            await asyncio.sleep(0.5)
        run.stream_msgs_after = info.state.messages
        run.stream_ids = await _retry(lambda: _read_ids(js, info.state.messages))
        dm = await _retry(lambda: js.stream_info(f"DM_{SPACE}"))
        run.dm_ids = await _retry(lambda: _read_ids(js, dm.state.messages, "inst", "DM"))
        # a late joiner with backfill reads history through the observer's own path
        live = [u for i, u in enumerate(c.urls) if i != idx]
        b = run.backfill = WatchProc.start("--json", "--backfill", "20", "--server",
                                           ",".join(live), "--space", SPACE)
        await b.wait_for(lambda: len([o for o in b.objs("message") if o.get("historical")])
                         >= 20, 30, "historical rows from the backfill")
        b.stop()
    finally:
        if team is not None:
            await team.stop(graceful=False)
        if w is not None:
            w.stop()
        await nc.close()
    return run


@pytest.fixture(scope="module")
def failover():
    c = Cluster().start()
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as ex:
            run = ex.submit(asyncio.run, _scenario(c)).result(240)
        yield run
    finally:
        c.stop()


def test_reconnecting_then_connected(failover):
    r = failover
    assert r.t_reconnecting is not None and r.t_connected is not None
    assert r.t_kill <= r.t_reconnecting <= r.t_connected
    took = r.t_connected - r.t_kill
    print(f"\nfailover: killed node {r.killed}; reconnecting after "
          f"{r.t_reconnecting - r.t_kill:.2f}s, connected after {took:.2f}s")
    assert took < 15.0
    assert r.watch is not None
    assert r.watch.proc.returncode == 0
    assert "Traceback" not in r.watch.stderr_text


def test_no_duplicate_message_ids(failover):
    ids = [o["id"] for o in failover.watch.objs("message") if o.get("id")]
    dups = [i for i, n in collections.Counter(ids).items() if n > 1]
    assert not dups, dups[:10]


def test_history_intact_after_failover(failover):
    r = failover
    assert r.stream_msgs_after >= r.stream_msgs_before
    missing = r.pre_kill_ids - r.stream_ids
    assert not missing, f"{len(missing)} pre-kill messages not in the stream"


def test_backfill_after_failover(failover):
    b = failover.backfill
    hist = [o for o in b.objs("message") if o.get("historical")]
    assert hist
    known = failover.stream_ids | failover.dm_ids
    foreign = [o for o in hist if o["id"] not in known]
    assert not foreign, (len(foreign), len(hist), len(failover.stream_ids),
                         failover.stream_msgs_after, foreign[:2])
    assert len({o["id"] for o in hist}) == len(hist)
