"""The contract tap (support/contract.py) itself: it names each kind of departure from the rev-22
contract it is there to catch, stays quiet on a contract-true exchange, and does not change
what the broker answers a liveness probe (it must not look like a live manager)."""

from __future__ import annotations

import json

import nats
import pytest
from nats.errors import NoRespondersError
from conftest import until
from support.contract import Contract, ContractTap, contract

from meshview.wire.endpoint import (
    MANAGER,
    Caller,
    new_nonce,
    reply_subject,
    request_subject,
)
from meshview.wire.envelope import build_request

pytestmark = pytest.mark.contract_tap_off("publishes contract-breaking traffic on purpose to test the tap")
IID = "a" * 26


def test_contract_checks_read_as_sentences():
    c = Contract()
    assert c.validate_args("spawn", {"name": "s1", "identity": "x"}) == []
    [f] = c.validate_args("spawn", {"name": "s1", "persona": "echo"})
    assert "spawn args $" in f and "'persona' was unexpected" in f
    assert c.validate_args("ps", None) == [] and c.validate_args("ps", {}) != []
    assert c.validate_args("nope", None) == ["'nope' is not a command of contract revision 22"]
    [f] = c.validate_result("inspect", {"name": "a", "id": "b", "agent": "c", "space": "d", "mode": "pty",
                                        "status": "running", "uptimeMs": 1, "mesh": "idle", "lifecycleUid": "u",
                                        "cols": 80})
    assert "'cols' was unexpected" in f
    assert c.validate_error({"code": "nope", "message": "m"})[0].startswith("error.code \"nope\"")
    assert c.validate_error({"code": "not-found", "message": "m", "outcome": "not-executed"}) == []


async def _exchange(nc, space: str, command: str, args, *, reply: dict | None, nonce: str | None = None,
                    caller: Caller | None = None, digests: tuple[str, str] | None = None) -> tuple[Caller, str]:
    caller = caller or Caller.fresh()
    nonce = nonce or new_nonce()
    spec = contract().commands[command]
    i, o = digests or (spec.input_digest, spec.output_digest)
    env = build_request(endpoint=MANAGER, command=command, caller=caller, input_digest=i, output_digest=o,
                        args=args, request_id="r" + nonce[:20])
    await nc.publish(request_subject(space, MANAGER, command, caller, nonce), json.dumps(env).encode())
    if reply is not None:
        body = {"v": 1, "id": env["id"], **reply}
        await nc.publish(reply_subject(space, MANAGER, IID, 1, caller, nonce), json.dumps(body).encode())
    return caller, nonce


async def test_the_tap_names_each_departure_and_passes_a_true_exchange(broker, nc, space):
    c = await nats.connect(broker.url)
    tap = await ContractTap(c, space).start()
    try:
        await _exchange(nc, space, "goal-result", {"goalId": "g1"}, reply={"ok": True, "data": {"goalId": "g1"}})
        await nc.flush()
        await until(lambda: tap.seen.requests == 1 and tap.seen.replies == 1, 10.0,
                    "the tap to see the request and its reply")
        assert tap.violations == []
        await _exchange(nc, space, "spawn", {"name": "s1", "persona": "echo"}, reply=None)
        void = contract().commands["ps"].input_digest
        await _exchange(nc, space, "ps", None, reply=None, digests=(void, void))
        await _exchange(nc, space, "goal-result", {"goalId": "g2"}, reply={"ok": True, "data": {"goalId": 7}})
        await _exchange(nc, space, "goal-result", {"goalId": "g3"},
                        reply={"ok": False, "error": {"code": "made-up", "message": "m"}})
        caller, nonce = await _exchange(nc, space, "goal-result", {"goalId": "g4"}, reply=None)
        await _exchange(nc, space, "goal-result", {"goalId": "g4"}, reply=None, caller=caller, nonce=nonce)
        await nc.flush()
        named = ["spawn args $: Additional properties are not allowed ('persona' was unexpected)",
                 "ps op.outputDigest is ", "but contract rev 22 says",
                 "goal-result result $.goalId: 7 is not of type 'string'",
                 'error.code "made-up" is neither in the catalog', "nonce reused"]
        await until(lambda: all(n in "\n".join(tap.violations) for n in named), 10.0,
                    lambda: f"the tap to name every departure; it named {tap.violations}")
    finally:
        await tap.stop()
        await c.close()
    with pytest.raises(AssertionError, match="manager contract violation"):
        tap.assert_clean()


async def test_the_tap_leaves_a_gone_instance_gone(broker, nc, space):
    """Liveness asks the broker whether anything serves an instance's rail; the tap must not
    answer that (it does not subscribe to the instance rail's describe)."""
    c = await nats.connect(broker.url)
    tap = await ContractTap(c, space).start()
    try:
        caller = Caller.fresh()
        subj = request_subject(space, MANAGER, "describe", caller, new_nonce(), route="inst", instance_id=IID)
        body = build_request(endpoint=MANAGER, command="describe", caller=caller)
        with pytest.raises(NoRespondersError):
            await nc.request(subj, json.dumps(body).encode(), timeout=2)
    finally:
        await tap.stop()
        await c.close()
