"""Agents that left before this observer started: derived from what the space retains.

Presence is a 6 s TTL bucket, so an agent that crashed a minute before we connected left no
key behind: the live view alone never shows it, while a console that watched the crash shows
``⨯ finn offline``. What the space still holds says who was there: the senders of retained
CHAT (and, when readable, DM) subjects and, on an open mesh, the records' lifecycle heads that
still claim ``active``. Each such principal with no presence gets its last message (one
``DeliverPolicy.LAST`` read on an ephemeral consumer, always deleted) for its name, role and
when it was last heard. Best effort and bounded: a refused or slow read only leaves a name
out. Senders whose role is ``operator`` are consoles, not agents, and are left out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from meshview.errors import swallowed
from meshview.observe.history import History
from meshview.wire import is_principal_id, parse_subject, sender_pattern
from meshview.wire.names import (
    LIFECYCLE_HEADS,
    bucket_names,
    chat_stream,
    dm_stream,
    lifecycle_head_principal,
)

CAP = 200  # principals looked up at most (a long-lived space has had many senders)
PARALLEL = 8
READ_TIMEOUT = 2.0
OPERATOR_ROLE = "operator"


@dataclass(frozen=True, slots=True)
class Absent:
    """A principal the space remembers and presence does not: shown as an offline agent."""

    id: str
    name: str
    role: str | None
    last_ts: float | None  # its newest retained message (None: known from records only)


async def stream_senders(js: Any, stream: str) -> set[str]:
    """Principals that sent on ``stream`` (from its per-subject counts); empty when refused."""
    try:
        info = await asyncio.wait_for(js.stream_info(stream, subjects_filter=">"), READ_TIMEOUT)
    except Exception:  # noqa: BLE001 - a credential may not read it [counted: COTAL_LOG]
        swallowed("meshview.observe.absent:stream_senders")
        return set()
    out = set()
    for subj in (info.state.subjects or {}):
        ps = parse_subject(subj)
        if ps.deliver and ps.sender:
            out.add(ps.sender)
    return out


async def active_heads(js: Any, space: str) -> set[str]:
    """Principals whose lifecycle head still says ``active`` (records KV; open mesh only)."""
    import json

    bucket = bucket_names(space).records
    prefix = f"$KV.{bucket}."
    try:  # the keys from the bucket's stream subjects: one request, any server version
        info = await asyncio.wait_for(
            js.stream_info(f"KV_{bucket}", subjects_filter=prefix + LIFECYCLE_HEADS),
            READ_TIMEOUT)
        keys = sorted(s[len(prefix):] for s in (info.state.subjects or {}))
        kv = await asyncio.wait_for(js.key_value(bucket), READ_TIMEOUT)
    except Exception:  # noqa: BLE001 - no bucket, no grant, or no keys [counted: COTAL_LOG]
        swallowed("meshview.observe.absent:active_heads")
        return set()
    out = set()
    for key in keys[:CAP]:
        pid = lifecycle_head_principal(key)
        if pid is None or not is_principal_id(pid):
            continue
        try:
            entry = await asyncio.wait_for(kv.get(key), READ_TIMEOUT)
            head = json.loads(entry.value or b"{}")
        except Exception:  # noqa: BLE001 - an unreadable head is skipped [counted: COTAL_LOG]
            swallowed("meshview.observe.absent:active_heads#2")
            continue
        if isinstance(head, dict) and head.get("state") == "active":
            out.add(pid)
    return out


async def find_absent(js: Any, space: str, history: History, present: Iterable[str],
                      *, dms: bool) -> list[Absent]:
    """Principals the space remembers that are not in ``present`` (the roster's ids)."""
    chat_from, dm_from, heads = await asyncio.gather(
        stream_senders(js, chat_stream(space)),
        stream_senders(js, dm_stream(space)) if dms else _none(),
        active_heads(js, space))
    known = set(present)
    todo = sorted(p for p in (chat_from | dm_from | heads) - known if is_principal_id(p))[:CAP]
    sem = asyncio.Semaphore(PARALLEL)

    async def last(pid: str) -> Absent | None:
        async with sem:
            d = None
            for stream, kind, seen in ((chat_stream(space), "chat", chat_from),
                                       (dm_stream(space), "inst", dm_from)):
                if pid not in seen:
                    continue
                try:
                    got = await asyncio.wait_for(
                        history.last(stream, sender_pattern(space, kind, pid)), READ_TIMEOUT)
                except Exception:  # noqa: BLE001 - no last message read: none is shown [counted: COTAL_LOG]
                    swallowed("meshview.observe.absent:find_absent.last")
                    got = None
                if got is not None and (d is None or got.message.ts > d.message.ts):
                    d = got
        if d is None:
            if pid not in heads:
                return None  # nothing readable says who this is
            return Absent(pid, pid.partition(".")[2], None, None)
        frm = d.message.from_
        if frm.role == OPERATOR_ROLE:
            return None
        return Absent(pid, frm.name or pid.partition(".")[2], frm.role, float(d.message.ts))

    found = await asyncio.gather(*(last(p) for p in todo))
    return [a for a in found if a is not None]


async def _none() -> set[str]:
    return set()
