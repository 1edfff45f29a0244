"""``cotal demo --auth static`` driven in real terminals (tmux): the mesh runs in operator mode
with its seed in a temp ``COTAL_HOME`` and a current registry entry; ``cotal watch`` shows the
roster, ``cotal ps`` lists the seats and ``cotal attach`` shows a seat's shell prompt, runs a
command remotely and detaches — each command minting its own credential from the root."""

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
def static_demo(tmp_path):
    env = dict(os.environ)
    env.pop("COTAL_HOME", None)
    p = subprocess.Popen([sys.executable, "-m", "cotal_tui.cli", "demo", "--auth", "static", "--headless",
                          "--shell", "--agents", "3", "--space", "sec"],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    info: dict[str, str] = {}
    end = time.monotonic() + 60
    while time.monotonic() < end and "home" not in info:
        line = p.stdout.readline()
        if not line:
            break
        k, _, v = line.partition(":")
        info[k.strip()] = v.strip()
    if "home" not in info:
        p.kill()
        raise AssertionError(f"the static demo did not come up: {info} {p.stderr.read()[-2000:]}")
    yield info
    p.terminate()
    try:
        p.wait(20)
    except subprocess.TimeoutExpired:
        p.kill()
    assert not Path(info["home"]).exists()  # the temp COTAL_HOME and its seed are removed


def term_env(home: str) -> dict[str, str]:
    return {"TERM": "xterm-256color", "COTAL_HOME": home, "PATH": os.environ.get("PATH", "")}


async def test_static_demo_watch_ps_attach(static_demo):
    home = static_demo["home"]
    assert Path(home, "meshes", "sec.json").exists() and Path(home, "current-mesh").read_text().strip() == "sec"
    cmd = f"{sys.executable} -m cotal_tui.cli"
    names = ("ada", "bram", "cleo")

    watch = Tmux("watch")
    try:
        await watch.start(f"{cmd} watch", term_env(home), cols=160, rows=48)
        screen = await watch.until(lambda s: "roster" in s and all(n in s for n in names), 60,
                                   "the roster over the minted admin view")
        assert not SECRET_RE.search(screen)
        # the managers/seats panel: ps on a minted instrument marks the hosted seats (it used
        # to say the view credential cannot read the manager registry, and mark nothing)
        screen = await watch.until(lambda s: s.count("▸") >= len(names), 40, "the managed-seat markers")
        assert "cannot read the manager registry" not in screen
    finally:
        await watch.kill()

    ps = Tmux("ps")
    try:
        await ps.start(f"sh -c '{cmd} ps; echo ps-exit=$?; sleep 30'", term_env(home), cols=160, rows=20)
        screen = await ps.until(lambda s: "ps-exit=" in s, 40, "cotal ps")
        assert "ps-exit=0" in screen, screen
        rows = [ln.split()[0] for ln in screen.splitlines() if ln.split() and ln.split()[0] in names]
        assert sorted(rows) == sorted(names), screen
        assert not SECRET_RE.search(screen)
    finally:
        await ps.kill()

    att = Tmux("attach")
    try:
        await att.start(f"sh -c '{cmd} attach {names[1]}; echo attach-exit=$?; sleep 30'", term_env(home),
                        cols=120, rows=32)
        await att.until(lambda s: any(ln.rstrip().endswith(("$", "#")) for ln in s.splitlines()), 40,
                        "the seat's shell prompt")
        await att.keys("echo static-$((6*7))", "Enter")  # the remote shell computes it
        await att.until(lambda s: "static-42" in s.replace("static-$((6*7))", ""), 20, "the remote output")
        await att.keys("C-]")
        screen = await att.until(lambda s: "attach-exit=" in s, 20, "the detach")
        assert "attach-exit=0" in screen and "detached" in screen, screen
        assert not SECRET_RE.search(screen)
    finally:
        await att.kill()
