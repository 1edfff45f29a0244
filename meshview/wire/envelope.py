"""The §13.3 request envelope and reply, the error catalog, and §13.7 cluster documents.

What a caller builds and what a responder checks, both sides of one contract:
:func:`validate_request` checks an envelope against the subject it arrived on and refuses
with the catalog code the SPEC assigns; :func:`parse_reply_body` is the caller's shape check.
Pure and network-free (the calls themselves are ``attach.control.endpoint``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from meshview.errors import MeshviewError
from meshview.wire.canonical import DIGEST_RE
from meshview.wire.endpoint import (
    TRIPLE_MODES,
    Caller,
    ParsedRequest,
    check_command,
    endpoint_token,
    is_id_token,
    is_lifecycle_token,
    new_request_id,
)

ENVELOPE_V = 1
DEFAULT_DEADLINE_MS = 10_000

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


def is_error_code(code: object) -> bool:
    return isinstance(code, str) and len(code.encode()) <= 64 and (code in ERROR_CODES or bool(_EXT_CODE.fullmatch(code)))


class EndpointError(MeshviewError):
    """A refusal or failure with its §13.3 code; ``outcome`` missing means ``unknown``."""

    def __init__(self, code: str, message: str, *, details: list | None = None, outcome: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        # a manager's details are untrusted: only a list of objects is read
        self.details = [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []
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


# ---- the bound-incarnation fence (§13.2 "Incarnation admission", §13.3 ``bind``) -----------


def bind_refused_detail(endpoint: str, command: str, bound: dict, served: tuple[str, int]) -> dict:
    """The ``details[]`` entry a responder sends when it refuses a ``bind`` it is not: what the
    request declared (``boundTo``) and who refused (``servedBy``), so the caller can derive both."""
    return {"kind": BIND_REFUSED, "endpoint": endpoint, "command": command,
            "boundTo": {"instanceId": bound["instanceId"], "epoch": bound["epoch"]},
            "servedBy": {"instanceId": served[0], "epoch": served[1]}}


def bind_refusal_marked(error: EndpointError | None) -> bool:
    """The reply *claims* a bind refusal; whether the claim is believable is
    :func:`bind_refusal_incoherence`, whether a re-issue is licensed :func:`refused_before_effect`."""
    return error is not None and any(isinstance(d, dict) and d.get("kind") == BIND_REFUSED
                                     for d in error.details)


def refused_before_effect(error: EndpointError | None) -> bool:
    """A coherent bind refusal that also says ``not-executed``: the command did not run, so the
    caller may locate again and re-issue. A missing outcome is ``unknown`` and licenses nothing."""
    return bind_refusal_marked(error) and error is not None and error.outcome == "not-executed"


def _incarnation(v: object) -> tuple[str, int] | None:
    if isinstance(v, dict) and isinstance(v.get("instanceId"), str) and _is_wire_int(v.get("epoch")):
        return v["instanceId"], v["epoch"]
    return None


def bind_refusal_incoherence(error: EndpointError | None, bind: dict | None,
                             responder: tuple[str, int]) -> str | None:
    """Why a reply marked as a bind refusal cannot be honoured, or None when it can (or is no
    bind refusal). ``responder`` is the ``(instanceId, epoch)`` the reply *subject* attributes it
    to. A refusal to a request that carried no bind, one from the very incarnation the request
    bound, one whose ``boundTo`` is not this request's bind, or whose ``servedBy`` contradicts the
    subject, proves nothing: the caller rejects it as ``internal`` (SPEC §13.2, §13.3)."""
    if not bind_refusal_marked(error):
        return None
    assert error is not None
    iid, epoch = responder
    if bind is None:
        return "the manager answered with a bind refusal to a request that carried no bind"
    bound = _incarnation(bind)
    if bound == (iid, epoch):
        return (f"manager {iid} refused as the wrong incarnation, but the reply comes from exactly the "
                f"bound one (epoch {epoch}); a reply does not get to contradict its own attribution")
    detail = next(d for d in error.details if isinstance(d, dict) and d.get("kind") == BIND_REFUSED)
    if _incarnation(detail.get("boundTo")) != bound:
        return "the bind refusal does not name the bind this request carried"
    if _incarnation(detail.get("servedBy")) != (iid, epoch):
        return f"the bind refusal names another refusing incarnation than the reply subject ({iid} epoch {epoch})"
    return None


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
        if t.mode in TRIPLE_MODES and (o["target"]["actor"] != t.actor or o["target"]["lifecycleUid"] != t.uid):
            _fail("target-mismatch", f"{t.mode}-mode body target differs from the subject")
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
