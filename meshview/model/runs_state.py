"""Workflow runs as the console saw them (SPEC §14): rows per manager, open pauses, staleness.

There is no push event for runs: a poller (attach/control/runs_poll.py) asks each manager ``run-ps``,
then ``run-status`` for its running runs, and hands the answers to the model through the
inputs below, as values of this module (so a recording holds them and a replay shows the run
state the console saw then, not the state now). The model holds a :class:`Runs` (the fold and
its view) and registers the inputs, as it holds the roster.

What waits on a human is a pending step with an ``asks`` prompt (:class:`Pause`); it is a
NEEDS-YOU row until the step settles, the run leaves ``running`` (or is revoked), or its
deadline passes on the model clock. ``released`` is its own state, never a failure.

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Literal

from meshview.errors import MeshviewError

if TYPE_CHECKING:
    from meshview.model.snapshot import ModelEvent

RUN_STATES = ("running", "released", "completed", "failed")
DISPLAY_STATES = (*RUN_STATES, "revoked", "unchecked", "(no status)")
STALE_MS = 45_000.0  # runs are stale when no manager answered a run-ps this long
RUNS_CAP = 2000  # runs kept per manager (a run-ps is unbounded on the wire)
JOURNAL_CAP = 500  # journal rows kept per run (the newest)
PROMPT_CAP = 400


@dataclass(frozen=True, slots=True)
class Pause:
    """An open checkpoint or ask: a pending step that waits for an answer."""

    step_key: str  # verbatim, exactly what run-answer takes
    kind: str  # checkpoint | ask (from the key's effect, or the row's ``effect``)
    prompt: str
    addressee: str | None = None
    deadline_at: float | None = None  # epoch ms
    on_expiry: str | None = None
    schema: Any = None  # a JSON schema the answer must meet (asks), if the manager gave one


@dataclass(frozen=True, slots=True)
class JournalRow:
    """One ``run-status`` journal row, folded (activation, or a step by its key)."""

    n: int
    kind: str  # activation | step
    step_key: str | None = None
    state: str | None = None  # pending | settled
    outcome: str | None = None
    effect: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    holder: str | None = None
    epoch: int | None = None
    replayed_to: int | None = None
    prompt: str | None = None
    addressee: str | None = None
    deadline_at: float | None = None
    on_expiry: str | None = None
    answer_id: str | None = None  # settled by an answer: it can be amended
    answer_by: str | None = None
    amendments: int = 0
    error_code: str | None = None


@dataclass(frozen=True, slots=True)
class RunView:
    """One run as a manager reported it (``run-ps``), with its last ``run-status``."""

    run_id: str
    endpoint: str
    instance_id: str  # the manager that reported it
    state: str  # one of DISPLAY_STATES
    holder: str | None = None
    epoch: int | None = None
    journal_high: int | None = None
    started_at: float | None = None
    forked_from: str | None = None  # ``run@step``; None: not a fork, or lineage unknown
    revoked_by: str | None = None
    journal: tuple[JournalRow, ...] | None = None  # None: no run-status read yet
    pauses: tuple[Pause, ...] = ()
    status_at: float | None = None  # model clock of the last run-status answer
    status_error: str | None = None  # the manager's sentence when run-status was refused

    @property
    def key(self) -> tuple[str, str]:
        return (self.instance_id, self.run_id)


@dataclass(frozen=True, slots=True)
class RunNeed:
    """A NEEDS-YOU row for a run: one open pause whose deadline has not passed."""

    run_id: str
    instance_id: str
    endpoint: str
    pause: Pause
    deadline_in_ms: float | None  # None: no deadline stated

    @property
    def key(self) -> tuple[str, str, str]:
        return ("run", self.run_id, self.pause.step_key)


@dataclass(frozen=True, slots=True)
class ManagerRuns:
    instance_id: str
    answered_at: float | None = None
    silent_since: float | None = None
    error: str | None = None  # why it did not answer (its sentence, or "did not answer")


@dataclass(frozen=True, slots=True)
class RunsSnapshot:
    """The runs view: every run (by manager, newest first), the NEEDS-YOU rows (by deadline),
    the managers' answer state, and whether the view is stale."""

    runs: tuple[RunView, ...] = ()
    needs: tuple[RunNeed, ...] = ()
    managers: tuple[ManagerRuns, ...] = ()
    now: float = 0.0
    polled: bool = False  # any answer (or silence) was ever folded
    unavailable: str | None = None  # why this console cannot list runs at all

    def run(self, run_id: str) -> RunView | None:
        return next((r for r in self.runs if r.run_id == run_id), None)

    @property
    def silent(self) -> tuple[ManagerRuns, ...]:
        return tuple(m for m in self.managers if m.silent_since is not None)

    @property
    def last_answer(self) -> float | None:
        return max((m.answered_at for m in self.managers if m.answered_at is not None), default=None)

    def stale_ms(self) -> float | None:
        """How old the newest answer is when that is past :data:`STALE_MS` (None: fresh)."""
        last = self.last_answer
        if last is None:
            return None
        age = self.now - last
        return age if age > STALE_MS else None


