"""What a user installs: the wheel's contents, and a clean ``uv tool install .`` (what pipx does,
faster) into a temp HOME that then runs ``cotal --version`` and ``cotal demo --headless``.

Both build from a copy of the source tree (the files a checkout has, no ``build/`` or egg-info
left by an earlier build), and the install takes every dependency from the package index, as
on a fresh machine: these tests need the index (CI has it) and skip, saying so, without it.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds and a clean install from the index: ~30-60 s

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("cotal_tui", "meshview", "widgets", "attach")
# package data `cotal demo` and the console need at run time
NEEDED = ("cotal_tui/app.tcss", "cotal_tui/screens/console.tcss", "cotal_tui/screens/help.tcss",
          "cotal_tui/demo/contract/manager-contract.json", "cotal_tui/demo/programs/echo_line.py",
          "cotal_tui/demo/programs/dashboard.py", "cotal_tui/__main__.py", "cotal_tui/cli/__main__.py")


def source_copy(dest: Path) -> Path:
    """The tree a checkout has, without caches or an earlier build's leftovers."""
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    dest.mkdir()
    for f in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / f, dest / f)
    for p in PACKAGES:
        shutil.copytree(ROOT / p, dest / p, ignore=junk)
    return dest


def clean_env(home: Path) -> dict:
    """A fresh user: its own HOME, no virtualenv, no pip/uv settings or caches of ours."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("PIP_", "UV_", "XDG_", "PYTHON", "VIRTUAL_ENV", "COTAL_"))}
    path = ":".join(p for p in keep.get("PATH", "").split(":") if ".venv" not in p)
    return {**keep, "HOME": str(home), "PATH": f"{home / '.local' / 'bin'}:{path}",
            "UV_PYTHON_DOWNLOADS": "never"}


def run(argv: list, env: dict, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)


def test_the_wheel_holds_the_packages_and_their_data_only(tmp_path):
    src = source_copy(tmp_path / "src")
    out = run([sys.executable, "-m", "pip", "wheel", src, "--no-deps", "-q", "-w", tmp_path / "wheel"],
              env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    if out.returncode != 0 and "No matching distribution" in out.stderr:
        pytest.skip(f"the build backend could not be fetched from the package index: {out.stderr[-300:]}")
    assert out.returncode == 0, out.stderr
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {*PACKAGES, f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}, tops
    assert not [n for n in names if "/tests/" in n or "/bench/" in n or n.startswith(("tests/", "bench/"))]
    assert not [n for n in names if n.endswith((".pyc", ".svg", ".cast", ".orig"))]
    missing = [n for n in NEEDED if n not in names]
    assert missing == [], missing
    # every module of the tree is in it (a package without __init__.py would be left out)
    tree = {p.relative_to(src).as_posix() for top in PACKAGES for p in (src / top).rglob("*.py")}
    assert tree - set(names) == set()
    entry = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}"
                                        ".dist-info/entry_points.txt").decode()
    assert "cotal = cotal_tui.cli:main" in entry and "cotal-tui = cotal_tui.cli:main" in entry


def _read_until(proc: subprocess.Popen, prefix: str, timeout: float) -> tuple[str | None, list[str]]:
    """Lines of ``proc``'s stdout until one starts with ``prefix`` (None at the deadline)."""
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line.rstrip("\n"))
        if line.startswith(prefix):
            return line[len(prefix):].strip(), seen
    return None, seen


def test_uv_tool_install_in_a_fresh_home_runs_the_demo(tmp_path):
    t0 = time.monotonic()
    src = source_copy(tmp_path / "src")
    home = tmp_path / "home"
    home.mkdir()
    env = clean_env(home)
    tools = tmp_path / "tools"
    # uv itself, from the index into a venv of its own (pipx's way: a tool in its own venv)
    out = run([sys.executable, "-m", "venv", tools], env=env)
    assert out.returncode == 0, out.stderr
    out = run([tools / "bin" / "pip", "install", "-q", "--disable-pip-version-check", "uv"], env=env)
    if out.returncode != 0:
        pytest.skip(f"uv could not be installed from the package index: {out.stderr.strip()[-300:]}")
    uv = tools / "bin" / "uv"
    out = run([uv, "tool", "install", "--python", sys.executable, src], env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    installed = time.monotonic() - t0
    bindir = home / ".local" / "bin"
    assert (bindir / "cotal").exists() and (bindir / "cotal-tui").exists(), sorted(os.listdir(bindir))

    out = run([bindir / "cotal", "--version"], env=env, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("cotal-tui 0.1.0 (cotal-tui, the Python"), out.stderr
    out = run([bindir / "cotal-tui", "watch", "--version"], env=env, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("cotal-tui "), out.stderr
    tool_python = Path(os.path.realpath(bindir / "cotal")).parent / "python"
    out = run([tool_python, "-m", "cotal_tui", "--version"], env=env, timeout=60, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("cotal-tui "), out.stderr
    out = run([bindir / "cotal", "completion", "bash"], env=env, timeout=60)
    assert out.returncode == 0 and "complete -F _cotal cotal" in out.stdout, out.stderr

    demo = subprocess.Popen([bindir / "cotal", "demo", "--headless"], env=env, cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url, seen = _read_until(demo, "server:", 60)
        assert url and url.startswith("nats://"), (seen, demo.poll())
        # the installed mesh answers an installed client: its manager lists the demo's seats
        deadline = time.monotonic() + 30
        while True:
            ps = run([bindir / "cotal-tui", "ps", "--server", url, "--space", "main"], env=env, timeout=60)
            if ps.returncode == 0 and "running" in ps.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # a poll interval: the loop ends on the answer or the deadline
        assert ps.returncode == 0 and "running" in ps.stdout, (ps.stdout, ps.stderr)
    finally:
        demo.terminate()
        try:
            demo.wait(15)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait(5)
        for heavy in (home / ".cache", home / ".local" / "share", tools):  # ~150 MB per run
            shutil.rmtree(heavy, ignore_errors=True)
    took = time.monotonic() - t0
    print(f"uv tool install: {installed:.1f}s; with the demo: {took:.1f}s")
