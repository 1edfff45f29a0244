"""Messages are keyed by (sender principal, id), history is in stream order (issue 35 item 4).

A lying peer (mallory) publishes only on its own subjects, reusing the id of a real DM with an
earlier ``ts``: a console that starts later still shows the DM as sent, the forgery beside it
marked as a reused id, and replies quote the original. Real broker throughout.
"""

from __future__ import annotations

import json
import time

from support.forger import FORGED, forge
from support.observer import dm, now_ms

from conftest import until
from meshview.model.mesh import MeshModel
from meshview.record.statecodec import checkpoint, restore
from meshview.lines.stream import CONFLICT_MARK, TextRenderer, json_message
from meshview.wire.decode import Applied

ORIGINAL = "the deploy key is in the vault, ask me before using it"


async def reply(nc, space: str, sender: str, *, reply_to: str, text: str,
                to: str | None = None, channel: str | None = None) -> dict:
    m = {"id": f"r-{time.monotonic_ns()}", "ts": now_ms(), "space": space,
         "from": {"id": f"local.{sender}", "name": sender},
         "parts": [{"kind": "text", "text": text}], "replyTo": reply_to}
    if channel:
        m["channel"] = channel
        subj = f"cotal.{space}.chat.local.{sender}.{channel}"
    else:
        m["to"] = f"local.{to}"
        subj = f"cotal.{space}.inst.local.{to}.local.{sender}"
    await nc.jetstream().publish(subj, json.dumps(m).encode(), headers={"Nats-Msg-Id": m["id"]})
    return m


def rows_of(model: MeshModel, mid: str) -> list:
    return [e for e in model.snapshot().feed if mid in e.ids]


async def test_a_reused_id_does_not_rewrite_history_for_a_later_observer(broker, nc, space):
    from test_observer import close, start_observer

    orig = await dm(nc, space, "ada", "bob", ORIGINAL)
    await forge(nc, space, orig["id"], channel="general", ago_ms=3_600_000)
    # mallory's own id again, as a DM: the same (sender, id), a duplicate
    await forge(nc, space, orig["id"], to="bob", text="mallory again", ago_ms=9_000_000)
    await forge(nc, space, orig["id"], to="bob", text="forged dm", ago_ms=7_200_000, by="trudy")
    answer = await reply(nc, space, "bob", to="ada", reply_to=orig["id"], text="will do")
    stray = await reply(nc, space, "carl", channel="random", reply_to=orig["id"], text="what?")

    obs, model = await start_observer(broker.url, space, backfill=50)
    try:
        await until(lambda: len(rows_of(model, stray["id"])) == 1, 15, "history loaded")
        rows = rows_of(model, orig["id"])
        # every copy shown, in the order the broker stored them (not by the forged ts)
        assert [(e.from_id, e.kind, e.text) for e in rows] == [
            ("local.ada", "dm", ORIGINAL),
            ("local.mallory", "channel", FORGED),
            ("local.trudy", "dm", "forged dm"),
        ]
        assert [e.conflict for e in rows] == [False, True, True]  # the later copies marked
        snap = model.snapshot()
        # the DM lens keeps the original DM, and the forged DM beside it, marked
        log = [(m.from_id, m.text, m.conflict) for m in snap.dm_log if m.id == orig["id"]]
        assert log == [("local.ada", ORIGINAL, False), ("local.trudy", "forged dm", True)]
        assert [m.text for m in snap.dm_thread("local.ada", "local.bob")][0] == ORIGINAL
        # a reply in the DM's conversation quotes the DM, not the forgery
        [r] = rows_of(model, answer["id"])
        assert r.reply_excerpt == ORIGINAL and not r.reply_ambiguous
        assert snap.original_of(r).from_id == "local.ada"
        # a reply that fits none of the senders' copies is marked, not resolved to one
        [s] = rows_of(model, stray["id"])
        assert s.reply_ambiguous and s.reply_excerpt is None
        assert snap.original_of(s) is None and snap.original_ambiguous(s)
        # --json and --plain carry the mark
        forged = rows[1]
        assert json_message(forged)["conflict"] is True
        assert "conflict" not in json_message(rows[0])
        assert json_message(s)["replyAmbiguous"] is True
        assert CONFLICT_MARK in TextRenderer(False).message(forged)
        assert CONFLICT_MARK not in TextRenderer(False).message(rows[0])
        # a checkpoint keeps the (sender, id) index: the copies stay duplicates after a restore
        copy = MeshModel(space)
        restore(copy, json.loads(json.dumps(checkpoint(model))))
        for e in rows:
            assert copy.apply_message(Applied(kind=e.kind, id=e.id, ts=e.ts, from_id=e.from_id,
                                              from_name=e.from_name, text=e.text,
                                              channel=e.channel,
                                              to=e.to_ids[0] if e.to_ids else None)
                                      ) is False
    finally:
        await close(obs)


