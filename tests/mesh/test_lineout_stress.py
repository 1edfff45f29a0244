"""The line sink's accounting under any interleaving.

Many stall/resume cycles on a real pipe shrunk to one page, a seeded random mix of batch
writes, partial reads and loop turns (the sink's writability callback runs in those turns):
every line is either read intact, in order, or counted by the gap line that stands exactly
where it went missing, and the gap's count equals the lines missing there — no more, no less.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import random

import pytest

from meshview.lines.lineout import LineSink


def read_some(r: int, data: bytearray, n: int) -> None:
    try:
        data += os.read(r, n)
    except BlockingIOError:
        pass


async def one_run(seed: int) -> tuple[int, int]:
    rnd = random.Random(seed)
    r, w = os.pipe()
    os.set_blocking(r, False)
    shed: list[bytes] = []
    sink = LineSink(w, max_bytes=rnd.choice([2000, 8000, 30000]),
                    max_lines=rnd.choice([5, 20, 100_000]),
                    gap_line=lambda gap, total: f"GAP {gap} {total}", on_shed=shed.extend)
    fcntl.fcntl(sink._fd, fcntl.F_SETPIPE_SZ, 4096)  # the smallest pipe: stalls all the time
    data = bytearray()
    i = 0
    for _ in range(400):
        op = rnd.random()
        if op < 0.5:
            k = rnd.randint(1, 30)
            sink.write_lines([f"{j:07d} " + "z" * rnd.randint(0, 600) for j in range(i, i + k)])
            i += k
        elif op < 0.8:
            read_some(r, data, rnd.randint(1, 9000))
        else:
            await asyncio.sleep(0)
    for _ in range(100_000):  # the consumer keeps up now: everything pending arrives
        read_some(r, data, 1 << 16)
        await asyncio.sleep(0)
        if not sink.pending_lines:
            break
    read_some(r, data, 1 << 16)
    assert sink.pending_lines == 0
    lines = bytes(data).split(b"\n")[:-1]
    expect = reported = 0
    for x in lines:
        if x.startswith(b"GAP"):
            _, gap, total = x.split()
            gap, total = int(gap), int(total)
            assert gap == total - reported > 0, (seed, x, reported)
            expect += gap
            reported = total
        else:
            v = int(x[:7])
            assert v == expect, f"seed {seed}: line {v} where {expect} was due"
            assert x[8:] == b"z" * (len(x) - 8)  # never cut or spliced
            expect = v + 1
    missing = i - sum(1 for x in lines if not x.startswith(b"GAP"))
    assert reported == sink.dropped == missing == len(shed), (seed, reported, sink.dropped)
    assert sorted(int(b[:7]) for b in shed) == [int(b[:7]) for b in shed]  # oldest first
    sink.close()
    os.close(w)
    os.close(r)
    return i, sink.dropped


@pytest.mark.parametrize("block", range(4))
async def test_sink_accounting_is_exact_over_many_stall_resume_cycles(block):
    written = dropped = 0
    for seed in range(block * 60, block * 60 + 60):
        n, d = await one_run(seed)
        written, dropped = written + n, dropped + d
    assert dropped > 0 and dropped < written  # it did stall and shed, and it did deliver
