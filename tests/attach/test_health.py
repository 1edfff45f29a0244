"""Plane health on a real broker: every verdict carries its source and its age, and nothing that
did not answer THIS question is called healthy (the reference's health.ts / liveness.ts rules).

A demo manager and the stand-in delivery plane make an all-healthy mesh; then the delivery plane
stops answering (unbound, with the lease heartbeat's age), a manager's connection dies without a
goodbye (registered, nothing on its rail: not serving), something holds a dead manager's rail
without answering (registered-silent), and lying responders answer the delivery probe with
garbage, a flood of bytes, another plane, or ``bound`` with no lease behind it (each a named
rejection, never healthy).
"""

from __future__ import annotations

import json
import time

import nats
import pytest

from attach.control import health
from cotal_tui.demo.liveness import DeliveryStandIn
from meshview.link.connect import ConnectTarget
from meshview.wire import liveness as lw
from meshview.wire.endpoint import ANY_GENERATION, MANAGER, serve_filter
from meshview.wire.names import bucket_names
from support.managers import Managers


@pytest.fixture
async def managers(broker, space, tmp_path):
    ms = Managers(broker, space, tmp_path)
    yield ms
    await ms.stop()


@pytest.fixture
async def delivery(broker, space):
    c = await nats.connect(broker.url)
    d = DeliveryStandIn(c, space)
    await d.set_answering(True)
    yield d
    await d.stop()
    await c.close()


def target(broker, space) -> ConnectTarget:
    return ConnectTarget(servers=(broker.url,), space=space)


def by(verdicts, component):
    return [v for v in verdicts if v.component == component]


async def test_an_all_healthy_demo_mesh_is_healthy_with_sources_and_ages(broker, nc, space, managers, delivery):
    m = await managers.start("alice")
    vs = await health.components(nc, target(broker, space))
    assert [v.component for v in vs] == ["broker", "manager", "manager-plane", "delivery-plane"]
    assert all(v.healthy for v in vs), [v.as_json() for v in vs]
    (b,) = by(vs, "broker")
    assert b.facts["jetstream"] is True and b.facts["messageSchedules"] is True
    (mv,) = by(vs, "manager")
    assert (mv.name, mv.state, mv.source, mv.age_ms) == (m.instance_id, "serving", "responder-roundtrip", 0)
    (d,) = by(vs, "delivery-plane")
    assert (d.state, d.source, d.age_ms) == ("bound", "responder-roundtrip", 0)
    assert d.facts["leaseReady"] is True and d.facts["lastHeartbeatAgeMs"] is not None
    assert d.facts["lastHeartbeatSource"] == "lease-kv"
    (p,) = by(vs, "manager-plane")
    assert p.state == "bound" and p.facts["instance"] != m.instance_id  # opaque, never the identity


async def test_a_delivery_plane_that_stops_answering_is_unbound_with_its_heartbeat_age(nc, space, delivery):
    assert (await health.delivery_verdict(nc, space)).healthy
    await delivery.set_answering(False)
    v = await health.delivery_verdict(nc, space)
    assert not v.healthy
    assert (v.state, v.source, v.age_ms) == ("unbound", "broker-no-responders", 0)
    assert v.facts["lastHeartbeatAgeMs"] >= 0 and "last lease heartbeat" in v.detail
    assert v.disposition == "not-serving"  # its lease is still there: present, not serving
    await delivery.set_answering(True)
    assert (await health.delivery_verdict(nc, space)).state == "bound"  # the same probe flips back


async def test_no_delivery_plane_at_all_is_unbound_not_unknown_and_never_healthy(nc, space):
    v = await health.delivery_verdict(nc, space)
    assert (v.state, v.healthy, v.source) == ("unbound", False, "broker-no-responders")
    assert "leaseHolder" not in v.facts and v.disposition == "absent"


async def test_a_manager_killed_without_a_goodbye_is_not_serving_and_a_held_rail_is_registered_silent(
        broker, nc, space, managers):
    m = await managers.start("alice")
    own = managers.running[-1][1]
    managers.running.pop()  # its connection dies below: nothing stops it cleanly
    await own.close()  # the process is gone: its subscriptions with it, its registration stays
    (v,) = await health.manager_verdicts(nc, space, describe_ms=800)
    assert (v.name, v.state, v.healthy) == (m.instance_id, "not-serving", False)
    assert v.source == "broker-no-responders" and v.facts["registrationState"] == "ready"
    # something (a wedged process) holds its rail and never answers
    holder = await nats.connect(broker.url)
    try:
        for gen in (None, ANY_GENERATION):
            await holder.subscribe(serve_filter(space, "inst", MANAGER, m.instance_id, generation=gen))
        await holder.flush()
        (v,) = await health.manager_verdicts(nc, space, describe_ms=800)
        assert (v.state, v.healthy, v.age_ms, v.source) == ("registered-silent", False, None, "none")
        pv = await health.manager_plane_verdict(nc, space, timeout_ms=500)
        assert pv.state == "unbound" and not pv.healthy  # nothing answers the manager plane either
    finally:
        await holder.close()


