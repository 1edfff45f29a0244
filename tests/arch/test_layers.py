"""The layers (DESIGN.md): meshview and attach import neither textual nor rich (STYLE.md's wall),
imports of our own packages point down only: cotal_tui -> widgets -> attach -> meshview (and,
inside cotal_tui, cli -> apps -> screens -> support modules), and every wire rule lives in
meshview/wire.

The wall runs in a fresh interpreter so modules the test session already imported cannot hide a
leak; the direction and the wire rules are read from the source, so a function-level import or
a subject spelled in a function body counts too.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import importlib, json, pkgutil, sys
roots = ["meshview", "meshview.wire", "attach"]
imported, errors = [], {}
for name in roots:
    try:
        pkg = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name == name:
            continue  # package not written yet
        raise
    imported.append(name)
    for info in pkgutil.walk_packages(pkg.__path__, prefix=name + "."):
        try:
            importlib.import_module(info.name)
            imported.append(info.name)
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            errors[info.name] = f"{type(e).__name__}: {e}"
leaks = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "rich"))
print(json.dumps({"imported": imported, "errors": errors, "leaks": leaks}))
"""


def test_meshview_and_attach_never_import_textual_or_rich():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert "meshview.wire.decode" in result["imported"]
    assert "meshview.wire.presence" in result["imported"]
    assert result["errors"] == {}
    assert result["leaks"] == [], f"UI libraries leaked into the model layer: {result['leaks']}"


# ---- import direction, read from the source (every import, module- or function-level) -----------

OURS = ("meshview", "attach", "widgets", "cotal_tui")
# layer -> the packages of ours it may import (cotal_tui, the top, may import all of them)
MAY_IMPORT = {
    "meshview": {"meshview"},
    "attach": {"meshview", "attach"},
    "widgets": {"meshview", "attach", "widgets"},
}
DEMO = "cotal_tui.demo"
DEMO_USERS = ("cotal_tui/cli/demo.py", "cotal_tui/demo/", "tests/", "bench/")
# inside a package: folder -> modules of ours it may not import (the App drives its screens)
MAY_NOT_IMPORT = {
    "cotal_tui/screens/": ("cotal_tui.app",),
}


def _module_of(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module) for every import statement in the file, wherever it sits."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_of(path, root) if path.name == "__init__.py" else _module_of(path, root).rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(p for p in (*anchor, base) if p)
            # ``from pkg import mod`` may import a submodule: count each name under the base
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names if a.name != "*"]
    return out


def layer_violations(root: Path = ROOT) -> list[str]:
    """One line per offending import statement and rule."""
    problems: dict[tuple[str, int, str], str] = {}
    for top in (*OURS, "tests", "bench"):
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            allowed = MAY_IMPORT.get(top)
            for line, mod in imports_of(path, root):
                head = mod.split(".")[0]
                if allowed is not None and head in OURS and head not in allowed:
                    problems.setdefault((rel, line, "up"), f"{rel}:{line} imports {mod} ({top}/ may "
                                        f"import only {', '.join(sorted(allowed))} of ours)")
                if (mod == DEMO or mod.startswith(DEMO + ".")) and not rel.startswith(DEMO_USERS):
                    problems.setdefault((rel, line, "demo"), f"{rel}:{line} imports {mod} (demo code "
                                        "is for cli/demo.py, tests and benches only)")
                for folder, banned in MAY_NOT_IMPORT.items():
                    hit = next((b for b in banned if mod == b or mod.startswith(b + ".")), None)
                    if rel.startswith(folder) and hit:
                        problems.setdefault((rel, line, "inner"), f"{rel}:{line} imports {mod} "
                                            f"({folder} may not import {hit})")
    return [problems[k] for k in sorted(problems)]


def test_imports_point_down_only():
    """cotal_tui -> widgets -> attach -> meshview, never back up; demo code stays in demo."""
    assert imports_of(ROOT / "attach" / "session" / "client.py"), "the scan found no imports at all"
    problems = layer_violations()
    assert problems == [], "imports pointing up the layers:\n" + "\n".join(problems)


