"""``cotal send --reply-to ID`` when a lying peer reused ID (issue 35 item 4): the reply goes to
the copy whose kind and sender fit, never a DM's reply to a forger's channel, and an id that
several senders used is refused with one sentence naming them. What reached the broker is read
back from the streams."""

from __future__ import annotations

import json

from support.forger import forge
from support.observer import dm
from test_send_cli import cotal_send, envelope, one_sentence, stored


async def test_a_reply_to_a_dm_whose_id_a_forger_reused_is_a_dm(broker, nc, space):
    orig = await dm(nc, space, "ada", "ops", "can you approve the release?")
    await forge(nc, space, orig["id"], channel="general")  # mallory's channel copy
    r = await cotal_send(broker, space, "--as", "ops", "--json", "--reply-to", orig["id"], "yes")
    assert r.returncode == 0, r.stderr
    rep = envelope(r.stdout)  # a DM: its receipt is line 2
    assert rep["to"] == "local.ada" and "channel" not in rep and rep["replyTo"] == orig["id"]
    # the broker got a DM to ada, and nothing new on any channel
    chat = await stored(nc, f"CHAT_{space}")
    assert [m["from"]["id"] for m in chat] == ["local.mallory"]
    assert [m["id"] for m in await stored(nc, f"DM_{space}")] == [orig["id"], rep["id"]]


async def test_an_id_several_senders_used_is_refused_unless_the_target_picks_one(
        broker, nc, space):
    orig = await dm(nc, space, "ada", "bob", "the cache is warm")  # not the operator's DM
    await forge(nc, space, orig["id"], channel="general")
    r = await cotal_send(broker, space, "--as", "ops", "--reply-to", orig["id"], "thanks")
    assert r.returncode == 1
    err = one_sentence(r.stderr)
    assert "ambiguous" in err and "local.ada (DM to local.bob)" in err
    assert "local.mallory (channel #general)" in err and "nothing was sent" in err
    assert len(await stored(nc, f"CHAT_{space}")) == 1
    assert len(await stored(nc, f"DM_{space}")) == 1

    # a target says which copy: a DM to ada threads on ada's, a post on #general on mallory's
    r = await cotal_send(broker, space, "--as", "ops", "--json", "--reply-to", orig["id"],
                         "@local.ada", "thanks")
    assert r.returncode == 0, r.stderr
    rep = envelope(r.stdout)
    assert rep["to"] == "local.ada" and rep["replyTo"] == orig["id"]
    r = await cotal_send(broker, space, "--as", "ops", "--json", "--reply-to", orig["id"],
                         "#general", "who are you?")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["channel"] == "general"
    # a target none of the copies is on cannot say which: refused
    r = await cotal_send(broker, space, "--as", "ops", "--reply-to", orig["id"],
                         "#random", "hm")
    assert r.returncode == 1 and "ambiguous" in one_sentence(r.stderr)


async def test_two_senders_dming_the_operator_one_id_is_refused(broker, nc, space):
    orig = await dm(nc, space, "ada", "ops", "ship it?")
    await forge(nc, space, orig["id"], to="ops", by="trudy", text="ship it!")
    r = await cotal_send(broker, space, "--as", "ops", "--reply-to", orig["id"], "yes")
    assert r.returncode == 1
    err = one_sentence(r.stderr)
    assert "local.ada" in err and "local.trudy" in err
    assert len(await stored(nc, f"DM_{space}")) == 2  # nothing was sent
