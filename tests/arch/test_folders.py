"""One job per folder (issue 36): each subfolder of meshview/ and attach/ says what it may import,
and only the CLI (cotal_tui/cli/) writes to the process's stdout.

Read from the source like test_layers.py: a function-level import or a write in a function body
counts too. A folder's own modules and the shared leaves at meshview/'s top (errors, tasks,
timefmt) are always allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_layers import ROOT, imports_of

LEAVES = ("meshview.errors", "meshview.tasks", "meshview.timefmt")
# folder -> the folders of ours it may import besides itself and the leaves
FOLDERS: dict[str, tuple[str, ...]] = {
    "meshview/wire": (),  # every wire rule, imports nothing of ours
    "meshview/model": ("meshview.wire",),  # the pure model: no I/O, no connection
    "meshview/link": ("meshview.wire",),  # reaching a mesh: knows no model
    "meshview/observe": ("meshview.wire", "meshview.link", "meshview.model"),
    "meshview/act": ("meshview.wire", "meshview.link", "meshview.model", "meshview.observe"),
    "meshview/lines": ("meshview.wire", "meshview.link", "meshview.model", "meshview.observe"),
    "meshview/record": ("meshview.wire", "meshview.link", "meshview.model", "meshview.observe",
                        "meshview.lines"),
    "attach/terminal": ("meshview.wire", "attach.errors"),  # terminal state and bytes: no mesh, no session
    "attach/control": ("meshview", "attach.errors"),  # the §13 endpoint plane: knows no session or terminal
    "attach/session": ("meshview", "attach.control", "attach.terminal", "attach.errors"),
}
# attach's error root is attach's own leaf: every attach folder may import it, meshview never
LEAF_FILES = {"meshview/errors.py": (), "meshview/tasks.py": (), "meshview/timefmt.py": (), "attach/errors.py": ()}


def _within(mod: str, prefixes: tuple[str, ...]) -> bool:
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def folder_violations(root: Path = ROOT) -> list[str]:
    problems: dict[tuple[str, int], str] = {}
    rules = {**{f: (f.replace("/", "."), *LEAVES, *allowed) for f, allowed in FOLDERS.items()},
             **{f: allowed for f, allowed in LEAF_FILES.items()}}
    for where, allowed in rules.items():
        paths = [root / where] if where.endswith(".py") else sorted((root / where).rglob("*.py"))
        for path in paths:
            if not path.exists():
                continue
            rel = path.relative_to(root).as_posix()
            for line, mod in imports_of(path, root):
                if mod.split(".")[0] not in ("meshview", "attach", "widgets", "cotal_tui"):
                    continue
                if mod in ("meshview", "attach") or _within(mod, allowed):
                    continue
                problems.setdefault((rel, line), f"{rel}:{line} imports {mod} ({where} may import "
                                    f"only {', '.join(allowed) or 'nothing of ours'})")
    return [problems[k] for k in sorted(problems)]


def test_every_module_sits_in_a_folder_with_a_rule():
    """No flat module creeps back: meshview/ and attach/ hold folders, plus the four leaves."""
    loose = sorted(p.relative_to(ROOT).as_posix() for top in ("meshview", "attach")
                   for p in (ROOT / top).glob("*.py") if p.name != "__init__.py")
    assert loose == sorted(LEAF_FILES)
    folders = sorted(p.relative_to(ROOT).as_posix() for top in ("meshview", "attach")
                     for p in (ROOT / top).iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(FOLDERS)


def test_each_folder_imports_only_what_its_rule_allows():
    problems = folder_violations()
    assert problems == [], "imports across the folder rules:\n" + "\n".join(problems)


def test_the_folder_scan_catches_a_model_that_reaches_for_a_connection(tmp_path):
    (tmp_path / "meshview" / "model").mkdir(parents=True)
    (tmp_path / "meshview" / "model" / "bad.py").write_text(
        "from meshview.wire import names\ndef f():\n    from meshview.link.connect import connect\n")
    assert folder_violations(tmp_path) == [
        "meshview/model/bad.py:3 imports meshview.link.connect (meshview/model may import only "
        "meshview.model, meshview.errors, meshview.tasks, meshview.timefmt, meshview.wire)"]


# ---- only the CLI writes to the process's stdout (and meshview/attach to neither stream) -----------

# (file, what) -> why this write is allowed
WRITE_EXCEPTIONS = {
    # the mirror's worker process answers its parent on its own stdout, a pipe (never a terminal)
    ("attach/terminal/mirror_proc.py", "os.write(1)"): "the worker process's reply pipe",
    # one warning before any screen is up: a secret file readable by others
    ("meshview/link/connect.py", "print(file=sys.stderr)"): "a secret file's mode, said once at connect",
}


def _writes(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    # ``print(..., file=sys.stderr)`` is one write, not also a bare ``sys.stderr``
    dests = {id(k.value) for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.func.id == "print" for k in n.keywords if k.arg == "file"}
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and id(n) not in dests and isinstance(n.value, ast.Name) and n.value.id == "sys" \
                and n.attr in ("stdout", "stderr", "__stdout__", "__stderr__"):
            out.append((n.lineno, f"sys.{n.attr}"))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print":
            dest = next((k.value for k in n.keywords if k.arg == "file"), None)
            if dest is None:
                out.append((n.lineno, "print()"))
            elif isinstance(dest, ast.Attribute) and isinstance(dest.value, ast.Name) and dest.value.id == "sys":
                out.append((n.lineno, f"print(file=sys.{dest.attr})"))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "write" \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == "os" and n.args \
                and isinstance(n.args[0], ast.Constant) and n.args[0].value in (1, 2):
            out.append((n.lineno, f"os.write({n.args[0].value})"))
    return sorted(out)


def write_violations(root: Path = ROOT) -> tuple[list[str], set[tuple[str, str]]]:
    problems, used = [], set()
    for top in ("meshview", "attach", "widgets", "cotal_tui"):
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(("cotal_tui/cli/", "cotal_tui/demo/")):
                continue  # the CLI owns the process; the demo's scripted programs are processes
            for line, what in _writes(ast.parse(path.read_text(), rel)):
                stdout = "stdout" in what or what in ("print()", "os.write(1)")
                if not stdout and top not in ("meshview", "attach"):
                    continue  # the App may say a last sentence on stderr; only stdout is the CLI's
                if (rel, what) in WRITE_EXCEPTIONS:
                    used.add((rel, what))
                    continue
                problems.append(f"{rel}:{line} writes through {what}")
    return problems, used


def test_only_the_cli_writes_to_stdout():
    """Nothing below cotal_tui/cli/ writes to stdout; meshview/ and attach/ write to neither
    standard stream (a line stream's sink is handed its fd by the CLI)."""
    problems, used = write_violations()
    assert problems == [], "writes to the process's streams outside the CLI:\n" + "\n".join(problems)
    assert used == set(WRITE_EXCEPTIONS), f"stale exceptions: {set(WRITE_EXCEPTIONS) - used}"


def test_the_write_scan_catches_each_form(tmp_path):
    (tmp_path / "attach" / "session").mkdir(parents=True)
    (tmp_path / "attach" / "session" / "bad.py").write_text(
        "import os, sys\ndef f(b):\n    print('x')\n    sys.stdout.write('y')\n    os.write(1, b)\n"
        "    print('z', file=sys.stderr)\n    print('ok', file=b)\n")
    assert write_violations(tmp_path)[0] == [
        "attach/session/bad.py:3 writes through print()",
        "attach/session/bad.py:4 writes through sys.stdout",
        "attach/session/bad.py:5 writes through os.write(1)",
        "attach/session/bad.py:6 writes through print(file=sys.stderr)",
    ]
