"""Bounded by construction (issue 35 item 5): what a lying peer sends over a real broker is kept
within byte bounds and counted, offline rows are pruned, a future ``ts`` cannot keep a dead
peer live."""

from __future__ import annotations

import json
import time

import msgspec

from conftest import until
from support.observer import Heartbeat, close, now_ms, presence, put_presence, start_observer

from meshview.model.mesh import MeshModel
from meshview.model.roster import OFFLINE_CAP
from meshview.model.snapshot import PresenceEvent, PresenceRecord
from meshview.wire import bounds as B
from meshview.wire.parts import AGUI_FRAME_KIND, agui_frame_text
from meshview.wire.messages import ExtensionPart
from meshview.wire.names import bucket_names
from meshview.wire.decode import Applied

YEAR_MS = 365 * 24 * 3600 * 1000


def nbytes(s: str | None) -> int:
    return 0 if s is None else len(s.encode("utf-8"))


def strings(v) -> list[str]:
    """Every string in a decoded JSON value (keys too)."""
    if isinstance(v, str):
        return [v]
    if isinstance(v, dict):
        return [s for k, x in v.items() for s in (k, *strings(x))]
    if isinstance(v, list):
        return [s for x in v for s in strings(x)]
    return []


async def test_hostile_names_roles_ids_and_frames_are_kept_bounded_and_counted(broker, nc, space):
    """A peer that sends megabyte names, roles, ids, mentions and ag-ui frames on its own
    subject: every row keeps at most the wire's byte bounds, cut at a code point (a 2-byte
    ``é`` and a 4-byte emoji never split), and the cuts are counted by field."""
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        subj = f"cotal.{space}.chat.local.mallory.general"
        big = {
            "id": "i" * 200_000, "ts": now_ms(), "space": space, "channel": "general",
            "from": {"id": "local.mallory", "name": "é" * 150_000, "role": "🦜" * 50_000},
            "replyTo": "r" * 50_000, "contextId": "c" * 50_000,
            "mentions": ["local.x" * 300] * 40,
            "parts": [{"kind": "text", "text": "hi"}],
        }
        await nc.publish(subj, json.dumps(big, ensure_ascii=False).encode())
        # a frame whose first event carries 300 KB the renderer never reads, then 6000
        # deltas: past the frame's bounds events are reduced to what the renderer reads,
        # then dropped and counted
        events = [{"type": "CUSTOM", "name": "x", "value": "v" * 300_000},
                  {"type": "TEXT_MESSAGE_START", "messageId": "m"}]
        events += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "δ" * 7,
                    "junk": "j" * 5} for _ in range(6000)]
        frame = {"id": "frame1", "ts": now_ms(), "space": space, "channel": "general",
                 "from": {"id": "local.mallory", "name": "mallory"},
                 "parts": [{"kind": AGUI_FRAME_KIND, "events": events}]}
        await nc.publish(subj, json.dumps(frame, ensure_ascii=False).encode())
        many = {"id": "many", "ts": now_ms(), "space": space, "channel": "general",
                "from": {"id": "local.mallory", "name": "mallory"},
                "parts": [{"kind": "text", "text": "p"}] * 5000}
        await nc.publish(subj, json.dumps(many).encode())
        await until(lambda: sum(e.kind == "channel" for e in model.snapshot().feed) == 3,
                    what="three rows")
        rows = {e.id[:5]: e for e in model.snapshot().feed if e.kind == "channel"}
        e = rows["iiiii"]
        assert nbytes(e.from_name) <= B.NAME_BYTES and e.from_name.endswith("é…")
        assert nbytes(e.from_role) <= B.ROLE_BYTES and e.from_role.endswith("🦜…")
        assert nbytes(e.id) <= B.ID_BYTES and all(nbytes(i) <= B.ID_BYTES for i in e.ids)
        assert nbytes(e.reply_to) <= B.ID_BYTES and nbytes(e.wire_context_id) <= B.ID_BYTES
        assert len(e.mentions) <= B.MENTIONS_MAX
        f = rows["frame"]
        (part,) = f.parts
        assert len(part.events) <= B.AGUI_EVENTS_MAX and part.dropped > 0
        assert len(msgspec.json.encode(part.events)) <= B.AGUI_FRAME_BYTES
        # reduced: what the renderer reads whole, the unknown key cut within half the budget
        first = part.events[0]
        assert first["type"] == "CUSTOM" and first["name"] == "x"
        assert first["value"].endswith("v…") and nbytes(first["value"]) <= B.AGUI_FRAME_BYTES // 2
        assert part.events[2]["junk"] == "jjjjj"  # events that fit are kept whole
        assert f.text.startswith("• custom x\n» δδδ")
        assert f.text.endswith(f"• {part.dropped} more events not shown")
        assert len(rows["many"].parts) == B.PARTS_MAX + 1
        for field in ("name", "role", "id", "replyTo", "contextId", "mentions", "events",
                      "parts"):
            assert model.cut_count(field) >= 1, field
        # the sender's learnt name is the bounded one too
        assert nbytes(model.name_of("local.mallory")) <= B.NAME_BYTES
    finally:
        await close(obs)


