"""``cotal send``'s DM/ask receipt on a real broker: the stored sequence is the stream's, and the
recipient's status is the one its own presence record (keyed by its principal) showed at send
time, never "delivered", whatever a name-borrowing peer claims."""

from __future__ import annotations

import json

from support.observer import Heartbeat, now_ms, presence, put_presence
from test_send_cli import Namesakes, cotal_send, envelope, one_sentence


async def stored_id(nc, stream: str, seq: int) -> str:
    """The id of the message the stream holds at ``seq`` (read through nats-py)."""
    return json.loads((await nc.jetstream().get_msg(stream, seq)).data)["id"]


async def test_a_dm_says_its_stored_sequence_and_the_recipients_status(broker, nc, space):
    await nc.jetstream().publish(f"cotal.{space}.inst.local.zz.x", b"filler")  # seq 1 is not ours
    hb = Heartbeat(nc, space)
    hb.add("bram", status="working")
    async with hb:
        plain = await cotal_send(broker, space, "@bram", "ship 1.8?")
        js = await cotal_send(broker, space, "--json", "@bram", "and 1.9?")
    assert plain.returncode == 0 and js.returncode == 0, (plain.stderr, js.stderr)
    out = plain.stdout.decode()
    assert "delivered" not in out
    mid = out.split()[1]
    assert out.rstrip().endswith(" · stored #2 · bram working"), out
    assert await stored_id(nc, f"DM_{space}", 2) == mid
    env_line, rec_line = js.stdout.decode().splitlines()
    rec = json.loads(rec_line)["receipt"]
    assert rec == {"stream": f"DM_{space}", "stored": 3, "duplicate": False,
                   "recipient": {"id": "local.bram", "name": "bram", "status": "working"}}
    assert await stored_id(nc, f"DM_{space}", 3) == json.loads(env_line)["id"]


async def test_a_peer_borrowing_the_name_does_not_change_the_status(broker, nc, space):
    """mallory heartbeats as ``bram`` claiming idle, eve writes a record under her own key whose
    card says it is local.bram: the receipt shows the real bram's ``working``."""
    liars = Namesakes(nc, space, {"mallory": "bram"})
    hb = Heartbeat(nc, space)
    hb.add("bram", status="working")
    kv = await nc.jetstream().key_value(f"cotal_presence_{space}")
    forged = presence("bram", "idle")  # card.id local.bram, under eve's key
    await kv.put("local.eve", json.dumps(forged).encode())
    async with hb, liars:
        by_name = await cotal_send(broker, space, "@bram", "which one?")
        by_id = await cotal_send(broker, space, "--json", "@local.bram", "the real one")
    assert by_name.returncode == 1 and "nothing was sent" in one_sentence(by_name.stderr)
    assert by_id.returncode == 0, by_id.stderr
    assert envelope(by_id.stdout)["to"] == "local.bram"
    rec = json.loads(by_id.stdout.decode().splitlines()[1])["receipt"]
    assert rec["recipient"] == {"id": "local.bram", "name": "bram", "status": "working"}
    assert rec["stored"] == 1
    assert (await nc.jetstream().stream_info(f"DM_{space}")).state.messages == 1


async def test_offline_and_lapsed_recipients_are_said_offline(broker, nc, space):
    await put_presence(nc, space, presence("cleo", "offline"))
    await put_presence(nc, space, presence("dana", "working", ts=now_ms() - 60_000))  # lapsed
    r1 = await cotal_send(broker, space, "@cleo", "when you are back")
    r2 = await cotal_send(broker, space, "@local.dana", "still there?")
    assert r1.returncode == 0 and r2.returncode == 0, (r1.stderr, r2.stderr)
    assert r1.stdout.decode().rstrip().endswith(" · stored #1 · cleo offline")
    assert r2.stdout.decode().rstrip().endswith(" · stored #2 · dana offline")  # not "working"


async def test_an_id_with_no_presence_had_no_roster_row_and_an_unknown_name_is_refused(
        broker, nc, space):
    r = await cotal_send(broker, space, "--json", "@local.zed", "hello?")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout.decode().splitlines()[1])["receipt"]
    assert rec["recipient"] == {"id": "local.zed", "name": "", "status": None}
    assert rec["stored"] == 1
    r = await cotal_send(broker, space, "@local.zed", "again")
    assert r.stdout.decode().rstrip().endswith(" · stored #2 · local.zed had no roster row at send")
    r = await cotal_send(broker, space, "@nobody", "hello?")
    assert r.returncode == 1 and "no agent named 'nobody'" in one_sentence(r.stderr)
    assert (await nc.jetstream().stream_info(f"DM_{space}")).state.messages == 2


async def test_an_ask_names_its_live_holders_and_its_task_sequence(broker, nc, space):
    hb = Heartbeat(nc, space)
    hb.add("bram", status="working", role="reviewer")
    hb.add("cleo", status="idle", role="reviewer")
    async with hb:
        r = await cotal_send(broker, space, "--json", "--ask", "reviewer", "review PR 42")
        plain = await cotal_send(broker, space, "--ask", "reviewer", "and PR 43")
    assert r.returncode == 0 and plain.returncode == 0, (r.stderr, plain.stderr)
    env_line, rec_line = r.stdout.decode().splitlines()
    rec = json.loads(rec_line)["receipt"]
    assert rec["stream"] == f"TASK_{space}" and rec["role"] == "reviewer"
    assert sorted((h["name"], h["status"]) for h in rec["holders"]) == [
        ("bram", "working"), ("cleo", "idle")]
    assert await stored_id(nc, f"TASK_{space}", rec["stored"]) == json.loads(env_line)["id"]
    out = plain.stdout.decode()
    assert f" · stored #{rec['stored'] + 1} · reviewer: " in out and "bram working" in out, out
    assert "delivered" not in out
