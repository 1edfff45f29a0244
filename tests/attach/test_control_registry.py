"""Which managers a ``ps`` expects, as the reference freezes it (digest §6): the registry's live
registrations only. An exited or escalated manager, a deregistered one whose lease lingers and an
instance that holds only a lease are never asked, never probed and never reported stale; every
silent slot is labelled by its probe; an empty expected set is ``failed-precondition``.

Each record here is written the way a reference manager writes it (spec, then a status with
``epoch``, ``state`` and ``observedSpecRevision``), next to one live demo manager."""

from __future__ import annotations

import json

import nats
import pytest

from attach.control import verbs as control
from attach.control.verbs import ControlError
from attach.control.managed import ManagedFold, PsPoller, registered_instances
from attach.control.registry import Registration, freeze, read_registry
from attach.control.seat_text import manager_line, render_ps
from cotal_tui.demo.manager import DemoManager, SeatSpec
from meshview.link.connect import ConnectTarget
from meshview.wire.names import bucket_names
from meshview.wire.outbound import mint_lifecycle_uid

SPEC = {"endpoint": "manager", "owner": "local", "protocol": {"v": 1},
        "clusterDigests": ["sha256:" + "0" * 64]}


async def register(nc, space: str, *, state: str | None, epoch: int = 1, behind: bool = False,
                   lease: bool = False, spec: bool = True) -> str:
    """One manager registration as a reference writes it; returns its instance id."""
    iid = mint_lifecycle_uid()
    js = nc.jetstream()
    b = bucket_names(space)
    records = await js.key_value(b.records)
    if spec:
        rev = await records.put(f"svc.manager.{iid}.spec", json.dumps(SPEC).encode())
        if state is not None:
            await records.put(f"svc.manager.{iid}.status", json.dumps(
                {"epoch": epoch, "state": state, "observedSpecRevision": rev - 1 if behind else rev}).encode())
    if lease:
        kv = await js.key_value(b.manager)
        await kv.put(f"lease.{iid}", json.dumps({"holder": "local.x", "runtime": "pty"}).encode())
    return iid


