"""A stdout reader that stalls, resumes or leaves never holds the line stream hostage.

The sink alone on an ``os.pipe``, then ``cotal watch --json`` as a real subprocess against a real
nats-server with its stdout on a pipe the test controls: never read (SIGTERM must still end it
within 1 s), stalled then resumed (one gap line, later messages complete), closed (quiet exit 0).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import select
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from meshview.lines.lineout import LineSink
from support.observer import message
from conftest import until

ROOT = Path(__file__).resolve().parents[2]
TEXT = "x" * 2000  # ~4.5 KB a JSON line (text twice: text and parts): 3000 are ~13 MB


def queued(fd: int) -> int:
    """Bytes sitting unread in a pipe (FIONREAD on its read end)."""
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)


# -- the sink alone --------------------------------------------------------------------------


class PipeReader:
    """Reads a pipe's read end on a thread once started: the consumer that stalls then resumes."""

    def __init__(self, fd: int) -> None:
        self.fd, self.data, self.lock = fd, bytearray(), threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "PipeReader":
        self.thread.start()
        return self

    def _run(self) -> None:
        while True:
            try:
                b = os.read(self.fd, 1 << 16)
            except OSError:
                return
            if not b:
                return
            with self.lock:
                self.data.extend(b)

    def has(self, needle: bytes) -> bool:
        """A cheap check while reading (parsing 13 MB every poll would starve the reader)."""
        with self.lock:
            return self.data.find(needle, max(0, len(self.data) - (1 << 20))) >= 0

    def lines(self) -> list[bytes]:
        with self.lock:
            return bytes(self.data).split(b"\n")[:-1]


async def test_sink_fast_path_writes_everything_in_order():
    r, w = os.pipe()
    sink = LineSink(w)
    reader = PipeReader(r).start()
    sink.write_lines(f"line {i}" for i in range(5000))
    assert await sink.drain(5.0)
    assert sink.dropped == 0 and sink.pending_lines == 0
    sink.close()
    os.close(w)
    reader.thread.join(5)
    assert reader.lines() == [f"line {i}".encode() for i in range(5000)]
    os.close(r)


async def test_sink_stall_sheds_oldest_counts_and_reports_once_on_resume():
    r, w = os.pipe()
    flags = fcntl.fcntl(w, fcntl.F_GETFL)
    stalls: list[int] = []
    sink = LineSink(w, max_bytes=64 << 10, max_lines=100_000,
                    gap_line=lambda gap, total: f"GAP {gap} {total}",
                    on_stall=lambda: stalls.append(1))
    assert not fcntl.fcntl(w, fcntl.F_GETFL) & os.O_NONBLOCK  # the caller's fd is untouched
    n = 20_000
    for i in range(n):  # ~2 MB into a 1 MiB pipe (the sink grows it) + 64 KiB, nobody reading:
        sink.write_line(f"{i:06d} " + "y" * 90)  # a blocking write would hang here for good
    assert sink.dropped > 0 and stalls == [1]
    assert sink.pending_bytes <= 64 << 10
    reader = PipeReader(r).start()  # the consumer resumes
    assert await sink.drain(5.0)
    sink.write_line("after")
    assert await sink.drain(5.0)
    sink.close()
    assert fcntl.fcntl(w, fcntl.F_GETFL) == flags
    os.close(w)
    reader.thread.join(5)
    lines = reader.lines()
    gaps = [x for x in lines if x.startswith(b"GAP")]
    assert gaps == [f"GAP {sink.dropped} {sink.dropped}".encode()]
    ids = [int(x[:6]) for x in lines if x[:1].isdigit()]
    assert all(len(x) == 97 for x in lines if x[:1].isdigit())  # no line cut or spliced
    k = lines.index(gaps[0])
    before, after = ids[:k], ids[k:]
    # what was already written, a gap where the oldest pending lines were shed, the rest
    assert before == list(range(len(before)))
    assert after == list(range(after[0], n))
    assert after[0] - len(before) == sink.dropped
    assert len(ids) + sink.dropped == n
    assert lines[-1] == b"after"
    os.close(r)


async def test_sink_reader_gone_breaks_quietly_and_points_fd_at_devnull():
    r, w = os.pipe()
    gone: list[int] = []
    sink = LineSink(w, on_broken=lambda: gone.append(1))
    sink.write_line("seen")
    assert os.read(r, 100) == b"seen\n"
    os.close(r)  # the reader leaves while we are idle: noticed without a write
    await until(lambda: gone, 2.0, "the hangup to be noticed")
    assert sink.broken and gone == [1]
    sink.write_lines(["after"] * 10)  # no exception, nothing queued
    assert sink.pending_lines == 0
    assert os.write(w, b"x") == 1  # the fd now points at /dev/null: late writers stay quiet
    assert sink.close() == 0
    os.close(w)