@dataclass(frozen=True, slots=True)
class RunEvent:
    """A line for ``cotal watch --plain/--json``: a run's state changed, a pause opened or
    settled (or left: expired, revoked, the run ended)."""

    kind: Literal["state", "pause-open", "pause-settled"]
    run_id: str
    instance_id: str
    ts: float
    state: str
    step_key: str | None = None
    prompt: str | None = None
    previous: str | None = None  # the state before (kind ``state``)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "run", "event": self.kind, "run": self.run_id,
                               "instance": self.instance_id, "ts": self.ts, "state": self.state}
        if self.previous is not None:
            out["previous"] = self.previous
        if self.step_key is not None:
            out["stepKey"] = self.step_key
        if self.prompt is not None:
            out["prompt"] = self.prompt
        return out

    def plain(self) -> str:
        """One line: ``run run-3f2a… running -> completed`` / ``run run-3f2a… waits
        /checkpoint:approve#0: "ship?"`` / ``run run-3f2a… settled /checkpoint:approve#0``."""
        rid = short_run(self.run_id)
        if self.kind == "state":
            was = f"{self.previous} -> " if self.previous else ""
            return f"run {rid} {was}{self.state}"
        if self.kind == "pause-open":
            return f"run {rid} waits {self.step_key}: {json.dumps(self.prompt or '')}"
        return f"run {rid} settled {self.step_key}"


def short_run(run_id: str) -> str:
    """``run-3f2a…``: the id's first four hex after ``run-`` (the whole id elsewhere)."""
    return run_id[:8] + "…" if run_id.startswith("run-") and len(run_id) > 8 else run_id


@dataclass
class RunsState:
    """The mutable fold the model keeps (checkpointed whole: meshview/record/statecodec.py)."""

    runs: dict[tuple[str, str], RunView] = field(default_factory=dict)
    managers: dict[str, ManagerRuns] = field(default_factory=dict)
    polled: bool = False
    unavailable: str | None = None

    def copy(self) -> RunsState:
        """The fold as it is now (a checkpoint's, or one put back): the rows are immutable."""
        return RunsState(dict(self.runs), dict(self.managers), self.polled, self.unavailable)


def _open(r: RunView) -> tuple[Pause, ...]:
    return r.pauses if r.state == "running" else ()