def test_meshview_leaves_the_process_to_the_cli():
    """argparse, signal handlers and process exit belong to the CLI (cotal_tui/cli/): meshview
    takes plain values, and never installs a signal handler or ends the process."""
    import ast

    problems = []
    for path in sorted((ROOT / "meshview").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                names = []
            if any(n.split(".")[0] in ("argparse", "signal") for n in names):
                problems.append(f"{rel}:{node.lineno} imports {', '.join(names)}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                f = node.func
                owner = f.value.id if isinstance(f.value, ast.Name) else None
                if f.attr in ("add_signal_handler", "set_wakeup_fd") or (owner, f.attr) in (
                        ("signal", "signal"), ("sys", "exit"), ("os", "_exit")):
                    problems.append(f"{rel}:{node.lineno} calls {owner or '…'}.{f.attr}")
            if isinstance(node, ast.Name) and node.id in ("exit", "quit", "SystemExit"):
                problems.append(f"{rel}:{node.lineno} uses {node.id}")
    assert problems == [], "process control in meshview:\n" + "\n".join(problems)


def test_screens_do_not_import_the_app(tmp_path):
    """The rule reads the source: a screen that imports the App, even inside a function, is caught."""
    screens = tmp_path / "cotal_tui" / "screens"
    screens.mkdir(parents=True)
    (tmp_path / "cotal_tui" / "__init__.py").write_text("")
    (screens / "__init__.py").write_text("")
    (screens / "bad.py").write_text("def f():\n    from cotal_tui.app import CotalApp\n")
    (screens / "good.py").write_text("from cotal_tui.screens.bad import f\n")
    assert layer_violations(tmp_path) == [
        "cotal_tui/screens/bad.py:2 imports cotal_tui.app (cotal_tui/screens/ may not import cotal_tui.app)",
    ]


# ---- every wire rule in meshview/wire --------------------------------------------

WIRE_HOME = "meshview/wire/"
SHIPPED = ("meshview", "attach", "widgets", "cotal_tui")
# Not scanned: tests/ and bench/ stand in for other peers, hostile ones included
# (tests/support/hostile.py), and spell raw subjects on purpose. Docstrings and comments may
# name a subject; only code strings count.
KINDS = ("chat", "inst", "svc", "ep", "epc", "epe", "epf", "epj", "epr", "ept", "epw", "eps",
         "wfj", "dinbox", "dlv", "live", "trace", "ctl")
# ``cotal.`` before an interpolated space (f"cotal.{s}…" / "cotal." + s), or a spelled subject
_SUBJECT = re.compile(r"(?:^|\.)cotal\.$|(?:^|\.)cotal\.[^.\s]+\.(?:" + "|".join(KINDS) + r")(?:\.|$)")
# a character class of identity/route tokens: a channel, mention, owner or actor grammar
_GRAMMAR = re.compile(r"\[[^\]]*(?:A-Za-z0-9|a-zA-Z0-9|a-z0-9|A-Z0-9)")


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}


def _is_str(n: ast.AST, value: str | None = None) -> bool:
    return isinstance(n, ast.Constant) and isinstance(n.value, str) and (value is None or n.value == value)


def wire_rules_in(path: Path, rel: str) -> list[str]:
    """One line per subject spelling, token grammar or protocol version in this file's code."""
    tree = ast.parse(path.read_text(), filename=rel)
    docs = _docstrings(tree)
    out = []
    for n in ast.walk(tree):
        where = f"{rel}:{getattr(n, 'lineno', 0)}"
        if _is_str(n) and id(n) not in docs:
            if _SUBJECT.search(n.value):
                out.append(f"{where} spells a subject {n.value!r}")
            if _GRAMMAR.search(n.value):
                out.append(f"{where} spells a token grammar {n.value!r}")
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "join"
              and n.args and isinstance(n.args[0], (ast.List, ast.Tuple)) and n.args[0].elts
              and _is_str(n.args[0].elts[0], "cotal")):
            out.append(f"{where} joins a subject from 'cotal'")
        elif isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            if any(_is_str(x, "cotal") for x in sides) and any(isinstance(x, ast.Subscript) for x in sides):
                out.append(f"{where} parses a subject by its 'cotal' token")
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, ast.Name) and t.id == "PROTOCOL_VERSION" for t in targets):
                out.append(f"{where} defines PROTOCOL_VERSION")
        elif isinstance(n, ast.Dict):
            if any(_is_str(k, "protocolVersion") and _is_str(v) for k, v in zip(n.keys, n.values)):
                out.append(f"{where} spells a protocolVersion")
    return out


