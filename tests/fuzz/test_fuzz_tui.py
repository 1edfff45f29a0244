"""The hostile corpus through the real console in a real terminal (tmux).

The console (``cotal watch`` on a TTY) reads a space while a raw publisher sends the
content-level hostile families (escape/OSC/C1/bidi text in every field, presence records,
channel configs, membership rows, odd ids and timestamps, oversized fields). Asserted after
the flood: the console is still running and answering keys, the pane title was never
changed (OSC 0/2), nothing reached the clipboard (OSC 52 with ``set-clipboard on``), the
screen was never cleared, and the captured screen holds no raw bidi or control characters.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid

import nats
import pytest

from cotal_tui.demo.broker import Broker
from cotal_tui.demo.provision import provision_space
from support.tmux import needs_tmux
from support.hostile import BIDI_CPS, RawPublisher, generate

pytestmark = [needs_tmux, pytest.mark.slow]

SPACE = "tui"
FAMILIES = ["escapes", "presence-escapes", "bad-subject-token", "oversized-fields", "ids",
            "timestamps", "routing-confusion", "channel-config", "membership-rows",
            "presence-time", "presence-mismatch", "weird-headers", "forged-sender",
            "wrong-types", "malformed-json"]
N = 3000




@pytest.fixture
def broker_tui():
    b = Broker(name="cotal-fuzz-tui").start()
    yield b
    b.stop()


def _controls(s: str) -> list[str]:
    bad = []
    for ch in s:
        cp = ord(ch)
        if (cp < 0x20 and ch != "\n") or 0x7F <= cp <= 0x9F or cp in BIDI_CPS:
            bad.append(f"U+{cp:04X}")
    return bad


async def test_console_survives_the_hostile_corpus(broker_tui, tmux, tmp_path):
    nc = await nats.connect(broker_tui.url)
    try:
        await provision_space(nc, SPACE)
    finally:
        await nc.close()
    await tmux.watch(broker_tui.url, SPACE, tmp_path, cols=140, rows=45, clipboard=True)
    await tmux.until(lambda s: "roster ·" in s and "connected" in s, 30, "console up")
    title0, name0 = await tmux.title(), await tmux.window_name()

    items = list(generate(SPACE, N, seed=11, families=FAMILIES))
    with RawPublisher.to(broker_tui.url) as pub:
        for n, it in enumerate(items, 1):
            pub.send(it)
            if n % 50 == 0:
                pub.flush()
                await asyncio.sleep(0.02)
        mid = f"fuzz-done-{uuid.uuid4().hex[:6]}"
        env_ = {"id": mid, "ts": int(time.time() * 1000), "space": SPACE,
                "from": {"id": "local.sentinel", "name": "sentinel"}, "channel": "general",
                "parts": [{"kind": "text", "text": f"FUZZDONE {mid}"}]}
        pub.publish(f"cotal.{SPACE}.chat.local.sentinel.general".encode(),
                    json.dumps(env_).encode())
        pub.flush()

    # the sentinel is the last #general message; on the `all` tab the fuzz agents' lapsing
    # heartbeats (400 lifecycle rows, ~5 s later) can push it off screen before a poll sees it
    await tmux.keys("2")
    s = await tmux.until(lambda s: mid in s or "console-exit=" in s, 60,
                         "the console to show the end sentinel")
    assert "console-exit=" not in s, s
    assert "roster ·" in s and "msg/s" in s, s  # never cleared
    # the console's own title (its waiting count, issue 38) is the only one: no peer's bytes
    title = await tmux.title()
    assert title == title0 or re.fullmatch(rf"(\d+ waiting · )?cotal {SPACE}", title), title
    assert await tmux.window_name() == name0
    assert "pwned" not in await tmux.title()
    assert (await tmux.buffers()).strip() == "", "an OSC 52 reached the clipboard"
    bad = _controls(s)
    assert not bad, bad[:20]
    # the hostile text was shown, visibly escaped (not silently dropped)
    assert any(tok in s for tok in ("\\x1b", "\\u202e", "\\u2066", "\\x07", "\\x00")), s
    # still answering keys: the help overlay opens and closes
    await tmux.keys("?")
    await tmux.until(lambda s: "/ search · q close" in s, 20, "help overlay")
    await tmux.keys("q")
    await tmux.until(lambda s: "/ search · q close" not in s, 20, "help closed")
    await tmux.keys("q")
    t_q = time.monotonic()
    s = await tmux.until(lambda s: "console-exit=" in s, 30, "a clean quit")
    print(f"\nquit took {time.monotonic() - t_q:.1f}s")
    assert "console-exit=0" in s
