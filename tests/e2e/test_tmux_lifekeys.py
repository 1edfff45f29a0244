"""Keys at start-up and shutdown in a real terminal against a real broker (issue 35, item 10):
Ctrl-C while the console is still coming up, and ``q`` then ``n`` at 80×24, end with exit 0
and no traceback on the operator's terminal."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from support.tmux import Tmux, needs_tmux

pytestmark = needs_tmux

COTAL = str(Path(sys.executable).with_name("cotal"))


async def _run(url: str, space: str, home: Path, keys: list[str], delay: float,
               cols: int, rows: int, up: bool) -> str:
    t = Tmux()
    env = {"COTAL_HOME": str(home), "TERM": "xterm-256color", "LANG": "C.UTF-8",
           "PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    try:
        await t.start(f"env -u COLUMNS -u LINES {COTAL} watch --server {url} --space {space} "
                      "2>&1; echo console-exit=$?; sleep 60", env, cols=cols, rows=rows)
        if up:
            await t.until(lambda s: "connected" in s, 30, "console up")
        await asyncio.sleep(delay)
        await t.keys(*keys)  # one send-keys: the keys arrive together
        return await t.until(lambda s: "console-exit=" in s, 20, "the console to exit")
    finally:
        await t.kill()


async def test_ctrl_c_while_the_console_comes_up_exits_cleanly(broker, space, tmp_path):
    for delay in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.3):  # a SIGINT until raw, then a key
        s = await _run(broker.url, space, tmp_path, ["C-c"], delay, 120, 40, up=False)
        assert "Traceback" not in s and "NoMatches" not in s and "Error" not in s, (delay, s)
        assert "console-exit=0" in s, (delay, s)


async def test_q_then_n_at_80x24_exits_cleanly(broker, space, tmp_path):
    s = await _run(broker.url, space, tmp_path, ["q", "n", "j"], 0.0, 80, 24, up=True)
    assert "Traceback" not in s and "NoMatches" not in s, s
    assert "console-exit=0" in s, s
