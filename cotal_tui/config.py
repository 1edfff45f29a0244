"""The user's configuration: the one loader of ``$COTAL_HOME/config.toml`` and the places under
``$COTAL_HOME`` (:func:`meshview.home.cotal_home`) where the console keeps its files.

Every setting is taken from the first of its named sources that has it, strongest first:
a flag, the environment, ``config.toml``, the default (:data:`SOURCES`). A bad file or value never
stops a command: it is reported in one sentence and ignored.

Settings the console changes at run time (the roster's sort, ``s``) are written back into that
file by editing only their own line, so comments and other tables survive.
"""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from meshview.home import cotal_home
from meshview.notify import SETTLE_S, STYLES, NotifySettings
from meshview.roster import ROSTER_SORTS

SOURCES = ("flag", "environment", "config.toml", "default")
TRUTHY = ("1", "true", "yes", "on")

T = TypeVar("T")


def config_path(home: Path | None = None) -> Path:
    return (home or cotal_home()) / "config.toml"


def chat_history_path(home: Path | None = None) -> Path:
    """``cotal chat``'s input history (it holds what was typed: kept private)."""
    return (home or cotal_home()) / "chat_history"


def recordings_dir(home: Path | None = None) -> Path:
    """Where the console's palette ``record`` writes when no file is named."""
    return (home or cotal_home()) / "recordings"


@dataclass(frozen=True)
class ConfigFile:
    """``config.toml`` as read once; ``error`` says why it was ignored (``tables`` then empty)."""

    path: Path
    tables: dict[str, object] = field(default_factory=dict)
    error: str | None = None

    def table(self, name: str) -> dict[str, object]:
        """One ``[name]`` table (empty when absent); ValueError when it is not a table."""
        t = self.tables.get(name, {})
        if not isinstance(t, dict):
            raise ValueError(f"[{name}] must be a table")
        return t


def read_config(home: Path | None = None) -> ConfigFile:
    """The one reader of ``config.toml``: absent is empty, unreadable carries its reason."""
    path = config_path(home)
    if not path.is_file():
        return ConfigFile(path)
    try:
        return ConfigFile(path, tomllib.loads(path.read_text()))
    except (OSError, ValueError) as e:
        return ConfigFile(path, error=str(e))


def pick(default: T, *layers: tuple[str, T | None]) -> tuple[T, str]:
    """The value of the strongest layer that has one (``layers`` strongest first, each a
    ``(source, value or None)``), and the name of its source."""
    for source, value in layers:
        if value is not None:
            return value, source
    return default, "default"


@dataclass(frozen=True)
class ConsoleConfig:
    """The console's own settings from ``config.toml`` (defaults when absent)."""

    roster_sort: str = "status"
    warning: str | None = None  # one sentence when the file was unreadable (then ignored)


def load_config(home: Path | None = None) -> ConsoleConfig:
    """The console's settings: ``[roster] sort = "status" | "name" | "role" | "activity"``."""
    cfg = read_config(home)
    if cfg.error is not None:
        return ConsoleConfig(warning=f"config {cfg.path} ignored: {cfg.error}")
    roster = cfg.tables.get("roster", {})
    sort = roster.get("sort", "status") if isinstance(roster, dict) else "status"
    if sort not in ROSTER_SORTS:
        return ConsoleConfig(warning=f"config {cfg.path}: [roster] sort must be one of "
                                     + ", ".join(ROSTER_SORTS))
    return ConsoleConfig(roster_sort=sort)


def notify_settings(args: argparse.Namespace | None = None,
                    home: Path | None = None) -> NotifySettings:
    """``--notify``/``--notify-cmd``/``--notify-escape``, then ``COTAL_NOTIFY``/``COTAL_NOTIFY_CMD``
    /``COTAL_NOTIFY_ESCAPE``, then ``config.toml``'s ``[notify]`` table: ``enabled = true``,
    ``command = "..."``, ``escape = "osc777"``, ``settle = 5`` (seconds an agent may leave
    waiting and still be in the same episode). The environment and flags only switch on."""
    cfg = read_config(home)
    table: dict[str, object] = {}
    warning = None
    try:
        if cfg.error is not None:
            raise ValueError(cfg.error)
        table = cfg.table("notify")
    except ValueError as e:
        warning = f"notifications: {cfg.path} ignored: {e}"
    env = os.environ
    sources: dict[str, str] = {}
    command = table.get("command")
    settle = table.get("settle")
    terminal, sources["terminal"] = pick(
        False,
        ("flag", True if getattr(args, "notify", False) else None),
        ("environment", True if env.get("COTAL_NOTIFY", "").strip().lower() in TRUTHY else None),
        ("config.toml", bool(table["enabled"]) if "enabled" in table else None))
    cmd, sources["command"] = pick(
        None,
        ("flag", getattr(args, "notify_cmd", None) or None),
        ("environment", env["COTAL_NOTIFY_CMD"]
         if env.get("COTAL_NOTIFY_CMD", "").strip() else None),
        ("config.toml", command if isinstance(command, str) and command.strip() else None))
    style, sources["style"] = pick(
        "osc9",
        ("flag", _style(getattr(args, "notify_escape", None))),
        ("environment", _style(env.get("COTAL_NOTIFY_ESCAPE"))),
        ("config.toml", _style(table.get("escape"))))
    settle_s, sources["settle_s"] = pick(
        SETTLE_S,
        ("config.toml", float(settle)
         if isinstance(settle, (int, float)) and settle >= 0 else None))
    return NotifySettings(terminal=terminal, command=cmd, style=style, settle_s=settle_s,
                          warning=warning, sources=sources)


def _style(v: object) -> str | None:
    return v if isinstance(v, str) and v in STYLES else None


_TABLE = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*sort\s*=")


def save_roster_sort(sort: str, home: Path | None = None) -> None:
    """Persist ``[roster] sort = "<sort>"``, touching no other line of the file."""
    if sort not in ROSTER_SORTS:
        raise ValueError(f"unknown roster sort {sort!r}")
    path = config_path(home)
    lines = path.read_text().splitlines() if path.is_file() else []
    entry = f'sort = "{sort}"'
    table = None
    at = None  # index of the [roster] header
    for i, line in enumerate(lines):
        m = _TABLE.match(line)
        if m:
            table = m.group(1).strip()
            if table == "roster":
                at = i
            continue
        if table == "roster" and _KEY.match(line):
            lines[i] = entry
            break
    else:
        if at is None:
            if lines and lines[-1].strip():
                lines.append("")
            lines += ["[roster]", entry]
        else:
            lines.insert(at + 1, entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
