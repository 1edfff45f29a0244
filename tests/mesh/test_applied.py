"""One value per delivery (issue 36): the decode builds the ``Applied`` the model takes, a
recording stores that value, and recordings of the keyword form still replay as it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import pytest

from meshview.model.mesh import MeshModel
from meshview.record.record import Recorder
from meshview.record.replay import Replay, load_recording, upgraded
from meshview.wire.decode import Applied, Delivery, decode_delivery
from meshview.wire.messages import TextPart

V2 = Path(__file__).resolve().parents[1] / "fixtures" / "recording-v2"
T0 = 1_700_000_000_000.0


def _payload(**kw: object) -> bytes:
    return json.dumps({"id": "m1", "ts": T0, "space": "main",
                       "from": {"id": "local.ada", "name": "ada", "role": "dev"},
                       "parts": [{"kind": "text", "text": "hello"},
                                 {"kind": "text", "text": "there"}], **kw}).encode()


def _delivery(subject: str, history: bool = False, **kw: object) -> Delivery:
    d = decode_delivery(subject, _payload(**kw), history=history)
    assert type(d) is Delivery, d
    return d


def test_a_channel_delivery_applies_as_one_value():
    d = _delivery("cotal.main.chat.local.ada.general", channel="general", replyTo="r0",
                  contextId="ctx", mentions=["local.bo"])
    assert d.applied(T0 + 5) == Applied(
        "channel", "m1", T0, "local.ada", "ada", "dev", "hello there",
        [TextPart("hello"), TextPart("there")], "general", None, None, False, False, T0 + 5,
        "ctx", "r0", "ctx", ["local.bo"])


def test_kind_target_event_and_history_come_from_the_subject_and_the_read():
    dm = _delivery("cotal.main.inst.local.bo.local.ada", to="local.bo").applied()
    assert (dm.kind, dm.channel, dm.to, dm.to_service, dm.received) == (
        "dm", None, "local.bo", None, None)
    assert dm.context_id == "m1"  # no contextId: a reply joins the message's own thread
    svc = _delivery("cotal.main.svc.reviewer.local.ada", toService="reviewer").applied()
    assert (svc.kind, svc.to, svc.to_service) == ("anycast", None, "reviewer")
    ev = _delivery("cotal.main.chat.local.ada.events.local.ada", channel="events.local.ada")
    assert ev.applied().event and ev.applied().channel == "events.local.ada"
    old = _delivery("cotal.main.chat.local.ada.general", history=True, channel="general")
    assert old.applied().historical and not old.applied(historical=False).historical


def test_a_recording_stores_the_value_and_replays_it(tmp_path):
    t = [T0]
    m = MeshModel("main", clock=lambda: t[0])
    path = str(tmp_path / "r.gz")
    r = Recorder(m, path)
    d = _delivery("cotal.main.chat.local.ada.general", channel="general", replyTo="r0")
    assert m.apply_message(d.applied(T0))
    t[0] += 1000
    assert not m.apply_message(d.applied(t[0]))  # a duplicate: applied, never recorded
    r.close()
    lines = [json.loads(x) for x in gzip.decompress(Path(path).read_bytes()).splitlines()]
    msgs = [x for x in lines if x.get("op") == "apply_message"]
    assert len(msgs) == 1 and "kw" not in msgs[0]
    assert [a["$o"] for a in msgs[0]["a"]] == ["meshview.wire.decode:Applied"]
    fields = msgs[0]["a"][0]["f"]  # what the message says; defaults come back on decode
    assert {"reply_to", "received"} <= set(fields) and not {"to", "historical"} & set(fields)
    replay = Replay(load_recording(path))
    replay.seek(replay.end)
    assert replay.damage is None
    assert tuple(replay.model.snapshot().feed) == tuple(m.snapshot().feed)


def test_a_format_2_recording_of_keyword_messages_replays_as_before():
    """tests/fixtures/recording-v2/team.jsonl.gz: made when ``apply_message`` took keyword
    arguments (make_recording.py beside it); the replay ends with the feed that build's did."""
    rec = load_recording(str(V2 / "team.jsonl.gz"))
    assert rec.header["version"] == 2 and rec.damage is None
    msgs = [e for e in rec.entries if e.op == "apply_message"]
    assert len(msgs) == 8 and all(e.kw and not e.args for e in msgs)
    replay = Replay(rec)
    replay.seek(replay.end)
    assert replay.damage is None and replay.event_number() == (16, 16)
    got = [msgspec.json.decode(msgspec.json.encode(e)) for e in replay.model.snapshot().feed]
    want = [json.loads(x) for x in (V2 / "team.feed.jsonl").read_text().splitlines()]
    assert got == want
    # seeking back restores a checkpoint and replays the keyword inputs again
    replay.seek(replay.start)
    replay.seek(replay.end)
    assert [msgspec.json.decode(msgspec.json.encode(e))
            for e in replay.model.snapshot().feed] == want


