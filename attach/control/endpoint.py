"""§13 endpoint calls: describe, contract artifacts in ``EPC_<space>``, call and scatter.

The caller side (:class:`EndpointClient`) subscribes to its exact reply subject and flushes
before publishing, accepts a reply only on the matching endpoint and nonce with the echoed
request id, and learns the answering ``(instanceId, epoch)`` from the reply *subject*. The
envelope, the error catalog and the subjects are wire rules (``meshview.wire.envelope``,
``meshview.wire.endpoint``); this module is the behaviour that carries them.

Issued callers (§13.15): before its first call a client learns its connection's binding. The
accepted-row token is derived from the connection's own connect name (``connId``, the nonce its
reply inbox ``_INBOX_<connId>`` is scoped by), the row is Direct-Got from ``cotal_accepted_<space>``
within a bounded wait, and checked against this space and the caller's own triple. With a row,
every call on that connection (describe included) rides ``ep.v1`` with the row's generation; with
none it stays on the legacy rail, and a command that needs the binding is refused here by name,
never sent on the legacy rail. The binding is read once per connection and never switched: a
credential whose ceiling changed is a new connection under a new nonce, which reads its own row.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from meshview.errors import swallowed
from meshview.link.auth import Credential
from meshview.link.connect import (
    SubjectDenied,
    caller_of as _bound_caller,
    check_denied,
    denial_mark,
    publish_checked,
    request_checked,
    target_of,
)
from meshview.wire.canonical import DIGEST_RE, canonical_bytes, closure_digest, digest, manifest_for
from meshview.wire.endpoint import (
    MANAGER,
    AuthzTarget,
    Caller,
    epc_subject,
    new_nonce,
    parse_reply,
    parse_request,
    reply_filter,
    request_subject,
)
from meshview.wire.issued import IssuedRowError, accepted_bucket, accepted_token, direct_get_subject, parse_row
from meshview.wire.envelope import (
    DEFAULT_DEADLINE_MS,
    Command,
    EndpointError,
    bind_refusal_incoherence,
    build_request,
    parse_cluster_document,
    parse_reply_body,
)
from meshview.wire.sanitize import inline
from meshview.wire.names import epc_stream, space_token

if TYPE_CHECKING:
    from nats.aio.client import Client as NATS
    from nats.aio.msg import Msg
    from nats.aio.subscription import Subscription

DESCRIBE_RETRY_S = 0.25  # the first re-poll of an unanswered describe; each later one waits twice as long
DESCRIBE_RETRY_MAX_S = 2.0
EXPECTED_POLL_S = 0.1  # a scatter re-reads its expected set this often (it may shrink)
ACCEPTED_READ_S = 3.0  # the accepted-row read's bound (the reference's readAcceptedRow timeout)
UNBOUND_CALLER = "ai.cotal.ep.unbound-caller-authority"  # §13.15 refusal detail kind
# §13.15: run-start binds a run to the caller's issued authority on every mesh; on a participant
# (user-auth) manager a caller-requested resume and every principal answer need it too
BINDING_COMMANDS = frozenset({"run-start"})
# a key the responder's input schema does not declare is refused here, never sent: the reference
# CLI checks each request against the contract the manager serves (UPGRADING 0.69.0)
UNDECLARED_ARG = "undeclared-arg"
USER_BINDING_COMMANDS = frozenset({"run-start", "run-resume", "run-answer"})


@dataclass(frozen=True)
class Binding:
    """What a connection learned of its issued caller authority: the generation its accepted row
    names (``None``: no row, the legacy rail), why there is none, or the refusal a row that names
    another space or caller is."""

    generation: str | None
    why: str = ""
    refused: EndpointError | None = None


_BINDINGS: "weakref.WeakKeyDictionary[Any, Binding]" = weakref.WeakKeyDictionary()
_BINDING_LOCKS: "weakref.WeakKeyDictionary[Any, asyncio.Lock]" = weakref.WeakKeyDictionary()


def conn_id_of(nc: NATS) -> str | None:
    """The connection's connect name as its reply inbox is scoped (``_INBOX_<connId>``); ``None``
    for a connection with the default inbox (an open-mesh client: nothing issues to it)."""
    prefix = nc.new_inbox().split(".", 1)[0]  # ``<prefix>.<nuid>``: the prefix the connection was made with
    if not prefix.startswith("_INBOX_") or len(prefix) <= len("_INBOX_"):
        return None
    return prefix[len("_INBOX_"):]


async def read_binding(nc: NATS, space: str, triple: tuple[str, str, str]) -> Binding:
    """Read this connection's accepted row once (§13.15) and keep what it says for the life of the
    connection. No connect name, a refused read, a ``Status`` answer (404: no row; 503: no
    store) or no answer within :data:`ACCEPTED_READ_S` all mean no issued authority."""
    cached = _BINDINGS.get(nc)
    if cached is not None:
        return cached
    lock = _BINDING_LOCKS.get(nc)
    if lock is None:
        lock = _BINDING_LOCKS[nc] = asyncio.Lock()
    async with lock:
        cached = _BINDINGS.get(nc)
        if cached is None:
            cached = _BINDINGS[nc] = await _read_binding(nc, space_token(space), triple)
        return cached


async def _read_binding(nc: NATS, space: str, triple: tuple[str, str, str]) -> Binding:
    from nats.errors import NoRespondersError

    conn_id = conn_id_of(nc)
    if conn_id is None:
        return Binding(None, "the connection names no connect nonce to derive an accepted-row token from")
    t = target_of(nc)
    if t is not None and not t.user_mode and not (isinstance(t.credential, Credential) and t.credential.issued):
        # a credential this process minted and did not issue holds no read of an accepted row:
        # asking would only be a broker violation (a user bearer's issuance is the callout's)
        return Binding(None, "the connection's credential was not minted as an issuance")
    bucket = accepted_bucket(space)
    try:
        msg = await request_checked(nc, direct_get_subject(space, accepted_token(conn_id)), b"",
                                    timeout=ACCEPTED_READ_S)
    except SubjectDenied:
        return Binding(None, f"the credential holds no read of its accepted row in {bucket}")
    except NoRespondersError:
        return Binding(None, f"the space has no accepted-row store ({bucket})")
    except (asyncio.TimeoutError, TimeoutError):
        return Binding(None, f"no answer from {bucket} within {ACCEPTED_READ_S:g} s")
    except Exception as e:  # noqa: BLE001 - any failed read is no authority, named
        return Binding(None, f"the accepted-row read failed ({type(e).__name__})")
    status = (msg.headers or {}).get("Status") if getattr(msg, "headers", None) else None
    if status == "503":
        return Binding(None, f"the space has no accepted-row store ({bucket})")
    if status:
        return Binding(None, f"{bucket} holds no accepted row for this connection (status {inline(status, 8)})")
    try:
        ref = parse_row(msg.data, space=space, triple=triple)
    except IssuedRowError as e:
        return Binding(None, str(e), refused=EndpointError(
            "permission-denied", f"this connection's accepted row is refused: {e} (SPEC 13.15); nothing was sent",
            outcome="not-executed"))
    return Binding(ref.generation)


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


async def publish_artifact(nc: NATS, space: str, document: object) -> str:
    """Store one canonical artifact in ``EPC_<space>`` at its digest; returns the digest."""
    d = digest(document)
    await nc.jetstream().publish(epc_subject(space, d), canonical_bytes(document), stream=epc_stream(space))
    return d


async def publish_closure(nc: NATS, space: str, document: object) -> str:
    """Store a single-document closure (root + manifest); returns the closure digest."""
    root = await publish_artifact(nc, space, document)
    closure = await publish_artifact(nc, space, manifest_for(root))
    assert closure == closure_digest(document)
    return closure


async def fetch_artifact(nc: NATS, space: str, ref: str) -> Any:
    """Direct-get one artifact by digest and verify its canonical bytes hash to ``ref``."""
    try:
        msg = await nc.jsm().get_last_msg(epc_stream(space), epc_subject(space, ref), direct=True)
    except Exception as e:  # noqa: BLE001 - any failed read is said as not-found, with its text
        raise EndpointError("not-found", f"contract artifact {ref} is not in {epc_stream(space)}: {e}") from None
    try:
        value = json.loads((msg.data or b"").decode("utf-8"))  # no body: not JSON either
    except (UnicodeDecodeError, ValueError):
        raise EndpointError("contract-invalid", f"contract artifact {ref} is not JSON") from None
    if digest(value) != ref:
        raise EndpointError("contract-invalid", f"contract artifact does not hash to {ref}")
    return value


async def fetch_cluster(nc: NATS, space: str, closure: str) -> dict[str, Command]:
    return (await fetch_cluster_revision(nc, space, closure))[0]


async def fetch_cluster_revision(nc: NATS, space: str, closure: str) -> tuple[dict[str, Command], int | None]:
    """The cluster document at ``closure``: its commands and its declared ``revision`` (``None``
    when it declares none a client can read)."""
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
    doc = await fetch_artifact(nc, space, manifest["root"])
    commands = parse_cluster_document(doc)
    rev = doc.get("revision")
    return commands, (rev if isinstance(rev, int) and not isinstance(rev, bool) and 0 <= rev < 2**31 else None)


# ---- caller ---------------------------------------------------------------------------------


@dataclass
class Resolved:
    commands: dict[str, Command]
    instance_id: str
    epoch: int


class EndpointClient:
    """Calls on one endpoint of one space, as one caller triple."""

    def __init__(self, nc: NATS, space: str, *, endpoint: str = MANAGER, caller: Caller | None = None,
                 name: str = "cotal-tui") -> None:
        self.nc = nc
        self.space = space_token(space)
        self.endpoint = endpoint
        bound = _bound_caller(nc)  # a minted control credential is pinned to its own triple
        self.caller = caller or (Caller(*bound) if bound else Caller.fresh())
        self.name = name
        self._cluster_cache: dict[str, dict[str, Command]] = {}
        self._schema_cache: dict[str, dict | None] = {}  # input closure digest -> its schema root
        self._revisions: dict[str, int | None] = {}  # cluster digest -> its revision (the last resolve's)
        self._cluster_revs: dict[str, int | None] = {}
        self._resolved: Resolved | None = None
        self._binding: Binding | None = None

    @property
    def generation(self) -> str | None:
        """The issued generation this connection's calls ride ``ep.v1`` with (``None``: legacy,
        or not learned yet; :meth:`bind` learns it)."""
        return self._binding.generation if self._binding is not None else None

    async def bind(self) -> Binding:
        """The connection's binding (§13.15), read once per connection and shared by every
        client on it. A caller that is not the connection's own keeps the legacy rail: an
        accepted row binds only the triple the credential was issued to."""
        if self._binding is None:
            bound = _bound_caller(self.nc)
            if bound is not None and Caller(*bound) != self.caller:
                self._binding = Binding(None, "this caller is not the connection's own")
            else:
                self._binding = await read_binding(self.nc, self.space,
                                                   (self.caller.owner, self.caller.actor, self.caller.uid))
        return self._binding

    def _needs_binding(self, command: str) -> bool:
        t = target_of(self.nc)
        return command in (USER_BINDING_COMMANDS if t is not None and t.user_mode else BINDING_COMMANDS)

    async def _bound_for(self, command: str) -> str | None:
        """The generation ``command`` rides with, or the local refusal: a row naming another space
        or caller refuses every call; no row refuses a command that needs the binding."""
        b = await self.bind()
        if b.refused is not None:
            raise b.refused
        if b.generation is None and self._needs_binding(command):
            c = self.caller
            raise EndpointError(
                "permission-denied",
                f"{command} binds to the caller's issued authority (SPEC 13.15), and this connection has no "
                f"accepted row ({b.why}); it was not sent on the legacy rail. Reconnect with an issued "
                "credential (a static mesh's control instrument, or a user-auth mesh's manager-caller view)",
                details=[{"kind": UNBOUND_CALLER, "owner": c.owner, "actor": c.actor, "uid": c.uid}],
                outcome="not-executed")
        return b.generation

    def _on_rail(self, subject: str) -> str:
        """``subject`` on this connection's rail: a request a caller built for the other rail is
        rebuilt with the same tokens, so no call on an issued connection leaves on the legacy rail."""
        p = parse_request(subject)
        if p is None or p.generation == self.generation:
            return subject
        return request_subject(self.space, p.endpoint, p.command, p.caller, p.nonce, route=p.route,
                               instance_id=p.instance_id, target=p.target, generation=self.generation)

    def _reply_of(self, msg: Msg, nonce: str, env: dict) -> Reply | None:
        """The reply ``msg`` is, if it answers ``env`` on ``nonce``: the subject's endpoint, nonce
        and caller match and the body echoes the request id. A bind refusal that cannot be
        honoured (§13.2) comes back as the caller's own ``internal`` refusal."""
        parsed = parse_reply(msg.subject)
        if parsed is None or parsed.endpoint != self.endpoint or parsed.nonce != nonce:
            return None
        if parsed.generation != self.generation:
            return None  # the reply rides the rail the request rode (§13.2)
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

    async def open_call(self, subject: str, env: dict, nonce: str, q: asyncio.Queue[Reply]) -> Subscription:
        """One call on the wire: its exact reply rail subscribed and flushed, then the request
        published once. Returns the subscription (the caller unsubscribes it); every reply it
        accepts lands in ``q`` (a scatter's own gather, attach/control/scatter.py, reads it too)."""
        p = parse_request(subject)
        await self._bound_for(p.command if p is not None else env.get("op", {}).get("command", ""))
        subject = self._on_rail(subject)
        filt = reply_filter(self.space, self.endpoint, self.caller, nonce, generation=self.generation)

        async def cb(msg: Msg) -> None:
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
        generation = await self._bound_for("describe")
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_ms / 1000
        q: asyncio.Queue[Reply] = asyncio.Queue()
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
                                              route=route, instance_id=instance_id, generation=generation)
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
                    assert r.error is not None  # a refused reply always carries its error
                    raise r.error
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
        self._revisions = {}
        for c in clusters:
            d = c.get("digest") if isinstance(c, dict) else None
            if not isinstance(d, str) or not DIGEST_RE.fullmatch(d):
                raise EndpointError("contract-invalid", "describe names a cluster without a digest")
            if d not in self._cluster_cache:
                self._cluster_cache[d], self._cluster_revs[d] = await fetch_cluster_revision(self.nc, self.space, d)
            self._revisions[d] = self._cluster_revs.get(d)
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

    async def input_schema(self, command: str, instance_id: str | None = None) -> dict | None:
        """The responder's declared input schema for ``command`` (its closure, read from
        ``EPC_<space>`` at the pinned digest and verified), or ``None`` when it cannot be read:
        the responder's own validation then decides."""
        cmd = await self._command(command, instance_id)
        ref = cmd.input_digest
        if ref not in self._schema_cache:
            schema: dict | None = None
            try:
                manifest = await fetch_artifact(self.nc, self.space, ref)
                if isinstance(manifest, dict) and manifest.get("members") == [] and isinstance(manifest.get("root"), str):
                    root = await fetch_artifact(self.nc, self.space, manifest["root"])
                    schema = root if isinstance(root, dict) else None
            except EndpointError:
                schema = None
            self._schema_cache[ref] = schema
        return self._schema_cache[ref]

    async def _check_declared(self, command: str, args: Any, instance_id: str | None) -> None:
        """Refuse (``bad-request``, detail ``undeclared-arg``, not sent) an ``args`` key the
        responder's closed input schema does not declare: a manager one revision behind refuses
        the whole request, so the caller learns which key, before anything runs."""
        if not isinstance(args, dict) or not args:
            return
        schema = await self.input_schema(command, instance_id)
        if schema is None or schema.get("additionalProperties") is not False:
            return
        props = schema.get("properties")
        declared = set(props) if isinstance(props, dict) else set()
        extra = sorted(k for k in args if k not in declared)
        if extra:
            rev = self._resolved_revision()
            shown = ", ".join(inline(k, 40) for k in extra[:8])
            raise EndpointError(
                "bad-request",
                f"{UNDECLARED_ARG}: {self.endpoint} {command}{rev} declares no {shown}; nothing was sent",
                details=[{"kind": UNDECLARED_ARG, "command": command, "keys": extra[:8]}],
                outcome="not-executed")

    def _resolved_revision(self) -> str:
        rev = self.revision
        return f" (contract revision {rev})" if rev is not None else ""

    @property
    def revision(self) -> int | None:
        """The cluster revision the last :meth:`resolve` read (``None`` before one, or when it
        named several clusters)."""
        docs = list(self._revisions.values())
        return docs[0] if len(docs) == 1 else None

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
        caller picks ``request_id`` (the goal id) to read its progress before the call leaves.
        A command that needs the issued binding is refused before anything is sent when the
        connection has none (§13.15)."""
        generation = await self._bound_for(command)
        cmd = await self._command(command, instance_id)
        await self._check_declared(command, args, instance_id)
        nonce = new_nonce()
        subj_target = AuthzTarget(mode, target["owner"]) if target is not None else None
        subject = request_subject(self.space, self.endpoint, command, self.caller, nonce,
                                  route="inst" if instance_id else "one", instance_id=instance_id,
                                  target=subj_target, generation=generation)
        env = build_request(endpoint=self.endpoint, command=command, caller=self.caller,
                            input_digest=cmd.input_digest, output_digest=cmd.output_digest,
                            args=args, target=target, bind=bind, deadline_ms=deadline_ms, name=self.name,
                            request_id=request_id)
        [r] = await self._exchange(subject, env, deadline_ms, nonce=nonce)
        if r.caller_refused:  # an incoherent bind refusal: never a re-locate
            assert r.error is not None  # a refused reply always carries its error
            raise r.error
        if bind is not None and r.ok and (r.instance_id, r.epoch) != (bind["instanceId"], bind["epoch"]):
            raise EndpointError("failed-precondition", "the answering incarnation is not the bound one",
                                outcome="unknown")
        return r

    async def scatter(
        self, command: str, args: Any = None, *, deadline_ms: int = 2000, expected: set[str] | None = None,
    ) -> list[Reply]:
        """Scatter on the ``all`` rail and gather one reply per instance until the deadline, or
        until every instance of ``expected`` answered (a set the caller may shrink meanwhile)."""
        generation = await self._bound_for(command)
        cmd = await self._command(command, None)
        nonce = new_nonce()
        subject = request_subject(self.space, self.endpoint, command, self.caller, nonce, route="all",
                                  generation=generation)
        env = build_request(endpoint=self.endpoint, command=command, caller=self.caller,
                            input_digest=cmd.input_digest, output_digest=cmd.output_digest,
                            args=args, deadline_ms=deadline_ms, name=self.name)
        return await self._exchange(subject, env, deadline_ms, gather=True, expected=expected, nonce=nonce)



async def _unsubscribe(sub: Subscription) -> None:
    try:
        await sub.unsubscribe()
    except Exception:  # noqa: BLE001 - teardown of a subscription that is ending anyway [counted: COTAL_LOG]
        swallowed("attach.control.endpoint:_unsubscribe")
