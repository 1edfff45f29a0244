"""The raw-mode terminal client for ``cotal attach``: stdin → session, session → stdout.

The local terminal is put in raw mode and restored on every exit path (normal end, detach,
exceptions, SIGTERM/SIGHUP, interpreter exit), including the modes a remote full-screen program
may have switched on. The detach key is recognised only when it arrives alone in one read
(plus its kitty CSI-u and xterm modifyOtherKeys encodings); anything else is data.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import signal
import sys
import termios
import tty
from typing import Callable

from .client import AttachSession, Notice, drop_text, end_text
from .termfilter import TermFilter

DEFAULT_DETACH = 0x1D  # Ctrl-]
_DETACH_RE = re.compile(r"^(?:ctrl-|\^)([a-z@\[\\\]\^_])$", re.IGNORECASE)

# what a remote program may have turned on, turned off again
RESTORE = (
    b"\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l"
    b"\x1b[?1004l\x1b[?2004l\x1b[?1l\x1b>\x1b[?25h\x1b[0m"
)
LEAVE_ALT = b"\x1b[?1049l"
_ALT_RE = re.compile(rb"\x1b\[\?(1049|1047|47)([hl])")


class DetachKeyError(ValueError):
    pass


def parse_detach_key(value: str | None) -> int:
    """``COTAL_DETACH_KEY``: ``ctrl-<c>`` or ``^<c>``, c in a-z @ [ \\ ] ^ _; byte = c & 0x1f.
    Unset means Ctrl-]; set but empty is an error (a typo should not silently mean Ctrl-])."""
    if value is None:
        return DEFAULT_DETACH
    if not value.strip():
        raise DetachKeyError("COTAL_DETACH_KEY is set but empty: unset it for Ctrl-], "
                             "or give ctrl-<c> or ^<c> with c in a-z @ [ \\ ] ^ _")
    m = _DETACH_RE.fullmatch(value.strip())
    if not m:
        raise DetachKeyError(
            f"COTAL_DETACH_KEY={value!r} is not ctrl-<c> or ^<c> with c in a-z @ [ \\ ] ^ _"
        )
    c = m.group(1).lower()
    return ord(c) & 0x1F


def key_label(byte: int) -> str:
    """How the detach key is named to the user: ``Ctrl-]``, ``Ctrl-B``."""
    return "Ctrl-" + ("@" if byte == 0 else chr(ord("A") + byte - 1) if byte <= 26
                      else chr(byte | 0x40))


def banner_text(name: str, byte: int) -> str:
    return f"attached to {name} - {key_label(byte)} to detach"


def detached_text(name: str) -> str:
    return f"detached from {name}"


def detach_forms(byte: int) -> set[bytes]:
    """The press as a lone byte, kitty CSI-u and xterm modifyOtherKeys."""
    if byte == 0:
        cp = ord("@")
    elif 1 <= byte <= 26:
        cp = ord("a") + byte - 1
    else:
        cp = byte | 0x40  # 0x1b..0x1f -> [ \ ] ^ _
    return {bytes([byte]), f"\x1b[{cp};5u".encode(), f"\x1b[27;5;{cp}~".encode()}


class AltTracker:
    """Follows ?1049/1047/47 h|l across chunk boundaries."""

    def __init__(self) -> None:
        self.alt = False
        self._tail = b""

    def feed(self, data: bytes) -> None:
        buf = self._tail + data
        for m in _ALT_RE.finditer(buf):
            self.alt = m.group(2) == b"h"
        self._tail = buf[-12:]


class RawTerminal:
    """Raw mode on a tty fd with idempotent restore registered everywhere it can be."""

    def __init__(self, in_fd: int, out_fd: int):
        self.in_fd, self.out_fd = in_fd, out_fd
        self.saved: list | None = None
        self.alt = AltTracker()
        self._restored = True

    def enter(self) -> None:
        self.saved = termios.tcgetattr(self.in_fd)
        tty.setraw(self.in_fd, termios.TCSANOW)
        self._restored = False
        atexit.register(self.restore)

    def restore(self) -> None:
        if self._restored:
            return
        self._restored = True
        seq = RESTORE + (LEAVE_ALT if self.alt.alt else b"")
        try:
            os.write(self.out_fd, seq)
        except OSError:
            pass
        if self.saved is not None:
            try:
                termios.tcsetattr(self.in_fd, termios.TCSADRAIN, self.saved)
            except termios.error:
                pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            import select

            select.select([], [fd], [], 1.0)
            continue
        except InterruptedError:
            continue
        view = view[n:]


async def run_passthrough(
    session_factory: Callable[..., AttachSession],
    *,
    name: str,
    detach_byte: int = DEFAULT_DETACH,
    in_fd: int | None = None,
    out_fd: int | None = None,
    err: Callable[[str], None] | None = None,
    term_filter: TermFilter | None = None,
) -> tuple[str, int]:
    """Drive one attach on the local terminal; returns (final reason, exit code). The seat's
    output goes through ``term_filter`` (default: no clipboard writes, titles kept)."""
    in_fd = sys.stdin.fileno() if in_fd is None else in_fd
    out_fd = sys.stdout.fileno() if out_fd is None else out_fd
    is_tty = os.isatty(in_fd)
    term = RawTerminal(in_fd, out_fd)
    loop = asyncio.get_running_loop()
    forms = detach_forms(detach_byte)
    pending_pipe: list[bytes] = []
    filt = term_filter if term_filter is not None else TermFilter()

    at_line_start = [True]  # the remote's last byte ended a line (nothing written yet counts)

    def say(text: str, *, own_line: bool = False) -> None:
        """A status line on stderr; ``own_line``: start it on a fresh line when the remote
        left the cursor mid-line (its prompt), instead of gluing the two together."""
        if err is not None:
            err(text)
            return
        eol = "\r\n" if is_tty else "\n"
        lead = eol if own_line and not at_line_start[0] and not term.alt.alt else ""
        _write_all(2, (lead + text + eol).encode())
        at_line_start[0] = True

    def on_output(data: bytes) -> None:
        data = filt.feed(data)
        term.alt.feed(data)
        _write_all(out_fd, data)
        if data:
            at_line_start[0] = data.endswith(b"\n")

    def on_notice(n: Notice) -> None:
        if n.kind == "drop":
            _write_all(out_fd, b"\r\n" + drop_text(n.bytes).encode() + b"\r\n")
        else:
            say(n.text, own_line=True)

    size = None
    if os.isatty(out_fd):
        sz = os.get_terminal_size(out_fd)
        if sz.columns > 0 and sz.lines > 0:
            size = (sz.columns, sz.lines)
    session = session_factory(on_output=on_output, on_notice=on_notice, size=size)

    stop_signals = (signal.SIGTERM, signal.SIGHUP)
    stdin_done = asyncio.Event()

    def on_stdin() -> None:
        try:
            data = os.read(in_fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            loop.remove_reader(in_fd)
            stdin_done.set()
            return
        if is_tty and data in forms:
            loop.create_task(session.close())
            return
        if not is_tty:
            pending_pipe.append(data)  # piped stdin is buffered and delivered
            loop.create_task(flush_pipe())
            return
        loop.create_task(session.send_keys(data))  # dropped while no session is open

    async def flush_pipe() -> None:
        while pending_pipe and session.is_open:
            chunk = pending_pipe.pop(0)
            if not await session.send_keys(chunk):
                pending_pipe.insert(0, chunk)
                return

    def on_winch() -> None:
        try:
            sz = os.get_terminal_size(out_fd)
        except OSError:
            return
        if sz.columns > 0 and sz.lines > 0:
            loop.create_task(session.resize(sz.columns, sz.lines))

    try:
        if is_tty:
            term.enter()
        for sig in stop_signals:
            loop.add_signal_handler(sig, lambda: loop.create_task(session.close()))
        loop.add_signal_handler(signal.SIGWINCH, on_winch)
        try:
            loop.add_reader(in_fd, on_stdin)
        except PermissionError:  # a regular file: read it whole and deliver it
            with os.fdopen(os.dup(in_fd), "rb") as f:
                pending_pipe.append(f.read())
        from .client import AttachError

        try:
            await session.open()
        except AttachError as e:
            term.restore()
            if e.code == "cancelled":
                say(detached_text(name), own_line=True)
                return "detached", 0
            if e.code == "not-found":
                say(f"cotal attach: there is no seat named {name!r}.")
            else:
                say(f"cotal attach: {e.message}.")
            return e.code, 1
        say(banner_text(name, detach_byte))
        if pending_pipe:
            await flush_pipe()
        reason = await session.run()
    finally:
        try:
            loop.remove_reader(in_fd)
        except Exception:
            pass
        for sig in (*stop_signals, signal.SIGWINCH):
            try:
                loop.remove_signal_handler(sig)
            except Exception:
                pass
        term.restore()
    say(detached_text(name) if reason == "detached" else end_text(reason, name), own_line=True)
    code = 0 if reason in ("detached", "process-exit", "target-despawn", "not-found") else 1
    return reason, code