async def test_hostile_presence_fields_are_kept_bounded_and_counted(broker, nc, space):
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        rec = presence("mallory", "waiting", role="r" * 40_000, activity="a" * 50_000,
                       condition={"code": "c" * 9000, "message": "m" * 50_000,
                                  "source": "s" * 9000})
        rec["card"]["name"] = "n" * 50_000
        rec["card"]["description"] = "d" * 50_000
        rec["card"]["tags"] = ["t" * 2000] * 100
        rec["card"]["meta"] = {f"k{i}" * 40: "v" * 2000 for i in range(100)}
        rec["channelModes"] = {f"ch{i}" * 50: "quiet" for i in range(300)}
        await put_presence(nc, space, rec)
        p = await until(lambda: model.peer("local.mallory"), what="the peer")
        assert nbytes(p.name) <= B.NAME_BYTES and nbytes(p.role) <= B.ROLE_BYTES
        assert nbytes(p.activity) <= B.ACTIVITY_BYTES
        assert nbytes(p.condition.message) <= B.CONDITION_BYTES
        assert nbytes(p.condition.code) <= B.TOKEN_BYTES
        assert nbytes(p.description) <= B.DESCRIPTION_BYTES
        assert len(p.tags) <= B.TAGS_MAX and all(nbytes(t) <= B.TAG_BYTES for t in p.tags)
        assert len(p.meta) <= B.META_MAX
        assert all(nbytes(k) <= B.TAG_BYTES and nbytes(v) <= B.META_BYTES for k, v in p.meta)
        assert len(p.channel_modes) <= B.CHANNEL_MODES_MAX
        for field in ("name", "role", "activity", "condition", "description", "tags", "meta",
                      "channelModes"):
            assert model.cut_count(field) >= 1, field
    finally:
        await close(obs)


async def test_a_dead_peer_with_a_future_ts_goes_offline_within_the_ttl(broker, nc, space):
    """A record a year ahead, written once: liveness takes its receipt time, so the sweep calls
    it stale a ttl after it went silent (it stayed "working" forever)."""
    hb = Heartbeat(nc, space)
    hb.add("ada")  # someone heartbeats: the watch is not deaf
    hb.start()
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        await until(lambda: model.peer("local.ada"), what="ada")
        sent = time.time() * 1000
        await put_presence(nc, space, presence("zed", "working", ts=now_ms() + YEAR_MS))
        await until(lambda: (p := model.peer("local.zed")) and p.status == "working",
                    what="zed working")
        ev = await until(lambda: [e for e in model.pending_events() if isinstance(e, PresenceEvent)
                                  and e.event == "offline" and e.peer.id == "local.zed"],
                         timeout=15, what="zed offline")
        assert ev[0].reason == "stale"
        assert ev[0].received - sent <= model.ttl_ms + 3000
        assert model.peer("local.ada").status != "offline"
    finally:
        await hb.stop()
        await close(obs)


