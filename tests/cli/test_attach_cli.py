"""`cotal attach` / `cotal ps` as a user runs them: inside a pty we control, terminal checked after."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import signal
import subprocess
import sys
import time

import pytest

from cotal_tui.demo.manager import DemoManager, SeatSpec

COTAL = [sys.executable, "-m", "cotal_tui.cli"]


def stty_a(fd: int) -> str:
    return subprocess.run(["stty", "-a"], stdin=fd, capture_output=True, text=True).stdout


class PtyRun:
    """A child process on a fresh pty; we read its screen bytes and type into it."""

    def __init__(self, argv: list[str], env: dict | None = None):
        self.master, self.slave = pty.openpty()
        self.before = stty_a(self.slave)
        self.proc = subprocess.Popen(argv, stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                     env={**os.environ, **(env or {})}, start_new_session=True)
        os.set_blocking(self.master, False)
        self.buf = bytearray()

    def pump(self) -> None:
        try:
            while True:
                self.buf += os.read(self.master, 65536)
        except (BlockingIOError, OSError):
            pass

    async def wait(self, needle: bytes, timeout: float = 15.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump()
            if needle in self.buf:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"{needle!r} never appeared; screen tail {bytes(self.buf[-400:])!r}")

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    async def exit_code(self, timeout: float = 15.0) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump()
            rc = self.proc.poll()
            if rc is not None:
                self.pump()
                return rc
            await asyncio.sleep(0.02)
        self.proc.kill()
        raise AssertionError(f"still running; screen tail {bytes(self.buf[-400:])!r}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
async def demo(broker, nc, space):
    m = DemoManager(nc, space, [SeatSpec("alice", "local.alice"),
                                SeatSpec("dash", "local.dash", kind="fullscreen"),
                                SeatSpec("gone", "local.gone")])
    await m.start()
    yield m
    await m.stop()


async def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Run the CLI without blocking the loop the manager serves on."""
    p = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                             stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(p.communicate(), 30)
    return p.returncode, out.decode(), err.decode()


def attach_argv(broker, space, name, *extra):
    return [*COTAL, "attach", name, "--server", broker.url, "--space", space, *extra]


async def test_detach_key_restores_the_terminal(demo, broker, space):
    r = PtyRun(attach_argv(broker, space, "alice"))
    try:
        await r.wait(b"alice>")
        assert "-icanon" in stty_a(r.slave) or "-echo" in stty_a(r.slave)  # raw while attached
        r.type(b"hi there\r")
        await r.wait(b"echo: hi there")
        r.type(b"\x1d")  # Ctrl-] alone detaches
        assert await r.exit_code() == 0
        await r.wait(b"detached from alice")
        assert stty_a(r.slave) == r.before
        assert b"\x1b[?25h" in r.buf  # cursor shown again
        await asyncio.sleep(0.2)
        assert demo.live_sessions == 0  # handed back
    finally:
        r.close()


async def test_detach_key_inside_a_paste_is_data(demo, broker, space):
    r = PtyRun(attach_argv(broker, space, "alice"))
    try:
        await r.wait(b"alice>")
        r.type(b"ab\x1dcd\r")  # the key inside one read is data, not a detach
        await r.wait(b"echo: ab")
        assert r.proc.poll() is None
        r.type(b"\x1b[93;5u")  # kitty CSI-u form of Ctrl-] detaches
        assert await r.exit_code() == 0
        assert stty_a(r.slave) == r.before
    finally:
        r.close()


async def test_custom_detach_key(demo, broker, space):
    r = PtyRun(attach_argv(broker, space, "alice"), env={"COTAL_DETACH_KEY": "ctrl-b"})
    try:
        await r.wait(b"alice>")
        r.type(b"\x1b[27;5;98~")  # modifyOtherKeys form of Ctrl-B
        assert await r.exit_code() == 0
        assert stty_a(r.slave) == r.before
    finally:
        r.close()


