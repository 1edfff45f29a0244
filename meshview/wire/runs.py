"""Workflow runs on the wire (SPEC v0.5 §14, manager contract revision 21; runs.md).

What a client reads back from a manager's ``run-ps`` and ``run-status`` (closed shapes, refused
by name when they are not), the states a run can be in and the display states a client adds on
top, the derived ids of §14.5 (``answerId`` and its siblings), and the record, stream and bucket
names a run host writes. Step keys (``/checkpoint:approve#0``) are carried verbatim: the key a
journal shows is exactly the ``stepKey`` an answer takes, so nothing here ever rebuilds one.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass, field

from meshview.errors import MeshviewError
from meshview.wire.canonical import canonical_bytes
from meshview.wire.names import space_token
from meshview.wire.subjects import ROOT

# §14.3: the recorded states. ``failed`` holds a result; ``released`` means the driver stopped
# holding the run and there is no result: two different facts, never rendered alike.
RUNNING, RELEASED, COMPLETED, FAILED = "running", "released", "completed", "failed"
RUN_STATES = (RUNNING, RELEASED, COMPLETED, FAILED)
# Display-only states (the reference CLI's ``ps``): a revocation marker exists; the marker could
# not be read; a spec exists but no status was ever written.
REVOKED, UNCHECKED, NO_STATUS = "revoked", "unchecked", "(no status)"
DISPLAY_STATES = (REVOKED, UNCHECKED, NO_STATUS)
STEP_STATES = ("pending", "settled")
PAUSE_KINDS = ("checkpoint", "ask")

RUN_ID_RE = re.compile(r"^run-[0-9a-f]{32}$")
RUN_ID_PREFIX_RE = re.compile(r"^run-[0-9a-f]{0,32}$")  # a run id as an operator may shorten it
# one segment of a step key: ``/<kind>:<name>`` with an optional ``#<occurrence>``
_KEY_SEGMENT = re.compile(r"/([A-Za-z][A-Za-z0-9_-]*):([^/]*)")
_DERIVED_ID = re.compile(r"^[A-Za-z0-9_-]{43}$")


class RunShapeError(MeshviewError, ValueError):
    """A run reply (or record) that is not the closed shape of contract revision 21."""


# ---- ids, records, streams ------------------------------------------------------------------

def mint_run_id() -> str:
    """``run-`` + 32 lowercase hex (128 bits); minted by the driver, never by a caller."""
    return "run-" + secrets.token_hex(16)


def is_run_id(v: object) -> bool:
    return isinstance(v, str) and bool(RUN_ID_RE.fullmatch(v))


def is_run_id_prefix(v: object) -> bool:
    """A run id or the start of one that keeps its ``run-`` (``run-d34b``)."""
    return isinstance(v, str) and bool(RUN_ID_PREFIX_RE.fullmatch(v))


def derived_id(obj: object) -> str:
    """§14.5: unpadded base64url of SHA-256 over the RFC 8785 JSON of ``obj`` (43 characters)."""
    return base64.urlsafe_b64encode(hashlib.sha256(canonical_bytes(obj)).digest()).rstrip(b"=").decode()


def is_derived_id(v: object) -> bool:
    return isinstance(v, str) and bool(_DERIVED_ID.fullmatch(v))


def answer_id(token: str, by: str, value: object = None, artifact: str | None = None) -> str:
    """Digest of ``{token, by, value: value ?? null, artifact: artifact ?? null}``."""
    return derived_id({"token": token, "by": by, "value": value, "artifact": artifact})


def addressee_id(agent: str) -> str:
    return derived_id({"agent": agent})


def notice_id(request_id: str, addressee: str) -> str:
    return derived_id({"requestId": request_id, "addressee": addressee})


def migration_id(spec: dict) -> str:
    """Digest of a migration spec without its ``at``."""
    return derived_id({k: v for k, v in spec.items() if k != "at"})


def run_spec_key(endpoint: str, run_id: str) -> str:
    return f"run.{endpoint}.{run_id}.spec"


def run_status_key(endpoint: str, run_id: str) -> str:
    return f"run.{endpoint}.{run_id}.status"


def run_program_key(endpoint: str, run_id: str) -> str:
    """Where the demo host records a run's program (the reference's exact key was not read)."""
    return f"run.{endpoint}.{run_id}.program"


RUN_SPEC_KEYS = "run.*.*.spec"


def parse_run_key(key: str) -> tuple[str, str, str] | None:
    """``run.<endpoint>.<runId>.<part>`` -> (endpoint, runId, part); None for any other key."""
    p = key.split(".")
    if len(p) != 4 or p[0] != "run" or not p[1] or not is_run_id(p[2]):
        return None
    return p[1], p[2], p[3]


def answer_key(endpoint: str, token: str, aid: str) -> str:
    return f"answer.{endpoint}.{token}.{aid}"


def journal_stream(space: str) -> str:
    return f"WFJ_{space_token(space)}"


def journal_subject(space: str, run_id: str) -> str:
    """One subject per run: ``cotal.<space>.wfj.<runId>``."""
    if not is_run_id(run_id):
        raise RunShapeError(f"{run_id!r} is not a run id (run- and 32 lowercase hex)")
    return f"{ROOT}.{space_token(space)}.wfj.{run_id}"


def journal_filter(space: str) -> str:
    return f"{ROOT}.{space_token(space)}.wfj.*"


def admission_bucket(space: str) -> str:
    return f"cotal_admission_{space_token(space)}"


def admission_key(endpoint: str, run_id: str) -> str:
    return f"admission.v1.{endpoint}.{run_id}"


def revocation_key(endpoint: str, run_id: str) -> str:
    return f"revoked.v1.{endpoint}.{run_id}"


# ---- step keys ------------------------------------------------------------------------------

def step_key_kind(key: str) -> str | None:
    """The kind of a step key's innermost segment (``/fanOut:lanes#0/b:1877/ask:opened#0`` ->
    ``ask``); None when the key has no ``/<kind>:`` segment. The key itself is never rewritten."""
    if not isinstance(key, str):
        return None
    segs = _KEY_SEGMENT.findall(key)
    return segs[-1][0] if segs else None


# ---- journal records (§14.4): closed JSON -----------------------------------------------------

_ACTIVATION_KEYS = {"v", "kind", "run", "n", "holder", "fencingToken", "epoch", "replayedTo", "at"}
_STEP_RECORD_KEYS = {"v", "kind", "run", "n", "at", "entry"}


def parse_journal_record(obj: object, *, run_id: str | None = None) -> dict:
    """One ``WFJ`` record: refuses unknown fields and unknown kinds (§14.4)."""
    if not isinstance(obj, dict):
        raise RunShapeError("a journal record is not a JSON object")
    kind = obj.get("kind")
    # a kind that is no string (a list would not even hash) is no known kind either
    allowed = {"activation": _ACTIVATION_KEYS, "step": _STEP_RECORD_KEYS}.get(kind) if isinstance(kind, str) else None
    if allowed is None:
        raise RunShapeError(f"journal record kind {kind!r} is not activation or step")
    extra = set(obj) - allowed
    if extra:
        raise RunShapeError(f"journal {kind} record carries unknown field {sorted(extra)[0]!r}")
    missing = allowed - set(obj)
    if missing:
        raise RunShapeError(f"journal {kind} record lacks {sorted(missing)[0]!r}")
    if obj["v"] != 1:
        raise RunShapeError(f"journal record version {obj['v']!r} is not 1")
    if not _is_int(obj["n"]) or obj["n"] < 0:
        raise RunShapeError("journal record n is not an ordinal")
    if run_id is not None and obj["run"] != run_id:
        raise RunShapeError(f"journal record names run {obj['run']!r}, not {run_id}")
    if kind == "step" and not isinstance(obj["entry"], dict):
        raise RunShapeError("journal step record's entry is not an object")
    return obj


# ---- what a client reads: run-ps rows ---------------------------------------------------------

@dataclass(frozen=True)
class ForkRef:
    run: str
    step: str


@dataclass(frozen=True)
class Revocation:
    by: str
    reason: str


@dataclass(frozen=True)
class RunRow:
    """One ``run-ps`` row. Absent optionals are None ("not recorded"), never zero.

    ``instance`` is which manager instance answered (set by the client, not on the wire)."""

    run_id: str
    endpoint: str
    state: str | None = None
    holder: str | None = None
    epoch: int | None = None
    journal_high: int | None = None
    started_at: float | None = None
    program_hash: str | None = None
    forked_from: ForkRef | None = None
    revoked: Revocation | None = None
    revocation_unreadable: str | None = None
    instance: str | None = None
    raw: dict = field(default_factory=dict, compare=False, repr=False)  # the row as the manager sent it

    @property
    def display_state(self) -> str:
        """The reference ``ps`` STATE column: ``revoked`` over the record (which a dead driver
        leaves ``running``), ``unchecked`` when the marker could not be read, ``(no status)``
        when no status was written."""
        if self.revoked is not None:
            return REVOKED
        if self.revocation_unreadable is not None:
            return UNCHECKED
        return self.state or NO_STATUS

    @property
    def key(self) -> tuple[str, str]:
        return (self.endpoint, self.run_id)

    @property
    def forked_label(self) -> str:
        return "-" if self.forked_from is None else f"{self.forked_from.run}@{self.forked_from.step}"

    def age_s(self, now_ms: float) -> float | None:
        return None if self.started_at is None else max(0.0, (now_ms - self.started_at) / 1000.0)


_PS_KEYS = {"runId", "endpoint", "state", "holder", "epoch", "journalHigh", "startedAt", "programHash",
            "forkedFrom", "revoked", "revocationUnreadable"}


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _closed(obj: object, allowed: set[str], required: set[str], what: str) -> dict:
    if not isinstance(obj, dict):
        raise RunShapeError(f"{what} is not a JSON object")
    extra = set(obj) - allowed
    if extra:
        raise RunShapeError(f"{what} carries unknown field {sorted(extra)[0]!r}")
    missing = required - set(obj)
    if missing:
        raise RunShapeError(f"{what} lacks {sorted(missing)[0]!r}")
    return obj


def _str(obj: dict, k: str, what: str) -> str | None:
    v = obj.get(k)
    if v is not None and not isinstance(v, str):
        raise RunShapeError(f"{what} field {k!r} is not a string")
    if k in obj and v is None:
        raise RunShapeError(f"{what} field {k!r} is null (an absent field is omitted)")
    return v


def _int(obj: dict, k: str, what: str, minimum: int) -> int | None:
    if k not in obj:
        return None
    v = obj[k]
    if not _is_int(v) or v < minimum:
        raise RunShapeError(f"{what} field {k!r} is not an integer >= {minimum}")
    return v


def _num(obj: dict, k: str, what: str) -> float | None:
    if k not in obj:
        return None
    v = obj[k]
    if not _is_num(v):
        raise RunShapeError(f"{what} field {k!r} is not a number")
    return v


def parse_run_row(obj: object) -> RunRow:
    what = "a run-ps row"
    o = _closed(obj, _PS_KEYS, {"runId", "endpoint"}, what)
    run_id, endpoint = _str(o, "runId", what), _str(o, "endpoint", what)
    state = _str(o, "state", what)
    if state is not None and state not in RUN_STATES:
        raise RunShapeError(f"run {run_id} state {state!r} is not one of {', '.join(RUN_STATES)}")
    fork = None
    if "forkedFrom" in o:
        f = _closed(o["forkedFrom"], {"run", "step"}, {"run", "step"}, f"run {run_id} forkedFrom")
        fork = ForkRef(_str(f, "run", "forkedFrom") or "", _str(f, "step", "forkedFrom") or "")
    rev = None
    if "revoked" in o:
        r = _closed(o["revoked"], {"by", "reason"}, {"by", "reason"}, f"run {run_id} revoked")
        rev = Revocation(_str(r, "by", "revoked") or "", _str(r, "reason", "revoked") or "")
    return RunRow(
        run_id=run_id or "", endpoint=endpoint or "", state=state, holder=_str(o, "holder", what),
        epoch=_int(o, "epoch", what, 0), journal_high=_int(o, "journalHigh", what, -1),
        started_at=_num(o, "startedAt", what), program_hash=_str(o, "programHash", what),
        forked_from=fork, revoked=rev, revocation_unreadable=_str(o, "revocationUnreadable", what), raw=o)


def parse_run_ps(data: object) -> list[RunRow]:
    """A ``run-ps`` reply: a list of closed rows (rev 21; rev 17 rows, a subset, also read)."""
    if not isinstance(data, list):
        raise RunShapeError("a run-ps reply is not a list of rows")
    return [parse_run_row(r) for r in data]


# ---- what a client reads: run-status ---------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    answer_id: str
    value: object = None
    has_value: bool = False
    by: str | None = None
    artifact: str | None = None
    at: float | None = None


@dataclass(frozen=True)
class Amendment:
    answer_id: str
    supersedes: str
    by: str
    at: float
    value: object = None
    has_value: bool = False
    artifact: str | None = None


@dataclass(frozen=True)
class Activation:
    n: int
    holder: str | None = None
    epoch: int | None = None
    replayed_to: int | None = None


@dataclass(frozen=True)
class Step:
    """One step as the journal shows it (the last record of its key wins)."""

    n: int
    key: str  # verbatim: the stepKey an answer takes
    effect: str | None = None
    name: str | None = None
    state: str | None = None  # pending | settled
    outcome: str | None = None
    status: str | None = None
    error_code: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    asks: str | None = None
    addressee: str | None = None
    deadline_at: float | None = None
    on_expiry: str | None = None
    answer: Answer | None = None
    amendments: tuple[Amendment, ...] = ()

    @property
    def kind(self) -> str | None:
        return self.effect or step_key_kind(self.key)


@dataclass(frozen=True)
class Pause:
    """An open pause waiting on a human (or an addressed agent): a pending step with a prompt."""

    run_id: str
    endpoint: str
    step_key: str
    kind: str  # checkpoint | ask
    prompt: str
    addressee: str | None = None
    deadline_at: float | None = None
    on_expiry: str | None = None
    # Revision 21's journal row carries no schema; a client that learns one elsewhere sets it.
    schema: dict | None = None


@dataclass(frozen=True)
class RunStatus:
    run_id: str
    endpoint: str
    spec: dict
    status: dict | None
    journal: tuple[Activation | Step, ...]  # every row, in journal order
    activations: tuple[Activation, ...] = ()
    steps: tuple[Step, ...] = ()  # folded by key, in first-seen order
    pauses: tuple[Pause, ...] = field(default=())
    raw: dict = field(default_factory=dict, compare=False, repr=False)  # the reply as the manager sent it

    @property
    def state(self) -> str | None:
        s = (self.status or {}).get("state")
        return s if isinstance(s, str) else None

    @property
    def holder(self) -> str | None:
        h = (self.status or {}).get("holder")
        return h if isinstance(h, str) else None

    @property
    def epoch(self) -> int | None:
        e = (self.status or {}).get("epoch")
        return e if _is_int(e) else None

    @property
    def forked_from(self) -> ForkRef | None:
        f = self.spec.get("forkedFrom")
        if isinstance(f, dict) and isinstance(f.get("run"), str) and isinstance(f.get("step"), str):
            return ForkRef(f["run"], f["step"])
        return None

    def step(self, key: str) -> Step | None:
        return next((s for s in self.steps if s.key == key), None)


_STATUS_KEYS = {"runId", "endpoint", "spec", "status", "journal"}
_ROW_KEYS = {"n", "kind", "holder", "epoch", "replayedTo", "step", "effect", "name", "state", "outcome",
             "status", "errorCode", "startedAt", "endedAt", "asks", "addressee", "deadlineAt", "onExpiry",
             "answer", "amendments"}
_ANSWER_KEYS = {"answerId", "value", "by", "artifact", "at"}
_AMEND_KEYS = {"answerId", "supersedes", "value", "by", "artifact", "at"}


def _parse_answer(obj: object, what: str) -> Answer:
    a = _closed(obj, _ANSWER_KEYS, {"answerId"}, what)
    return Answer(answer_id=_str(a, "answerId", what) or "", value=a.get("value"), has_value="value" in a,
                  by=_str(a, "by", what), artifact=_str(a, "artifact", what), at=_num(a, "at", what))


def _parse_amendment(obj: object, what: str) -> Amendment:
    a = _closed(obj, _AMEND_KEYS, {"answerId", "supersedes", "by", "at"}, what)
    return Amendment(answer_id=_str(a, "answerId", what) or "", supersedes=_str(a, "supersedes", what) or "",
                     by=_str(a, "by", what) or "", at=_num(a, "at", what) or 0, value=a.get("value"),
                     has_value="value" in a, artifact=_str(a, "artifact", what))


def _parse_journal_row(obj: object, i: int) -> Activation | Step:
    what = f"run-status journal row {i}"
    o = _closed(obj, _ROW_KEYS, {"n", "kind"}, what)
    n = _int(o, "n", what, 0)
    kind = o["kind"]
    if kind == "activation":
        return Activation(n=n or 0, holder=_str(o, "holder", what), epoch=_int(o, "epoch", what, 0),
                          replayed_to=_int(o, "replayedTo", what, 0))
    if kind != "step":
        raise RunShapeError(f"{what} kind {kind!r} is not activation or step")
    key = _str(o, "step", what)
    if key is None:
        raise RunShapeError(f"{what} is a step without its key")
    state = _str(o, "state", what)
    if state is not None and state not in STEP_STATES:
        raise RunShapeError(f"{what} state {state!r} is not pending or settled")
    amendments = o.get("amendments", [])
    if not isinstance(amendments, list):
        raise RunShapeError(f"{what} amendments is not a list")
    return Step(
        n=n or 0, key=key, effect=_str(o, "effect", what), name=_str(o, "name", what), state=state,
        outcome=_str(o, "outcome", what), status=_str(o, "status", what), error_code=_str(o, "errorCode", what),
        started_at=_num(o, "startedAt", what), ended_at=_num(o, "endedAt", what), asks=_str(o, "asks", what),
        addressee=_str(o, "addressee", what), deadline_at=_num(o, "deadlineAt", what),
        on_expiry=_str(o, "onExpiry", what),
        answer=_parse_answer(o["answer"], f"{what} answer") if "answer" in o else None,
        amendments=tuple(_parse_amendment(a, f"{what} amendment") for a in amendments))


def parse_run_status(data: object) -> RunStatus:
    """A ``run-status`` reply: the run's spec and status records and its journal rows, folded
    into activations, steps (by key, the last record wins) and the pauses still open."""
    what = "a run-status reply"
    o = _closed(data, _STATUS_KEYS, {"runId", "endpoint", "spec", "journal"}, what)
    run_id, endpoint = _str(o, "runId", what) or "", _str(o, "endpoint", what) or ""
    if not isinstance(o["spec"], dict):
        raise RunShapeError(f"run {run_id} spec is not an object")
    status = o.get("status")
    if "status" in o and not isinstance(status, dict):
        raise RunShapeError(f"run {run_id} status is not an object")
    if status is not None and "state" in status and status["state"] not in RUN_STATES:
        raise RunShapeError(f"run {run_id} state {status['state']!r} is not one of {', '.join(RUN_STATES)}")
    if not isinstance(o["journal"], list):
        raise RunShapeError(f"run {run_id} journal is not a list")
    rows = tuple(_parse_journal_row(r, i) for i, r in enumerate(o["journal"]))
    folded: dict[str, Step] = {}
    for r in rows:
        if isinstance(r, Step):
            folded[r.key] = r  # insertion order keeps the first-seen position
    steps = tuple(folded.values())
    pauses = tuple(
        Pause(run_id=run_id, endpoint=endpoint, step_key=s.key,
              kind=s.kind if s.kind in PAUSE_KINDS else "checkpoint", prompt=s.asks or "",
              addressee=s.addressee, deadline_at=s.deadline_at, on_expiry=s.on_expiry)
        for s in steps if s.state == "pending" and s.asks is not None)
    return RunStatus(run_id=run_id, endpoint=endpoint, spec=o["spec"], status=status, journal=rows,
                     activations=tuple(r for r in rows if isinstance(r, Activation)), steps=steps,
                     pauses=pauses, raw=o)
