"""The observer against a real nats-server: presence, history, taps, scope, restarts."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

from cotal_tui.demo.broker import Broker
from cotal_tui.demo.provision import provision_space
from meshview.link.connect import ConnectTarget, connect
from meshview.model.mesh import MeshModel
from meshview.model.snapshot import PresenceEvent
from meshview.observe.observer import Observer, ObserverOptions
from conftest import until
from support.observer import (
    Heartbeat,
    anycast,
    close,
    dm,
    now_ms,
    post,
    presence,
    put_presence,
    start_observer,
)


def events(model: MeshModel, kind: str | None = None) -> list:
    out = [e for e in model.pending_events() if isinstance(e, PresenceEvent)]
    return [e for e in out if kind is None or e.event == kind]


async def test_crash_detected_within_window(broker, nc, space):
    hb = Heartbeat(nc, space)
    hb.add("ada")
    hb.add("finn")
    hb.start()
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        await until(lambda: len(model.snapshot().agents) == 2)
        await asyncio.sleep(1.0)
        hb.drop("finn")  # crash: no delete, no offline record
        last = hb.last_ts["finn"]
        ev = await until(lambda: [e for e in events(model, "offline") if e.peer.name == "finn"],
                         timeout=12)
        dt = ev[0].received - last
        assert 6000 < dt <= 9000, dt
        assert ev[0].reason == "stale"
        s = model.snapshot()
        assert {p.name: p.status for p in s.agents}["ada"] != "offline"
        assert [e.lifecycle for e in s.feed if e.kind == "lifecycle"][-1] == "crash"
    finally:
        await hb.stop()
        await close(obs)


async def test_incarnation_and_graceful_offline(broker, nc, space):
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        await put_presence(nc, space, presence("cleo", uid="a" * 26))
        await until(lambda: events(model, "join"))
        await put_presence(nc, space, presence("cleo", uid="a" * 26))  # heartbeat only
        await put_presence(nc, space, presence("cleo", uid="b" * 26))
        await until(lambda: events(model, "incarnation"))
        await put_presence(nc, space, presence("cleo", "offline", uid="b" * 26))
        await until(lambda: events(model, "offline"))
        assert [e.event for e in events(model)] == ["join", "incarnation", "offline"]
        assert events(model, "offline")[0].reason == "offline-record"
        # delete after a re-join -> offline again (rule 1); card.id != key dropped
        await put_presence(nc, space, presence("cleo", uid="b" * 26))
        kv = await nc.jetstream().key_value(f"cotal_presence_{space}")
        bad = presence("mallory")
        await kv.put("local.cleo2", json.dumps(bad).encode())
        await kv.put("_cotal_ttl_reconcile", b"canary")
        await kv.delete("local.cleo")
        await until(lambda: len(events(model, "offline")) == 2)
        assert events(model, "offline")[1].reason == "kv-delete"
        await until(lambda: model.rejection_count("presence:key-mismatch") == 1)
        assert model.rejection_count() == 1  # the canary is ignored silently
        assert [p.name for p in model.snapshot().agents] == ["cleo"]
    finally:
        await close(obs)


async def test_prefill_newest_n_and_live_dedupe(broker, nc, space):
    sent = [await post(nc, space, "ada", "general", f"m{i}") for i in range(6)]
    await post(nc, space, "ada", "team.backend", "b0")
    await post(nc, space, "ada", "events.local.ada", "evt")  # event channel: never fetched
    obs, model = await start_observer(broker.url, space, backfill=3)
    try:
        s = model.snapshot()
        hist = [e for e in s.feed if e.historical and e.kind != "lifecycle"]
        assert [e.text for e in hist if e.channel == "general"] == ["m3", "m4", "m5"]
        assert [e.text for e in hist if e.channel == "team.backend"] == ["b0"]
        assert not any(e.event for e in hist)
        assert obs.watermark[f"CHAT_{space}"] == 8
        # the live copy of a prefilled message (same id) and a repeat are dropped
        await post(nc, space, "ada", "general", "m5", mid=sent[5]["id"], js=False)
        await post(nc, space, "ada", "general", "live1")
        await post(nc, space, "ada", "general", "live1-again", mid=sent[4]["id"], js=False)
        await until(lambda: any(e.text == "live1" for e in model.snapshot().feed))
        await asyncio.sleep(0.3)
        ids = [e.id for e in model.snapshot().feed if e.id]
        assert len(ids) == len(set(ids)) == 5
        ch = {c.name: c for c in model.snapshot().channels}
        assert "events.local.ada" not in ch and ch["general"].arrivals == 1
        assert ch["general"].retained == 6 or ch["general"].retained == 7
        # every ephemeral history consumer was deleted
        info = await nc.jetstream().stream_info(f"CHAT_{space}")
        assert info.state.consumer_count == 0
    finally:
        await close(obs)


async def test_rejection_counters(broker, nc, space):
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        base = f"cotal.{space}.chat"
        await nc.publish(f"{base}.local.ada.general", b"{not json")
        spoof = {"id": "x1", "ts": now_ms(), "space": space,
                 "from": {"id": "local.bob", "name": "bob"}, "channel": "general",
                 "parts": [{"kind": "text", "text": "spoof"}]}
        await nc.publish(f"{base}.local.ada.general", json.dumps(spoof).encode())
        nk = "U" + "A" * 55
        await nc.publish(f"{base}.{nk}.ada.general", json.dumps(spoof).encode())
        await nc.publish(f"cotal.{space}.inst.local.ada", json.dumps(spoof).encode())
        await nc.publish(f"cotal.{space}.ep.one.x.y.z", b"{}")  # a rail: not a delivery
        await post(nc, space, "ada", "general", "good")
        await until(lambda: any(e.text == "good" for e in model.snapshot().feed))
        await until(lambda: model.rejection_count() >= 4)
        rej = dict(model.snapshot().rejections)
        assert rej["malformed-json"] == 1
        assert rej["sender-mismatch"] == 1
        assert sum(rej.values()) == 4, rej
        assert [e.text for e in model.snapshot().feed] == ["good"]
    finally:
        await close(obs)


async def test_open_tap_sees_dms_and_anycast(broker, nc, space):
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        assert obs.dm_visible and obs.tap_subjects == (f"cotal.{space}.>",)
        await dm(nc, space, "ada", "bram", "psst")
        await anycast(nc, space, "ada", "reviewer", "review pls")
        await until(lambda: {e.kind for e in model.snapshot().feed} >= {"dm", "anycast"},
                    timeout=3)
        d = [e for e in model.snapshot().feed if e.kind == "dm"][0]
        assert d.to_ids == ("local.bram",) and d.from_id == "local.ada"
    finally:
        await close(obs)


def restart_same_port(b: Broker) -> None:
    """Stop and start on the same port and store. (``Broker.restart`` may move to another
    port when the old one still has TIME_WAIT sockets; a client reconnects to the old URL.)"""
    port = b.port
    b.stop(keep_store=True)
    b.respawn(15)
    assert b.port == port


SCOPE_SPACE = "scoped"


@pytest.fixture
def scoped_broker():
    s = SCOPE_SPACE
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
    b = Broker(name="cotal-scope", extra_config=cfg).start()
    yield b
    b.stop()


async def test_observer_scope_hides_dms(scoped_broker):
    host = f"127.0.0.1:{scoped_broker.port}"
    admin = await nats.connect(f"nats://admin:adminpw@{host}")
    await provision_space(admin, SCOPE_SPACE)
    errors: list[str] = []
    nc, target = await connect(ConnectTarget((f"nats://obs:obspw@{host}",), SCOPE_SPACE, timeout=3))
    from meshview.link.connect import events_of
    events_of(nc).on_error.append(lambda e: errors.append(str(e)))
    model = MeshModel(SCOPE_SPACE, record_events=True)
    obs = Observer(nc, SCOPE_SPACE, model, has_credential=target.has_credential,
                   options=ObserverOptions(backfill=5))
    try:
        assert target.has_credential and "obspw" not in target.display
        await post(admin, SCOPE_SPACE, "ada", "general", "before")
        await obs.start()
        assert obs.dm_visible is False
        assert obs.tap_subjects == (f"cotal.{SCOPE_SPACE}.chat.>",)
        await put_presence(admin, SCOPE_SPACE, presence("ada", "working"))
        await dm(admin, SCOPE_SPACE, "ada", "bram", "secret")
        await anycast(admin, SCOPE_SPACE, "ada", "reviewer", "job")
        await post(admin, SCOPE_SPACE, "ada", "general", "visible")
        await until(lambda: any(e.text == "visible" for e in model.snapshot().feed))
        await until(lambda: model.snapshot().agents)
        await asyncio.sleep(0.5)
        s = model.snapshot()
        assert {e.kind for e in s.feed if e.kind != "lifecycle"} == {"channel"}
        assert [e.text for e in s.feed if e.kind == "channel"] == ["before", "visible"]
        assert s.status.dm_visible is False and s.status.connection == "connected"
        assert s.rejections == ()
        # exactly the two denied taps were reported, once each, then silence
        await asyncio.sleep(1.0)
        assert len(errors) <= 2, errors
        assert nc.is_connected
    finally:
        await obs.stop()
        await nc.close()
        await admin.close()


async def test_broker_restart_recovers_without_duplicates(fresh_broker):
    space = "restart"
    pub = await nats.connect(fresh_broker.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    await provision_space(pub, space)
    hb = Heartbeat(pub, space, period=1.0)
    hb.add("ada", status="working")
    hb.add("bram")
    hb.start()
    for i in range(3):
        await post(pub, space, "ada", "general", f"pre{i}")
    obs, model = await start_observer(fresh_broker.url, space, backfill=10)
    try:
        await until(lambda: len(model.snapshot().agents) == 2)
        states: list[str] = []
        obs.add_listener(lambda m: states.append(m.status.connection))
        await asyncio.to_thread(restart_same_port, fresh_broker)
        await until(lambda: "reconnecting" in states, timeout=10)
        await until(lambda: model.status.connection == "connected" and obs.nc.is_connected,
                    timeout=15)
        await until(lambda: pub.is_connected, timeout=10)
        for i in range(3):
            await post(pub, space, "ada", "general", f"post{i}")
            await post(pub, space, "ada", "general", "pre0-replay", mid=None)
        await until(lambda: sum(e.text.startswith("post") for e in model.snapshot().feed) == 3,
                    timeout=10)
        # heartbeats resumed: a fresh record arrived after the restart
        t_restart = model.clock()
        await until(lambda: all(p.ts > t_restart - 1500 for p in model.snapshot().agents),
                    timeout=10)
        await asyncio.sleep(7)  # a full ttl after the restart: no false crash
        s = model.snapshot()
        assert {p.name: p.status for p in s.agents} == {"ada": "working", "bram": "idle"}
        ids = [e.id for e in s.feed if e.id]
        assert len(ids) == len(set(ids))
        assert [e.text for e in s.feed if e.text.startswith("pre") and e.kind == "channel"
                and not e.text.endswith("replay")] == ["pre0", "pre1", "pre2"]
        kinds = [e.event for e in events(model)]
        assert kinds.count("join") == 2 and "offline" not in kinds and "incarnation" not in kinds
        assert s.status.presence_view == "live"
    finally:
        await hb.stop()
        await close(obs)
        await pub.close()


async def test_presence_watch_is_read_from_the_parser_on_our_connection(broker, nc, space):
    """On our own connection the presence watch takes each delivery straight from the parser
    (no message object, queue or task per heartbeat); on any other connection it is an
    ordinary callback subscription. Both read the same entries, deletes included, in order."""
    from meshview.observe import kvwatch
    from meshview.wire import bucket_names

    for i in range(30):
        await put_presence(nc, space, presence(f"w{i:02d}", "working"))
    kv = await nc.jetstream().key_value(bucket_names(space).presence)
    await kv.delete("local.w07")
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        assert obs.nc.direct_routes >= 1  # the watch's inbox is direct
        await until(lambda: len(model.snapshot().agents) == 29)
        assert model.peer("local.w07") is None  # deleted before we looked: never shown

        async def read(conn) -> list:
            out: list = []
            agen = kvwatch.watch(conn, bucket_names(space).presence)
            async for e in agen:
                if e is None:
                    break
                out.append((e.key, e.operation))
            await agen.aclose()
            return out

        direct, plain = await read(obs.nc), await read(nc)
        assert type(nc).__name__ == "Client" and not hasattr(nc, "direct")  # the fallback
        assert direct == plain and len(plain) == 30 and ("local.w07", "DEL") in plain
        await put_presence(nc, space, presence("w07", "idle"))  # a live update, direct
        await until(lambda: getattr(model.peer("local.w07"), "status", None) == "idle",
                    what="w07 back, live")
    finally:
        await close(obs)
    assert obs.nc.direct_routes == 0  # every direct inbox was handed back


async def test_tap_frames_are_read_from_the_parser_on_our_connection(broker, nc, space):
    """On our own connection the live taps hand each frame from the parser to the observer's
    queue (no message object or task per frame); on any other connection the same taps are
    callback subscriptions. Both land the same rows in the same order, headers or none, and a
    stopped observer hands every direct route back."""
    obs, model = await start_observer(broker.url, space, backfill=0)
    plain_model = MeshModel(space)
    plain = Observer(nc, space, plain_model, options=ObserverOptions(backfill=0))
    await plain.start()
    try:
        taps = obs.tap_subscriptions()
        assert taps and all(obs.nc.is_direct(s) for s in taps)  # every tap is direct on our client
        assert not hasattr(nc, "direct")  # the plain client: the callback path
        sent = []
        for i in range(300):
            m = await post(nc, space, "ada", "general", f"tap {i}", js=i % 2 == 0)
            sent.append(m["id"])
        sent.append((await dm(nc, space, "bram", "ada", "a dm"))["id"])
        sent.append((await anycast(nc, space, "bram", "review", "anyone?"))["id"])

        def ids(mdl):
            return [e.id for e in mdl.snapshot().feed if e.id in set(sent)]

        await until(lambda: len(ids(model)) == len(sent) and len(ids(plain_model)) == len(sent),
                    timeout=15, what="every frame on both")
        assert ids(model) == ids(plain_model)  # the DM lands when its burst window closes
        assert ids(model)[:300] == sent[:300] and sorted(ids(model)) == sorted(sent)
        assert [e.text for e in model.snapshot().feed if e.id == sent[5]] == ["tap 5"]
    finally:
        await plain.stop()
        await close(obs)
    assert obs.nc.direct_routes == 0  # every direct route (taps and watches) was handed back


async def test_the_console_freezes_its_first_load_once_the_roster_is_in(broker, nc, space, monkeypatch):
    """``tune_gc(settle=...)``: once the presence watch has delivered the bucket (its ready
    event is made anew at start: the current one is awaited), one collection, then what the
    load built is frozen out of later full scans; decoded presence records are never tracked."""
    import gc

    from cotal_tui import gcpace
    from cotal_tui.cli import watch_console
    from meshview.wire import decode_presence

    hb = Heartbeat(nc, space)
    hb.add("ada")
    await hb.beat()
    obs, model = await start_observer(broker.url, space, backfill=0)
    before = gc.get_threshold()
    monkeypatch.setattr(watch_console, "SETTLE_S", 0.0)
    monkeypatch.setattr(gcpace.HOLD, "active", False)  # tune_gc turns it on (this process's)
    try:
        await asyncio.wait_for(obs.presence_loaded(), 10)
        assert [p.name for p in model.snapshot().agents] == ["ada"]
        full: list[str] = []

        def seen(phase: str, info: dict) -> None:
            if phase == "stop" and info["generation"] == 2:
                full.append(phase)

        loaded = asyncio.Event()

        async def loading() -> None:  # the observer, its load still coming in
            await loaded.wait()
            await obs.presence_loaded()

        gc.callbacks.append(seen)
        try:
            watch_console.tune_gc(settle=loading)
            n = len(full)  # tune_gc's own collection, at start-up
            built = [[i] for i in range(5000)]  # what the first load builds, after start-up
            loaded.set()
            await until(lambda: not watch_console.gc_settling(), what="the settle")
        finally:
            gc.callbacks.remove(seen)
        assert len(full) == n + 1  # one more full collection, once the roster was in ...
        assert len(gc.get_objects(generation=2)) < 100  # ... and what survived it is frozen
        assert len(built) == 5000
        d = decode_presence("local.ada", "PUT", json.dumps(presence("ada")).encode(), now_ms(), None)
        assert d.presence is not None and not gc.is_tracked(d.presence)
        assert not gc.is_tracked(d.presence.card)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
        await close(obs)
