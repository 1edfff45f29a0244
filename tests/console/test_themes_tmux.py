"""Themes end to end: the real ``cotal watch`` in tmux against a real broker and team. The
theme comes from ``--theme`` over a bad ``COTAL_THEME`` and a bad ``[ui] theme``; a bad
``COTAL_THEME`` alone is said on the status line and the console still opens; the palette's
``theme`` verb repaints the status glyphs in the other theme's colours (read back from the
terminal's own escapes with ``capture-pane -e``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import until
from support.tmux import console_env, needs_tmux

from support.team import steady_team
from widgets.presentation import COTAL_DARK_LOOK, COTAL_LIGHT_LOOK

pytestmark = needs_tmux

SGR_GLYPH = re.compile(r"((?:\x1b\[[0-9;:]*m)+)([●◐○])")


@pytest.fixture
async def team(nc, space):
    async with steady_team(nc, space, seed=3, agents=5, chat_interval=0.7) as t:
        yield t


def glyph_sgr(screen: str) -> dict[str, set[str]]:
    """The escapes the terminal holds in front of each status glyph, by glyph."""
    out: dict[str, set[str]] = {}
    for sgr, glyph in SGR_GLYPH.findall(screen):
        out.setdefault(glyph, set()).add(sgr)
    return out


def _env(home: Path, **extra: str) -> dict[str, str]:
    return console_env(home, COLORTERM="truecolor", **extra)


async def test_theme_flag_wins_and_the_palette_switches_live(broker, space, team, tmux, tmp_path):
    (tmp_path / "config.toml").write_text('[ui]\ntheme = "bogus"\n')
    await tmux.watch(broker.url, space, tmp_path, "--theme cotal-light",
                     env=_env(tmp_path, COTAL_THEME="nosuch"))
    await tmux.until(lambda s: "roster ·" in s and "connected" in s, what="console up")
    s = await tmux.until(lambda s: "● " in s and "roster ·" in s, what="a working agent")
    assert "no theme named" not in s  # the flag decided: the bad env and config never asked
    await until(lambda: _has(tmux, "●", COTAL_LIGHT_LOOK.working), what="light glyphs",
                timeout=10)

    await tmux.keys(":")
    await tmux.until(lambda s: "Search" in s or "search" in s, what="palette")
    await tmux.keys("theme cotal-dark")
    await tmux.until(lambda s: "theme cotal-dark" in s and "apply this theme" in s,
                     what="theme hit")
    await tmux.keys("Enter")

    # the overlay's fade passes through blends: wait for the settled colours
    await until(lambda: _has(tmux, "●", COTAL_DARK_LOOK.working), what="dark glyphs", timeout=10)
    assert not await _has(tmux, "●", COTAL_LIGHT_LOOK.working)
    s = await tmux.screen()
    assert "roster ·" in s and "● " in s  # the same console, the same shapes


async def test_a_bad_env_theme_is_one_sentence_on_the_status_line(broker, space, team, tmux,
                                                                  tmp_path):
    await tmux.watch(broker.url, space, tmp_path, env=_env(tmp_path, COTAL_THEME="nosuch"))
    s = await tmux.until(lambda s: "roster ·" in s and "no theme named 'nosuch'" in s,
                         what="console up with the notice")
    assert "COTAL_THEME: no theme named 'nosuch'; available: cotal-dark" in s
    assert "Traceback" not in s


async def _has(tmux, glyph: str, colour: str) -> bool:
    """Whether some ``glyph`` on screen is drawn in truecolor ``colour`` (``#rrggbb``)."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    sgrs = glyph_sgr(await tmux.screen(escapes=True)).get(glyph, set())
    return any(f"38;2;{r};{g};{b}m" in sgr for sgr in sgrs)