async def test_sink_epipe_on_write_and_bounded_close():
    r, w = os.pipe()
    sink = LineSink(w, max_bytes=1 << 20)
    sink.write_lines(["z" * 1000] * 2000)  # more than the pipe holds: the rest waits
    assert sink.pending_lines > 0
    left = sink.close()  # returns with nobody reading: one non-blocking try, then abandoned
    assert left > 0 and sink.abandoned == left and sink.unreported == left
    os.close(r)
    gone: list[int] = []
    sink2 = LineSink(w, on_broken=lambda: gone.append(1))
    sink2.write_line("into a pipe nobody reads any more")
    assert sink2.broken and gone == [1]
    os.close(w)


# -- cotal watch with its stdout on a pipe the test controls ---------------------------------


class Watch:
    def __init__(self, broker_url: str, space: str, tmp: Path, mode: str) -> None:
        self.r, w = os.pipe()
        self.err_path = tmp / f"stderr-{os.getpid()}-{time.monotonic_ns()}"
        env = dict(os.environ)
        env.pop("NO_COLOR", None)
        env.pop("FORCE_COLOR", None)
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "cotal_tui.cli", "watch", mode, "--server", broker_url,
                 "--space", space],
                stdout=w, stderr=err, stdin=subprocess.DEVNULL, cwd=str(ROOT), env=env,
                start_new_session=True)
        os.close(w)
        self.reader_open = True

    def close_reader(self) -> None:
        if self.reader_open:
            self.reader_open = False
            os.close(self.r)

    @property
    def stderr(self) -> str:
        return self.err_path.read_text("utf-8", "replace")

    def read_raw(self, timeout: float = 10.0) -> bytes | None:
        """One line, read byte by byte so nothing past it is consumed; None on timeout."""
        deadline = time.monotonic() + timeout
        out = b""
        while not out.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.r], [], [], left)[0]:
                return None
            b = os.read(self.r, 1)
            assert b, f"EOF; stderr: {self.stderr}"
            out += b
        return out

    def read_line(self, timeout: float = 10.0) -> dict:
        raw = self.read_raw(timeout)
        assert raw is not None, f"no line; stderr: {self.stderr}"
        return json.loads(raw)

    async def stop(self) -> int:
        assert self.proc.poll() is None, self.stderr
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(self.proc.wait, 5)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self.close_reader()


@pytest.fixture
def watch(broker, nc, space, tmp_path):
    made: list[Watch] = []

    async def start(mode: str = "--json") -> Watch:
        w = Watch(broker.url, space, tmp_path, mode)
        made.append(w)
        if mode == "--json":
            assert w.read_line()["connection"] == "connected"  # subscribed: traffic is seen
            return w
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # plain says nothing on stdout until traffic
            await publish(nc, space, "ready", "ready", "r")
            raw = await asyncio.to_thread(w.read_raw, 0.5)
            if raw is not None and raw.endswith(b": ready\n"):
                while await asyncio.to_thread(w.read_raw, 0.3) is not None:
                    pass  # later copies of the ready marker
                return w
        raise AssertionError(f"plain watcher not ready; stderr: {w.stderr}")

    yield start
    for w in made:
        w.kill()


async def publish(nc, space: str, sender: str, text: str, mid: str) -> None:
    m = message(space, sender, text, mid=f"{mid}-{time.monotonic_ns()}" if mid == "r" else mid,
                channel="general")
    await nc.publish(f"cotal.{space}.chat.local.{sender}.general", json.dumps(m).encode())


async def flood(nc, space: str, n: int, tag: str) -> list[str]:
    """``n`` channel messages, ids ``tag-0..n-1``, text ``00042 xxx…`` (core publish: a flood)."""
    ids = []
    for i in range(n):
        await publish(nc, space, "flooder", f"{i:05d} {TEXT}", f"{tag}-{i}")
        ids.append(f"{tag}-{i}")
        if i % 200 == 199:
            await nc.flush()
    await nc.flush()
    return ids


