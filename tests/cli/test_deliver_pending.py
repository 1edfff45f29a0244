"""``cotal deliver pending NAME`` on a real broker: the recipient's DM durable's counters are
JetStream's own, the candidates are the DMs past its ack floor with the subject's sender (never
the body's ``from``), and nothing is acked or created by the read."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from nats.js import api

from support.observer import Heartbeat, dm, message, presence, put_presence
from test_send_cli import Namesakes

COTAL = [sys.executable, "-m", "cotal_tui.cli"]
UID = ("bram" * 26)[:26]  # support.observer.presence's lifecycleUid for bram
DURABLE = f"dm_local-bram-{UID}"


async def cotal_deliver(broker, space: str, *argv: str) -> subprocess.CompletedProcess:
    cmd = COTAL + ["deliver", "pending", *argv, "--server", broker.url, "--space", space,
                   "--connect-timeout", "2"]
    return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, timeout=60)


def one_sentence(err: bytes) -> str:
    text = err.decode()
    assert "Traceback" not in text, text
    assert text.count("\n") == 1 and text.startswith("cotal deliver: "), text
    return text


async def bram_with_held_dms(nc, space: str) -> list[dict]:
    """bram's DM durable (as its connector binds it), five DMs: one acked, one handed out and not
    acked, one from mallory, a forged one whose body claims ada while mallory sent it, and one
    whose body does not decode."""
    js = nc.jetstream()
    await js.add_consumer(f"DM_{space}", api.ConsumerConfig(
        durable_name=DURABLE, filter_subject=f"cotal.{space}.inst.local.bram.>",
        ack_policy=api.AckPolicy.EXPLICIT, ack_wait=60,
        deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=1))
    sent = [await dm(nc, space, "ada", "bram", "first"), await dm(nc, space, "ada", "bram", "second"),
            await dm(nc, space, "mallory", "bram", "hi")]
    forged = message(space, "ada", "trust me", to="local.bram")  # body says ada; subject mallory
    await js.publish(f"cotal.{space}.inst.local.bram.local.mallory", json.dumps(forged).encode())
    await js.publish(f"cotal.{space}.inst.local.bram.local.mallory", b"\xff not json")
    await dm(nc, space, "ada", "cleo", "not bram's")  # another recipient's DM
    sub = await js.pull_subscribe_bind(DURABLE, f"DM_{space}")
    first, second = await sub.fetch(2, timeout=5)
    await first.ack()  # second: handed out, not acked
    await sub.unsubscribe()
    return sent + [forged]


async def test_pending_reads_the_durable_and_the_candidates(broker, nc, space):
    await put_presence(nc, space, presence("bram", "offline"))  # a dead recipient still resolves
    sent = await bram_with_held_dms(nc, space)
    r = await cotal_deliver(broker, space, "bram", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    ci = await nc.jetstream().consumer_info(f"DM_{space}", DURABLE)
    assert got["durable"] == DURABLE
    assert (got["pending"], got["ackPending"], got["ackFloor"], got["delivered"]) == (
        ci.num_pending, ci.num_ack_pending, ci.ack_floor.stream_seq, ci.delivered.stream_seq)
    assert (got["pending"], got["ackPending"], got["ackFloor"]) == (3, 1, 1)
    cands = got["candidates"]
    assert [c["seq"] for c in cands] == [2, 3, 4, 5]  # from the ack floor, bram's only
    assert [c["id"] for c in cands[:2]] == [sent[1]["id"], sent[2]["id"]]
    assert [c["from"] for c in cands[:2]] == ["local.ada", "local.mallory"]
    # the body claiming ada on mallory's subject, and the undecodable one: withheld, with why
    assert [c["id"] for c in cands[2:]] == [None, None] and all(c["withheld"] for c in cands[2:])
    assert "ada" not in json.dumps(cands[2:])
    # an inspection read: nothing acked, no durable created
    after = await nc.jetstream().consumer_info(f"DM_{space}", DURABLE)
    assert (after.num_pending, after.num_ack_pending, after.ack_floor.stream_seq) == (3, 1, 1)
    names = [c.name for c in await nc.jetstream().consumers_info(f"DM_{space}")]
    assert names == [DURABLE]

    plain = await cotal_deliver(broker, space, "local.bram", "--limit", "1")
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.decode().splitlines()
    assert lines[:5] == [DURABLE, "pending 3", "ack-pending 1", "delivered 2", "ack-floor 1"]
    assert lines[-1] == f"  {sent[1]['id']}  from=local.ada  ts={sent[1]['ts']}"
    assert "delivered " not in " ".join(lines[8:])  # the candidates never claim delivery


async def test_a_namesake_is_refused_and_the_durable_name_still_reads(broker, nc, space):
    hb = Heartbeat(nc, space)
    hb.add("bram", status="working")
    liars = Namesakes(nc, space, {"mallory": "bram"})
    await hb.beat()
    await liars.beat()
    await bram_with_held_dms(nc, space)
    try:
        amb = await cotal_deliver(broker, space, "bram")
        by_id = await cotal_deliver(broker, space, "local.bram", "--json")
    finally:
        await hb.stop()
        await liars.stop()
    err = one_sentence(amb.stderr)
    assert amb.returncode == 1 and "local.bram" in err and "local.mallory" in err, err
    assert by_id.returncode == 0 and json.loads(by_id.stdout)["durable"] == DURABLE
    r = await cotal_deliver(broker, space, "whoever", "--durable", DURABLE, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["pending"] == 3


async def test_not_found_and_hostile_uids_are_one_sentence(broker, nc, space):
    r = await cotal_deliver(broker, space, "nobody")
    assert r.returncode == 1 and "not-found: no agent 'nobody'" in one_sentence(r.stderr)
    await put_presence(nc, space, presence("cleo"))  # present, but no durable bound
    r = await cotal_deliver(broker, space, "cleo")
    assert r.returncode == 1 and "not-found" in one_sentence(r.stderr)
    evil = presence("eve", uid="a.>")  # a uid that would be a wildcard consumer name
    await put_presence(nc, space, evil)
    r = await cotal_deliver(broker, space, "eve")
    assert r.returncode == 1 and "not-found" in one_sentence(r.stderr)
    r = await cotal_deliver(broker, space, "x", "--durable", "dm_nope")
    assert r.returncode == 1 and "no DM durable 'dm_nope'" in one_sentence(r.stderr)
    r = await cotal_deliver(broker, space, "bram", "--limit", "0")
    assert r.returncode == 2 and b"--limit" in r.stderr
