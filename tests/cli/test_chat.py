"""``cotal chat``: the line parser and completion (pure), then the real command in a real
terminal (tmux) against the real broker and the demo team: a post the broker routes with the
exact text, Tab completion from the live roster, an agent's line printed above a half-typed
prompt that stays intact, a DM answered by the team, ``/reply`` threaded, read-only refusing
everything without a single publish, and Ctrl-D leaving with the offline record."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import until
from cotal_tui.cli.chat import (
    Action,
    _completer_class,
    addressed_to,
    parse,
)
from cotal_tui.operator import read_only_from_args
from meshview.act.send import Original, Send
from cotal_tui.demo.broker import free_port
from cotal_tui.demo.team import Team, TeamSchedule
from support.tmux import needs_tmux

COTAL = str(Path(sys.executable).with_name("cotal"))
QUIET = TeamSchedule(crash_after=None, restart_after=None, chat_interval=3600)
PROMPT = "#general> "


# -- pure: the line parser -------------------------------------------------------------------

@pytest.mark.parametrize("line,want", [
    ("", Action("none")),
    ("   ", Action("none")),
    ("hello there", Send("channel", "general", "hello there")),
    ("  padded  ", Send("channel", "general", "padded")),
    ("#ops deploy now", Send("channel", "ops", "deploy now")),
    ("#team.backend hi", Send("channel", "team.backend", "hi")),
    ("#ops", Action("join", "ops")),
    ("/join #ops", Action("join", "ops")),
    ("/join ops", Action("join", "ops")),
    ("/dm @bram hi there", Send("dm", "bram", "hi there")),
    ("/dm bram hi", Send("dm", "bram", "hi")),
    ("/ask @reviewer look at PR 42", Send("ask", "reviewer", "look at PR 42")),
    ("/reply on it", Send("reply", None, "on it")),
    ("/who", Action("who")),
    ("/help", Action("help")),
    ("/QUIT", Action("quit")),
    ("//etc/hosts is the file", Send("channel", "general", "/etc/hosts is the file")),
])
def test_parse(line, want):
    assert parse(line, "general") == want


@pytest.mark.parametrize("line,says", [
    ("/dm @bram", "/dm needs @agent and text"),
    ("/dm", "/dm needs @agent and text"),
    ("/ask @reviewer", "/ask needs @role and text"),
    ("/reply", "/reply needs text"),
    ("/join", "/join needs one channel name"),
    ("/join #a b", "/join needs one channel name"),
    ("/join #*", "/join needs one channel name"),
    ("#ops.> hi", "is not a channel name"),
    ("#", "is not a channel name"),
    ("/frobnicate x", "unknown command /frobnicate"),
])
def test_parse_refuses_with_one_sentence(line, says):
    a = parse(line, "general")
    assert a.kind == "error" and says in a.text and "\n" not in a.text


def test_plain_text_goes_to_the_current_channel():
    assert parse("hi", "ops") == Send("channel", "ops", "hi")


def test_read_only_from_the_flag_or_the_environment(monkeypatch):
    monkeypatch.delenv("COTAL_READ_ONLY", raising=False)
    assert read_only_from_args(SimpleNamespace(read_only=False)) is None
    assert read_only_from_args(SimpleNamespace(read_only=True)) == "started with --read-only"
    monkeypatch.setenv("COTAL_READ_ONLY", "1")
    assert read_only_from_args(SimpleNamespace(read_only=False)) == "COTAL_READ_ONLY is set"
    monkeypatch.setenv("COTAL_READ_ONLY", "0")
    assert read_only_from_args(SimpleNamespace(read_only=False)) is None


# -- pure: completion ------------------------------------------------------------------------

def _peer(name, role, kind="agent"):
    return SimpleNamespace(name=name, role=role, kind=kind)


SNAP = SimpleNamespace(
    agents=(_peer("bram", "backend"), _peer("brenda", "reviewer"), _peer("cleo", "frontend"),
            _peer("evil\x1b[2J", "reviewer"), _peer("two words", "ops")),
    channels=(SimpleNamespace(name="releases"), SimpleNamespace(name="team.backend"),
              SimpleNamespace(name="events.local.bram"), SimpleNamespace(name="bad\x1bname")),
)


def _complete(text: str) -> list[str]:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    c = _completer_class()(lambda: SNAP)
    return [x.text for x in c.get_completions(Document(text), CompleteEvent(completion_requested=True))]


def test_completion_from_the_live_snapshot():
    assert _complete("/dm @br") == ["@bram ", "@brenda "]
    assert _complete("/dm @cl") == ["@cleo "]
    assert _complete("/ask @r") == ["@reviewer "]  # roles after /ask
    assert _complete("/ask @reviewer please @b") == ["@bram ", "@brenda "]  # then mentions
    assert _complete("hey @c") == ["@cleo "]
    assert _complete("#re") == ["#releases "]
    assert _complete("#") == ["#general ", "#releases ", "#team.backend "]  # no event channels
    assert _complete("/w") == ["/who "]
    assert _complete("/re") == ["/reply "]
    assert _complete("say /re") == []  # commands only at the start
    assert _complete("plain") == []
    # a name that is not one typeable word (hostile, or with a space) is never offered
    assert not [c for c in _complete("/dm @") if "\x1b" in c or " " in c.strip()]
    assert not [c for c in _complete("#") if "\x1b" in c]


# -- pure: what /reply answers ---------------------------------------------------------------

def _row(**kw):
    base = {"id": "m1", "ts": 1.0, "kind": "dm", "from_id": "local.bram", "from_name": "bram",
            "from_role": "backend", "text": "hi", "channel": None, "to_ids": ("local.op",),
            "historical": False, "context_id": "ctx-9"}
    base.update(kw)
    return SimpleNamespace(**base)


def test_addressed_to_the_operator():
    assert addressed_to(_row(), "local.op", "op")
    assert not addressed_to(_row(to_ids=("local.cleo",)), "local.op", "op")
    assert not addressed_to(_row(from_id="local.op"), "local.op", "op")  # our own
    assert not addressed_to(_row(historical=True), "local.op", "op")
    ch = {"kind": "channel", "channel": "general", "to_ids": ()}
    assert addressed_to(_row(text="ping @OP please", **ch), "local.op", "op")
    assert not addressed_to(_row(text="ping @opal", **ch), "local.op", "op")
    assert not addressed_to(_row(text="mail op@x.org", **ch), "local.op", "op")


def test_reply_original_keeps_the_thread():
    m = Original.of_entry(_row())
    assert (m.id, m.recipient, m.channel, m.thread, m.sender) == ("m1", "local.op", None, "ctx-9",
                                                                  "local.bram")
    m = Original.of_entry(_row(kind="channel", channel="ops", to_ids=()))
    assert (m.channel, m.recipient) == ("ops", None)


# -- the command: no terminal, no broker -----------------------------------------------------

def test_no_terminal_is_usage_exit_2(tmp_path):
    r = subprocess.run([COTAL, "chat", "--server", "nats://127.0.0.1:1"], check=False,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
                       env={**os.environ, "COTAL_HOME": str(tmp_path)})
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "needs a terminal" in r.stderr and not r.stdout


def test_unreachable_broker_is_one_sentence_exit_1(tmp_path):
    master, slave = pty.openpty()
    try:
        r = subprocess.run([COTAL, "chat", "--server", f"nats://127.0.0.1:{free_port()}",
                            "--connect-timeout", "1"], stdin=slave, stdout=slave,
                           check=False, stderr=subprocess.PIPE, text=True, timeout=30,
                           env={**os.environ, "COTAL_HOME": str(tmp_path)})
    finally:
        os.close(slave)
        os.close(master)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("cotal chat: could not connect")
    assert "Traceback" not in r.stderr


# -- the command in a real terminal ----------------------------------------------------------

class Probe:
    """A core subscription that records every publish the broker routes on ``subject``."""

    def __init__(self) -> None:
        self.msgs: list[tuple[str, bytes]] = []

    @classmethod
    async def on(cls, nc, subject: str) -> Probe:
        p = cls()

        async def cb(m) -> None:
            p.msgs.append((m.subject, m.data))

        await nc.subscribe(subject, cb=cb)
        await nc.flush()
        return p

    def envelopes(self, from_id: str) -> list[dict]:
        out = []
        for _, data in self.msgs:
            try:
                o = json.loads(data)
            except ValueError:
                continue
            if isinstance(o, dict) and (o.get("from") or {}).get("id") == from_id:
                out.append(o)
        return out


def _text(env: dict) -> str:
    return "".join(p.get("text", "") for p in env.get("parts", []) if p.get("kind") == "text")


def _prompt_line(screen: str) -> str:
    lines = [ln for ln in screen.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


async def _presence(nc, space: str, key: str) -> dict | None:
    kv = await nc.jetstream().key_value(f"cotal_presence_{space}")
    try:
        e = await kv.get(key)
    except Exception:
        return None
    return json.loads(e.value) if e and e.value else None


def _chat_cmd(broker, space: str, *extra: str) -> str:
    return (f"env -u COLUMNS -u LINES {COTAL} chat --server {broker.url} --space {space} "
            f"{' '.join(extra)}; echo chat-exit=$?; sleep 60")


def _env(tmp_path) -> dict[str, str]:
    return {"COTAL_HOME": str(tmp_path), "TERM": "xterm-256color", "LANG": "C.UTF-8",
            "PATH": os.environ.get("PATH", "")}


@needs_tmux
async def test_chat_in_tmux(broker, nc, space, tmux, tmp_path):
    team = Team(nc, space, seed=4, schedule=QUIET, answer_delay_s=0.05)
    await team.start()
    try:
        await _chat_session(broker, nc, space, tmux, tmp_path, team)
    finally:
        await team.stop()


async def _chat_session(broker, nc, space, tmux, tmp_path, team):
    me = "local.op"
    bram, cleo = team.by_name("bram"), team.by_name("cleo")
    posts = await Probe.on(nc, f"cotal.{space}.chat.>")
    wire = await Probe.on(nc, "cotal.>")
    await tmux.start(_chat_cmd(broker, space, "--as", "op"), _env(tmp_path))
    await tmux.until(lambda s: f"bram/{bram.role}" in s and _prompt_line(s) == PROMPT.strip(),
                     what="the roster and the prompt")

    # a post: the broker routes it with exactly the typed text, and the stream shows it once
    await tmux.keys("#general hello", "Enter")
    sent = await until(lambda: [e for e in posts.envelopes(me) if _text(e) == "hello"], 10,
                       "the post on chat.>")
    assert sent[0]["channel"] == "general" and sent[0]["from"]["name"] == "op"
    s = await tmux.until(lambda s: "op/operator → #general: hello" in s, what="the post shown")
    assert s.count("→ #general: hello") == 1

    # Tab completes an agent's name from the live roster
    await tmux.keys("/dm @br", "Tab")
    await tmux.until(lambda s: _prompt_line(s) == f"{PROMPT}/dm @bram", what="the completion")

    # the DM goes out and the demo agent's answer prints
    await tmux.keys("hi", "Enter")
    dm = (await until(lambda: [e for e in wire.envelopes(me) if e.get("to") == bram.id], 10,
                      "the DM"))[0]
    assert _text(dm) == "hi"
    ans = (await until(lambda: [a for a in team.answers if a["reply_to"] == dm["id"]], 10,
                       "bram's answer"))[0]
    answer = next(e for e in wire.envelopes(bram.id) if e["id"] == ans["id"])
    await tmux.until(lambda s: f"bram/{bram.role} → op: {_text(answer)}" in s,
                     what="the answer printed")

    # an agent's line prints ABOVE a half-typed line, which stays intact on the prompt
    await tmux.keys("draft not sent yet")
    await tmux.until(lambda s: _prompt_line(s) == f"{PROMPT}draft not sent yet",
                     what="the typed partial line")
    await team.post(cleo, "general", "agent line while typing")
    s = await tmux.until(lambda s: "agent line while typing" in s, what="the agent's line")
    lines = [ln for ln in s.splitlines() if ln.strip()]
    assert lines[-1] == f"{PROMPT}draft not sent yet"
    assert [ln for ln in lines[:-1] if "cleo/frontend → #general: agent line while typing" in ln]
    assert not [e for e in wire.envelopes(me) if "draft" in _text(e)]

    # /reply answers the last message addressed to us, in its thread
    await tmux.keys("C-u", "/reply thanks bram", "Enter")
    rep = (await until(lambda: [e for e in wire.envelopes(me) if _text(e) == "thanks bram"], 10,
                       "the reply"))[0]
    assert rep["to"] == bram.id and rep["replyTo"] == answer["id"]
    assert rep["contextId"] == (answer.get("contextId") or answer["id"])

    # /who: the roster from the live model, the operator marked
    await tmux.keys("/who", "Enter")
    s = await tmux.until(lambda s: "who: " in s and "(you)" in s, what="the roster")
    assert f"bram/{bram.role}" in s and "op/operator" in s

    # a failed send is one sentence and its line comes back on the prompt for editing
    await tmux.keys("/dm @nobody hi", "Enter")
    await tmux.until(lambda s: "! no agent named 'nobody' on the roster; nothing was sent." in s
                     and _prompt_line(s) == f"{PROMPT}/dm @nobody hi", what="the refusal")
    await tmux.keys("C-u")
    await tmux.until(lambda s: _prompt_line(s) == PROMPT.strip(), what="the prompt cleared")

    # Ctrl-D leaves with 0 and the operator's presence goes offline
    assert (await _presence(nc, space, me))["status"] != "offline"
    await tmux.keys("C-d")
    s = await tmux.until(lambda s: "chat-exit=" in s, 10, what="the exit")
    assert "chat-exit=0" in s and "Traceback" not in s
    await until(lambda: _offline(nc, space, me), 5, "the offline record")
    history = (tmp_path / "chat_history").read_text()
    assert "+#general hello" in history and "+/reply thanks bram" in history
    assert oct((tmp_path / "chat_history").stat().st_mode & 0o777) == "0o600"


async def _offline(nc, space, key) -> bool:
    rec = await _presence(nc, space, key)
    return bool(rec and rec["status"] == "offline")


@needs_tmux
async def test_chat_read_only_refuses_every_send_and_publishes_nothing(broker, nc, space, tmux,
                                                                       tmp_path):
    me = "local.readonly_op"
    everything = await Probe.on(nc, ">")
    await tmux.start(_chat_cmd(broker, space, "--read-only", "--as", "readonly-op"),
                     _env(tmp_path))
    await tmux.until(lambda s: _prompt_line(s) == f"[read-only] {PROMPT}".strip(),
                     what="the read-only prompt")
    sentence = "! read-only - started with --read-only; nothing was sent."
    lines = ["#general hi", "plain text", "/dm @bram x", "/ask @reviewer x", "/reply x"]
    for i, line in enumerate(lines, 1):
        await tmux.keys(line, "Enter")
        await tmux.until(lambda s, i=i: s.count(sentence) == i, what=f"refusal {i}")
    await tmux.keys("C-d")
    s = await tmux.until(lambda s: "chat-exit=" in s, 10, what="the exit")
    assert "chat-exit=0" in s
    # a marker through the same broker: everything routed before it has arrived
    await nc.publish(f"cotal.{space}.trace.fence", b"{}")
    await until(lambda: any(s.endswith("trace.fence") for s, _ in everything.msgs), 5, "fence")
    assert not [s for s, d in everything.msgs if b"readonly" in d or "readonly" in s]
    assert await _presence(nc, space, me) is None
