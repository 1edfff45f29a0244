"""Who else is on a managed seat: the sessions its manager records in the session ledger.

The manager writes one row per attach session into the ledger KV ``cotal_sessions_<space>``
(attach.md §3.10, §5: ``session.<sessionId>``, states ``issuing -> active -> closed | expired |
superseded | retired``); a live row names its ``holder`` (the caller's principal) and its
``target`` (the seat's ``name`` and ``lifecycleUid``). :func:`viewers_of` folds those rows into
the viewers of one seat, :func:`read_viewers` reads them over a connection, and
:func:`viewers_label` says ``2 viewers: you, alice (read-only)``.

A row that says how its session was opened (``mode: "peek"`` or ``readOnly: true``) marks a
read-only viewer; a manager that records neither makes every viewer plain. No Textual or Rich
import (the attach layer); reads only.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from attach.control.registry import kv_keys
from meshview.errors import swallowed

LIVE_STATES = frozenset({"issuing", "active"})
MAX_ROWS = 4096  # ledger rows looked at per read (maxSessions is 64; a flood stops here)


def sessions_bucket(space: str) -> str:
    """The session ledger's KV bucket (the manager's dedicated one, never the auth bucket)."""
    return f"cotal_sessions_{space}"


@dataclass(frozen=True, slots=True)
class Viewer:
    """One live session on the seat: whose, and whether it only watches."""

    session_id: str
    principal: str
    name: str  # what to call it: the roster's name, else the principal's actor
    you: bool = False
    read_only: bool = False


def _short(principal: str, names: Mapping[str, str]) -> str:
    if principal in names:
        return names[principal]
    actor = principal.rsplit(".", 1)[-1]
    if len(actor) >= 24 and all(c in "0123456789abcdef" for c in actor):
        return f"a console …{actor[-4:]}"  # a fresh caller: nobody's name
    return actor


def viewers_of(rows: Iterable[tuple[str, Any]], seat: str, *, mine: Iterable[str] = (),
               names: Mapping[str, str] | None = None, now_ms: float | None = None,
               lifecycle_uid: str | None = None) -> list[Viewer]:
    """The live sessions on ``seat`` among ledger ``rows`` (key, decoded value): ``mine`` the
    principals this console attaches as (shown as ``you``), ``names`` id -> roster name; an
    expired or terminal row, a row for another seat (or another incarnation, when
    ``lifecycle_uid`` is given) and a malformed row are not viewers. You first, then by name."""
    names = names or {}
    me = set(mine)
    now = time.time() * 1000 if now_ms is None else now_ms
    out: list[Viewer] = []
    for key, row in rows:
        if not isinstance(row, dict) or row.get("state") not in LIVE_STATES:
            continue
        target, holder = row.get("target"), row.get("holder")
        if not isinstance(target, dict) or target.get("name") != seat or not isinstance(holder, dict):
            continue
        if lifecycle_uid is not None and target.get("lifecycleUid") not in (None, lifecycle_uid):
            continue
        exp = row.get("exp")
        if isinstance(exp, (int, float)) and not isinstance(exp, bool) and exp <= now:
            continue
        principal = holder.get("principal") or holder.get("id")
        if not isinstance(principal, str) or not principal:
            continue
        ro = row.get("mode") in ("peek", "read-only") or row.get("readOnly") is True
        sid = key.removeprefix("session.")
        out.append(Viewer(sid, principal, "you" if principal in me else _short(principal, names),
                          you=principal in me, read_only=ro))
    out.sort(key=lambda v: (not v.you, v.name.lower(), v.session_id))
    return out


def viewers_label(viewers: list[Viewer]) -> str:
    """``2 viewers: you, alice (read-only)``; empty for nobody. Names are the caller's to
    neutralise (a roster name is wire text)."""
    if not viewers:
        return ""
    seen: list[str] = []
    for v in viewers:
        who = v.name + (" (read-only)" if v.read_only else "")
        seen.append(who)
    n = len(viewers)
    return f"{n} viewer{'s' if n != 1 else ''}: {', '.join(seen)}"


async def read_viewers(nc: Any, space: str, seat: str, **kw: Any) -> list[Viewer]:
    """The seat's viewers from the ledger over ``nc`` (a JetStream KV read; no ledger, or a
    credential that cannot read it: nobody is known, an empty list). ``kw`` as
    :func:`viewers_of`."""
    try:
        js = nc.jetstream()
        kv = await js.key_value(sessions_bucket(space))
        keys = await kv_keys(js, sessions_bucket(space), "session.")  # never a racy kv.keys()
    except Exception:  # noqa: BLE001 - no bucket (no manager ever attached) or no read: nobody [counted: COTAL_LOG]
        swallowed("attach.control.viewers:read_viewers")
        return []
    rows: list[tuple[str, Any]] = []
    for key in keys[:MAX_ROWS]:
        if not key.startswith("session."):
            continue
        try:
            entry = await kv.get(key)
            rows.append((key, json.loads(entry.value or b"null")))
        except Exception:  # noqa: BLE001 - deleted between keys() and get(), or not JSON [counted: COTAL_LOG]
            swallowed("attach.control.viewers:read_viewers#2")
            continue
    return viewers_of(rows, seat, **kw)
