"""The control plane (attach/control.py) against real managers on the session broker: spawn,
stop (graceful, escalated, force), input, status, ps across two managers, delchan and purge."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest
from support.managers import Managers

from attach import control
from attach.control import ControlError
from conftest import until
from cotal_tui.demo.manager import PERSONAS, Persona
from meshview.connect import ConnectTarget, connect
from meshview.model import MeshModel
from meshview.observer import Observer, ObserverOptions
from meshview.wire.names import bucket_names
from support.observer import post

DEAD = ConnectTarget(("nats://127.0.0.1:1",), "nowhere", timeout=0.5)
STUBBORN = ("sh", "-c", "trap '' TERM HUP; echo stubborn up; while :; do sleep 0.2; done")


def target(broker, space: str) -> ConnectTarget:
    return ConnectTarget((broker.url,), space, timeout=3)


@pytest.fixture
async def managers(broker, space, tmp_path):
    ms = Managers(broker, space, tmp_path)
    yield ms
    await ms.stop()


async def observe(broker, space: str) -> tuple[Observer, MeshModel]:
    nc, t = await connect(ConnectTarget((broker.url,), space, timeout=3))
    model = MeshModel(space)
    obs = Observer(nc, space, model, has_credential=False, options=ObserverOptions(backfill=0))
    await obs.start()
    return obs, model


def peer(model: MeshModel, name: str):
    return next((p for p in model.snapshot().agents if p.name == name), None)


def one_sentence(msg: str) -> None:
    assert "\n" not in msg and msg.endswith("."), msg
    assert "Traceback" not in msg


async def test_two_managers_spawn_joins_the_roster_and_stop_removes_it(broker, space, managers):
    m1 = await managers.start("near")
    m2 = await managers.start()
    t = target(broker, space)
    obs, model = await observe(broker, space)
    try:
        said: list[str] = []
        w1 = await control.spawn(t, "echo", name="w1", on=m1.instance_id, progress=said.append)
        assert w1.joined and w1.instance_id == m1.instance_id and w1.name == "w1", w1
        assert said[0].startswith("spawning echo as w1 on manager " + m1.instance_id)
        assert "w1 joined the mesh" in said
        sh = await control.spawn(t, "bash", on=m2.instance_id)
        assert sh.joined and sh.name == "bash" and sh.instance_id == m2.instance_id
        any_ = await control.spawn(t, "echo")  # the class rail: whichever manager takes it
        assert any_.joined and any_.name == "echo" and any_.instance_id in (m1.instance_id, m2.instance_id)

        # presence: the spawned seats are on the roster, as agents with the persona's role
        p = await until(lambda: peer(model, "w1"), 10, "w1 on the roster")
        assert p.id == w1.principal and p.role == "echo" and p.status in ("idle", "working")
        assert p.lifecycle_uid == w1.lifecycle_uid
        await until(lambda: peer(model, "bash") and peer(model, "bash").status != "offline", 10, "bash")

        res = await control.ps(t)
        where = {(r.name, r.instance_id) for r in res.rows}
        assert {("near", m1.instance_id), ("w1", m1.instance_id), ("bash", m2.instance_id)} <= where
        assert [m.state for m in res.managers] == ["answered", "answered"]
        row = await control.status(t, "w1")
        assert row.instance_id == m1.instance_id and row.process == "running"
        assert control.status_line(row).startswith("w1/echo · echo-line · pty · running · mesh ")

        # graceful stop: the program ends on SIGHUP/SIGTERM; the seat leaves ps, presence offline
        r = await control.stop(t, "w1")
        assert (r.instance_id, r.force, r.graceful) == (m1.instance_id, False, True)
        assert "w1" not in m1.seats
        await until(lambda: peer(model, "w1").status == "offline", 10, "w1 offline")
        assert peer(model, "w1").offline_reason == "offline-record"
        # force: SIGKILL at once
        pid = m2.seats["bash"].pty.pid
        r = await control.stop(t, "bash", force=True)
        assert (r.instance_id, r.force, r.graceful) == (m2.instance_id, True, False)
        await until(lambda: peer(model, "bash").status == "offline", 10, "bash offline")
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        names = {r.name for r in (await control.ps(t)).rows}
        assert "w1" not in names and "bash" not in names and "near" in names
        # the name is free again, on either manager
        again = await control.spawn(t, "echo", name="w1", on=m2.instance_id)
        assert again.joined and again.lifecycle_uid != w1.lifecycle_uid
    finally:
        await obs.stop()
        await obs.nc.close()


async def test_a_graceful_stop_escalates_to_sigkill_after_the_grace(broker, space, managers):
    m = await managers.start(personas={**PERSONAS, "stubborn": Persona("line", "mule", "ignores TERM", STUBBORN)},
                             stop_grace_s=0.5)
    t = target(broker, space)
    r = await control.spawn(t, "stubborn")
    assert r.joined
    pid = m.seats["stubborn"].pty.pid
    t0 = time.monotonic()
    s = await control.stop(t, "stubborn")
    assert s.graceful is False and s.force is False  # it outlived the grace: killed
    assert time.monotonic() - t0 >= 0.5
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_input_reaches_the_pty(broker, space, managers):
    m = await managers.start()
    t = target(broker, space)
    assert (await control.spawn(t, "echo", name="typist")).joined
    screen = lambda: "\n".join(m.seats["typist"].pty.mirror.text_lines())  # noqa: E731
    r = await control.input_text(t, "typist", "hello there")
    assert (r.name, r.instance_id, r.bytes) == ("typist", m.instance_id, len("hello there") + 1)
    await until(lambda: "echo: hello there" in screen(), 10, "the echo of the typed line")
    # without Enter the text waits on the prompt line; the next input completes the line
    r = await control.input_text(t, "typist", "abc", enter=False)
    assert r.bytes == 3
    await until(lambda: "typist> abc" in screen(), 10, "staged text")
    assert "echo: abc" not in screen()
    await control.input_text(t, "typist", "def")
    await until(lambda: "echo: abcdef" in screen(), 10, "the completed line")


async def test_spawn_says_which_fact_settled_it(broker, space, managers):
    personas = {**PERSONAS, "crash": Persona("line", "crash", "exits at once", ("sh", "-c", "exit 3")),
                "mute": Persona("line", "mute", "never prints", ("sleep", "30"))}
    m = await managers.start(personas=personas, readiness_ms=800)
    t = target(broker, space)
    r = await control.spawn(t, "crash")
    assert (r.outcome, r.state, r.data.get("exitCode")) == ("exited", "failed", 3)
    r = await control.spawn(t, "mute")
    assert (r.outcome, r.state) == ("deadline", "uncertain")
    assert r.elapsed_s < 8
    # refusals: an unknown persona, a name already taken (one sentence each)
    with pytest.raises(ControlError) as e:
        await control.spawn(t, "nope")
    assert e.value.code == "failed-precondition" and ".cotal/agents/nope.md" in e.value.message
    one_sentence(e.value.message)
    assert (await control.spawn(t, "echo", name="dup")).joined
    with pytest.raises(ControlError) as e:
        await control.spawn(t, "echo", name="dup", on=m.instance_id)
    assert e.value.code == "failed-precondition" and 'agent "dup" already running' in e.value.message
    one_sentence(e.value.message)


async def test_refusals_before_the_network(broker):
    """Read-only and malformed arguments are refused by name without a connection (the target
    is a port nothing listens on, so any network use would fail differently)."""
    ro = "started with --read-only"
    for call in (lambda: control.spawn(DEAD, "echo", read_only=ro),
                 lambda: control.stop(DEAD, "w1", read_only=ro),
                 lambda: control.input_text(DEAD, "w1", "x", read_only=ro),
                 lambda: control.delchan(DEAD, "general", read_only=ro),
                 lambda: control.purge(DEAD, read_only=ro)):
        with pytest.raises(ControlError) as e:
            await asyncio.wait_for(call(), 0.2)
        assert e.value.code == "read-only"
        assert e.value.message == "read-only - started with --read-only; nothing was changed."
    for call in (lambda: control.spawn(DEAD, "echo", name="1bad"),
                 lambda: control.spawn(DEAD, "ec ho"),
                 lambda: control.stop(DEAD, "w1", on="4ik6rb0e"),
                 lambda: control.status(DEAD, ""),
                 lambda: control.status(DEAD, "x\x1b[2J"),
                 lambda: control.ps(DEAD, on="NOT-AN-ID"),
                 lambda: control.input_text(DEAD, "w1", ""),
                 lambda: control.input_text(DEAD, "w1", "x" * 65537),
                 lambda: control.delchan(DEAD, "team.*"),
                 lambda: control.delchan(DEAD, "#"),
                 lambda: control.delchan(DEAD, "bad name")):
        with pytest.raises(ControlError) as e:
            await asyncio.wait_for(call(), 0.2)
        assert e.value.code == "bad-request", e.value
        one_sentence(e.value.message)
        assert "\x1b" not in e.value.message
    with pytest.raises(ControlError) as e:  # and an unreachable broker is one sentence too
        await control.ps(DEAD)
    assert e.value.code == "unavailable"
    one_sentence(e.value.message)


async def test_targeted_verbs_name_what_is_missing(broker, space, managers):
    m1 = await managers.start("alpha")
    m2 = await managers.start("beta")
    t = target(broker, space)
    with pytest.raises(ControlError) as e:
        await control.stop(t, "nobody")
    assert e.value.code == "not-found"
    assert e.value.message == (f"no managed agent 'nobody' on any of the 2 answering manager(s) "
                               f"in space {space}.")
    with pytest.raises(ControlError) as e:
        await control.status(t, "alpha", on=m2.instance_id)  # pinned to the wrong host
    assert e.value.message == f"no managed agent 'alpha' on manager {m2.instance_id}."
    row = await control.status(t, "alpha", on=m1.instance_id)
    assert row.instance_id == m1.instance_id
    ghost = "a" * 26
    with pytest.raises(ControlError) as e:
        await control.ps(t, on=ghost)
    assert e.value.message == f"no manager instance {ghost} is registered in space {space}."
    with pytest.raises(ControlError) as e:
        await control.spawn(t, "echo", on=ghost)
    assert e.value.code == "not-found"


async def test_delchan_purges_one_channel_and_its_registry_entry(broker, nc, space):
    t = target(broker, space)
    for i in range(2):
        await post(nc, space, "ada", "doomed", f"doomed {i}")
    await post(nc, space, "ada", "doomed.sub", "a sub-channel survives")
    for i in range(3):
        await post(nc, space, "bram", "general", f"general {i}")
    kv = await nc.jetstream().key_value(bucket_names(space).channels)
    await kv.put("doomed", json.dumps({"description": "to be deleted"}).encode())
    await kv.put("general", json.dumps({"description": "stays"}).encode())

    assert await control.delchan(t, "#doomed") == 2
    js = nc.jetstream()
    info = await js.stream_info(f"CHAT_{space}", subjects_filter=">")
    left = info.state.subjects or {}
    assert not [s for s in left if s.endswith(".doomed")]
    assert left[f"cotal.{space}.chat.local.ada.doomed.sub"] == 1
    assert left[f"cotal.{space}.chat.local.bram.general"] == 3
    with pytest.raises(Exception):
        await kv.get("doomed")
    assert json.loads((await kv.get("general")).value) == {"description": "stays"}
    with pytest.raises(ControlError) as e:  # nothing left to delete
        await control.delchan(t, "doomed")
    assert e.value.code == "not-found"
    one_sentence(e.value.message)
    # purge: the whole chat history; registry entries stay
    assert await control.purge(t) == 4
    assert (await js.stream_info(f"CHAT_{space}")).state.messages == 0
    assert json.loads((await kv.get("general")).value) == {"description": "stays"}


async def test_ps_names_a_sigkilled_manager_and_keeps_the_others_rows(broker, space, managers, tmp_path):
    from support import manager_proc

    near = await managers.start("near")
    proc, far = await manager_proc.start(broker.url, space, str(tmp_path / "far"), "far")
    t = target(broker, space)
    try:
        res = await control.ps(t)
        assert {(r.name, r.instance_id) for r in res.rows} == {("near", near.instance_id), ("far", far)}
        proc.kill()  # a crashed host: nothing deregisters, the lease lingers up to its TTL
        await proc.wait()
        t0 = time.monotonic()
        res = await control.ps(t)
        took = time.monotonic() - t0
        assert [(r.name, r.instance_id) for r in res.rows] == [("near", near.instance_id)]
        [gone] = res.silent
        assert gone.instance_id == far and gone.liveness == "gone" and gone.stale
        assert gone.registration is not None and gone.registration.spec
        assert took < 3, f"a dead manager should not cost the whole deadline ({took:.1f}s)"
        # a seat that was on it is reported missing with the silent manager named
        with pytest.raises(ControlError) as e:
            await control.status(t, "far")
        assert e.value.message == (f"no managed agent 'far' on any of the 1 answering manager(s) in space "
                                   f"{space}; 1 registered manager(s) did not answer ({far}).")
    finally:
        await manager_proc.finish(proc)


async def test_ps_tells_a_wedged_manager_and_a_refusing_one_from_silence(broker, space, managers, tmp_path):
    """A stopped-but-connected host (SIGSTOP) holds its rail and says nothing: ``unknown``, not
    stale; a manager whose ps fails answers with an error, which is a refusal, never silence."""
    import signal

    from attach.seat_text import manager_line
    from support import manager_proc

    ok = await managers.start("fine")
    bad = await managers.start("hidden")

    async def broken(seat):
        raise RuntimeError("disk on fire")

    bad._row = broken
    proc, wedged = await manager_proc.start(broker.url, space, str(tmp_path / "w"), "stuck")
    t = target(broker, space)
    try:
        proc.send_signal(signal.SIGSTOP)
        res = await control.ps(t, deadline_ms=8000)
        assert [(r.name, r.instance_id) for r in res.rows] == [("fine", ok.instance_id)]
        states = {m.instance_id: (m.state, m.liveness, m.code) for m in res.managers}
        assert states == {ok.instance_id: ("answered", None, None),
                          bad.instance_id: ("refused", None, "internal"),
                          wedged: ("silent", "unknown", None)}
        [refused] = res.refused
        assert "disk on fire" in refused.message
        assert manager_line(refused, 8) == (f"manager {bad.instance_id}: refused ps (internal): "
                                            "RuntimeError: disk on fire")
        [silent] = res.silent
        assert not silent.stale
        assert manager_line(silent, 8) == (f"manager {wedged}: registered, no answer within the 8 s deadline "
                                           "(something holds its rail: alive but slow, or wedged)")
    finally:
        proc.send_signal(signal.SIGCONT)
        await manager_proc.finish(proc)
