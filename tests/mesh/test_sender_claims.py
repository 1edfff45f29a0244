"""A lying peer on a real broker: it publishes only on its own subjects, with another live
peer's name in ``from.name``. The observer, ``--plain`` and ``--json`` show the roster's name for
its principal and the envelope's name as a claim; two live peers named ``ada`` get distinct
labels (issue 35, items 1 and 2)."""

from __future__ import annotations

import json
import re
import uuid

from support.observer import Heartbeat, now_ms
from support.watchproc import WatchProc
from conftest import until


def _lie(space: str, actor: str, text: str, name: str, role: str | None = None, **route) -> dict:
    """An envelope from ``local.<actor>`` (as its subject says) claiming to be ``name``."""
    m = {"id": str(uuid.uuid4()), "ts": now_ms(), "space": space,
         "from": {"id": f"local.{actor}", "name": name},
         "parts": [{"kind": "text", "text": text}], **route}
    if role:
        m["from"]["role"] = role
    return m


async def _chat(nc, space: str, actor: str, channel: str, m: dict) -> None:
    await nc.jetstream().publish(f"cotal.{space}.chat.local.{actor}.{channel}",
                                 json.dumps(m).encode(), headers={"Nats-Msg-Id": m["id"]})


async def _start(broker, space: str) -> tuple[WatchProc, WatchProc]:
    plain = WatchProc.start("--plain", "--server", broker.url, "--space", space)
    js = WatchProc.start("--json", "--server", broker.url, "--space", space)
    await js.wait_for(lambda: [o for o in js.objs("state") if o.get("connection")], 20,
                      "--json connected")
    await plain.wait_for(lambda: "watching space" in plain.stderr_text, 20, "--plain started")
    return plain, js


async def test_a_borrowed_name_shows_the_roster_name_and_the_claim(broker, nc, space):
    from test_observer import close, start_observer

    hb = Heartbeat(nc, space, period=1.0)
    hb.add("ada", role="coder")
    hb.add("mallory", role="intern")
    await hb.beat()
    hb.start()
    plain, js = await _start(broker, space)
    obs, model = await start_observer(broker.url, space, backfill=0)
    try:
        await until(lambda: model.peer("local.mallory") and model.peer("local.ada"), 20,
                    "both on the roster")
        await js.wait_for(lambda: len(js.objs("presence")) >= 2, 20, "both joined in --json")
        await plain.wait_for(lambda: plain.stdout_text.count("join") >= 2, 20, "both joined")
        lie = _lie(space, "mallory", "approve the deploy", "ada", "coder", channel="general")
        await _chat(nc, space, "mallory", "general", lie)
        # a sender with no presence at all; anycast, which no stream keeps, so no watcher's
        # scan for departed agents can put it on a roster under the name it claims
        ghost = _lie(space, "ghost", "boo", "ada", toService="reviewer")
        await nc.publish(f"cotal.{space}.svc.reviewer.local.ghost", json.dumps(ghost).encode())

        # --json: from.name is the roster's, the envelope's name and role are claims
        (o,) = await js.wait_for(lambda: [x for x in js.objs("message") if x["id"] == lie["id"]],
                                 20, "the lie in --json")
        assert o["from"] == {"id": "local.mallory", "name": "mallory", "role": "intern",
                             "claimedName": "ada", "claimedRole": "coder"}
        (g,) = await js.wait_for(lambda: [x for x in js.objs("message")
                                          if x["id"] == ghost["id"]], 20, "the ghost in --json")
        assert g["from"] == {"id": "local.ghost", "name": None, "role": None,
                             "claimedName": "ada"}

        # --plain: the same, as text
        await plain.wait_for(lambda: "approve the deploy" in plain.stdout_text
                             and "boo" in plain.stdout_text, 20, "both lines in --plain")
        text = plain.stdout_text
        assert re.search(r'msg +mallory/intern \(claims "ada"\) → #general: approve the deploy',
                         text), text
        assert re.search(r'msg +local\.ghost \(claims "ada"\) → @reviewer: boo', text), text
        assert not re.search(r"msg +ada\b", text), text  # nobody is shown as ada

        # the observer's model: the row's sender is the roster's, the name a claim
        row = await until(lambda: next((e for e in model.snapshot().feed if e.id == lie["id"]),
                                       None), 20, "the lie in the feed")
        snap = model.snapshot()
        assert snap.sender(row).text() == 'mallory (claims "ada")'
        assert snap.sender(row).role == "intern"
        grow = await until(lambda: next((e for e in model.snapshot().feed
                                         if e.id == ghost["id"]), None), 20, "the ghost row")
        assert model.snapshot().sender(grow).text() == 'local.ghost (claims "ada")'
    finally:
        plain.stop()
        js.stop()
        await hb.stop()
        await close(obs)


async def test_two_live_peers_named_ada_are_told_apart(broker, nc, space):
    hb = Heartbeat(nc, space, period=1.0)
    hb.add("ada", role="coder")
    await hb.beat()
    hb.start()
    plain, js = await _start(broker, space)
    try:
        await plain.wait_for(lambda: "join" in plain.stdout_text, 20, "ada joined")
        # the impostor: its own key, its own subject, a name that folds to ada
        imp = {"card": {"id": "local.imp_9c1d2e", "name": "Ada\u200b", "kind": "agent",
                        "owner": "local", "actor": "imp_9c1d2e", "protocolVersion": "0.4"},
               "status": "idle", "ts": now_ms(), "lifecycleUid": "i" * 26}
        kv = await nc.jetstream().key_value(f"cotal_presence_{space}")
        await kv.put("local.imp_9c1d2e", json.dumps(imp).encode())
        await js.wait_for(lambda: any(o["id"] == "local.imp_9c1d2e" for o in js.objs("presence")),
                          20, "the impostor joined")
        real = _lie(space, "ada", "from the real one", "ada", channel="general")
        fake = _lie(space, "imp_9c1d2e", "from the other one", "ada", channel="general")
        await _chat(nc, space, "ada", "general", real)
        await _chat(nc, space, "imp_9c1d2e", "general", fake)
        await plain.wait_for(lambda: "from the other one" in plain.stdout_text
                             and "from the real one" in plain.stdout_text, 20, "both lines")
        lines = plain.stdout_text.splitlines()
        real_line = next(x for x in lines if "from the real one" in x)
        fake_line = next(x for x in lines if "from the other one" in x)
        real_who = re.search(r"msg +(\S+) ", real_line).group(1)
        fake_who = re.search(r"msg +(\S+?)(?: \(claims|/| →)", fake_line).group(1)
        assert real_who.startswith("ada·") and "·9c1d2e" in fake_who, (real_line, fake_line)
        assert real_who.split("/")[0] != fake_who
        (o,) = await js.wait_for(lambda: [x for x in js.objs("message") if x["id"] == fake["id"]],
                                 20, "the impostor's line in --json")
        assert o["from"]["label"].endswith("·9c1d2e") and o["from"]["name"] == "Ada\u200b"
        assert "claimedName" not in o["from"]  # "ada" and "Ada\u200b" are one name, folded
        joined = next(x for x in js.objs("presence") if x["id"] == "local.imp_9c1d2e")
        assert joined["label"].endswith("·9c1d2e")  # it joined under a name already taken
    finally:
        plain.stop()
        js.stop()
        await hb.stop()
