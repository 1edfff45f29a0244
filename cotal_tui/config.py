"""Where the console's user configuration lives: ``$COTAL_HOME`` or ``~/.cotal``."""

from __future__ import annotations

import os
from pathlib import Path


def config_dir() -> Path:
    env = os.environ.get("COTAL_HOME")
    return Path(env).expanduser() if env else Path.home() / ".cotal"