def wire_rule_violations(root: Path = ROOT) -> list[str]:
    problems = []
    for top in SHIPPED:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if not rel.startswith(WIRE_HOME):
                problems += wire_rules_in(path, rel)
    return problems


def test_wire_rules_scan_catches_each_form(tmp_path):
    """Each way a wire rule can leak is caught; a docstring, a logger name or a URN is not one."""
    (tmp_path / "attach").mkdir()
    (tmp_path / "attach" / "leak.py").write_text(
        '"""Reads cotal.<space>.chat.> (a docstring may say so)."""\n'
        "import logging, re\n"
        "log = logging.getLogger('cotal.observer')\n"
        "URN = 'ai.cotal.manager'\n"
        "PROTOCOL_VERSION = '0.4'\n"
        "def f(s, toks):\n"
        "    a = f'cotal.{s}.chat.>'\n"
        "    b = 'cotal.' + s\n"
        "    c = '.'.join(['cotal', s, 'ep'])\n"
        "    d = toks[0] == 'cotal'\n"
        "    e = re.compile(r'[A-Za-z0-9_]+')\n"
        "    g = {'protocolVersion': '0.4'}\n"
        "    h = f'$JS.API.DIRECT.GET.EPC_{s}.cotal.{s}.epc.>'\n"
        "    i = 'cotal.Team.inst.local.bram.local.ada'\n"
    )
    found = wire_rule_violations(tmp_path)
    lines = sorted(int(p.split(":")[1].split()[0]) for p in found)
    assert lines == [5, 7, 8, 9, 10, 11, 12, 13, 14], found


def test_every_wire_rule_lives_in_meshview_wire():
    """No subject, identity/channel/mention grammar or protocol version outside meshview/wire:
    everything else builds and parses through it."""
    assert wire_rules_in(ROOT / "meshview" / "wire" / "subjects.py", "probe"), "the scan found no wire rule at all"
    problems = wire_rule_violations()
    assert problems == [], "wire rules outside meshview/wire:\n" + "\n".join(problems)


# ---- inside cotal_tui: cli -> the apps (+ palette) -> screens -> support modules ------------

_CLI, _APPS, _SCREENS = ("cotal_tui.cli",), ("cotal_tui.app", "cotal_tui.replay_app"), ("cotal_tui.screens",)
SUPPORT = ("session", "shell", "operator", "seats", "recording", "alerts", "config", "keymap", "themes",
           "about", "errors")
# file or folder -> the cotal_tui modules it may not import (anything else in cotal_tui it may)
INNER_BANS: dict[str, tuple[str, ...]] = {
    "cotal_tui/app.py": _CLI,
    "cotal_tui/replay_app.py": _CLI,
    # the App's command palette (only app.py imports it): it drives the console screen and
    # lists the screens' control verbs, so it sits on the App's floor, not among the support
    "cotal_tui/palette.py": _CLI + _APPS,
    "cotal_tui/screens/": _CLI + _APPS + ("cotal_tui.palette",),
    **{f"cotal_tui/{m}.py": _CLI + _APPS + _SCREENS + ("cotal_tui.palette",) for m in SUPPORT},
}
# (file, module) -> why this one import crosses the order on purpose
INNER_EXCEPTIONS: dict[tuple[str, str], str] = {
    # the shell protocol names the screens' types in its annotations, under TYPE_CHECKING only:
    # screens import the shell at run time, the shell never imports a screen
    ("cotal_tui/shell.py", "cotal_tui.screens.console"): "type only (ConsoleScreen)",
    ("cotal_tui/shell.py", "cotal_tui.screens.control"): "type only (Controls)",
    ("cotal_tui/shell.py", "cotal_tui.screens.runs"): "type only (RunsDesk)",
}


