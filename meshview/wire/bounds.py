"""Byte bounds on what a reader keeps from the wire, and the one cut that applies them.

Any peer may send megabyte names, roles, ids and frames: the reader keeps at most these many
UTF-8 bytes of each and says which fields it cut, so a caller can count them. A cut string ends
at a code-point boundary with ``…`` (within the bound). Limits are generous for honest peers
(the SPEC caps a name at 128 characters: 512 bytes keeps any such name whole).
"""

from __future__ import annotations

import builtins
from typing import Any, TypeVar, overload

_T = TypeVar("_T")

ELLIPSIS = "…"  # 3 bytes in UTF-8

NAME_BYTES = 512
ROLE_BYTES = 256
ID_BYTES = 512  # message ids, replyTo, contextId, mentions, lifecycle uids
KIND_BYTES = 256  # part kinds, AG-UI event types and names
TOKEN_BYTES = 64  # an agent's kind, attention, a channel mode, a condition's code and source
CHANNEL_BYTES = 256  # a channel named in a record's channelModes
ACTIVITY_BYTES = 2048
CONDITION_BYTES = 4096
DESCRIPTION_BYTES = 800
TAG_BYTES = 128  # a tag, a meta key
META_BYTES = 256  # a meta value
ARTIFACT_BYTES = 1024  # an artifact's claimed name / media type
ENVIRONMENT_BYTES = 1024

PARTS_MAX = 64  # parts kept per message
MENTIONS_MAX = 32
TAGS_MAX = 32
META_MAX = 32
CHANNEL_MODES_MAX = 32
#: AG-UI events kept per frame, and the bytes of event strings kept per frame (a frame past
#: either is cut at an event boundary: its fold says how many were not shown)
AGUI_EVENTS_MAX = 2000
AGUI_FRAME_BYTES = 64 * 1024  # as much as a feed row keeps of a text (feedring.KEPT_TEXT)

#: Live peers (presence keys heard live) the roster holds. In open mode any client may write
#: any number of presence keys: past this a NEW key is refused and counted (rejection
#: ``presence:live-cap``), never a peer already shown pushed out; room comes back as rows go
#: offline. Twice the 10k-agent benchmark (bench/scale.py). With the offline rows' cap
#: (meshview/model/roster.py OFFLINE_CAP) the roster never holds more than both together.
#: 100k keys of ordinary cards held 179 MB uncapped, 35 MB at this cap.
LIVE_PEERS_MAX = 20_000
#: ... and the bytes of their strings (estimated per row, meshview/model/roster.py
#: ``row_bytes``): a card at every byte bound above is ~34 KB a row, so 20k of them would hold
#: ~680 MB. Past this a row is kept slim (description, tags, meta and channel modes dropped,
#: activity and condition cut to SLIM_BYTES; counted as the cut ``presence:budget``): a slim
#: row is at most ~3 KB, so all live rows stay under this plus ~60 MB. Honest rows are
#: ~1–2 KB: 20k of them fit whole.
LIVE_PEERS_BYTES = 64 * 1024 * 1024
SLIM_BYTES = 256


def clip(s: str, limit: int) -> str:
    """``s`` cut to at most ``limit`` UTF-8 bytes at a code-point boundary, marked ``…``;
    ``s`` itself (the same object) when it fits, so ``clip(s, n) is not s`` says it was cut."""
    if len(s) <= limit >> 2:  # 4 bytes a code point at most: fits, no encoding needed
        return s
    b = s.encode("utf-8", "surrogatepass")
    if len(b) <= limit:
        return s
    keep = max(0, limit - len(ELLIPSIS.encode()))
    return b[:keep].decode("utf-8", "ignore") + ELLIPSIS


def clip_opt(v: Any, limit: int) -> Any:
    """:func:`clip` for an optional field: None and non-strings pass through untouched."""
    return clip(v, limit) if type(v) is str else v


class Cuts:
    """The fields one decode cut, by name (in the order cut; a field may repeat)."""

    __slots__ = ("names",)

    def __init__(self) -> None:
        self.names: list[str] = []

    def str(self, field: str, v: Any, limit: int) -> Any:
        """``v`` bounded, noting ``field`` when it was cut."""
        if type(v) is not str:
            return v
        out = clip(v, limit)
        if out is not v:
            self.names.append(field)
        return out

    # builtins.: inside this class body ``str`` names the method above
    @overload
    def list(self, field: builtins.str, v: builtins.list[_T], limit: int) -> builtins.list[_T]: ...
    @overload
    def list(self, field: builtins.str, v: None, limit: int) -> None: ...
    def list(
        self, field: builtins.str, v: builtins.list[_T] | None, limit: int
    ) -> builtins.list[_T] | None:
        """The first ``limit`` items of ``v``, noting ``field`` when items were dropped."""
        if v is None or len(v) <= limit:
            return v
        self.names.append(field)
        return v[:limit]
