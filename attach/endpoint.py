"""§13 endpoint calls: describe, contract artifacts in ``EPC_<space>``, call and scatter.

The caller side (:class:`EndpointClient`) subscribes to its exact reply subject and flushes
before publishing, accepts a reply only on the matching endpoint and nonce with the echoed
request id, and learns the answering ``(instanceId, epoch)`` from the reply *subject*. The
envelope, the error catalog and the subjects are wire rules (``meshview.wire.envelope``,
``meshview.wire.endpoint``); this module is the behaviour that carries them.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from meshview.connect import SubjectDenied, caller_of as _bound_caller, check_denied, denial_mark, publish_checked
from meshview.wire.canonical import DIGEST_RE, canonical_bytes, closure_digest, digest, manifest_for
from meshview.wire.endpoint import (
    MANAGER,
    AuthzTarget,
    Caller,
    epc_subject,
    new_nonce,
    parse_reply,
    reply_filter,
    request_subject,
)
from meshview.wire.envelope import (
    DEFAULT_DEADLINE_MS,
    Command,
    EndpointError,
    bind_refusal_incoherence,
    build_request,
    parse_cluster_document,
    parse_reply_body,
)
from meshview.sanitize import inline
from meshview.wire.names import epc_stream, space_token

DESCRIBE_RETRY_S = 0.25  # the first re-poll of an unanswered describe; each later one waits twice as long
DESCRIBE_RETRY_MAX_S = 2.0
EXPECTED_POLL_S = 0.1  # a scatter re-reads its expected set this often (it may shrink)


@dataclass
class Reply:
    """One accepted reply, attributed from its subject."""

    ok: bool
    data: Any
    error: EndpointError | None
    instance_id: str
    epoch: int
    caller_refused: bool = False  # the caller rejected what the manager said (``error`` says why)

    def unwrap(self) -> Any:
        if not self.ok:
            assert self.error is not None
            raise self.error
        return self.data


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

    def _reply_of(self, msg, nonce: str, env: dict) -> Reply | None:
        """The reply ``msg`` is, if it answers ``env`` on ``nonce``: the subject's endpoint, nonce
        and caller match and the body echoes the request id. A bind refusal that cannot be
        honoured (§13.2) comes back as the caller's own ``internal`` refusal."""
        parsed = parse_reply(msg.subject)
        if parsed is None or parsed.endpoint != self.endpoint or parsed.nonce != nonce:
            return None
        if parsed.caller != self.caller:
            return None
        try:
            body = parse_reply_body(msg.data)
        except (ValueError, UnicodeDecodeError):
            return None  # malformed body on our nonce is not a usable answer
        if body["id"] != env["id"]:
            return None
        if body["ok"]:
            return Reply(True, body.get("data"), None, parsed.instance_id, parsed.epoch)
        e = body["error"]
        err = EndpointError(e["code"], e["message"], details=e.get("details"), outcome=e.get("outcome"))
        why = bind_refusal_incoherence(err, env.get("bind"), (parsed.instance_id, parsed.epoch))
        if why is not None:  # no details, no outcome (unknown): nothing here licenses a re-issue
            err = EndpointError("internal", f"{env['op']['command']}: {why}")
            return Reply(False, None, err, parsed.instance_id, parsed.epoch, caller_refused=True)
        return Reply(False, None, err, parsed.instance_id, parsed.epoch)

    async def open_call(self, subject: str, env: dict, nonce: str, q: asyncio.Queue):
        """One call on the wire: its exact reply rail subscribed and flushed, then the request
        published once. Returns the subscription (the caller unsubscribes it); every reply it
        accepts lands in ``q`` (a scatter's own gather, attach/scatter.py, reads it too)."""
        filt = reply_filter(self.space, self.endpoint, self.caller, nonce)

        async def cb(msg) -> None:
            r = self._reply_of(msg, nonce, env)
            if r is not None:
                q.put_nowait(r)

        mark = denial_mark(self.nc)
        sub = await self.nc.subscribe(filt, cb=cb)
        try:
            await self.nc.flush()  # the SUB is live before the request leaves
            payload = json.dumps(env, separators=(",", ":")).encode()
            try:  # a broker denial is permission-denied now, not a deadline later (§13.5)
                await publish_checked(self.nc, subject, payload)
                check_denied(self.nc, mark, "subscribe")  # the reply rail: refused by now, if at all
            except SubjectDenied as e:
                raise EndpointError("permission-denied", f"{e} (the credential does not carry this call)",
                                    outcome="not-executed") from None
        except BaseException:
            await _unsubscribe(sub)
            raise
        return sub

    async def _exchange(
        self, subject: str, env: dict, deadline_ms: int, *, gather: bool = False,
        expected: set[str] | None = None, nonce: str,
    ) -> list[Reply]:
        q: asyncio.Queue = asyncio.Queue()
        sub = await self.open_call(subject, env, nonce, q)
        try:
            loop = asyncio.get_running_loop()
            end = loop.time() + deadline_ms / 1000
            out: list[Reply] = []
            seen: set[str] = set()
            while True:
                now = loop.time()
                if now >= end:
                    break
                if gather and expected is not None and expected <= seen:
                    break  # everyone still expected answered (the caller may shrink ``expected``)
                wait = end - now
                if gather and expected is not None:
                    wait = min(wait, EXPECTED_POLL_S)
                try:
                    r = await asyncio.wait_for(q.get(), timeout=wait)
                except asyncio.TimeoutError:
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
            await _unsubscribe(sub)

    async def describe(self, *, instance_id: str | None = None, deadline_ms: int = DEFAULT_DEADLINE_MS) -> Reply:
        """``describe``, polled until the deadline: a manager that is not subscribed yet misses a
        publish. Every poll is a call of its own, with its own nonce and request id (one
        outstanding call per nonce, §13.2); earlier polls stay open, so a slow answer still counts."""
        route = "inst" if instance_id else "one"
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_ms / 1000
        q: asyncio.Queue = asyncio.Queue()
        subs = []
        interval = DESCRIBE_RETRY_S
        next_poll = loop.time()
        try:
            while True:
                now = loop.time()
                if now >= end:
                    raise EndpointError("deadline-exceeded",
                                        f"no describe reply from {self.endpoint} within {deadline_ms} ms",
                                        outcome="unknown")
                if now >= next_poll:
                    nonce = new_nonce()
                    subject = request_subject(self.space, self.endpoint, "describe", self.caller, nonce,
                                              route=route, instance_id=instance_id)
                    remaining = max(1, int((end - now) * 1000))
                    env = build_request(endpoint=self.endpoint, command="describe", caller=self.caller,
                                        deadline_ms=remaining, name=self.name)
                    subs.append(await self.open_call(subject, env, nonce, q))
                    next_poll = now + interval
                    interval = min(interval * 2, DESCRIBE_RETRY_MAX_S)
                try:
                    r = await asyncio.wait_for(q.get(), timeout=max(0.0, min(end, next_poll) - loop.time()))
                except asyncio.TimeoutError:
                    continue
                if not r.ok:
                    raise r.error  # type: ignore[misc]
                return r
        finally:
            for sub in subs:
                await _unsubscribe(sub)

    async def resolve(self, *, instance_id: str | None = None, deadline_ms: int = DEFAULT_DEADLINE_MS) -> Resolved:
        """``describe`` then fetch and verify every cluster document it names."""
        r = await self.describe(instance_id=instance_id, deadline_ms=deadline_ms)
        try:
            clusters = r.data["descriptor"]["clusters"]
            protocol = r.data["descriptor"].get("protocol")
        except (TypeError, KeyError, AttributeError):
            raise EndpointError("contract-invalid", "describe answer carries no descriptor.clusters") from None
        if not isinstance(clusters, list):
            raise EndpointError("contract-invalid", "describe answer's descriptor.clusters is not a list")
        if isinstance(protocol, dict) and protocol.get("v") != 1:  # §13.7: no descriptor is better
            raise EndpointError("unsupported-version", f"manager {r.instance_id} describes protocol "
                                f"{inline(protocol.get('v'), 16)}; this client implements protocol 1",
                                outcome="not-executed")
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
        subj_target = AuthzTarget(mode, target["owner"]) if target is not None else None
        subject = request_subject(self.space, self.endpoint, command, self.caller, nonce,
                                  route="inst" if instance_id else "one", instance_id=instance_id,
                                  target=subj_target)
        env = build_request(endpoint=self.endpoint, command=command, caller=self.caller,
                            input_digest=cmd.input_digest, output_digest=cmd.output_digest,
                            args=args, target=target, bind=bind, deadline_ms=deadline_ms, name=self.name,
                            request_id=request_id)
        [r] = await self._exchange(subject, env, deadline_ms, nonce=nonce)
        if r.caller_refused:
            raise r.error  # type: ignore[misc]  # an incoherent bind refusal: never a re-locate
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



async def _unsubscribe(sub) -> None:
    try:
        await sub.unsubscribe()
    except Exception:
        pass
