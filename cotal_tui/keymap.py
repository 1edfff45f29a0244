"""User keymaps: binding id -> key(s), read from ``keymap.toml`` or ``keymap.json`` in
``$COTAL_HOME`` and handed to ``App.set_keymap``.

Both files are a flat table of binding ids (``console.dms = "D"``) or the same under a
``[keymap]`` table. A bad file never stops the console: it is reported and ignored.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from meshview.home import cotal_home

FILES = ("keymap.toml", "keymap.json")


class KeymapError(ValueError):
    pass


def parse_keymap(data: object) -> dict[str, str]:
    if isinstance(data, dict) and isinstance(data.get("keymap"), dict):
        data = data["keymap"]
    if not isinstance(data, dict):
        raise KeymapError("a keymap is a table of binding id = \"key\"")
    out: dict[str, str] = {}
    for k, v in data.items():
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            v = ",".join(v)
        if not isinstance(k, str) or not isinstance(v, str) or not v.strip():
            raise KeymapError(f"binding {k!r}: the key must be a non-empty string")
        out[k] = v.strip()
    return out


def load_keymap(home: Path | None = None) -> tuple[dict[str, str], str | None]:
    """The user's keymap and, if a file was unreadable, one sentence saying why."""
    d = home or cotal_home()
    for name in FILES:
        p = d / name
        if not p.is_file():
            continue
        try:
            raw = p.read_text()
            data = tomllib.loads(raw) if name.endswith(".toml") else json.loads(raw)
            return parse_keymap(data), None
        except (OSError, ValueError, KeymapError) as e:
            return {}, f"keymap {p} ignored: {e}"
    return {}, None
