"""A demo manager in a process of its own, so a test can SIGKILL it like a crashed host.

    python tests/support/manager_proc.py URL SPACE ROOT [SEAT...]

prints ``ready <instanceId>`` once serving, and serves until stdin closes (then stops
gracefully) or the process is killed (then nothing deregisters, like a real crash).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import nats  # noqa: E402

from cotal_tui.demo.manager import DemoManager, SeatSpec  # noqa: E402


async def serve(url: str, space: str, root: str, seats: list[str]) -> None:
    nc = await nats.connect(url)
    m = DemoManager(nc, space, [SeatSpec(n, f"local.{n}") for n in seats], root=root)
    await m.start()
    print(f"ready {m.instance_id}", flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        pass
    await m.stop()
    await nc.close()


async def start(url: str, space: str, root: str, *seats: str) -> tuple[asyncio.subprocess.Process, str]:
    """Run one and wait for ``ready``; returns the process and the manager's instance id."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, url, space, root, *seats,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    if not line.startswith(b"ready "):
        proc.kill()
        await proc.wait()
        raise RuntimeError(f"manager process did not come up: {line!r}")
    return proc, line.split()[1].decode()


async def finish(proc: asyncio.subprocess.Process) -> None:
    """Graceful stop if still alive (stdin closes), SIGKILL after 15 s."""
    if proc.returncode is None:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
