"""The operator's participant against a real broker: invisible until the first send, a presence
peer after it, every refusal before the network, byte-exact text, one shared start, a send
that survives a broker restart, and the demo team answering DMs and asks."""

from __future__ import annotations

import asyncio
import json
import re
import time

import jsonschema
import nats
import pytest

from conftest import VECTORS, until
from cotal_tui.demo.broker import Broker, free_port
from cotal_tui.demo.provision import provision_space
from cotal_tui.demo.team import Team, TeamSchedule
from meshview.link.connect import ConnectTarget, connect
from meshview.model.mesh import MeshModel
from meshview.observe.observer import Observer, ObserverOptions
from meshview.errors import PermissionDenied
from meshview.act.participant import (
    AmbiguousPeer,
    IdentityMismatch,
    NotAnAgent,
    Participant,
    ReadOnly,
    RosterEntry,
    StartRefused,
    UnknownPeer,
    resolve_identity,
)
from meshview.act.send import Original, Send
from meshview.wire.messages import CotalMessage
from meshview.wire.outbound import mentions_in, mint_lifecycle_uid
from support.authmesh import auth_mesh  # noqa: F401,F811  (fixture)

SCHEMA = json.loads((VECTORS / "cotal.schema.json").read_text())
QUIET = TeamSchedule(crash_after=None, restart_after=None, chat_interval=3600)
HOSTILE = ("\x1b[2J\x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\ "
           "\u202eevil\u202c \u2066iso\u2069 \x01\x02\x08\x7f\x9b31m \r\n\t \"q\" \\ "
           "\u200b\ufeff e\u0301 \U0001f600 \ud7ff")


def _valid(definition: str, obj: dict) -> None:
    v = jsonschema.Draft7Validator({"$ref": f"#/definitions/{definition}",
                                    "definitions": SCHEMA["definitions"]})
    errors = list(v.iter_errors(obj))
    assert not errors, (obj, errors[0].message)


class Probe:
    """A core subscription on ``cotal.>`` that records every publish the broker routes."""

    def __init__(self) -> None:
        self.msgs: list[tuple[str, bytes]] = []

    async def cb(self, m) -> None:
        self.msgs.append((m.subject, m.data))

    @classmethod
    async def on(cls, nc) -> "Probe":
        p = cls()
        await nc.subscribe("cotal.>", cb=p.cb)
        await nc.flush()
        return p

    async def fence(self, nc, space: str) -> None:
        """Publish a marker and wait for it: everything routed before it has arrived."""
        subj = f"cotal.{space}.trace.fence"
        n = sum(1 for s, _ in self.msgs if s == subj)
        await nc.publish(subj, b"{}")
        await until(lambda: sum(1 for s, _ in self.msgs if s == subj) > n, 5, "the fence")

    def real(self, space: str) -> list[tuple[str, bytes]]:
        return [(s, d) for s, d in self.msgs if s != f"cotal.{space}.trace.fence"]


async def presence_of(nc, space: str, key: str) -> dict | None:
    kv = await nc.jetstream().key_value(f"cotal_presence_{space}")
    try:
        e = await kv.get(key)
    except Exception:
        return None
    return json.loads(e.value) if e and e.value else None


def target(broker, space: str) -> ConnectTarget:
    return ConnectTarget((broker.url,), space, timeout=3)


# -- pure rules ------------------------------------------------------------------------------

def test_identity_rules(tmp_path):
    t = ConnectTarget(("nats://127.0.0.1:4222",), "main")
    ident = resolve_identity(t, user="ann.lee")
    assert (ident.id, ident.name) == ("local.ann_lee_console", "ann.lee-console")
    assert resolve_identity(t, "ops bot").id == "local.ops_bot"
    assert resolve_identity(t, "local.ops").id == "local.ops"
    with pytest.raises(ValueError):
        resolve_identity(t, "bad.dotted-name")


def test_mentions_and_uids():
    assert mentions_in("hey @Bram and @eve-2, mail a@b.com; thanks @bram.") == ["bram", "eve-2"]
    assert mentions_in("no mentions here") is None
    uids = {mint_lifecycle_uid() for _ in range(200)}
    assert len(uids) == 200 and all(re.fullmatch(r"[a-z0-9]{26,32}", u) for u in uids)


def test_dm_targets_are_vetted_without_the_network():
    rows = [RosterEntry("local.bram", "bram", "agent"), RosterEntry("local.obs", "watch", "endpoint"),
            RosterEntry("local.x1", "twin", "agent"), RosterEntry("local.x2", "twin", "agent")]
    p = Participant(ConnectTarget(("nats://127.0.0.1:1",), "main"), roster=lambda: rows, user="op")
    assert p.resolve_agent("@Bram") == "local.bram"
    with pytest.raises(NotAnAgent):
        p.resolve_agent("watch")
    with pytest.raises(NotAnAgent):
        p.resolve_agent("local.obs")
    with pytest.raises(AmbiguousPeer) as e:
        p.resolve_agent("twin")
    assert e.value.candidates == ["local.x1", "local.x2"]
    with pytest.raises(UnknownPeer):
        p.resolve_agent("nobody")
    assert p.resolve_agent("local.gone") == "local.gone"  # left the roster: still has an inbox
    assert p.nc is None and p.starts == 0


