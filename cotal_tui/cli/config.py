"""``cotal config``: the effective configuration, each key with its value and where it came
from; ``cotal config path``: where ``config.toml`` is.

Sources, strongest first: a flag, the environment, ``config.toml``, the default. ``cotal config``
takes no flag of the other commands, so ``flag`` is never a source here; the FLAG column names
the ``cotal watch`` flag that would win over what is shown. The keymap's rows come from every
screen's and widget's bindings, remapped or not by ``keymap.toml``. What the files hold that is
not used (unknown keys, bad values, keymap entries dropped) is listed last; the rest applies.

The console and ``cotal replay`` get their keymap and their one start-up notice from
:func:`console_start`, so what they drop is what this command lists.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cotal_tui.keymap import KnownBinding

BINDING_MODULES = ("cotal_tui.app", "cotal_tui.replay_app", "cotal_tui.palette")
BINDING_PACKAGES = ("cotal_tui.screens", "widgets")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="?", choices=["path"],
                        help="path: print config.toml's path (and whether it exists)")
    parser.add_argument("--json", action="store_true", help="the same as one JSON object")


def known_bindings() -> list[KnownBinding]:
    """Every binding with an id on the console's App, screens and widgets (Textual's own
    included, through each class's bases), one row per (id, class that has it)."""
    import importlib
    import pkgutil

    from textual.binding import Binding
    from textual.dom import DOMNode

    from cotal_tui.keymap import KnownBinding

    modules = [importlib.import_module(m) for m in BINDING_MODULES]
    for name in BINDING_PACKAGES:
        pkg = importlib.import_module(name)
        modules += [importlib.import_module(f"{name}.{i.name}")
                    for i in pkgutil.iter_modules(pkg.__path__)]
    rows: dict[tuple[str, str], KnownBinding] = {}
    for mod in modules:
        for cls in vars(mod).values():
            if not (isinstance(cls, type) and issubclass(cls, DOMNode)
                    and cls.__module__ == mod.__name__):
                continue
            for base in cls.__mro__:
                for b in vars(base).get("BINDINGS", ()):
                    if isinstance(b, Binding) and b.id:
                        rows.setdefault((b.id, cls.__name__),
                                        KnownBinding(b.id, b.key, b.description or b.action,
                                                     cls.__name__))
                if not getattr(base, "inherit_bindings", True):
                    break
    return sorted(rows.values(), key=lambda b: (b.id, b.owner))


def console_start(home: Path | None = None) -> tuple[dict[str, str], str | None]:
    """The keymap the console applies (every entry that is a key of one of its bindings) and
    the one status-line notice for what the user's files hold that is not used, or None."""
    _, keymap, problems = _checked(home)
    from cotal_tui.keymap import summary

    return keymap, summary(problems)


def _checked(home: Path | None):
    from cotal_tui.config import config_problems, read_config
    from cotal_tui.keymap import check_bindings, read_keymap

    km = read_keymap(home)
    # no entries, nothing to check: the binding table (every screen and widget module, pyte
    # too: ~100 ms) is built only for a keymap that remaps something
    keymap, dropped = check_bindings(km.entries, known_bindings(), f"keymap {km.path}",
                                     km.lines) if km.entries else ({}, [])
    return km, keymap, config_problems(read_config(home)) + _theme_problem(home) + km.problems \
        + dropped


def _theme_problem(home: Path | None) -> list[str]:
    """``[ui] theme`` naming a theme the console does not have (the console opens on
    cotal-dark with a notice instead; it is said here too)."""
    from cotal_tui.config import read_config, ui_theme
    from cotal_tui.themes import theme_names

    name, source = ui_theme(None, home)
    if source != "config.toml" or name in theme_names():
        return []
    where = read_config(home).where("ui", "theme")
    return [f"config {where}: [ui] theme must be one of {', '.join(theme_names())}; "
            f"got {name!r}"]


def run(args: argparse.Namespace) -> int:
    from cotal_tui.config import config_path

    if args.what == "path":
        p = config_path()
        if args.json:
            print(json.dumps({"path": str(p), "exists": p.is_file()}))
        else:
            print(p)
            print("exists" if p.is_file() else "does not exist yet (every key has its default)",
                  file=sys.stderr)
        return 0
    report = build_report()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


def build_report(home: Path | None = None) -> dict:
    """The effective configuration as plain data (``--json`` prints it as it is)."""
    from cotal_tui.config import config_path, settings

    km, keymap, problems = _checked(home)
    known = known_bindings()
    by_id: dict[str, list] = {}
    for b in known:
        by_id.setdefault(b.id, []).append(b)
    cfg = config_path(home)
    return {
        "config_file": {"path": str(cfg), "exists": cfg.is_file()},
        "keymap_file": {"path": str(km.path) if km.path else None,
                        "exists": km.path is not None},
        "settings": [s.__dict__ for s in settings(None, home)],
        "keymap": [{
            "id": bid,
            "key": keymap.get(bid, rows[0].key),
            "default": rows[0].key,
            "remapped": bid in keymap,
            "source": km.path.name if bid in keymap and km.path else "default",
            "origin": (f"{km.path}:{km.lines[bid]}" if bid in km.lines else str(km.path))
            if bid in keymap and km.path else None,
            "description": rows[0].description,
            "on": [b.owner for b in rows],
        } for bid, rows in sorted(by_id.items())],
        "problems": problems,
        "flags_of": "cotal watch",
    }


def _value(v: object) -> str:
    if v is None:
        return "(unset)"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def print_report(report: dict, out=None) -> None:
    out = out or sys.stdout
    cf, kf = report["config_file"], report["keymap_file"]
    print(f"config file  {cf['path']} ({'exists' if cf['exists'] else 'absent'})", file=out)
    print(f"keymap file  {kf['path'] or '(none: keymap.toml or keymap.json in the home)'}",
          file=out)
    print(file=out)
    rows = [(s["key"], _value(s["value"]),
             s["source"] + (f" ({s['origin']})" if s["origin"] else ""), s["flag"] or "")
            for s in report["settings"]]
    _table(("KEY", "VALUE", "SOURCE", "FLAG"), rows, out)
    print(file=out)
    rows = [(k["id"], k["key"], k["source"] + (f" ({k['origin']})" if k["origin"] else ""),
             k["description"]) for k in report["keymap"]]
    _table(("BINDING", "KEY", "SOURCE", "WHAT"), rows, out)
    print(file=out)
    print("Sources, strongest first: flag > environment > config.toml > default. FLAG is the "
          f"{report['flags_of']} flag that wins over the value shown.", file=out)
    if report["problems"]:
        print(file=out)
        print(f"Not used ({len(report['problems'])}; the rest of each file applies):", file=out)
        for p in report["problems"]:
            print(f"  {p}", file=out)


def _table(head: tuple[str, ...], rows: Sequence[tuple[str, ...]], out) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1], file=out)
