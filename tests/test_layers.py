"""The model/UI wall (STYLE.md): meshview and attach import neither textual nor rich.

Runs in a fresh interpreter so modules the test session already imported cannot hide a leak.
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
