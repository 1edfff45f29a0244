"""The demo manager as a workflow-run host (cotal_tui/demo/runs.py) through the run client
(attach/control/runs.py), on a real broker with the contract tap holding every reply to revision 21:
a waiting checkpoint is listed and answered, the run completes; a second answer is the contract's
refusal; a deadline expires and the run fails; a held run is released, never failed; an open mesh
refuses the family by name; the journal is fenced and the records are where the contract says."""

from __future__ import annotations

import json

import nats
import pytest

from attach.control import runs as client
from attach.control.runs import RunsError
from conftest import until
from cotal_tui.demo.manager import DemoManager
from cotal_tui.demo.runs import PROGRAMS
from meshview.link.connect import ConnectTarget
from meshview.wire.names import bucket_names
from support.runhost import host  # noqa: F401 - the shared run-host fixture
from meshview.wire.runs import (
    admission_bucket,
    admission_key,
    answer_id,
    journal_stream,
    journal_subject,
    run_spec_key,
    run_status_key,
)


def target(broker, space: str) -> ConnectTarget:
    return ConnectTarget((broker.url,), space, timeout=3, role="control")


async def _only_run(t) -> str:
    rows = await client.run_ps(t)
    assert len(rows) == 1
    return rows[0].run_id


async def test_a_waiting_checkpoint_is_answered_and_the_run_completes(broker, space, host):
    t = target(broker, space)
    [row] = await client.run_ps(t)
    assert (row.display_state, row.epoch, row.instance) == ("running", 1, host.instance_id)
    st = await client.run_status(t, row.run_id)
    [pause] = st.pauses
    assert (pause.step_key, pause.kind, pause.prompt) == ("/checkpoint:approve#0", "checkpoint", "ship release 1.8?")
    assert pause.deadline_at is not None and pause.on_expiry == "fail"
    got = await client.run_answer(t, row.run_id, "/checkpoint:approve#0", "yes")
    assert len(got.answer_id) == 43 and got.settle["status"] == "resumed"
    st = await client.run_status(t, row.run_id)
    assert st.state == "completed" and st.pauses == ()
    assert [s.key for s in st.steps] == ["/step:build#0", "/checkpoint:approve#0", "/step:publish#0"]
    approve = st.step("/checkpoint:approve#0")
    assert approve.answer.value == "yes" and approve.answer.by.startswith("local.")
    # the answerId is the derived one: the answer record is keyed by it, under the pause's token
    assert got.answer_id == answer_id(got.token, approve.answer.by, "yes")
    records = await host.nc.jetstream().key_value(bucket_names(space).records)
    rec = json.loads((await records.get(f"answer.manager.{got.token}.{got.answer_id}")).value)
    assert rec["value"] == "yes" and "by" in rec
    # a second answer to the same step is the contract's refusal: no open checkpoint there
    with pytest.raises(RunsError) as e:
        await client.run_answer(t, row.run_id, "/checkpoint:approve#0", "yes")
    assert e.value.code == "not-found" and "no open checkpoint" in e.value.message
    # an amendment is offered on the answered step, and names what it supersedes
    amended = await client.run_answer(t, row.run_id, "/checkpoint:approve#0", "yes, 1.8.1", amend=True)
    assert amended.supersedes == got.answer_id and amended.settle is None
    st = await client.run_status(t, row.run_id)
    assert [a.supersedes for a in st.step("/checkpoint:approve#0").amendments] == [got.answer_id]


async def test_the_records_the_journal_and_its_fence(broker, space, host):
    t = target(broker, space)
    run_id = await _only_run(t)
    js = host.nc.jetstream()
    records = await js.key_value(bucket_names(space).records)
    spec = json.loads((await records.get(run_spec_key("manager", run_id))).value)
    status = json.loads((await records.get(run_status_key("manager", run_id))).value)
    assert spec["pins"]["languageVersion"] == 2 and status["state"] == "running"
    adm = await js.key_value(admission_bucket(space))
    a = json.loads((await adm.get(admission_key("manager", run_id))).value)
    assert (a["runId"], a["provenance"]["kind"]) == (run_id, "operator")
    info = await js.stream_info(journal_stream(space))
    assert info.config.allow_direct is False and not info.config.max_age
    # an append that does not carry the subject's last sequence is refused by the stream
    with pytest.raises(nats.js.errors.APIError):
        await js.publish(journal_subject(space, run_id), b"{}", stream=journal_stream(space),
                         headers={"Nats-Expected-Last-Subject-Sequence": "0"})
    assert status["journalHigh"] == len((await client.run_status(t, run_id)).journal) - 1


