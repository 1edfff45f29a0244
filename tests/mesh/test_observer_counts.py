"""Observer fidelity against a real broker: what msg/s counts, denied taps on an
upper-case space, integer ``ts`` in JSON Lines."""

from __future__ import annotations

import io
import json

import nats
import pytest
from conftest import until
from support.observer import anycast, dm, now_ms, post, presence, put_presence

from cotal_tui.demo.broker import Broker
from cotal_tui.demo.provision import provision_space
from meshview.link.connect import ConnectTarget, connect
from meshview.model.mesh import MeshModel
from meshview.observe.observer import Observer, ObserverOptions
from meshview.lines.stream import StreamWriter


async def start(url: str, space: str, **opts) -> tuple[Observer, MeshModel]:
    nc, target = await connect(ConnectTarget((url,), space, timeout=3))
    model = MeshModel(space, record_events=True)
    obs = Observer(nc, space, model, has_credential=target.has_credential,
                   options=ObserverOptions(backfill=0, **opts))
    await obs.start()
    return obs, model


async def close(obs: Observer) -> None:
    await obs.stop()
    await obs.nc.close()


async def test_msg_rate_counts_chat_dm_anycast_only(broker, nc, space):
    """Endpoint rails, session rails and agent event channels are traffic, not messages: they
    never move msg/s, the sparkline or the total (rejected frames neither)."""
    obs, model = await start(broker.url, space)
    try:
        await nc.publish(f"cotal.{space}.ep.one.manager.abc.1.local.op.u1.n1.ps", b"{}")
        await nc.publish(f"cotal.{space}.eps.manager.s1.1.out", b'{"t":"credit","ack":0}')
        await nc.publish(f"cotal.{space}.chat.local.ada.general", b"{not json")
        await post(nc, space, "ada", "events.local.ada", "RUN_STARTED", js=False)
        await post(nc, space, "ada", "general", "hello")
        await dm(nc, space, "ada", "bram", "psst")
        await anycast(nc, space, "ada", "reviewer", "review pls")
        await until(lambda: {e.kind for e in model.snapshot().feed} >= {"channel", "dm", "anycast"}
                    and any(e.event for e in model.snapshot().feed), timeout=5)
        await until(lambda: model.rejection_count() >= 1, timeout=5)
        r = model.snapshot().rates
        assert r.total == 3, r
        assert sum(r.buckets) == 3
    finally:
        await close(obs)


@pytest.fixture
def upper_broker():
    s = "Team"
    cfg = f"""
authorization {{
  users = [
    {{ user: admin, password: adminpw }}
    {{ user: obs, password: obspw, permissions: {{
        publish: {{ allow: ["$JS.API.INFO", "$JS.API.STREAM.INFO.>", "$JS.API.CONSUMER.>", "$JS.API.DIRECT.GET.>", "$JS.FC.>", "$JS.ACK.>"] }}
        subscribe: {{ allow: ["cotal.{s}.chat.>", "_INBOX.>"] }}
    }} }}
  ]
}}
"""
    b = Broker(name="cotal-upper", extra_config=cfg).start()
    yield b
    b.stop()


async def test_denied_taps_narrow_on_an_upper_case_space(upper_broker):
    """nats-py lower-cases the -ERR text (``cotal.team.inst.>``); the denied admin taps of space
    ``Team`` are still recognised and narrowed away, so the view says chat-only."""
    host = f"127.0.0.1:{upper_broker.port}"
    admin = await nats.connect(f"nats://admin:adminpw@{host}")
    await provision_space(admin, "Team")
    nc, target = await connect(ConnectTarget((f"nats://obs:obspw@{host}",), "Team", timeout=3))
    model = MeshModel("Team", record_events=True)
    obs = Observer(nc, "Team", model, has_credential=target.has_credential,
                   options=ObserverOptions(backfill=0))
    try:
        await obs.start()
        await until(lambda: obs.tap_subjects == ("cotal.Team.chat.>",), timeout=5,
                    what="the denied inst/svc taps narrowed away")
        assert obs.dm_visible is False
        assert model.snapshot().status.dm_visible is False
        await post(admin, "Team", "ada", "general", "visible")
        await until(lambda: any(e.text == "visible" for e in model.snapshot().feed))
    finally:
        await obs.stop()
        await nc.close()
        await admin.close()


async def test_json_lines_ts_are_integers(broker, nc, space):
    """Presence ``ts`` reached JSON Lines as a float (``1767….0``); every ``ts`` is an int."""
    obs, model = await start(broker.url, space)
    try:
        ts = now_ms()
        await put_presence(nc, space, presence(
            "ada", "waiting", ts=ts, condition={"code": "input", "since": ts - 5000.0}))
        await post(nc, space, "ada", "general", "hi")
        await until(lambda: model.snapshot().agents and any(
            e.kind == "channel" for e in model.snapshot().feed), timeout=5)
        out = io.StringIO()
        StreamWriter("json", out, io.StringIO()).write(model.take_events())
        objs = [json.loads(line) for line in out.getvalue().splitlines()]
        pres = next(o for o in objs if o["type"] == "presence")
        msg = next(o for o in objs if o["type"] == "message")
        assert pres["ts"] == ts and type(pres["ts"]) is int
        assert type(pres["condition"]["since"]) is int
        assert type(msg["ts"]) is int
        assert '"ts": 1' in out.getvalue() and ".0," not in out.getvalue()
    finally:
        await close(obs)
