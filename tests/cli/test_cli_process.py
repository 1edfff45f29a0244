"""What the ``cotal`` entry point sets up in its process, and what importing meshview does not:
the aiohttp deferral for nats-py is installed by the CLI only, and ``COTAL_LOG`` writes a log
file under ``$COTAL_HOME/log/`` (nothing at all without it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_py(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, **(env or {})})


def test_importing_meshview_installs_no_import_hook():
    out = run_py("import sys, meshview, meshview.observe.observer, meshview.link.connect\n"
                 "print(any(type(f).__module__ == 'meshview.link.natsload' for f in sys.meta_path))\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"]


def test_cotal_status_to_a_dead_broker_never_imports_aiohttp(tmp_path):
    """The measured start-up win (~450 ms of CPU): the entry point defers aiohttp for nats-py."""
    code = ("import sys\n"
            "from cotal_tui.cli import main\n"
            "rc = main(['status', 'ada', '--server', 'nats://127.0.0.1:1',\n"
            "           '--connect-timeout', '1'])\n"
            "print(rc, 'aiohttp' in sys.modules, file=sys.stdout)\n")
    out = run_py(code, {"COTAL_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "False"]
    assert "could not connect" in out.stderr


def test_cotal_log_writes_a_log_file_under_the_home(tmp_path):
    code = ("import logging, os\n"
            "from cotal_tui.cli import main\n"
            "main(['status', 'ada', '--server', 'nats://127.0.0.1:1', '--connect-timeout', '1'])\n"
            "logging.getLogger('cotal.observer').warning('a listener failed')\n"
            "print(os.getpid())\n")
    home = tmp_path / "home"
    out = run_py(code, {"COTAL_HOME": str(home), "COTAL_LOG": "debug"})
    assert out.returncode == 0, out.stderr
    log = home / "log" / f"cotal-status-{out.stdout.split()[-1]}.log"
    assert log.is_file(), sorted(p.name for p in home.rglob("*"))
    text = log.read_text()
    assert "WARNING cotal.observer: a listener failed" in text
    assert "a listener failed" not in out.stderr  # the file, never the terminal


def test_without_cotal_log_nothing_is_written(tmp_path):
    code = ("import logging\n"
            "from cotal_tui.cli import main\n"
            "main(['status', 'ada', '--server', 'nats://127.0.0.1:1', '--connect-timeout', '1'])\n"
            "logging.getLogger('cotal.observer').warning('a listener failed')\n")
    env = {k: v for k, v in os.environ.items() if k != "COTAL_LOG"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=ROOT, env={**env, "COTAL_HOME": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "log").exists()
    assert "a listener failed" not in out.stderr  # no last-resort handler on the terminal


def test_cotal_home_expands_the_tilde(monkeypatch, tmp_path):
    from meshview.link.home import cotal_home

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("COTAL_HOME", "~/elsewhere")
    assert cotal_home() == tmp_path / "elsewhere"
    monkeypatch.delenv("COTAL_HOME")
    assert cotal_home() == tmp_path / ".cotal"
