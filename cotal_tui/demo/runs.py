"""The demo manager as a workflow-run host (SPEC v0.5 §14; run-hosting.ts, contract revision 21).

It serves ``run-start``, ``run-resume``, ``run-answer`` (and its ``amend``), ``run-status`` and
``run-ps`` with the reference's footprint: the run spec (create-only), status (CAS) and recorded
program in the records KV, the ``WFJ_<space>`` journal (one subject per run, every append fenced
with ``Nats-Expected-Last-Subject-Sequence``), the admission record in ``cotal_admission_<space>``
(create-only), and answer records keyed by their derived ``answerId`` (create-only).

It does not interpret the Cotal language. It runs a few bundled programs (:data:`PROGRAMS`),
recognised by their exact source, and refuses any other program the way the reference refuses a
program that does not validate (``bad-request``, one ``ai.cotal.lang.problem`` detail naming what
it supports). Each program is a fixed list of effects the driver walks against the folded
journal, so a resume (or a restart's take-back) continues exactly where the journal says.

Mesh modes as the reference has them: an open mesh hosts no run (``unimplemented``, with the
reason); a user-auth mesh's signer-holding manager hosts none yet (``unimplemented``, named);
a static mesh hosts them. ``run-start`` binds a run to the caller's issued authority, so a request
on the legacy ``ep`` rail is refused ``permission-denied`` with the unbound-caller detail.

Simplifications, said plainly: the drive rides the manager's own connection (the reference mints a
per-run ``run-driver`` credential); a checkpoint's deadline is an in-process timer (the reference's
mediated timer writer); the admission ceiling of an issued caller is not resolved from the
issuer's evidence (it is recorded as deny-all).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from dataclasses import dataclass, field

from nats.js.api import KeyValueConfig, RetentionPolicy, StorageType, StreamConfig
from nats.js.kv import KeyValue
from nats.js.errors import (
    BucketNotFoundError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NotFoundError,
)

from meshview.errors import swallowing
from meshview.wire.endpoint import Caller
from meshview.wire.envelope import EndpointError
from meshview.wire.runs import (
    COMPLETED,
    FAILED,
    RELEASED,
    RUNNING,
    admission_bucket,
    admission_key,
    answer_id,
    answer_key,
    journal_filter,
    journal_stream,
    journal_subject,
    mint_run_id,
    parse_journal_record,
    parse_run_key,
    revocation_key,
    run_program_key,
    run_spec_key,
    run_status_key,
)

RUN_COMMANDS = ("run-start", "run-resume", "run-answer", "run-status", "run-ps")
LANG_PROBLEM = "ai.cotal.lang.problem"
UNBOUND_CALLER = "ai.cotal.ep.unbound-caller-authority"
DEFAULT_CHECKPOINT_TIMEOUT = "1h"
LANGUAGE_VERSION = 2
EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _fail(code: str, message: str, **kw) -> EndpointError:
    return EndpointError(code, message, outcome=kw.pop("outcome", "not-executed"), **kw)


def duration_ms(text: str) -> int:
    m = _DURATION.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None or int(m.group(1)) <= 0:
        raise ValueError(f"timeout {text!r} is not a duration such as 30s, 10m or 1h")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


# ---- the bundled programs ---------------------------------------------------------------------

@dataclass(frozen=True)
class Effect:
    """One effect of a bundled program, at its verbatim step key.

    ``kind``: ``step`` (settles ``ok`` at once), ``checkpoint`` (waits for a human; ``timeout``
    overrides the run's default), ``ask`` (waits for the addressed agent; non-blocking, so a fan-out
    opens every branch), ``join`` (waits until every earlier pause settled), ``refuse`` (an effect
    the demo cannot perform: settles ``refused`` and the run is held, i.e. released)."""

    kind: str
    key: str
    name: str
    prompt: str | None = None
    addressee: str | None = None
    timeout: str | None = None
    on_expiry: str = "fail"
    effect: str | None = None  # the language effect named (``refuse``: the one not performed)


@dataclass(frozen=True)
class Program:
    name: str
    source: str
    effects: tuple[Effect, ...]
    summary: str


def _src(name: str, body: str) -> str:
    return f"// cotal demo program: {name}\n{body.strip()}\n"


PROGRAMS: dict[str, Program] = {p.name: p for p in (
    Program("release-checklist", _src("release-checklist", """
