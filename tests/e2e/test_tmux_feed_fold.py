"""End to end (issue 38 item 6), in a real terminal at 140×42: a 2,750-character message
folds to ``[feed] max_lines`` rows and ``… +N lines · Enter``, Enter shows all of it; a
Markdown body's card is rendered with no hyperlink or escape reaching the terminal."""

from __future__ import annotations

import json
import uuid

from support.observer import now_ms
from support.tmux import needs_tmux

pytestmark = needs_tmux



async def _send(nc, space: str, text: str) -> None:
    m = {"id": str(uuid.uuid4()), "ts": now_ms(), "space": space,
         "from": {"id": "local.writer", "name": "writer"}, "channel": "general",
         "parts": [{"kind": "text", "text": text}]}
    await nc.jetstream().publish(f"cotal.{space}.chat.local.writer.general",
                                 json.dumps(m).encode(), headers={"Nats-Msg-Id": m["id"]})


async def test_a_long_message_folds_and_a_markdown_card_stays_inert(broker, nc, space, tmux,
                                                                      tmp_path):
    (tmp_path / "config.toml").write_text("[feed]\nmax_lines = 4\n")
    await tmux.watch(broker.url, space, tmp_path, cols=140, rows=42)
    await tmux.until(lambda s: "roster ·" in s and "connected" in s, what="console up")

    md = ("# notes\n- see [docs](https://evil.example/x)\n- \x1b]8;;https://evil.example\x07"
          "click\x1b]8;;\x07 and \x1b[2J\n\n<script>alert(1)</script>\n")
    await _send(nc, space, md)
    await tmux.until(lambda s: "# notes" in s, what="the markdown row")
    await tmux.keys("Enter")  # the newest row's card
    s = await tmux.until(lambda s: "docs (https://evil.example/x)" in s, what="rendered card")
    assert "• see docs" in s and "<script>alert(1)</script>" in s and "\\x1b[2J" in s
    raw = await tmux.screen(escapes=True)
    assert "\x1b]8;" not in raw and "\x1b[2J" not in raw
    await tmux.keys("q")
    await tmux.until(lambda s: "docs (https://evil.example/x)" not in s, what="card closed")

    body = " ".join(f"fold{k:04d}" for k in range(400))[:2737] + " THE-END-MARK"
    assert len(body) == 2750
    await _send(nc, space, body)
    s = await tmux.until(lambda s: "fold0000" in s and s.count("lines · Enter") == 2,
                         what="the fold line (the markdown row has one too)")
    shown = [line for line in s.splitlines() if "fold0" in line]
    assert 1 <= len(shown) <= 4, shown  # four body rows, the first beside the head
    assert "THE-END-MARK" not in s
    await tmux.keys("Enter")
    await tmux.until(lambda s: "fold0000" in s and "message" in s, what="the card")
    await tmux.keys("G")
    await tmux.until(lambda s: "THE-END-MARK" in s, what="the card's end of the body")
    await tmux.keys("q")
    await tmux.until(lambda s: "THE-END-MARK" not in s, what="card closed")
    await tmux.keys("q")
    await tmux.until(lambda s: "console-exit=0" in s, what="exit")
