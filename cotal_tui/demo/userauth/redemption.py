"""The identity plane's decision for a user-mode session redemption
(``implementations/auth/src/session-redemption.ts``), run at the exchange and again at the callout.

It leader-reads ``session.<sessionId>`` from ``KV_cotal_sessions_<space>`` (a direct read of the
last message, so a delete marker is seen as one) and refuses unless the row is ``active``, its
``grantSig`` is the presented grant's (exchange only), its holder is the bearer's principal and
lifecycle, its endpoint and serving epoch are the grant's, it has not expired, and the serving
manager is a candidate whose process epoch is the row's.
"""

from __future__ import annotations

import json
import time
from typing import Any, NoReturn

from cotal_tui.demo.userauth.bearer import Session
from cotal_tui.demo.userauth.managers import manager_gate
from cotal_tui.errors import CotalError
from meshview.wire.names import space_token


class RedemptionRefused(CotalError, RuntimeError):
    """``permission-denied``: the sentence is ``session redemption refused: …``."""


def _deny(why: str) -> NoReturn:
    raise RedemptionRefused(f"session redemption refused: {why}")


def sessions_bucket(space: str) -> str:
    return f"cotal_sessions_{space_token(space)}"


def grant_coordinates(raw: object) -> tuple[str, str, int, str]:
    """``(endpoint, sessionId, epoch, sig)`` of a presented grant; nothing else of it is trusted."""
    g = raw if isinstance(raw, dict) else None
    serving = g.get("serving") if g else None
    if not g or not isinstance(g.get("sessionId"), str) or not isinstance(g.get("endpoint"), str) \
            or not isinstance(g.get("sig"), str) or not isinstance(serving, dict) \
            or not isinstance(serving.get("epoch"), int):
        raise ValueError("sessionGrant is not a session grant")
    return g["endpoint"], g["sessionId"], serving["epoch"], g["sig"]


async def _read_row(nc, space: str, session_id: str) -> dict:
    from nats.js.errors import NotFoundError

    b = sessions_bucket(space)
    try:
        msg = await nc.jetstream().get_last_msg(f"KV_{b}", f"$KV.{b}.session.{session_id}")
    except NotFoundError:
        _deny(f"no session row for {session_id}")
    if msg.headers and msg.headers.get("KV-Operation"):
        _deny(f"the session row for {session_id} is deleted")
    try:
        row = json.loads(msg.data)
    except (ValueError, UnicodeDecodeError):
        _deny(f"the session row for {session_id} is unreadable")
    if not isinstance(row, dict):
        _deny(f"the session row for {session_id} is unreadable")
    return row


async def verify_session_redemption(nc, space: str, *, owner: str, actor: str, lifecycle_uid: str | None,
                                    endpoint: str, session_id: str, epoch: int, grant_sig: str | None,
                                    local_manager: str | None, now_ms: int | None = None) -> Session:
    row = await _read_row(nc, space, session_id)
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    if row.get("state") != "active":
        _deny(f'session {session_id} is "{row.get("state")}", not active')
    if grant_sig is not None and row.get("grantSig") != grant_sig:
        _deny("the presented grant is not the one this session was redeemed with")
    h = row.get("holder")
    holder: dict[str, Any] = h if isinstance(h, dict) else {}
    principal = f"{owner}.{actor}"
    if holder.get("principal") != principal:
        _deny(f"session {session_id} was issued to {holder.get('principal')}, not {principal}")
    if lifecycle_uid is None or holder.get("lifecycleUid") != lifecycle_uid:
        _deny("the bearer's lifecycle is not the session holder's")
    if row.get("endpoint") != endpoint:
        _deny(f"session {session_id} is on endpoint {row.get('endpoint')}, not {endpoint}")
    sv = row.get("serving")
    serving: dict[str, Any] = sv if isinstance(sv, dict) else {}
    if serving.get("epoch") != epoch:
        _deny(f"session {session_id} is pinned to serving epoch {serving.get('epoch')}, not {epoch}")
    exp = row.get("exp")
    if not isinstance(exp, int) or exp <= now:
        _deny(f"session {session_id} expired")
    iid = serving.get("instanceId")
    verdict, process_epoch = await manager_gate(nc, space, owner, str(iid), local=local_manager)
    if verdict != "candidate":
        _deny(f"the serving manager {iid} is {verdict}")
    if process_epoch != epoch:
        _deny(f"the serving manager's epoch is {process_epoch}, not the session's {epoch}")
    return Session(endpoint, session_id, epoch, exp // 1000)
