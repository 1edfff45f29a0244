"""``cotal watch --plain --backfill``: history from several channels and the DMs comes out as one
timeline, in the order the broker stored it (which is time order), never channel by channel;
the per-channel reads are merged, each channel's own order kept."""

from __future__ import annotations

from support.observer import dm, now_ms, post
from support.watchproc import WatchProc


async def test_backfill_lines_come_out_in_time_order(broker, nc, space):
    channels = ("general", "releases", "team.backend")
    sent = []
    base = now_ms() - 60_000
    for i in range(12):
        text = f"note-{i:02d}"
        if i % 4 == 3:
            m = await dm(nc, space, "bram", "ada", text)
        else:
            m = await post(nc, space, ("ada", "bram", "cleo")[i % 3], channels[(i * 2) % 3], text)
        sent.append((text, m["ts"]))
    assert [t for t, _ in sent] == sorted(t for t, _ in sent)
    assert base < sent[0][1] <= sent[-1][1] <= now_ms()
    w = WatchProc.start("--plain", "--backfill", "10", "--server", broker.url, "--space", space)
    try:
        def notes() -> list[str]:
            return [word for ln in w.stdout_text.splitlines() if " history " in ln
                    for word in ln.split() if word.startswith("note-")]

        got = await w.wait_for(lambda: (n := notes()) and len(n) == 12 and n, 20, "every history line")
        assert got == [t for t, _ in sent], got
        stamps = [ln.split(" history ")[0] for ln in w.stdout_text.splitlines() if " history " in ln]
        assert stamps == sorted(stamps), stamps
    finally:
        w.stop()
