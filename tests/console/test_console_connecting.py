"""``cotal watch`` on a terminal whose broker does not answer: instead of
a blank screen it says ``connecting to <server> … Ns``, the seconds counting, until it fails
with one sentence. The "broker" is a real socket that accepts and never speaks."""

from __future__ import annotations

import os
import pty
import re
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_silent_broker_shows_connecting_with_the_seconds(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    master, slave = pty.openpty()
    env = {**os.environ, "COTAL_HOME": str(tmp_path), "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cotal_tui.cli", "watch", "--server", f"nats://127.0.0.1:{port}",
         "--space", "demo", "--connect-timeout", "4"],
        stdin=slave, stdout=slave, stderr=slave, cwd=str(ROOT), env=env, start_new_session=True)
    os.close(slave)
    out = b""
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    out += os.read(master, 4096)
                except OSError:
                    break
        rc = proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
        srv.close()
    text = out.decode(errors="replace")
    seconds = [int(s) for s in re.findall(
        rf"connecting to nats://127\.0\.0\.1:{port} … (\d+)s", text)]
    assert seconds and seconds[-1] >= 2, text  # it counted while waiting
    assert seconds == sorted(seconds)
    assert rc == 1 and "cotal: could not reach" in text, text
