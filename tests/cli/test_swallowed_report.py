"""What a kept ``except Exception`` lets go is counted by site (``meshview.errors.swallowed``),
and so is an owned task's failure (``meshview.tasks``); both are reported at exit in the
``COTAL_LOG`` file. A real process, a real log file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from meshview.errors import swallowed, swallowed_counts, swallowing

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import asyncio
from cotal_tui.cli.process import quiet_library_logs, start_log_file
from meshview.errors import swallowed
from meshview.tasks import TaskOwner

quiet_library_logs()  # as cotal_tui.cli.main does
start_log_file("probe")
swallowed("probe.site:f")
swallowed("probe.site:f")

async def main():
    owner = TaskOwner("probe")
    async def boom():
        raise RuntimeError("lost")
    t = owner.spawn(boom(), "boom")
    await asyncio.wait([t])
    await asyncio.sleep(0)  # the owner's done callback runs

asyncio.run(main())
"""


def test_swallowed_is_counted_by_site():
    before = swallowed_counts().get("probe.here:g", 0)
    swallowed("probe.here:g")
    assert swallowed_counts()["probe.here:g"] == before + 1


def test_swallowing_counts_what_it_suppresses_and_lets_a_cancel_through():
    before = swallowed_counts().get("probe.with:h", 0)
    with swallowing("probe.with:h"):
        raise OSError("gone")
    with swallowing("probe.with:h"):
        pass  # nothing raised, nothing counted
    assert swallowed_counts()["probe.with:h"] == before + 1
    with pytest.raises(KeyboardInterrupt), swallowing("probe.with:h"):
        raise KeyboardInterrupt  # not an Exception, as with contextlib.suppress(Exception)


def test_the_counts_are_reported_at_exit_in_the_cotal_log_file(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COTAL_LOG"}
    env.update(PYTHONPATH=str(ROOT), COTAL_HOME=str(tmp_path), COTAL_LOG="info")
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    [log] = (tmp_path / "log").glob("cotal-probe-*.log")
    text = log.read_text()
    assert "cotal.errors: swallowed: 2 at probe.site:f" in text, text
    assert "cotal.errors: task failed: 1 at probe:boom" in text, text
    assert "cotal.tasks: task probe:boom failed" in text, text


def test_nothing_is_written_without_cotal_log(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COTAL_LOG"}
    env.update(PYTHONPATH=str(ROOT), COTAL_HOME=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert not (tmp_path / "log").exists()
