"""The host mirror never throttles a flooding program: it skips ahead, keeping mode switches."""

from __future__ import annotations

import asyncio
import sys

from attach.session import host
from attach.session.host import PtySeat

FLOOD = (
    "import sys\n"
    "w = sys.stdout.buffer\n"
    "w.write(b'\\x1b[?1049h\\x1b[?2004h')\n"          # alt screen + bracketed paste, early
    "line = b'x' * 99 + b'\\n'\n"
    "for i in range(30000): w.write(line)\n"          # ~3 MiB, far past the backlog cap
    "w.write(b'\\x1b[?1049l')\n"                       # leave the alt screen mid-flood
    "for i in range(3000): w.write(line)\n"
    "w.write(b'FLOOD-DONE\\n'); w.flush()\n"
    "import time; time.sleep(30)\n"
)


async def test_flood_skips_ahead_and_keeps_modes():
    seat = PtySeat([sys.executable, "-c", FLOOD], cols=100, rows=30)
    seen = bytearray()
    peak = 0

    def on_out(b: bytes) -> None:
        nonlocal peak
        seen.extend(b[-64:])
        del seen[:-256]
        peak = max(peak, seat._backlog_bytes)

    seat.listeners.append(on_out)
    seat.start()
    try:
        async with asyncio.timeout(30):
            while b"FLOOD-DONE" not in seen:
                await asyncio.sleep(0.01)
        seat.catch_up()
        assert seat.mirror_skipped > 0  # the flood outran the mirror, and was not throttled
        assert peak <= host.MIRROR_BACKLOG_MAX + 16 * 65536  # memory stays bounded
        # mode switches inside skipped bytes still reached the mirror
        assert not seat.mirror.alt_screen and seat.mirror.bracketed_paste
        assert any("FLOOD-DONE" in line for line in seat.mirror.text_lines())
    finally:
        await seat.stop()
