"""§13 endpoint plane: request envelope and reply, describe, contract documents, calls.

The caller side (:class:`EndpointClient`) subscribes to its exact reply subject and flushes
before publishing, accepts a reply only on the matching endpoint and nonce with the echoed
request id, and learns the answering ``(instanceId, epoch)`` from the reply *subject*. The
serving side helpers (:func:`validate_request`, :func:`reply_body`) are what a responder needs
to check an envelope against the subject it arrived on and answer with catalog codes.

Size: over 500 lines because the §13 envelope, describe/contract digests and the caller are one
protocol surface that both the manager and the clients import whole.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

from meshview.connect import PermissionDenied, caller_of as _bound_caller, check_denied, denial_mark, publish_checked
from meshview.wire.names import epc_stream, space_token

from .canonical import DIGEST_RE, VOID_SCHEMA, canonical_bytes, closure_digest, digest, manifest_for
from .subjects import (
    Caller,
    ParsedRequest,
    Target,
    check_command,
    endpoint_token,
    epc_subject,
    is_id_token,
    is_lifecycle_token,
    new_nonce,
    new_request_id,
    parse_reply,
    request_subject,
    reply_subject,
)

ENVELOPE_V = 1
DEFAULT_DEADLINE_MS = 10_000
DESCRIBE_RETRY_S = 0.25
EXPECTED_POLL_S = 0.1  # a scatter re-reads its expected set this often (it may shrink)
MANAGER = "manager"

ERROR_CODES = frozenset(
    """bad-request unsupported-version op-mismatch class-mismatch target-mismatch sender-mismatch
    unauthenticated permission-denied not-found already-exists conflict contract-mismatch
    contract-invalid failed-precondition deadline-exceeded cancelled expired unavailable
    unimplemented resource-exhausted internal""".split()
)
_LABEL = r"[a-z0-9]([a-z0-9-]*[a-z0-9])?"
_EXT_CODE = re.compile(rf"^{_LABEL}(\.{_LABEL}){{2,}}$")
OUTCOMES = ("executed", "not-executed", "unknown")
BIND_REFUSED = "ai.cotal.ep.bind-refused"


def goal_progress_subject(space: str, endpoint: str, instance_id: str, epoch: int, caller: Caller,
                          goal_id: str) -> str:
    """``cotal.<s>.epe.<ep>.<iid>.<epoch>.goal.<cOwner>.<cActor>.<cUid>.<goalId>.progress``: where an
    action's progress and its terminal fact are published for the caller that started it."""
    if not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch {epoch!r} is not an unsigned integer")
    if not is_id_token(goal_id):
        raise ValueError(f"goal id {goal_id!r} is not an id token")
    if not is_lifecycle_token(instance_id):
        raise ValueError(f"instanceId {instance_id!r} is not a lifecycle token")
    return ".".join(["cotal", space_token(space), "epe", endpoint_token(endpoint), instance_id, str(epoch),
                     "goal", *caller.tokens(), goal_id, "progress"])


def goal_progress_pattern(space: str, endpoint: str, caller: Caller, goal_id: str) -> str:
    """The caller's read of one goal's progress from whichever instance and epoch executes it."""
    if not is_id_token(goal_id):
        raise ValueError(f"goal id {goal_id!r} is not an id token")
    return ".".join(["cotal", space_token(space), "epe", endpoint_token(endpoint), "*", "*", "goal",
                     *caller.tokens(), goal_id, "progress"])


def is_error_code(code: object) -> bool:
    return isinstance(code, str) and len(code.encode()) <= 64 and (code in ERROR_CODES or bool(_EXT_CODE.fullmatch(code)))


