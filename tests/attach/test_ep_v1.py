"""Issued callers on the versioned rail (§13.15), on a real broker with the demo manager.

A connection learns its binding from the accepted row under the token derived from its own
connect name: with a row every call rides ``ep.v1`` with the row's generation (the subjects are
read off the broker by a wildcard observer), without one it stays on the legacy rail and a command
that needs the binding is refused before anything is sent. A row naming another space or caller
is refused by name. The demo manager serves both rails and refuses a generation no issuer
recorded. On a static mesh the signer-holding client issues its control instrument: the
instrument's rows are on ``ep.v1`` only and its calls ride that rail.
"""

from __future__ import annotations

import json
import secrets

import nats
import pytest
from conftest import until
from support.managers import Managers

from attach.control.endpoint import UNBOUND_CALLER, EndpointClient, conn_id_of
from meshview.link.issuance import ensure_accepted_store, write_accepted_row
from meshview.wire.endpoint import Caller, new_nonce, parse_reply, parse_request, reply_filter, request_subject
from meshview.wire.envelope import EndpointError, build_request, parse_reply_body
from meshview.wire.issued import IssuedRef, accepted_token, new_generation


class Tap:
    """Every endpoint-rail subject the broker routes in one space, as a wildcard observer sees it."""

    def __init__(self) -> None:
        self.subjects: list[str] = []

    async def start(self, nc, space: str) -> "Tap":
        await nc.subscribe(f"cotal.{space}.ep.>", cb=self._cb)
        await nc.flush()
        return self

    async def _cb(self, msg) -> None:
        self.subjects.append(msg.subject)

    def of(self, caller: Caller) -> list[str]:
        return [s for s in self.subjects if f".{caller.owner}.{caller.actor}.{caller.uid}." in s]


@pytest.fixture
async def managers(broker, space, tmp_path):
    m = Managers(broker, space, tmp_path)
    yield m
    await m.stop()


async def caller_connection(broker):
    """A client connection whose reply inbox is scoped by its own connect nonce (``connId``)."""
    conn_id = "ibx" + secrets.token_hex(16)
    return await nats.connect(broker.url, name=conn_id, inbox_prefix=f"_INBOX_{conn_id}")


async def issue(nc, store_space: str, conn, caller: Caller, **over) -> str:
    """Play the issuer: record an accepted row for ``conn``'s own token; returns its generation."""
    gen = new_generation()
    ref = IssuedRef(**{"space": store_space, "owner": caller.owner, "actor": caller.actor, "uid": caller.uid,
                       "generation": gen, **over})
    js = nc.jetstream()
    await ensure_accepted_store(js, store_space)
    await write_accepted_row(js, store_space, accepted_token(conn_id_of(conn)), ref)
    return gen


async def test_calls_ride_ep_v1_when_the_accepted_row_exists(broker, nc, space, managers):
    await managers.start("ada")
    tap = await Tap().start(nc, space)
    conn = await caller_connection(broker)
    try:
        caller = Caller.fresh()
        gen = await issue(nc, space, conn, caller)
        ep = EndpointClient(conn, space, caller=caller)
        r = await ep.call("ps")
        assert r.ok and ep.generation == gen
        seen = await until(lambda: (s := tap.of(caller)) and any(".reply." in x for x in s) and s,
                           what="the v1 request and reply at the broker")
        assert all(x.startswith(f"cotal.{space}.ep.v1.") for x in seen), seen
        reqs = [parse_request(x) for x in seen if ".reply." not in x]
        assert {p.command for p in reqs} >= {"describe", "ps"} and {p.generation for p in reqs} == {gen}
        replies = [parse_reply(x) for x in seen if ".reply." in x]
        assert replies and {p.generation for p in replies} == {gen}
    finally:
        await conn.close()


