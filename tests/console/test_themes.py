"""Themes (issue 27 item 3): the console follows Textual's theme system. cotal-dark is the
console as it always looked (every older snapshot still passes on it), cotal-light recolours
status, errors and names from its own theme variables, a switch repaints the roster in the
new colours with the same shapes, the shapes alone tell status apart (NO_COLOR), and the
theme is chosen by ``--theme`` > ``COTAL_THEME`` > ``[ui] theme`` > cotal-dark."""

from __future__ import annotations

from cotal_tui.keygate import TYPEAHEAD_S

import os
import subprocess
import sys

import pytest
from conftest import until
from support.console import make_app, screen_text

from cotal_tui.themes import (
    COTAL_DARK,
    COTAL_LIGHT,
    DEFAULT_THEME,
    UnknownTheme,
    console_theme,
    pick_theme,
    theme_names,
)
from widgets.presentation import (
    COTAL_DARK_LOOK,
    COTAL_LIGHT_LOOK,
    STATUS_GLYPH,
    look_from_theme,
)

WIDE = (120, 40)


def _app(**kw):
    app = make_app(**kw)
    app.animation_level = "none"
    return app


def roster(app):
    from cotal_tui.screens.console import ConsoleScreen

    screen = next(s for s in reversed(app.screen_stack) if isinstance(s, ConsoleScreen))
    return screen.query_one("#roster")


def glyph_colours(app) -> dict[str, set[str]]:
    """The colour of every status glyph the roster paints on screen, read from the Strips its
    ``render_line`` gives (what the compositor draws), by glyph."""
    r = roster(app)
    out: dict[str, set[str]] = {}
    for y in range(r.size.height):
        for seg in r.render_line(y):
            for g in STATUS_GLYPH.values():
                if seg.text.strip() == g and seg.style is not None and seg.style.color is not None:
                    out.setdefault(g, set()).add(seg.style.color.triplet.hex
                                                 if seg.style.color.triplet else seg.style.color.name)
    return out


# ------------------------------------------------------------------ snapshots


def test_cotal_light_snapshot(snap_compare):
    async def light(pilot):
        pilot.app.theme = "cotal-light"
        await pilot.pause()

    assert snap_compare(_app(), run_before=light, terminal_size=WIDE)


