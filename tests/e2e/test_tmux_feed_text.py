"""End to end: in a real terminal, at 120×40 and at 80×24 with the roster and
NEEDS-YOU open, every message's text is on screen whatever the length of the sender's name,
role and channel — short texts (``Q3``) and ``hi 03 there`` included, CJK names too. A DM to
a principal that is not on the roster shows its id whole."""

from __future__ import annotations

import json
import uuid

import pytest

from support.observer import now_ms
from support.tmux import needs_tmux

pytestmark = needs_tmux


SENDERS = [  # (display name, role, channel)
    ("a", None, "general"),
    ("root-console", "operator", "general"),
    ("n" * 30, "reviewer", "general"),
    ("long-" * 12 + "name", "r" * 40, "team.backend.infrastructure-and-deploys-" + "c" * 24),
    ("日本語の名前です", "役割", "general"),
    ("m" * 128, "x" * 64, "c" * 64),
]


async def _send(nc, space: str, k: int, name: str, role: str | None, text: str, *,
                channel: str | None = None, to: str | None = None) -> None:
    sender = f"local.s{k}"
    m = {"id": str(uuid.uuid4()), "ts": now_ms(), "space": space,
         "from": {"id": sender, "name": name, **({"role": role} if role else {})},
         "parts": [{"kind": "text", "text": text}]}
    if to:
        m["to"] = to
        subj = f"cotal.{space}.inst.{to}.{sender}"
    else:
        m["channel"] = channel
        subj = f"cotal.{space}.chat.{sender}.{channel}"
    await nc.jetstream().publish(subj, json.dumps(m).encode(), headers={"Nats-Msg-Id": m["id"]})


@pytest.mark.parametrize("cols,rows", [(120, 40), (80, 24)])
async def test_every_text_is_on_screen(broker, nc, space, tmux, tmp_path, cols, rows):
    await tmux.watch(broker.url, space, tmp_path, cols=cols, rows=rows)
    await tmux.until(lambda s: "roster ·" in s and "connected" in s, what="console up")
    if cols >= 120:
        await tmux.until(lambda s: "NEEDS YOU" in s, what="the NEEDS-YOU rail open")
    k = 0
    for name, role, channel in SENDERS:
        for text in (f"Q{k}", f"hi {k:02d} there"):
            k += 1
            await _send(nc, space, k, name, role, text, channel=channel)
            await tmux.until(lambda s, t=text: t in s, what=f"{text!r} from a {len(name)}-char "
                             f"name at {cols}x{rows}")
    # a DM to a principal not on the roster: its id whole, never cut to "local.fi"
    await _send(nc, space, 99, "root-console", "operator", "Q-dm", to="local.first_agent")
    s = await tmux.until(lambda s: "Q-dm" in s, what="the DM")
    assert "local.first_agent" in s
    await tmux.keys("q")
    await tmux.until(lambda s: "console-exit=0" in s, what="exit")