async def test_live_a_reused_id_is_shown_marked_and_the_same_sender_is_a_duplicate(
        broker, nc, space):
    from test_observer import close, start_observer

    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        await until(lambda: model.status.connection == "connected", 10, "connected")
        orig = await dm(nc, space, "ada", "bob", ORIGINAL)
        await until(lambda: rows_of(model, orig["id"]), 10, "the DM")
        await forge(nc, space, orig["id"], channel="general")
        await until(lambda: len(rows_of(model, orig["id"])) == 2, 10, "the forgery")
        await forge(nc, space, orig["id"], channel="general", text="again")  # mallory's dup
        marker = await reply(nc, space, "bob", to="ada", reply_to=orig["id"], text="ok")
        await until(lambda: rows_of(model, marker["id"]), 10, "the reply")
        rows = rows_of(model, orig["id"])
        assert [(e.from_id, e.text, e.conflict) for e in rows] == [
            ("local.ada", ORIGINAL, False), ("local.mallory", FORGED, True)]
        assert rows_of(model, marker["id"])[0].reply_excerpt == ORIGINAL
    finally:
        await close(obs)


def test_a_forgers_earlier_copy_in_an_open_burst_is_a_conflict_not_the_original():
    """Pending unicast bursts keep their sender: a channel copy of a held id is a conflict,
    a later DM copy by the same sender is a duplicate, and the burst lands as the original."""
    t = [1_700_000_000_000.0]
    m = MeshModel("demo", clock=lambda: t[0], burst_ms=400)
    assert m.apply_message(Applied(kind="dm", id="x", ts=t[0], from_id="local.ada", from_name="ada",
                                   text=ORIGINAL, to="local.bob"))
    assert m.apply_message(Applied(kind="channel", id="x", ts=t[0] - 9e6, from_id="local.mallory",
                                   from_name="mallory", text=FORGED, channel="general"))
    assert m.apply_message(Applied(kind="dm", id="x", ts=t[0], from_id="local.ada", from_name="ada",
                                   text=ORIGINAL, to="local.bob")) is False
    t[0] += 1000
    m.tick()
    rows = list(m.snapshot().feed)
    assert [(e.from_id, e.conflict) for e in rows] == [("local.mallory", True),
                                                       ("local.ada", False)]


def test_the_sender_keyed_index_stays_bounded_and_right_as_rows_leave():
    """The first copy leaves the ring: the other sender's copy still dedupes its own repeats,
    and a third sender's copy is still a conflict; every index entry goes with its row."""
    t = [1_700_000_000_000.0]
    m = MeshModel("demo", clock=lambda: t[0], burst_ms=0, feed_cap=4)

    def say(sender: str, mid: str) -> bool:
        t[0] += 1
        return m.apply_message(Applied(kind="channel", id=mid, ts=t[0], from_id=f"local.{sender}",
                                       from_name=sender, text=f"{sender} {mid}", channel="general"))

    assert say("ada", "x") and say("bob", "b0") and say("mallory", "x") and say("bob", "b1")
    assert say("bob", "b2")  # ada's row leaves the ring, mallory's stays
    assert [e.from_id for e in m.snapshot().feed if "x" in e.ids] == ["local.mallory"]
    assert not say("mallory", "x")  # still mallory's duplicate
    assert say("trudy", "x")  # a third sender: shown, marked
    assert [e.conflict for e in m.snapshot().feed if "x" in e.ids] == [True, True]
    for k in range(8):
        say("bob", f"c{k}")
    assert not m.seen("x") and m.snapshot().feed_end - m.snapshot().feed_base == 4
    assert say("ada", "x")  # gone from the ring: a new row, no longer a conflict
    assert [e.conflict for e in m.snapshot().feed if "x" in e.ids] == [False]
