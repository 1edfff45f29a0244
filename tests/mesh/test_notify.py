"""Notifications: one per waiting episode, rate-limited, never for the operator's own peer.

The end-to-end test runs ``cotal watch --notify --notify-cmd`` in a real terminal (tmux) against
the test broker, with two agents whose presence the test writes itself (so it knows exactly how
many waiting episodes there are), and reads what the console wrote to the terminal through
``pipe-pane``: the bell and the OSC 9 notification appear exactly once per episode, a flap
inside the settle time is the same episode, and the command ran once per episode with the
agent in its environment.
"""

from __future__ import annotations

import asyncio
import json
import random
import time


from conftest import until
from cotal_tui.config import notify_settings
from cotal_tui.demo.team import Agent, mint_uid
from meshview.lines.notify import (
    Alert,
    Notifier,
    WaitingEpisodes,
    clean,
    terminal_escape,
)
from meshview.model.snapshot import NeedsYou
from meshview.wire.names import bucket_names
from support.tmux import COTAL, console_env, needs_tmux



def need(pid: str, name: str | None = None, code: str | None = "input") -> NeedsYou:
    return NeedsYou(id=pid, name=name or pid, role="dev", condition_code=code,
                    condition_message="which branch?", condition_age_ms=0.0,
                    status_age_ms=0.0, heartbeat_age_ms=0.0, activity=None)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_one_alert_per_episode_and_flaps_are_one_episode():
    c = Clock()
    w = WaitingEpisodes("main", settle_s=5, clock=c)
    assert [a.name for a in w.update([need("a")])] == ["a"]
    assert w.update([need("a")]) == []  # still waiting: same episode
    c.t += 1
    assert w.update([]) == []  # left waiting...
    c.t += 2
    assert w.update([need("a")]) == []  # ...back within the settle time: the same episode
    c.t += 1
    w.update([])
    c.t += 6
    w.update([])
    assert [a.name for a in w.update([need("a")])] == ["a"]  # a new episode
    assert w.episodes == 2


def test_rate_limit_holds_back_and_says_so():
    c = Clock()
    w = WaitingEpisodes("main", burst=2, refill_s=10, clock=c)
    out = w.update([need(f"p{i}") for i in range(5)])
    assert [a.agent_id for a in out] == ["p0", "p1"] and w.held == 3
    c.t += 10  # one token back
    out = w.update([need(f"p{i}") for i in range(6)])
    assert [a.agent_id for a in out] == ["p5"] and out[0].more == 3
    assert "(+3 more held back)" in out[0].text()
    assert w.episodes == 6


def test_never_for_the_operators_own_peer():
    c = Clock()
    mine = {"local.me"}
    w = WaitingEpisodes("main", ignore=lambda: mine, clock=c)
    assert [a.agent_id for a in w.update([need("local.me"), need("local.bo")])] == ["local.bo"]
    assert w.episodes == 1


def test_escapes_are_clean_and_wrapped_for_tmux():
    a = Alert("local.ada", "ada\x1b]0;x\x07", "dev", "approval", "run\nmigrations; now?",
              "main", "nats://127.0.0.1:4222")
    e = terminal_escape(a, "osc9", tmux=False)
    assert e.startswith("\x07\x1b]9;cotal: ada ]0;x needs you: approval - run migrations; now?")
    assert e.endswith("\x07") and e.count("\x1b") == 1  # no escape of the agent's survives
    both = terminal_escape(a, "both", tmux=False)
    # OSC 777's fields are split on ";": none in the title
    assert "\x1b]777;notify;cotal: ada ]0,x needs you;ada ]0;x needs you: approval" in both
    wrapped = terminal_escape(a, "osc9", tmux=True)
    assert wrapped.startswith("\x07\x1bPtmux;\x1b\x1b]9;cotal: ") and wrapped.endswith("\x1b\\")
    assert clean("a\x9bb\x00c") == "a b c"
    env = a.env()
    assert env["COTAL_AGENT"] == "ada ]0;x" and env["COTAL_AGENT_ID"] == "local.ada"
    assert env["COTAL_CONDITION"] == "approval" and env["COTAL_SPACE"] == "main"


