"""A line sink that never blocks the event loop, for every line-mode command.

A consumer that stops reading (``cotal watch --json | slow``) must not stall the observer: a
blocking ``write`` on a full pipe freezes the loop, NATS pings and signal handling with it.
:class:`LineSink` writes with non-blocking syscalls and waits for writability with
``loop.add_writer``; what the consumer cannot take yet waits in a buffer bounded in bytes and
lines, and when that overflows the *oldest* pending lines are shed and counted. When the
consumer reads again, one gap line (``gap_line(gap, total)``) is written exactly where the
missing lines were, so nothing is lost silently.

Pipes and terminals are reopened through ``/proc/self/fd`` (a new open file description), so
``O_NONBLOCK`` never leaks to the shell or to other processes sharing the same stdout; where that
is impossible (sockets, no ``/proc``) the flag is set on the descriptor and restored on close.
Regular files are written directly: they never wait for a reader.

A consumer that goes away (``EPIPE``, or the read end of a pipe closing while we are idle) marks
the sink ``broken`` and calls ``on_broken``; the descriptor is then pointed at ``/dev/null`` so
later writers (the interpreter's final flush of ``sys.stdout``) stay quiet, as the Python docs
advise for ``SIGPIPE``.

Not thread-safe: use it from the event loop's thread.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import select
import stat
from collections import deque
from typing import Callable, Iterable

MAX_BYTES = 4 << 20  # pending output bound: ~4 MiB, thousands of JSON lines
MAX_LINES = 65_536
PIPE_SIZE = 1 << 20  # Linux's default pipe-max-size for unprivileged users
_IOV = 1024  # IOV_MAX on Linux and the BSDs


class LineSink:
    """Non-blocking, bounded, shedding line writer on a file descriptor.

    ``gap_line(gap, total)`` renders the line written where ``gap`` lines (``total`` so far)
    were shed; ``on_stall()`` is called once when shedding starts (before the consumer
    resumes, if it ever does); ``on_broken()`` when the consumer has gone away;
    ``on_shed(lines)`` with the encoded lines of each shedding, so an owner can say *what* was
    lost (``dropped`` counts every line: messages, but also state lines a reader may not expect).
    """

    def __init__(self, fd: int, *, max_bytes: int = MAX_BYTES, max_lines: int = MAX_LINES,
                 gap_line: Callable[[int, int], str | None] | None = None,
                 on_stall: Callable[[], None] | None = None,
                 on_broken: Callable[[], None] | None = None,
                 on_shed: Callable[[list[bytes]], None] | None = None,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop or asyncio.get_running_loop()
        self.max_bytes, self.max_lines = max_bytes, max_lines
        self.gap_line, self.on_stall, self.on_broken = gap_line, on_stall, on_broken
        self.on_shed = on_shed
        self.dropped = 0  # lines shed because the consumer was not reading (total)
        self.abandoned = 0  # lines still pending when the sink was closed
        self.broken = False
        self.closed = False
        self._gap = 0  # lines shed since the last gap line was written
        self._orig = fd
        self._fd, self._owned, self._restore = self._open(fd)
        self._q: deque[bytes] = deque()
        self._head = 0  # bytes of _q[0] already written: that line is never shed
        self._bytes = 0  # pending bytes (not counting the written part of the head)
        self._waiting = False  # add_writer registered: the fd is known to be full
        self._watching = False
        self._empty = asyncio.Event()
        self._empty.set()
        self._watch_hangup()

    # -- set-up ---------------------------------------------------------------------------

    @staticmethod
    def _open(fd: int) -> tuple[int, bool, int | None]:
        """(fd to write, whether we own it, flags to restore on close)."""
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode) or stat.S_ISBLK(mode):
            return fd, False, None
        if stat.S_ISFIFO(mode):
            try:  # best effort: a busy loop then hands a keen reader 1 MiB per turn, not 64 KiB
                if fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < PIPE_SIZE:
                    fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
            except (OSError, AttributeError):
                pass  # over the per-user pipe budget, or not Linux
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            try:
                nfd = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY
                              | os.O_CLOEXEC)
                return nfd, True, None
            except OSError:
                pass  # no /proc, or no reader left (ENXIO): fall back to the shared fd
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        if flags & os.O_NONBLOCK:
            return fd, False, None
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        return fd, False, flags

    def _watch_hangup(self) -> None:
        """Notice a pipe's reader leaving while we are idle (epoll reports EPOLLERR on a
        write-only pipe end once no reader is left), so ``watch | head -1`` ends at once."""
        try:
            if not stat.S_ISFIFO(os.fstat(self._fd).st_mode):
                return
            if fcntl.fcntl(self._fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_WRONLY:
                return
            self.loop.add_reader(self._fd, self._on_hangup)
            self._watching = True
        except (OSError, ValueError, NotImplementedError):
            pass

    def _on_hangup(self) -> None:
        p = select.poll()
        p.register(self._fd, select.POLLOUT)
        for _, ev in p.poll(0):
            if ev & (select.POLLERR | select.POLLHUP):
                self._break()

    # -- writing --------------------------------------------------------------------------

    @property
    def pending_lines(self) -> int:
        return len(self._q)

    @property
    def pending_bytes(self) -> int:
        return self._bytes

    @property
    def unreported(self) -> int:
        """Lines lost that no gap line has told the consumer about (shed since the last gap
        line, or abandoned at close): the owner says so elsewhere, e.g. on stderr."""
        return self._gap + self.abandoned

    def isatty(self) -> bool:
        try:
            return os.isatty(self._orig)
        except OSError:
            return False

    def write_line(self, line: str) -> None:
        self.write_lines((line,))

    def write_lines(self, lines: Iterable[str]) -> None:
        """Queue whole lines (a trailing newline is added to each) and write what fits now."""
        if self.broken:
            return  # the consumer is gone; nobody is left to tell
        if not isinstance(lines, (list, tuple)):
            lines = list(lines)
        if not lines:
            return
        if self.closed:
            self.dropped += len(lines)
            return
        done = 0
        if not self._q and not self._gap:
            # Nothing pending: the whole batch in one syscall, as cheap as a bare write. Only
            # when the reader is behind is the rest split into lines (the unit of shedding).
            data = ("\n".join(lines) + "\n").encode("utf-8", "backslashreplace")
            done = self._write_now(data)
            if done == len(data) or self.broken:
                return
        items = [(s + "\n").encode("utf-8", "backslashreplace") for s in lines]
        i = 0
        while done and done >= len(items[i]):  # already written whole (fast path's partial)
            done -= len(items[i])
            i += 1
        if i:
            items = items[i:]
        self._q.extend(items)
        self._head += done
        self._bytes += sum(map(len, items)) - done
        self._empty.clear()
        self._flush()  # even while waiting for writability: the reader may have moved since
        self._shed()

    def _write_now(self, data: bytes) -> int:
        """Write ``data`` until done or the fd is full; bytes written (the sink may break)."""
        view, done = memoryview(data), 0
        while done < len(data):
            try:
                n = os.write(self._fd, view[done:])
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                    self._break()
                break
            if n <= 0:
                break
            done += n
        return done

    def _shed(self) -> None:
        q = self._q
        if self._bytes <= self.max_bytes and len(q) <= self.max_lines:
            return
        head = q.popleft() if self._head else None  # a half-written line is finished first
        n = 0
        shed: list[bytes] | None = [] if self.on_shed is not None else None
        while q and (self._bytes > self.max_bytes or len(q) + (head is not None) > self.max_lines):
            line = q.popleft()
            self._bytes -= len(line)
            n += 1
            if shed is not None:
                shed.append(line)
        if head is not None:
            q.appendleft(head)
        if not q:
            self._empty.set()
        if n:
            first = self._gap == 0
            self.dropped += n
            self._gap += n
            if shed and self.on_shed is not None:  # (``shed`` is kept only when there is one)
                self.on_shed(shed)
            if first and self.on_stall is not None:
                self.on_stall()

    def _flush(self) -> None:
        """Write as much as the fd takes without blocking; wait for writability if it fills."""
        q = self._q
        while q and not self.broken:
            gap: bytes | None = None
            gap_at = 0  # where ``gap`` went in the queue (read only when there is a gap)
            if self._gap and self.gap_line is not None:
                text = self.gap_line(self._gap, self.dropped)
                if text is not None:
                    gap = (text + "\n").encode("utf-8", "backslashreplace")
                    gap_at = 1 if self._head else 0
                    q.insert(gap_at, gap)
                    self._bytes += len(gap)
            bufs: list[bytes | memoryview] = []
            for i, b in enumerate(q):
                if i == _IOV:
                    break
                bufs.append(memoryview(b)[self._head:] if i == 0 and self._head else b)
            try:
                n = os.writev(self._fd, bufs)
            except BlockingIOError:
                n = 0
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                    self._break()
                    return
                n = 0
            if gap is not None:
                before = len(q[0]) - self._head if gap_at == 1 else 0
                if n > before:
                    self._gap = 0  # the gap line is (being) written where the lines went missing
                else:
                    del q[gap_at]  # not written yet: rendered afresh, with the latest count
                    self._bytes -= len(gap)
            self._consume(n)
            if n == 0:  # full: wait for the reader (a partial write just retries, so a
                self._wait_writable()  # reader that keeps up takes a whole burst at once)
                return
        if not q:
            self._head = 0
            self._empty.set()
            if self._waiting:
                self._waiting = False
                self.loop.remove_writer(self._fd)

    def _consume(self, n: int) -> None:
        q = self._q
        while n and q:
            rest = len(q[0]) - self._head
            if n >= rest:
                n -= rest
                self._bytes -= rest
                q.popleft()
                self._head = 0
            else:
                self._head += n
                self._bytes -= n
                n = 0

    def _wait_writable(self) -> None:
        if self._waiting:
            return
        try:
            self.loop.add_writer(self._fd, self._flush)
            self._waiting = True
        except (OSError, ValueError, NotImplementedError):
            pass  # not pollable (never returns EAGAIN in practice): retried on the next write

    def _break(self) -> None:
        """The consumer is gone: drop everything, point the fd at /dev/null, tell the owner."""
        if self.broken:
            return
        self.broken = True
        self._q.clear()
        self._bytes = self._head = 0
        self._empty.set()
        self._unregister()
        self._release()
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._orig)
            finally:
                os.close(null)
        except OSError:
            pass
        if self.on_broken is not None:
            self.on_broken()

    # -- ending ---------------------------------------------------------------------------

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until every pending line is written (or the consumer is gone). False on
        timeout: the consumer is not reading; the lines stay pending."""
        if not self._q or self.broken:
            return not self._q
        try:
            await asyncio.wait_for(self._empty.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return not self._q

    def close(self) -> int:
        """Stop writing, without blocking: one last non-blocking attempt, then whatever is
        still pending is abandoned. Returns (and adds to ``abandoned``) how many lines."""
        if self.closed:
            return 0
        if self._q and not self.broken:
            self._waiting = False  # one more try even if we were waiting for writability
            self.loop.remove_writer(self._fd)
            self._flush()
        self.closed = True
        left = 0 if self.broken else len(self._q)
        self.abandoned += left
        self._q.clear()
        self._bytes = self._head = 0
        self._empty.set()
        self._unregister()
        self._release()
        return left

    def _release(self) -> None:
        """Close our reopened fd, or give the shared one its flags back (once)."""
        if self._owned:
            self._owned = False
            try:
                os.close(self._fd)
            except OSError:
                pass
        elif self._restore is not None:
            flags, self._restore = self._restore, None
            try:
                fcntl.fcntl(self._fd, fcntl.F_SETFL, flags)
            except OSError:
                pass

    def _unregister(self) -> None:
        if self._waiting:
            self._waiting = False
            self.loop.remove_writer(self._fd)
        if self._watching:
            self._watching = False
            self.loop.remove_reader(self._fd)