step("build", () => "built 1.8.0")
const go = checkpoint("approve", "ship release 1.8?")
if (go === "yes" || go === true) step("publish", () => "published 1.8.0")
"""), (
        Effect("step", "/step:build#0", "build"),
        Effect("checkpoint", "/checkpoint:approve#0", "approve", prompt="ship release 1.8?"),
        Effect("step", "/step:publish#0", "publish"),
    ), "waits at /checkpoint:approve#0 for a human"),
    Program("fan-out", _src("fan-out", """
fanOut("lanes", ["docs", "tests"], (lane) => ask("reviewer", { name: "opened", schema: { type: "object" } }))
"""), (
        Effect("ask", "/fanOut:lanes#0/b:0/ask:opened#0", "opened", prompt="review the docs lane: ok?",
               addressee="reviewer"),
        Effect("ask", "/fanOut:lanes#0/b:1/ask:opened#0", "opened", prompt="review the tests lane: ok?",
               addressee="reviewer"),
        Effect("join", "/fanOut:lanes#0", "lanes"),
    ), "asks the reviewer agent once per lane"),
    Program("expiring", _src("expiring", """
checkpoint("confirm", "confirm within 3 seconds", { timeout: "3s", onExpiry: "fail" })
"""), (
        Effect("checkpoint", "/checkpoint:confirm#0", "confirm", prompt="confirm within 3 seconds",
               timeout="3s"),
    ), "expires on its 3 s deadline and fails"),
    Program("held", _src("held", """