async def test_fullscreen_detach_leaves_the_alternate_screen(demo, broker, space):
    r = PtyRun(attach_argv(broker, space, "dash"))
    try:
        await r.wait(b"dashboard")
        assert b"\x1b[?1049h" in r.buf
        r.type(b"\x1d")
        assert await r.exit_code() == 0
        tail = bytes(r.buf[r.buf.rfind(b"\x1b[?1049h"):])
        assert b"\x1b[?1049l" in tail and b"\x1b[?1000l" in tail and b"\x1b[?2004l" in tail
        assert stty_a(r.slave) == r.before
    finally:
        r.close()


async def test_process_exit_restores_the_terminal(demo, broker, space):
    r = PtyRun(attach_argv(broker, space, "alice"))
    try:
        await r.wait(b"alice>")
        r.type(b"exit\r")
        assert await r.exit_code() == 0
        await r.wait(b"exited]")
        assert stty_a(r.slave) == r.before
    finally:
        r.close()


async def test_despawn_says_the_seat_is_gone(demo, broker, space):
    r = PtyRun(attach_argv(broker, space, "gone"))
    try:
        await r.wait(b"gone>")
        await demo.despawn("gone")
        assert await r.exit_code() == 0
        await r.wait(b"seat gone is gone")
        assert stty_a(r.slave) == r.before
    finally:
        r.close()


async def test_sigterm_restores_the_terminal(demo, broker, space):
    r = PtyRun(attach_argv(broker, space, "alice"))
    try:
        await r.wait(b"alice>")
        os.kill(r.proc.pid, signal.SIGTERM)
        assert await r.exit_code() == 0
        assert stty_a(r.slave) == r.before
    finally:
        r.close()


async def test_manager_restart_message(demo, broker, space):
    r = PtyRun(attach_argv(broker, space, "alice"))
    try:
        await r.wait(b"alice>")
        await demo.stop()
        assert await r.exit_code() == 1
        await r.wait(b"manager restarted; re-attach")
        assert stty_a(r.slave) == r.before
    finally:
        r.close()


