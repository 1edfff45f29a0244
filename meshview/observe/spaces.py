"""The admin overview: which spaces a broker holds (wire.md §8, reference ``listSpaces``).

A space is the union of ``CHAT_<space>`` streams and ``cotal_presence_<space>`` buckets. For
each: retained messages and distinct channels of its CHAT stream, and the presence bucket's
key count (≈ peers present within the TTL). A failed read leaves zeros, never an error row.
No Textual or Rich here: the console's space picker calls :func:`list_spaces`.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

from meshview.errors import swallowed
from meshview.wire import is_event_channel, parse_subject
from meshview.wire.names import bucket_names, chat_stream, space_token

_CHAT = re.compile(r"^CHAT_(.+)$")
_PRESENCE = re.compile(r"^KV_cotal_presence_(.+)$")
READ_TIMEOUT = 2.0
CONCURRENCY = 8


@dataclass(frozen=True, slots=True)
class SpaceInfo:
    space: str
    agents: int = 0
    channels: int = 0
    messages: int = 0
    #: seats a manager reports running with no presence (``attach.control.managed.stranded``,
    #: filled in by the console's lister after the listing); None: not asked or not readable
    stranded: int | None = None


async def _stream_names(jsm: Any) -> list[str]:
    names: list[str] = []
    offset = 0
    while True:
        page = await asyncio.wait_for(jsm.streams_info(offset), READ_TIMEOUT)
        names.extend(si.config.name for si in page if si.config and si.config.name)
        if len(page) < 256 or not page:
            break
        offset += len(page)
    return names


async def list_spaces(nc: Any) -> list[SpaceInfo]:
    """Every space on the broker, sorted by name. Raises only when streams cannot be listed."""
    jsm = nc.jsm()
    names = await _stream_names(jsm)
    chat = {m.group(1): n for n in names if (m := _CHAT.match(n))}
    presence = {m.group(1): n for n in names if (m := _PRESENCE.match(n))}
    sem = asyncio.Semaphore(CONCURRENCY)

    async def chat_info(space: str, stream: str) -> tuple[int, int]:
        async with sem:
            try:
                si = await asyncio.wait_for(jsm.stream_info(stream, subjects_filter=">"),
                                            READ_TIMEOUT)
            except Exception:  # noqa: BLE001 - a stream that cannot be read is listed as empty [counted: COTAL_LOG]
                swallowed("meshview.observe.spaces:list_spaces.chat_info")
                return 0, 0
        channels = set()
        frames = 0  # agents' activity frames: not conversation, not counted (upstream's chatOnly)
        for subj, n in (si.state.subjects or {}).items():
            ps = parse_subject(subj)
            if ps.kind == "chat" and ps.channel:
                if is_event_channel(ps.channel):
                    frames += int(n or 0)
                else:
                    channels.add(ps.channel)
        return max(0, int(si.state.messages or 0) - frames), len(channels)

    async def agents(stream: str) -> int:
        async with sem:
            try:
                si = await asyncio.wait_for(jsm.stream_info(stream), READ_TIMEOUT)
            except Exception:  # noqa: BLE001 - a stream that cannot be read is listed as empty [counted: COTAL_LOG]
                swallowed("meshview.observe.spaces:list_spaces.agents")
                return 0
        return int(si.state.messages or 0)

    spaces = sorted(set(chat) | set(presence))
    chat_res = await asyncio.gather(*(chat_info(s, chat[s]) if s in chat else _zero2()
                                      for s in spaces))
    agent_res = await asyncio.gather(*(agents(presence[s]) if s in presence else _zero()
                                       for s in spaces))
    return [SpaceInfo(s, a, c[1], c[0]) for s, c, a in zip(spaces, chat_res, agent_res)]


async def _zero() -> int:
    return 0


async def _zero2() -> tuple[int, int]:
    return 0, 0


async def _exists(jsm: Any, stream: str) -> bool | None:
    """True/False when the broker answers for ``stream``; None when it cannot tell (a denied
    or timed-out request: under auth a credential may not ask)."""
    from nats.errors import NoRespondersError
    from nats.js.errors import NotFoundError, ServiceUnavailableError

    try:
        await asyncio.wait_for(jsm.stream_info(stream), READ_TIMEOUT)
        return True
    except NotFoundError:
        return False
    except (NoRespondersError, ServiceUnavailableError):
        return False  # no JetStream at all: no space can be there
    except Exception:  # noqa: BLE001 - anything else is "cannot tell", never a false alarm [counted: COTAL_LOG]
        swallowed("meshview.observe.spaces:_exists")
        return None


async def missing_space(nc: Any, space: str, where: str) -> str | None:
    """One sentence when the broker says ``space`` is not provisioned (neither its CHAT stream
    nor its presence bucket exists), naming the spaces it does hold; None when the space is
    there or when the broker will not say (the caller then goes on as before)."""
    jsm = nc.jsm()
    token = space_token(space)
    if await _exists(jsm, chat_stream(token)) is not False:
        return None
    if await _exists(jsm, "KV_" + bucket_names(token).presence) is not False:
        return None
    try:
        names = await _stream_names(jsm)
    except Exception:  # noqa: BLE001 - the list is a courtesy [counted: COTAL_LOG]
        swallowed("meshview.observe.spaces:missing_space")
        names = []
    known = sorted({m.group(1) for n in names if (m := _CHAT.match(n) or _PRESENCE.match(n))})
    there = (f"spaces there: {', '.join(known[:12])}{', …' if len(known) > 12 else ''}"
             if known else "no spaces there")
    return f"space {token!r} is not provisioned on {where} ({there}); pick one with --space."


async def ensure_space(nc: Any, target: Any) -> None:
    """Every verb's check, on a connection it already holds, before it sends or reads anything:
    raises :class:`meshview.link.connect.ConnectError` with :func:`missing_space`'s sentence when
    the broker says ``target.space`` is not provisioned there."""
    from meshview.link.connect import ConnectError

    missing = await missing_space(nc, target.space, target.display)
    if missing:
        raise ConnectError(missing)


async def require_space(target: Any) -> None:
    """:func:`ensure_space` for a verb that has no connection of its own yet (send, ps, the
    control verbs, attach): one short connection as the space's reader (a static mesh's admin
    read view, whatever role the verb itself needs, which may not ask the broker about
    streams). Raises :class:`meshview.link.connect.ConnectError`: one sentence, nothing sent."""
    import dataclasses

    from meshview.link.connect import connect

    reader = dataclasses.replace(target, role="observer", credential=None,
                                 name="cotal-space-check")
    nc, reader = await connect(reader)
    try:
        await ensure_space(nc, reader)
    finally:
        try:
            await asyncio.wait_for(nc.close(), 2.0)
        except Exception:  # noqa: BLE001 - the check is done; a slow close changes nothing [counted: COTAL_LOG]
            swallowed("meshview.observe.spaces:require_space")
