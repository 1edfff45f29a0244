"""``cotal demo`` in a real terminal (tmux): roster ``a`` attaches to a seat's bash, a typed
command runs remotely and its output shows in the pane, Ctrl-] brings the console back.
Every step polls ``capture-pane`` with a deadline."""

from __future__ import annotations

import os
import sys


from support.tmux import needs_tmux

pytestmark = needs_tmux


async def test_roster_a_attaches_types_and_detaches(tmux, tmp_path):
    env = {"TERM": "xterm-256color", "COTAL_HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    await tmux.start(f"{sys.executable} -m cotal_tui.cli demo --shell --agents 3", env, cols=160,
                     rows=48)
    await tmux.until(lambda s: "roster" in s, 60, "the console")
    await tmux.until(lambda s: "managed pty" in s, 30, "managed seats in the roster")
    for attempt in range(3):  # a user presses again if a busy machine ate the first keys
        await tmux.keys("h")  # focus the roster
        await tmux.keys("a")
        try:
            screen = await tmux.until(lambda s: "attached · Ctrl-]" in s, 15, "the attach screen")
            break
        except AssertionError:
            if attempt == 2:
                raise
    await tmux.until(lambda s: any(ln.rstrip().endswith(("$", "#"))
                                   for ln in s.split("attached · Ctrl-]", 1)[1].splitlines()),
                     20, "the seat's shell prompt")
    await tmux.keys("echo tmux-$((6*7))", "Enter")  # the remote shell computes it: no local echo fakes 42
    await tmux.until(lambda s: "tmux-42" in s.replace("tmux-$((6*7))", ""), 20, "the command's output")
    await tmux.keys("C-]")
    screen = await tmux.until(lambda s: "attached · Ctrl-]" not in s and "roster" in s, 20,
                              "the console again")
    assert "feed" in screen