async def test_distinct_presence_keys_past_the_bound_are_pruned(broker, nc, space):
    """Open mode: a client writes OFFLINE_CAP + 600 distinct presence keys, each already
    stale. The roster keeps the newest OFFLINE_CAP offline rows and forgets the oldest."""
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        kv = await nc.jetstream().key_value(bucket_names(space).presence)
        n = OFFLINE_CAP + 600
        old = now_ms() - 60_000
        for i in range(n):
            rec = presence(f"p{i:05d}", "idle", ts=old + i)
            await kv.put(rec["card"]["id"], json.dumps(rec).encode())
        await until(lambda: model.peer(f"local.p{n - 1:05d}"), what="the last key")
        snap = model.snapshot()
        offline = [p for p in snap.agents if p.status == "offline"]
        assert len(offline) == OFFLINE_CAP
        assert model.peer("local.p00000") is None and model.peer(f"local.p{n - 1:05d}")
        assert len(snap.order) == len(snap.agents) + len(snap.endpoints) == OFFLINE_CAP
    finally:
        await close(obs)


def test_offline_pruning_keeps_the_latest_to_leave_and_survives_a_checkpoint():
    from meshview.record.statecodec import checkpoint, restore

    t = [1_000_000.0]
    m = MeshModel("s", clock=lambda: t[0])
    for i in range(OFFLINE_CAP + 10):
        m.apply_presence(PresenceRecord(id=f"local.a{i}", name=f"a{i}", status="idle", ts=t[0]))
    m.snapshot()
    for i in range(OFFLINE_CAP + 10):  # they leave in order
        t[0] += 1
        m.apply_presence_delete(f"local.a{i}")
    assert [m.peer(f"local.a{i}") for i in range(10)] == [None] * 10
    assert m.peer("local.a10") is not None
    assert len(m.snapshot().agents) == OFFLINE_CAP
    m2 = MeshModel("s", clock=lambda: t[0])
    restore(m2, checkpoint(m))
    m2.apply_presence(PresenceRecord(id="local.b", name="b", status="idle", ts=t[0]))
    t[0] += 1
    m2.apply_presence_delete("local.b")
    assert m2.peer("local.a10") is None and m2.peer("local.a11") is not None
    assert len(m2.snapshot().agents) == OFFLINE_CAP


def _frame(n: int, delta: int) -> ExtensionPart:
    ev = [{"type": "TEXT_MESSAGE_START", "messageId": "m"}]
    ev += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a" * delta}
           for _ in range(n)]
    ev.append({"type": "TEXT_MESSAGE_END", "messageId": "m"})
    return ExtensionPart(AGUI_FRAME_KIND, ev)


