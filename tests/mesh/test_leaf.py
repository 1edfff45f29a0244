"""Scale-out on real NATS topology: a 3-node hub cluster and a leaf node that joins it.

The scripted team publishes on the hub (R3 streams and KV); ``cotal watch --json`` is connected
only to the leaf and must see the whole mesh — presence, channel messages and DMs — through the
leaf connection, and keep seeing it after the hub node holding the leaf connection is SIGKILLed
(the leaf re-solicits a surviving hub node; the watcher itself never reconnects).

JetStream stays on the hub. A leaf without JetStream does NOT get the hub's plain ``$JS.API.>``
(with nats-server 2.15 a request on the leaf gets "no responders"), so the documented way is
used: the hub names a JetStream domain (``hub``) and the leaf maps ``$JS.API.>`` onto
``$JS.hub.API.>``, so unmodified clients on the leaf reach the hub's JetStream
(see tests/support/leaf.py).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import time
from dataclasses import dataclass, field

import nats
import pytest

from cotal_tui.demo.provision import provision_space
from cotal_tui.demo.team import Team, TeamSchedule
from support.leaf import HUB_DOMAIN, HubAndLeaf
from support.watchproc import WatchProc
from conftest import until

pytestmark = pytest.mark.slow  # a hub + leaf scenario over ~10 s

SPACE = "lf"


@dataclass
class Run:
    before_kill: dict = field(default_factory=dict)
    after_kill: dict = field(default_factory=dict)
    killed: str = ""
    hub_after: str = ""
    t_kill: float = 0.0
    watch: WatchProc | None = None
    leaf_js_info: bytes = b""
    domain_js_info: bytes = b""
    plain_on_hub: bytes = b""
    errors: list[str] = field(default_factory=list)


def _counts(w: WatchProc, after: float = 0.0) -> dict:
    objs = [ln.obj for ln in w.lines_after(after) if ln.obj is not None]
    kinds = collections.Counter(o.get("kind") for o in objs if o.get("type") == "message")
    agents = {o.get("id") or o.get("agent") or o.get("name") for o in objs
              if o.get("type") == "presence"}
    return {"channel": kinds.get("channel", 0), "dm": kinds.get("dm", 0),
            "presence": len([o for o in objs if o.get("type") == "presence"]),
            "agents": len(agents - {None})}


async def _scenario(h: HubAndLeaf) -> Run:
    run = Run()
    assert h.leaf is not None
    await until(lambda: h.leaf.leafz(), 15, "the leaf connection to the hub")
    nc = await nats.connect(servers=h.hub_urls, max_reconnect_attempts=-1,
                            reconnect_time_wait=0.2, name="lf-team")
    team = None
    w = None
    try:
        await provision_space(nc, SPACE, replicas=3)
        # the JetStream API from the leaf: the mapped plain name and the domain name both reach
        # the hub; the plain name on the hub itself is the hub's own API
        lc = await nats.connect(h.leaf.url)
        run.leaf_js_info = (await lc.request("$JS.API.STREAM.NAMES", b"", timeout=5)).data
        run.domain_js_info = (await lc.request(f"$JS.{HUB_DOMAIN}.API.STREAM.NAMES", b"",
                                               timeout=5)).data
        await lc.close()
        run.plain_on_hub = (await nc.request("$JS.API.STREAM.NAMES", b"", timeout=5)).data
        team = Team(nc, SPACE, seed=7, agents=6, rate=40,
                    schedule=TeamSchedule(crash_after=None, restart_after=None,
                                          chat_interval=0.3))
        await team.start()
        w = run.watch = WatchProc.start("--json", "--server", h.leaf.url, "--space", SPACE)
        await w.wait_for(lambda: (c := _counts(w))["channel"] >= 30 and c["dm"] >= 1
                         and c["agents"] >= 6, 60, "channels, DMs and presence via the leaf")
        run.before_kill = _counts(w)
        # kill the hub node the leaf is connected to
        hub_name = h.leaf.leafz()[0].get("name", "")
        run.killed = hub_name
        idx = next(i for i, n in enumerate(h.nodes) if n.name == hub_name)
        run.t_kill = time.monotonic()
        h.nodes[idx].kill()
        await until(lambda: (lz := h.leaf.leafz()) and lz[0].get("name") != hub_name, 30,
                     "the leaf on a surviving hub node")
        run.hub_after = h.leaf.leafz()[0].get("name", "")
        t = run.t_kill
        await w.wait_for(lambda: (c := _counts(w, t))["channel"] >= 30 and c["presence"] >= 6,
                         60, "channels and presence continuing after the hub node's death")
        run.after_kill = _counts(w, t)
    finally:
        if team is not None:
            await team.stop(graceful=False)
        if w is not None:
            w.stop()
        await nc.close()
    return run


@pytest.fixture(scope="module")
def leafrun():
    h = HubAndLeaf().start()
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as ex:
            run = ex.submit(asyncio.run, _scenario(h)).result(240)
        yield run
    finally:
        h.stop()


def test_leaf_reaches_hub_jetstream(leafrun):
    for raw in (leafrun.leaf_js_info, leafrun.domain_js_info, leafrun.plain_on_hub):
        assert b"stream_names_response" in raw and f"CHAT_{SPACE}".encode() in raw, raw[:200]


def test_observer_on_leaf_sees_whole_mesh(leafrun):
    c = leafrun.before_kill
    assert c["channel"] >= 30 and c["dm"] >= 1 and c["agents"] >= 6, c


def test_observer_on_leaf_survives_hub_node_death(leafrun):
    r = leafrun
    assert r.hub_after and r.hub_after != r.killed
    assert r.after_kill["channel"] >= 30 and r.after_kill["presence"] >= 6, r.after_kill
    w = r.watch
    assert w is not None and w.proc.returncode == 0
    assert "Traceback" not in w.stderr_text
    # the watcher's own connection is to the leaf, which never went down
    assert not [s for at, s in w.states() if s == "reconnecting"]


def test_no_duplicate_message_ids_across_hub_failover(leafrun):
    ids = [o["id"] for o in leafrun.watch.objs("message") if o.get("id")]
    dups = [i for i, n in collections.Counter(ids).items() if n > 1]
    assert not dups, dups[:10]


def test_presence_rows_name_agents(leafrun):
    r = leafrun
    print(f"\nleaf: before kill {r.before_kill}; killed {r.killed}, leaf now on {r.hub_after}; "
          f"after {r.after_kill}")
    p = [o for o in r.watch.objs("presence")][:1]
    assert p and any(p[0].get(k) for k in ("id", "agent", "name")), p
