"""What one manager ``ps``/``inspect`` row carries beyond its required keys, read the way the
reference CLI reads it: the seat facts ``cotal ps --wide`` prints (model and variant, provider,
cwd, pid, spawner, host, lifecycle uid, resume/fork origin), the harness condition with its age,
the last work event, and how long a seat has been off the mesh.

A row is a peer's bytes. A key this client does not know is tolerated (a newer manager adds
facts); a known key whose JSON type is not the one the contract's AgentRow gives it (rev 21:
``pid`` an integer >= 1, ``condition`` an object, ...) makes the whole row one named rejection,
:class:`RowRejected`, never a half-read row. Every string kept is bounded here, so a huge field
costs nothing past this point; neutralising for a terminal is the renderer's job
(:mod:`attach.control.seat_text`). Pure functions, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: The rev-21 AgentRow's JSON types (tests/vectors/manager-contract.json AGENT_ROW_SCHEMA),
#: one word per key: what a lying or newer manager is checked against.
ROW_TYPES: dict[str, str] = {
    "name": "string", "id": "string", "role": "string", "agent": "string", "space": "string",
    "mode": "string", "status": "string", "uptimeMs": "integer", "mesh": "string",
    "condition": "object", "activeAt": "number", "meshView": "string", "offlineSince": "integer",
    "lifecycleUid": "string", "authHealth": "string", "authReason": "string", "model": "string",
    "variant": "string", "provider": "string", "cwd": "string", "pid": "integer",
    "spawner": "string", "instanceId": "string", "host": "string", "resume": "object",
}
CONDITION_TYPES = {"code": "string", "source": "string", "message": "string", "since": "number"}
RESUME_TYPES = {"source": "string", "title": "string", "transcriptSha256": "string", "host": "string",
                "transferredAt": "string"}
MESH_VIEWS = ("current", "stale", "unpopulated")

FACT_CHARS = 512  # any one string fact kept from a row (a cwd is the longest honest one)
CODE_CHARS = 64  # a condition code
MESSAGE_CHARS = 400  # a condition message, an auth reason


class RowRejected(ValueError):
    """A row whose known field has another JSON type than the contract's: named, never half-read."""

    code = "row-field-type"

    def __init__(self, field: str, want: str, got: str) -> None:
        self.field, self.want, self.got = field, want, got
        super().__init__(f"field {field!r} is {got}, the row schema says {want}")


def json_type(v: object) -> str:
    """The JSON type word of a decoded value (``integer`` for a whole number, as JSON Schema)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if math.isfinite(v) and v.is_integer() else "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _fits(v: object, want: str) -> bool:
    got = json_type(v)
    return got == want or (want == "number" and got == "integer")


def _check(obj: dict, types: dict[str, str], prefix: str = "") -> None:
    for k, want in types.items():
        if k in obj and not _fits(obj[k], want):
            raise RowRejected(prefix + k, want, json_type(obj[k]))


def check_row(row: dict) -> None:
    """Raise :class:`RowRejected` for the first known key of ``row`` (or of its ``condition`` /
    ``resume`` object) whose type is not the contract's, or a ``pid`` below 1, a negative count,
    a ``meshView`` outside its enum. Unknown keys pass: they are a newer manager's facts."""
    _check(row, ROW_TYPES)
    if isinstance(row.get("condition"), dict):
        _check(row["condition"], CONDITION_TYPES, "condition.")
    if isinstance(row.get("resume"), dict):
        _check(row["resume"], RESUME_TYPES, "resume.")
    if "pid" in row and row["pid"] < 1:
        raise RowRejected("pid", "integer >= 1", f"integer {int(row['pid'])}")
    for k in ("uptimeMs", "offlineSince"):
        if k in row and row[k] < 0:
            raise RowRejected(k, "integer >= 0", "a negative integer")
    if "meshView" in row and row["meshView"] not in MESH_VIEWS:
        raise RowRejected("meshView", "one of " + "|".join(MESH_VIEWS), "another string")


def _s(d: dict, k: str, limit: int = FACT_CHARS) -> str | None:
    v = d.get(k)
    return v[:limit] if isinstance(v, str) and v else None


def _stamp(d: dict, k: str) -> float | None:
    v = d.get(k)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None  # presence-ages.ts: anything but a finite number is no stamp
    return float(v)


@dataclass(frozen=True)
class Resume:
    """``resume``: the harness session this seat forked from (rev 20), and where its transcript
    was carried from (rev 21)."""

    source: str
    title: str | None = None
    sha256: str | None = None
    host: str | None = None
    transferred_at: str | None = None


@dataclass(frozen=True)
class RowFacts:
    """The optional facts of one checked row; ``None`` is "not recorded", never zero or empty."""

    model: str | None = None
    variant: str | None = None
    provider: str | None = None
    cwd: str | None = None
    pid: int | None = None
    spawner: str | None = None
    host: str | None = None
    instance_id: str | None = None
    lifecycle_uid: str | None = None
    role: str | None = None
    condition_code: str | None = None
    condition_message: str | None = None
    condition_since: float | None = None  # epoch ms
    active_at: float | None = None  # epoch ms of the last work event
    offline_since: int | None = None  # epoch ms of the last heartbeat, while mesh=offline
    mesh_view: str = "current"
    auth_health: str | None = None
    auth_reason: str | None = None
    resume: Resume | None = None


def row_facts(row: dict) -> RowFacts:
    """The facts of ``row`` (call :func:`check_row` first to refuse a changed type by name; this
    one only keeps what has the right type, so an unchecked row reads as "not recorded")."""
    c, res = row.get("condition"), row.get("resume")
    cond: dict = c if isinstance(c, dict) else {}
    if not isinstance(res, dict):
        res = None
    pid: Any = row.get("pid")
    off: Any = row.get("offlineSince")
    resume = None
    if res is not None and _s(res, "source"):
        resume = Resume(source=_s(res, "source") or "", title=_s(res, "title"),
                        sha256=_s(res, "transcriptSha256", 128), host=_s(res, "host"),
                        transferred_at=_s(res, "transferredAt", 64))
    view = row.get("meshView")
    return RowFacts(
        model=_s(row, "model"), variant=_s(row, "variant"), provider=_s(row, "provider"),
        cwd=_s(row, "cwd"),
        pid=int(pid) if json_type(pid) == "integer" and 1 <= pid < 2**63 else None,
        spawner=_s(row, "spawner"), host=_s(row, "host"), instance_id=_s(row, "instanceId", 64),
        lifecycle_uid=_s(row, "lifecycleUid", 64), role=_s(row, "role", 128),
        condition_code=_s(cond, "code", CODE_CHARS), condition_message=_s(cond, "message", MESSAGE_CHARS),
        condition_since=_stamp(cond, "since"), active_at=_stamp(row, "activeAt"),
        offline_since=int(off) if json_type(off) == "integer" and 0 <= off < 2**63 else None,
        mesh_view=view if view in MESH_VIEWS else "current",
        auth_health=_s(row, "authHealth", CODE_CHARS), auth_reason=_s(row, "authReason", MESSAGE_CHARS),
        resume=resume,
    )