# -- presence peer -----------------------------------------------------------------------------

async def test_invisible_until_first_send_then_operator_endpoint(broker, nc, space):
    probe = await Probe.on(nc)
    p = Participant(target(broker, space), user="op")
    try:
        await probe.fence(nc, space)
        assert p.nc is None and not p.active
        assert await presence_of(nc, space, p.id) is None
        assert probe.real(space) == []

        sent = await p.send(Send("channel", "#general", "hello @bram and @Eve"))
        rec = await presence_of(nc, space, p.id)
        assert rec is not None
        assert rec["card"]["kind"] == "endpoint" and rec["card"]["role"] == "operator"
        assert rec["card"]["id"] == p.id == "local.op_console" and rec["status"] == "idle"
        assert len(rec["lifecycleUid"]) >= 26
        _valid("Presence", rec)
        await probe.fence(nc, space)
        [(subj, data)] = probe.real(space)
        assert subj == f"cotal.{space}.chat.local.op_console.general"
        env = json.loads(data)
        _valid("CotalMessage", env)
        assert env["id"] == sent.id and env["mentions"] == ["bram", "eve"]
        assert env["from"] == {"id": p.id, "name": "op-console", "role": "operator"}
        # the JetStream copy carries Nats-Msg-Id = id: a republish is a duplicate
        ack = await nc.jetstream().publish(subj, data, headers={"Nats-Msg-Id": sent.id})
        assert ack.duplicate and ack.seq == sent.seq

        first = rec["ts"]
        newer = await until(lambda: presence_of(nc, space, p.id), 5, "a heartbeat")
        await until(lambda: _newer(nc, space, p.id, first), 5, "a newer heartbeat")
        assert newer["lifecycleUid"] == rec["lifecycleUid"]
    finally:
        await p.close()


async def _newer(nc, space, key, ts) -> bool:
    rec = await presence_of(nc, space, key)
    return rec is not None and rec["ts"] > ts and rec["status"] != "offline"


async def test_offline_record_within_a_heartbeat_of_close(broker, nc, space):
    p = Participant(target(broker, space), user="op")
    await p.send(Send("ask", "reviewer", "anyone?"))
    uid = (await presence_of(nc, space, p.id))["lifecycleUid"]
    t0 = time.monotonic()
    await p.close()
    rec = await until(lambda: _offline(nc, space, p.id), 2.0, "the offline record")
    assert time.monotonic() - t0 < 2.0
    assert rec["lifecycleUid"] == uid and "statusSince" not in rec
    _valid("Presence", rec)
    with pytest.raises(Exception, match="closed"):
        await p.send(Send("channel", "general", "after close"))


async def _offline(nc, space, key):
    rec = await presence_of(nc, space, key)
    return rec if rec and rec["status"] == "offline" else None


# -- refusals before the network -------------------------------------------------------------

async def test_dm_to_an_endpoint_is_refused_before_anything(broker, nc, space):
    probe = await Probe.on(nc)
    rows = [RosterEntry("local.dash", "dash", "endpoint"), RosterEntry("local.bram", "bram", "agent")]
    p = Participant(target(broker, space), roster=lambda: rows, user="op")
    try:
        with pytest.raises(NotAnAgent, match="endpoint"):
            await p.send(Send("dm", "dash", "hello dashboard"))
        with pytest.raises(NotAnAgent):
            await p.send(Send("dm", "local.dash", "by id too"))
        await probe.fence(nc, space)
        assert probe.real(space) == []
        assert p.nc is None and p.starts == 0 and not p.active
        assert await presence_of(nc, space, p.id) is None
    finally:
        await p.close()


async def test_read_only_sends_publish_nothing(broker, nc, space):
    probe = await Probe.on(nc)
    rows = [RosterEntry("local.bram", "bram", "agent")]
    p = Participant(target(broker, space), read_only=True, roster=lambda: rows, user="op")
    original = CotalMessage(id="m1", ts=1, space=space, from_=p.ref, channel="general")
    for send in (lambda: p.send(Send("channel", "general", "x")),
                 lambda: p.send(Send("dm", "bram", "x")),
                 lambda: p.send(Send("ask", "reviewer", "x")),
                 lambda: p.send(Send("reply", None, "x"), Original.of(original))):
        with pytest.raises(ReadOnly) as e:
            await send()
        assert str(e.value).startswith("read-only - ")
    await probe.fence(nc, space)
    assert probe.real(space) == [] and p.nc is None and p.starts == 0
    assert await presence_of(nc, space, p.id) is None
    await p.close()