class EndpointError(Exception):
    """A refusal or failure with its §13.3 code; ``outcome`` missing means ``unknown``."""

    def __init__(self, code: str, message: str, *, details: list | None = None, outcome: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or []
        self.outcome = outcome

    @property
    def effective_outcome(self) -> str:
        return self.outcome or "unknown"

    def to_json(self) -> dict:
        e: dict = {"code": self.code, "message": self.message}
        if self.details:
            e["details"] = self.details
        if self.outcome:
            e["outcome"] = self.outcome
        return e


# ---- envelope -----------------------------------------------------------------------------


def build_request(
    *,
    endpoint: str,
    command: str,
    caller: Caller,
    input_digest: str | None = None,
    output_digest: str | None = None,
    args: Any = None,
    target: dict | None = None,
    bind: dict | None = None,
    deadline_ms: int = DEFAULT_DEADLINE_MS,
    reply_expected: bool = True,
    request_id: str | None = None,
    name: str = "cotal-tui",
) -> dict:
    op: dict = {"endpoint": endpoint, "command": command}
    if command != "describe":
        op["inputDigest"] = input_digest
        op["outputDigest"] = output_digest
    env: dict = {
        "v": ENVELOPE_V,
        "id": request_id or new_request_id(),
        "op": op,
        "class": "ephemeral",
        "replyExpected": reply_expected,
        "from": {"id": caller.principal, "name": name},
        "deadlineMs": deadline_ms,
    }
    if target is not None:
        env["target"] = target
    if bind is not None:
        env["bind"] = bind
    if args is not None:
        env["args"] = args
    return env


def _fail(code: str, msg: str) -> None:
    raise EndpointError(code, msg, outcome="not-executed")


def _is_wire_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2**53 - 1


def validate_request(parsed: ParsedRequest, raw: bytes) -> dict:
    """Shape-check a request body and its agreement with the subject (serving side).

    Raises :class:`EndpointError` with the catalog code the SPEC assigns (outcome
    ``not-executed``); returns the decoded envelope."""
    try:
        o = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        _fail("bad-request", "request is not UTF-8 JSON")
    if not isinstance(o, dict):
        _fail("bad-request", "request is not a JSON object")
    if o.get("v") != ENVELOPE_V:
        _fail("unsupported-version", f"request envelope version {o.get('v')!r} is not 1")
    if not is_id_token(o.get("id")):
        _fail("bad-request", "id is not a valid id token")
    op = o.get("op")
    if not isinstance(op, dict) or not isinstance(op.get("endpoint"), str) or not isinstance(op.get("command"), str):
        _fail("bad-request", "op is not {endpoint, command}")
    try:
        endpoint_token(op["endpoint"])
        check_command(op["command"])
    except ValueError as e:
        _fail("bad-request", str(e))
    for k in ("inputDigest", "outputDigest"):
        d = op.get(k)
        if d is None:
            if op["command"] != "describe":
                _fail("contract-mismatch", f"op.{k} is required on every command except describe")
        elif not isinstance(d, str) or not DIGEST_RE.fullmatch(d):
            _fail("bad-request", f"op.{k} is not a sha256:<hex> digest")
    if op["command"] == "describe" and ("inputDigest" in op or "outputDigest" in op):
        _fail("contract-mismatch", "describe pins no contract digests")
    cls = o.get("class")
    if cls not in ("ephemeral", "journal"):
        _fail("bad-request", f"class {cls!r} is not ephemeral|journal")
    if not isinstance(o.get("replyExpected"), bool):
        _fail("bad-request", "replyExpected is not a boolean")
    if "deadlineMs" in o:
        if not _is_wire_int(o["deadlineMs"]) or o["deadlineMs"] == 0:
            _fail("bad-request", "deadlineMs must be a positive integer")
    elif o["replyExpected"] or parsed.route == "all":
        _fail("bad-request", "deadlineMs is required for a call or scatter")
    if "target" in o:
        t = o["target"]
        if not isinstance(t, dict) or not isinstance(t.get("owner"), str) or not isinstance(t.get("actor"), str):
            _fail("bad-request", "target is not {owner, actor, lifecycleUid}")
        if not is_lifecycle_token(t.get("lifecycleUid")):
            _fail("bad-request", "target.lifecycleUid is not a lifecycle token")
    if "bind" in o:
        if op["command"] == "describe":
            _fail("bad-request", "describe carries no bind")
        b = o["bind"]
        if not isinstance(b, dict) or not is_lifecycle_token(b.get("instanceId")) or not _is_wire_int(b.get("epoch")):
            _fail("bad-request", "bind is not {instanceId, epoch}")
        if parsed.route == "all":
            _fail("bad-request", "a bind on the scatter rail has no coherent reading")
        if parsed.route == "inst" and b["instanceId"] != parsed.instance_id:
            _fail("bad-request", "bind.instanceId contradicts the inst-rail subject")
    args = o.get("args")
    if args is not None and not isinstance(args, dict):
        _fail("bad-request", "args is not a JSON object or null")
    f = o.get("from")
    if not isinstance(f, dict) or not isinstance(f.get("id"), str) or not isinstance(f.get("name"), str):
        _fail("bad-request", "from is not {id, name}")
    # agreement with the subject
    if op["endpoint"] != parsed.endpoint or op["command"] != parsed.command:
        _fail("op-mismatch", "op does not agree with the subject")
    t = parsed.target
    if t is None or t.mode == "self":
        if "target" in o:
            _fail("target-mismatch", "a body target on an untargeted or self request")
    else:
        if "target" not in o:
            _fail("target-mismatch", f"the {t.mode!r} form requires a body target")
        if o["target"]["owner"] != t.owner:
            _fail("target-mismatch", "target.owner does not equal the subject target owner")
        if t.mode == "handle" and (o["target"]["actor"] != t.actor or o["target"]["lifecycleUid"] != t.uid):
            _fail("target-mismatch", "handle-mode body target differs from the subject")
    if f["id"] != parsed.caller.principal:
        _fail("sender-mismatch", "from.id does not equal the subject sender principal")
    return o


def reply_body(request_id: str, *, data: Any = None, error: EndpointError | None = None) -> bytes:
    if error is not None:
        body: dict = {"v": ENVELOPE_V, "id": request_id, "ok": False, "error": error.to_json()}
    else:
        body = {"v": ENVELOPE_V, "id": request_id, "ok": True}
        if data is not None:
            body["data"] = data
    return json.dumps(body, separators=(",", ":")).encode()


def parse_reply_body(raw: bytes) -> dict:
    """Caller-side shape check of an EndpointReply; raises ValueError on anything malformed."""
    o = json.loads(raw.decode("utf-8"))
    if not isinstance(o, dict) or o.get("v") != ENVELOPE_V:
        raise ValueError("reply is not a v1 envelope")
    if not is_id_token(o.get("id")) or not isinstance(o.get("ok"), bool):
        raise ValueError("reply id/ok malformed")
    if o["ok"]:
        if "error" in o:
            raise ValueError("an ok reply carries an error")
    else:
        e = o.get("error")
        if "data" in o or not isinstance(e, dict) or not is_error_code(e.get("code")):
            raise ValueError("a failed reply must carry a catalog error and no data")
        if not isinstance(e.get("message"), str):
            raise ValueError("error.message is not a string")
        if "outcome" in e and e["outcome"] not in OUTCOMES:
            raise ValueError("error.outcome is not executed|not-executed|unknown")
    return o


@dataclass
class Reply:
    """One accepted reply, attributed from its subject."""

    ok: bool
    data: Any
    error: EndpointError | None
    instance_id: str
    epoch: int

    def unwrap(self) -> Any:
        if not self.ok:
            assert self.error is not None
            raise self.error
        return self.data


# ---- contracts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    name: str
    cls: str
    targeted: bool
    modes: tuple[str, ...]
    capability: str
    input_digest: str
    output_digest: str


def parse_cluster_document(doc: object) -> dict[str, Command]:
    if not isinstance(doc, dict) or not isinstance(doc.get("urn"), str):
        raise EndpointError("contract-invalid", "cluster document is not an object with a urn")
    cmds = doc.get("commands")
    if not isinstance(cmds, list) or not cmds:
        raise EndpointError("contract-invalid", "cluster document declares no commands")
    out: dict[str, Command] = {}
    for c in cmds:
        if not isinstance(c, dict) or not isinstance(c.get("name"), str):
            raise EndpointError("contract-invalid", "cluster command is not an object with a name")
        for k in ("inputDigest", "outputDigest"):
            if not isinstance(c.get(k), str) or not DIGEST_RE.fullmatch(c[k]):
                raise EndpointError("contract-invalid", f"command {c['name']} {k} is not a digest")
        out[c["name"]] = Command(
            c["name"], c.get("class", "ephemeral"), bool(c.get("targeted")), tuple(c.get("modes") or ()),
            str(c.get("capability", "")), c["inputDigest"], c["outputDigest"],
        )
    return out


async def publish_artifact(nc, space: str, document: object) -> str:
    """Store one canonical artifact in ``EPC_<space>`` at its digest; returns the digest."""
    d = digest(document)
    await nc.jetstream().publish(epc_subject(space, d), canonical_bytes(document), stream=epc_stream(space))
    return d


async def publish_closure(nc, space: str, document: object) -> str:
    """Store a single-document closure (root + manifest); returns the closure digest."""
    root = await publish_artifact(nc, space, document)
    closure = await publish_artifact(nc, space, manifest_for(root))
    assert closure == closure_digest(document)
    return closure


async def fetch_artifact(nc, space: str, ref: str) -> Any:
    """Direct-get one artifact by digest and verify its canonical bytes hash to ``ref``."""
    try:
        msg = await nc.jsm().get_last_msg(epc_stream(space), epc_subject(space, ref), direct=True)
    except Exception as e:
        raise EndpointError("not-found", f"contract artifact {ref} is not in {epc_stream(space)}: {e}") from None
    try:
        value = json.loads(msg.data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise EndpointError("contract-invalid", f"contract artifact {ref} is not JSON") from None
    if digest(value) != ref:
        raise EndpointError("contract-invalid", f"contract artifact does not hash to {ref}")
    return value


async def fetch_cluster(nc, space: str, closure: str) -> dict[str, Command]:
    manifest = await fetch_artifact(nc, space, closure)
    if (
        not isinstance(manifest, dict)
        or set(manifest) != {"v", "root", "members"}
        or manifest["v"] != 1
        or not isinstance(manifest["root"], str)
        or not DIGEST_RE.fullmatch(manifest["root"])
        or manifest["members"] != []
    ):
        raise EndpointError("contract-invalid", f"cluster manifest {closure} is not a single-document closure")
    return parse_cluster_document(await fetch_artifact(nc, space, manifest["root"]))


# ---- caller ---------------------------------------------------------------------------------


@dataclass
class Resolved:
    commands: dict[str, Command]
    instance_id: str
    epoch: int


@dataclass
class _Pending:
    nonce: str
    request_id: str
    endpoint: str
    replies: asyncio.Queue = field(default_factory=asyncio.Queue)


class EndpointClient:
    """Calls on one endpoint of one space, as one caller triple."""

    def __init__(self, nc, space: str, *, endpoint: str = MANAGER, caller: Caller | None = None, name: str = "cotal-tui"):
        self.nc = nc
        self.space = space_token(space)
        self.endpoint = endpoint
        bound = _bound_caller(nc)  # a minted control credential is pinned to its own triple
        self.caller = caller or (Caller(*bound) if bound else Caller.fresh())
        self.name = name
        self._cluster_cache: dict[str, dict[str, Command]] = {}
        self._resolved: Resolved | None = None

    async def _exchange(
        self, subject: str, env: dict, deadline_ms: int, *, gather: bool = False,
        expected: set[str] | None = None, retry: bool = False, nonce: str,
    ) -> list[Reply]:
        rsubj = reply_subject(self.space, self.endpoint, "0" * 26, 0, self.caller, nonce)
        # exact reply rail for this nonce: every responder instance/epoch, our triple, our nonce
        p = rsubj.split(".")
        p[5], p[6] = "*", "*"
        filt = ".".join(p)
        q: asyncio.Queue = asyncio.Queue()

        async def cb(msg) -> None:
            parsed = parse_reply(msg.subject)
            if parsed is None or parsed.endpoint != self.endpoint or parsed.nonce != nonce:
                return
            if parsed.caller != self.caller:
                return
            try:
                body = parse_reply_body(msg.data)
            except (ValueError, UnicodeDecodeError):
                return  # malformed body on our nonce is not a usable answer
            if body["id"] != env["id"]:
                return
            if body["ok"]:
                r = Reply(True, body.get("data"), None, parsed.instance_id, parsed.epoch)
            else:
                e = body["error"]
                r = Reply(False, None, EndpointError(e["code"], e["message"], details=e.get("details"),
                                                     outcome=e.get("outcome")), parsed.instance_id, parsed.epoch)
            q.put_nowait(r)

        mark = denial_mark(self.nc)
        sub = await self.nc.subscribe(filt, cb=cb)
        try:
            await self.nc.flush()  # the SUB is live before the request leaves
            payload = json.dumps(env, separators=(",", ":")).encode()
            try:  # a broker denial is permission-denied now, not a deadline later (§13.5)
                await publish_checked(self.nc, subject, payload)
                check_denied(self.nc, mark, "subscribe")  # the reply rail: refused by now, if at all
            except PermissionDenied as e:
                raise EndpointError("permission-denied", f"{e} (the credential does not carry this call)",
                                    outcome="not-executed") from None
            loop = asyncio.get_running_loop()
            end = loop.time() + deadline_ms / 1000
            next_retry = loop.time() + DESCRIBE_RETRY_S
            out: list[Reply] = []
            seen: set[str] = set()
            while True:
                now = loop.time()
                if now >= end:
                    break
                if gather and expected is not None and expected <= seen:
                    break  # everyone still expected answered (the caller may shrink ``expected``)
                wait = end - now
                if retry:
                    wait = min(wait, max(0.0, next_retry - now))
                if gather and expected is not None:
                    wait = min(wait, EXPECTED_POLL_S)
                try:
                    r = await asyncio.wait_for(q.get(), timeout=wait)
                except asyncio.TimeoutError:
                    if retry and loop.time() >= next_retry and loop.time() < end:
                        await self.nc.publish(subject, payload)
                        next_retry = loop.time() + DESCRIBE_RETRY_S
                    continue
                if not gather:
                    return [r]
                if r.instance_id in seen:
                    continue
                seen.add(r.instance_id)
                out.append(r)
            if gather:
                return out
            raise EndpointError(
                "deadline-exceeded",
                f"no {env['op']['command']} reply from {self.endpoint} within {deadline_ms} ms",
                outcome="unknown",
            )
        finally:
            try:
                await sub.unsubscribe()
            except Exception:
                pass

    async def describe(self, *, instance_id: str | None = None, deadline_ms: int = DEFAULT_DEADLINE_MS) -> Reply:
        nonce = new_nonce()
        route = "inst" if instance_id else "one"
        subject = request_subject(self.space, self.endpoint, "describe", self.caller, nonce,
                                  route=route, instance_id=instance_id)
        env = build_request(endpoint=self.endpoint, command="describe", caller=self.caller,
                            deadline_ms=deadline_ms, name=self.name)
        [r] = await self._exchange(subject, env, deadline_ms, retry=True, nonce=nonce)
        if not r.ok:
            raise r.error  # type: ignore[misc]
        return r

    async def resolve(self, *, instance_id: str | None = None, deadline_ms: int = DEFAULT_DEADLINE_MS) -> Resolved:
        """``describe`` then fetch and verify every cluster document it names."""
        r = await self.describe(instance_id=instance_id, deadline_ms=deadline_ms)
        try:
            clusters = r.data["descriptor"]["clusters"]
        except (TypeError, KeyError):
            raise EndpointError("contract-invalid", "describe answer carries no descriptor.clusters") from None
        commands: dict[str, Command] = {}
        for c in clusters:
            d = c.get("digest") if isinstance(c, dict) else None
            if not isinstance(d, str) or not DIGEST_RE.fullmatch(d):
                raise EndpointError("contract-invalid", "describe names a cluster without a digest")
            if d not in self._cluster_cache:
                self._cluster_cache[d] = await fetch_cluster(self.nc, self.space, d)
            visible = set(c.get("commands") or [])
            for name, cmd in self._cluster_cache[d].items():
                if not visible or name in visible:
                    commands[name] = cmd
        self._resolved = Resolved(commands, r.instance_id, r.epoch)
        return self._resolved

    async def _command(self, name: str, instance_id: str | None) -> Command:
        if self._resolved is None or name not in self._resolved.commands:
            await self.resolve(instance_id=instance_id)
        assert self._resolved is not None
        cmd = self._resolved.commands.get(name)
        if cmd is None:
            raise EndpointError("unimplemented", f"{self.endpoint} does not describe a {name!r} command")
        return cmd

    async def call(
        self,
        command: str,
        args: Any = None,
        *,
        instance_id: str | None = None,
        target: dict | None = None,
        mode: str = "any",
        bind: dict | None = None,
        deadline_ms: int = DEFAULT_DEADLINE_MS,
        request_id: str | None = None,
    ) -> Reply:
        """One call: class rail, or the instance rail when ``instance_id`` is given. An action's
        caller picks ``request_id`` (the goal id) to read its progress before the call leaves."""
        cmd = await self._command(command, instance_id)
        nonce = new_nonce()
        subj_target = Target(mode, target["owner"]) if target is not None else None
        subject = request_subject(self.space, self.endpoint, command, self.caller, nonce,
                                  route="inst" if instance_id else "one", instance_id=instance_id,
                                  target=subj_target)
        env = build_request(endpoint=self.endpoint, command=command, caller=self.caller,
                            input_digest=cmd.input_digest, output_digest=cmd.output_digest,
                            args=args, target=target, bind=bind, deadline_ms=deadline_ms, name=self.name,
                            request_id=request_id)
        [r] = await self._exchange(subject, env, deadline_ms, nonce=nonce)
        if bind is not None and r.ok and (r.instance_id, r.epoch) != (bind["instanceId"], bind["epoch"]):
            raise EndpointError("failed-precondition", "the answering incarnation is not the bound one",
                                outcome="unknown")
        return r

    async def scatter(
        self, command: str, args: Any = None, *, deadline_ms: int = 2000, expected: set[str] | None = None,
    ) -> list[Reply]:
        """Scatter on the ``all`` rail and gather one reply per instance until the deadline, or
        until every instance of ``expected`` answered (a set the caller may shrink meanwhile)."""
        cmd = await self._command(command, None)
        nonce = new_nonce()
        subject = request_subject(self.space, self.endpoint, command, self.caller, nonce, route="all")
        env = build_request(endpoint=self.endpoint, command=command, caller=self.caller,
                            input_digest=cmd.input_digest, output_digest=cmd.output_digest,
                            args=args, deadline_ms=deadline_ms, name=self.name)
        return await self._exchange(subject, env, deadline_ms, gather=True, expected=expected, nonce=nonce)


def void_digest() -> str:
    return closure_digest(VOID_SCHEMA)
