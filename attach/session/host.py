"""Serving side of an attach: a seat's pty with its headless mirror, and the per-session bridge.

A :class:`PtySeat` runs one real program on a real pty and hands every output chunk to the
listening bridges at once; its :class:`~attach.terminal.mirror.Mirror` lives in a worker process of its
own (:mod:`attach.terminal.mirror_proc` — pyte is pure Python, far slower than the pty, and must not take
the manager's GIL from the live path), and every snapshot is ordered after the last byte read,
so a snapshot and the live stream never disagree. Once the program has exited the worker is
stopped and the seat keeps an in-process mirror rebuilt from its final snapshot. A :class:`ServingBridge` is one
session: it listens from the moment it exists, answers ``ready`` with snapshot → buffered →
live, drops output under a full window with a ``drop`` notice followed by a repaint, and ends
with a reason frame sent after all queued output and before the advisory ``close``.

A bridge never waits on the mirror worker with the loop held: a snapshot is asked for at the
point in the stream it must reflect (:meth:`PtySeat.request_snapshot`) and sent when it comes,
while keystrokes, other sessions and output queued behind it go on.

Size: just over 500 lines because the seat and its bridge share the ordering contract between
the live stream and the snapshots.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import signal
import struct
import subprocess
import termios
from collections import deque
from typing import TYPE_CHECKING, Callable, Literal

from meshview.tasks import TaskOwner
from meshview.wire import frames as tf

from attach.terminal.mirror_proc import MirrorProc
from attach.session.rail import Rail, RailError

if TYPE_CHECKING:
    from attach.terminal.mirror import Mirror

#: what the bridge sends next, tagged: pty bytes, a repaint the mirror worker is taking, the end
_Out = (tuple[Literal["data"], bytes] | tuple[Literal["snap"], asyncio.Future[bytes]]
        | tuple[Literal["end"], str])

CHUNK = 48 * 1024  # raw bytes per data frame (base64 keeps it far under the 1 MiB frame cap)
PRE_READY_LIMIT = 1024 * 1024
SNAP_BACKLOG = 256 * 1024  # output queued behind a snapshot still being taken; past it, dropped
END_CREDIT_WAIT_S = 2.0
SIGKILL_AFTER_S = 3.0
READY_WAIT_S = 10.0
# The mirror (pure-Python pyte, ~1 MB/s) must never throttle the program: past MAX bytes of
# unmirrored output the oldest bytes are skipped down to KEEP, keeping only their mode switches
# (alt screen, cursor, paste, mouse), so a flood costs repaint fidelity, not program speed.
MIRROR_BACKLOG_MAX = 256 * 1024
MIRROR_BACKLOG_KEEP = 64 * 1024


def set_winsize(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _child_setup() -> None:  # runs in the child between fork and exec
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtySeat:
    """One program on one pty, mirrored headlessly."""

    def __init__(self, argv: list[str], *, cols: int = 120, rows: int = 32,
                 env: dict[str, str] | None = None, cwd: str | None = None):
        self.argv = list(argv)
        self.cols, self.rows = cols, rows
        self.env = env if env is not None else _default_env()
        self.cwd = cwd
        self._mirror_proc = MirrorProc(cols, rows, backlog_max=MIRROR_BACKLOG_MAX,
                                       backlog_keep=MIRROR_BACKLOG_KEEP)
        self._final: Mirror | None = None  # the in-process Mirror once the program has exited
        self.proc: subprocess.Popen | None = None
        self.master: int | None = None
        self.listeners: list[Callable[[bytes], None]] = []
        self.exit_listeners: list[Callable[[int | None], None]] = []
        self.exited = asyncio.Event()
        self.returncode: int | None = None
        self.bytes_out = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def mirror_skipped(self) -> int:
        """Bytes never mirrored (floods); repaints after a skip are approximate."""
        return self._mirror_proc.skipped

    @property
    def _backlog_bytes(self) -> int:
        """Bytes read but not yet fed to the mirror (bounded by the skip-ahead)."""
        return self._mirror_proc.backlog_bytes

    @property
    def mirror(self) -> Mirror:
        """An in-process :class:`~attach.terminal.mirror.Mirror` equal to the seat's screen right now
        (rebuilt from a snapshot while the worker holds the live one)."""
        from attach.terminal.mirror import Mirror

        if self._final is not None:
            return self._final
        m = Mirror(cols=self.cols, rows=self.rows)
        m.feed(self.snapshot())
        return m

    @property
    def running(self) -> bool:
        return self.proc is not None and not self.exited.is_set()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        master, slave = os.openpty()
        set_winsize(slave, self.cols, self.rows)
        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=slave, stdout=slave, stderr=slave, env=self.env, cwd=self.cwd,
                start_new_session=True, preexec_fn=_child_setup, close_fds=True,
            )
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        self.master = master
        self._loop = asyncio.get_running_loop()
        self._mirror_proc.start()
        self._loop.add_reader(master, self._readable)

    def _readable(self) -> None:
        assert self.master is not None
        chunks: list[bytes] = []
        eof = False
        for _ in range(16):  # drain what is there (a pty hands out ~4 KiB per read)
            try:
                got = os.read(self.master, 65536)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno not in (errno.EIO, errno.EBADF):
                    raise
                got = b""
            if not got:
                eof = True
                break
            chunks.append(got)
        data = b"".join(chunks)
        if not data:
            if eof:
                self._on_eof()
            return
        self.bytes_out += len(data)
        # live bytes go out at once; the mirror worker gets them down a pipe that never blocks
        self._mirror_proc.feed(data)
        for fn in list(self.listeners):
            fn(data)

    def catch_up(self) -> None:
        """Return once every byte read so far is in the mirror."""
        if self._final is None:
            self._mirror_proc.sync()

    def snapshot(self) -> bytes:
        if self._final is not None:
            return self._final.snapshot()
        return self._mirror_proc.snapshot()

    def request_snapshot(self) -> asyncio.Future[bytes]:
        """The snapshot of every byte read so far, as a future (the loop is not held meanwhile)."""
        if self._final is not None:
            fut = asyncio.get_running_loop().create_future()
            fut.set_result(self._final.snapshot())
            return fut
        return self._mirror_proc.request_snapshot()

    async def _retire_mirror(self) -> None:
        """The program is gone: keep its last screen in-process and stop the worker (waiting
        for its last snapshot without holding the loop: a starved worker may take a while)."""
        from attach.terminal.mirror import Mirror

        if self._final is not None:
            return
        snap = await self._mirror_proc.request_snapshot()
        if self._final is not None:
            return
        final = Mirror(cols=self.cols, rows=self.rows)
        final.feed(snap)
        self._final = final
        self._mirror_proc.close()

    def _on_eof(self) -> None:
        loop = asyncio.get_running_loop()
        if self.master is not None:
            loop.remove_reader(self.master)
            loop.remove_writer(self.master)
            try:
                os.close(self.master)
            except OSError:
                pass
            self.master = None
        _owned.spawn(self._reap(), "reap-child")

    async def _reap(self) -> None:
        assert self.proc is not None
        while self.proc.poll() is None:  # noqa: ASYNC110 - a Popen's exit has nothing to await
            await asyncio.sleep(0.02)
        self.returncode = self.proc.returncode
        await self._retire_mirror()
        self.exited.set()
        for fn in list(self.exit_listeners):
            fn(self.returncode)

    async def write(self, data: bytes) -> None:
        """Write caller input without ever blocking the loop. When the pty's input queue is
        full (the program is not reading, e.g. a paste into a busy echo) this waits for the
        fd to become writable; the rail grants no credit meanwhile, so backpressure reaches
        the caller instead of freezing every seat, heartbeat and lease of the manager."""
        view = memoryview(data)
        while view and self.master is not None:
            try:
                n = os.write(self.master, view)
            except BlockingIOError:
                await self._writable()
                continue
            except OSError:
                return
            view = view[n:]

    async def _writable(self) -> None:
        fd = self.master
        if fd is None:
            return
        loop = asyncio.get_running_loop()
        ready = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        def on_exit(_rc: int | None) -> None:  # a dying program releases the writer
            wake()

        loop.add_writer(fd, wake)
        self.exit_listeners.append(on_exit)
        try:
            await ready
        finally:
            self.exit_listeners.remove(on_exit)
            if self.master == fd:
                loop.remove_writer(fd)

    def resize(self, cols: int, rows: int) -> None:
        if cols < 1 or rows < 1:
            return  # a degenerate size is dropped, never a teardown
        self.cols, self.rows = cols, rows
        if self._final is not None:
            self._final.resize(cols, rows)
        else:
            self._mirror_proc.resize(cols, rows)
        if self.master is not None:
            set_winsize(self.master, cols, rows)
            if self.proc is not None:
                try:
                    os.killpg(self.proc.pid, signal.SIGWINCH)
                except ProcessLookupError:
                    pass

    async def stop(self, timeout: float = SIGKILL_AFTER_S) -> None:
        """SIGTERM the program's group, SIGKILL after ``timeout`` seconds."""
        if self.proc is None or self.exited.is_set():
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            await asyncio.wait_for(self.exited.wait(), timeout)
        except asyncio.TimeoutError:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if self.master is not None:
                self._on_eof()
            await self.exited.wait()