@pytest.mark.parametrize("reply, code", [
    (b"not json", "liveness:malformed-json"),
    (b"x" * (lw.ANSWER_MAX_BYTES + 1), "liveness:oversize"),
    (lw.answer("manager", "bound"), "liveness:wrong-plane"),
    (b'{"plane":"delivery","responder":"healthy"}', "liveness:bad-state"),
    (b'{"plane":"delivery","responder":"bound","instance":7}', "liveness:bad-instance"),
    (lw.answer("delivery", "bound", "liar"), "liveness:unbacked"),  # no lease behind the claim
])
async def test_a_lying_responder_is_a_named_rejection_never_healthy(broker, nc, space, reply, code):
    liar = await nats.connect(broker.url)
    try:
        async def answer(msg):
            await liar.publish(msg.reply, reply)
        await liar.subscribe(lw.serve_filter(space, "delivery"), cb=answer)
        await liar.flush()
        v = await health.delivery_verdict(nc, space)
        assert (v.state, v.healthy, v.rejected, v.disposition) == ("unknown", False, code, "refused")
        assert v.age_ms is None and len(v.detail) < 400
    finally:
        await liar.close()


async def test_a_lease_stamped_in_the_future_is_a_clock_fault_not_fresh(broker, nc, space):
    kv = await nc.jetstream().key_value(bucket_names(space).delivery)
    await kv.put(lw.LEASE_KEY, json.dumps({"holder": "x", "since": int(time.time() * 1000) + 600_000,
                                           "ready": True}).encode())
    liar = await nats.connect(broker.url)
    try:
        async def answer(msg):
            await liar.publish(msg.reply, lw.answer("delivery", "bound"))
        await liar.subscribe(lw.serve_filter(space, "delivery"), cb=answer)
        await liar.flush()
        v = await health.delivery_verdict(nc, space)
        assert (v.state, v.rejected, v.age_ms) == ("unknown", "lease:clock-fault", None)
        assert v.facts["clockSkewMs"] > 500_000
    finally:
        await liar.close()


async def test_a_flood_of_replies_is_bounded_and_the_first_reply_decides(broker, nc, space, delivery):
    """A peer that answers every probe a thousand times over: the probe's subscription holds a
    bounded few and is gone after the first; the verdict comes from the real responder's lease."""
    flooder = await nats.connect(broker.url)
    try:
        async def flood(msg):
            for _ in range(1000):
                await flooder.publish(msg.reply, b"y" * 4096)
        await flooder.subscribe(lw.serve_filter(space, "delivery"), cb=flood)
        await flooder.flush()
        v = await health.delivery_verdict(nc, space)
        assert not v.healthy or v.state == "bound"  # the first reply won: either the liar (named) or the daemon
        if not v.healthy:
            assert v.rejected == "liveness:oversize"
        again = await health.manager_plane_verdict(nc, space, timeout_ms=500)  # the link still answers
        assert again.state == "unbound" and again.source == "broker-no-responders"
    finally:
        await flooder.close()


def test_the_responder_state_rule_only_no_responders_is_unbound():
    assert lw.responder_from_probe("noResponders") == "unbound"
    for outcome in ("timeout", "refused", "malformed"):
        assert lw.responder_from_probe(outcome) == "unknown"  # type: ignore[arg-type]
    assert lw.responder_from_probe("replied", "stale") == "stale"
    assert lw.responder_from_probe("replied") == "unknown"
    assert health.age_text(None) == "age unknown"


async def test_a_responder_refuses_to_answer_to_a_foreign_reply_subject(broker, nc, space, delivery):
    """A probe cannot point the answer at somebody else's inbox (§6.1 reply rail)."""
    got = []

    async def victim(m):
        got.append(m)
    sub = await nc.subscribe("victim.inbox", cb=victim)
    await nc.publish(lw.probe_subject(space, "delivery", "local", "someone"), b"", reply="victim.inbox")
    await nc.flush()
    ok = await health.delivery_verdict(nc, space)  # a proper probe afterwards is answered
    await nc.flush()
    assert ok.state == "bound" and got == []
    await sub.unsubscribe()