def check_gaps(items: list[tuple[str, int]], n: int) -> int:
    """``items``: ("msg", index) and ("gap", total dropped so far), in output order. Proves
    nothing was lost silently: every index is printed, or counted by the gap line that stands
    exactly where it went missing, and a gap is one line. Returns the total dropped."""
    expect = reported = 0
    prev = None
    for kind, v in items:
        if kind == "gap":
            assert prev != "gap", "two gap lines in a row"
            assert v > reported
            expect += v - reported
            reported = v
        else:
            assert v == expect, f"message {v} where {expect} was due: lost without a gap line"
            expect = v + 1
        prev = kind
    assert expect == n
    return reported


async def test_sigterm_ends_watch_within_1s_while_stdout_is_never_read(nc, space, watch):
    w = await watch()
    cap = fcntl.fcntl(w.r, fcntl.F_GETPIPE_SZ)  # the watcher grew it to 1 MiB
    await flood(nc, space, 3000, "a")  # ~13 MB for a pipe that nobody reads
    await until(lambda: queued(w.r) >= cap - 4096, 20.0, "the pipe to fill")
    assert w.proc.poll() is None
    t = time.monotonic()
    w.proc.send_signal(signal.SIGTERM)
    try:
        rc = await asyncio.to_thread(w.proc.wait, 5)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still alive 5 s after SIGTERM; stderr: {w.stderr}") from None
    took = time.monotonic() - t
    assert rc == 0, w.stderr
    assert took < 1.0, f"SIGTERM took {took:.2f}s"
    assert "Traceback" not in w.stderr and "Exception ignored" not in w.stderr
    assert "lines not delivered: stdout was not being read" in w.stderr  # never silent


async def test_json_stall_then_resume_reports_the_gap_and_later_messages_arrive(nc, space,
                                                                                watch):
    w = await watch()
    ids = await flood(nc, space, 3000, "b")
    # shedding has begun once the watcher says so on stderr (the reader is not reading)
    await until(lambda: "stdout is not being read" in w.stderr, 20.0, "the stall notice")
    reader = PipeReader(w.r).start()  # the consumer resumes
    await until(lambda: reader.has(f'"id": "{ids[-1]}"'.encode()), 20.0, "the last flood line")
    later = [f"c-{i}" for i in range(300)]
    for mid in later:  # published after the resume
        await publish(nc, space, "after", f"later {mid}", mid)
    await nc.flush()
    await until(lambda: reader.has(f'"id": "{later[-1]}"'.encode()), 20.0, "the later lines")
    got = [json.loads(x) for x in reader.lines()]
    assert not [o for o in got if o.get("type") == "state" and o.get("lagging")
                and o.get("source") is None], "the observer itself fell behind"
    gaps = [o for o in got if o.get("source") == "output"]
    assert gaps and all(set(o) == {"type", "source", "lagging", "dropped", "messages"}
                        and o["type"] == "state" and o["lagging"] is True
                        and o["messages"] <= o["dropped"] for o in gaps)
    # ``messages`` counts the message lines among the ``dropped`` lines: a state line shed in
    # the stall (the presence view going stale on a slow run) is a line but no message
    items = [("gap", o["messages"]) if o.get("source") == "output" else ("msg", int(o["id"][2:]))
             for o in got if o.get("source") == "output"
             or (o.get("type") == "message" and o["id"].startswith("b-"))]
    # (the flood may outrun even a keen reader after the resume: a later gap is its own line)
    assert check_gaps(items, len(ids)) == gaps[-1]["messages"] > 0
    assert [o["id"] for o in got if o.get("id", "").startswith("c-")] == later  # all, in order
    assert await w.stop() == 0
    assert "Traceback" not in w.stderr


