"""Workflow-run calls on a space's manager (SPEC §14, contract revision 22; unchanged since 21): ``run-ps``,
``run-status``, ``run-answer`` (and its amendment), ``run-start``, ``run-resume``.

Each call opens one connection on the target (the credential its mesh mode mints), resolves the
manager's describe and reads the command's target form from it (``run-answer`` moved to ``self``
at revision 16: never assumed), and sends exactly the contract's keys. ``by`` is never sent: the
manager takes the answerer from the caller's credential. Replies are read through
:mod:`meshview.wire.runs`, which refuses a shape outside the contract by name.

``run-start`` binds the run to an issued caller on the ``ep.v1`` rail (SPEC §13.15): the endpoint
client rides that rail when the connection has an accepted row, and refuses the start locally, by
name, before anything is sent when it has none.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from attach.errors import AttachLayerError
from meshview.errors import swallowing
from meshview.link.connect import ConnectError, ConnectTarget
from meshview.link.connect import connect as mesh_connect
from meshview.wire.endpoint import AuthzTarget, SubjectError, new_nonce, request_subject
from meshview.wire.envelope import EndpointError, build_request
from meshview.wire.names import space_token
from meshview.wire.runs import RunRow, RunShapeError, RunStatus, is_run_id, parse_run_ps, parse_run_status

from attach.control.endpoint import EndpointClient, Reply

CLIENT_NAME = "cotal-runs"
READ_DEADLINE_MS = 10_000
LAUNCH_DEADLINE_MS = 30_000  # a start or resume answers once the drive activated (runs.md §8.7)


class RunsError(AttachLayerError):
    """A run call that did not happen: the manager's refusal (its code, sentence and details) or
    why it never reached one."""

    def __init__(self, code: str, message: str, details: list | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = list(details or [])


@dataclass(frozen=True)
class AnswerResult:
    token: str
    answer_id: str
    settle: dict | None
    supersedes: str | None
    raw: dict
    instance_id: str


async def _open(target: ConnectTarget) -> Any:
    try:
        nc, _ = await mesh_connect(dataclasses.replace(target, name=CLIENT_NAME))
    except ConnectError as e:
        raise RunsError("unavailable", str(e)) from None
    nc.options["allow_reconnect"] = False
    return nc


async def _with(target: ConnectTarget, body: Callable[[EndpointClient], Any]) -> Any:
    nc = await _open(target)
    try:
        return await body(EndpointClient(nc, space_token(target.space), name=CLIENT_NAME))
    except RunsError:
        raise
    except EndpointError as e:
        raise RunsError(e.code, e.message, e.details) from None
    except (RunShapeError, SubjectError) as e:
        raise RunsError("contract-invalid" if isinstance(e, RunShapeError) else "bad-request", str(e)) from None
    finally:
        with swallowing("attach.control.runs:_with"):
            await asyncio.wait_for(nc.close(), 2.0)


def _data(r: Reply) -> Any:
    if not r.ok:
        assert r.error is not None
        raise RunsError(r.error.code, r.error.message, r.error.details)
    return r.data


def _check_run(run_id: str) -> str:
    if not is_run_id(run_id):
        raise RunsError("bad-request", f"{run_id!r} is not a run id (run- and 32 lowercase hex, as cotal runs ps "
                        "prints it)")
    return run_id


async def run_ps(target: ConnectTarget, *, on: str | None = None, endpoint: str | None = None) -> list[RunRow]:
    """Every run the answering manager reports, each row marked with the instance that answered."""
    async def body(ep: EndpointClient) -> list[RunRow]:
        r = await ep.call("run-ps", {"endpoint": endpoint} if endpoint else {}, instance_id=on,
                          deadline_ms=READ_DEADLINE_MS)
        return [dataclasses.replace(row, instance=r.instance_id) for row in parse_run_ps(_data(r))]

    return await _with(target, body)


async def run_status(target: ConnectTarget, run_id: str, *, on: str | None = None,
                     endpoint: str | None = None) -> RunStatus:
    _check_run(run_id)

    async def body(ep: EndpointClient) -> RunStatus:
        args = {"runId": run_id, **({"endpoint": endpoint} if endpoint else {})}
        r = await ep.call("run-status", args, instance_id=on, deadline_ms=READ_DEADLINE_MS)
        return parse_run_status(_data(r))

    return await _with(target, body)


async def _call_in_mode(ep: EndpointClient, command: str, args: Any, *, on: str | None,
                        deadline_ms: int) -> Reply:
    """One call in the form the manager's describe declares for ``command``: untargeted, or the
    ``self`` form (no body target; the subject carries ``self``). Other forms need a target this
    family never has, so they are refused by name."""
    resolved = await ep.resolve(instance_id=on)
    cmd = resolved.commands.get(command)
    if cmd is None:
        raise RunsError("unimplemented", f"the manager does not describe a {command} command")
    if not cmd.targeted:
        return await ep.call(command, args, instance_id=on, deadline_ms=deadline_ms)
    if "self" not in cmd.modes:
        raise RunsError("unimplemented", f"the manager describes {command} in the {'/'.join(cmd.modes)} form, "
                        "which names a target this client has none for")
    nonce = new_nonce()
    subject = request_subject(ep.space, ep.endpoint, command, ep.caller, nonce, route="inst" if on else "one",
                              instance_id=on, target=AuthzTarget("self"))
    env = build_request(endpoint=ep.endpoint, command=command, caller=ep.caller, input_digest=cmd.input_digest,
                        output_digest=cmd.output_digest, args=args, deadline_ms=deadline_ms, name=ep.name)
    q: asyncio.Queue = asyncio.Queue()
    sub = await ep.open_call(subject, env, nonce, q)
    try:
        try:
            return await asyncio.wait_for(q.get(), timeout=deadline_ms / 1000)
        except asyncio.TimeoutError:
            raise RunsError("deadline-exceeded", f"no {command} reply from {ep.endpoint} within {deadline_ms} ms; "
                            "its outcome is unknown, so it is not sent again") from None
    finally:
        with swallowing("attach.control.runs:_call_in_mode"):
            await sub.unsubscribe()


async def run_answer(target: ConnectTarget, run_id: str, step_key: str, value: Any = None, *,
                     amend: bool = False, artifact: str | None = None, has_value: bool = True,
                     on: str | None = None, endpoint: str | None = None) -> AnswerResult:
    """Answer (or, ``amend``, re-answer) the pause at ``step_key``, exactly as the journal shows
    it. A write: never repeated after an unknown outcome."""
    _check_run(run_id)
    if not isinstance(step_key, str) or not step_key:
        raise RunsError("bad-request", "a step key is required (as cotal runs journal prints it)")
    args: dict = {"runId": run_id, "stepKey": step_key}
    if endpoint:
        args["endpoint"] = endpoint
    if has_value:
        args["value"] = value
    if artifact:
        args["artifact"] = artifact
    if amend:
        args["amend"] = True

    async def body(ep: EndpointClient) -> AnswerResult:
        r = await _call_in_mode(ep, "run-answer", args, on=on, deadline_ms=READ_DEADLINE_MS)
        d = _data(r)
        if not isinstance(d, dict) or not isinstance(d.get("token"), str) or not isinstance(d.get("answerId"), str):
            raise RunsError("contract-invalid", "the run-answer reply carries no token and answerId")
        return AnswerResult(d["token"], d["answerId"], d.get("settle") if isinstance(d.get("settle"), dict) else None,
                            d.get("supersedes") if isinstance(d.get("supersedes"), str) else None, d, r.instance_id)

    return await _with(target, body)


async def run_start(target: ConnectTarget, source: str, *, file: str | None = None, timeout: str | None = None,
                    on: str | None = None) -> str:
    """Start a program on the manager; its id once the drive activated. Without an issued caller
    (no accepted row on this connection) the endpoint client refuses before anything is sent."""
    if not source.strip():
        raise RunsError("bad-request", "the program is empty")

    async def body(ep: EndpointClient) -> str:
        args = {"source": source, **({"file": file} if file else {}), **({"timeout": timeout} if timeout else {})}
        r = await _call_in_mode(ep, "run-start", args, on=on, deadline_ms=LAUNCH_DEADLINE_MS)
        return str(_data(r)["runId"])

    return await _with(target, body)


async def run_resume(target: ConnectTarget, run_id: str, *, timeout: str | None = None,
                     on: str | None = None) -> str:
    _check_run(run_id)

    async def body(ep: EndpointClient) -> str:
        args = {"runId": run_id, **({"timeout": timeout} if timeout else {})}
        r = await _call_in_mode(ep, "run-resume", args, on=on, deadline_ms=LAUNCH_DEADLINE_MS)
        d = _data(r)
        if not isinstance(d, dict) or not isinstance(d.get("runId"), str):
            raise RunsError("contract-invalid", "the run-resume reply carries no runId")
        return d["runId"]

    return await _with(target, body)
