"""Raw ``cotal attach`` against a real pty program that writes the clipboard (OSC 52) and the
window title (OSC 0), each split over two writes: the operator's terminal gets the clipboard
write only with ``--clipboard``, and the title unless ``[attach] titles = false``."""

from __future__ import annotations

import asyncio
import sys

from cotal_tui.demo.manager import DemoManager, SeatSpec
from test_attach_cli import PtyRun, attach_argv

SECRET = b"Y3VybCBldmlsLnNofHNo"  # base64 the seat wants in the operator's clipboard
PROGRAM = r"""
import os, sys, time
os.write(1, b"osc-ready> ")
for line in sys.stdin:  # each line the operator types: the writes again, live
    for part in (b"before \x1b]5", b"2;c;@SECRET@", b"\x07 middle \x1b]0;seat-", b"title\x1b",
                 b"\\ after\r\nosc-done " + line.strip().encode() + b"\r\n"):
        os.write(1, part)
        time.sleep(0.15)  # separate reads on the way
""".replace("@SECRET@", SECRET.decode())


async def _attach_and_trigger(broker, space, tmp_path, *extra: str, home=None) -> bytes:
    """Attach, have the seat write, detach: what the operator's terminal received meanwhile."""
    env = {"COTAL_HOME": str(home or tmp_path)}
    word = f"go{len(extra)}{home is not None}".encode()
    r = PtyRun(attach_argv(broker, space, "osc", *extra), env=env)
    try:
        await r.wait(b"osc-ready>")
        start = len(r.buf)
        r.type(word + b"\r")
        await r.wait(b"osc-done " + word)
        await asyncio.sleep(0.2)
        r.type(b"\x1d")  # detach, alone in its read
        assert await r.exit_code() == 0
        return bytes(r.buf[start:])
    finally:
        r.close()


async def test_raw_attach_drops_clipboard_writes_unless_allowed(broker, nc, space, tmp_path):
    prog = tmp_path / "osc_seat.py"
    prog.write_text(PROGRAM)
    m = DemoManager(nc, space, [SeatSpec("osc", "local.osc", argv=[sys.executable, str(prog)])])
    await m.start()
    try:
        seen = await _attach_and_trigger(broker, space, tmp_path)
        assert b"before " in seen and b" middle " in seen and b" after" in seen
        assert SECRET not in seen and b"\x1b]52" not in seen  # the clipboard write: dropped
        assert b"\x1b]0;seat-title\x1b\\" in seen  # the title: kept by default

        seen = await _attach_and_trigger(broker, space, tmp_path, "--clipboard")
        assert b"\x1b]52;c;" + SECRET + b"\x07" in seen  # allowed: passed whole

        home = tmp_path / "home"
        home.mkdir()
        (home / "config.toml").write_text("[attach]\ntitles = false\n")
        seen = await _attach_and_trigger(broker, space, tmp_path, home=home)
        assert b"seat-title" not in seen and SECRET not in seen
        assert b" middle " in seen and b" after" in seen
    finally:
        await m.stop()


def test_attach_terminal_settings_flag_over_config_over_default(tmp_path):
    import argparse

    from cotal_tui.config import attach_terminal

    none = argparse.Namespace(clipboard=None, titles=None)
    assert attach_terminal(none, tmp_path) == ((False, "default"), (True, "default"))
    (tmp_path / "config.toml").write_text("[attach]\nclipboard = true\ntitles = false\n")
    assert attach_terminal(none, tmp_path) == ((True, "config.toml"), (False, "config.toml"))
    (tmp_path / "config.toml").write_text("[attach]\nclipboard = \"yes\"\n")  # not a bool: unused
    assert attach_terminal(none, tmp_path)[0] == (False, "default")
    flags = argparse.Namespace(clipboard=True, titles=False)
    assert attach_terminal(flags, tmp_path) == ((True, "flag"), (False, "flag"))