async def test_json_gap_counts_messages_exactly_when_state_lines_are_shed_too(nc, space, watch):
    """A flake made certain: a stall that spans a presence TTL with no presence
    traffic, so the watcher emits ``presenceView`` state lines *inside* the stall, and a second
    flood pushes them out with the messages. ``dropped`` counts every shed line; ``messages``
    must still equal exactly the messages missing."""
    w = await watch()
    ids = await flood(nc, space, 3000, "b")
    await until(lambda: "stdout is not being read" in w.stderr, 20.0, "the stall notice")
    await asyncio.sleep(6.0 + 3.0)  # one presence TTL of silence, plus the sweep: a product rule
    for i in range(3000, 6000):  # these push the state lines out of the 4 MiB buffer
        await publish(nc, space, "flooder", f"{i:05d} {TEXT}", f"b-{i}")
        ids.append(f"b-{i}")
        if i % 200 == 199:
            await nc.flush()
    await nc.flush()
    reader = PipeReader(w.r).start()
    await until(lambda: reader.has(f'"id": "{ids[-1]}"'.encode()), 30.0, "the last flood line")
    marker = "m-end"
    await publish(nc, space, "after", "end", marker)
    await nc.flush()
    await until(lambda: reader.has(f'"id": "{marker}"'.encode()), 20.0, "the end marker")
    got = [json.loads(x) for x in reader.lines()]
    gaps = [o for o in got if o.get("source") == "output"]
    assert gaps
    # state lines were shed with the messages (else this test proves nothing)
    # the stale state line was emitted inside the stall: delivered, or shed and counted as a
    # line that is no message (the case the old count got wrong; it is the usual one here)
    shed_state = gaps[-1]["dropped"] - gaps[-1]["messages"]
    assert shed_state > 0 or any(o.get("presenceView") == "stale" for o in got), gaps
    items = [("gap", o["messages"]) if o.get("source") == "output" else ("msg", int(o["id"][2:]))
             for o in got if o.get("source") == "output"
             or (o.get("type") == "message" and o["id"].startswith("b-"))]
    assert check_gaps(items, len(ids)) == gaps[-1]["messages"] > 0
    assert await w.stop() == 0


async def test_plain_stall_then_resume_one_sentence_where_the_lines_went_missing(nc, space,
                                                                                 watch):
    w = await watch("--plain")
    n = 3000
    await flood(nc, space, n, "p")
    # Two rejections (stderr, in order with the flood; two reasons, as each is rate-limited)
    # prove the whole flood has been handed to the sink before the reader resumes.
    await nc.publish(f"cotal.{space}.chat.local.flooder.general", b"\x00garbage")
    await nc.flush()
    await until(lambda: "rejected malformed-json" in w.stderr, 20.0, "the first rejection")
    bad = message(space, "mallory", "spoof", channel="general")  # from mallory on alice's subject
    await nc.publish(f"cotal.{space}.chat.local.alice.general", json.dumps(bad).encode())
    await nc.flush()
    await until(lambda: "rejected sender-mismatch" in w.stderr, 20.0, "the second rejection")
    assert w.stderr.count("stdout is not being read") == 1
    reader = PipeReader(w.r).start()  # the consumer resumes
    await until(lambda: reader.has(f" {n - 1:05d} x".encode()), 20.0, "the last flood line")
    for i in range(300):  # published after the resume
        await publish(nc, space, "after", f"later {i:03d}", f"q-{i}")
    await nc.flush()
    await until(lambda: reader.has(b": later 299\n"), 20.0, "the later lines")
    lines = [x.decode() for x in reader.lines()]
    gaps = [x for x in lines if " lines dropped here: " in x]
    assert len(gaps) == 1, gaps  # one sentence for the one stall
    gap, total = (int(x) for x in re.fullmatch(
        r"\d\d:\d\d:\d\d ! (\d+) lines dropped here: the reader of this output fell behind "
        r"\((\d+) so far\)", gaps[0]).groups())
    assert gap == total > 0
    items = [("gap", total) if x in gaps else ("msg", int(x.split(": ", 1)[1][:5]))
             for x in lines if x in gaps or ' (claims "flooder") → #general: ' in x]
    assert check_gaps(items, n) == total
    # the flooders have no presence: each line is its principal and the envelope's name
    assert [x.split(": ", 1)[1] for x in lines if ' (claims "after") → ' in x] == \
        [f"later {i:03d}" for i in range(300)]
    assert await w.stop() == 0
    assert "Traceback" not in w.stderr


async def test_reader_exit_ends_watch_quietly(nc, space, watch):
    w = await watch()
    await flood(nc, space, 50, "d")
    assert w.read_line()["type"] == "message"
    w.close_reader()  # the consumer exits mid-stream
    await flood(nc, space, 500, "e")
    try:
        rc = await asyncio.to_thread(w.proc.wait, 5)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still alive after the reader left; stderr: {w.stderr}") from None
    assert rc == 0
    assert w.stderr == ""  # no traceback, no BrokenPipeError, no "Exception ignored"


async def test_reader_exit_while_idle_ends_watch(nc, space, watch):
    w = await watch()
    w.close_reader()  # nothing is published: the hangup alone ends the watcher
    try:
        rc = await asyncio.to_thread(w.proc.wait, 5)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"still alive after the reader left; stderr: {w.stderr}") from None
    assert rc == 0 and w.stderr == ""