def _hit(mod: str, banned: tuple[str, ...]) -> str | None:
    return next((b for b in banned if mod == b or mod.startswith(b + ".")), None)


def inner_violations(root: Path = ROOT) -> tuple[list[str], set[tuple[str, str]]]:
    """(one line per import crossing the order inside cotal_tui, the exceptions still used)."""
    problems: dict[tuple[str, int], str] = {}
    used: set[tuple[str, str]] = set()
    for path in sorted((root / "cotal_tui").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        banned = tuple(b for where, bans in INNER_BANS.items() if rel == where
                       or (where.endswith("/") and rel.startswith(where)) for b in bans)
        for line, mod in imports_of(path, root):
            hit = _hit(mod, banned)
            if hit is None:
                continue
            key = next(((f, e) for f, e in INNER_EXCEPTIONS if f == rel and _hit(mod, (e,))), None)
            if key is not None:
                used.add(key)
                continue
            problems.setdefault((rel, line), f"{rel}:{line} imports {mod} ({rel} may not import {hit})")
    return [problems[k] for k in sorted(problems)], used


def test_cotal_tui_keeps_its_inner_order(tmp_path):
    """Inside cotal_tui, imports point down this order (module- or function-level alike):

    1. ``cotal_tui/cli/`` — argparse, signals, stdout and exit — may import anything in cotal_tui;
    2. ``app.py`` and ``replay_app.py`` (with ``palette.py``, the App's command palette) may
       import screens and the support modules, never ``cotal_tui.cli``; the palette never an app;
    3. ``cotal_tui/screens/`` may import each other and the support modules, never an app, the
       palette or the cli: they reach the App through the shell (``cotal_tui/shell.py``);
    4. the support modules (session, shell, operator, seats, recording, alerts, config, keymap)
       import none of screens, palette, the apps or the cli.

    Imports that cross it on purpose are listed in INNER_EXCEPTIONS with the reason; one that no
    longer happens must leave the list."""
    problems, used = inner_violations()
    assert problems == [], "imports pointing up inside cotal_tui:\n" + "\n".join(problems)
    assert used == set(INNER_EXCEPTIONS), f"stale exceptions: {set(INNER_EXCEPTIONS) - used}"
    session = imports_of(ROOT / "cotal_tui" / "session.py")  # plain values (SessionOptions) only
    assert session and not any(m.split(".")[0] == "argparse" for _, m in session)
    # the scan reads the source: a function-level import up the order is caught
    for folder in ("cotal_tui", "cotal_tui/screens", "cotal_tui/cli"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "cotal_tui" / "seats.py").write_text("def f():\n    from cotal_tui.screens import tile\n")
    (tmp_path / "cotal_tui" / "screens" / "tile.py").write_text("from cotal_tui import replay_app\n")
    (tmp_path / "cotal_tui" / "app.py").write_text("import cotal_tui.cli.watch\n")
    (tmp_path / "cotal_tui" / "cli" / "watch.py").write_text("from cotal_tui.app import CotalApp\n")
    assert inner_violations(tmp_path)[0] == [
        "cotal_tui/app.py:1 imports cotal_tui.cli.watch (cotal_tui/app.py may not import cotal_tui.cli)",
        "cotal_tui/screens/tile.py:1 imports cotal_tui.replay_app (cotal_tui/screens/tile.py may "
        "not import cotal_tui.replay_app)",
        "cotal_tui/seats.py:2 imports cotal_tui.screens (cotal_tui/seats.py may not import "
        "cotal_tui.screens)",
    ]
