"""The console's skills adapter (ConsoleObserver) over the observer's heartbeat fast path:
a heartbeat keeps the skills without reading the record again; a new card replaces them."""

from __future__ import annotations

import json

from nats.aio.client import Client
from support.console import FixedClock, T0

from cotal_tui.session import ConsoleObserver
from meshview.observe.kvwatch import KvEntry
from meshview.model.mesh import MeshModel

KEY = "local.alice"


def record(ts: int, skills: list[str], status: str = "working") -> bytes:
    card = {"id": KEY, "name": "alice", "kind": "agent",
            "skills": [{"id": s, "name": s, "description": f"{s} work"} for s in skills]}
    return json.dumps({"card": card, "status": status, "ts": ts}).encode()


def test_skills_follow_the_card_and_heartbeats_do_not_reread_it(monkeypatch):
    clk = FixedClock(T0)
    obs = ConsoleObserver(Client(), "main", MeshModel("main", clock=clk))
    put = lambda raw: obs.feed_presence(KvEntry(KEY, raw, "PUT", 0))  # noqa: E731
    put(record(int(clk.t), ["lint"]))
    assert obs.skills[KEY] == [("lint", "lint work")]

    import cotal_tui.session as session
    reads = []
    real = session.msgspec.json.decode
    monkeypatch.setattr(session.msgspec.json, "decode",
                        lambda b, **kw: reads.append(b) or real(b, **kw))
    for _ in range(3):
        clk.advance(2000)
        put(record(int(clk.t), ["lint"]))  # heartbeats: the fast path, no read
    assert reads == [] and obs.model.peer(KEY).ts == clk.t

    clk.advance(2000)
    put(record(int(clk.t), ["lint"], status="idle"))  # a status change, same card
    put(record(int(clk.t) + 1, ["lint", "review"], status="idle"))  # a new card
    assert obs.skills[KEY] == [("lint", "lint work"), ("review", "review work")]
    put(record(int(clk.t) + 2, [], status="idle"))  # none left: none kept
    assert KEY not in obs.skills
