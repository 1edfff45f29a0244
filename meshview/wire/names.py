"""Stream and bucket names of a space (wire.md §6) and the token sanitizer they rely on."""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def space_token(raw: str) -> str:
    """SPEC §3 ``token()``: trim, replace every char outside ``[A-Za-z0-9_-]`` by ``_``."""
    t = _UNSAFE.sub("_", raw.strip())
    return t or "_"


def chat_stream(space: str) -> str:
    return f"CHAT_{space_token(space)}"


def dm_stream(space: str) -> str:
    return f"DM_{space_token(space)}"


def task_stream(space: str) -> str:
    return f"TASK_{space_token(space)}"


def epc_stream(space: str) -> str:
    return f"EPC_{space_token(space)}"


@dataclass(frozen=True)
class Buckets:
    presence: str
    channels: str
    membership: str
    members: str
    manager: str
    delivery: str
    records: str


def bucket_names(space: str) -> Buckets:
    s = space_token(space)
    return Buckets(
        presence=f"cotal_presence_{s}",
        channels=f"cotal_channels_{s}",
        membership=f"cotal_membership_{s}",
        members=f"cotal_members_{s}",
        manager=f"cotal_manager_{s}",
        delivery=f"cotal_delivery_{s}",
        records=f"cotal_records_{s}",
    )
