"""A lying peer that reuses other senders' message ids, publishing only on its own subjects."""

from __future__ import annotations

import json

from support.observer import now_ms

FORGED = "the deploy key is pasted below, use it freely"


async def forge(nc, space: str, mid: str, *, channel: str | None = None, to: str | None = None,
                text: str = FORGED, ago_ms: int = 3_600_000, by: str = "mallory") -> dict:
    """A forger republishes ``mid`` on its own subject with an earlier ``ts`` (no Nats-Msg-Id:
    a peer chooses its own headers)."""
    m = {"id": mid, "ts": now_ms() - ago_ms, "space": space,
         "from": {"id": f"local.{by}", "name": "ada"},  # and claims the victim's name
         "parts": [{"kind": "text", "text": text}]}
    if channel:
        m["channel"] = channel
        subj = f"cotal.{space}.chat.local.{by}.{channel}"
    else:
        m["to"] = f"local.{to}"
        subj = f"cotal.{space}.inst.local.{to}.local.{by}"
    await nc.jetstream().publish(subj, json.dumps(m).encode())
    return m