async def test_the_binding_is_read_once_per_connection_and_never_switched(broker, nc, space, managers):
    """Every client on one connection shares the one accepted-row read; a second issuance written
    for another connection never moves this one (a changed ceiling is a new connection)."""
    await managers.start("ada")
    reads: list[str] = []

    async def cb(msg):
        reads.append(msg.reply)  # who asked: the reader's own inbox (the manager reads rows too)

    await nc.subscribe(f"$JS.API.DIRECT.GET.KV_cotal_accepted_{space}.>", cb=cb)
    await nc.flush()
    conn = await caller_connection(broker)
    other = await caller_connection(broker)
    try:
        caller = Caller.fresh()
        gen = await issue(nc, space, conn, caller)
        first = EndpointClient(conn, space, caller=caller)
        assert (await first.call("ps")).ok and first.generation == gen
        second = EndpointClient(conn, space, caller=caller)
        assert (await second.call("ps")).ok and second.generation == gen
        fresh = await issue(nc, space, other, caller)  # a new nonce, a new generation
        third = EndpointClient(other, space, caller=caller)
        assert (await third.call("ps")).ok and third.generation == fresh != gen
        assert (await EndpointClient(conn, space, caller=caller).bind()).generation == gen
        await nc.flush()
        assert len([r for r in reads if r.startswith(f"_INBOX_{conn_id_of(conn)}.")]) == 1
        assert len([r for r in reads if r.startswith(f"_INBOX_{conn_id_of(other)}.")]) == 1
    finally:
        await conn.close()
        await other.close()


async def test_a_connection_with_no_row_stays_on_the_legacy_rail(broker, nc, space, managers):
    await managers.start("ada")
    tap = await Tap().start(nc, space)
    conn = await caller_connection(broker)
    try:
        caller = Caller.fresh()
        js = nc.jetstream()
        await ensure_accepted_store(js, space)  # the store exists, this connection's row does not
        ep = EndpointClient(conn, space, caller=caller)
        assert (await ep.call("ps")).ok and ep.generation is None
        assert "holds no accepted row" in (await ep.bind()).why
        seen = await until(lambda: (s := tap.of(caller)) and any(".reply." in x for x in s) and s,
                           what="the legacy request and reply at the broker")
        assert all(x.startswith(f"cotal.{space}.ep.") and ".ep.v1." not in x for x in seen), seen
    finally:
        await conn.close()


async def test_run_start_without_a_row_is_refused_locally_and_never_sent(broker, nc, space, managers):
    await managers.start("ada")
    tap = await Tap().start(nc, space)
    conn = await caller_connection(broker)
    try:
        caller = Caller.fresh()
        ep = EndpointClient(conn, space, caller=caller)
        with pytest.raises(EndpointError) as ei:
            await ep.call("run-start", {"source": "x"})
        e = ei.value
        assert e.code == "permission-denied" and e.outcome == "not-executed"
        assert "run-start binds to the caller's issued authority" in e.message and "legacy rail" in e.message
        assert e.details == [{"kind": UNBOUND_CALLER, "owner": caller.owner, "actor": caller.actor,
                              "uid": caller.uid}]
        assert (await ep.call("ps")).ok  # the legacy rail carries what needs no binding ...
        await until(lambda: any(".ps." in x for x in tap.of(caller)), what="the ps request")
        assert not [x for x in tap.of(caller) if ".run-start." in x]  # ... and never the refused one
    finally:
        await conn.close()


@pytest.mark.parametrize("over,why", [
    ({"space": "elsewhere"}, "another space"),
    ({"actor": "mallory"}, "another caller"),
    ({"uid": "z" * 26}, "another caller"),
])
async def test_a_foreign_row_is_refused_by_name(broker, nc, space, managers, over, why):
    await managers.start("ada")
    tap = await Tap().start(nc, space)
    conn = await caller_connection(broker)
    try:
        caller = Caller.fresh()
        await issue(nc, space, conn, caller, **over)
        ep = EndpointClient(conn, space, caller=caller)
        with pytest.raises(EndpointError) as ei:
            await ep.call("ps")
        assert ei.value.code == "permission-denied" and why in ei.value.message
        assert "accepted row" in ei.value.message
        await nc.flush()
        assert tap.of(caller) == []  # nothing left on either rail
    finally:
        await conn.close()


