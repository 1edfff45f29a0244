"""SPEC §13.2/§13.3 MUSTs on the caller side, against a stand-in manager on a real broker.

- A bind refusal attributed (by the reply *subject*) to the very incarnation the request bound
  is incoherent: the caller rejects it as ``internal`` and never locates again on its word.
- A coherent bind refusal (another epoch, ``not-executed``) still locates again.
- One outstanding call per nonce: ``describe`` polls, each poll with a fresh nonce and id.
- A pane's size never comes from a row field (``cols``/``rows`` are outside the closed AgentRow).

The stand-in here is deliberately tiny and written for these cases alone (describe, inspect and
attach on its instance rail); it is not the demo manager.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import until
from support.contract import contract

from attach.session.client import AttachError, AttachSession
from attach.control.endpoint import EndpointClient, publish_closure
from meshview.wire.names import bucket_names
from meshview.wire.endpoint import MANAGER, parse_request, reply_subject, serve_filter
from meshview.wire.envelope import EndpointError, bind_refused_detail, reply_body, validate_request
from meshview.wire.outbound import mint_lifecycle_uid


class StubManager:
    """One instance at one epoch per reply. ``attach_answers`` is a list of callables
    ``(env, iid, epoch) -> EndpointError`` consumed in order, the last one repeating."""

    def __init__(self, nc, space: str, *, epochs: tuple[int, int] = (3, 3), attach_answers=(),
                 row_extra: dict | None = None, lease: bool = False):
        self.nc, self.space = nc, space
        self.lease = lease
        self.row_extra = row_extra or {}
        self.iid = mint_lifecycle_uid()
        self.inspect_epoch, self.attach_epoch = epochs
        self.attach_answers = list(attach_answers)
        self.attach_envs: list[dict] = []
        self.seat_uid = mint_lifecycle_uid()
        self._subs: list = []

    async def start(self) -> None:
        rev21 = contract()
        ins, att = rev21.command("inspect"), rev21.command("attach")
        doc = {"urn": "ai.cotal.manager", "revision": 21, "attributes": [], "events": [], "commands": [
            {"name": "inspect", "class": "ephemeral", "targeted": False, "capability": "manager.read",
             "inputDigest": ins.input_digest, "outputDigest": ins.output_digest},
            {"name": "attach", "class": "ephemeral", "targeted": True, "modes": ["owner", "any"],
             "capability": "manager.lifecycle", "inputDigest": att.input_digest, "outputDigest": att.output_digest},
        ]}
        self.closure = await publish_closure(self.nc, self.space, doc)
        self._subs = [await self.nc.subscribe(serve_filter(self.space, "inst", MANAGER, self.iid), cb=self._serve),
                      await self.nc.subscribe(serve_filter(self.space, "all", MANAGER), cb=self._serve),
                      await self.nc.subscribe(serve_filter(self.space, "one", MANAGER), queue=MANAGER,
                                              cb=self._serve)]
        await self.nc.flush()
        if self.lease:  # where a caller looks for live managers before it scatters
            kv = await self.nc.jetstream().key_value(bucket_names(self.space).manager)
            await kv.put(f"lease.{self.iid}", json.dumps({"instanceId": self.iid, "runtime": "pty"}).encode())

    async def stop(self) -> None:
        for sub in self._subs:
            await sub.unsubscribe()

    async def _serve(self, msg) -> None:
        p = parse_request(msg.subject)
        if p is None:
            return
        env = validate_request(p, msg.data)
        epoch = self.attach_epoch if p.command == "attach" else self.inspect_epoch
        rs = reply_subject(self.space, MANAGER, self.iid, epoch, p.caller, p.nonce)
        if p.command == "describe":
            data = {"public": True, "descriptor": {"endpoint": MANAGER, "owner": "local", "protocol": {"v": 1}, "clusters": [
                {"digest": self.closure, "commands": ["inspect", "attach"]}]}}
            body = reply_body(env["id"], data=data)
        elif p.command == "inspect":
            row = {"name": "alice", "id": "alice", "agent": "claude", "space": self.space, "mode": "pty",
                   "status": "running", "uptimeMs": 1000, "mesh": "idle", "lifecycleUid": self.seat_uid,
                   **self.row_extra}
            body = reply_body(env["id"], data=row)
        else:
            self.attach_envs.append(env)
            answer = self.attach_answers[min(len(self.attach_envs), len(self.attach_answers)) - 1]
            body = reply_body(env["id"], error=answer(env, self.iid, epoch))
        await self.nc.publish(rs, body)


def incoherent(env, iid, epoch) -> EndpointError:
    """"Not me": but the reply subject says it is exactly the incarnation the caller bound."""
    return EndpointError("failed-precondition", "bound to another manager instance",
                         details=[bind_refused_detail(MANAGER, "attach", env["bind"], (iid, epoch))],
                         outcome="not-executed")


def coherent(env, iid, epoch) -> EndpointError:
    """The same instance at another epoch (it restarted after the caller located): nothing ran."""
    return EndpointError("expired", "bound to another epoch of this instance",
                         details=[bind_refused_detail(MANAGER, "attach", env["bind"], (iid, epoch))],
                         outcome="not-executed")


def denied(env, iid, epoch) -> EndpointError:
    return EndpointError("permission-denied", "not yours", outcome="not-executed")


@pytest.fixture
async def stub(nc, space, request):
    m = StubManager(nc, space, **request.param)
    await m.start()
    yield m
    await m.stop()


@pytest.mark.parametrize("stub", [dict(epochs=(3, 3), attach_answers=[incoherent])], indirect=True)
async def test_a_bind_refusal_from_the_bound_incarnation_is_internal_not_a_relocate(nc, space, stub):
    s = AttachSession(space, "alice", nc=nc, instance_id=stub.iid, reconnect=False)
    with pytest.raises(AttachError) as e:
        await asyncio.wait_for(s.open(), 20)
    assert e.value.code == "internal"
    assert len(stub.attach_envs) == 1  # believed, it would have located again (up to 16 times)
    assert stub.attach_envs[0]["bind"] == {"instanceId": stub.iid, "epoch": 3}


@pytest.mark.parametrize("stub", [dict(epochs=(3, 3), attach_answers=[incoherent])], indirect=True)
async def test_the_call_itself_refuses_the_incoherent_refusal(nc, space, stub):
    """The rule lives in the call, so every caller of a bound command (attach, the control verbs)
    gets it: an ``internal`` the caller raised, with no outcome (unknown) and no marker."""
    ep = EndpointClient(nc, space)
    with pytest.raises(EndpointError) as e:
        await ep.call("attach", instance_id=stub.iid, mode="any",
                      target={"owner": "local", "actor": "alice", "lifecycleUid": stub.seat_uid},
                      bind={"instanceId": stub.iid, "epoch": 3}, deadline_ms=5000)
    assert e.value.code == "internal" and e.value.outcome is None and e.value.details == []


@pytest.mark.parametrize("stub", [dict(epochs=(3, 4), attach_answers=[coherent, denied])], indirect=True)
async def test_a_coherent_bind_refusal_still_locates_again(nc, space, stub):
    s = AttachSession(space, "alice", nc=nc, instance_id=stub.iid, reconnect=False)
    with pytest.raises(AttachError) as e:
        await asyncio.wait_for(s.open(), 20)
    assert e.value.code == "permission-denied"
    assert len(stub.attach_envs) == 2  # the first refusal was believed: located and asked again


async def test_describe_polls_with_a_fresh_nonce_and_id_per_publish(nc, space):
    """Nothing serves the class rail: every poll is captured off the broker, and no two share a
    nonce (one outstanding call per nonce) or a request id."""
    seen: list[tuple[str, str]] = []

    async def tap(msg) -> None:
        p = parse_request(msg.subject)
        seen.append((p.nonce, json.loads(msg.data)["id"]))

    sub = await nc.subscribe(f"cotal.{space}.ep.one.manager.describe.>", cb=tap)
    await nc.flush()
    with pytest.raises(EndpointError) as e:
        await EndpointClient(nc, space).describe(deadline_ms=1600)
    await sub.unsubscribe()
    assert e.value.code == "deadline-exceeded"
    assert len(seen) >= 3
    assert len({n for n, _ in seen}) == len(seen)
    assert len({i for _, i in seen}) == len(seen)


async def test_a_slow_describe_answer_to_an_earlier_poll_still_counts(nc, space):
    """A manager that answers only the first poll, late: the later polls did not kill it."""
    iid = mint_lifecycle_uid()
    first: list = []

    async def slow(msg) -> None:
        if first:
            return
        first.append(msg.subject)
        await asyncio.sleep(0.8)
        p = parse_request(msg.subject)
        env = json.loads(msg.data)
        data = {"public": True, "descriptor": {"endpoint": MANAGER, "owner": "local", "protocol": {"v": 1},
                                                "clusters": []}}
        await nc.publish(reply_subject(space, MANAGER, iid, 1, p.caller, p.nonce), reply_body(env["id"], data=data))

    sub = await nc.subscribe(f"cotal.{space}.ep.one.manager.describe.>", cb=slow)
    await nc.flush()
    try:
        r = await EndpointClient(nc, space).describe(deadline_ms=5000)
    finally:
        await sub.unsubscribe()
    assert r.ok and r.instance_id == iid


@pytest.mark.contract_tap_off("the stand-in's row carries cols/rows on purpose: a field no AgentRow has")
@pytest.mark.parametrize("stub", [dict(attach_answers=[denied], row_extra={"cols": 7, "rows": 3}, lease=True)],
                         indirect=True)
async def test_a_pane_never_sizes_itself_from_row_fields(nc, space, stub):
    """The row claims 7×3; nothing a manager sends says a pty's size, so the pane opens at the
    size a reference manager starts every pty at, or at one this console set itself."""
    import nats

    from cotal_tui.seats import DEFAULT_SIZE, PaneLink, SeatSessions
    from widgets.terminal_pane import TerminalPane

    url = nc.connected_url.geturl()
    sessions = SeatSessions(space, lambda: nats.connect(url, allow_reconnect=False))
    pane = TerminalPane(40, 10)
    link = PaneLink(sessions, "alice", pane, on_status=lambda text: None)  # located by scatter
    link.start()
    await until(lambda: link.state == "ended", 15, "the refused attach to end the link")
    assert stub.attach_envs  # the row was read (located by scatter) and the attach was asked for
    assert pane.remote_size == DEFAULT_SIZE == (120, 32)
    sessions.sizes["alice"] = (90, 20)  # a size this console set (a fit): that one is known
    pane2 = TerminalPane(40, 10)
    link2 = PaneLink(sessions, "alice", pane2, on_status=lambda text: None)
    link2.start()
    await until(lambda: link2.state == "ended", 15, "the second link to end")
    assert pane2.remote_size == (90, 20)
    await link.close()
    await link2.close()


HOSTILE = "no\x1b]0;pwned\x07\x1b[2J\x9b2J\u202eevil\u202c\nfake line"


def hostile(env, iid, epoch) -> EndpointError:
    return EndpointError("permission-denied", HOSTILE, outcome="not-executed")


@pytest.mark.parametrize("stub", [dict(attach_answers=[hostile])], indirect=True)
async def test_a_managers_error_message_is_neutralised_for_the_terminal_and_kept_exact(nc, space, stub):
    s = AttachSession(space, "alice", nc=nc, instance_id=stub.iid, reconnect=False)
    with pytest.raises(AttachError) as e:
        await asyncio.wait_for(s.open(), 20)
    assert e.value.code == "permission-denied"
    shown = e.value.message
    assert not any(c in shown for c in ("\x1b", "\x07", "\x9b", "\u202e", "\u202c", "\n")), shown
    assert "\\x1b]0;pwned" in shown and "\\u202eevil" in shown and str(e.value) == shown
    assert HOSTILE in e.value.raw  # exact, for a JSON consumer


@pytest.mark.contract_tap_off("the stand-in's row lacks lifecycleUid on purpose")
@pytest.mark.parametrize("stub", [dict(attach_answers=[denied], row_extra={"lifecycleUid": None})], indirect=True)
async def test_a_row_without_a_lifecycle_uid_is_refused_before_any_attach(nc, space, stub):
    s = AttachSession(space, "alice", nc=nc, instance_id=stub.iid, reconnect=False)
    with pytest.raises(AttachError) as e:
        await asyncio.wait_for(s.open(), 20)
    assert e.value.code == "contract-invalid" and stub.attach_envs == []