async def test_an_expired_deadline_fails_the_run_and_closes_the_pause(broker, space, host):
    t = target(broker, space)
    run_id = await host.run_host.start_bundled("expiring")
    assert [p.step_key for p in (await client.run_status(t, run_id)).pauses] == ["/checkpoint:confirm#0"]

    async def failed():
        return (await client.run_status(t, run_id)).state == "failed"

    await until(failed, timeout=10, what="the expiring run to fail on its deadline")
    st = await client.run_status(t, run_id)
    assert st.pauses == () and st.step("/checkpoint:confirm#0").outcome == "expired"
    with pytest.raises(RunsError) as e:
        await client.run_answer(t, run_id, "/checkpoint:confirm#0", "yes")
    assert e.value.code == "not-found"


async def test_a_held_run_is_released_never_failed_and_resume_holds_it_again(broker, space, host):
    t = target(broker, space)
    run_id = await host.run_host.start_bundled("held")
    row = next(r for r in await client.run_ps(t) if r.run_id == run_id)
    assert row.display_state == "released" and row.display_state != "failed"
    st = await client.run_status(t, run_id)
    assert st.step("/spawn:builder#0").status == "refused"
    assert await client.run_resume(t, run_id) == run_id
    row = next(r for r in await client.run_ps(t) if r.run_id == run_id)
    assert (row.display_state, row.epoch) == ("released", 2)


async def test_the_fan_out_asks_its_agent_once_per_lane(broker, space, host):
    t = target(broker, space)
    run_id = await host.run_host.start_bundled("fan-out")
    st = await client.run_status(t, run_id)
    assert [(p.kind, p.addressee) for p in st.pauses] == [("ask", "reviewer"), ("ask", "reviewer")]
    for p in st.pauses:
        await client.run_answer(t, run_id, p.step_key, {"ok": True})
    assert (await client.run_status(t, run_id)).state == "completed"


async def test_a_start_on_the_legacy_rail_and_an_unknown_program_are_refused(broker, space, host):
    from cotal_tui.demo.runs import program_of
    from meshview.wire.endpoint import Caller
    from meshview.wire.envelope import EndpointError

    who = Caller.fresh()
    source = PROGRAMS["release-checklist"].source
    with pytest.raises(EndpointError) as e:  # the host: a legacy arrival carries no binding
        await host.run_host.handle("run-start", who, {"source": source}, generation=None)
    assert e.value.code == "permission-denied"
    assert e.value.details == [{"kind": "ai.cotal.ep.unbound-caller-authority", "owner": who.owner,
                                "actor": who.actor, "uid": who.uid}]
    with pytest.raises(EndpointError) as e:
        program_of("print('hi')", "hi.cotal")
    d = e.value.details[0]
    assert e.value.code == "bad-request" and d["kind"] == "ai.cotal.lang.problem" and d["code"] == "L1000"
    assert all(name in d["cause"] for name in PROGRAMS) and d["where"]["file"] == "hi.cotal"
    # an issued caller's start is admitted with issued provenance and waits at its checkpoint
    started = await host.run_host.handle("run-start", who, {"source": source}, generation="a" * 32)
    st = await client.run_status(target(broker, space), started["runId"])
    assert [p.step_key for p in st.pauses] == ["/checkpoint:approve#0"]
    with pytest.raises(RunsError) as e:  # the client (no accepted row) refuses locally, by name
        await client.run_start(target(broker, space), source)
    assert e.value.code == "permission-denied" and "issued authority" in e.value.message
    with pytest.raises(RunsError) as e:
        await client.run_status(target(broker, space), "run-" + "0" * 32)
    assert e.value.code == "not-found"