@pytest.fixture
async def live(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    m = DemoManager(c, space, [SeatSpec("near", "local.near")], root=str(tmp_path / "m"))
    await m.start()
    yield m
    await m.stop()
    await c.close()


async def test_only_live_registrations_are_expected(broker, nc, space, live):
    exited = await register(nc, space, state="exited")
    escalated = await register(nc, space, state="escalated")
    deregistered = await register(nc, space, state=None, spec=False, lease=True)  # clean stop; lease lingers
    lease_only = await register(nc, space, state=None, spec=False, lease=True)
    never = await register(nc, space, state=None)  # a spec that never converged
    behind = await register(nc, space, state="ready", behind=True)
    ready = await register(nc, space, state="ready")  # registered, host long gone

    regs = await read_registry(nc, space)
    reasons = {iid: regs[iid].skip_reason for iid in (exited, escalated, deregistered, lease_only, never, behind)}
    assert reasons == {exited: "exited", escalated: "escalated", deregistered: "lease-only",
                       lease_only: "lease-only", never: "never-converged", behind: "behind"}
    frozen = freeze(regs)
    assert set(frozen) == {live.instance_id, ready}
    slot = frozen[ready]
    assert (slot.epoch, slot.registration_revision) == (1, regs[ready].spec_revision)
    assert await registered_instances(nc, space) == {live.instance_id, ready}

    t = ConnectTarget((broker.url,), space, timeout=3)
    res = await control.ps(t, deadline_ms=1500)
    states = {m.instance_id: (m.state, m.liveness) for m in res.managers}
    # the exited, escalated, deregistered, lease-only, unconverged and lagging ones are not asked,
    # not probed and not called stale; the one registered "ready" with nothing on its rail is gone
    assert states == {live.instance_id: ("answered", None), ready: ("silent", "gone")}
    assert [r.instance_id for r in res.skipped] == [escalated]
    assert [(r.name, r.instance_id) for r in res.rows] == [("near", live.instance_id)]
    [gone] = res.silent
    assert manager_line(gone, 1.5).endswith(f"remove the record: cotal deregister-instance {ready}")

    import io

    out = io.StringIO()
    render_ps(res, 1.5, out)
    text = out.getvalue()
    assert f"manager {escalated}: escalated" in text
    assert exited not in text and lease_only not in text and deregistered not in text


async def test_an_empty_expected_set_is_a_failed_precondition(broker, nc, space):
    await register(nc, space, state="exited")
    await register(nc, space, state="escalated")
    t = ConnectTarget((broker.url,), space, timeout=3)
    with pytest.raises(ControlError) as e:
        await control.ps(t, deadline_ms=1000)
    assert e.value.code == "failed-precondition"
    assert e.value.message.startswith(f"no live manager is registered in space {space} (2 record(s): ")
    with pytest.raises(ControlError) as e:
        await control.spawn(t, "echo")
    assert e.value.code == "unavailable"


async def test_the_console_fold_drops_an_exited_manager_with_its_rows(broker, nc, space, live):
    """The poll asks the frozen set only: a manager whose status turns ``exited`` leaves the fold
    (its rows with it) instead of turning into a silent, stale-looking one."""
    fold = ManagedFold()
    poller = PsPoller(nc, space, fold, deadline_ms=1500)
    await poller.poll_once()
    assert set(fold.managers) == {live.instance_id}
    records = await nc.jetstream().key_value(bucket_names(space).records)
    spec = await records.get(f"svc.manager.{live.instance_id}.spec")
    await records.put(f"svc.manager.{live.instance_id}.status", json.dumps(
        {"epoch": live.epoch, "state": "exited", "observedSpecRevision": spec.revision}).encode())
    await poller.poll_once()
    assert fold.managers == {} and fold.silent_managers() == []


def test_registration_reasons_are_pure():
    iid = "a" * 26
    assert Registration(iid, 3, "ready", 2, 3).expected
    assert Registration(iid, 3, "ready", 2, 4).expected  # observed ahead is not "behind"
    assert Registration(iid, 3, "ready", None, 3).skip_reason == "never-converged"
    assert Registration(iid, None, lease=False).skip_reason == "deregistered"
    assert Registration(iid, 3, "stopping", 1, 3).expected  # any other token is not a skip


async def test_the_gather_classifies_every_reply_it_did_not_expect(broker, nc, space, live):
    """One scatter, four kinds of reply: the live manager's answer, an instance nobody froze
    (unexpected), the same instance again (duplicate), a frozen slot at another epoch (churn);
    the classified gather reports each, never drops one."""
    from attach.control.endpoint import EndpointClient
    from attach.control.scatter import scatter
    from meshview.wire.endpoint import parse_request, reply_subject, request_pattern
    from meshview.wire.envelope import reply_body

    moved = await register(nc, space, state="ready", epoch=1)  # frozen at epoch 1, answers at 2
    stranger = mint_lifecycle_uid()
    caller_nc = await nats.connect(broker.url)
    try:
        ep = EndpointClient(caller_nc, space)

        async def rogue(msg) -> None:
            req = parse_request(msg.subject)
            rid = json.loads(msg.data)["id"]
            for iid, epoch in ((stranger, 1), (stranger, 1), (moved, 2)):
                await nc.publish(reply_subject(space, "manager", iid, epoch, req.caller, req.nonce),
                                 reply_body(rid, data=[]))

        sub = await nc.subscribe(request_pattern(space, "manager", "ps", ep.caller, route="all"), cb=rogue)
        await nc.flush()
        frozen = freeze(await read_registry(nc, space))
        assert set(frozen) == {live.instance_id, moved}
        got = await scatter(ep, "ps", None, frozen, deadline_ms=3000)
        await sub.unsubscribe()
    finally:
        await caller_nc.close()
    assert set(got.answers) == {live.instance_id}
    strays = sorted((s.kind, s.reply.instance_id) for s in got.strays)
    assert strays == sorted([("unexpected", stranger), ("duplicate", stranger), ("churn", moved)])
    assert got.churned == {moved} and got.missing(frozen) == []


async def test_the_attach_locate_reads_live_leases_only_and_never_a_failed_read_as_none(broker, nc, space):
    """``locate``'s expected set: a live lease counts, a deleted one does not, no bucket is
    nobody, and a read that fails is ``unavailable`` — never "no manager is serving" (nats-py's
    ``kv.keys()`` watch could report no keys before the first arrived on a busy loop)."""
    from attach.session.client import live_instances
    from meshview.wire.envelope import EndpointError

    assert await live_instances(nc, space) == set()  # no lease bucket yet: nobody
    m = DemoManager(nc, space, [SeatSpec("alice", "local.alice")])
    await m.start()
    try:
        gone = await register(nc, space, state="ready", lease=True)
        await (await nc.jetstream().key_value(bucket_names(space).manager)).delete(f"lease.{gone}")
        assert await live_instances(nc, space) == {m.instance_id}
        closed = await nats.connect(broker.url)
        await closed.close()
        with pytest.raises(EndpointError) as e:
            await live_instances(closed, space)
        assert e.value.code == "unavailable" and "could not read the manager leases" in e.value.message
    finally:
        await m.stop()
    assert await live_instances(nc, space) == set()  # a stopped manager deletes its lease
