"""Mirror.feed throughput against bare pyte on the same recorded pty output, and snapshot() cost.

Run: ``.venv/bin/python bench/mirror.py``. Records, in a real pty, ``ls -laR --color=always /usr/lib``
(capped at 2 MiB) and vim paging through a Python file with syntax colours, then feeds each
recording in 4 KiB chunks to a bare ``pyte.Screen`` + ``pyte.ByteStream`` and to ``Mirror``
(pyte with the fast paths of ``attach/terminal/fast_screen.py`` and a fast feed loop), A/B alternating,
five rounds, median of each. Goal: Mirror ≥ 2× bare pyte. Each recording is also fed to the
mirror built on bare pyte (``tests/attach/test_mirror_fast.py``'s reference) and the two final
screens are compared cell for cell. Then snapshot() times at 120x32.
"""

from __future__ import annotations

import fcntl
import os
import select
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pyte

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "attach"))
from test_mirror_fast import RefMirror, screen_state  # noqa: E402

from attach.terminal.mirror import Mirror  # noqa: E402

COLS, ROWS = 120, 32
CHUNK = 4096
ENV = {"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin", "HOME": "/tmp"}


def spawn(argv: list[str]) -> tuple[subprocess.Popen, int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=ENV, start_new_session=True)
    os.close(slave)
    return proc, master


def drain(fd: int, quiet: float, cap: int = 1 << 30) -> bytes:
    out = bytearray()
    while len(out) < cap:
        r, _, _ = select.select([fd], [], [], quiet)
        if not r:
            break
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
    return bytes(out)


def record_ls() -> bytes:
    proc, fd = spawn(["ls", "-laR", "--color=always", "/usr/lib"])
    data = drain(fd, 1.0, cap=2 << 20)
    proc.kill()
    proc.wait()
    os.close(fd)
    return data


def record_vim(pages: int = 150) -> bytes:
    src = Path(pyte.__file__).with_name("screens.py")
    proc, fd = spawn(["vim", "-u", "NONE", "-N", "-i", "NONE", "-n", "-R", "-c", "syntax on", "-c", "set number",
                      str(src)])
    out = bytearray(drain(fd, 0.5))
    for i in range(pages):
        os.write(fd, b"\x06" if (i // 25) % 2 == 0 else b"\x02")  # page down, then back up
        out += drain(fd, 0.05)
    os.write(fd, b":q!\r")
    out += drain(fd, 0.3)
    proc.kill()
    proc.wait()
    os.close(fd)
    return bytes(out)


def feed_pyte(data: bytes) -> float:
    screen = pyte.Screen(COLS, ROWS)
    stream = pyte.ByteStream(screen)
    t = time.perf_counter()
    for i in range(0, len(data), CHUNK):
        try:
            stream.feed(data[i : i + CHUNK])
        except TypeError:  # bare pyte raises on e.g. vim's CSI ? 4 m; the rest of that chunk is lost
            pass
    return time.perf_counter() - t


def feed_mirror(data: bytes, cls: type = Mirror) -> tuple[float, Mirror]:
    m = cls(COLS, ROWS)
    t = time.perf_counter()
    for i in range(0, len(data), CHUNK):
        m.feed(data[i : i + CHUNK])
    return time.perf_counter() - t, m


ROUNDS = 5


def compare(name: str, data: bytes) -> float:
    bare, mirror = [], []
    for _ in range(ROUNDS):
        bare.append(feed_pyte(data))
        dt, m = feed_mirror(data)
        mirror.append(dt)
    _, ref = feed_mirror(data, RefMirror)
    same = screen_state(m._screen) == screen_state(ref._screen)
    mb = len(data) / 1e6
    rb, rm = mb / statistics.median(bare), mb / statistics.median(mirror)
    print(f"{name:<28} {mb:6.2f} MB   bare pyte {rb:5.2f} MB/s   Mirror {rm:5.2f} MB/s   "
          f"{rm / rb:4.2f}x  (goal >= 2x)   same screen as on bare pyte: {'yes' if same else 'NO'}")
    return rm / rb


def time_snapshot(name: str, m: Mirror, n: int = 200) -> None:
    snap = m.snapshot()
    t = time.perf_counter()
    for _ in range(n):
        m.snapshot()
    ms = (time.perf_counter() - t) / n * 1000
    print(f"snapshot {name:<19} {COLS}x{ROWS}: {ms:6.2f} ms  ({len(snap)} bytes)")


def main() -> None:
    ls = record_ls()
    vim = record_vim()
    print(f"python {sys.version.split()[0]}, pyte {pyte.__version__ if hasattr(pyte, '__version__') else '0.8.2'}, "
          f"{CHUNK} B chunks, A/B alternating, median of {ROUNDS}\n")
    compare("ls -laR --color /usr/lib", ls)
    compare("vim paging (full screen)", vim)
    cjk = "".join(f"{i:3} 中文字符 日本語テキスト 한국어 \x1b[32mgreen\x1b[0m émoji 😀\r\n" for i in range(8000))
    compare("CJK/emoji lines (synthetic)", cjk.encode())

    m = Mirror(COLS, ROWS)
    m.feed(ls)
    time_snapshot("ls screen", m)
    m = Mirror(COLS, ROWS)
    m.feed(vim[: len(vim) // 2])
    time_snapshot("vim (alt + main)", m)
    m = Mirror(COLS, ROWS)
    dense = "".join(f"\x1b[38;5;{(x * 7 + y) % 256};48;2;{x};{y * 8};99;{1 + (x % 2) * 2}m{chr(33 + x % 90)}"
                    for y in range(ROWS) for x in range(COLS))
    m.feed(dense.encode())
    time_snapshot("every cell styled", m)


if __name__ == "__main__":
    main()
