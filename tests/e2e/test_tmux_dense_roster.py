"""End to end: a team of forty in the real ``cotal watch`` in tmux at 140×42 shows at least 35
roster rows (the dense roster, issue 38 item 1), ``L`` switches it to the full rows, and at
80×24 the narrow layout's rows are the same dense ones."""

from __future__ import annotations

import re

import pytest

from support.team import steady_team
from support.tmux import needs_tmux

pytestmark = needs_tmux

ROW = re.compile(r"^[●◐○⨯] (\S+?)/")


@pytest.fixture
async def team40(nc, space):
    async with steady_team(nc, space, seed=5, agents=40, chat_interval=2.0) as t:
        yield t


def rows(screen: str) -> set[str]:
    return {m.group(1) for line in screen.splitlines() if (m := ROW.match(line))}


async def test_forty_agents_fit_140x42_in_tmux(broker, space, team40, tmux, tmp_path):
    await tmux.watch(broker.url, space, tmp_path, cols=140, rows=42)
    s = await tmux.until(lambda s: "roster · 40 agents" in s and len(rows(s)) >= 35,
                         timeout=40, what="35 roster rows")
    assert all(len(line) <= 140 for line in s.splitlines())
    await tmux.keys("h")
    await tmux.until(lambda s: "▶ roster" in s, what="roster focused")
    await tmux.keys("L")  # auto -> dense
    await tmux.until(lambda s: "roster rows: dense" in s, what="dense")
    await tmux.keys("L")  # dense -> full
    await tmux.until(lambda s: "roster rows: full" in s and len(rows(s)) < 20, what="full rows")
    assert 'layout = "full"' in (tmp_path / "config.toml").read_text()
    # 80×24: the narrow layout's rows are the dense ones, in 80 columns, never wrapped
    await tmux.run("resize-window", "-t", tmux.name, "-x", "80", "-y", "24")

    def narrow_dense(s: str) -> bool:
        lines = [line for line in s.splitlines() if ROW.match(line)]
        return (len(lines) >= 5 and all(len(line) <= 80 for line in s.splitlines())
                and all(re.search(r"  (working|idle|waiting|offline)\b", ln) for ln in lines))

    await tmux.until(narrow_dense, what="80x24: dense rows, each with its status column")
