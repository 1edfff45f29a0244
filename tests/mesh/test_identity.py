"""``--as`` never takes over a live peer's identity: against the real broker
with a live presence record of another writer, the sender is refused before anything is
published under that principal, and the operator's presence never overwrites or offlines a
record it did not write."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys

from conftest import until
from cotal_tui.cli.connection import target_from_args
from meshview.act.participant import IdentityTaken, Participant
from meshview.act.send import Send
from support.observer import Heartbeat, presence, put_presence

COTAL = [sys.executable, "-m", "cotal_tui.cli"]


def _target(broker, space):
    return target_from_args(argparse.Namespace(server=[broker.url], space=space))


class Wire:
    """Every publish routed on the space's subjects and its presence bucket (core taps)."""

    def __init__(self) -> None:
        self.msgs: list[tuple[str, dict]] = []

    async def start(self, nc, space: str) -> "Wire":
        async def cb(m) -> None:
            try:
                self.msgs.append((m.subject, json.loads(m.data)))
            except ValueError:
                pass

        await nc.subscribe(f"cotal.{space}.>", cb=cb)
        await nc.subscribe(f"$KV.cotal_presence_{space}.>", cb=cb)
        await nc.flush()
        return self

    def presence_of(self, key: str) -> list[dict]:
        return [b for s, b in self.msgs if s.endswith("." + key) and s.startswith("$KV.")]

    def sent_by(self, pid: str) -> list[dict]:
        return [b for s, b in self.msgs if not s.startswith("$KV.")
                and (b.get("from") or {}).get("id") == pid]


async def _fence(nc, wire: Wire, space: str) -> None:
    await nc.publish(f"cotal.{space}.trace.fence", b'{"fence": 1}')
    await until(lambda: any(s.endswith("trace.fence") for s, _ in wire.msgs), 5, "the fence")


async def test_a_live_agents_principal_is_refused_before_anything_is_published(broker, nc,
                                                                              space):
    hb = Heartbeat(nc, space)
    hb.add("ada", role="planner")
    await hb.beat()
    hb.start()
    wire = await Wire().start(nc, space)
    p = Participant(_target(broker, space), name="ada", roster=None)
    try:
        try:
            await p.send(Send("channel", "general", "hello from the impostor"))
            raise AssertionError("the send went out")
        except IdentityTaken as e:
            assert "local.ada is held by the agent ada" in str(e) and "\n" not in str(e)
        # refused again without a second start
        starts = p.starts
        try:
            await p.send(Send("channel", "general", "again"))
        except IdentityTaken:
            pass
        assert p.starts == starts
    finally:
        await p.close()
        await _fence(nc, wire, space)
        await hb.stop()
    assert wire.sent_by("local.ada") == []
    assert all(b["lifecycleUid"] == ("ada" * 26)[:26] for b in wire.presence_of("local.ada")[:])
    assert all(b["status"] != "offline" for b in wire.presence_of("local.ada"))


async def test_a_record_written_by_someone_else_later_is_never_overwritten_or_offlined(
        broker, nc, space):
    wire = await Wire().start(nc, space)
    p = Participant(_target(broker, space), name="zed", roster=None, heartbeat_s=0.2)
    await p.send(Send("channel", "general", "hi, I am zed"))
    assert p.active
    # another writer (an agent) now holds the key
    foreign = presence("zed", uid="f" * 26)
    hb = Heartbeat(nc, space, period=0.5)
    hb.recs["zed"] = {"uid": "f" * 26}
    await put_presence(nc, space, foreign)
    hb.start()
    try:
        await until(lambda: p.last_error and "held by the agent zed" in p.last_error, 10,
                    "the participant noticing")
        ours = len([b for b in wire.presence_of("local.zed") if b["lifecycleUid"] != "f" * 26])
        await p.close()
        await _fence(nc, wire, space)
    finally:
        await hb.stop()
    mine = [b for b in wire.presence_of("local.zed") if b["lifecycleUid"] != "f" * 26]
    assert len(mine) == ours and all(b["status"] != "offline" for b in mine)
    kv = await nc.jetstream().key_value(f"cotal_presence_{space}")
    rec = json.loads((await kv.get("local.zed")).value)
    assert rec["lifecycleUid"] == "f" * 26 and rec["status"] == "idle"