spawn("builder", { persona: "builder" })
"""), (
        Effect("refuse", "/spawn:builder#0", "builder", effect="spawn"),
    ), "performs an effect the demo cannot (spawn), so the run is held (released)"),
)}


def _normalize(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.replace("\r\n", "\n").strip().split("\n"))


_BY_SOURCE = {_normalize(p.source): p for p in PROGRAMS.values()}


def program_of(source: str, file: str | None = None) -> Program:
    p = _BY_SOURCE.get(_normalize(source))
    if p is None:
        names = ", ".join(PROGRAMS)
        raise _fail("bad-request", "the program does not validate (1 problem)", details=[{
            "kind": LANG_PROBLEM, "code": "L1000", "title": "not a program this host runs",
            "cause": f"the demo manager runs only its bundled example programs ({names}), recognised by "
                     "their exact source; it does not interpret the Cotal language",
            "fix": f"start one of the bundled programs ({names}; their sources are PROGRAMS in cotal_tui/demo/runs.py)",
            "where": {"file": file or "<program>", "line": 1, "column": 1}}])
    return p


# ---- stores -----------------------------------------------------------------------------------

async def ensure_run_stores(js, space: str, replicas: int = 1) -> None:
    """The ``WFJ_<space>`` journal (limits retention, file storage, no max_age, no direct get)
    and the admission bucket, created if absent."""
    name = journal_stream(space)
    try:
        await js.stream_info(name)
    except NotFoundError:
        with swallowing("cotal_tui.demo.runs:ensure_run_stores"):
            await js.add_stream(StreamConfig(name=name, subjects=[journal_filter(space)],
                                             retention=RetentionPolicy.LIMITS, storage=StorageType.FILE,
                                             allow_direct=False, num_replicas=replicas))
    try:
        await js.key_value(admission_bucket(space))
    except BucketNotFoundError:
        with swallowing("cotal_tui.demo.runs:ensure_run_stores#2"):
            await js.create_key_value(config=KeyValueConfig(bucket=admission_bucket(space), history=1,
                                                            replicas=replicas))


# ---- the host ---------------------------------------------------------------------------------

@dataclass
class _Pause:
    key: str
    token: str
    deadline_at: float
    timer: asyncio.TimerHandle | None = None


@dataclass
class _Run:
    run_id: str
    program: Program
    timeout: str
    epoch: int
    fencing: int
    holder: str
    spec_revision: int
    status_revision: int | None = None
    last_seq: int = 0  # the journal subject's last sequence, the fence of the next append
    records: list[dict] = field(default_factory=list)
    entries: dict[str, dict] = field(default_factory=dict)  # step key -> last entry
    answers: dict[str, dict] = field(default_factory=dict)  # step key -> the settling answer
    amendments: dict[str, list[dict]] = field(default_factory=dict)
    pauses: dict[str, _Pause] = field(default_factory=dict)
    state: str = RUNNING
    started_at: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class RunHost:
    """The run family behind the demo manager's dispatch (``handle``)."""

    def __init__(self, nc, space: str, *, endpoint: str, instance_id: str, mesh: str = "static",
                 log=None, clock=time.time):
        if mesh not in ("open", "static", "user"):
            raise ValueError(f"mesh must be open, static or user, not {mesh!r}")
        self.nc = nc
        self.space = space
        self.endpoint = endpoint
        self.instance_id = instance_id
        self.mesh = mesh
        self.log = log or (lambda line: None)
        self.clock = clock
        self.runs: dict[str, _Run] = {}
        self._claims: set[str] = set()  # runs a resume is launching
        self.reconciled = False
        self.stopping = False
        self._records_kv: KeyValue | None = None  # set by start() on a run host
        self._admission_kv: KeyValue | None = None

    @property
    def _records(self) -> KeyValue:
        """The records bucket (runs' program, spec, status and journal rows); only a started
        run host reads it."""
        if self._records_kv is None:
            raise RuntimeError("the run host is not started")
        return self._records_kv

    @property
    def _admission(self) -> KeyValue:
        """The admission bucket (one row per admitted run); only a started run host reads it."""
        if self._admission_kv is None:
            raise RuntimeError("the run host is not started")
        return self._admission_kv

    @property
    def hosts_runs(self) -> bool:
        return self.mesh == "static"

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    async def start(self) -> None:
        if not self.hosts_runs:
            self.reconciled = True
            return
        js = self.nc.jetstream()
        await ensure_run_stores(js, self.space)
        self._records_kv = await js.key_value(f"cotal_records_{self.space}")
        self._admission_kv = await js.key_value(admission_bucket(self.space))
        try:
            await self._take_back()
        finally:
            self.reconciled = True

    async def stop(self) -> None:
        """Timers cancelled; every run stays recorded ``running`` for the next incarnation."""
        self.stopping = True
        for run in self.runs.values():
            for p in run.pauses.values():
                if p.timer is not None:
                    p.timer.cancel()
        self.runs.clear()

    # ---- the served family ----------------------------------------------------------------

    def refusal(self, command: str = "the run family") -> EndpointError | None:
        if self.mesh == "open":
            return _fail("unimplemented", f"{command}: an open mesh issues no caller authority and keeps no admission, so it "
                         f"hosts no run in space {self.space}; runs need a static-auth mesh (SPEC 14.8)")
        if self.mesh == "user":
            return _fail("unimplemented", f"{command}: user-auth space {self.space} hosts no workflow runs yet on the "
                         "signer-holding manager; a user's runs are hosted by their own participant manager")
        return None

    async def handle(self, command: str, caller: Caller, args: dict, *, generation: str | None = None) -> object:
        refused = self.refusal(command)
        if refused is not None:
            raise refused
        if command == "run-ps":
            return await self.ps(args.get("endpoint"))
        if command == "run-status":
            return await self.status(args["runId"], args.get("endpoint"))
        if command == "run-answer":
            return await self.answer(args, caller)
        if self.stopping:
            raise _fail("unavailable", "the manager is stopping and hosts no new drives")
        if not self.reconciled:
            raise _fail("unavailable", "the manager is still taking back the workflow runs a predecessor was "
                        "driving; retry shortly (SPEC 14.3)")
        if command == "run-start":
            return await self.start_run(args, caller, generation)
        if command == "run-resume":
            return await self.resume(args["runId"], args.get("timeout"))
        raise _fail("unimplemented", f"{command} is not a run command")

    async def start_run(self, args: dict, caller: Caller, generation: str | None) -> dict:
        program = program_of(args["source"], args.get("file"))
        timeout = args.get("timeout") or DEFAULT_CHECKPOINT_TIMEOUT
        try:
            duration_ms(timeout)
        except ValueError as e:
            raise _fail("bad-request", str(e)) from None
        if generation is None:
            raise _fail("permission-denied", "run-start binds a run to the caller's issued authority, and this "
                        "request rode the legacy rail with none; re-mint the credential as an issuance and call "
                        "on the versioned rail (SPEC 13.15, 14.8)",
                        details=[{"kind": UNBOUND_CALLER, "owner": caller.owner, "actor": caller.actor,
                                  "uid": caller.uid}])
        provenance = {"kind": "issued", "ref": {"space": self.space, "owner": caller.owner, "actor": caller.actor,
                                                "uid": caller.uid, "generation": generation}}
        run_id = await self.launch(program, timeout=timeout, caller=caller, provenance=provenance,
                                   file=args.get("file"))
        return {"runId": run_id}

    async def start_bundled(self, name: str, *, timeout: str = DEFAULT_CHECKPOINT_TIMEOUT) -> str:
        """A run the operator starts (``cotal demo``'s boot run): admitted with operator provenance."""
        who = Caller("local", "cotal_demo", self.instance_id)
        return await self.launch(PROGRAMS[name], timeout=timeout, caller=who, provenance={
            "kind": "operator", "by": "cotal demo", "reason": "the demo's example run"})

    async def launch(self, program: Program, *, timeout: str, caller: Caller, provenance: dict,
                     file: str | None = None) -> str:
        run_id = mint_run_id()
        now = self._now_ms()
        admission = {"version": 1, "space": self.space, "endpoint": self.endpoint, "runId": run_id,
                     "instanceId": self.instance_id,
                     "caller": {"owner": caller.owner, "actor": caller.actor, "uid": caller.uid},
                     "ceiling": {"publish": {"allow": {"mode": "none"}, "deny": []},
                                 "subscribe": {"allow": {"mode": "none"}, "deny": []}},
                     "provenance": provenance, "admittedAt": now}
        await self._admission.create(admission_key(self.endpoint, run_id), _j(admission))
        program_rec = {"v": 1, "source": program.source, **({"file": file} if file else {})}
        await self._records.create(run_program_key(self.endpoint, run_id), _j(program_rec))
        spec = {"v": 1, "run": run_id, "createdAt": now,
                "pins": {"seed": secrets.token_hex(8), "startedAt": now, "yieldEvery": 64, "stepBudget": 10_000,
                         "effectCeiling": 1000, "languageVersion": LANGUAGE_VERSION}}
        rev = await self._records.create(run_spec_key(self.endpoint, run_id), _j(spec))
        run = _Run(run_id, program, timeout, epoch=1, fencing=1, holder=self._holder(), spec_revision=rev,
                   started_at=now)
        self.runs[run_id] = run
        async with run.lock:
            await self._activate(run)
            await self._drive(run)
        return run_id

    async def resume(self, run_id: str, timeout: str | None) -> dict:
        # claimed before the first await: two concurrent resumes cannot both reach the activation
        if run_id in self._claims or (run_id in self.runs and self.runs[run_id].state == RUNNING):
            raise _fail("conflict", f"run {run_id} is being driven by this manager already")
        self._claims.add(run_id)
        try:
            return await self._resume(run_id, timeout)
        finally:
            self._claims.discard(run_id)

    async def _resume(self, run_id: str, timeout: str | None) -> dict:
        spec_entry = await self._get(self._records, run_spec_key(self.endpoint, run_id))
        if spec_entry is None:
            raise _fail("not-found", f"run {run_id}: no record on endpoint {self.endpoint}; a run that was never "
                        "started cannot be resumed")
        revoked = await self._get(self._admission, revocation_key(self.endpoint, run_id))
        if revoked is not None:
            r = _loads(revoked.value) or {}
            raise _fail("permission-denied", f"run {run_id} was revoked by {r.get('by')} ({r.get('reason')}); a "
                        "revoked run is not resumed (SPEC 14.8)")
        if await self._get(self._admission, admission_key(self.endpoint, run_id)) is None:
            raise _fail("failed-precondition", f"run {run_id} has no admission record; it is not resumed under "
                        "a new one (SPEC 14.8)")
        prog = await self._get(self._records, run_program_key(self.endpoint, run_id))
        if prog is None:
            raise _fail("failed-precondition", f"run {run_id}: no program is recorded for it, so a hosted resume "
                        "has no source to run")
        try:
            program = program_of((_loads(prog.value) or {}).get("source", ""))
        except EndpointError:
            raise _fail("failed-precondition", f"run {run_id}: its recorded program no longer validates on this "
                        "host") from None
        run = await self._load(run_id, program, timeout or DEFAULT_CHECKPOINT_TIMEOUT, spec_entry.revision)
        async with run.lock:
            await self._activate(run)
            await self._drive(run)
        return {"runId": run_id}

    async def answer(self, args: dict, caller: Caller) -> dict:
        run_id, key = args["runId"], args["stepKey"]
        endpoint = args.get("endpoint", self.endpoint)
        run = self.runs.get(run_id) if endpoint == self.endpoint else None
        if run is None:
            raise _fail("not-found", f"no open checkpoint at {key} of run {run_id}: the run is not driven by this "
                        "manager (see cotal runs ps)")
        by = caller.principal
        value = args.get("value")
        artifact = args.get("artifact")
        async with run.lock:
            if args.get("amend") is True:
                return await self._amend(run, key, by, value, artifact, "value" in args)
            pause = run.pauses.get(key)
            if pause is None or run.state != RUNNING:
                why = "it is already settled" if key in run.entries else "the run has no step at that key"
                raise _fail("not-found", f"no open checkpoint at {key} of run {run_id} ({why})")
            aid = answer_id(pause.token, by, value, artifact)
            rec = {"v": 1, "token": pause.token, "answerId": aid, "by": by, "at": self._now_ms(),
                   **({"value": value} if "value" in args else {}), **({"artifact": artifact} if artifact else {})}
            try:
                await self._records.create(answer_key(self.endpoint, pause.token, aid), _j(rec))
            except KeyWrongLastSequenceError:
                raise _fail("conflict", f"the checkpoint at {key} was answered by another call") from None
            if pause.timer is not None:
                pause.timer.cancel()
            del run.pauses[key]
            run.answers[key] = rec
            entry = dict(run.entries[key], state="settled", outcome="resumed", status="resumed",
                         endedAt=rec["at"], answerId=aid)
            entry.pop("asks", None)
            await self._append_step(run, entry)
            settle = {"token": pause.token, "status": "resumed", "settledAnswerId": aid, "at": rec["at"]}
            await self._drive(run)
            return {"token": pause.token, "answerId": aid, "settle": settle}

    async def _amend(self, run: _Run, key: str, by: str, value, artifact, has_value: bool) -> dict:
        first = run.answers.get(key)
        entry = run.entries.get(key)
        if first is None or entry is None or entry.get("outcome") != "resumed":
            raise _fail("failed-precondition", f"an amendment needs the pause at {key} settled resumed; it is not")
        prior = (run.amendments.get(key) or [first])[-1]
        token = first["token"]
        aid = answer_id(token, by, value, artifact)
        rec = {"v": 1, "token": token, "answerId": aid, "by": by, "at": self._now_ms(),
               **({"value": value} if has_value else {}), **({"artifact": artifact} if artifact else {})}
        try:
            await self._records.create(answer_key(self.endpoint, token, aid), _j(rec))
        except KeyWrongLastSequenceError:
            raise _fail("conflict", f"that exact answer to {key} is recorded already") from None
        run.amendments.setdefault(key, []).append({**rec, "supersedes": prior["answerId"]})
        return {"token": token, "answerId": aid, "supersedes": prior["answerId"]}

    async def status(self, run_id: str, endpoint: str | None) -> dict:
        ep = endpoint or self.endpoint
        spec = await self._get(self._records, run_spec_key(ep, run_id))
        if spec is None:
            raise _fail("not-found", f"run {run_id}: no record on endpoint {ep}")
        st = await self._get(self._records, run_status_key(ep, run_id))
        records, _ = await self._replay(run_id)
        live = self.runs.get(run_id) if ep == self.endpoint else None
        rows: list[dict] = []
        open_now = {r["entry"].get("key"): r["entry"].get("state") == "pending" for r in records if r["kind"] == "step"}
        for r in records:
            if r["kind"] == "activation":
                rows.append({"n": r["n"], "kind": "activation", "holder": r["holder"], "epoch": r["epoch"],
                             "replayedTo": r["replayedTo"]})
                continue
            e = r["entry"]
            row = {"n": r["n"], "kind": "step"}
            for src, dst in (("key", "step"), ("effect", "effect"), ("name", "name"), ("state", "state"),
                             ("outcome", "outcome"), ("status", "status"), ("errorCode", "errorCode"),
                             ("startedAt", "startedAt"), ("endedAt", "endedAt"), ("addressee", "addressee"),
                             ("deadlineAt", "deadlineAt"), ("onExpiry", "onExpiry")):
                if e.get(src) is not None:
                    row[dst] = e[src]
            # the prompt only while the pause is open (its key's last record still pending)
            if e.get("state") == "pending" and isinstance(e.get("asks"), str) and open_now.get(e.get("key")):
                row["asks"] = e["asks"]
            ans = live.answers.get(e.get("key")) if live else None
            if live is not None and e.get("state") == "settled" and ans is not None:
                row["answer"] = {k: ans[k] for k in ("answerId", "value", "by", "artifact", "at") if k in ans}
                if live.amendments.get(e["key"]):
                    row["amendments"] = [{k: a[k] for k in ("answerId", "supersedes", "value", "by", "artifact", "at")
                                          if k in a} for a in live.amendments[e["key"]]]
            rows.append(row)
        out = {"runId": run_id, "endpoint": ep, "spec": _loads(spec.value) or {}, "journal": rows}
        if st is not None:
            out["status"] = _loads(st.value) or {}
        return out

    async def ps(self, endpoint: str | None) -> list:
        rows = []
        keys = await self._run_keys()
        for k in keys:
            parsed = parse_run_key(k)
            if parsed is None or parsed[2] != "spec" or (endpoint is not None and parsed[0] != endpoint):
                continue
            ep, run_id, _ = parsed
            row: dict = {"runId": run_id, "endpoint": ep}
            st = await self._get(self._records, run_status_key(ep, run_id))
            spec = await self._get(self._records, run_spec_key(ep, run_id))
            s = _loads(st.value) if st is not None else None
            if isinstance(s, dict):
                for src in ("state", "holder", "epoch", "journalHigh"):
                    if src in s:
                        row[src] = s[src]
            sp = _loads(spec.value) if spec is not None else None
            if isinstance(sp, dict):
                started = (sp.get("pins") or {}).get("startedAt")
                if isinstance(started, (int, float)):
                    row["startedAt"] = started
                if isinstance(sp.get("forkedFrom"), dict):
                    row["forkedFrom"] = sp["forkedFrom"]
            try:
                rv = await self._get(self._admission, revocation_key(ep, run_id))
                if rv is not None:
                    r = _loads(rv.value) or {}
                    row["revoked"] = {"by": str(r.get("by", "")), "reason": str(r.get("reason", ""))}
            except Exception as e:  # noqa: BLE001 - the marker could not be read: said, never guessed
                row["revocationUnreadable"] = f"{type(e).__name__}"
            rows.append(row)
        return rows

    # ---- the driver -------------------------------------------------------------------------

    def _holder(self) -> str:
        return f"{self.instance_id}.{secrets.token_hex(4)}"

    async def _activate(self, run: _Run) -> None:
        rec = {"v": 1, "kind": "activation", "run": run.run_id, "n": len(run.records), "holder": run.holder,
               "fencingToken": run.fencing, "epoch": run.epoch, "replayedTo": len(run.records),
               "at": self._now_ms()}
        await self._append(run, rec)
        run.state = RUNNING
        await self._write_status(run)

    async def _append(self, run: _Run, rec: dict) -> None:
        """One fenced append: refused by the stream when another writer moved the subject."""
        ack = await self.nc.jetstream().publish(
            journal_subject(self.space, run.run_id), _j(rec), stream=journal_stream(self.space),
            headers={EXPECTED_LAST_SUBJECT_SEQ: str(run.last_seq)})
        run.last_seq = ack.seq
        run.records.append(rec)
        if rec["kind"] == "step":
            run.entries[rec["entry"]["key"]] = rec["entry"]

    async def _append_step(self, run: _Run, entry: dict) -> None:
        await self._append(run, {"v": 1, "kind": "step", "run": run.run_id, "n": len(run.records),
                                 "at": self._now_ms(), "entry": entry})

    async def _write_status(self, run: _Run) -> None:
        st = {"v": 1, "observedSpecRevision": run.spec_revision, "state": run.state, "holder": run.holder,
              "epoch": run.epoch, "fencingToken": run.fencing, "journalHigh": len(run.records) - 1,
              "at": self._now_ms()}
        key = run_status_key(self.endpoint, run.run_id)
        if run.status_revision is None:
            cur = await self._get(self._records, key)
            run.status_revision = cur.revision if cur is not None else None
        if run.status_revision is None:
            run.status_revision = await self._records.create(key, _j(st))
        else:
            run.status_revision = await self._records.update(key, _j(st), last=run.status_revision)

    async def _drive(self, run: _Run) -> None:
        """Walk the program against the folded journal until it waits, holds or ends."""
        if run.state != RUNNING:
            return
        for fx in run.program.effects:
            entry = run.entries.get(fx.key)
            if fx.kind == "join":
                if any(k for k in run.pauses):
                    break
                continue
            if entry is not None and entry.get("state") == "settled":
                if entry.get("status") == "refused":
                    await self._end(run, RELEASED)
                    return
                if entry.get("status") == "expired":
                    await self._end(run, FAILED)
                    return
                continue
            if entry is None:
                entry = {"key": fx.key, "effect": "checkpoint" if fx.kind == "checkpoint" else
                         ("ask" if fx.kind == "ask" else (fx.effect or "step")), "name": fx.name,
                         "state": "pending", "outcome": "pending", "startedAt": self._now_ms()}
                if fx.kind in ("checkpoint", "ask"):
                    deadline = entry["startedAt"] + duration_ms(fx.timeout or run.timeout)
                    entry.update(asks=fx.prompt, deadlineAt=deadline, onExpiry=fx.on_expiry)
                    if fx.addressee:
                        entry["addressee"] = fx.addressee
                await self._append_step(run, entry)
            if fx.kind == "step":
                await self._append_step(run, dict(entry, state="settled", outcome="ok", status="ok",
                                                  endedAt=self._now_ms()))
                continue
            if fx.kind == "refuse":
                await self._append_step(run, dict(entry, state="settled", outcome="refused L5016", status="refused",
                                                  errorCode="L5016", endedAt=self._now_ms()))
                await self._end(run, RELEASED)
                return
            # a pause: arm it (or re-arm it after a take-back) and wait
            if fx.key not in run.pauses:
                self._arm(run, fx.key, float(entry["deadlineAt"]))
            if fx.kind == "checkpoint":
                break
        else:
            if not run.pauses:
                await self._end(run, COMPLETED)
                return
        await self._write_status(run)

    def _arm(self, run: _Run, key: str, deadline_at: float) -> None:
        pause = _Pause(key, secrets.token_urlsafe(16), deadline_at)
        delay = max(0.0, (deadline_at - self._now_ms()) / 1000.0)
        loop = asyncio.get_running_loop()
        pause.timer = loop.call_later(delay, lambda: loop.create_task(self._expire(run, key, pause)))
        run.pauses[key] = pause

    async def _expire(self, run: _Run, key: str, pause: _Pause) -> None:
        """Expiry fails closed: the pause settles ``expired`` and (``onExpiry: fail``) the run fails."""
        async with run.lock:
            if run.pauses.get(key) is not pause or self.stopping:
                return
            del run.pauses[key]
            with swallowing("cotal_tui.demo.runs:RunHost._expire"):
                entry = dict(run.entries[key], state="settled", outcome="expired", status="expired",
                             endedAt=self._now_ms())
                entry.pop("asks", None)
                await self._append_step(run, entry)
                await self._end(run, FAILED)

    async def _end(self, run: _Run, state: str) -> None:
        for p in run.pauses.values():
            if p.timer is not None:
                p.timer.cancel()
        run.pauses.clear()
        run.state = state
        await self._write_status(run)

    # ---- take-back and replay ---------------------------------------------------------------

    async def _load(self, run_id: str, program: Program, timeout: str, spec_revision: int) -> _Run:
        st = await self._get(self._records, run_status_key(self.endpoint, run_id))
        s = (_loads(st.value) if st is not None else None) or {}
        records, last_seq = await self._replay(run_id)
        high = s.get("journalHigh", -1)
        if isinstance(high, int) and len(records) - 1 < high:
            raise _fail("failed-precondition", f"run {run_id}: its journal lost its tail (replayed to "
                        f"{len(records) - 1}, status says {high}); refused (SPEC 14.4)")
        spec = await self._get(self._records, run_spec_key(self.endpoint, run_id))
        started = ((_loads(spec.value) or {}).get("pins") or {}).get("startedAt", 0) if spec else 0
        run = _Run(run_id, program, timeout, epoch=int(s.get("epoch", 0)) + 1,
                   fencing=int(s.get("fencingToken", 0)) + 1, holder=self._holder(), spec_revision=spec_revision,
                   status_revision=st.revision if st is not None else None, started_at=started)
        for r in records:
            run.records.append(r)
            if r["kind"] == "step":
                run.entries[r["entry"]["key"]] = r["entry"]
        run.last_seq = last_seq
        self.runs[run_id] = run
        return run

    async def _replay(self, run_id: str) -> tuple[list[dict], int]:
        """Every record of one run's journal subject, in order, each checked (closed, ``n == i``),
        and the subject's last sequence (the fence of the next append)."""
        jsm = self.nc.jsm()
        subject = journal_subject(self.space, run_id)
        out: list[dict] = []
        seq = 1
        last = 0
        while True:
            try:
                msg = await jsm.get_msg(journal_stream(self.space), seq=seq, subject=subject, next=True)
            except NotFoundError:
                break
            rec = parse_journal_record(_loads(msg.data), run_id=run_id)
            if rec["n"] != len(out):
                raise _fail("failed-precondition", f"run {run_id}: journal record {len(out)} is numbered {rec['n']}")
            out.append(rec)
            last = msg.seq
            seq = msg.seq + 1
        return out, last

    async def _take_back(self) -> None:
        keys = [k for k in await self._run_keys() if k.endswith(".status")]
        for k in keys:
            parsed = parse_run_key(k)
            if parsed is None:
                continue
            run_id = parsed[1]
            try:
                st = await self._get(self._records, k)
                if st is None or (_loads(st.value) or {}).get("state") != RUNNING:
                    continue
                await self.resume(run_id, None)
                self.log(f"took back run {run_id}")
            except EndpointError as e:
                self.log(f"! run {run_id} stays parked: {e.message}")
            except Exception as e:  # noqa: BLE001 - never fatal to the manager
                self.log(f"! run {run_id} could not be taken back: {type(e).__name__}")

    async def _run_keys(self) -> list[str]:
        """Every ``run.<endpoint>.<runId>.<part>`` key of the records bucket, from one filtered
        ``STREAM.INFO`` (nats-py's ``kv.keys()`` can end before its first key on a busy loop)."""
        from attach.control.registry import kv_keys

        keys = await kv_keys(self.nc.jetstream(), f"cotal_records_{self.space}", "run.")
        return [k for k in keys if parse_run_key(k) is not None]

    @staticmethod
    async def _get(kv, key: str):
        try:
            return await kv.get(key)
        except KeyNotFoundError:
            return None


def _j(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _loads(data: bytes | None):
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None
