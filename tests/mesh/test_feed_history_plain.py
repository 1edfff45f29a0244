"""``--plain --backfill``: a history line shows when the message was sent,
marked historical, not when it was printed; a live line keeps its receipt time."""

from __future__ import annotations

import json
import re
import time

from support.observer import message
from support.watchproc import WatchProc


async def test_backfilled_lines_show_the_messages_own_time(broker, nc, space):
    sent_at = int(time.time() * 1000) - 3 * 86_400_000 - 7 * 60_000 - 13_000  # days ago
    m = message(space, "ada", "from the archive", channel="general")
    m["ts"] = sent_at
    await nc.jetstream().publish(f"cotal.{space}.chat.local.ada.general", json.dumps(m).encode(),
                                 headers={"Nats-Msg-Id": m["id"]})
    w = WatchProc.start("--plain", "--backfill", "5", "--server", broker.url, "--space", space)
    try:
        raw = await w.wait_for(lambda: [ln for ln in w.stdout_text.splitlines()
                                        if "from the archive" in ln], 20, "the history line")
        line = raw[0]
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(sent_at / 1000))
        assert line.startswith(stamp + " history "), line
        # a live line: the receipt time, no date
        live = message(space, "ada", "fresh off the wire", channel="general")
        await nc.jetstream().publish(f"cotal.{space}.chat.local.ada.general",
                                     json.dumps(live).encode(), headers={"Nats-Msg-Id": live["id"]})
        got = await w.wait_for(lambda: [ln for ln in w.stdout_text.splitlines()
                                        if "fresh off the wire" in ln], 20, "the live line")
        assert re.match(r"\d\d:\d\d:\d\d msg ", got[0]), got[0]
    finally:
        w.stop()
