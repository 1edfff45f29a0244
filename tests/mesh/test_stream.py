"""``cotal watch --plain`` / ``--json`` as a subprocess against a real broker, line by line."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time


from meshview.model.labels import Labels
from meshview.model.snapshot import Condition, FeedEntry, Peer, PresenceEvent
from meshview.lines.stream import TextRenderer, age, json_message
from support.observer import anycast, dm, message, now_ms, post, presence, put_presence

TIME = r"\d\d:\d\d:\d\d"


async def spawn(*args: str, env: dict | None = None) -> asyncio.subprocess.Process:
    e = dict(os.environ)
    e.pop("NO_COLOR", None)
    e.pop("FORCE_COLOR", None)  # plain into a pipe unless forced (use_colour)
    e.update(env or {})
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cotal_tui.cli", "watch", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=e)


async def read_lines(p: asyncio.subprocess.Process, n: int, timeout: float = 8.0) -> list[str]:
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"got only {out}")
        line = await asyncio.wait_for(p.stdout.readline(), left)
        if not line:
            break
        out.append(line.decode().rstrip("\n"))
    return out


async def stop(p: asyncio.subprocess.Process) -> tuple[int, str]:
    p.send_signal(signal.SIGINT)
    _, err = await asyncio.wait_for(p.communicate(), 10)
    return p.returncode, err.decode()


async def scenario(nc, space: str) -> None:
    since = now_ms() - 180_500
    await put_presence(nc, space, presence("alice", "working", role="planner",
                                           activity="splitting the epic"))
    await asyncio.sleep(0.2)
    await put_presence(nc, space, presence("bob", "waiting", role="reviewer",
                                           condition={"code": "approval", "since": since}))
    await asyncio.sleep(0.2)
    await post(nc, space, "alice", "team.backend", "hello \x1b[31mred\x1b[0m\nsecond \u202eline",
               role="planner")
    await asyncio.sleep(0.2)
    await dm(nc, space, "alice", "bob", "psst")
    await asyncio.sleep(0.7)  # plain mode lands a DM after its 400 ms burst window
    await anycast(nc, space, "alice", "reviewer", "review PR 42")


async def test_plain_stream_lines(broker, nc, space):
    await post(nc, space, "carol", "general", "from before")
    p = await spawn("--plain", "--server", broker.url, "--space", space, "--backfill", "5")
    first = await read_lines(p, 2)
    await scenario(nc, space)
    lines = first + await read_lines(p, 6)
    rc, err = await stop(p)
    assert rc == 0
    assert "\x1b" not in "".join(lines)  # not a TTY: no colour, and wire escapes neutralized
    # carol's history line is printed before the roster knows her: her principal, and the
    # envelope's name as her claim
    assert re.fullmatch(rf'{TIME} history local\.carol \(claims "carol"\) → #general: from before',
                        lines[0])
    # carol talked but has no presence: an agent gone before the watch began
    assert re.fullmatch(rf"{TIME} offline carol ⨯ offline \(gone before this watch started\)",
                        lines.pop(1))
    assert re.fullmatch(
        rf"{TIME} join    alice/planner ● working · progress unknown - splitting the epic",
        lines[1])
    assert re.fullmatch(rf"{TIME} join    bob/reviewer ◐ waiting \(approval for 3m\)", lines[2])
    assert re.fullmatch(
        rf"{TIME} msg     alice/planner → #team\.backend: hello \\x1b\[31mred\\x1b\[0m", lines[3])
    assert lines[4] == "         second \\u202eline"
    # the role is the roster's (the DM's envelope named none)
    assert re.fullmatch(rf"{TIME} msg     alice/planner → bob: psst", lines[5])
    assert re.fullmatch(rf"{TIME} msg     alice/planner → @reviewer: review PR 42", lines[6])
    assert err.startswith("! watching space ")
    assert "Traceback" not in err


async def test_json_stream_lines(broker, nc, space):
    p = await spawn("--json", "--server", broker.url, "--space", space)
    state = json.loads((await read_lines(p, 1))[0])
    assert state == {"type": "state", "connection": "connected", "dmVisible": True,
                     "presenceView": "live"}
    await scenario(nc, space)
    await nc.publish(f"cotal.{space}.chat.local.alice.general", b"\x00garbage")
    objs = [json.loads(x) for x in await read_lines(p, 6)]
    rc, err = await stop(p)
    assert rc == 0, err
    a, b, chan, d, anyc, rej = objs
    assert a["type"] == "presence" and a["event"] == "join" and a["id"] == "local.alice"
    assert a["status"] == "working" and a["activity"] == "splitting the epic"
    assert a["lifecycleUid"] and a["role"] == "planner" and a["condition"] is None
    assert b["status"] == "waiting" and b["condition"]["code"] == "approval"
    assert chan["type"] == "message" and chan["kind"] == "channel"
    assert chan["channel"] == "team.backend" and chan["historical"] is False
    assert chan["text"] == "hello \x1b[31mred\x1b[0m\nsecond \u202eline"  # exact
    assert chan["from"] == {"id": "local.alice", "name": "alice", "role": "planner"}
    assert chan["parts"] == [{"kind": "text", "text": chan["text"]}]
    assert set(chan) == {"type", "id", "ts", "kind", "from", "channel", "text", "parts",
                         "historical"}
    assert d["kind"] == "dm" and d["to"] == "local.bob" and "channel" not in d
    assert anyc["kind"] == "anycast" and anyc["toService"] == "reviewer"
    assert rej == {"type": "rejected", "reason": "malformed-json",
                   "subject": f"cotal.{space}.chat.local.alice.general"}


async def test_no_dms_narrows_to_channels(broker, nc, space):
    p = await spawn("--json", "--no-dms", "--server", broker.url, "--space", space)
    state = json.loads((await read_lines(p, 1))[0])
    assert state["dmVisible"] is False
    await dm(nc, space, "alice", "bob", "psst")
    await post(nc, space, "alice", "general", "only this")
    obj = json.loads((await read_lines(p, 1))[0])
    rc, _ = await stop(p)
    assert rc == 0 and obj["kind"] == "channel" and obj["text"] == "only this"


async def test_unreachable_broker_one_sentence():
    t = time.monotonic()
    p = await spawn("--plain", "--server", "nats://user:hunter2@127.0.0.1:1",
                    "--connect-timeout", "2")
    out, err = await asyncio.wait_for(p.communicate(), 10)
    assert time.monotonic() - t < 2 + 2.5  # within the connect timeout (+ interpreter start)
    assert p.returncode == 1 and out == b""
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cotal: could not")
    assert "hunter2" not in err.decode() and "user" not in err.decode()


def test_badges_and_colour_rule():
    now = 1_000_000_000.0
    peer = Peer(id="local.w", name="w", kind="agent", status="waiting", reported_status="waiting",
                ts=now, seen_at=now, condition=Condition("rate_limit", since=now - 2_400_000))
    r = TextRenderer(colour=False)
    assert r.badge(peer, now) == "◐ waiting (rate_limit for 40m)"
    off = Peer(id="local.o", name="o", kind="agent", status="offline", reported_status="idle",
               ts=now, seen_at=now, offline_reason="stale")
    assert r.badge(off, now) == "⨯ offline (heartbeat lapsed)"
    line = r.presence(PresenceEvent("offline", off, now, "stale"))
    assert "offline o ⨯ offline (heartbeat lapsed)" in line
    assert age(540 * 60_000) == "9h" and age(-5) == "0s"
    coloured = TextRenderer(colour=True).badge(peer, now)
    assert coloured.startswith("\x1b[33m") and "◐" in coloured


def test_burst_line_and_json_shape():
    e = FeedEntry(index=0, id="m1", ts=1.0, received=1.0, kind="dm", from_id="local.a",
                  from_name="a", from_role=None, text="same", to_ids=("local.b", "local.c"),
                  to_names=("b", "c"), count=2)
    roster = Labels([("local.a", "a", None), ("local.b", "b", None), ("local.c", "c", None)])
    line = TextRenderer().message(e, roster)
    assert line.endswith("msg     a → b, c (2×): same")
    assert json_message(e)["to"] == ["local.b", "local.c"]


# the invisible code points the old hand list let through (issue 35)
INVISIBLE = "\u2061\u2062\u2063\u2064\u180e\u034f\u115f\u1160\u3164\uffa0\U000e0041\ufe0f\U000e0100"


async def test_plain_escapes_every_invisible_in_a_lying_peers_name(broker, nc, space):
    """A peer that writes only its own key and subject, with a display name that renders exactly
    like ada's: every invisible in it shows escaped on --plain, in the join and the message."""
    name = f"ad{INVISIBLE}a"
    rec = presence("mallory", "working", activity=f"busy{INVISIBLE}")
    rec["card"]["name"] = name
    await put_presence(nc, space, rec)
    m = message(space, "mallory", f"hi{INVISIBLE}there", channel="general")
    m["from"]["name"] = name
    await nc.jetstream().publish(f"cotal.{space}.chat.local.mallory.general", json.dumps(m).encode())
    p = await spawn("--plain", "--server", broker.url, "--space", space, "--backfill", "5")
    lines = await read_lines(p, 2)
    rc, err = await stop(p)
    assert rc == 0, err
    out = "\n".join(lines)
    assert not any(c in out for c in INVISIBLE), ascii(out)
    shown = "".join(f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"
                    for c in INVISIBLE)
    join = next(x for x in lines if " join " in x)
    msg = next(x for x in lines if " history " in x)
    assert f"ad{shown}a" in join and f"busy{shown}" in join, join
    assert f"ad{shown}a" in msg and f"hi{shown}there" in msg, msg
