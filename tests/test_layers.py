"""The layers (DESIGN.md): meshview and attach import neither textual nor rich (STYLE.md's wall),
and imports of our own packages point down only: cotal_tui -> widgets -> attach -> meshview.

The wall runs in a fresh interpreter so modules the test session already imported cannot hide a
leak; the direction is read from the source, so a function-level import counts too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

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
DEMO_USERS = ("cotal_tui/cmd_demo.py", "cotal_tui/demo/", "tests/", "bench/")


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import statement in the file, wherever it sits."""
    import ast

    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_of(path) if path.name == "__init__.py" else _module_of(path).rpartition(".")[0]
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
            for line, mod in imports_of(path):
                head = mod.split(".")[0]
                if allowed is not None and head in OURS and head not in allowed:
                    problems.setdefault((rel, line, "up"), f"{rel}:{line} imports {mod} ({top}/ may "
                                        f"import only {', '.join(sorted(allowed))} of ours)")
                if (mod == DEMO or mod.startswith(DEMO + ".")) and not rel.startswith(DEMO_USERS):
                    problems.setdefault((rel, line, "demo"), f"{rel}:{line} imports {mod} (demo code "
                                        "is for cmd_demo, tests and benches only)")
    return [problems[k] for k in sorted(problems)]


def test_imports_point_down_only():
    """cotal_tui -> widgets -> attach -> meshview, never back up; demo code stays in demo."""
    assert imports_of(ROOT / "attach" / "client.py"), "the scan found no imports at all"
    problems = layer_violations()
    assert problems == [], "imports pointing up the layers:\n" + "\n".join(problems)
