"""The console's shell painted before its imports (cotal_tui/cli/splash.py): on a terminal only,
naming no server until the target is resolved, left exactly once, never after Textual took the
screen, and left on a SIGTERM that lands while the modules load."""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from cotal_tui.cli.splash import ENTER, LEAVE, paint

ROOT = Path(__file__).resolve().parents[2]


class Term:
    """A real pty: the shell writes to its slave, the test reads the master."""

    def __init__(self) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.out = os.fdopen(slave, "w", encoding="utf-8")

    def read(self) -> str:
        data = b""
        while select.select([self.master], [], [], 0.2)[0]:
            data += os.read(self.master, 65536)
        return data.decode()

    def close(self) -> None:
        self.out.close()
        os.close(self.master)


@pytest.fixture
def term():
    t = Term()
    yield t
    t.close()


def test_the_shell_paints_panels_and_connecting_then_leaves_once(term):
    shell = paint(argparse.Namespace(space="demo"), term.out)
    assert shell is not None
    first = term.read()
    assert first.startswith(ENTER)
    assert "roster" in first and "feed" in first and "demo" in first
    assert "connecting …" in first and "nats://" not in first  # no server before it is resolved
    shell.target("nats://127.0.0.1:4222")
    shell.connecting(3.2)
    text = term.read()
    assert "connecting to nats://127.0.0.1:4222 … 0s" in text
    assert "connecting to nats://127.0.0.1:4222 … 3s" in text
    shell.leave()
    shell.leave()
    assert term.read() == LEAVE


def test_after_textual_took_the_screen_leaving_writes_nothing(term):
    shell = paint(argparse.Namespace(space=None), term.out)
    assert shell is not None
    assert "spaces" in term.read()
    shell.handed_over()
    shell.leave()
    shell.connecting(1)
    assert term.read() == ""
    assert signal.getsignal(signal.SIGTERM) is not None and \
        getattr(signal.getsignal(signal.SIGTERM), "__self__", None) is not shell


def test_no_terminal_no_shell(tmp_path):
    with open(tmp_path / "out", "w") as f:
        assert paint(argparse.Namespace(space="demo"), f) is None
    assert (tmp_path / "out").read_text() == ""


def test_a_space_name_with_escapes_is_drawn_without_them(term):
    shell = paint(argparse.Namespace(space="ev\x1b]0;pwned\x07il\u202e"), term.out)
    assert shell is not None
    text = term.read()
    assert "ev]0;pwnedil" in text and "\x07" not in text and "\u202e" not in text
    shell.leave()


def test_a_sigterm_while_painted_leaves_the_alternate_screen(term):
    before = signal.getsignal(signal.SIGTERM)
    shell = paint(argparse.Namespace(space="demo"), term.out)
    assert shell is not None
    term.read()
    with pytest.raises(SystemExit) as e:
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0)  # let the handler run here, inside the raises block
    assert e.value.code == 128 + signal.SIGTERM
    assert term.read() == LEAVE
    assert signal.getsignal(signal.SIGTERM) == before


def test_the_shell_module_imports_nothing_heavy():
    """It is painted before the console's imports: it must not pull any of them in itself."""
    out = subprocess.run(
        [sys.executable, "-c", "import sys, cotal_tui.cli.splash as s; "
         "print(sorted(m for m in ('textual', 'rich', 'nats', 'msgspec', 'meshview.model', "
         "'meshview.link.connect', 'widgets', 'attach') "
         "if m in sys.modules))"],
        cwd=ROOT, capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
