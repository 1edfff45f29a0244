"""``purge``: the space's retained chat (and, asked, its DMs) dropped from the broker's streams."""

from __future__ import annotations

import json
from typing import Any

from meshview.wire.endpoint import ParsedRequest
from meshview.wire.names import chat_stream, dm_stream

from cotal_tui.demo.manager.base import ManagerBase, fail


class PurgeFamily(ManagerBase):
    async def _cmd_purge(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> dict[str, int]:
        out = {"chat": await self._purge_stream(chat_stream(self.space))}
        if args.get("includeDms") is True:
            out["dm"] = await self._purge_stream(dm_stream(self.space))
        return out

    async def _purge_stream(self, stream: str) -> int:
        try:
            msg = await self.nc.request(f"$JS.API.STREAM.PURGE.{stream}", b"{}", timeout=5.0)
            o = json.loads(msg.data)
        except Exception as e:  # noqa: BLE001 - any failed purge request is one named `failed-precondition` answer
            raise fail("failed-precondition", f"the purge of {stream} failed ({type(e).__name__})",
                       outcome="unknown") from None
        err = o.get("error") if isinstance(o, dict) else None
        if err:
            if isinstance(err, dict) and err.get("err_code") == 10059:
                return 0  # no such stream: nothing retained
            raise fail("failed-precondition", f"the broker refused the purge of {stream}")
        purged = o.get("purged", 0)
        return purged if isinstance(purged, int) and purged >= 0 else 0