def test_monochrome_snapshot(snap_compare, monkeypatch):
    """NO_COLOR: Textual's monochrome filter; the status shapes still tell every state apart."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = _app()
    assert app.no_color
    assert snap_compare(app, terminal_size=WIDE)


async def test_no_color_run_keeps_every_status_shape(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        lines = roster(app).line_texts()
        for status in ("working", "waiting", "idle", "offline"):
            assert any(line.lstrip().startswith(STATUS_GLYPH[status]) for line in lines), \
                (status, lines)
        assert "● " in text and "◐ " in text and "○ " in text and "⨯ " in text


# ------------------------------------------------------------------ switching


async def test_switching_theme_recolours_status_and_keeps_the_shapes():
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert app.theme == DEFAULT_THEME == "cotal-dark"
        dark = glyph_colours(app)
        assert dark["●"] == {COTAL_DARK_LOOK.working.lower()}
        assert dark["◐"] == {COTAL_DARK_LOOK.waiting.lower()}
        assert dark["○"] == {COTAL_DARK_LOOK.idle.lower()}
        before = roster(app).line_texts()

        app.theme = "cotal-light"
        await until(pilot, lambda: glyph_colours(app).get("●") == {COTAL_LIGHT_LOOK.working},
                    what="roster repainted in cotal-light")
        light = glyph_colours(app)
        assert light["◐"] == {COTAL_LIGHT_LOOK.waiting}
        assert light["○"] == {COTAL_LIGHT_LOOK.idle}
        assert roster(app).line_texts() == before  # same rows, same shapes

        bar = app.screen.query_one("#status")
        link = next(sp for sp in bar.render().spans
                    if bar.render().plain[sp.start:sp.end] == "connected")
        assert str(link.style) == COTAL_LIGHT_LOOK.working

        # built-in themes: their own $success / $warning carry the meaning; textual-dark has
        # exactly cotal-dark's CSS values, so only the theme signal can repaint the roster
        for name in ("nord", "cotal-dark", "textual-dark"):
            app.theme = name
            look = look_from_theme(app.get_theme(name))
            await until(pilot, lambda look=look: glyph_colours(app).get("●") == {look.working.lower()},
                        what=f"roster repainted in {name}")
            assert glyph_colours(app)["◐"] == {look.waiting.lower()}
            assert roster(app).line_texts() == before


def test_cotal_themes_keep_meaning_and_contrast():
    from textual.color import Color

    def contrast(a: str, b: str) -> float:
        def lum(c: str) -> float:
            r, g, b_ = (x / 255 for x in Color.parse(c).rgb)
            f = [(v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4) for v in (r, g, b_)]
            return 0.2126 * f[0] + 0.7152 * f[1] + 0.0722 * f[2]
        hi, lo = sorted((lum(a), lum(b)), reverse=True)
        return (hi + 0.05) / (lo + 0.05)

    light_bg = COTAL_LIGHT.to_color_system().generate()["surface"]
    for c in (COTAL_LIGHT_LOOK.working, COTAL_LIGHT_LOOK.waiting, COTAL_LIGHT_LOOK.error,
              COTAL_LIGHT_LOOK.info, COTAL_LIGHT_LOOK.service, *COTAL_LIGHT_LOOK.names):
        assert contrast(c, light_bg) >= 4.5, c
    assert contrast(COTAL_LIGHT_LOOK.idle, light_bg) >= 4.0  # muted on purpose, still legible
    # four distinct status hues in both (offline is dim without a hue: the ⨯ says it)
    for look in (COTAL_DARK_LOOK, COTAL_LIGHT_LOOK):
        assert len({look.working, look.waiting, look.idle}) == 3
        assert look.status("offline") == "dim"
    assert look_from_theme(COTAL_DARK) == COTAL_DARK_LOOK
    assert look_from_theme(COTAL_LIGHT) == COTAL_LIGHT_LOOK


# ------------------------------------------------------------------ the palette


async def test_palette_theme_verb_lists_and_applies():
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("colon", *"theme cotal-l")
        await until(pilot, lambda: "theme cotal-light" in screen_text(app), what="theme hit")
        await pilot.press("enter")
        await until(pilot, lambda: app.theme == "cotal-light")

        await pilot.press("colon", *"theme zzz")
        await until(pilot, lambda: "no theme named 'zzz'" in screen_text(app), what="refusal")
        await pilot.press("enter")
        await until(pilot, lambda: (app.last_notice or "").startswith(
            "theme: no theme named 'zzz'; available: cotal-dark, cotal-light"))
        assert app.theme == "cotal-light"
        await pilot.pause(TYPEAHEAD_S)  # keys typed ahead of a refusal are dropped

        # the bare verb opens Textual's own theme list; Enter on a row applies it
        await pilot.press("colon", *"theme")
        await until(pilot, lambda: "pick the console's colours" in screen_text(app))
        await pilot.press("enter")
        await until(pilot, lambda: "Search for themes" in screen_text(app), what="theme list")
        await pilot.press(*"dracula")
        await until(pilot, lambda: "dracula" in screen_text(app))
        await pilot.press("enter")
        await until(pilot, lambda: app.theme == "dracula")


# ------------------------------------------------------------------ choosing one


def _home(path, text: str | None = None):
    path.mkdir(exist_ok=True)
    if text is not None:
        (path / "config.toml").write_text(text)
    return path


def test_precedence_flag_env_config_default(tmp_path):
    home = _home(tmp_path, '[ui]\ntheme = "nord"\n')
    assert console_theme("dracula", home, env="gruvbox") == ("dracula", "flag", None)
    assert console_theme(None, home, env="gruvbox") == ("gruvbox", "environment", None)
    assert console_theme(None, home, env="") == ("nord", "config.toml", None)
    assert console_theme(None, _home(tmp_path / "empty"), env="") == ("cotal-dark", "default", None)


def test_unknown_names_are_one_sentence(tmp_path):
    home = _home(tmp_path, '[ui]\ntheme = "nope"\n')
    with pytest.raises(UnknownTheme) as e:
        console_theme("bogus", home, env="")
    assert str(e.value).startswith("--theme: no theme named 'bogus'; available: cotal-dark, ")
    # a bad environment value falls through to the next source, and says so
    name, src, warning = console_theme(None, _home(tmp_path / "empty"), env="zz")
    assert (name, src) == ("cotal-dark", "default")
    assert warning.startswith("COTAL_THEME: no theme named 'zz'; available: ")
    # a bad config value: the default theme, and the file, line and key named
    name, src, warning = console_theme(None, home, env="")
    assert (name, src) == ("cotal-dark", "default")
    assert f"{home / 'config.toml'}" in warning and "[ui] theme: no theme named 'nope'" in warning
    assert warning.endswith("; using cotal-dark")
    assert "\n" not in warning and "Error" not in warning
    assert pick_theme(None, None, ("cotal-dark", "default")) == ("cotal-dark", "default")
    assert set(theme_names()) >= {"cotal-dark", "cotal-light", "textual-dark", "nord"}


def test_watch_theme_flag_unknown_exits_2_with_the_list(tmp_path):
    """A real ``cotal watch`` process: the bad flag is refused before any connection."""
    env = {**os.environ, "COTAL_HOME": str(tmp_path)}
    env.pop("COTAL_THEME", None)
    p = subprocess.run([sys.executable, "-m", "cotal_tui.cli", "watch", "--theme", "nope",
                        "--server", "nats://127.0.0.1:9"], capture_output=True, text=True,
                       env=env, timeout=60, check=False)
    assert p.returncode == 2, p
    assert p.stdout == ""
    err = p.stderr.strip()
    assert err.startswith("cotal: --theme: no theme named 'nope'; available: cotal-dark, "
                          "cotal-light, "), err
    assert "\n" not in err and "Traceback" not in err


def test_app_takes_a_theme():
    app = make_app()
    assert app.theme == "cotal-dark"
    from cotal_tui.app import CotalApp

    assert CotalApp(theme="cotal-light").theme == "cotal-light"


async def test_css_sees_the_status_variables_under_every_theme():
    """``$cotal-working``… resolve under a built-in theme too (from its own meaning colours)."""
    app = _app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert app.get_css_variables()["cotal-working"] == COTAL_DARK_LOOK.working
        app.theme = "nord"
        await pilot.pause()
        nord = look_from_theme(app.get_theme("nord"))
        assert app.get_css_variables()["cotal-waiting"] == nord.waiting
        app.theme = "ansi-dark"
        await pilot.pause()
        assert app.get_css_variables()["cotal-working"] == "ansi_green"
        assert app.get_css_variables()["cotal-idle"] == "ansi_bright_black"
