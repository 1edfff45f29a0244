"""Where the console's user configuration lives (``$COTAL_HOME`` or ``~/.cotal``) and the one
loader of its ``config.toml``.

Settings the console changes at run time (the roster's sort, ``s``) are written back into that
file by editing only their own line, so comments and other tables survive.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from meshview.roster import ROSTER_SORTS


def config_dir() -> Path:
    env = os.environ.get("COTAL_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cotal"


def config_path(directory: Path | None = None) -> Path:
    return (directory or config_dir()) / "config.toml"


@dataclass(frozen=True)
class ConsoleConfig:
    """The console's own settings from ``config.toml`` (defaults when absent)."""

    roster_sort: str = "status"
    warning: str | None = None  # one sentence when the file was unreadable (then ignored)


def load_config(directory: Path | None = None) -> ConsoleConfig:
    """``config.toml``'s console settings: ``[roster] sort = "status" | "name" | "role" |
    "activity"``. A bad file or value never stops the console: it is reported and ignored."""
    path = config_path(directory)
    if not path.is_file():
        return ConsoleConfig()
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, ValueError) as e:
        return ConsoleConfig(warning=f"config {path} ignored: {e}")
    roster = data.get("roster", {})
    sort = roster.get("sort", "status") if isinstance(roster, dict) else "status"
    if sort not in ROSTER_SORTS:
        return ConsoleConfig(warning=f"config {path}: [roster] sort must be one of "
                                     + ", ".join(ROSTER_SORTS))
    return ConsoleConfig(roster_sort=sort)


_TABLE = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*sort\s*=")


def save_roster_sort(sort: str, directory: Path | None = None) -> None:
    """Persist ``[roster] sort = "<sort>"``, touching no other line of the file."""
    if sort not in ROSTER_SORTS:
        raise ValueError(f"unknown roster sort {sort!r}")
    path = config_path(directory)
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
