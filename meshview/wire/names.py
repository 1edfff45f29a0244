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


_DURABLE_TOKEN = re.compile(r"[A-Za-z0-9_]+")
_LIFECYCLE_UID = re.compile(r"[a-z0-9]{26,32}")


def dm_durable(owner: str, actor: str, lifecycle_uid: str) -> str | None:
    """An agent's DM durable on ``DM_<space>``, ``dm_<owner>-<actor>-<lifecycleUid>`` (wire.md
    §6); None unless each part fits its grammar (owner/actor tokens have no ``-``, the uid is
    ``[a-z0-9]{26,32}``), so a peer's hostile uid never names a consumer or a wildcard."""
    if not (_DURABLE_TOKEN.fullmatch(owner or "") and _DURABLE_TOKEN.fullmatch(actor or "")
            and _LIFECYCLE_UID.fullmatch(lifecycle_uid or "")):
        return None
    return f"dm_{owner}-{actor}-{lifecycle_uid}"


def parse_dm_durable(name: str) -> tuple[str, str] | None:
    """``(owner, actor)`` of a DM durable name, or None when it is not one (no guessing)."""
    if not isinstance(name, str) or not name.startswith("dm_"):
        return None
    parts = name[3:].split("-")
    if len(parts) != 3 or dm_durable(*parts) != name:
        return None
    return parts[0], parts[1]


def task_stream(space: str) -> str:
    return f"TASK_{space_token(space)}"


def epc_stream(space: str) -> str:
    return f"EPC_{space_token(space)}"


def inbox_stream(space: str) -> str:
    """The durable-inbox backstop (``dinbox``) a space keeps for absent recipients."""
    return f"INBOX_{space_token(space)}"


def dlv_stream(space: str) -> str:
    """The delivery-receipt rail's stream (``dlv``)."""
    return f"DLV_{space_token(space)}"


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


LIFECYCLE_HEADS = "lifecycle.*.*"
"""Records-KV keys of lifecycle heads (wire.md §7): ``lifecycle.<owner>.<actor>``, never deleted."""


def lifecycle_head_principal(key: str) -> str | None:
    """``lifecycle.<owner>.<actor>`` -> ``<owner>.<actor>``; None for any other records key."""
    parts = key.split(".")
    if len(parts) != 3 or parts[0] != "lifecycle" or not parts[1] or not parts[2]:
        return None
    return f"{parts[1]}.{parts[2]}"