class Runs:
    """The runs component the model holds: the fold (:class:`RunsState`, what a checkpoint
    holds) and the view cached from it. The model registers the inputs and hands each its
    model-clock time; a reducer returns whether the fold changed (the model then counts a
    change) and says a run's moves through ``emit`` (the line stream's :class:`RunEvent`)."""

    def __init__(self, emit: Callable[[ModelEvent], None], st: RunsState | None = None) -> None:
        self._emit = emit
        self._st = st.copy() if st is not None else RunsState()
        self._snap: RunsSnapshot | None = None

    def state(self) -> RunsState:
        """The fold as it is now (the rows are immutable and shared)."""
        return self._st.copy()

    @classmethod
    def from_state(cls, st: RunsState, emit: Callable[[ModelEvent], None]) -> Runs:
        return cls(emit, st)

    def _run_changed(self, old: RunView | None, new: RunView | None, now: float) -> None:
        ref = new or old
        assert ref is not None
        if new is not None and (old is None or old.state != new.state):
            self._emit(RunEvent("state", new.run_id, new.instance_id, now, new.state,
                                previous=old.state if old is not None else None))
        before = {p.step_key: p for p in _open(old)} if old is not None else {}
        after = {p.step_key: p for p in _open(new)} if new is not None else {}
        state = new.state if new is not None else ref.state
        for k, p in after.items():
            if k not in before:
                self._emit(RunEvent("pause-open", ref.run_id, ref.instance_id, now, state,
                                    step_key=k, prompt=p.prompt))
        for k in before:
            if k not in after:
                self._emit(RunEvent("pause-settled", ref.run_id, ref.instance_id, now, state,
                                    step_key=k))

    def apply_run_rows(self, instance_id: str, rows: tuple[RunView, ...], now: float) -> bool:
        """A ``run-ps`` answer from ``instance_id``: its runs are these (a run it no longer
        lists leaves). A run keeps its last journal and pauses until the next ``run-status``,
        but a run no longer ``running`` has no open pause."""
        st = self._st
        st.polled = True
        st.unavailable = None
        seen: set[tuple[str, str]] = set()
        for row in tuple(rows)[:RUNS_CAP]:
            key = (instance_id, row.run_id)
            seen.add(key)
            old = st.runs.get(key)
            new = replace(row, instance_id=instance_id)
            if old is not None:
                new = replace(new, journal=old.journal, pauses=old.pauses, status_at=old.status_at,
                              status_error=old.status_error)
            if new != old:
                st.runs[key] = new
                self._run_changed(old, new, now)
        for key in [k for k in st.runs if k[0] == instance_id and k not in seen]:
            self._run_changed(st.runs.pop(key), None, now)
        st.managers[instance_id] = ManagerRuns(instance_id, answered_at=now)
        self._snap = None
        return True

    def apply_run_status(self, instance_id: str, run_id: str, journal: tuple[JournalRow, ...],
                         pauses: tuple[Pause, ...], now: float) -> bool:
        """A ``run-status`` answer: the run's journal and its open pauses now."""
        st = self._st
        key = (instance_id, run_id)
        old = st.runs.get(key)
        if old is None:
            return False  # the run left the list between the two calls
        new = replace(old, journal=tuple(journal)[-JOURNAL_CAP:], pauses=tuple(pauses),
                      status_at=now, status_error=None)
        if new == old:
            return False
        st.runs[key] = new
        self._run_changed(old, new, now)
        self._snap = None
        return True

    def set_run_status_error(self, instance_id: str, run_id: str, error: str) -> bool:
        """``run-status`` was refused or went unanswered: the run keeps what it showed."""
        st = self._st
        old = st.runs.get((instance_id, run_id))
        if old is None or old.status_error == error:
            return False
        st.runs[old.key] = replace(old, status_error=error)
        self._snap = None
        return True

    def set_runs_silent(self, instance_id: str, error: str, now: float) -> bool:
        """A manager did not answer ``run-ps`` (or refused it): its runs stay, as its last word.
        (``polled`` is set even when nothing else changes: no change is counted for it.)"""
        st = self._st
        st.polled = True
        prev = st.managers.get(instance_id) or ManagerRuns(instance_id)
        if prev.silent_since is not None and prev.error == error:
            return False
        st.managers[instance_id] = replace(
            prev, silent_since=prev.silent_since if prev.silent_since is not None else now,
            error=error)
        self._snap = None
        return True

    def forget_run_manager(self, instance_id: str, now: float) -> bool:
        """A manager no longer registered: it and its runs leave."""
        st = self._st
        gone = [k for k in st.runs if k[0] == instance_id]
        if not gone and instance_id not in st.managers:
            return False
        for k in gone:
            self._run_changed(st.runs.pop(k), None, now)
        st.managers.pop(instance_id, None)
        self._snap = None
        return True

    def set_runs_unavailable(self, reason: str | None) -> bool:
        """This console cannot list runs at all (open mesh, no control path): why, once."""
        st = self._st
        if st.unavailable == reason:
            return False
        st.unavailable = reason
        st.polled = True
        self._snap = None
        return True

    def view(self, now: float) -> RunsSnapshot:
        """The runs as an immutable :class:`RunsSnapshot` at ``now`` (the model clock):
        NEEDS-YOU rows whose deadline passed are gone from it."""
        snap = self._snap
        if snap is not None and (not snap.needs or now - snap.now < 1000.0):
            return snap
        st = self._st
        runs = sorted(st.runs.values(), key=lambda r: (-(r.started_at or 0.0), r.run_id))
        needs = []
        for r in runs:
            if r.state != "running":
                continue  # settled, released, failed, revoked: nothing waits any more
            for p in r.pauses:
                left = None if p.deadline_at is None else p.deadline_at - now
                if left is not None and left <= 0:
                    continue  # expired: it left the rail (the manager settles it by its onExpiry)
                needs.append(RunNeed(r.run_id, r.instance_id, r.endpoint, p, left))
        needs.sort(key=lambda n: (n.deadline_in_ms is None, n.deadline_in_ms or 0.0, n.run_id,
                                  n.pause.step_key))
        snap = RunsSnapshot(
            runs=tuple(runs), needs=tuple(needs),
            managers=tuple(st.managers[k] for k in sorted(st.managers)), now=now,
            polled=st.polled, unavailable=st.unavailable)
        self._snap = snap
        return snap