def test_an_old_keyword_message_maps_to_the_value_and_an_unknown_keyword_is_refused():
    kw = {"kind": "dm", "id": "d1", "ts": T0, "from_id": "local.a", "from_name": "a",
          "to": "local.b", "received": T0}
    assert upgraded("apply_message", [], dict(kw)) == (
        [Applied("dm", "d1", T0, "local.a", "a", to="local.b", received=T0)], {})
    assert upgraded("tick", [], {"now": T0}) == ([], {"now": T0})  # other inputs as recorded
    with pytest.raises(TypeError):
        upgraded("apply_message", [], {**kw, "nonsense": 1})


def _vectors() -> list[tuple[str, bytes]]:
    path = Path(__file__).resolve().parents[1] / "vectors" / "messages.json"
    out = []
    for v in json.loads(path.read_text()):
        p = v["payload"]
        out.append((v["subject"], p.encode() if isinstance(p, str) else json.dumps(p).encode()))
    return out


def test_the_live_one_value_decode_is_the_delivery_applied_for_every_input():
    """``decode_applied`` (the observer's per-message path) skips the Delivery but not a check:
    over the shared vectors and the hostile corpus it refuses what ``decode_delivery`` refuses,
    with the same reason, returns the Delivery when a field was cut (counted by the caller), and
    otherwise the very value ``Delivery.applied(received, False)`` builds."""
    from support.hostile import generate

    from meshview.wire.decode import Rejection, decode_applied

    items = _vectors() + [(h.subject.decode("utf-8", "replace"), h.payload)
                          for h in generate("fz", 3000, seed=11, include_killers=True,
                                            now_ms=int(T0)) if not h.is_kv]
    items += [("cotal.main.chat.local.ada.general", _payload(**{"channel": "general", **kw}))
              for kw in ({}, {"mentions": ["x" * 600]}, {"replyTo": "r" * 900},
                         {"contextId": "c"}, {"channel": "other"}, {"to": "local.ada"})]
    items += [(f"cotal.main.chat.local.ada.{ch}", _payload(channel=ch))  # event channels or not
              for ch in ("events.local.ada", "events.team.standup", "events.local",
                         "events.local.ada.x", "events.a-b.c", "eventsx.local.ada")]
    seen = {"applied": 0, "cut": 0, "refused": 0}
    for subject, payload in items:
        want = decode_delivery(subject, payload)
        got = decode_applied(subject, payload, T0 + 7)
        if type(want) is Rejection:
            assert got == want, subject
            seen["refused"] += 1
        elif want.cuts:
            assert type(got) is Delivery and got == want, subject
            seen["cut"] += 1
        else:
            assert type(got) is Applied and got == want.applied(T0 + 7, False), subject
            seen["applied"] += 1
            seen["event"] = seen.get("event", 0) + got.event
    assert all(seen.values()), seen
