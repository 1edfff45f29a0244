"""Attach end to end on the real broker: demo manager, real ptys, real programs, AttachSession."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import time
import uuid

import nats
import pytest

from attach.session.client import AttachError, AttachSession, Notice
from attach.terminal.mirror import Mirror
from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.demo.personas import PROGRAMS
from conftest import until


class Client:
    """An AttachSession with its output and notices recorded."""

    def __init__(self, nc, space, name, **kw):
        self.out = bytearray()
        self.events: list[tuple[str, object]] = []
        self.notices: list[Notice] = []
        self.s = AttachSession(space, name, nc=nc, on_output=self._out, on_notice=self._notice, **kw)
        self.task: asyncio.Task | None = None

    def _out(self, b: bytes) -> None:
        self.out.extend(b)
        self.events.append(("data", b))

    def _notice(self, n: Notice) -> None:
        self.notices.append(n)
        self.events.append((n.kind, n))

    @property
    def text(self) -> str:
        return self.out.decode("utf-8", "replace")

    async def open(self):
        await self.s.open()
        self.task = asyncio.get_running_loop().create_task(self.s.run())
        return self

    async def wait_text(self, needle: str, timeout=10.0):
        await until(lambda: needle in self.text, timeout, f"{needle!r} in output; got {self.text[-300:]!r}")

    async def result(self, timeout=10.0) -> str:
        assert self.task is not None
        return await asyncio.wait_for(self.task, timeout)


@pytest.fixture
async def managers(nc, space):
    made: list[DemoManager] = []

    async def make(seats, **kw):
        m = DemoManager(nc, space, seats, **kw)
        await m.start()
        made.append(m)
        return m

    yield make
    for m in made:
        await m.stop()


@pytest.fixture
async def nc2(broker):
    c = await nats.connect(broker.url)
    yield c
    await c.close()


async def test_echo_round_trip(managers, nc2, space):
    m = await managers([SeatSpec("alice", "local.alice")])
    c = await Client(nc2, space, "alice").open()
    await c.wait_text("alice>")  # a snapshot ends rows at the last glyph
    assert await c.s.send_keys(b"hello mesh\r")
    await c.wait_text("echo: hello mesh")
    assert m.live_sessions == 1
    await c.s.close()
    assert await c.result() == "detached"
    await until(lambda: m.live_sessions == 0, what="the session to be released")


async def test_resize_reaches_the_pty(managers, nc2, space):
    await managers([SeatSpec("alice", "local.alice", cols=100, rows=30)])
    c = await Client(nc2, space, "alice").open()
    await c.wait_text("alice>")
    await c.s.send_keys(b"size\r")
    await c.wait_text("30 100")
    await c.s.resize(77, 21)
    await c.s.send_keys(b"size\r")
    await c.wait_text("21 77")
    await c.s.close()


async def test_attach_sends_initial_size(managers, nc2, space):
    await managers([SeatSpec("alice", "local.alice")])
    c = await Client(nc2, space, "alice", size=(91, 19)).open()
    await c.wait_text("alice>")
    await c.s.send_keys(b"size\r")
    await c.wait_text("19 91")
    await c.s.close()


def _tmux_capture(argv: list[str], cols: int, rows: int, needle: str) -> list[str]:
    sock = f"cotal-test-{uuid.uuid4().hex[:8]}"
    cmd = " ".join(argv)
    subprocess.run(["tmux", "-L", sock, "-f", "/dev/null", "new-session", "-d", "-x", str(cols), "-y", str(rows),
                    "env", "TERM=xterm-256color", *argv], check=True)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            out = subprocess.run(["tmux", "-L", sock, "capture-pane", "-p"], capture_output=True, text=True).stdout
            if needle in out:
                return out.splitlines()
            time.sleep(0.05)
        raise AssertionError(f"tmux never showed {needle!r} for {cmd}")
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
async def test_late_attach_repaints_a_fullscreen_program_like_tmux(managers, nc2, space):
    argv = [sys.executable, str(PROGRAMS / "dashboard.py"), "--ticks", "7"]
    m = await managers([SeatSpec("dash", "local.dash", kind="fullscreen", cols=100, rows=30, argv=argv)])
    seat = m.seats["dash"]
    await until(lambda: any("tick      7" in ln for ln in seat.pty.mirror.text_lines()), what="dashboard tick 7")
    # attach late: everything the program drew so far must come back as a repaint
    c = await Client(nc2, space, "dash").open()
    await until(lambda: "tick      7" in "\n".join(Mirror_text(c.out)), what="repaint")
    ours = Mirror_text(c.out)
    theirs = _tmux_capture(argv, 100, 30, "tick      7")
    norm = lambda lines: [ln.rstrip() for ln in lines] + [""] * (30 - len(lines))  # noqa: E731
    assert norm(ours)[:30] == norm(theirs)[:30]
    # the repaint re-enters the alternate screen
    assert b"\x1b[?1049h" in bytes(c.out)
    await c.s.close()


def Mirror_text(data: bytes | bytearray) -> list[str]:
    m = Mirror(cols=100, rows=30)
    m.feed(bytes(data))
    return m.text_lines()


async def test_detach_then_reattach_gets_a_new_session(managers, nc2, space):
    m = await managers([SeatSpec("alice", "local.alice")])
    c1 = await Client(nc2, space, "alice").open()
    await c1.wait_text("alice>")
    await c1.s.send_keys(b"first\r")
    await c1.wait_text("echo: first")
    sid1 = c1.s.link.grant["sessionId"]
    await c1.s.close()
    assert await c1.result() == "detached"
    await until(lambda: m.live_sessions == 0, what="hand-back")
    c2 = await Client(nc2, space, "alice").open()
    # the repaint carries the earlier screen
    await c2.wait_text("echo: first")
    assert c2.s.link.grant["sessionId"] != sid1
    await c2.s.send_keys(b"second\r")
    await c2.wait_text("echo: second")
    await c2.s.close()


async def test_keystrokes_with_no_session_open_are_dropped(managers, nc2, space):
    await managers([SeatSpec("alice", "local.alice")])
    c1 = await Client(nc2, space, "alice").open()
    await c1.wait_text("alice>")
    await c1.s.close()
    await c1.result()
    assert await c1.s.send_keys(b"secret\r") is False
    assert c1.s.keys_dropped == len(b"secret\r")
    c2 = Client(nc2, space, "alice")  # not yet open: typing goes nowhere
    assert await c2.s.send_keys(b"early\r") is False
    await c2.open()
    await c2.wait_text("alice>")
    await c2.s.send_keys(b"marker\r")
    await c2.wait_text("echo: marker")
    assert "secret" not in c2.text and "early" not in c2.text
    await c2.s.close()


async def test_process_exit_ends_the_session(managers, nc2, space):
    m = await managers([SeatSpec("alice", "local.alice")])
    c = await Client(nc2, space, "alice").open()
    await c.wait_text("alice>")
    await c.s.send_keys(b"exit\r")
    assert await c.result() == "process-exit"
    await c.wait_text("bye")  # output before the end is delivered first
    await until(lambda: m.live_sessions == 0)
    # attaching to the dead pty answers process-exit too
    c2 = await Client(nc2, space, "alice").open()
    assert await c2.result() == "process-exit"


async def test_despawn_mid_session_then_seat_is_gone(managers, nc2, space):
    m = await managers([SeatSpec("alice", "local.alice"), SeatSpec("bob", "local.bob")])
    c = await Client(nc2, space, "alice").open()
    await c.wait_text("alice>")
    await m.despawn("alice")
    assert await c.result() == "target-despawn"
    with pytest.raises(AttachError) as e:
        await Client(nc2, space, "alice").open()
    assert e.value.code == "not-found"


async def test_manager_restart_is_final_and_the_successor_serves_a_new_epoch(managers, nc, nc2, space):
    m = await managers([SeatSpec("alice", "local.alice")])
    c = await Client(nc2, space, "alice").open()
    await c.wait_text("alice>")
    old_epoch = c.s.link.grant["serving"]["epoch"]
    await m.stop()
    assert await c.result() == "manager-restart"
    m2 = await managers([SeatSpec("alice", "local.alice")], instance_id=m.instance_id)
    assert m2.epoch == m.epoch + 1
    c2 = await Client(nc2, space, "alice").open()
    assert c2.s.link.grant["serving"] == {"instanceId": m.instance_id, "epoch": old_epoch + 1}
    assert c2.s.link.grant["subjects"]["in"].endswith(f".{old_epoch + 1}.in")
    await c2.wait_text("alice>")
    await c2.s.close()


async def test_window_2_forces_a_drop_notice_then_a_repaint(managers, nc2, space):
    # frames coalesce pty reads up to 48 KiB, so the flood (~7 MB) must far outrun 2 frames; it
    # starts on our word, once we are attached (a flood that began with the seat could be over
    # before a slow machine attaches: a snapshot, no backlog, no drop)
    flood = [sys.executable, "-c",
             "import sys,time\nprint('go?', flush=True); sys.stdin.readline()\n"
             "for i in range(4000):\n sys.stdout.write(('%05d ' % i) * 300 + '\\n'); sys.stdout.flush()\n"
             "print('DONE'); time.sleep(30)"]
    m = await managers([SeatSpec("flood", "local.flood", argv=flood)], window=2)

    c = Client(nc2, space, "flood")
    slow_out = c._out

    async def slow(b: bytes) -> None:  # a slow terminal: credit returns only after we "drain"
        slow_out(b)
        await asyncio.sleep(0.05)

    c.s.on_output = slow
    await c.open()
    await c.wait_text("go?")
    await c.s.send_keys(b"\r")
    await until(lambda: any(k == "drop" for k, _ in c.events), timeout=20, what="a drop notice")
    drop_at = next(i for i, (k, _) in enumerate(c.events) if k == "drop")
    n = c.events[drop_at][1]
    assert n.bytes > 0 and n.text == f"[cotal: {n.bytes} bytes dropped - backpressure]"
    # the first bytes after the notice are a full repaint (the mirror's snapshot header); on a
    # loaded machine the manager may drop again before it (more notices, no data in between)
    await until(lambda: any(k == "data" for k, _ in c.events[drop_at + 1:]),
                what="data after the drop")
    nxt = next(i for i in range(drop_at + 1, len(c.events)) if c.events[i][0] == "data")
    assert all(k == "drop" for k, _ in c.events[drop_at + 1:nxt])
    header = Mirror(cols=10, rows=2).snapshot()[:12]
    assert bytes(c.events[nxt][1]).startswith(header)
    await c.s.close()
    await until(lambda: m.live_sessions == 0)


async def test_session_ceiling_refuses_with_resource_exhausted(managers, nc2, space):
    await managers([SeatSpec("alice", "local.alice")], max_sessions=1)
    c1 = await Client(nc2, space, "alice").open()
    with pytest.raises(AttachError) as e:
        await Client(nc2, space, "alice").open()
    assert e.value.code == "resource-exhausted"
    await c1.s.close()


async def test_repeated_ready_repaints(managers, nc2, space):
    await managers([SeatSpec("alice", "local.alice")])
    c = await Client(nc2, space, "alice").open()
    await c.wait_text("alice>")
    n = len(c.out)
    await c.s.repaint()
    await until(lambda: len(c.out) > n)
    assert bytes(c.out[n:]).startswith(Mirror(cols=10, rows=2).snapshot()[:12])
    await c.s.close()


async def test_a_paste_larger_than_the_pty_queue_arrives_whole_and_in_order(managers, nc2, space):
    """The pty input queue holds ~4 KiB; a 60 KiB paste waits on writability (rail credit
    holds the caller back) instead of spinning the manager, and every line gets through."""
    m = await managers([SeatSpec("alice", "local.alice")])
    c = await Client(nc2, space, "alice").open()
    await c.wait_text("alice>")
    lines = [f"line-{i:03d}-" + "p" * 180 for i in range(320)]
    for i in range(0, len(lines), 20):  # a client sends a paste in frame-sized pieces
        assert await c.s.send_keys("".join(x + "\r" for x in lines[i:i + 20]).encode())
    await c.wait_text(f"echo: {lines[-1]}", timeout=30)
    # the tty's own echo of the paste interleaves with the program's; pick the program's
    got = re.findall(r"echo: (line-\d{3}-p{180})", c.text)
    assert got == lines
    assert m.live_sessions == 1
    await c.s.close()