async def test_the_manager_refuses_a_generation_no_issuer_recorded(broker, nc, space, managers):
    """The issuing host's check: a v1 request whose generation names no accepted row is refused
    (permission-denied), answered on the v1 reply rail it arrived on."""
    await managers.start("ada")
    conn = await caller_connection(broker)
    try:
        caller = Caller.fresh()
        known = await issue(nc, space, conn, caller)
        for gen, ok in ((new_generation(), False), (known, True)):
            nonce = new_nonce()
            sub = await conn.subscribe(reply_filter(space, "manager", caller, nonce, generation=gen))
            await conn.flush()
            env = build_request(endpoint="manager", command="describe", caller=caller, deadline_ms=3000,
                                name="t")
            await conn.publish(request_subject(space, "manager", "describe", caller, nonce, generation=gen),
                               json.dumps(env).encode())
            msg = await sub.next_msg(timeout=5)
            assert parse_reply(msg.subject).generation == gen
            body = parse_reply_body(msg.data)
            assert body["ok"] is ok, body
            if not ok:
                assert body["error"]["code"] == "permission-denied"
                assert f"no issued evidence for generation {gen}" in body["error"]["message"]
            await sub.unsubscribe()
    finally:
        await conn.close()


# ---- a static mesh: the signer holder issues its control instrument ---------------------------


@pytest.fixture(scope="module")
def static_mesh():
    from cotal_tui.demo.mesh import DemoMesh

    m = DemoMesh(space="issu", agents=2, auth="static").start()
    yield m
    m.stop()


async def test_a_static_control_instrument_is_issued_and_rides_ep_v1(static_mesh):
    from meshview.link import auth
    from meshview.link.issuance import issue_instrument

    mesh = static_mesh
    seed = mesh.trust.root_seed
    space = mesh.space
    infra = await nats.connect(mesh.url, **seed.mint("infra", None).nats_options())
    try:
        tap = await Tap().start(infra, space)
        cred = auth.mint_control(seed, space, issued=True)
        rows = auth.jwt_claims(cred.jwt)["nats"]["pub"]["allow"]
        ep_rows = [r for r in rows if f"cotal.{space}.ep." in r]
        assert ep_rows and all(r.startswith(f"cotal.{space}.ep.v1.") for r in ep_rows)  # v1 rows only
        assert all(f".{cred.issued.generation}." in r for r in ep_rows)

        async def connect_issuer():
            return await nats.connect(mesh.url, **auth.mint_issuer(seed, space).nats_options())

        await issue_instrument(connect_issuer, cred)
        conn = await nats.connect(mesh.url, **cred.nats_options())
        try:
            caller = Caller(*cred.caller)
            ep = EndpointClient(conn, space, caller=caller)
            r = await ep.call("ps")
            assert r.ok and ep.generation == cred.issued.generation
            seen = await until(lambda: (s := tap.of(caller)) and any(".reply." in x for x in s) and s,
                               what="the issued instrument's calls at the broker")
            assert all(x.startswith(f"cotal.{space}.ep.v1.") for x in seen), seen
        finally:
            await conn.close()
        # an instrument minted as an issuance whose row was never written: its own read finds
        # no row (the store answers 404), so the connection holds no issued authority
        bare = auth.mint_control(seed, space, issued=True)
        conn = await nats.connect(mesh.url, **bare.nats_options())
        try:
            ep = EndpointClient(conn, space, caller=Caller(*bare.caller))
            b = await ep.bind()
            assert b.generation is None and "no accepted row" in b.why
        finally:
            await conn.close()
    finally:
        await infra.close()
