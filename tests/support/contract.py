"""The manager contract (rev 22, ``tests/vectors/manager-contract-rev22.json``; rev 21,
``tests/vectors/manager-contract.json``, for a manager one release behind) as test checks, and a
tap that holds every §13 manager call seen on a test broker to it.

:class:`Contract` answers "is this ``args`` one the command's closed input schema admits?" and
"is this reply one its output schema allows?" with readable failure lines (JSON path, what was
wrong), never an exception. :class:`ContractTap` subscribes on its own connection to a space's
whole endpoint plane, pairs each request with its replies by (caller, nonce), and records every
departure from the contract: a request envelope the SPEC refuses, args outside the input
schema, digests that are not the contract's, a reused nonce, a success outside the output
schema, an error outside the catalog. A call that pins rev 21's digests is judged by rev 21 (a
demo manager forced to that revision serves them); any other call by rev 22. A test (or the autouse fixture in ``tests/conftest.py``)
calls :meth:`ContractTap.assert_clean` when it ends.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema.validators import validator_for

from meshview.wire.endpoint import MANAGER, ParsedRequest, parse_reply, parse_request
from meshview.wire.envelope import (
    ERROR_CODES,
    OUTCOMES,
    EndpointError,
    is_error_code,
    validate_request,
)
from meshview.wire.names import space_token
from meshview.wire.subjects import ROOT

HERE = Path(__file__).resolve().parent
_SHARED = HERE.parents[2] / "shared" / "vectors" / "manager-contract.json"
REV21_PATH = _SHARED if _SHARED.exists() else HERE.parent / "vectors" / "manager-contract.json"
CONTRACT_PATH = HERE.parent / "vectors" / "manager-contract-rev22.json"
INST_UNTAPPED = ("describe",)  # see ContractTap.planes
MAX_FAILURES = 5  # per document: the first few say what is wrong; a flood says nothing more


def _path(error: jsonschema.ValidationError) -> str:
    out = "$"
    for p in error.absolute_path:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _short(v: Any, limit: int = 120) -> str:
    s = json.dumps(v, ensure_ascii=True)  # a hostile value shows as escapes, never acts
    return s if len(s) <= limit else s[:limit] + "…"


@dataclass(frozen=True)
class CommandContract:
    name: str
    cls: str
    targeted: bool
    modes: tuple[str, ...]
    input_digest: str
    output_digest: str
    input_schema: dict
    output_schema: dict


class Contract:
    """The contract file, with one compiled validator per schema (dialect as the file declares)."""

    def __init__(self, path: Path = CONTRACT_PATH) -> None:
        self.path = path
        self.doc: dict = json.loads(path.read_text())
        self.dialect: str = self.doc["schemaDialect"]["draft"]
        self.revision: int = self.doc["clusterDocument"]["document"]["revision"]
        self.commands: dict[str, CommandContract] = {
            c["name"]: CommandContract(c["name"], c["class"], c["targeted"], tuple(c.get("modes") or ()),
                                       c["inputDigest"], c["outputDigest"], c["inputSchema"], c["outputSchema"])
            for c in self.doc["commands"]
        }
        self.describe_answer_schema: dict = self.doc["describe"]["answerSchema"]
        self.cluster_document: dict = self.doc["clusterDocument"]["document"]
        self.cluster_digest: str = self.doc["clusterDocument"]["closureDigest"]
        self._validators: dict[str, Any] = {}

    def _validator(self, schema: dict):
        key = json.dumps(schema, sort_keys=True)
        v = self._validators.get(key)
        if v is None:
            cls = validator_for({"$schema": self.dialect})
            cls.check_schema(schema)
            v = self._validators[key] = cls(schema)  # formats not asserted, as the reference's Ajv
        return v

    def check(self, schema: dict, value: Any) -> list[str]:
        """Readable failures of ``value`` against ``schema`` (empty: it validates)."""
        errors = sorted(self._validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
        return [f"{_path(e)}: {e.message if len(e.message) < 200 else e.message[:200] + '…'}"
                for e in errors[:MAX_FAILURES]]

    def command(self, name: str) -> CommandContract | None:
        return self.commands.get(name)

    def validate_args(self, command: str, args: Any) -> list[str]:
        """``args`` (None for absent) against the command's closed input schema."""
        if command == "describe":
            return [] if args is None else [f"describe takes no args, got {_short(args)}"]
        c = self.commands.get(command)
        if c is None:
            return [f"{command!r} is not a command of contract revision {self.revision}"]
        return [f"{command} args {f}" for f in self.check(c.input_schema, args)]

    def validate_result(self, command: str, data: Any) -> list[str]:
        """A success's ``data`` (None for absent) against the command's output schema."""
        if command == "describe":
            return [f"describe answer {f}" for f in self.check(self.describe_answer_schema, data)]
        c = self.commands.get(command)
        if c is None:
            return [f"{command!r} is not a command of contract revision {self.revision}"]
        return [f"{command} result {f}" for f in self.check(c.output_schema, data)]

    @staticmethod
    def validate_error(error: Any) -> list[str]:
        """A failed reply's ``error`` against the §13.3 shape and the error catalog."""
        if not isinstance(error, dict):
            return [f"error is not an object: {_short(error)}"]
        out = []
        code = error.get("code")
        if not is_error_code(code):
            out.append(f"error.code {_short(code)} is neither in the catalog nor a reverse-DNS extension")
        if not isinstance(error.get("message"), str):
            out.append(f"error.message is not a string: {_short(error.get('message'))}")
        if "outcome" in error and error["outcome"] not in OUTCOMES:
            out.append(f"error.outcome {_short(error['outcome'])} is not one of {', '.join(OUTCOMES)}")
        if "details" in error and not isinstance(error["details"], list):
            out.append("error.details is not an array")
        extra = set(error) - {"code", "message", "details", "outcome"}
        if extra:
            out.append(f"error carries fields outside the envelope: {sorted(extra)}")
        return out

    def validate_reply(self, command: str, body: Any) -> list[str]:
        """A whole EndpointReply body: the envelope, then data or error."""
        if not isinstance(body, dict):
            return [f"reply is not a JSON object: {_short(body)}"]
        out = []
        if body.get("v") != 1:
            out.append(f"reply v is {_short(body.get('v'))}, not 1")
        if not isinstance(body.get("ok"), bool):
            return out + [f"reply ok is not a boolean: {_short(body.get('ok'))}"]
        if body["ok"]:
            if "error" in body:
                out.append("a success carries an error")
            out += self.validate_result(command, body.get("data"))
        else:
            if "data" in body:
                out.append("a failure carries data")
            out += self.validate_error(body.get("error"))
        return out

    def validate_op(self, command: str, op: dict) -> list[str]:
        """The pinned digests are the contract's closure digests for this command."""
        c = self.commands.get(command)
        if c is None or command == "describe":
            return []
        out = []
        for k, want in (("inputDigest", c.input_digest), ("outputDigest", c.output_digest)):
            if op.get(k) != want:
                out.append(f"{command} op.{k} is {op.get(k)} but contract rev {self.revision} says {want}")
        return out