def test_ag_ui_folding_is_linear_in_the_frame():
    """A 1 MB frame of 10k deltas folds in milliseconds (a quadratic fold took 2.3 s), and 8x
    the deltas take about 8x the time, not 64x."""
    from meshview.wire.parts import AGUI_EVENT_CAP

    n = AGUI_EVENT_CAP - 2
    small, large = _frame(n // 8, 100), _frame(n, 100)
    t = time.perf_counter()
    text = agui_frame_text(large)
    tl = time.perf_counter() - t
    t = time.perf_counter()
    agui_frame_text(small)
    ts = time.perf_counter() - t
    assert text == "» " + "a" * 100 * n  # one sentence, one line
    assert tl < 0.25 and tl < 24 * ts + 0.01, (ts, tl)


def test_channels_heard_past_the_bound_are_forgotten_first_heard_first():
    from meshview.model.mesh import CHANNELS_CAP
    from meshview.model.snapshot import ChannelSettings

    t = [1_000_000.0]
    m = MeshModel("s", clock=lambda: t[0])
    m.set_channel_registry({"kept": ChannelSettings()})
    m.apply_message(Applied(kind="channel", id="k", ts=t[0], from_id="local.a", from_name="a",
                            text="x", channel="kept"))
    for i in range(CHANNELS_CAP + 50):
        t[0] += 1
        m.apply_message(Applied(kind="channel", id=f"m{i}", ts=t[0], from_id="local.a",
                                from_name="a", text="x", channel=f"spam{i:06d}"))
    names = [c.name for c in m.snapshot().channels]
    assert len(names) <= CHANNELS_CAP and "kept" in names
    assert "spam000000" not in names and f"spam{CHANNELS_CAP + 49:06d}" in names


def test_frames_weigh_in_the_feeds_byte_budget():
    """An ag-ui frame keeps events far larger than its fold's text: the feed's byte budget
    counts them, so 1100 rows of 60 KB frames with one-line folds do not all stay."""
    from meshview.model.feedring import FEED_TEXT_BUDGET

    m = MeshModel("s", clock=lambda: 1_000_000.0)
    ev = [{"type": "CUSTOM", "name": "x", "value": "v" * 60_000}]
    n = FEED_TEXT_BUDGET // 60_000 + 50
    for i in range(n):
        part = ExtensionPart(AGUI_FRAME_KIND, ev)
        m.apply_message(Applied(kind="channel", id=f"f{i}", ts=1.0, from_id="local.a",
                                from_name="a",
                                text=agui_frame_text(part), parts=[part], channel="general"))
    assert m.feed_len < n - 40
    assert m.entry(m.feed_end - 1).parts[0].events == ev  # the newest rows are kept whole


def test_a_small_frame_is_kept_whole_unmeasured_exactly_as_measured():
    """``bound_frame(fits=True)``: a payload of at most ``_FITS`` bytes cannot re-encode past the
    frame's byte bound (numbers grow at most 4.5x: ``1e15``), so its events are kept unmeasured;
    the result is the measured one's, worst cases included. A larger payload is measured."""
    import random

    from meshview.wire.bounds import Cuts
    from meshview.wire.decode import _FITS, bound_frame, decode_applied, decode_delivery

    rng = random.Random(40)
    leaves = [1e15, -9e15, 1, "x", "\b\f", None, True, 1.5e-300, 10**30, "é", [], {}]

    def value(depth: int) -> object:
        r = rng.random()
        if depth > 6 or r < 0.5:
            return rng.choice(leaves)
        if r < 0.75:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {f"k{i}": value(depth + 1) for i in range(rng.randint(0, 4))}

    raws = [msgspec.json.encode([value(0) for _ in range(rng.randint(0, 30))])
            for _ in range(400)]
    raws.append(b"[" + b",".join([b"1e15"] * 780) + b"]")  # grows 4.5x when re-encoded
    raws.append(b"[" + b",".join([b"{}"] * 1300) + b"]")  # the most events
    checked = []
    for raw in raws:
        payload = (b'{"id":"f","ts":1,"space":"s","from":{"id":"local.a","name":"a"},'
                   b'"channel":"events.local.a","parts":[{"kind":"ag-ui.frame","seq":1,'
                   b'"events":' + raw + b'}]}')
        events = msgspec.json.decode(raw)
        measured, fast = Cuts(), Cuts()
        want = bound_frame(events, measured, seq=1)
        if len(payload) <= _FITS:
            assert bound_frame(events, fast, seq=1, fits=True) == want
            assert want.dropped == 0 and fast.names == measured.names == []
            checked.append(len(events))
        subject = "cotal.s.chat.local.a.events.local.a"
        d = decode_delivery(subject, payload)
        got = decode_applied(subject, payload, 5.0)
        assert got == (d.applied(5.0, False) if not d.cuts else d)
    assert len(checked) > 300 and checked[-2:] == [780, 1300]  # the worst cases among them
