"""The console's frame cap: 120 a second unless the user set TEXTUAL_FPS (``cotal_tui``)."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = "import cotal_tui.app, textual.constants as c, textual.screen as s; print(c.MAX_FPS, s.UPDATE_PERIOD)"


def _probe(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                          timeout=60, check=True).stdout.split()


def test_the_console_paints_up_to_120_frames_a_second_and_the_users_setting_wins():
    env = {k: v for k, v in os.environ.items() if k != "TEXTUAL_FPS"}
    fps, period = _probe(env)
    assert fps == "120" and abs(float(period) - 1 / 120) < 1e-9
    fps, period = _probe({**env, "TEXTUAL_FPS": "30"})
    assert fps == "30" and abs(float(period) - 1 / 30) < 1e-9
