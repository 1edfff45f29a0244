"""Agents that crashed before the console started: their presence
keys had expired, so they never appeared. They are derived from what the space retains and
show as ``⨯ finn offline`` in the console's roster, in --plain and in --json. Real broker,
real observer, the real CLI."""

from __future__ import annotations

import argparse
import json

from conftest import until
from cotal_tui.cli.connection import target_from_args
from support.observer import Heartbeat, dm, post
from support.watchproc import WatchProc

from cotal_tui.cli.watch_console import session_options
from cotal_tui.session import LiveSession


async def departed_space(nc, space) -> Heartbeat:
    """ada is alive; finn (ops) talked and is gone with no presence key left (what a crash a
    minute ago leaves behind); rhea only DMed; the operator console is not an agent."""
    hb = Heartbeat(nc, space)
    hb.add("ada", role="planner")
    await hb.beat()
    hb.start()
    await post(nc, space, "finn", "general", "deploying v2", role="ops")
    await post(nc, space, "finn", "events.local.finn", "RUN_STARTED", role="ops")
    await dm(nc, space, "rhea", "ada", "ping")
    await post(nc, space, "desk", "general", "hello team", role="operator")
    await post(nc, space, "ada", "general", "on it", role="planner")
    return hb


async def test_the_console_roster_shows_a_departed_agent_offline(broker, nc, space):
    from support.console import screen_text

    from cotal_tui.app import CotalApp

    hb = await departed_space(nc, space)
    args = argparse.Namespace(server=[broker.url], space=space, backfill=0, no_dms=False)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: session.observer.started, what="observer started")
            await until(pilot, lambda: "finn/ops" in screen_text(app), what="finn on the roster")
            snap = session.model.snapshot()
            by = {p.name: p for p in snap.agents}
            assert by["finn"].status == "offline" and by["finn"].offline_reason == "absent"
            assert by["rhea"].status == "offline"
            assert by["ada"].status != "offline"
            assert "desk" not in by and all(p.name != "desk" for p in snap.endpoints)
            roster = [ln for ln in screen_text(app).splitlines() if "finn/ops" in ln]
            assert roster and "⨯ finn/ops" in roster[0], roster
            assert "offline · gone earlier" in screen_text(app)
            assert dict(snap.signals.counts)["offline"] == 2
            await pilot.press("q")
    finally:
        await session.stop()
        await hb.stop()


async def test_plain_and_json_print_the_departed_agent(broker, nc, space):
    hb = await departed_space(nc, space)
    js = WatchProc.start("--json", "--server", broker.url, "--space", space)
    plain = WatchProc.start("--plain", "--server", broker.url, "--space", space)
    try:
        got = await js.wait_for(lambda: [o for o in js.objs("presence") if o["name"] == "finn"],
                                20, "finn in --json")
        assert got[0]["event"] == "offline" and got[0]["status"] == "offline"
        assert got[0]["reason"] == "absent" and got[0]["role"] == "ops"
        assert type(got[0]["ts"]) is int and got[0]["ts"] > 0
        assert not [o for o in js.objs("presence") if o["name"] == "desk"]
        assert "Traceback" not in js.stderr_text and "Server may" not in js.stderr_text
        line = await plain.wait_for(
            lambda: next((ln for ln in plain.stdout_text.splitlines() if "finn/ops" in ln), None),
            20, "finn in --plain")
        assert " offline finn/ops ⨯ offline (gone before this watch started)" in line, line
    finally:
        assert js.stop() == 0 and plain.stop() == 0
        await hb.stop()
    assert all(json.loads(ln.raw) for ln in js.out)


async def test_an_active_lifecycle_head_without_presence_is_an_offline_agent(broker, nc, space):
    """Open mesh: the records' lifecycle head of a managed agent that still says ``active`` but
    has no presence (its manager died with it) shows it too, even if it never talked; a
    ``retired`` head does not."""
    from meshview.model.mesh import MeshModel
    from meshview.observe.observer import Observer, ObserverOptions
    from meshview.wire.names import bucket_names

    kv = await nc.jetstream().key_value(bucket_names(space).records)
    head = {"owner": "local", "actor": "kai", "lifecycleUid": "k" * 26,
            "managerInstance": "m" * 26, "processEpoch": 1}
    await kv.put("lifecycle.local.kai", json.dumps({**head, "state": "active"}).encode())
    await kv.put("lifecycle.local.old", json.dumps({**head, "actor": "old", "state": "retired"})
                 .encode())
    model = MeshModel(space, record_events=True)
    obs = Observer(nc, space, model, options=ObserverOptions(backfill=0))
    try:
        await obs.start()
        await until(lambda: any(p.name == "kai" for p in model.snapshot().agents), timeout=5)
        kai = next(p for p in model.snapshot().agents if p.name == "kai")
        assert kai.status == "offline" and kai.offline_reason == "absent" and kai.id == "local.kai"
        assert all(p.name != "old" for p in model.snapshot().peers)
    finally:
        await obs.stop()