def test_settings_flags_over_environment_over_file(tmp_path, monkeypatch):
    for k in ("COTAL_NOTIFY", "COTAL_NOTIFY_CMD", "COTAL_NOTIFY_ESCAPE"):
        monkeypatch.delenv(k, raising=False)
    (tmp_path / "config.toml").write_text(
        '[notify]\nenabled = true\ncommand = "notify-send cotal"\nescape = "osc777"\nsettle = 2\n')
    s = notify_settings(None, home=tmp_path)
    assert (s.terminal, s.command, s.style, s.settle_s) == (True, "notify-send cotal", "osc777", 2)
    monkeypatch.setenv("COTAL_NOTIFY_ESCAPE", "both")
    monkeypatch.setenv("COTAL_NOTIFY_CMD", "true")
    s = notify_settings(None, home=tmp_path)
    assert (s.command, s.style) == ("true", "both")

    class Args:
        notify = False
        notify_cmd = "echo flag"
        notify_escape = "bell"
    s = notify_settings(Args(), home=tmp_path)
    assert (s.command, s.style) == ("echo flag", "bell")
    assert s.sources == {"terminal": "config.toml", "command": "flag", "style": "flag",
                         "settle_s": "config.toml"}
    (tmp_path / "config.toml").write_text("[notify\n")
    s = notify_settings(None, home=tmp_path)
    assert s.warning and "ignored" in s.warning


async def test_switched_off_it_still_tracks_episodes():
    got: list[str] = []
    n = Notifier("main", write=got.append, enabled=False)
    n.update([need("a")])
    n.enabled = True
    n.update([need("a")])  # already waiting before it was switched on: no alert
    assert got == []
    n.update([need("a"), need("b")])
    assert len(got) == 1 and "b needs you" in got[0]


class Seat:
    """An agent whose presence the test writes (heartbeats included), so it knows exactly
    when each waiting episode starts."""

    def __init__(self, kv, name: str, seed: int) -> None:
        self.kv = kv
        self.a = Agent(name, "reviewer", "claude-code", "m", [], mint_uid(random.Random(seed)))

    async def put(self, status: str, code: str | None = None) -> None:
        now = int(time.time() * 1000)
        cond = ({"code": code, "source": "harness", "message": f"{code} for PR 9",
                 "since": now} if code else None)
        if status != self.a.status:
            self.a.status_since = now
        self.a.status, self.a.condition = status, cond
        await self.kv.put(self.a.id, json.dumps(self.a.presence(now)).encode())

    async def heartbeat(self) -> None:
        while True:
            await asyncio.sleep(1.5)
            await self.kv.put(self.a.id, json.dumps(self.a.presence(int(time.time() * 1000)))
                              .encode())