_owned = TaskOwner("pty-host")  # a child's reaper runs to its exit; a failure is logged


def _default_env() -> dict[str, str]:
    env = {
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
    }
    return env


class ServingBridge:
    """One session's serving side: pty output → rail, rail → pty input."""

    def __init__(self, seat: PtySeat, rail: Rail, *, on_done: Callable[["ServingBridge", str], None] | None = None):
        self.seat = seat
        self.rail = rail
        self.on_done = on_done
        self._pending: deque[bytes] = deque()  # output after the first snapshot, before ready
        self._pending_bytes = 0
        self._snapshot: asyncio.Future[bytes] | None = seat.request_snapshot()
        self._ready = False
        self._ready_evt = asyncio.Event()
        self._out: deque[_Out] = deque()
        self._behind_snap = 0  # output bytes queued behind a snapshot not taken yet
        self._wake = asyncio.Event()
        self.dropped = 0
        self.drops_notified = 0
        self.ending: str | None = None
        self.done = asyncio.Event()
        self._task: asyncio.Task | None = None
        seat.listeners.append(self._on_output)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._pump())

    # ---- pty → caller ----------------------------------------------------------------------

    def _on_output(self, data: bytes) -> None:
        if self.ending is not None:
            return
        if not self._ready:
            self._pending.append(data)
            self._pending_bytes += len(data)
            if self._pending_bytes > PRE_READY_LIMIT:  # too much to replay: repaint fresh at ready
                self._pending.clear()
                self._pending_bytes = 0
                self._snapshot = None
            return
        if self._out and self._out[0][0] == "snap":  # the mirror worker is still taking it
            if self._behind_snap + len(data) > SNAP_BACKLOG:
                self.dropped += len(data)  # a drop notice and a fresh repaint follow that snapshot
                return
            self._behind_snap += len(data)
        self._out.append(("data", data))
        self._wake.set()

    def _repaint(self) -> None:
        """Queue a fresh snapshot; everything queued before it is already inside it."""
        self._out = deque(item for item in self._out if item[0] == "end")
        self._out.appendleft(("snap", self.seat.request_snapshot()))
        self._behind_snap = 0
        self._wake.set()

    async def on_caller_data(self, data: object, seq: int) -> None:
        """The rail's handler. A degenerate or unparseable caller frame is dropped, not fatal."""
        try:
            frame = tf.decode(data)
        except tf.TerminalFrameError:
            return
        if isinstance(frame, tf.Ready):
            if not self._ready:
                self._ready = True
                self._ready_evt.set()
                first = self._snapshot if self._snapshot is not None else self.seat.request_snapshot()
                head: list[_Out] = [("snap", first)]
                head += [("data", chunk) for chunk in self._pending]
                self._out = deque(head + list(self._out))  # before an `end` queued pre-ready
                self._pending.clear()
                self._pending_bytes = 0
                self._snapshot = None
                self._wake.set()
            elif not (self._out and self._out[0][0] == "snap"):
                # a repeated ready is an explicit repaint (unless one is already on its way:
                # that snapshot and the output queued behind it are the screen as of now)
                self._repaint()
        elif isinstance(frame, tf.Data):
            await self.seat.write(frame.payload)
        elif isinstance(frame, tf.Resize):
            self.seat.resize(frame.cols, frame.rows)
        # End / Drop from the caller are ignored

    async def _pump(self) -> None:
        try:
            # nothing leaves before the caller's `ready`: until then its `out` SUB may not exist
            while not self._ready and self.rail.alive:
                if self.ending is not None:
                    try:
                        await asyncio.wait_for(self._ready_evt.wait(), READY_WAIT_S)
                    except asyncio.TimeoutError:
                        await self._send_end(self.ending)
                        return
                    break
                self._wake.clear()
                await self._wake.wait()
            while self.rail.alive:
                if not self._out:
                    self._wake.clear()
                    if self.dropped and self.ending is None:
                        await self._wait_credit_or_data()
                        if self.dropped and self.rail.free_slots() >= 2:
                            await self._notify_drop()
                        continue
                    await self._wake.wait()
                    continue
                item = self._out[0]
                if item[0] == "snap":  # its bytes, once the mirror worker has caught up
                    shot = await item[1]
                    if self._out and self._out[0][1] is item[1]:  # not replaced by a newer repaint
                        self._out[0] = ("data", shot)
                        self._behind_snap = 0
                    continue
                if item[0] == "end":
                    await self._send_end(item[1])
                    return
                if self.dropped:
                    if self.rail.free_slots() >= 2:
                        await self._notify_drop()
                    else:
                        self._out.popleft()
                        self.dropped += len(item[1])
                    continue
                data = item[1]
                if len(data) < CHUNK and len(self._out) > 1 and self._out[1][0] == "data":
                    data = self._coalesce()  # many small pty reads → one frame, not one each
                piece, rest = data[:CHUNK], data[CHUNK:]
                try:
                    await self.rail.send_json(tf.data_json(piece))
                except RailError as e:
                    if e.code != "resource-exhausted":
                        return
                    self._out.popleft()
                    self.dropped += len(data)
                    continue
                if rest:
                    self._out[0] = ("data", rest)
                else:
                    self._out.popleft()
        finally:
            self._finish()

    def _coalesce(self) -> bytes:
        """Merge the queued data items at the head into one of at most CHUNK bytes."""
        parts: list[bytes] = []
        size = 0
        while self._out and self._out[0][0] == "data":
            head = self._out[0]
            if head[0] != "data":  # (the loop's condition: never)
                break
            nxt = head[1]
            if parts and size + len(nxt) > CHUNK:
                break
            self._out.popleft()
            parts.append(nxt)
            size += len(nxt)
        data = b"".join(parts)
        self._out.appendleft(("data", data))
        return data

    async def _wait_credit_or_data(self) -> None:
        credit = asyncio.ensure_future(self.rail.wait_credit())
        wake = asyncio.ensure_future(self._wake.wait())
        await asyncio.wait({credit, wake}, return_when=asyncio.FIRST_COMPLETED)
        credit.cancel()
        wake.cancel()

    async def _notify_drop(self) -> None:
        try:
            await self.rail.send(tf.encode(tf.Drop(self.dropped)))
        except RailError:
            return
        self.drops_notified += 1
        self.dropped = 0
        self._repaint()

    async def _send_end(self, reason: str) -> None:
        deadline = asyncio.get_running_loop().time() + END_CREDIT_WAIT_S
        while self.rail.alive and self.rail.free_slots() < 1:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0 or not await self.rail.wait_credit(left):
                break
        try:
            await self.rail.send(tf.encode(tf.End(reason)))
        except RailError:
            pass
        await self.rail.close()

    # ---- ending -----------------------------------------------------------------------------

    def end(self, reason: str) -> None:
        """End the session: queued output, then ``end``, then ``close``."""
        if self.ending is not None:
            return
        self.ending = reason
        self._out.append(("end", reason))
        self._wake.set()

    def _finish(self) -> None:
        if self.done.is_set():
            return
        try:
            self.seat.listeners.remove(self._on_output)
        except ValueError:
            pass
        self.done.set()
        if self.on_done is not None:
            reason = self.ending or ("closed" if self.rail.closed else (self.rail.fault or "closed"))
            self.on_done(self, reason)

    async def wait_done(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.done.wait(), timeout)

    def rail_gone(self) -> None:
        """The caller closed or the rail faulted: stop pumping."""
        self._wake.set()