async def test_a_second_console_with_the_same_identity_is_refused(broker, nc, space):
    first = Participant(_target(broker, space), name="twin", roster=None)
    second = Participant(_target(broker, space), name="twin", roster=None)
    await first.send(Send("channel", "general", "one"))
    try:
        await second.send(Send("channel", "general", "two"))
        raise AssertionError("the second console took the identity over")
    except IdentityTaken as e:
        assert "held by another console twin" in str(e)
    finally:
        await second.close()
    assert first.active
    await first.close()


async def _cotal_send(broker, space, *argv: str) -> subprocess.CompletedProcess:
    cmd = COTAL + ["send", "--server", broker.url, "--space", space, "--connect-timeout", "2",
                   *argv]
    return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, timeout=60)


async def test_cotal_send_as_a_live_agent_or_its_normalised_name_exits_1(broker, nc, space):
    hb = Heartbeat(nc, space)
    hb.add("ada", role="planner")
    hb.add("ada_", role="planner")  # the principal `ada!` normalises to (actor_token)
    async with hb:
        for name, pid in (("ada", "local.ada"), ("ada!", "local.ada_")):
            r = await _cotal_send(broker, space, "--as", name, "#general", "hi")
            err = r.stderr.decode()
            assert r.returncode == 1, err
            assert err.count("\n") == 1 and f"{pid} is held by the agent" in err, err
        r = await _cotal_send(broker, space, "--as", "someone_free", "#general", "hi")
        assert r.returncode == 0, r.stderr
    info = await nc.jetstream().stream_info(f"CHAT_{space}")
    assert info.state.messages == 1  # only the free identity's post


async def test_a_look_alike_of_a_live_agent_is_refused_too(broker, nc, space):
    """``ada!`` is the principal local.ada_ (actor_token) — a different key, but it reads as the
    live agent ada on every roster: refused, named, nothing published (actor_fold)."""
    hb = Heartbeat(nc, space)
    hb.add("ada", role="planner")  # only the real ada is live
    async with hb:
        for name, pid in (("ada!", "local.ada_"), ("Ada", "local.Ada"), ("_ada_", "local._ada_")):
            r = await _cotal_send(broker, space, "--as", name, "#general", "hi")
            err = r.stderr.decode()
            assert r.returncode == 1, err
            assert err.count("\n") == 1 and f"{pid} would read as local.ada (the agent ada" in err
        r = await _cotal_send(broker, space, "--as", "adam", "#general", "hi")
        assert r.returncode == 0, r.stderr
    info = await nc.jetstream().stream_info(f"CHAT_{space}")
    assert info.state.messages == 1  # only the distinct identity's post


async def test_the_console_as_a_live_agent_stays_read_only(broker, nc, space):
    from cotal_tui.app import CotalApp
    from cotal_tui.cli.watch_console import session_options
    from cotal_tui.session import LiveSession
    from widgets.composer import Composer

    hb = Heartbeat(nc, space)
    hb.add("ada", role="planner")
    await hb.beat()
    hb.start()
    wire = await Wire().start(nc, space)
    args = argparse.Namespace(server=[broker.url], space=space, backfill=50, no_dms=False,
                              read_only=False, as_name="ada")
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: session.started and session.model.snapshot().agents,
                        what="the roster")
            for _ in range(2):
                await pilot.press("c")
                assert not app.screen.query_one(Composer).is_open
                assert "local.ada is held by the agent ada" in (app.last_notice or "")
                assert (app.last_notice or "").startswith("read-only - ")
            assert not session.operator.on_roster
        await session.stop()
        await _fence(nc, wire, space)
    finally:
        await hb.stop()
    assert wire.sent_by("local.ada") == []
    assert all(b["lifecycleUid"] == ("ada" * 26)[:26] for b in wire.presence_of("local.ada"))
