"""Find, group and pin end to end (issue 38 "Must show"): the real ``cotal watch`` in tmux at
140×42 on a demo team of forty: ``/`` on the roster with a state prefix, ``o`` grouping with
header counts, ``*`` pinning an agent (saved by principal id in config.toml)."""

from __future__ import annotations

import re
import tomllib

import pytest
from support.tmux import needs_tmux

from support.team import steady_team

pytestmark = needs_tmux



@pytest.fixture
async def team(nc, space):
    async with steady_team(nc, space, seed=5, agents=40, chat_interval=2.0) as t:
        yield t


async def test_filter_group_and_pin_on_forty_agents(broker, space, team, tmux, tmp_path):
    await tmux.watch(broker.url, space, tmp_path, cols=140, rows=42)
    await tmux.until(lambda s: "roster · 40 agents" in s, timeout=40, what="forty agents")
    await tmux.keys("h")  # the roster
    await tmux.until(lambda s: "▶ roster" in s, what="the roster focused")
    await tmux.keys("/")
    # keys sent in one burst reach the focused list before the box takes focus (Textual queues
    # them to the widget focused when they arrive; the feed's / is the same): wait for the box
    await tmux.until(lambda s: "filter the roster" in s, what="the roster's filter box")
    await tmux.keys("working:")
    s = await tmux.until(lambda s: re.search(r"roster · \d+/40 · /working:", s), what="filtered")
    assert "filter the roster" not in s or "working:" in s
    await tmux.keys("Enter")
    await tmux.keys("Escape")  # clears the kept filter
    await tmux.until(lambda s: "roster · 40 agents" in s, what="the filter cleared")
    await tmux.keys("o")
    s = await tmux.until(lambda s: re.search(r"▾ (working|waiting|idle|offline) · \d+", s),
                         what="state headers")
    counts = [int(n) for n in re.findall(r"▾ (?:working|waiting|idle|offline) · (\d+)", s)]
    assert counts and all(0 < n <= 40 for n in counts)
    await tmux.keys("j", "*")
    await tmux.until(lambda s: "▾ pinned · 1" in s, what="pinned")
    cfg = tomllib.loads((tmp_path / "config.toml").read_text())
    assert cfg["roster"]["group"] == "state"
    assert len(cfg["roster"]["pins"]) == 1 and cfg["roster"]["pins"][0].startswith("local.")
