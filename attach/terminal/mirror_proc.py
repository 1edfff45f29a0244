"""The host mirror in a worker process of its own, so pyte never takes the manager's GIL.

pyte is pure Python and far slower than a pty (~1 MB/s); fed on a thread of the manager it
competes with the pty → rail path for the one interpreter. Here a child interpreter holds the
:class:`~attach.terminal.mirror.Mirror`, and the manager only writes bytes down a pipe.

Frames both ways are ``kind (1 byte) | length (4 bytes, big-endian) | payload``:

- to the worker: ``D`` pty bytes, ``R`` resize (cols, rows as two u16), ``S`` snapshot request;
- from the worker: ``A`` bytes fed (u32) after each ``D``, ``P`` a snapshot.

One pipe keeps the order, so a snapshot reflects every byte sent before it. The parent keeps
the skip-ahead bound: bytes sent but not yet acknowledged plus bytes waiting to be sent never
pass ``backlog_max`` — past it the oldest waiting bytes are skipped down to ``backlog_keep``,
keeping only their mode switches, so memory stays bounded and a flood never throttles the
program. Once it skips, the parent goes lazy until the flood has been over for ``LAZY_S``: it
only keeps the bounded tail and sends it when a snapshot (or a sync, a resize) is asked for —
parsing bytes that will be skipped anyway is CPU the program, the manager and the keys need,
and an idle worker answers a snapshot at once. The worker dies with its parent (end of its stdin, and ``PR_SET_PDEATHSIG`` on Linux)
and is restarted, seeded with the last snapshot, if it dies on its own.
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import signal
import struct
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

_HEAD = struct.Struct(">cI")
_U32 = struct.Struct(">I")
_SIZE = struct.Struct(">HH")
_MODE_SEQ = re.compile(rb"\x1b\[\?[0-9;]*[hl]|\x1bc")
_ROOT = str(Path(__file__).resolve().parents[1])
FRAME_DATA = 64 * 1024  # pty bytes per D frame
INFLIGHT_MAX = 128 * 1024  # bytes framed for the worker but not yet acknowledged
REPLY_WAIT_S = 10.0  # a worker that answers nothing this long is killed and restarted
LAZY_S = 1.0  # after a skip, parse only on demand until this long without another


def _frame(kind: bytes, payload: bytes = b"") -> bytes:
    return _HEAD.pack(kind, len(payload)) + payload


def _pdeathsig() -> None:  # runs in the worker between fork and exec
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (ImportError, OSError, AttributeError):  # no ctypes, no libc, no prctl: not Linux
        pass


class MirrorProc:
    """The parent's handle on one mirror worker. Everything runs on the caller's thread."""

    def __init__(self, cols: int, rows: int, *, backlog_max: int, backlog_keep: int):
        self.cols, self.rows = cols, rows
        self.backlog_max, self.backlog_keep = backlog_max, backlog_keep
        self.skipped = 0  # bytes never mirrored (floods, a worker death)
        self.restarts = 0
        self.proc: subprocess.Popen | None = None
        self._pending: deque[bytes] = deque()  # pty bytes not yet framed
        self._pending_bytes = 0
        self._out = bytearray()  # framed, not yet written to the pipe
        self._inflight = 0  # D payload bytes framed but not acknowledged
        self.fed = 0  # D payload bytes the worker has acknowledged (its progress)
        self._in = bytearray()
        self._replies: deque[bytes] = deque()
        # who gets each snapshot asked for, in order: None (a blocking snapshot()) or a future
        self._takers: deque[asyncio.Future | None] = deque()
        self._last_snapshot = b""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer_on = False
        self._closed = False
        self._lazy_until = 0.0  # monotonic time until which the parent sends bytes on demand only

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._spawn()

    def _spawn(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {_ROOT!r}); "
             "from attach.terminal.mirror_proc import main; main()", str(self.cols), str(self.rows)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
            preexec_fn=_pdeathsig if sys.platform.startswith("linux") else None,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._wfd, self._rfd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self._wfd, False)
        os.set_blocking(self._rfd, False)
        self._in.clear()
        self._writer_on = False
        if self._loop is not None:
            self._loop.add_reader(self._rfd, self._on_readable)
        if self._last_snapshot:  # a restart begins from the last screen it showed
            self._out += _frame(b"D", self._last_snapshot)
            self._inflight += len(self._last_snapshot)

    def _kill(self) -> None:
        p = self.proc
        if p is None:
            return
        self.proc = None
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._rfd)
            if self._writer_on:
                self._loop.remove_writer(self._wfd)
        self._writer_on = False
        try:
            p.kill()
        except ProcessLookupError:
            pass
        p.wait()
        for f in (p.stdin, p.stdout):
            if f is None:  # (both are pipes: never)
                continue
            try:
                f.close()
            except OSError:
                pass

    def _restart(self) -> None:
        """The worker died: what it had not acknowledged is lost (counted), then a fresh one."""
        self._kill()
        if self._closed:
            return
        self.skipped += self._inflight
        self._inflight = 0
        self._out.clear()
        self._replies.clear()
        self._settle_takers()
        self.restarts += 1
        self._spawn()

    def _settle_takers(self) -> None:
        """Snapshots asked of a dead worker: each gets the last screen it showed."""
        for fut in self._takers:
            if fut is not None and not fut.done():
                fut.set_result(self._last_snapshot)
        self._takers.clear()

    def close(self) -> None:
        self._closed = True
        self._kill()
        self._settle_takers()

    # ---- bytes in ---------------------------------------------------------------------------

    @property
    def backlog_bytes(self) -> int:
        """Bytes given to the mirror and not yet fed by it (waiting + in flight)."""
        return self._pending_bytes + self._inflight

    def feed(self, data: bytes) -> None:
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self.backlog_bytes > self.backlog_max:
            self._skip()
            self._lazy_until = time.monotonic() + LAZY_S
        self._pump()

    def _skip(self) -> None:
        dropped: list[bytes] = []
        while self.backlog_bytes > self.backlog_keep and len(self._pending) > 1:
            chunk = self._pending.popleft()
            self._pending_bytes -= len(chunk)
            dropped.append(chunk)
        joined = b"".join(dropped)
        self.skipped += len(joined)
        modes = b"".join(_MODE_SEQ.findall(joined))
        if modes:
            self._pending.appendleft(modes)
            self._pending_bytes += len(modes)

    @property
    def lazy(self) -> bool:
        """A flood is on: waiting bytes go to the worker only when a request needs them."""
        if self._lazy_until and time.monotonic() >= self._lazy_until:
            self._lazy_until = 0.0
        return bool(self._lazy_until)

    def _frame_all(self) -> None:
        """Frame every waiting byte ahead of a request (lazy: only the kept tail of them)."""
        if self.lazy and self.backlog_bytes > self.backlog_keep:
            self._skip()
        self._frame_pending(None)

    def _frame_pending(self, limit: int | None) -> None:
        """Frame waiting bytes while the in-flight bound allows (all of them if ``limit`` is None)."""
        while self._pending and (limit is None or self._inflight < limit):
            chunk = self._pending.popleft()
            if len(chunk) > FRAME_DATA:
                chunk, rest = chunk[:FRAME_DATA], chunk[FRAME_DATA:]
                self._pending.appendleft(rest)
            self._pending_bytes -= len(chunk)
            self._out += _frame(b"D", chunk)
            self._inflight += len(chunk)

    def _pump(self) -> None:
        """Frame what the bound allows and write what the pipe takes, never blocking."""
        if self.proc is None:
            return
        if not self.lazy:
            self._frame_pending(INFLIGHT_MAX)
        self._write_some()

    def _write_some(self) -> None:
        while self._out and self.proc is not None:
            try:
                n = os.write(self._wfd, self._out)
            except BlockingIOError:
                break
            except (BrokenPipeError, OSError):
                self._restart()
                return
            del self._out[:n]
        want = bool(self._out) and self.proc is not None and self._loop is not None
        if want != self._writer_on and self._loop is not None and self.proc is not None:
            if want:
                self._loop.add_writer(self._wfd, self._write_some)
            else:
                self._loop.remove_writer(self._wfd)
            self._writer_on = want

    # ---- bytes out --------------------------------------------------------------------------

    def _on_readable(self) -> None:
        if self.proc is None:
            return
        try:
            got = os.read(self._rfd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            got = b""
        if not got:
            self._restart()
            return
        self._in += got
        while len(self._in) >= _HEAD.size:
            kind, n = _HEAD.unpack_from(self._in)
            if len(self._in) < _HEAD.size + n:
                break
            payload = bytes(self._in[_HEAD.size:_HEAD.size + n])
            del self._in[:_HEAD.size + n]
            if kind == b"A":
                n = _U32.unpack(payload)[0]
                self._inflight = max(0, self._inflight - n)
                self.fed += n
            elif kind == b"P":
                self._last_snapshot = payload
                fut = self._takers.popleft() if self._takers else None
                if fut is None:
                    self._replies.append(payload)
                elif not fut.done():
                    fut.set_result(payload)
        self._pump()

    def _wait(self, done: Callable[[], bool]) -> bool:
        """Block (this thread) writing and reading until ``done()``; False if the worker died."""
        deadline = time.monotonic() + REPLY_WAIT_S
        while not done():
            proc = self.proc
            if proc is None:
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                self._restart()
                return False
            r, w, _ = select.select([self._rfd], [self._wfd] if self._out else [], [], left)
            if w:
                self._write_some()
            if r:
                self._on_readable()
            if self.proc is not proc:
                return False
        return True

    # ---- requests ---------------------------------------------------------------------------

    def sync(self) -> None:
        """Return once the worker has fed every byte given so far."""
        for _ in range(2):
            self._frame_all()
            self._write_some()
            if self._wait(lambda: self._inflight == 0 and not self._out):
                return

    def snapshot(self) -> bytes:
        """ANSI that rebuilds the screen, reflecting every byte given before this call.
        Blocks this thread until the worker has caught up; see :meth:`request_snapshot`."""
        for _ in range(2):
            if self.proc is None:
                break
            self._frame_all()
            self._replies.clear()
            self._out += _frame(b"S")
            self._takers.append(None)
            self._write_some()
            if self._wait(lambda: bool(self._replies)):
                self._last_snapshot = self._replies.popleft()
                return self._last_snapshot
        return self._last_snapshot

    def request_snapshot(self) -> asyncio.Future[bytes]:
        """The snapshot of every byte given before this call, without blocking: a future the
        worker's answer resolves (the last screen if the worker dies or stalls meanwhile)."""
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()
        if self.proc is None:
            fut.set_result(self._last_snapshot)
            return fut
        self._frame_all()
        self._out += _frame(b"S")
        self._takers.append(fut)
        self._write_some()
        proc = self.proc
        timer: list[asyncio.TimerHandle] = []

        def check(fed: int) -> None:
            if fut.done() or self.proc is not proc:
                return
            if self.fed == fed:
                self._restart()  # no progress at all this long: wedged
            else:  # slow (starved of CPU at its low priority), not stuck: keep waiting
                timer[0] = loop.call_later(REPLY_WAIT_S, check, self.fed)

        timer.append(loop.call_later(REPLY_WAIT_S, check, self.fed))
        fut.add_done_callback(lambda _f: timer[0].cancel())
        return fut

    def resize(self, cols: int, rows: int) -> None:
        """Resize after every byte given so far (ordered; no reply needed)."""
        self.cols, self.rows = cols, rows
        if self.proc is None:
            return
        self._frame_all()
        self._out += _frame(b"R", _SIZE.pack(cols, rows))
        self._write_some()


# ---- the worker ---------------------------------------------------------------------------------


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the manager decides when this ends
    try:
        os.nice(10)  # on a busy machine the live path (manager, program, console) gets the core first
    except OSError:
        pass
    from attach.terminal.mirror import Mirror

    cols, rows = int(sys.argv[1]), int(sys.argv[2])
    mirror = Mirror(cols=cols, rows=rows)
    buf = bytearray()

    def send(kind: bytes, payload: bytes) -> None:
        data = memoryview(_frame(kind, payload))
        while data:
            data = data[os.write(1, data):]

    while True:
        got = os.read(0, 1 << 20)
        if not got:
            return  # the parent closed the pipe or died
        buf += got
        while len(buf) >= _HEAD.size:
            kind, n = _HEAD.unpack_from(buf)
            if len(buf) < _HEAD.size + n:
                break
            payload = bytes(buf[_HEAD.size:_HEAD.size + n])
            del buf[:_HEAD.size + n]
            if kind == b"D":
                mirror.feed(payload)
                send(b"A", _U32.pack(n))
            elif kind == b"S":
                send(b"P", mirror.snapshot())
            elif kind == b"R":
                mirror.resize(*_SIZE.unpack(payload))


if __name__ == "__main__":
    main()
