"""The raw-mode terminal client for ``cotal attach``: stdin → session, session → stdout.

The local terminal is put in raw mode and restored on every exit path (normal end, detach,
exceptions, SIGTERM/SIGHUP, interpreter exit), including the modes a remote full-screen program
may have switched on. The detach key and the modes are :mod:`attach.terminal.detach`; this module
owns the process's side: the fds, the signal handlers and the exit code.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import signal
import sys
import termios
import tty
from typing import Callable

from attach.session.client import AttachSession, Notice, drop_text, end_text
from attach.terminal.detach import (DEFAULT_KEYS, LEAVE_ALT, RESTORE, AltTracker, DetachKeys, banner_text,
                                    detached_text)
from attach.terminal.termfilter import TermFilter
from meshview.errors import swallowed
from meshview.tasks import TaskOwner


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
    detach: DetachKeys = DEFAULT_KEYS,
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
    matcher = detach.matcher()
    held: list[asyncio.TimerHandle] = []  # the window of a partly typed detach sequence
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
    owned = TaskOwner("passthrough")  # keys, resizes and the close, each held until sent

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
        if is_tty:
            for h in held:
                h.cancel()
            held.clear()
            data, done = matcher.feed(data)
            if data:
                owned.spawn(session.send_keys(data), "keys")
            if done:
                owned.spawn(session.close(), "close")
            elif matcher.holding:
                held.append(loop.call_later(matcher.window, release))
            return
        if not is_tty:
            pending_pipe.append(data)  # piped stdin is buffered and delivered
            owned.spawn(flush_pipe(), "flush-pipe")
            return
        owned.spawn(session.send_keys(data), "keys")  # dropped while no session is open

    def release() -> None:
        """A partly typed sequence's window passed: its presses were keys after all."""
        held.clear()
        data = matcher.flush()
        if data:
            owned.spawn(session.send_keys(data), "keys")

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
            owned.spawn(session.resize(sz.columns, sz.lines), "resize")

    try:
        if is_tty:
            term.enter()
        for sig in stop_signals:
            loop.add_signal_handler(sig, lambda: owned.spawn(session.close(), "close"))
        loop.add_signal_handler(signal.SIGWINCH, on_winch)
        try:
            loop.add_reader(in_fd, on_stdin)
        except PermissionError:  # a regular file: read it whole and deliver it
            with os.fdopen(os.dup(in_fd), "rb") as f:
                pending_pipe.append(f.read())
        from attach.session.client import AttachError

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
        say(banner_text(name, detach))
        if pending_pipe:
            await flush_pipe()
        reason = await session.run()
    finally:
        for h in held:
            h.cancel()
        try:
            loop.remove_reader(in_fd)
        except Exception:  # noqa: BLE001 - the terminal is restored whatever the loop's state [counted: COTAL_LOG]
            swallowed("cotal_tui.cli.passthrough:run_passthrough")
        for sig in (*stop_signals, signal.SIGWINCH):
            try:
                loop.remove_signal_handler(sig)
            except Exception:  # noqa: BLE001 - the terminal is restored whatever the loop's state [counted: COTAL_LOG]
                swallowed("cotal_tui.cli.passthrough:run_passthrough#2")
        term.restore()
    say(detached_text(name) if reason == "detached" else end_text(reason, name), own_line=True)
    code = 0 if reason in ("detached", "process-exit", "target-despawn", "not-found") else 1
    return reason, code
