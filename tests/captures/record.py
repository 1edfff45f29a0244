"""Re-record the mirror's byte captures: real programs in a real pty at 80x24.

Run from the repo root: ``.venv/bin/python tests/captures/record.py``. The .bin files are what
the programs wrote to their terminal, byte for byte; tests replay them into the mirror and into
tmux. Output differs run to run (dates, sizes, top's figures), which is fine: each test compares
the mirror and tmux on the same recorded bytes.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLS, ROWS = 80, 24
ENV = {
    "TERM": "xterm-256color",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
    "PS1": r"\[\e[1;32m\]demo\[\e[0m\]:\[\e[34m\]~\[\e[0m\]$ ",
}


class Session:
    def __init__(self, argv: list[str]) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=ENV,
                                     start_new_session=True, cwd="/tmp")
        os.close(slave)
        self.fd = master
        self.buf = bytearray()

    def read_until(self, cond, timeout: float = 10.0, quiet: float = 0.4) -> bytes:
        """Read until cond(buf) holds and the program has been quiet for ``quiet`` seconds."""
        start = len(self.buf)
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    break
                if not data:
                    break
                self.buf += data
                last = time.monotonic()
            elif cond(bytes(self.buf[start:])) and time.monotonic() - last > quiet:
                break
        return bytes(self.buf[start:])

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def close(self) -> None:
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.close(self.fd)


def save(name: str, data: bytes) -> None:
    assert len(data) < 50_000, (name, len(data))
    (HERE / name).write_bytes(data)
    print(f"{name}: {len(data)} bytes", file=sys.stderr)


def main() -> None:
    s = Session(["ls", "-la", "--color=always", "/usr/lib"])
    save("ls_color.bin", s.read_until(lambda b: True, quiet=0.3))
    s.close()

    demo = HERE / "_demo.py"  # a program printing colours, attributes and wide characters
    demo.write_text(
        "import sys\n"
        "w = sys.stdout.write\n"
        "w('\\x1b[1mbold\\x1b[0m \\x1b[3mitalic\\x1b[0m \\x1b[4munder\\x1b[0m \\x1b[7mrev\\x1b[0m "
        "\\x1b[9mstrike\\x1b[0m \\x1b[5mblink\\x1b[0m\\n')\n"
        "for i in range(16): w(f'\\x1b[38;5;{i}m{i:02x}')\n"
        "w('\\x1b[0m\\n')\n"
        "for i in range(16, 256, 15): w(f'\\x1b[48;5;{i}m{i:3}')\n"
        "w('\\x1b[0m\\n')\n"
        "for r in range(0, 256, 32): w(f'\\x1b[38;2;{r};{255-r};128mT')\n"
        "w('\\x1b[0m \\x1b[31;42mred on green\\x1b[0m \\x1b[91;104mbright\\x1b[0m\\n')\n"
        "w('中文字符 日本語 한국어 emoji: 😀🎉 mixed a中b文c\\n')\n"
        "w('x' * 79 + '中' + 'tail\\n')\n"
        "w('wrap ' * 20 + '\\n')\n"
        "w('\\x1b[44m\\x1b[Kblue line erased\\x1b[0m\\n')\n"
        "w('\\x1b]2;demo title\\x07done\\n')\n"
    )
    s = Session([sys.executable, str(demo)])
    save("colors_wide.bin", s.read_until(lambda b: b"done" in b))
    s.close()
    demo.unlink()

    s = Session(["bash", "--norc", "--noprofile", "-i"])
    out = s.read_until(lambda b: b"$ " in b)
    s.send(b"echo hello; printf '\\xe4\\xb8\\xad\\xe6\\x96\\x87 ok\\n'\r")
    out += s.read_until(lambda b: b"ok" in b and b.endswith(b"$ ") or b.endswith(b"$ \x1b[?2004h"))
    save("bash_prompt.bin", out)
    s.send(b"exit\r")
    s.close()

    src = HERE / "_sample.py"
    src.write_text("".join(f"def f{i}(x: int) -> str:\n    return 'v{i} 中文' * x  # c\n\n" for i in range(20)))
    s = Session(["vim", "-u", "NONE", "-N", "-i", "NONE", "-n", "-c", "syntax on", "-c", "set number ruler",
                 str(src)])
    opened = s.read_until(lambda b: b"f6" in b, quiet=0.6)
    save("vim_open.bin", opened)
    s.send(b":q\r")
    save("vim_quit.bin", s.read_until(lambda b: False, timeout=3, quiet=0.3))
    s.close()

    lines = "".join(f"{i:3} 行 {'データ' * (i % 5)} {'x' * (i % 30)}\n" for i in range(60))
    src.write_text(lines)
    s = Session(["less", "-R", str(src)])
    save("less_open.bin", s.read_until(lambda b: b"\x1b[?1049h" in b and b"20" in b, quiet=0.6))
    s.send(b"q")
    save("less_quit.bin", s.read_until(lambda b: False, timeout=3, quiet=0.3))
    s.close()
    src.unlink()

    s = Session(["top", "-d", "60"])
    save("top.bin", s.read_until(lambda b: b"PID" in b, quiet=0.6))
    s.send(b"q")
    s.read_until(lambda b: False, timeout=3, quiet=0.3)
    s.close()


if __name__ == "__main__":
    main()