@needs_tmux
async def test_escapes_once_per_episode_in_a_real_terminal(broker, nc, space, tmux, tmp_path):
    (tmp_path / "config.toml").write_text("[notify]\nsettle = 1.5\n")
    raw = tmp_path / "pane.raw"
    envlog = tmp_path / "notify-cmd.env"
    cmd = f"env | grep ^COTAL_ | sort >> {envlog}; echo --- >> {envlog}"
    env = console_env(tmp_path)
    (tmp_path / "cmd").write_text(cmd)
    kv = await nc.jetstream().key_value(bucket_names(space).presence)
    wendy, xavi = Seat(kv, "wendy", 1), Seat(kv, "xavi", 2)
    await wendy.put("idle")
    await xavi.put("idle")
    beats = [asyncio.create_task(s.heartbeat()) for s in (wendy, xavi)]
    try:
        await tmux.start(f"sleep 0.5; env -u COLUMNS -u LINES {COTAL} watch --server {broker.url} "
                         f"--space {space} --notify --notify-cmd \"$(cat {tmp_path / 'cmd'})\"; "
                         "sleep 60", env)
        await tmux.run("pipe-pane", "-O", "-t", tmux.name, f"cat >> {raw}")
        await tmux.until(lambda s: "wendy/reviewer" in s and "xavi/reviewer" in s,
                         what="the console with both agents")

        def count(name: str) -> int:
            data = raw.read_bytes().decode("utf-8", "replace") if raw.exists() else ""
            return data.count(f"]9;cotal: {name} needs you")

        # episode 1 of wendy
        await wendy.put("waiting", "approval")
        await until(lambda: count("wendy") == 1, 20, "wendy's first notification")
        # a flap: out of waiting and back within the settle time is the same episode
        await wendy.put("working")
        await tmux.until(lambda s: "◐ 0 waiting" in s, what="wendy working")
        await wendy.put("waiting", "approval")
        # xavi's episode is the barrier: the flap was processed before it
        await xavi.put("waiting", "input")
        await until(lambda: count("xavi") == 1, 20, "xavi's notification")
        assert count("wendy") == 1
        # out of waiting for longer than the settle time: the next wait is a new episode
        await wendy.put("working")
        await tmux.until(lambda s: "◐ 1 waiting" in s, what="only xavi waiting")
        left = time.monotonic()
        await until(lambda: time.monotonic() - left > 2.0, 5, "the settle time to pass")
        await wendy.put("waiting", "input")
        await until(lambda: count("wendy") == 2, 20, "wendy's second notification")
        await until(lambda: envlog.exists() and envlog.read_text().count("---") == 3, 20,
                    "three --notify-cmd runs")
        data = raw.read_bytes().decode("utf-8", "replace")
        # each notification came with the bell, wrapped for tmux's passthrough
        assert data.count("\x07\x1bPtmux;\x1b\x1b]9;cotal: ") == 3
        # the screen was not torn: the console still draws itself
        assert "roster ·" in await tmux.screen()
    finally:
        for b in beats:
            b.cancel()
        await tmux.keys("q")
    runs = [dict(line.split("=", 1) for line in block.strip().splitlines())
            for block in envlog.read_text().split("---") if block.strip()]
    assert [(r["COTAL_AGENT"], r["COTAL_CONDITION"]) for r in runs] == [
        ("wendy", "approval"), ("xavi", "input"), ("wendy", "input")]
    for r in runs:
        assert r["COTAL_SPACE"] == space and r["COTAL_EVENT"] == "waiting"
        assert r["COTAL_AGENT_ID"] == f"local.{r['COTAL_AGENT']}"
        assert r["COTAL_ROLE"] == "reviewer" and r["COTAL_MESSAGE"].endswith("for PR 9")
        assert r["COTAL_SERVER"] == broker.url


async def test_json_stream_runs_the_command_and_keeps_stdout_clean(broker, nc, space, tmp_path):
    from support.watchproc import WatchProc

    envlog = tmp_path / "cmd.env"
    kv = await nc.jetstream().key_value(bucket_names(space).presence)
    yara = Seat(kv, "yara", 3)
    await yara.put("idle")
    w = WatchProc.start("--json", "--server", broker.url, "--space", space, "--notify",
                        "--notify-cmd", f"echo \"$COTAL_AGENT:$COTAL_CONDITION\" >> {envlog}",
                        env={"COTAL_HOME": str(tmp_path)})
    try:
        await until(lambda: any(o.get("name") == "yara" for o in w.objs("presence")), 20,
                    "yara on the stream")
        await yara.put("waiting", "approval")
        await until(lambda: envlog.exists() and envlog.read_text() == "yara:approval\n", 20,
                    "the command")
    finally:
        w.stop()
    assert b"\x1b" not in w.stdout_bytes and b"\x07" not in w.stdout_bytes
    waiting = [o for o in w.objs("presence") if o["status"] == "waiting"]
    assert waiting and waiting[0]["condition"]["code"] == "approval"
