"""``cotal demo --agents 40`` in tmux at 140×42 and 80×24 (issue 38 item 3): ``?`` help is a
pager; ``G`` brings its last section's last rows on screen, ``/`` finds, ``q`` closes. Every
step polls ``capture-pane`` with a deadline."""

from __future__ import annotations

import os
import sys

import pytest
from support.tmux import needs_tmux

pytestmark = [needs_tmux, pytest.mark.slow]


@pytest.mark.parametrize("cols,rows", [(140, 42), (80, 24)])
async def test_help_scrolls_to_its_end_in_a_real_terminal(tmux, tmp_path, cols, rows):
    env = {"TERM": "xterm-256color", "COTAL_HOME": str(tmp_path), "LANG": "C.UTF-8",
           "PATH": os.environ.get("PATH", "")}
    await tmux.start(f"{sys.executable} -m cotal_tui.cli demo --agents 40", env, cols=cols,
                     rows=rows)
    await tmux.until(lambda s: "roster ·" in s and "connected" in s, 60, "the console")
    for attempt in range(3):  # a user presses again if a busy machine ate the first key
        await tmux.keys("?")
        try:
            await tmux.until(lambda s: "help · lines 1-" in s, 15, "the help pager")
            break
        except AssertionError:
            if attempt == 2:
                raise
    s = await tmux.screen()
    assert "cotal console - help" in s and "· END ·" not in s
    await tmux.keys("x")  # other keys do nothing
    await tmux.keys("G")
    s = await tmux.until(lambda s: "· END ·" in s, 15, "help at its end")
    assert "terminal panes (attach, peek, tile)" in s
    assert "q back" in s and "contract rev" in s  # the last rows, wrapped, none cut
    # typed in one go, as a fast typist does: g, then the search (its letters are its own)
    await tmux.keys("g/feed keys", "Enter")
    s = await tmux.until(lambda s: "help · lines 3-" in s, 15, "a search, after the g")
    assert s.split("│")[1].split()[:2] == ["feed", "keys"]  # the match is the top row
    await tmux.keys("/zqxw", "Enter")
    await tmux.until(lambda s: "Pattern not found: zqxw" in s, 15, "not found")
    await tmux.keys("q")
    await tmux.until(lambda s: "cotal console - help" not in s and "roster ·" in s, 15,
                     "help closed")
