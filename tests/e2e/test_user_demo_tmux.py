"""``cotal demo --auth user`` driven in real terminals (tmux), as a new user would, from the
printed ``COTAL_HOME`` alone: the ordinary user watches, lists their own seats (one manager's
view), attaches to their seat, types, detaches, is refused another owner's seat with the scope it
lacks, spawns a seat and stops it, and is refused ``input`` by name; nothing secret is shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.tmux import Tmux, needs_tmux

pytestmark = needs_tmux
ROOT = Path(__file__).resolve().parents[2]
SECRET_RE = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.|S[UAO][A-Z2-7]{40,}")


@pytest.fixture
def user_demo():
    env = dict(os.environ)
    env.pop("COTAL_HOME", None)
    p = subprocess.Popen([sys.executable, "-m", "cotal_tui.cli", "demo", "--auth", "user", "--headless",
                          "--agents", "4", "--space", "ua"],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    users: list[tuple[str, str]] = []
    info: dict[str, str] = {}
    end = time.monotonic() + 90
    while time.monotonic() < end and len(users) < 2:
        line = p.stdout.readline()
        if not line:
            break
        k, _, v = line.partition(":")
        k, v = k.strip(), v.strip()
        if k == "user":
            info["user"] = v.split()[0]
        elif k == "home":
            users.append((info.pop("user"), v))
        else:
            info[k] = v
    if len(users) < 2:
        p.kill()
        raise AssertionError(f"the user demo did not come up: {info} {p.stderr.read()[-2000:]}")
    yield {"users": dict(users), **info}
    p.terminate()
    try:
        p.wait(20)
    except subprocess.TimeoutExpired:
        p.kill()


def term_env(home: str) -> dict[str, str]:
    return {"TERM": "xterm-256color", "COTAL_HOME": home, "PATH": os.environ.get("PATH", "")}


async def test_user_demo_watch_ps_attach_spawn_stop(user_demo):
    sam = user_demo["users"]["sam"]
    cmd = f"{sys.executable} -m cotal_tui.cli"
    sh = Tmux("ua-shell")
    try:
        await sh.start("sh", term_env(sam), cols=160, rows=48)
        await sh.keys(f"{cmd} ps; echo ps-exit=$?", "Enter")
        screen = await sh.until(lambda s: re.search(r"ps-exit=\d", s), 60, "cotal ps")
        assert "ps-exit=0" in screen and "view only" in screen, screen
        mine = [ln.split()[0] for ln in screen.splitlines()
                if ln.split() and ln.split()[0] in ("ada", "bram", "cleo", "dax")]
        assert mine, screen
        others = sorted({"ada", "bram", "cleo", "dax"} - set(mine))
        seat = mine[0]
        await sh.keys("clear", "Enter")
        await sh.keys(f"{cmd} attach {seat}; echo attach-exit=$?", "Enter")
        await sh.until(lambda s: f"{seat}>" in s or f"{seat} ready" in s, 60, "the seat's prompt")
        await sh.keys("hello from sam", "Enter")
        await sh.until(lambda s: "echo: hello from sam" in s, 20, "the echo")
        await sh.keys("C-]")
        screen = await sh.until(lambda s: re.search(r"attach-exit=\d", s), 20, "the detach")
        assert "attach-exit=0" in screen and "detached" in screen, screen
        if others:
            await sh.keys("clear", "Enter")
            await sh.keys(f"{cmd} attach {others[0]}; echo other-exit=$?", "Enter")
            screen = await sh.until(lambda s: re.search(r"other-exit=\d", s), 60, "the refusal")
            assert "other-exit=0" not in screen and "admin" in screen, screen
        await sh.keys("clear", "Enter")
        await sh.keys(f"{cmd} spawn echo --name samecho; echo spawn-exit=$?", "Enter")
        screen = await sh.until(lambda s: re.search(r"spawn-exit=\d", s), 90, "the spawn")
        assert "spawn-exit=0" in screen, screen
        await sh.keys(f"{cmd} stop samecho; echo stop-exit=$?", "Enter")
        screen = await sh.until(lambda s: re.search(r"stop-exit=\d", s), 60, "the stop")
        assert "stop-exit=0" in screen and "stopped samecho" in screen, screen
        await sh.keys(f"{cmd} input {seat} hi; echo input-exit=$?", "Enter")
        screen = await sh.until(lambda s: re.search(r"input-exit=\d", s), 60, "the input refusal")
        assert "input-exit=1" in screen and "operator-only" in screen, screen
        assert not SECRET_RE.search(screen)
    finally:
        await sh.kill()
    watch = Tmux("ua-watch")
    try:
        await watch.start(f"{cmd} watch", term_env(sam), cols=160, rows=48)
        screen = await watch.until(lambda s: "roster" in s and "connected" in s, 60, "the console")
        assert not SECRET_RE.search(screen)
    finally:
        await watch.kill()
