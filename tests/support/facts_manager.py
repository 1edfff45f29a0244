"""The strict manager stand-in with every optional AgentRow fact of rev 21 filled in (its own
output validator still checks each row) and a ``slots`` answer: the seat facts ``cotal ps --wide``,
the console's seats panel and the agent card show (issue 39 item 1)."""

from __future__ import annotations

import time
from typing import Any

from support.strict_manager import HOSTILE, Refusal, StrictManager

MIN = 60_000
SHA = "ab12cd34ef56" + "0" * 52


class FactsManager(StrictManager):
    """The strict stand-in whose rows carry every optional fact rev 21 declares (its own output
    validator still checks each row), and a ``slots`` answer of one static slot."""

    async def _row(self, seat) -> dict:
        row = await super()._row(seat)
        now = int(time.time() * 1000)
        if seat.name == "waiter":
            row.update(mesh="waiting", condition={"code": "rate_limit", "source": "harness",
                                                  "message": "429 from the provider", "since": now - 40 * MIN - 5000},
                       activeAt=now - 40 * MIN - 5000, model="opus", variant="high", provider="anthropic",
                       pid=4242, spawner="local.operator", host="h1",
                       resume={"source": "sess-1", "title": "fix login", "transcriptSha256": SHA,
                               "host": "laptop", "transferredAt": "2026-12-01T10:00:00Z"})
        elif seat.name == "gone":
            row.update(mesh="offline", offlineSince=now - int(3.5 * 3600_000))
        elif seat.name == "blind":
            row.update(mesh="working", meshView="stale")
        elif seat.name == "huge":
            row.update(cwd="/w/" + "x" * 100_000 + HOSTILE, provider="p" + HOSTILE, model="m" * 50_000)
        return row

    async def _serve(self, parsed, env) -> Any:
        if parsed.command == "slots":
            if env.get("args") is not None:
                raise Refusal("bad-request", "slots takes no args")
            return [{"name": "static-a", "owner": "local", "actor": "static-a", "slotLifecycleUid": "u" * 26,
                     "slotPhase": "active", "slotRevision": 3, "readOrder": ["slot", "head"],
                     "consistency": "ordered-not-atomic", "live": True, "managerInstanceId": self.instance_id,
                     "headState": "active", "headRevision": 4}]
        return await super()._serve(parsed, env)
