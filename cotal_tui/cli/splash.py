"""The console's shell, painted before anything heavy is imported: the panels and a status bar
saying ``connecting to <server> … Ns``.

The console's modules (Textual, the widgets, nats-py, the model) take ~0.5 s to import on a
quiet box, and the broker answers after that: a terminal that stayed blank all that time felt
slow. This module imports nothing but the standard library's ``os``; it enters the alternate
screen and draws the shell at once, keeps the seconds counting while the connection is made,
and hands the screen to Textual (which enters the alternate screen again and paints over it).
Any path that ends before Textual runs calls :meth:`Shell.leave`, so an error sentence is
printed on the user's own screen, never on the alternate one.
"""

from __future__ import annotations

import os
import signal
from typing import Any, TextIO

ENTER = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J"  # alternate screen, cursor hidden, cleared
LEAVE = "\x1b[?25h\x1b[?1049l"
DIM, BOLD, RESET = "\x1b[2m", "\x1b[1m", "\x1b[0m"


def connecting_text(display: str, seconds: float) -> str:
    """The status bar's words while connecting (the same words as the line mode's); no
    ``display`` yet: the target is still being resolved."""
    return f"connecting to {display} … {seconds:.0f}s" if display else "connecting …"


def _box(top: int, left: int, width: int, height: int, title: str) -> str:
    """A dim rounded box at (top, left), 1-based, with ``title`` in its top edge."""
    inner = max(0, width - 2)
    head = f" {title} "[:inner]
    out = [f"\x1b[{top};{left}H{DIM}╭{head}{'─' * (inner - len(head))}╮"]
    for r in range(top + 1, top + height - 1):
        out.append(f"\x1b[{r};{left}H│\x1b[{r};{left + width - 1}H│")
    out.append(f"\x1b[{top + height - 1};{left}H╰{'─' * inner}╯{RESET}")
    return "".join(out)


def shell_frame(cols: int, rows: int, title: str, status: str) -> str:
    """The whole shell: a title line, the roster and feed panels, the status bar."""
    cols, rows = max(cols, 20), max(rows, 6)
    roster_w = max(10, min(48, cols // 3))
    body = rows - 2
    return "".join((
        f"\x1b[1;1H{BOLD} cotal{RESET} {DIM}· {title[: cols - 10]}{RESET}",
        _box(2, 1, roster_w, body, "roster"),
        _box(2, roster_w + 1, cols - roster_w, body, "feed"),
        status_line(rows, status),
    ))


def status_line(rows: int, status: str) -> str:
    """The bottom row rewritten in place."""
    return f"\x1b[{max(rows, 6)};1H\x1b[2K {status}"


class Shell:
    """The painted shell on one terminal stream, until Textual takes it or :meth:`leave`."""

    def __init__(self, out: TextIO, display: str, title: str) -> None:
        self.out, self.display = out, display
        try:
            self.cols, self.rows = os.get_terminal_size(out.fileno())
        except (OSError, ValueError):
            self.cols, self.rows = 80, 24
        self.shown = False
        self._term: Any = None
        try:  # a SIGTERM while the modules load: off the alternate screen, then exit (143)
            self._term = signal.signal(signal.SIGTERM, self._terminated)
        except ValueError:  # not the main thread: no handler, and no shell either
            return
        self._write(ENTER + shell_frame(self.cols, self.rows, title, connecting_text(display, 0)))
        self.shown = True

    def _terminated(self, signum: int, frame: Any) -> None:
        self.leave()
        raise SystemExit(128 + signum)

    def _release(self) -> None:
        """The SIGTERM handler back as it was (asyncio installs its own once the loop runs)."""
        if self._term is not None:
            try:
                if signal.getsignal(signal.SIGTERM) == self._terminated:
                    signal.signal(signal.SIGTERM, self._term)
            except ValueError:
                pass
            self._term = None

    def _write(self, text: str) -> None:
        try:
            self.out.write(text)
            self.out.flush()
        except (OSError, ValueError):
            pass

    def target(self, display: str) -> None:
        """The server is known (redacted by :mod:`meshview.link.connect`)."""
        self.display = display
        self.connecting(0)

    def connecting(self, seconds: float) -> None:
        """The seconds counting on the status bar."""
        if self.shown:
            self._write(status_line(self.rows, connecting_text(self.display, seconds)))

    def handed_over(self) -> None:
        """Textual owns the screen now: leaving is its job."""
        self.shown = False
        self._release()

    def leave(self) -> None:
        """Back to the user's own screen (once; nothing if Textual took over)."""
        self._release()
        if self.shown:
            self.shown = False
            self._write(LEAVE)


def paint(args: Any, out: TextIO) -> Shell | None:
    """The shell on ``out`` when it is a terminal. No server is named until the connection's
    target is resolved (:meth:`Shell.target`): a URL given raw may carry a password."""
    if not getattr(out, "isatty", lambda: False)():
        return None
    space = getattr(args, "space", None)
    title = "".join(c for c in str(space) if c.isprintable()) if space else "spaces"
    return Shell(out, "", title)
