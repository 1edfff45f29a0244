"""The console's two own themes and how a theme name is chosen (flag > ``COTAL_THEME`` >
``[ui] theme`` > ``cotal-dark``).

``cotal-dark`` is the console as it always looked: Textual's dark palette with the status,
error and name colours of the ANSI colours it used to name, now as ``Theme.variables`` so
every theme can recolour them. ``cotal-light`` keeps each status hue's meaning at 4.5:1 or
better on its background. Every built-in Textual theme works too; widgets/presentation.py
derives what a theme does not name from its $success / $warning / $error.
"""

from __future__ import annotations

import os
from pathlib import Path

from textual.theme import BUILTIN_THEMES, Theme

from cotal_tui.errors import CotalError
from widgets.presentation import COTAL_DARK_LOOK, COTAL_LIGHT_LOOK, look_variables

DEFAULT_THEME = "cotal-dark"

_BASE = BUILTIN_THEMES["textual-dark"]

COTAL_DARK = Theme(
    name="cotal-dark",
    primary=_BASE.primary,
    secondary=_BASE.secondary,
    accent=_BASE.accent,
    warning=_BASE.warning,
    error=_BASE.error,
    success=_BASE.success,
    foreground=_BASE.foreground,
    dark=True,
    variables=look_variables(COTAL_DARK_LOOK),
)

COTAL_LIGHT = Theme(
    name="cotal-light",
    primary="#0969da",
    secondary="#6639ba",
    accent="#bc4c00",
    warning="#9a6700",
    error="#cf222e",
    success="#1a7f37",
    foreground="#1f2328",
    background="#f6f8fa",
    surface="#ffffff",
    panel="#e6eaef",
    dark=False,
    variables=look_variables(COTAL_LIGHT_LOOK),
)

COTAL_THEMES = (COTAL_DARK, COTAL_LIGHT)


def theme_names() -> list[str]:
    """Every theme the console offers: its own two first, then Textual's built-in ones."""
    return [t.name for t in COTAL_THEMES] + sorted(BUILTIN_THEMES)


class UnknownTheme(CotalError, ValueError):
    """A theme name the console does not have; the message is the sentence to show."""

    def __init__(self, name: str, source: str, where: str) -> None:
        super().__init__(f"{where}: no theme named {name!r}; available: "
                         + ", ".join(theme_names()))
        self.name, self.source = name, source


def pick_theme(flag: str | None, env: str | None, config: tuple[str, str],
               config_where: str = "config.toml") -> tuple[str, str]:
    """(theme name, its source: ``flag`` / ``environment`` / ``config.toml`` / ``default``):
    ``--theme`` > ``COTAL_THEME`` > ``[ui] theme`` > ``cotal-dark``. ``config`` is
    ``config.ui_theme()``'s ``(value, source)``; ``config_where`` names the file (and line)
    in the sentence. An unknown name raises :class:`UnknownTheme` naming where it was set."""
    value, source = config
    layers = (
        (flag, "flag", "--theme"),
        (env, "environment", "COTAL_THEME"),
        (value if source == "config.toml" else None, "config.toml", f"{config_where}: [ui] theme"),
    )
    for name, src, where in layers:
        name = (name or "").strip()
        if not name:
            continue
        if name not in theme_names():
            raise UnknownTheme(name, src, where)
        return name, src
    return DEFAULT_THEME, "default"


def console_theme(flag: str | None, home: Path | None = None,
                  env: str | None = None) -> tuple[str, str, str | None]:
    """(theme, source, warning) for a console about to start. An unknown ``--theme`` raises
    :class:`UnknownTheme` (the command exits 2 with its sentence); an unknown ``COTAL_THEME``
    or ``[ui] theme`` gives the default theme and the sentence as ``warning`` (the console
    shows it), like any other bad setting."""
    from cotal_tui.config import THEME_ENV, read_config, ui_theme

    env = os.environ.get(THEME_ENV) if env is None else env
    if flag and flag.strip() and flag.strip() not in theme_names():
        raise UnknownTheme(flag.strip(), "flag", "--theme")
    config, where = ui_theme(None, home), read_config(home).where("ui", "theme")
    try:
        name, source = pick_theme(flag, env, config, where)
    except UnknownTheme as e:
        name, source = DEFAULT_THEME, "default"
        if e.source == "environment":  # the next source may still name a good one
            try:
                name, source = pick_theme(None, None, config, where)
            except UnknownTheme:
                pass
        return name, source, f"{e}; using {name}"
    return name, source, None