async def test_identity_mismatch_fails_before_publish(auth_mesh):
    t = ConnectTarget((auth_mesh.url,), auth_mesh.space, creds=str(auth_mesh.creds("agent")), timeout=3)
    p = Participant(t, name="local.someone_else")
    with pytest.raises(IdentityMismatch):
        await p.send(Send("channel", "general", "x"))
    assert p.nc is None
    await p.close()


async def test_permission_denied_is_named_and_quick(auth_mesh):
    t = ConnectTarget((auth_mesh.url,), auth_mesh.space, creds=str(auth_mesh.creds("agent")), timeout=3)
    p = Participant(t, name="agent-op")
    try:
        assert p.id == auth_mesh.principal("agent")  # SPEC §2: the credential's principal
        ok = await p.send(Send("channel", "general", "allowed"))
        assert ok.seq > 0 and p.active
        t0 = time.monotonic()
        with pytest.raises(PermissionDenied, match="permission denied") as e:
            await p.send(Send("channel", "secret", "not allowed"))
        assert time.monotonic() - t0 < 1.5  # the async violation, not a timeout
        assert "\n" not in str(e.value)
    finally:
        await p.close()


# -- what is published -------------------------------------------------------------------------

async def test_hostile_text_is_published_byte_exact(broker, nc, space):
    probe = await Probe.on(nc)
    rows = [RosterEntry("local.bram", "bram", "agent")]
    p = Participant(target(broker, space), roster=lambda: rows, user="op")
    try:
        a = await p.send(Send("channel", "general", HOSTILE))
        b = await p.send(Send("dm", "bram", HOSTILE))
        await probe.fence(nc, space)
        got = {json.loads(d)["id"]: d for s, d in probe.real(space)}
        for sent in (a, b):
            assert got[sent.id] == sent.payload
            assert json.loads(got[sent.id])["parts"] == [{"kind": "text", "text": HOSTILE}]
        stored = await nc.jetstream().get_msg(f"CHAT_{space}", a.seq)
        assert json.loads(stored.data)["parts"][0]["text"] == HOSTILE
    finally:
        await p.close()


async def test_concurrent_sends_share_one_start(broker, nc, space):
    probe = await Probe.on(nc)
    p = Participant(target(broker, space), user="op")
    try:
        sent = await asyncio.gather(*(p.send(Send("channel", "general", f"m{i}"))
                                      for i in range(6)),
                                    p.send(Send("ask", "reviewer", "and an ask")))
        assert p.starts == 1 and len({s.id for s in sent}) == 7
        await probe.fence(nc, space)
        assert sorted(json.loads(d)["id"] for _, d in probe.real(space)) == sorted(s.id for s in sent)
    finally:
        await p.close()


async def test_refused_start_withholds_sends_and_a_later_send_retries():
    port = free_port()
    p = Participant(ConnectTarget((f"nats://127.0.0.1:{port}",), "late", timeout=1), user="op")
    results = await asyncio.gather(p.send(Send("channel", "general", "one")),
                                   p.send(Send("channel", "general", "two")),
                                   return_exceptions=True)
    assert all(isinstance(r, StartRefused) for r in results), results
    assert p.starts == 1 and not p.active
    msg = str(results[0])
    assert msg.count(".") >= 1 and "\n" not in msg and "Traceback" not in msg
    b = Broker(port=port, name="cotal-late").start()
    try:
        nc = await nats.connect(b.url)
        await provision_space(nc, "late")
        probe = await Probe.on(nc)
        sent = await p.send(Send("channel", "general", "three"))
        assert p.starts == 2 and p.active
        await probe.fence(nc, "late")
        assert [json.loads(d)["id"] for _, d in probe.real("late")] == [sent.id]
        assert (await nc.jetstream().stream_info("CHAT_late")).state.messages == 1
        await p.close()
        await nc.close()
    finally:
        b.stop()


