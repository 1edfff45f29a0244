"""The mirror worker process: ordered snapshots, resize, restart after a death, no orphans."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from attach.session.host import PtySeat
from attach.terminal.mirror import Mirror
from attach.terminal.mirror_proc import MirrorProc

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _screen(snap: bytes, cols: int, rows: int) -> Mirror:
    m = Mirror(cols=cols, rows=rows)
    m.feed(snap)
    return m


async def test_snapshot_reflects_every_byte_fed_before_it():
    mp = MirrorProc(40, 5, backlog_max=1 << 30, backlog_keep=1 << 29)  # no skipping here
    mp.start()
    try:
        for i in range(2000):
            mp.feed(b"\r\nline %d" % i)
        mp.feed(b"\x1b[?2004h\r\nLAST")
        m = _screen(mp.snapshot(), 40, 5)
        assert m.text_lines()[-1].rstrip() == "LAST" and m.text_lines()[-2].rstrip() == "line 1999"
        assert m.bracketed_paste
        mp.resize(20, 3)
        mp.feed(b"\r\nafter-resize")
        m = _screen(mp.snapshot(), 20, 3)
        assert m.cols == 20 and m.text_lines()[-1].rstrip() == "after-resize"
        mp.sync()
        assert mp.backlog_bytes == 0 and mp.skipped == 0
    finally:
        mp.close()


async def test_a_dead_worker_is_restarted_from_the_last_screen():
    mp = MirrorProc(30, 4, backlog_max=1 << 20, backlog_keep=1 << 18)
    mp.start()
    try:
        mp.feed(b"before-death")
        assert "before-death" in _screen(mp.snapshot(), 30, 4).text_lines()[0]
        first = mp.proc.pid
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while mp.restarts == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)  # the loop's reader sees the worker's end
        assert mp.restarts == 1 and mp.proc.pid != first and not _alive(first)
        mp.feed(b"\r\nafter")
        lines = _screen(mp.snapshot(), 30, 4).text_lines()
        assert "before-death" in lines[0] and lines[1].rstrip() == "after"
        second = mp.proc.pid
    finally:
        mp.close()
    assert not _alive(second)


async def test_seat_worker_stops_with_the_seat_and_the_screen_stays():
    seat = PtySeat([sys.executable, "-c", "print('bye-now')"], cols=40, rows=5)
    seat.start()
    worker = seat._mirror_proc.proc.pid
    await asyncio.wait_for(seat.exited.wait(), 10)
    assert not _alive(worker)
    assert any("bye-now" in ln for ln in seat.mirror.text_lines())
    assert b"bye-now" in seat.snapshot()
    seat.resize(30, 4)  # after the exit: served in-process, never an error
    assert seat.mirror.cols == 30


def test_worker_dies_with_its_parent():
    code = (
        "import asyncio, sys\n"
        "from attach.terminal.mirror_proc import MirrorProc\n"
        "async def main():\n"
        "    mp = MirrorProc(20, 3, backlog_max=1 << 20, backlog_keep=1 << 18)\n"
        "    mp.start(); mp.feed(b'x'); mp.sync()\n"
        "    print(mp.proc.pid, flush=True)\n"
        "    await asyncio.sleep(60)\n"
        "asyncio.run(main())\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        worker = int(parent.stdout.readline())
        assert _alive(worker)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(worker)
    finally:
        parent.kill()
        parent.wait()


async def test_request_snapshot_does_not_block_and_keeps_the_order():
    mp = MirrorProc(40, 5, backlog_max=1 << 30, backlog_keep=1 << 29)
    mp.start()
    try:
        mp.feed(b"first")
        early = mp.request_snapshot()  # reflects "first" only
        mp.feed(b"\r\nsecond")
        blocking = mp.snapshot()  # a blocking one asked after it gets its own answer
        late = mp.request_snapshot()
        assert not late.done()  # nothing waited for the worker
        late_screen = _screen(await asyncio.wait_for(late, 10), 40, 5).text_lines()
        assert _screen(await early, 40, 5).text_lines()[0] == "first"
        assert _screen(blocking, 40, 5).text_lines()[:2] == ["first", "second"]
        assert late_screen[:2] == ["first", "second"]
    finally:
        mp.close()
    dead = mp.request_snapshot()  # a closed worker answers with the last screen at once
    assert dead.done() and _screen(dead.result(), 40, 5).text_lines()[:2] == ["first", "second"]
