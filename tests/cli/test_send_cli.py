"""``cotal send`` as a user runs it (a subprocess) against the real session broker."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import jsonschema

from attach.control.registry import kv_keys
from conftest import VECTORS
from cotal_tui.demo.broker import free_port
from support.observer import Heartbeat, dm, now_ms, post, presence, put_presence

COTAL = [sys.executable, "-m", "cotal_tui.cli"]
SCHEMA = json.loads((VECTORS / "cotal.schema.json").read_text())
MESSAGE = jsonschema.Draft7Validator({"$ref": "#/definitions/CotalMessage",
                                      "definitions": SCHEMA["definitions"]})


async def cotal_send(broker, space: str, *argv: str, stdin: bytes | None = None,
                     server: str | None = None) -> subprocess.CompletedProcess:
    cmd = COTAL + ["send", "--server", server or broker.url, "--space", space,
                   "--connect-timeout", "2", *argv]
    return await asyncio.to_thread(subprocess.run, cmd, input=stdin, capture_output=True,
                                   timeout=60)


def envelope(out: bytes) -> dict:
    """The envelope ``--json`` prints first (a DM or ask adds a receipt line after it)."""
    return json.loads(out.decode().splitlines()[0])


def one_sentence(err: bytes) -> str:
    text = err.decode()
    assert "Traceback" not in text, text
    assert text.count("\n") == 1 and text.startswith("cotal send: "), text
    return text


async def stored(nc, stream: str) -> list[dict]:
    js = nc.jetstream()
    info = await js.stream_info(stream)
    out = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        try:
            out.append(json.loads((await js.get_msg(stream, seq)).data))
        except Exception:
            pass
    return out


async def test_channel_post_exits_0_after_the_ack_and_prints_the_envelope(broker, nc, space):
    r = await cotal_send(broker, space, "--json", "--as", "ops", "#general", "ship it", "@Bram")
    assert r.returncode == 0, r.stderr
    [line] = r.stdout.decode().splitlines()
    env = json.loads(line)
    assert not list(MESSAGE.iter_errors(env))
    assert env["channel"] == "general" and env["mentions"] == ["bram"]
    assert env["from"] == {"id": "local.ops", "name": "ops", "role": "operator"}
    assert env["parts"] == [{"kind": "text", "text": "ship it @Bram"}]
    # acked before exit: the stream holds it now, byte for byte what was printed
    [got] = await stored(nc, f"CHAT_{space}")
    assert got == env
    # one-shot: no presence record, not even an offline one
    assert "local.ops" not in await kv_keys(nc.jetstream(), f"cotal_presence_{space}")


async def test_dm_from_stdin_is_byte_exact(broker, nc, space):
    hb = Heartbeat(nc, space)
    hb.add("bram", role="backend")
    hostile = "line one\n\x1b[31mred\x1b[0m \u202eevil\u202c \x07\x7f \U0001f600\n"
    async with hb:
        r = await cotal_send(broker, space, "--json", "@bram", "-", stdin=hostile.encode())
    assert r.returncode == 0, r.stderr
    env = envelope(r.stdout)  # line 2 is the receipt (test_send_receipt.py)
    assert env["to"] == "local.bram"
    assert env["parts"][0]["text"] == hostile[:-1]  # only the trailing newline is dropped
    [got] = await stored(nc, f"DM_{space}")
    assert got["parts"][0]["text"] == hostile[:-1] and got["id"] == env["id"]


async def test_dm_to_an_endpoint_is_refused_and_nothing_is_sent(broker, nc, space):
    hb = Heartbeat(nc, space)
    hb.add("dash", kind="endpoint")
    async with hb:
        r = await cotal_send(broker, space, "@dash", "hello")
    assert r.returncode == 1
    assert "endpoint" in one_sentence(r.stderr)
    r = await cotal_send(broker, space, "@nobody", "hello")
    assert r.returncode == 1 and "nobody" in one_sentence(r.stderr)
    assert (await nc.jetstream().stream_info(f"DM_{space}")).state.messages == 0


async def test_ask_and_replies(broker, nc, space):
    r = await cotal_send(broker, space, "--json", "--queue", "--ask", "reviewer", "review PR 42")
    assert r.returncode == 0, r.stderr
    ask = envelope(r.stdout)
    assert ask["toService"] == "reviewer"
    assert (await nc.jetstream().stream_info(f"TASK_{space}")).state.messages == 1

    # a reply with no target goes where the original came from, in its thread
    orig = await post(nc, space, "ada", "team.backend", "who owns the cache?")
    r = await cotal_send(broker, space, "--json", "--reply-to", orig["id"], "I do")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["channel"] == "team.backend" and rep["replyTo"] == orig["id"]
    assert rep["contextId"] == orig["id"]

    d = await dm(nc, space, "bram", "ops", "need a hand?")
    r = await cotal_send(broker, space, "--json", "--reply-to", d["id"], "yes please")
    assert r.returncode == 0, r.stderr
    rep = envelope(r.stdout)
    assert rep["to"] == "local.bram" and rep["replyTo"] == d["id"]

    # with a target, replyTo/contextId are set even when the original cannot be found
    r = await cotal_send(broker, space, "--json", "--reply-to", "no-such-id", "#general", "re")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["replyTo"] == rep["contextId"] == "no-such-id"
    r = await cotal_send(broker, space, "--reply-to", "no-such-id", "orphan")
    assert r.returncode == 1 and "not found" in one_sentence(r.stderr)


async def test_dead_broker_is_one_sentence_and_exit_1(broker):
    r = await cotal_send(broker, "main", "#general", "hello",
                         server=f"nats://127.0.0.1:{free_port()}")
    assert r.returncode == 1
    assert "could not" in one_sentence(r.stderr)
    assert r.stdout == b""


async def test_bad_usage_exits_2(broker, space):
    for argv in (["hello"], ["#general"], ["#general", "   "], ["#team.*", "x"], ["@", "x"],
                 ["--ask", "", "x"], ["#general", "a", "-"], ["--bogus", "#general", "x"],
                 ["--timeout", "0", "#general", "x"]):
        r = await cotal_send(broker, space, *argv)
        assert r.returncode == 2, (argv, r.stderr)
        assert b"Traceback" not in r.stderr and r.stderr.strip(), argv
    r = await cotal_send(broker, space, "#general", "-", stdin=b"\xff\xfe bad")
    assert r.returncode == 2 and b"UTF-8" in r.stderr


class Namesakes(Heartbeat):
    """Live peers whose display names are not their actors (``{actor: name}``)."""

    def __init__(self, nc, space: str, names: dict[str, str]) -> None:
        super().__init__(nc, space, period=1.0)
        self.names = names

    async def beat(self) -> None:
        for actor, name in self.names.items():
            rec = presence(actor)
            rec["card"]["name"] = name
            await put_presence(self.nc, self.space, rec)


async def test_a_lapsed_name_with_a_live_namesake_is_refused(broker, nc, space):
    """``@ada`` when the real ada's heartbeat has lapsed and a peer of another principal
    heartbeats as ``ada``: both are candidates, so nothing goes to the namesake."""
    await put_presence(nc, space, presence("ada", "working", ts=now_ms() - 60_000))  # lapsed
    hb = Namesakes(nc, space, {"mallory": "ada"})
    async with hb:
        r = await cotal_send(broker, space, "@ada", "the deploy key is in the vault")
        # an id always works: the real ada's principal is not ambiguous
        ok = await cotal_send(broker, space, "--json", "@local.ada", "hello")
    assert r.returncode == 1
    err = one_sentence(r.stderr)
    assert "local.ada" in err and "local.mallory" in err and "nothing was sent" in err, err
    assert ok.returncode == 0, ok.stderr
    assert envelope(ok.stdout)["to"] == "local.ada"
    [only] = await stored(nc, f"DM_{space}")
    assert only["to"] == "local.ada" and only["parts"][0]["text"] == "hello"


async def test_an_invisible_or_folded_look_alike_is_a_candidate(broker, nc, space):
    hb = Namesakes(nc, space, {"ada": "ada", "mallory": "\uff21\u200dda"})  # fullwidth A, a ZWJ
    async with hb:
        r = await cotal_send(broker, space, "@ada", "hello")
    assert r.returncode == 1
    err = one_sentence(r.stderr)
    assert "local.ada" in err and "local.mallory" in err and "\u200d" not in err, err
    assert (await nc.jetstream().stream_info(f"DM_{space}")).state.messages == 0