async def test_send_survives_a_broker_restart(fresh_broker):
    b = fresh_broker
    nc = await nats.connect(b.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    await provision_space(nc, "rs")
    await nc.close()
    rows = [RosterEntry("local.bram", "bram", "agent")]
    p = Participant(ConnectTarget((b.url,), "rs", timeout=3), roster=lambda: rows, user="op")
    try:
        await p.send(Send("channel", "general", "before"))
        b.stop(keep_store=True)
        await until(lambda: not p.connected, 10, "the participant to notice the outage")
        n = p.attempts
        send = asyncio.create_task(p.send(Send("dm", "bram", "sent while the broker was down")))
        # the broker stays away until the send has been retried: two copies are in flight
        await until(lambda: p.attempts >= n + 2, 15, "a retry during the outage")
        assert not send.done()
        t_restart = time.time() * 1000
        await asyncio.to_thread(b.start)
        sent = await asyncio.wait_for(send, 30)
        nc = await nats.connect(b.url)
        info = await nc.jetstream().stream_info("DM_rs")
        assert info.state.messages == 1  # published once, whatever the retries
        stored = await nc.jetstream().get_msg("DM_rs", sent.seq)
        assert json.loads(stored.data)["id"] == sent.id
        # the peer heartbeats again after the restart
        await until(lambda: _newer(nc, "rs", p.id, t_restart), 10, "a heartbeat after restart")
        await nc.close()
    finally:
        await p.close()


# -- the demo team answers ---------------------------------------------------------------------

async def test_dm_round_trip_with_the_demo_team(broker, nc, space):
    team = Team(nc, space, seed=4, schedule=QUIET, answer_delay_s=0.05)
    await team.start()
    onc, tgt = await connect(ConnectTarget((broker.url,), space, timeout=3))
    model = MeshModel(space)
    obs = Observer(onc, space, model, has_credential=False, options=ObserverOptions(backfill=0))
    await obs.start()
    p = Participant(target(broker, space), roster=lambda: model.snapshot().peers, user="op")
    try:
        bram = team.by_name("bram")
        await team.pose(bram, "waiting", "blocked",
                        {"code": "input", "source": "harness", "since": int(time.time() * 1000),
                         "message": "which branch should the hotfix target?"},
                        int(time.time() * 1000))
        await until(lambda: [n for n in model.snapshot().signals.needs_you if n.name == "bram"],
                    10, "bram in NEEDS-YOU")

        sent = await p.send(Send("dm", "bram", "target release/1.8"))
        answer = await until(lambda: [a for a in team.answers if a["reply_to"] == sent.id], 10,
                             "bram's answer")
        assert answer[0]["by"] == "bram" and answer[0]["unblocked"]
        # the DM lens shows both sides of the thread, and NEEDS-YOU clears
        thread = await until(lambda: len(model.snapshot().dm_thread(p.id, bram.id)) >= 2 and
                             model.snapshot().dm_thread(p.id, bram.id), 10, "both sides")
        assert [m.from_id for m in thread] == [p.id, bram.id]
        await until(lambda: not [n for n in model.snapshot().signals.needs_you
                                 if n.name == "bram"], 10, "NEEDS-YOU to clear")
        rec = await presence_of(nc, space, bram.id)
        assert rec["status"] == "working" and "condition" not in rec
        # the reply is threaded: replyTo = our message, contextId = its thread
        stored = await nc.jetstream().get_msg(f"DM_{space}", (await nc.jetstream().stream_info(
            f"DM_{space}")).state.last_seq)
        reply = json.loads(stored.data)
        assert reply["replyTo"] == sent.id and reply["contextId"] == sent.id
        assert reply["to"] == p.id and reply["from"]["id"] == bram.id
        _valid("CotalMessage", reply)
        # the operator shows on the roster as an endpoint with role operator
        me = [e for e in model.snapshot().endpoints if e.id == p.id]
        assert me and me[0].role == "operator"
    finally:
        await p.close()
        await obs.stop()
        await onc.close()
        await team.stop()


async def test_anycast_reaches_exactly_one_agent(broker, nc, space):
    team = Team(nc, space, seed=5, schedule=QUIET, answer_delay_s=0.05)
    await team.start()
    p = Participant(target(broker, space), user="op")
    probe = await Probe.on(nc)
    try:
        reviewers = {a.name for a in team.members if a.role == "reviewer"}
        assert len(reviewers) == 2
        sent = await p.send(Send("ask", "reviewer", "please review PR 42"))
        ans = await until(lambda: [a for a in team.answers if a["reply_to"] == sent.id], 10,
                          "an answer")
        assert ans[0]["by"] in reviewers and ans[0]["kind"] == "anycast"
        js = nc.jetstream()
        ci = await until(lambda: _settled(js, space), 10, "the ask to be acked")
        assert ci.num_redelivered == 0 and ci.num_ack_pending == 0
        assert (await js.stream_info(f"TASK_{space}")).state.messages == 0  # taken once
        await probe.fence(nc, space)
        replies = [json.loads(d) for s, d in probe.real(space)
                   if s.split(".")[2] == "inst" and json.loads(d).get("replyTo") == sent.id]
        assert len(replies) == 1 and replies[0]["to"] == p.id
        assert [a for a in team.answers if a["reply_to"] == sent.id] == ans
    finally:
        await p.close()
        await team.stop()


async def _settled(js, space):
    ci = await js.consumer_info(f"TASK_{space}", "svc_reviewer")
    return ci if ci.num_ack_pending == 0 and ci.num_pending == 0 else None