async def on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run ``cotal attach`` on a pty (it refuses a stdin that is not a terminal)."""
    r = PtyRun(argv)
    try:
        rc = await r.exit_code()  # the terminal-restoring sequences are not the message
        return rc, re.sub(r"\x1b(\[[?0-9;]*[A-Za-z]|[>=])", "", r.buf.decode("utf-8", "replace"))
    finally:
        r.close()


async def test_unknown_seat_and_unreachable_broker_are_one_sentence(demo, broker, space):
    rc, err = await on_a_terminal(attach_argv(broker, space, "nosuch"))
    assert rc == 1 and err.strip() == "cotal attach: there is no seat named 'nosuch'."
    rc, err = await on_a_terminal([*COTAL, "attach", "alice", "--server", "nats://127.0.0.1:1"])
    assert rc == 1
    assert err.strip() == ("cotal attach: could not connect to nats://127.0.0.1:1: "
                           "connection refused.")
    rc, _, err = await run_cli([*COTAL, "ps", "--server", "nats://127.0.0.1:1"])
    assert rc == 1 and "Traceback" not in err and err.count("\n") == 1


async def test_bad_detach_key_is_refused_before_the_terminal_changes(demo, broker, space):
    r = PtyRun(attach_argv(broker, space, "alice"), env={"COTAL_DETACH_KEY": "ctrl-1"})
    try:
        assert await r.exit_code() == 2
        await r.wait(b"COTAL_DETACH_KEY")
        assert b"\x1b[" not in r.buf  # nothing was written to the terminal but the error
        assert stty_a(r.slave) == r.before
    finally:
        r.close()


async def test_ps_lists_the_seats(demo, broker, space):
    rc, out, err = await run_cli([*COTAL, "ps", "--server", broker.url, "--space", space])
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["NAME", "KIND"]
    names = {ln.split()[0] for ln in lines[1:]}
    assert names == {"alice", "dash", "gone"}
    assert all("running" in ln for ln in lines[1:])


SUDO = ("import sys, pathlib\n"
        "sys.stdout.write('[sudo] password for ops: '); sys.stdout.flush()\n"
        "pathlib.Path(sys.argv[1]).write_text(sys.stdin.readline())\n")


@pytest.fixture
async def impostor(broker, space, tmp_path):
    """A second, in-process manager serving a seat named ``alice`` (principal local.mallory) that
    shows a fake sudo prompt and keeps whatever line it is given in ``captured``."""
    import nats

    caught = tmp_path / "captured"
    nc2 = await nats.connect(broker.url)
    fake = DemoManager(nc2, space, [SeatSpec("alice", "local.mallory",
                                             argv=[sys.executable, "-c", SUDO, str(caught)])],
                       root=str(tmp_path / "impostor"))
    await fake.start()
    yield fake, caught
    await fake.stop()
    await nc2.close()


async def test_two_managers_serving_one_name_is_refused_listing_both(demo, impostor, broker, space):
    """An impostor manager serves a seat named ``alice`` with a fake sudo prompt: ``attach alice``
    is refused naming both (manager instance and id) and nothing is typed into either; ``--on``
    picks the real one."""
    fake, caught = impostor
    r = PtyRun(attach_argv(broker, space, "alice"))
    try:
        rc = await r.exit_code()
        r.type(b"hunter2\r")  # typed after the refusal: reaches no seat
    finally:
        r.close()
    out = re.sub(r"\x1b(\[[?0-9;]*[A-Za-z]|[>=])", "", r.buf.decode("utf-8", "replace"))
    assert rc == 1, out
    assert demo.instance_id in out and fake.instance_id in out, out
    assert "alice" in out and "mallory" in out and "--on" in out, out
    assert "password" not in out and not caught.exists()
    # --on picks one: the real alice, by its whole id or by the shortest prefix only it starts
    n = next(i for i in range(1, len(demo.instance_id)) if not fake.instance_id.startswith(demo.instance_id[:i]))
    for on in (demo.instance_id, demo.instance_id[:n]):
        r = PtyRun(attach_argv(broker, space, "alice", "--on", on))
        try:
            await r.wait(b"alice>")
            r.type(b"\x1d")
            assert await r.exit_code() == 0
        finally:
            r.close()
    # a prefix both managers' ids start (or none does) is refused, naming the candidates
    common = next((demo.instance_id[:i] for i in range(len(demo.instance_id), 0, -1)
                   if fake.instance_id.startswith(demo.instance_id[:i])), None)
    if common:
        r = PtyRun(attach_argv(broker, space, "alice", "--on", common))
        try:
            rc = await r.exit_code()
        finally:
            r.close()
        err = r.buf.decode("utf-8", "replace")
        assert rc == 2 and demo.instance_id in err and fake.instance_id in err, err
    assert not caught.exists()


async def test_input_and_stop_refuse_a_shared_name_and_take_an_id(demo, impostor, broker, space):
    fake, caught = impostor
    base = ["--server", broker.url, "--space", space]
    rc, _, err = await run_cli([*COTAL, "input", "alice", "hunter2", *base])
    assert rc == 1 and "Traceback" not in err and err.count("\n") == 1, err
    assert demo.instance_id in err and fake.instance_id in err and "local.mallory" in err, err
    rc, _, err = await run_cli([*COTAL, "stop", "alice", *base])
    assert rc == 1 and fake.instance_id in err, err
    assert "alice" in demo.seats and "alice" in fake.seats and not caught.exists()
    # the seat's principal is an id: it picks the real alice
    rc, out, err = await run_cli([*COTAL, "input", "local.alice", "hello there", *base])
    assert rc == 0, err
    assert demo.instance_id in out and not caught.exists()
