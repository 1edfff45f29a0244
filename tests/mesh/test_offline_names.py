"""Offline agents keep their names: a bare offline record (no name, as a harness may write on its
way out) leaves the name the principal's own presence gave it; a real rename still applies; another
principal's nameless record borrows nobody's name. Model through its
registered inputs, and end to end through ``cotal watch --plain`` on a real broker."""

from __future__ import annotations

import json

from meshview.model.mesh import MeshModel
from meshview.model.snapshot import PresenceRecord
from support.observer import now_ms, presence, put_presence
from support.watchproc import WatchProc


def test_a_nameless_offline_record_keeps_the_name():
    t = [1_000_000.0]
    m = MeshModel("s", clock=lambda: t[0])
    m.apply_presence(PresenceRecord(id="local.finn", name="finn", status="working", ts=t[0], role="ops"))
    m.end_initial_load()
    t[0] += 1000
    m.apply_presence(PresenceRecord(id="local.finn", name="", status="offline", ts=t[0]))
    snap = m.snapshot()
    p = snap.peers[0]
    assert p.status == "offline" and p.name == "finn"
    assert snap.name_of("local.finn") == "finn" and snap.labels.label("local.finn") == "finn"
    # back online, renamed by its own presence: the new name is shown
    t[0] += 1000
    m.apply_presence(PresenceRecord(id="local.finn", name="finnegan", status="idle", ts=t[0]))
    assert m.snapshot().name_of("local.finn") == "finnegan"
    # another principal's nameless record borrows nobody's name
    m.apply_presence(PresenceRecord(id="local.ghost", name="", status="offline", ts=t[0]))
    assert m.snapshot().name_of("local.ghost") == "local.ghost"


async def test_plain_stream_names_the_agent_that_left(broker, nc, space):
    w = WatchProc.start("--plain", "--server", broker.url, "--space", space)
    try:
        await w.wait_for(lambda: "watching space" in w.stderr_text, 20, "the stream up")
        await put_presence(nc, space, presence("finn", "working", role="ops"))
        await w.wait_for(lambda: "join    finn/ops" in w.stdout_text, 20, "finn joins")
        bare = presence("finn", "offline")
        bare["card"]["name"] = ""
        bare["ts"] = now_ms()
        kv = await nc.jetstream().key_value(f"cotal_presence_{space}")
        await kv.put("local.finn", json.dumps(bare).encode())
        line = await w.wait_for(lambda: [ln for ln in w.stdout_text.splitlines() if " offline " in ln],
                                20, "finn offline")
        assert "finn/ops" in line[0] and "local.finn" not in line[0], line
    finally:
        w.stop()
