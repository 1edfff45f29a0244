"""The one place that says where the user's Cotal home is: ``$COTAL_HOME`` (``~`` expanded),
else ``~/.cotal``. The mesh registry, the credentials' roots, ``config.toml``, keymaps, chat
history, recordings and logs all live under it."""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "COTAL_HOME"


def cotal_home() -> Path:
    env = os.environ.get(HOME_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cotal"