_CONTRACTS: dict[Path, Contract] = {}


def contract(path: Path = CONTRACT_PATH) -> Contract:
    """The contract (rev 22 unless ``path`` names another), loaded once per process."""
    c = _CONTRACTS.get(path)
    if c is None:
        c = _CONTRACTS[path] = Contract(path)
    return c


def contract21() -> Contract:
    """Revision 21: what a manager one release behind serves."""
    return contract(REV21_PATH)


# ---- the tap -------------------------------------------------------------------------------


@dataclass
class _Call:
    command: str
    request_id: str | None
    subject: str
    replies: int = 0
    contract: Contract | None = None  # the revision whose digests the request pinned


@dataclass
class Seen:
    """What a tap observed (for tests of the tap and for the overhead report)."""

    requests: int = 0
    replies: int = 0
    commands: dict[str, int] = field(default_factory=dict)


class ContractTap:
    """Observes one space's manager endpoint plane on a connection of its own.

    Violations are collected, never raised from the callback (a NATS callback's exception is
    lost); :meth:`assert_clean` raises them as one AssertionError listing each."""

    def __init__(self, nc, space: str, *, endpoint: str = MANAGER, check_digests: bool = True,
                 the_contract: Contract | None = None, older: list[Contract] | None = None) -> None:
        self.nc = nc
        self.space = space_token(space)
        self.endpoint = endpoint
        self.check_digests = check_digests
        self.contract = the_contract or contract()
        # revisions a request may pin instead (its digests say which): rev 21 beside rev 22
        self.older = [contract21()] if older is None and the_contract is None else list(older or [])
        self.violations: list[str] = []  # one line per departure, in the order seen
        self._counts: dict[str, int] = {}
        self.seen = Seen()
        self._calls: dict[tuple[str, str, str, str], _Call] = {}
        self._subs: list = []
        self.elapsed_s = 0.0  # time spent inside the callback (the tap's own cost)

    def planes(self) -> list[str]:
        """What the tap subscribes to. Every request rail and reply of the space, except the
        instance rail's ``describe``: a subscriber there would answer the broker's no-responders
        question (is anything serving instance X?) for a manager that is gone, which is exactly
        what liveness probes and ``deregister-instance`` ask. So inst describes go unjudged."""
        base = f"{ROOT}.{self.space}.ep"
        tok = self.endpoint.replace(".", "_")
        out = [f"{base}.one.{tok}.>", f"{base}.all.{tok}.>", f"{base}.reply.{tok}.>"]
        out += [f"{base}.inst.{tok}.*.{c}.>" for c in sorted(self.contract.commands) if c not in INST_UNTAPPED]
        return out

    async def start(self) -> ContractTap:
        for p in self.planes():
            self._subs.append(await self.nc.subscribe(p, cb=self._on_msg))
        await self.nc.flush()
        return self

    async def stop(self) -> None:
        if self._subs:
            try:
                await self.nc.flush(timeout=2)
            except Exception:
                pass
            await asyncio.sleep(0)  # let queued callbacks run
            for sub in self._subs:
                try:
                    await sub.unsubscribe()
                except Exception:
                    pass
            self._subs.clear()

    def _bad(self, subject: str, what: str) -> None:
        parsed = parse_request(subject) or parse_reply(subject)
        where = "reply" if ".ep.reply." in subject else "request"
        if parsed is not None and where == "request":
            where = f"{parsed.route} request"  # type: ignore[union-attr]
        line = f"{where}: {what}"
        if line not in self._counts:
            self.violations.append(line)
            self._counts[line] = 0
        self._counts[line] += 1

    async def _on_msg(self, msg) -> None:
        t0 = time.perf_counter()
        try:
            if ".ep.reply." in msg.subject:
                self._on_reply(msg.subject, msg.data)
            else:
                self._on_request(msg.subject, msg.data)
        except Exception as e:  # a bug in the tap is a violation too, never silence
            self._bad(msg.subject, f"tap failed on this message: {type(e).__name__}: {e}")
        self.elapsed_s += time.perf_counter() - t0

    def _on_request(self, subject: str, raw: bytes) -> None:
        parsed = parse_request(subject)
        if parsed is None:
            self._bad(subject, "a request subject outside the §13.2 grammar")
            return
        if parsed.endpoint != self.endpoint:
            return
        self.seen.requests += 1
        self.seen.commands[parsed.command] = self.seen.commands.get(parsed.command, 0) + 1
        key = (parsed.caller.owner, parsed.caller.actor, parsed.caller.uid, parsed.nonce)
        if key in self._calls:
            self._bad(subject, f"nonce reused: a second {parsed.command} request on the nonce of an earlier "
                      f"{self._calls[key].command} (one outstanding call per nonce, §13.2)")
        try:
            env = validate_request(parsed, raw)
        except EndpointError as e:
            self._bad(subject, f"request envelope refused {e.code}: {e.message}")
            self._calls[key] = _Call(parsed.command, None, subject)
            return
        c = self._pinned(parsed.command, env.get("op"))
        self._calls[key] = _Call(parsed.command, env["id"], subject, contract=c)
        for f in self._request_failures(parsed, env, c):
            self._bad(subject, f)

    def _pinned(self, command: str, op: Any) -> Contract:
        """The revision a request's op digests name: an older one only when they match it and
        not the current one (a request pinning neither is judged, and refused, by the current)."""
        if isinstance(op, dict) and self.contract.validate_op(command, op):
            for older in self.older:
                if older.command(command) is not None and not older.validate_op(command, op):
                    return older
        return self.contract

    def _request_failures(self, parsed: ParsedRequest, env: dict, c: Contract | None = None) -> list[str]:
        c = c or self.contract
        cmd = parsed.command
        out = c.validate_args(cmd, env.get("args"))
        spec = c.command(cmd)
        if cmd == "describe":
            if "bind" in env:
                out.append("describe carries a bind")
            return out
        if spec is None:
            return out
        if env.get("class") != spec.cls:
            out.append(f"{cmd} class is {env.get('class')!r}, the contract says {spec.cls!r}")
        mode = parsed.target.mode if parsed.target is not None else None
        if spec.targeted and mode not in spec.modes:
            out.append(f"{cmd} sent in mode {mode!r}; the contract admits {list(spec.modes)}")
        if not spec.targeted and mode is not None:
            out.append(f"{cmd} is untargeted but was sent in mode {mode!r}")
        if parsed.route == "all" and "bind" in env:
            out.append(f"{cmd} scatter carries a bind")
        if self.check_digests:
            out += c.validate_op(cmd, env["op"])
        return out

    def _on_reply(self, subject: str, raw: bytes) -> None:
        parsed = parse_reply(subject)
        if parsed is None:
            self._bad(subject, "a reply subject outside the §13.2 grammar")
            return
        if parsed.endpoint != self.endpoint:
            return
        self.seen.replies += 1
        call = self._calls.get((parsed.caller.owner, parsed.caller.actor, parsed.caller.uid, parsed.nonce))
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            self._bad(subject, "reply is not UTF-8 JSON")
            return
        if call is None:  # a reply to nothing we saw asked: only its envelope can be judged
            if isinstance(body, dict) and body.get("ok") is False:
                for f in self.contract.validate_error(body.get("error")):
                    self._bad(subject, f)
            return
        call.replies += 1
        if call.request_id is not None and isinstance(body, dict) and body.get("id") != call.request_id:
            self._bad(subject, f"reply id {_short(body.get('id'))} does not echo the request id")
        for f in (call.contract or self.contract).validate_reply(call.command, body):
            self._bad(subject, f)

    def assert_clean(self) -> None:
        if self.violations:
            shown = [v + (f"  (x{self._counts[v]})" if self._counts[v] > 1 else "") for v in self.violations[:40]]
            more = len(self.violations) - len(shown)
            lines = "\n  ".join(shown) + (f"\n  … and {more} more" if more > 0 else "")
            raise AssertionError(f"{len(self.violations)} distinct manager contract violation(s) on the wire "
                                 f"(rev {self.contract.revision}, {self.seen.requests} requests, "
                                 f"{self.seen.replies} replies seen):\n  {lines}")


__all__ = ["CONTRACT_PATH", "ERROR_CODES", "REV21_PATH", "CommandContract", "Contract", "ContractTap", "contract",
           "contract21"]
