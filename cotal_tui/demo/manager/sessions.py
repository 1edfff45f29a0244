"""Attach sessions: ``attach`` mints a holder-bound session grant, writes the ``session.<id>``
ledger row (``issuing``, ``active``, ``closed``), opens the serving rail (on its own connection
under static auth) and starts a :class:`~attach.session.host.ServingBridge`. A caller silent for
``caller_silence_ms`` is reaped, so a vanished caller cannot pin a ``maxSessions`` slot."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
import time
from typing import Any, Awaitable

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.errors import BucketNotFoundError
from nats.js.kv import KeyValue

from attach.session.host import ServingBridge
from attach.session.rail import open_rail
from meshview.errors import swallowed, swallowing
from meshview.wire.canonical import canonical_bytes
from meshview.wire.endpoint import MANAGER, ParsedRequest, eps_subject
from meshview.wire.envelope import EndpointError

from cotal_tui.demo.manager.authz import AuthzFamily
from cotal_tui.demo.manager.spec import Seat

GRANT_TTL_MS = 24 * 3600 * 1000


class SessionFamily(AuthzFamily):
    async def _sessions_bucket(self, js: JetStreamContext) -> KeyValue:
        name = f"cotal_sessions_{self.space}"
        try:
            return await js.key_value(name)
        except BucketNotFoundError:
            try:
                return await js.create_key_value(config=KeyValueConfig(bucket=name, history=1))
            except Exception:  # noqa: BLE001 - another manager created it first (any create error): open the existing bucket, whose error then propagates
                return await js.key_value(name)

    def _sign(self, grant: dict[str, Any]) -> str:
        mac = hmac.new(self._signing_key, canonical_bytes(grant), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()

    async def _cmd_attach(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        return await self._attach(parsed, env, await self._authorized_seat(parsed, env))

    async def _attach(self, parsed: ParsedRequest, env: dict[str, Any], seat: Seat) -> dict[str, Any]:
        if len(self.sessions) >= self.max_sessions:
            raise EndpointError("resource-exhausted", f"the manager holds {self.max_sessions} sessions",
                                outcome="not-executed")
        sid = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        now = int(time.time() * 1000)
        sin = eps_subject(self.space, MANAGER, sid, self.epoch, "in")
        sout = eps_subject(self.space, MANAGER, sid, self.epoch, "out")
        grant: dict[str, Any] = {
            "v": 1, "sessionId": sid, "space": self.space, "endpoint": MANAGER,
            "subjects": {"in": sin, "out": sout},
            "holder": {"id": parsed.caller.principal, "lifecycleUid": parsed.caller.uid, "processEpoch": 0},
            "serving": {"instanceId": self.instance_id, "epoch": self.epoch},
            "window": self.window, "iat": now, "exp": now + GRANT_TTL_MS,
            "nonce": secrets.token_urlsafe(16), "issuer": {"keyId": f"{self.instance_id}.{self.epoch}"},
        }
        grant["sig"] = self._sign(grant)
        ledger = self._kv["sessions"]
        # the row the identity plane's redemption reads on a user mesh (grantSig, endpoint, the
        # holder's principal), as the reference's session ledger carries them
        row = {"state": "issuing", "endpoint": MANAGER, "grantSig": grant["sig"],
               "holder": {**grant["holder"], "principal": parsed.caller.principal}, "serving": grant["serving"],
               "target": {"name": seat.spec.name, "lifecycleUid": seat.lifecycle_uid}, "exp": grant["exp"]}
        await ledger.create(f"session.{sid}", json.dumps(row).encode())
        # the rail's callbacks reach the bridge, which needs the rail first: bound once both exist
        holder: dict[str, ServingBridge] = {}

        def on_data(data: object, seq: int) -> Awaitable[None]:
            return holder["b"].on_caller_data(data, seq)

        rail_nc = self.nc
        if self.session_connect is not None:
            rail_nc = self._session_ncs[sid] = await self.session_connect(grant)
        rail = await open_rail(rail_nc, egress=sout, ingress=sin, window=self.window, on_data=on_data,
                               peer_silence_ms=self.caller_silence_ms,
                               on_close=lambda: holder["b"].rail_gone(),
                               on_fault=lambda reason, detail: holder["b"].rail_gone())
        bridge = ServingBridge(seat.pty, rail, on_done=lambda b, reason: self._session_done(sid, b, reason))
        holder["b"] = bridge
        self.sessions[sid] = (bridge, seat)
        seat.sessions.add(bridge)
        row["state"] = "active"
        await ledger.put(f"session.{sid}", json.dumps(row).encode())
        bridge.start()
        if not seat.pty.running:
            bridge.end("process-exit")
        return {"grant": grant}

    def _session_done(self, sid: str, bridge: ServingBridge, reason: str) -> None:
        entry = self.sessions.pop(sid, None)
        if entry is not None:
            entry[1].sessions.discard(bridge)
        snc = self._session_ncs.pop(sid, None)

        async def mark() -> None:
            try:
                await self._kv["sessions"].put(f"session.{sid}", json.dumps(
                    {"state": "closed", "reason": reason}).encode())
            except Exception:  # noqa: BLE001 - the session row is advisory; the closed session is already gone [counted: COTAL_LOG]
                swallowed("demo.manager.sessions")
            if snc is not None:  # the session's serving connection dies with it
                with swallowing("demo.manager.sessions"):  # best effort: the stand-in manager never dies of a side effect
                    await asyncio.wait_for(snc.drain(), 2.0)

        self._later(mark())

    @property
    def live_sessions(self) -> int:
        return len(self.sessions)
