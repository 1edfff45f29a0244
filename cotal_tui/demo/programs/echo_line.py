"""An interactive line program: a prompt, echoes each line, ``size`` prints the tty size.

Runs in cooked mode on a real pty (the kernel's line discipline does the local echo), so it
behaves like any shell-ish agent for attach tests: ``size`` answers ``rows cols`` like
``stty size``, ``exit`` ends it with status 0.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> int:
    signal.signal(signal.SIGINT, lambda *_: (sys.stdout.write("^C\r\n"), sys.stdout.flush()))
    name = sys.argv[1] if len(sys.argv) > 1 else "seat"
    out = sys.stdout
    out.write(f"{name} ready - type a line, 'size', or 'exit'\n")
    while True:
        out.write(f"{name}> ")
        out.flush()
        line = sys.stdin.readline()
        if not line:
            return 0
        line = line.rstrip("\r\n")
        if line == "exit":
            out.write("bye\n")
            out.flush()
            return 0
        if line == "size":
            sz = os.get_terminal_size(sys.stdout.fileno())
            out.write(f"{sz.lines} {sz.columns}\n")
        elif line:
            out.write(f"echo: {line}\n")


if __name__ == "__main__":
    sys.exit(main())
