"""The client against a manager at contract revision 22 and one a release behind (21), on a real
broker: ``spawn`` carries ``shareTools`` as the list rev 22 declares, as the flag text rev 21
declares (or is refused, by name and before anything is sent, when that text cannot say the
list), and a key the responder's contract does not declare is refused ``undeclared-arg`` without
a request leaving (upstream 0.69.0: the CLI checks each request against the contract served)."""

from __future__ import annotations

import json

import nats
import pytest
from support.managers import Managers

from attach.control import verbs as control
from attach.control.endpoint import UNDECLARED_ARG, EndpointClient
from attach.control.verbs import ControlError, LaunchOptions
from conftest import until
from meshview.link.connect import ConnectTarget
from meshview.wire.endpoint import parse_request
from meshview.wire.envelope import EndpointError


def target(broker, space: str) -> ConnectTarget:
    return ConnectTarget((broker.url,), space, timeout=3)


@pytest.fixture
async def managers(broker, space, tmp_path):
    ms = Managers(broker, space, tmp_path)
    yield ms
    await ms.stop()


class Wire:
    """Every manager request on the space, as the broker carried it: (command, args)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, object]] = []

    async def start(self, broker, space: str) -> Wire:
        self.nc = await nats.connect(broker.url, name="wire-watch")

        async def cb(msg) -> None:
            p = parse_request(msg.subject)
            if p is not None and p.command != "describe":
                self.requests.append((p.command, json.loads(msg.data).get("args")))

        for route in ("one", "inst", "all"):
            await self.nc.subscribe(f"cotal.{space}.ep.{route}.manager.>", cb=cb)
        await self.nc.flush()
        return self

    def spawns(self) -> list[object]:
        return [a for c, a in self.requests if c == "spawn"]

    async def close(self) -> None:
        await self.nc.close()


@pytest.fixture
async def wire(broker, space):
    w = await Wire().start(broker, space)
    yield w
    await w.close()


async def test_rev_22_takes_share_tools_as_the_list(broker, space, managers, wire):
    m = await managers.start()
    assert m.contract.revision == 22
    r = await control.spawn(target(broker, space), "echo", name="w22", on=m.instance_id,
                            options=LaunchOptions(share_tools=("tavily", "a,b", "none")))
    assert r.joined
    assert wire.spawns() == [{"name": "echo", "identity": "w22", "shareTools": ["tavily", "a,b", "none"]}]
    assert m.bad_requests == 0


async def test_rev_21_takes_share_tools_as_the_flag_text(broker, space, managers, wire):
    m = await managers.start(contract_revision=21)
    assert m.contract.revision == 21
    t = target(broker, space)
    assert (await control.spawn(t, "echo", name="w21", on=m.instance_id,
                                options=LaunchOptions(share_tools=("tavily", "figma")))).joined
    assert (await control.spawn(t, "echo", name="w21b", on=m.instance_id,
                                options=LaunchOptions(share_tools=()))).joined
    assert wire.spawns() == [{"name": "echo", "identity": "w21", "shareTools": "tavily,figma"},
                             {"name": "echo", "identity": "w21b", "shareTools": "none"}]
    assert m.bad_requests == 0  # the rev-21 manager found every request inside its own schema


@pytest.mark.parametrize("names", [("a,b",), ("none",), (" padded",)])
async def test_rev_21_refuses_a_list_its_flag_text_cannot_say(broker, space, managers, wire, names):
    m = await managers.start(contract_revision=21)
    with pytest.raises(ControlError) as e:
        await control.spawn(target(broker, space), "echo", name="lost", on=m.instance_id,
                            options=LaunchOptions(share_tools=names))
    assert e.value.code == "bad-request" and "revision 22 takes a list" in e.value.message
    assert "\n" not in e.value.message and "nothing was spawned" in e.value.message
    assert wire.spawns() == [] and "lost" not in m.seats  # never reshaped into another selection


@pytest.mark.parametrize("revision", [21, 22])
async def test_a_key_the_responder_does_not_declare_is_refused_before_it_is_sent(
        broker, space, managers, wire, revision):
    m = await managers.start(contract_revision=revision)
    nc = await nats.connect(broker.url)
    try:
        ep = EndpointClient(nc, space)
        with pytest.raises(EndpointError) as e:  # rev 17's key: no revision since declares it
            await ep.call("spawn", {"name": "echo", "continueSession": "s1"}, instance_id=m.instance_id)
        assert (e.value.code, e.value.outcome) == ("bad-request", "not-executed")
        assert e.value.message.startswith(f"{UNDECLARED_ARG}: manager spawn (contract revision {revision}) "
                                          "declares no continueSession")
        assert e.value.details == [{"kind": UNDECLARED_ARG, "command": "spawn", "keys": ["continueSession"]}]
        assert ep.revision == revision
        # a declared call on the same client still goes, and is what the wire carried
        r = await ep.call("inspect", {"name": "nobody"}, instance_id=m.instance_id)
        assert not r.ok and r.error is not None and r.error.code == "not-found"
        await until(lambda: ("inspect", {"name": "nobody"}) in wire.requests, 5, "the inspect on the wire")
        assert wire.spawns() == [] and m.bad_requests == 0
    finally:
        await nc.close()


async def test_a_rev_21_and_a_rev_22_manager_side_by_side(broker, space, managers, wire):
    """Each pinned manager gets the shape its own contract declares, on one client build."""
    old = await managers.start(contract_revision=21)
    new = await managers.start()
    t = target(broker, space)
    opts = LaunchOptions(share_tools=("tavily",))
    assert (await control.spawn(t, "echo", name="on21", on=old.instance_id, options=opts)).joined
    assert (await control.spawn(t, "echo", name="on22", on=new.instance_id, options=opts)).joined
    assert [a["shareTools"] for a in wire.spawns()] == ["tavily", ["tavily"]]  # type: ignore[index]
    assert "on21" in old.seats and "on22" in new.seats


@pytest.mark.contract_tap_off("the forged schema leaves the rev-21 manager's own refusal to judge a list")
async def test_a_lying_peer_overwriting_the_schema_artifact_costs_only_the_local_check(
        broker, space, managers, wire):
    """Anyone on an open mesh can publish over a contract artifact's subject. The client verifies
    what it reads against the digest it pinned, so a forged schema is never believed: the call is
    left to the responder's own validation, which refuses it by name; nothing crashes, nothing runs."""
    from meshview.wire.endpoint import epc_subject
    from meshview.wire.names import epc_stream

    from cotal_tui.demo.contract import load_contract

    m = await managers.start(contract_revision=21)
    spawn_in = load_contract(21).commands["spawn"].input_digest
    nc = await nats.connect(broker.url)
    try:  # a forged manifest whose "schema" would declare anything at all
        forged = {"v": 1, "root": "sha256:" + "0" * 64, "members": [], "x": "y" * 50_000}
        await nc.jetstream().publish(epc_subject(space, spawn_in), json.dumps(forged).encode(),
                                     stream=epc_stream(space))
        ep = EndpointClient(nc, space)
        assert await ep.input_schema("spawn", m.instance_id) is None
    finally:
        await nc.close()
    with pytest.raises(ControlError) as e:
        await control.spawn(target(broker, space), "echo", name="forged", on=m.instance_id,
                            options=LaunchOptions(share_tools=("tavily",)))
    assert e.value.code == "bad-request" and f"manager {m.instance_id} refused spawn" in e.value.message
    assert "forged" not in m.seats and m.bad_requests == 1


def test_the_share_tools_flag_parses_once_into_the_list():
    import argparse

    from cotal_tui.cli.control import launch_options, spawn_arguments

    p = argparse.ArgumentParser()
    spawn_arguments(p)
    pick = lambda *a: launch_options(p.parse_args(["echo", *a])).share_tools  # noqa: E731
    assert pick() is None  # absent: the manager shares every declared server
    assert pick("--share-tools", "tavily,figma") == ("tavily", "figma")
    assert pick("--share-tools", " tavily , figma ") == ("tavily", "figma")
    assert pick("--share-tools", "none") == ()
    for bad in ("a,,b", ",", ""):
        with pytest.raises(SystemExit):
            p.parse_args(["echo", "--share-tools", bad])
