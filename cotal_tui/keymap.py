"""User keymaps: binding id -> key(s), read from ``keymap.toml`` or ``keymap.json`` in
``$COTAL_HOME`` and handed to ``App.set_keymap``.

Both files are a flat table of binding ids (``console.dms = "D"``) or the same under a
``[keymap]`` table; a value is a key (``"D"``, ``"ctrl+d"``) or several (``"end,f"`` or a list).
Each entry stands alone: a bad one (not a key Textual knows, a binding id the console does not
have, a key its neighbours already use) is named and dropped, and the others still apply. Only a
file that does not parse at all is ignored whole, and that is said too.

The binding ids and their default keys live on the widgets and screens, which this module may
not import: :func:`check_bindings` takes them as :class:`KnownBinding` rows from its caller
(``cotal_tui.cli.config`` collects them).
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from cotal_tui.errors import CotalError
from meshview.link.home import cotal_home

FILES = ("keymap.toml", "keymap.json")
MODIFIERS = ("shift", "alt", "ctrl", "super", "hyper", "meta")  # as Textual names them


class KeymapError(CotalError, ValueError):
    pass


@dataclass(frozen=True)
class KeymapFile:
    """The keymap file as read: ``entries`` are the values that are keys, ``problems`` one
    sentence per entry dropped (or for the whole file, when it did not parse), ``lines`` the
    line of each binding id in the file (TOML only; for ``file:line`` in reports)."""

    path: Path | None = None
    entries: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class KnownBinding:
    """One binding the console has: its id, its default key(s), what it does, who owns it
    (a screen or widget class name; one id may be on several, as the replay keys are)."""

    id: str
    key: str
    description: str
    owner: str


def _known_key_name(name: str) -> bool:
    from textual.keys import KEY_ALIASES, REPLACED_KEYS, Keys, key_to_character

    if len(name) == 1:
        return name.isprintable()
    if not (name.isascii() and name.replace("_", "x").isalnum() and name == name.lower()):
        return False  # Textual's own placeholders (<any>, ctrl-at) are no keys to bind
    if name in {k.value for k in Keys} or any(name in v for v in KEY_ALIASES.values()):
        return True
    return key_to_character(REPLACED_KEYS.get(name, name)) is not None


def key_problem(key: str) -> str | None:
    """Why one key (``"ctrl+d"``, ``"question_mark"``, ``"?"``) is not a key Textual knows, or
    None when it is one."""
    if not key:
        return "an empty key"
    if key == "+":
        mods, base = [], key
    else:
        *mods, base = key.split("+")
        if not base or "" in mods:
            return "write the + key as plus (ctrl+plus)"
    bad = [m for m in mods if m not in MODIFIERS]
    if bad:
        return f"{bad[0]!r} is not a modifier (modifiers: {', '.join(MODIFIERS)})"
    if len(set(mods)) != len(mods):
        return "a modifier given twice"
    if not _known_key_name(base):
        return f"{base!r} is not a key name Textual knows (a character, or a name like " \
               "escape, enter, tab, space, up, pageup, f1, question_mark)"
    return None


def keys_of(value: str) -> list[str]:
    """``"end, f"`` -> ``["end", "f"]`` (Textual's comma list)."""
    return [k.strip() for k in value.split(",")] if value != "," else [","]


def normal_key(key: str) -> str:
    """The name Textual matches on: ``"?"`` -> ``"question_mark"``, ``"D"`` stays ``"D"``."""
    from textual.keys import _character_to_key

    return _character_to_key(key) if len(key) == 1 else key


def parse_keymap(data: object, where: str = "keymap",
                 lines: dict[str, int] | None = None) -> tuple[dict[str, str], list[str]]:
    """The entries of a parsed keymap that are keys, and one sentence per entry that is not
    (``where`` the file, ``lines`` each binding id's line in it)."""
    at = _at(where, lines)
    if isinstance(data, dict) and isinstance(data.get("keymap"), dict):
        data = data["keymap"]
    if not isinstance(data, dict):
        return {}, [f"{where} ignored: a keymap is a table of binding id = \"key\""]
    out: dict[str, str] = {}
    problems: list[str] = []
    for k, v in data.items():
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            v = ",".join(x.strip() for x in v)
        if isinstance(v, dict):
            problems.append(f"{at(k)}: [{k}] is not a keymap table (only [keymap] is); "
                            "its entries are not used")
            continue
        if not isinstance(v, str) or not v.strip():
            problems.append(f"{at(k)}: {k} = {_shown(v)} dropped: expected a key like \"ctrl+d\" "
                            "or a list of keys")
            continue
        v = v.strip()
        why = next((p for p in (key_problem(x) for x in keys_of(v)) if p), None)
        if why:
            problems.append(f"{at(k)}: {k} = {json.dumps(v)} dropped: {why}")
            continue
        out[k] = v
    return out, problems


def _at(where: str, lines: dict[str, int] | None) -> Callable[[str], str]:
    return lambda k: f"{where}:{lines[k]}" if lines and k in lines else where


def _shown(v: object) -> str:
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return type(v).__name__


_ID_LINE = re.compile(r'^\s*(?:"([^"]+)"|\'([^\']+)\'|([\w.-]+))\s*=')  # a bare or quoted id


def _toml_lines(raw: str) -> dict[str, int]:
    lines: dict[str, int] = {}
    for n, line in enumerate(raw.splitlines(), 1):
        m = _ID_LINE.match(line)
        if m:
            lines.setdefault(next(g for g in m.groups() if g is not None), n)
    return lines


def read_keymap(home: Path | None = None) -> KeymapFile:
    """The first keymap file in ``$COTAL_HOME`` (``keymap.toml`` before ``keymap.json``)."""
    d = home or cotal_home()
    for name in FILES:
        p = d / name
        if not p.is_file():
            continue
        try:
            raw = p.read_text()
            data = tomllib.loads(raw) if name.endswith(".toml") else json.loads(raw)
        except (OSError, ValueError) as e:
            return KeymapFile(p, problems=[f"keymap {p} ignored: {e}"])
        lines = _toml_lines(raw) if name.endswith(".toml") else {}
        entries, problems = parse_keymap(data, f"keymap {p}", lines)
        return KeymapFile(p, entries, problems, lines)
    return KeymapFile()


def check_bindings(keymap: dict[str, str], known: Iterable[KnownBinding], where: str = "keymap",
                   lines: dict[str, int] | None = None) -> tuple[dict[str, str], list[str]]:
    """``keymap`` against the console's bindings: an id it does not have is dropped, and so is a
    remap onto a key another binding of the same screen or widget keeps (it would shadow it or
    be shadowed); the rest is returned with one sentence per entry dropped."""
    rows = list(known)
    ids = {b.id for b in rows}
    at = _at(where, lines)
    problems: list[str] = []
    good: dict[str, str] = {}
    for k, v in keymap.items():
        if k in ids:
            good[k] = v
        else:
            near = sorted(i for i in ids if i.split(".")[0] == k.split(".")[0])[:6]
            hint = f"; {k.split('.')[0]}.* ids: {', '.join(near)}" if near else \
                "; `cotal config` lists the binding ids"
            problems.append(f"{at(k)}: {k} dropped: no binding has that id{hint}")
    owners: dict[str, list[KnownBinding]] = {}
    for b in rows:
        owners.setdefault(b.owner, []).append(b)
    while True:  # dropping one remap can make another clash (a swap with one half dropped)
        clash = _first_clash(good, owners)
        if clash is None:
            return good, problems
        mine, other, key, owner = clash
        problems.append(f"{at(mine)}: {mine} = {json.dumps(good[mine])} dropped: {key} is already "
                        f"{other} in {owner}")
        del good[mine]


def _first_clash(keymap: dict[str, str],
                 owners: dict[str, list[KnownBinding]]) -> tuple[str, str, str, str] | None:
    for owner, rows in owners.items():
        taken: dict[str, str] = {}  # normal key -> binding id
        # the bindings kept as they are first, so the remap is the one named and dropped
        for b in sorted(rows, key=lambda b: b.id in keymap):
            for key in keys_of(keymap.get(b.id, b.key)):
                nk = normal_key(key)
                other = taken.get(nk)
                if other is not None and other != b.id and (b.id in keymap or other in keymap):
                    mine, them = (b.id, other) if b.id in keymap else (other, b.id)
                    return mine, them, key, owner
                taken[nk] = b.id
    return None


def load_keymap(home: Path | None = None) -> tuple[dict[str, str], str | None]:
    """The user's keymap (every entry that is a key) and, if anything was dropped, one
    sentence saying what (:func:`read_keymap` has each)."""
    km = read_keymap(home)
    return km.entries, summary(km.problems)


def summary(problems: list[str]) -> str | None:
    """One status-line sentence for a list of problems: the first, and how many more."""
    if not problems:
        return None
    if len(problems) == 1:
        return problems[0]
    return f"{problems[0]} (+{len(problems) - 1} more: `cotal config` lists them)"