# ---- from the wire's values (meshview/wire/runs.py) to these ------------------------------


def clip(s: Any, n: int = PROMPT_CAP) -> str:
    return str(s)[:n]


def pause_kind(step_key: str, effect: str | None) -> str:
    """``checkpoint`` or ``ask``: the row's ``effect``, else the last segment of the key."""
    if effect in ("checkpoint", "ask"):
        return effect
    last = step_key.rsplit("/", 1)[-1]
    kind = last.partition(":")[0]
    return kind if kind in ("checkpoint", "ask") else (effect or kind or "checkpoint")


# ---- an answer, checked before it is sent ---------------------------------------------------


class AnswerInvalid(MeshviewError, ValueError):
    """An answer that does not meet what the prompt asks for: one sentence, nothing sent."""


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
    "integer": (int,), "number": (int, float), "null": (type(None),),
}


def wants_json(schema: Any) -> bool:
    """A schema asks for JSON unless it asks for nothing but a string."""
    return isinstance(schema, dict) and schema.get("type") not in (None, "string")


def answer_value(text: str, *, as_json: bool, schema: Any = None) -> Any:
    """The ``value`` of a ``run-answer``: free text is sent as a JSON string (never parsed); in
    JSON mode the text must parse, and meet the prompt's schema where one is known (its type,
    required fields and their types, enum)."""
    if not as_json:
        if not text.strip():
            raise AnswerInvalid("type an answer first (an empty answer is not sent)")
        value: Any = text
    else:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise AnswerInvalid(f"not JSON: {e.msg} at character {e.pos}") from None
        except ValueError:  # not a parse error: a number past the int-conversion digit limit
            raise AnswerInvalid("not JSON: a number is too long to read") from None
    if isinstance(schema, dict):
        _check(value, schema, "the answer")
    return value


def _check(value: Any, schema: dict, where: str) -> None:
    t = schema.get("type")
    if isinstance(t, str) and t in _JSON_TYPES:
        ok = isinstance(value, _JSON_TYPES[t]) and not (t in ("integer", "number") and isinstance(value, bool))
        if not ok:
            raise AnswerInvalid(f"{where} must be a JSON {t}")
    enum = schema.get("enum")
    if isinstance(enum, list) and value not in enum:
        raise AnswerInvalid(f"{where} must be one of {', '.join(json.dumps(x) for x in enum[:8])}")
    if isinstance(value, dict):
        for k in schema.get("required") or ():
            if isinstance(k, str) and k not in value:
                raise AnswerInvalid(f"{where} lacks the required field {json.dumps(k)}")
        props = schema.get("properties")
        if isinstance(props, dict):
            for k, sub in props.items():
                if k in value and isinstance(sub, dict):
                    _check(value[k], sub, f"field {json.dumps(k)}")
            if schema.get("additionalProperties") is False:
                extra = sorted(set(value) - set(props))
                if extra:
                    raise AnswerInvalid(f"{where} has a field the prompt does not ask for: {json.dumps(extra[0])}")


def as_needs_you(n: RunNeed) -> Any:
    """A run's NEEDS-YOU row as the notifier's waiting item (``--notify`` alerts on a pause
    opening as on an agent that starts waiting): ``run-3f2a… needs you: checkpoint - ship?``."""
    from meshview.model.snapshot import NeedsYou

    return NeedsYou(id=f"run:{n.run_id}:{n.pause.step_key}", name=short_run(n.run_id), role=None,
                    condition_code=n.pause.kind, condition_message=n.pause.prompt,
                    condition_age_ms=None, status_age_ms=None, heartbeat_age_ms=0.0,
                    activity=n.pause.step_key)