async def test_a_restarted_manager_takes_its_waiting_run_back(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    try:
        m = DemoManager(c, space, [], root=str(tmp_path / "r"), run_mesh="static", boot_run="release-checklist")
        await m.start()
        t = target(broker, space)
        run_id = await _only_run(t)
        await m.stop()
        m2 = DemoManager(c, space, [], root=str(tmp_path / "r"), run_mesh="static")
        await m2.start()
        try:
            [row] = await client.run_ps(t)
            assert (row.run_id, row.display_state, row.epoch) == (run_id, "running", 2)
            await client.run_answer(t, run_id, "/checkpoint:approve#0", "yes")
            assert (await client.run_status(t, run_id)).state == "completed"
        finally:
            await m2.stop()
    finally:
        await c.close()


async def test_an_open_mesh_refuses_the_run_family_by_name(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    m = DemoManager(c, space, [], root=str(tmp_path / "o"), boot_run="release-checklist")  # open: no auth
    await m.start()
    try:
        for call in (client.run_ps(target(broker, space)),
                     client.run_status(target(broker, space), "run-" + "0" * 32)):
            with pytest.raises(RunsError) as e:
                await call
            assert e.value.code == "unimplemented" and "open mesh" in e.value.message
    finally:
        await m.stop()
        await c.close()


# ---- on the static-auth demo mesh (operator-mode nats-server) --------------------------------


@pytest.fixture(scope="module")
def static_mesh():
    from cotal_tui.demo.mesh import DemoMesh

    m = DemoMesh(space="runhost", agents=1, auth="static").start()
    yield m
    m.stop()


def static_target(mesh) -> ConnectTarget:
    # an infrastructure user of the space's account: the minted control instrument does not carry
    # the run-* request rows yet (meshview/link/auth.py)
    cred = mesh.trust.root_seed.mint("infra", None)
    return ConnectTarget((mesh.url,), mesh.space, timeout=3, role="control", mode="auth", credential=cred)


async def test_the_static_mesh_manager_hosts_runs_answered_once(static_mesh):
    run_id = static_mesh.call(static_mesh.mgr.run_host.start_bundled("release-checklist"))
    t = static_target(static_mesh)
    row = next(r for r in await client.run_ps(t) if r.run_id == run_id)
    assert row.display_state == "running" and row.instance == static_mesh.mgr.instance_id
    [pause] = (await client.run_status(t, run_id)).pauses
    assert pause.step_key == "/checkpoint:approve#0"
    got = await client.run_answer(t, run_id, pause.step_key, "yes")
    assert got.settle["settledAnswerId"] == got.answer_id
    assert (await client.run_status(t, run_id)).state == "completed"
    with pytest.raises(RunsError) as e:
        await client.run_answer(t, run_id, pause.step_key, "yes")
    assert e.value.code == "not-found"


async def test_a_revoked_run_reads_revoked_over_its_record_and_is_not_resumed(broker, space, host, tmp_path):
    from meshview.wire.runs import revocation_key

    t = target(broker, space)
    run_id = await _only_run(t)
    adm = await host.nc.jetstream().key_value(admission_bucket(space))
    await adm.create(revocation_key("manager", run_id), json.dumps(
        {"version": 1, "runId": run_id, "reason": "wrong release", "by": "ops", "revokedAt": 1}).encode())
    [row] = await client.run_ps(t)
    assert (row.state, row.display_state, row.revoked.reason) == ("running", "revoked", "wrong release")
    await host.stop()  # a successor does not take a revoked run back, and refuses to resume it
    m2 = DemoManager(host.nc, space, [], root=str(tmp_path / "m2"), run_mesh="static")
    await m2.start()
    try:
        assert m2.run_host.runs == {}
        with pytest.raises(RunsError) as e:
            await client.run_resume(t, run_id)
        assert e.value.code == "permission-denied" and "revoked by ops" in e.value.message
        [row] = await client.run_ps(t)
        assert (row.display_state, row.epoch) == ("revoked", 1)
    finally:
        await m2.stop()


async def test_two_concurrent_resumes_of_one_run_one_is_a_conflict(broker, space, host):
    import asyncio

    from meshview.wire.endpoint import Caller
    from meshview.wire.envelope import EndpointError

    run_id = await host.run_host.start_bundled("held")  # released: resumable
    who = Caller.fresh()
    got = await asyncio.gather(*(host.run_host.handle("run-resume", who, {"runId": run_id}) for _ in range(2)),
                               return_exceptions=True)
    refused = [g for g in got if isinstance(g, EndpointError)]
    assert got.count({"runId": run_id}) == 1 and [r.code for r in refused] == ["conflict"]
    row = next(r for r in await client.run_ps(target(broker, space)) if r.run_id == run_id)
    assert row.epoch == 2  # one activation, not two