async def test_cotal_status_components_after_a_manager_is_killed_with_9(broker, nc, space, delivery, tmp_path):
    """The CLI on a mesh whose manager process got SIGKILL: its row says not serving, the JSON
    carries source and age for every row, and the exit status is the reference's 2 (present but
    not serving); healthy, it is 0."""
    import asyncio
    import os
    import subprocess
    import sys

    from support import manager_proc

    def status() -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": os.getcwd(), "COTAL_HOME": str(tmp_path / "home")}
        return subprocess.run([sys.executable, "-m", "cotal_tui", "status", "--components", "--json",
                               "--server", broker.url, "--space", space],
                              capture_output=True, text=True, timeout=60, env=env)

    proc, iid = await manager_proc.start(broker.url, space, str(tmp_path / "m"), "f1")
    try:
        ok = await asyncio.to_thread(status)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert json.loads(ok.stdout)["healthy"] is True
        proc.kill()  # SIGKILL: nothing deregisters
        await proc.wait()
        bad = await asyncio.to_thread(status)
    finally:
        await manager_proc.finish(proc)
    assert bad.returncode == 2, bad.stderr
    out = json.loads(bad.stdout)
    rows = {(r["component"], r["name"]): r for r in out["components"]}
    row = rows[("manager", iid)]
    assert (row["state"], row["healthy"], row["source"]) == ("not-serving", False, "broker-no-responders")
    assert rows[("manager-plane", "manager")]["state"] == "unbound"
    assert rows[("delivery-plane", "delivery")]["state"] == "bound"
    assert out["healthy"] is False and out["exit"] == 2
    assert (row["verdict"], rows[("manager-plane", "manager")]["verdict"]) == ("not-serving", "absent")
    assert all("source" in r and "ageMs" in r and "observedAt" in r for r in out["components"])


async def test_a_user_auth_demo_is_healthy_through_its_exchange_and_says_when_delivery_stops(tmp_path):
    """A user-auth demo (auth callout, exchange, IdP stand-in): the CLI acts as olivia through the
    exchange; every row is healthy, the exchange reachable; with the stand-in delivery plane told
    to stop answering, the delivery row is unbound and the exit status 2."""
    import asyncio
    import os
    import subprocess
    import sys

    from cotal_tui.demo.mesh import DemoMesh

    m = await asyncio.to_thread(lambda: DemoMesh(space="uh", agents=2, auth="user").start())

    def status() -> dict:
        env = {**os.environ, "PYTHONPATH": os.getcwd(), "COTAL_HOME": str(m.home_for_user)}
        r = subprocess.run([sys.executable, "-m", "cotal_tui", "status", "--components", "--json"],
                           capture_output=True, text=True, timeout=60, env=env)
        return {"rc": r.returncode, **json.loads(r.stdout)} if r.stdout else {"rc": r.returncode, "err": r.stderr}

    try:
        ok = await asyncio.to_thread(status)
        states = {c["component"]: c["state"] for c in ok["components"]}
        assert ok["rc"] == 0 and ok["healthy"], ok
        assert states == {"broker": "ok", "manager": "serving", "manager-plane": "bound",
                          "delivery-plane": "bound", "auth-exchange": "reachable"}
        await asyncio.to_thread(m.set_delivery, False)
        bad = await asyncio.to_thread(status)
        assert bad["rc"] == 2 and not bad["healthy"]  # the lease is still there: present, not serving
        (row,) = [c for c in bad["components"] if c["component"] == "delivery-plane"]
        assert (row["state"], row["source"], row["ageMs"]) == ("unbound", "broker-no-responders", 0)
        assert row["facts"]["lastHeartbeatSource"] == "lease-kv"
    finally:
        await asyncio.to_thread(m.stop)


async def test_a_demo_started_with_delivery_down_shows_it_unbound():
    """``cotal demo --delivery-down``: the stand-in delivery plane never answers, the rest is up."""
    import asyncio

    from cotal_tui.cli import build_parser  # the flag exists and reaches the mesh
    from cotal_tui.demo.mesh import DemoMesh

    args = build_parser().parse_args(["demo", "--delivery-down", "--headless"])
    assert args.delivery_down is True
    m = await asyncio.to_thread(lambda: DemoMesh(space="dd", agents=1, delivery_down=True).start())
    try:
        c = await nats.connect(m.url)
        try:
            vs = await health.components(c, ConnectTarget(servers=(m.url,), space="dd"))
        finally:
            await c.close()
        states = {v.component: v.state for v in vs}
        assert states == {"broker": "ok", "manager": "serving", "manager-plane": "bound", "delivery-plane": "unbound"}
    finally:
        await asyncio.to_thread(m.stop)


async def test_a_static_auth_demo_is_healthy_through_a_minted_control_instrument():
    """Static auth: the CLI mints its one-shot control instrument, which may ask the liveness
    probe as itself and read the delivery lease; every row is healthy."""
    import asyncio
    import os
    import subprocess
    import sys

    from cotal_tui.demo.mesh import DemoMesh

    m = await asyncio.to_thread(lambda: DemoMesh(space="sh", agents=1, auth="static").start())
    try:
        env = {**os.environ, "PYTHONPATH": os.getcwd(), "COTAL_HOME": str(m.home)}
        r = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "cotal_tui", "status", "--components",
                                                     "--json"], capture_output=True, text=True, timeout=60, env=env)
        out = json.loads(r.stdout)
        assert r.returncode == 0 and out["healthy"], r.stdout + r.stderr
        assert {c["component"]: c["state"] for c in out["components"]} == {
            "broker": "ok", "manager": "serving", "manager-plane": "bound", "delivery-plane": "bound"}
    finally:
        await asyncio.to_thread(m.stop)
