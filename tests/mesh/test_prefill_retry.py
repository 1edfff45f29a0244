"""A start-up history read the cluster cannot answer (no quorum: two of three nodes down) is
asked again until it can: the console starts live, says why history is missing, and the
history arrives, and the warning goes, once the nodes are back (meshview/observe/observer.py,
``PREFILL_RETRY_S``)."""

from __future__ import annotations

import nats
import pytest

from cotal_tui.demo.broker import Cluster
from cotal_tui.demo.provision import provision_space
from meshview.link.connect import ConnectTarget, connect
from meshview.model.mesh import MeshModel
from meshview.observe.observer import Observer, ObserverOptions
from conftest import until
from support.observer import post

pytestmark = pytest.mark.slow  # a 3-node cluster, two nodes down and back

SPACE = "pre"


async def test_history_the_cluster_could_not_serve_at_start_arrives_when_it_can():
    c = Cluster().start()
    onc = nc = obs = None
    try:
        nc = await nats.connect(c.urls[0], name="pre-team")
        await provision_space(nc, SPACE, replicas=3)
        sent = [await post(nc, SPACE, "ada", "general", f"before {i}") for i in range(12)]
        await nc.close()
        nc = None
        # no quorum: node 0's JetStream cannot answer for the R3 stream. Stopped, not killed: a
        # SIGKILL can take the last writes the two had not flushed, and two such nodes are a
        # majority that elects a leader without them (the cluster then holds fewer than sent)
        c.nodes[1].stop(keep_store=True)
        c.nodes[2].stop(keep_store=True)

        onc, target = await connect(ConnectTarget((c.urls[0],), SPACE, timeout=3))
        model = MeshModel(SPACE)
        obs = Observer(onc, SPACE, model, options=ObserverOptions(backfill=20))
        await obs.start()
        assert (model.status.warning or "").startswith("history: ")
        assert not [e for e in model.snapshot().feed if e.historical]

        c.respawn_nodes(1, 2)
        await until(lambda: len([e for e in model.snapshot().feed if e.historical]) >= 12,
                    timeout=75, what=lambda: f"the history, once the cluster answers (warning: "
                                            f"{model.status.warning!r}, stored: "
                                            f"{[(i.name, i.retained) for i in model.snapshot().channels]})")
        got = {i for e in model.snapshot().feed for i in e.ids}
        assert {m["id"] for m in sent} <= got
        assert not (model.status.warning or "").startswith("history: ")
    finally:
        if obs is not None:
            await obs.stop()
        for x in (onc, nc):
            if x is not None:
                await x.close()
        c.stop()
