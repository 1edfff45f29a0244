"""The operator as a mesh participant: invisible until the first send, then a presence peer.

A console watches without registering anything (DESIGN "Acting on the mesh"). When the operator
first sends, this module starts a peer of its own: its **own** NATS connection (the observer's
never publishes), a presence record ``kind: endpoint``, ``role: operator`` under a fresh
``lifecycleUid``, refreshed every 2000 ms (SPEC §6) until :meth:`Participant.close`, which writes
the one final ``offline`` record a graceful disconnect may write. Every send is a JetStream
publish with ``Nats-Msg-Id`` = the message id (SPEC §8); envelopes and subjects come from
:mod:`meshview.wire.outbound`. Text is published exactly as given.

Concurrency and failure, as the reference console learned them (reference-console.md pain
point 9): concurrent sends share ONE start (a single task); a refused start withholds every
waiting send with one named error and the next send retries. A send is retried with the same
``Nats-Msg-Id`` until acked or its deadline passes, so a broker restart in between stores it
once (JetStream's duplicate window). The broker's asynchronous ``Permissions Violation for
Publish`` is matched to the publish it refused and raised as :class:`PublishDenied` at once
instead of waiting out a timeout. ``read_only`` refuses every send before anything touches the
network, and a DM to an endpoint is refused before the peer starts or anything is published.

Identity (SPEC §2): a static credential's principal when one is known (``--creds``/``--nkey``:
``local.<user nkey>``); otherwise ``local.<os user>_console`` named ``<os user>-console``.
``--as NAME`` names the peer; a dotted ``--as owner.actor`` is taken as a principal, and under a
credential it must equal the credential's (else :class:`IdentityMismatch`, before publishing).

Size: over 500 lines because one peer's lifecycle (identity, start, heartbeat, denial matching,
sends, close) shares one state; its wire shapes live in wire/outbound.py. Every front-end (the
composer, the palette, ``cotal chat``, ``cotal send``) only parses its input into a
:class:`Send`; :meth:`Participant.send` is the one way out, and :func:`reply_send` the one
rule for where a reply goes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import getpass
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import msgspec
from nats.aio.client import Client as NATS

from meshview.errors import MeshviewError, swallowed
from meshview.link.connect import (  # the creds' connId/principal
    ConnectError,
    ConnectTarget,
    _creds_public_key,
    _seed_public_key,
    connect,
    events_of,
)
from meshview.errors import PermissionDenied
from meshview.act.send import Original, Send, reply_send
from meshview.wire.decode import Delivery, decode_delivery
from meshview.wire.messages import (
    AgentCard,
    CotalMessage,
    EndpointRef,
    Presence,
    encode_message,
    encode_presence,
)
from meshview.wire.names import bucket_names, chat_stream, dm_stream, space_token
from meshview.wire.outbound import (
    DEV_OWNER,
    actor_fold,
    actor_token,
    build_card,
    build_message,
    delivery_subject,
    heartbeat_record,
    mentions_in,
    mint_lifecycle_uid,
    now_ms,
    offline_record,
    WRONG_LAST_SEQUENCE,
    presence_put_headers,
    presence_subject,
    publish_headers,
)
from meshview.wire.presence import HEARTBEAT_MS, decode_presence
from meshview.wire.subjects import is_identity_token, sanitize_token, split_principal

ROLE = "operator"
HEARTBEAT_S = HEARTBEAT_MS / 1000
SEND_TIMEOUT_S = 30.0  # a send retries (same Nats-Msg-Id) until acked or this passes
ATTEMPT_S = 2.0  # one JetStream publish attempt waits this long for its ack
CLOSE_TIMEOUT_S = 2.0  # the offline record on close gets at most this long
_DENIED_PUB = re.compile(r"permissions violation for publish to \"?([^\"\s']+)\"?", re.IGNORECASE)


# --------------------------------------------------------------------------- errors

class ParticipantError(MeshviewError):
    """A send or start that did not happen; ``str()`` is one sentence, no secrets."""


class ReadOnly(ParticipantError):
    """The session is read-only: nothing was sent and nothing touched the network."""


class PublishDenied(ParticipantError, PermissionDenied):
    """The broker refused a publish (async ``Permissions Violation for Publish``)."""


class StartRefused(ParticipantError):
    """The participant could not start (connect failure, no ack for its presence)."""


class NotAnAgent(ParticipantError):
    """A DM target is an endpoint (an observer, dashboard or another operator)."""


class UnknownPeer(ParticipantError):
    """A DM target name is not on the roster."""


class AmbiguousPeer(ParticipantError):
    """A DM target name matches several principals; ``candidates`` lists their ids."""

    def __init__(self, msg: str, candidates: list[str]) -> None:
        super().__init__(msg)
        self.candidates = candidates


class IdentityMismatch(ParticipantError):
    """An explicit principal differs from the credential's (SPEC §2: fail before publish)."""


class SendFailed(ParticipantError):
    """The broker never acknowledged the message (or refused it for another reason)."""


class RevisionConflict(SendFailed):
    """A presence put expected a revision of its key that someone else has written past."""


class IdentityTaken(ParticipantError):
    """The sender's principal has a live presence record this participant did not write (an
    agent or another console): nothing is published under it."""


class NoRoleHolder(ParticipantError):
    """An anycast to a role that no live agent holds, and the operator did not ask to queue."""


class Closed(ParticipantError):
    """The participant was closed."""


# --------------------------------------------------------------------------- identity

@dataclass(frozen=True, slots=True)
class Identity:
    owner: str
    actor: str
    name: str

    @property
    def id(self) -> str:
        return f"{self.owner}.{self.actor}"


def os_user() -> str:
    try:
        return getpass.getuser() or "operator"
    except Exception:  # noqa: BLE001 - no passwd entry in a container [counted: COTAL_LOG]
        swallowed("meshview.act.participant:os_user")
        return os.environ.get("USER") or "operator"


def bearer_principal(target: ConnectTarget) -> str | None:
    """On a per-user-auth mesh, the principal the Cotal bearer is bound to (``u_….<actor>``:
    the exchange's baseline ``agent`` view mints exactly that one, and the broker refuses any
    other subject); None without a bearer."""
    b = target.exchanged
    owner, actor = getattr(b, "owner", None), getattr(b, "actor", None)
    if not (owner and actor) and target.bearer:
        from meshview.link.exchange import token_claims

        claims = token_claims(target.bearer)
        raw_act = claims.get("act")
        act: dict = raw_act if isinstance(raw_act, dict) else {}
        owner, actor = act.get("owner") or claims.get("sub"), act.get("actor")
    if isinstance(owner, str) and isinstance(actor, str) and is_identity_token(owner) \
            and is_identity_token(actor):
        return f"{owner}.{actor}"
    return None


def user_mesh_unexchanged(target: ConnectTarget) -> bool:
    """A per-user-auth mesh whose bearer is not in hand yet (it comes from the exchange)."""
    return (target.mode == "user" or target.can_exchange) and not target.bearer \
        and target.exchanged is None


def credential_principal(target: ConnectTarget) -> str | None:
    """The principal a credential names: a user mesh's bearer's (``u_….<actor>``), a static
    credential's (static mode: ``local.<user nkey>``), if any."""
    user = bearer_principal(target)
    if user is not None:
        return user
    key = None
    if target.creds:
        key = _creds_public_key(target.creds)
    elif target.nkey:
        key = _seed_public_key(target.nkey)
    elif target.credential is not None:  # minted from a static mesh's seed
        key = getattr(target.credential, "public", None)
    if key and is_identity_token(key):
        return f"{DEV_OWNER}.{key}"
    return None


def resolve_identity(target: ConnectTarget, as_name: str | None = None, *,
                     user: str | None = None) -> Identity:
    """Who the operator is on the wire (pure; see the module docstring for the rules)."""
    cred = credential_principal(target)
    if as_name is not None:
        as_name = as_name.strip()
        if not as_name:
            raise ValueError("--as needs a name")
        if "." in as_name:
            pr = split_principal(as_name)
            if pr is None:
                raise ValueError(f"--as {as_name!r} is not a principal (owner.actor of "
                                 "letters, digits and _)")
            if cred is not None and as_name != cred:
                raise IdentityMismatch(
                    f"--as {as_name} differs from the credential's principal {cred}; "
                    "a client must adopt its credential's principal (SPEC §2).")
            return Identity(pr[0], pr[1], pr[1])
        if cred is not None:
            owner, actor = cred.split(".", 1)
            return Identity(owner, actor, as_name[:128])
        return Identity(DEV_OWNER, actor_token(as_name), as_name[:128])
    if cred is not None:
        owner, actor = cred.split(".", 1)
        return Identity(owner, actor, f"{user or os_user()}-console"[:128])
    name = f"{user or os_user()}-console"[:128]
    return Identity(DEV_OWNER, actor_token(name), name)


# --------------------------------------------------------------------------- results, roster

@dataclass(frozen=True, slots=True)
class Sent:
    """An acknowledged send: the envelope, where it went, and the JetStream ack."""

    message: CotalMessage
    subject: str
    payload: bytes  # exactly the bytes published
    stream: str
    seq: int
    duplicate: bool  # the broker already held this id (a retry after a lost ack)

    @property
    def id(self) -> str:
        return self.message.id


class RosterRow(Protocol):
    """What the DM and identity checks read of a roster row: the model's ``Peer`` and a
    :class:`RosterEntry` (a one-shot sender's roster, read from presence) both are one."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def role(self) -> str | None: ...


R = TypeVar("R", bound=RosterRow)  # a caller's own row type comes back from the checks


@dataclass(frozen=True, slots=True)
class RosterEntry:
    """What a DM check needs of a roster row (a :class:`RosterRow`, as model ``Peer`` is)."""

    id: str
    name: str
    kind: str
    status: str = "idle"
    role: str | None = None


def roster_from_presence(values: Iterable[tuple[str, bytes]]) -> list[RosterEntry]:
    """Roster rows from raw presence KV entries (key, value); bad records are skipped."""
    from meshview.wire.presence import decode_presence

    now = now_ms()
    out = []
    for key, value in values:
        d = decode_presence(key, "PUT", value, now)
        if d.action == "apply" and d.presence is not None:
            c = d.presence.card
            out.append(RosterEntry(c.id, c.name, c.kind, d.derived_status or "offline", c.role))
    return out


def taken_sentence(pid: str, holder: Presence | RosterRow) -> str:
    """Who holds ``pid`` (a live presence record or roster row), as one sentence."""
    from meshview.wire import sanitize

    card: AgentCard | RosterRow = holder.card if isinstance(holder, Presence) else holder
    name = sanitize.inline(card.name or pid, 64)
    who = ("the agent" if card.kind == "agent" else "another console" if card.role == ROLE
           else "the endpoint")
    held = card.id
    if held and held != pid:  # a look-alike (actor_fold), not the same key
        return (f"{pid} would read as {sanitize.inline(held, 128)} ({who} {name}, live on the "
                "roster); sending as it would pass for that identity, so nothing was sent - "
                "choose a distinct name with --as.")
    return (f"{pid} is held by {who} {name}, live on the roster; sending as it would take "
            "over its identity, so nothing was sent - choose a free name with --as.")


def role_holders(rows: Iterable[R], role: str) -> list[R]:
    """The live agents on ``rows`` that hold ``role`` (compared as its subject token)."""
    want = sanitize_token(role)
    return [p for p in rows if p.kind == "agent" and p.status != "offline"
            and p.role is not None and sanitize_token(p.role) == want]


# --------------------------------------------------------------------------- participant

class Participant:
    """The operator's peer. Construct freely (no network); the first send starts it.

    ``roster`` returns the current roster rows (objects with ``id``, ``name``, ``kind`` and
    optionally ``status``: the model's peers fit), used to resolve and vet DM targets.
    ``presence=False`` makes a one-shot sender (``cotal send``): a connection, no presence.
    """

    def __init__(
        self,
        target: ConnectTarget,
        *,
        name: str | None = None,
        read_only: bool = False,
        read_only_reason: str = "this session was started read-only",
        roster: Callable[[], Iterable[RosterRow]] | None = None,
        presence: bool = True,
        heartbeat_s: float = HEARTBEAT_S,
        send_timeout: float = SEND_TIMEOUT_S,
        role: str = ROLE,
        user: str | None = None,
        on_state: Callable[[str, str | None], None] | None = None,
    ) -> None:
        self.target = dataclasses.replace(target, name=target.name or "cotal-operator")
        self.space = space_token(target.space)
        self.read_only = read_only
        self.read_only_reason = read_only_reason
        self.roster = roster
        self.presence_enabled = presence
        self.heartbeat_s = heartbeat_s
        self.send_timeout = send_timeout
        self.role = role
        self.on_state = on_state
        self._as_name = name
        self._user = user
        self._identity: Identity | None = None
        self.nc: NATS | None = None
        self._js: Any = None
        self._start_task: asyncio.Task | None = None
        self._ready = False
        self._closed = False
        self._hb_task: asyncio.Task | None = None
        self._rebeat: asyncio.Task | None = None  # the extra beat right after a reconnect
        self._record: Presence | None = None
        self._revision = 0  # the presence key's revision we last wrote (0: none yet)
        self._taken: str | None = None  # why our principal is someone else's now
        self._denials: dict[str, list[asyncio.Future]] = {}
        self.starts = 0  # start attempts made (tests: concurrent sends share one)
        self.attempts = 0  # JetStream publish attempts (a retry re-sends the same Nats-Msg-Id)
        self.last_error: str | None = None
        self.last_heartbeat: int | None = None

    # ---------------------------------------------------------------- identity and state

    @property
    def identity(self) -> Identity:
        """Resolved lazily (reading a creds file is the only I/O) and then fixed."""
        if self._identity is None:
            try:
                self._identity = resolve_identity(self.target, self._as_name, user=self._user)
            except ValueError as e:
                raise ParticipantError(str(e)) from None
        return self._identity

    def _lifecycle_uid(self) -> str:
        """A user mesh's bearer carries the ledger's lifecycle uid (the callout checks it);
        elsewhere each start mints its own."""
        uid = getattr(self.target.exchanged, "lifecycle_uid", None)
        return uid if isinstance(uid, str) and uid else mint_lifecycle_uid()

    @property
    def id(self) -> str:
        return self.identity.id

    @property
    def ref(self) -> EndpointRef:
        ident = self.identity
        return EndpointRef(id=ident.id, name=ident.name, role=self.role)

    @property
    def active(self) -> bool:
        """True while the peer is started (on the roster when presence is enabled)."""
        return self._ready and not self._closed

    @property
    def connected(self) -> bool:
        return self.nc is not None and self.nc.is_connected

    def _state(self, state: str, detail: str | None = None) -> None:
        if self.on_state is not None:
            try:
                self.on_state(state, detail)
            except Exception:  # noqa: BLE001 - a listener never breaks the peer [counted: COTAL_LOG]
                swallowed("meshview.act.participant:Participant._state")

    # ---------------------------------------------------------------- start / close

    async def start(self) -> None:
        """Start once; concurrent callers wait for the same attempt. A failed attempt raises
        its named error in every waiter and the next call tries again."""
        if self._closed:
            raise Closed("the participant is closed; nothing was sent.")
        if self._ready:
            return
        t = self._start_task
        if t is None or (t.done() and (t.cancelled() or t.exception() is not None)):
            self.starts += 1
            t = self._start_task = asyncio.create_task(self._do_start(), name="participant:start")
        await asyncio.shield(t)

    async def _do_start(self) -> None:
        await self.settle_identity()
        ident = self.identity  # IdentityMismatch etc. before any network
        self._state("starting")
        try:
            try:
                nc, _ = await connect(self.target)
            except ConnectError as e:
                raise StartRefused(str(e)) from None
            self.nc = nc
            self._js = nc.jetstream(timeout=ATTEMPT_S)
            events_of(nc).on_error.append(self._on_nats_error)
            events_of(nc).on_reconnect.append(self._on_reconnect)
            current = await self._read_presence()  # before anything is published
            holder = self._live_holder(current)
            if holder is not None and not (not self.presence_enabled and self._may_share(holder)):
                self._taken = taken_sentence(ident.id, holder)
                raise IdentityTaken(self._taken)
            if self.presence_enabled:
                card = build_card(ident.owner, ident.actor, ident.name, kind="endpoint",
                                  role=self.role, description="operator console (cotal-tui)")
                now = now_ms()
                self._record = heartbeat_record(card, "idle", self._lifecycle_uid(), ts=now,
                                                status_since=now)
                self._revision = current[2] if current is not None else 0
                try:
                    await self._put_presence(self._record, deadline=self.target.timeout + ATTEMPT_S)
                except PublishDenied:
                    raise PublishDenied(
                        f"the broker refused the operator's presence record for {ident.id} "
                        "(permission denied); nothing was sent.") from None
                except SendFailed:
                    raise StartRefused(
                        f"the broker did not acknowledge the operator's presence record for "
                        f"{ident.id}; nothing was sent.") from None
                self._hb_task = asyncio.create_task(self._heartbeat_loop(),
                                                    name="participant:heartbeat")
        except BaseException as e:
            await self._teardown()
            self.last_error = str(e) if isinstance(e, ParticipantError) else None
            self._state("refused", self.last_error)
            raise
        self._ready = True
        self._state("active")

    async def close(self) -> None:
        """Leave: the final offline record (when the peer was up), then the connection."""
        if self._closed:
            return
        self._closed = True
        t = self._start_task
        if t is not None and not t.done():
            t.cancel()
            try:
                await t
            except BaseException:  # noqa: BLE001
                pass
        for task in (self._hb_task, self._rebeat):
            if task is not None:
                task.cancel()
                try:
                    await task
                except BaseException:  # noqa: BLE001
                    pass
        self._hb_task = self._rebeat = None
        if (self._ready and self._record is not None and self._taken is None
                and self.nc is not None and not self.nc.is_closed):
            try:  # only over our own record: never offline one somebody else wrote since
                await self._put_presence(offline_record(self._record),
                                         deadline=CLOSE_TIMEOUT_S, take=False)
            except Exception:  # noqa: BLE001 - the TTL retires us anyway [counted: COTAL_LOG]
                swallowed("meshview.act.participant:Participant.close")
        self._ready = False
        await self._teardown()
        self._state("closed")

    async def _teardown(self) -> None:
        nc, self.nc = self.nc, None
        if self._hb_task is not None:
            self._hb_task.cancel()
            self._hb_task = None
        for futs in self._denials.values():
            for f in futs:
                if not f.done():
                    f.cancel()
        self._denials.clear()
        if nc is None:
            return
        ev = events_of(nc)
        if self._on_nats_error in ev.on_error:
            ev.on_error.remove(self._on_nats_error)
        if self._on_reconnect in ev.on_reconnect:
            ev.on_reconnect.remove(self._on_reconnect)
        try:
            await asyncio.wait_for(nc.drain(), 2.0)
        except Exception:  # noqa: BLE001 - a drain that fails falls back to a close [counted: COTAL_LOG]
            swallowed("meshview.act.participant:Participant._teardown")
            try:
                await asyncio.wait_for(nc.close(), 1.0)
            except Exception:  # noqa: BLE001 - the connection is gone either way [counted: COTAL_LOG]
                swallowed("meshview.act.participant:Participant._teardown#2")

    # ---------------------------------------------------------------- presence

    async def _put_presence(self, rec: Presence, *, deadline: float, take: bool = True) -> None:
        """Put ``rec`` on the revision we last wrote (KV create/update), so a record written by
        someone else since is never overwritten. On a conflict the key is read: a live record
        that is not ours raises :class:`IdentityTaken` (and this peer stops writing); ours
        (a retry after a lost ack) or a dead one (offline, stale, deleted, expired) is taken
        over when ``take``; without ``take`` (the offline record on close) only ours is."""
        subject, payload = presence_subject(self.space, rec.card.id), encode_presence(rec)
        for _ in range(4):
            try:
                ack = await self._publish(subject, payload, presence_put_headers(self._revision),
                                          deadline=deadline)
            except RevisionConflict:
                current = await self._read_presence()
                holder = self._live_holder(current)
                if holder is not None:
                    self._taken = taken_sentence(rec.card.id, holder)
                    self._state("taken", self._taken)
                    raise IdentityTaken(self._taken) from None
                if current is None:
                    if not take:
                        return  # our record expired: nothing to mark offline
                    self._revision = 0
                elif take or self._is_mine(current):
                    self._revision = current[2]
                else:
                    return  # a dead record of someone else's: leave it as it is
                continue
            self._revision = int(ack.seq)
            self.last_heartbeat = int(rec.ts)
            return
        raise SendFailed(f"the presence record of {rec.card.id} kept changing under this "
                         "operator; nothing was written.")

    async def _read_presence(self) -> tuple[str, bytes, int] | None:
        """Our presence key as (operation, value, revision), or None when it holds nothing.

        A last-per-subject consumer filtered to the one key (the operator profile may create
        consumers on the presence bucket but has no direct get); it lapses on its own."""
        from nats.js import api

        nc, js = self.nc, self._js
        if nc is None or js is None:
            raise Closed("the participant is not connected; nothing was sent.")
        subject = presence_subject(self.space, self.id)
        got: asyncio.Future = asyncio.get_running_loop().create_future()

        async def on_msg(m: Any) -> None:
            if (m.reply or "").startswith("$JS.ACK.") and not got.done():
                got.set_result(m)

        sub = await nc.subscribe(nc.new_inbox(), cb=on_msg)
        try:
            try:
                info = await js.add_consumer(
                    f"KV_{bucket_names(self.space).presence}", api.ConsumerConfig(
                        name=f"cotal_claim_{secrets.token_hex(8)}", deliver_subject=sub.subject,
                        filter_subject=subject, deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT,
                        ack_policy=api.AckPolicy.NONE, mem_storage=True, inactive_threshold=2.0,
                        num_replicas=1), timeout=ATTEMPT_S)
                if not got.done() and not info.num_pending:
                    return None
                m = await asyncio.wait_for(asyncio.shield(got), ATTEMPT_S)
            except Exception as e:  # noqa: BLE001 - one sentence: we cannot tell who holds it
                desc = getattr(e, "description", None) or str(e) or "no answer from the broker"
                raise StartRefused(f"could not check whether {self.id} is already on the "
                                   f"roster ({desc}); nothing was sent.") from None
            op = (m.headers or {}).get("KV-Operation", "PUT")
            return op, m.data or b"", int(m.metadata.sequence.stream)
        finally:
            try:
                await sub.unsubscribe()
            except Exception:  # noqa: BLE001 - teardown of a subscription that is ending anyway [counted: COTAL_LOG]
                swallowed("meshview.act.participant:Participant._read_presence")

    def _live_holder(self, current: tuple[str, bytes, int] | None) -> Presence | None:
        """The live record on our key that this participant did not write, if any."""
        if current is None:
            return None
        op, value, _ = current
        d = decode_presence(self.id, op, value, now_ms())
        if d.action != "apply" or d.presence is None or d.derived_status == "offline":
            return None
        return None if self._is_mine(current, d.presence) else d.presence

    def _is_mine(self, current: tuple[str, bytes, int], rec: Presence | None = None) -> bool:
        if self._record is None:
            return False
        if rec is None:
            d = decode_presence(self.id, current[0], current[1], now_ms())
            rec = d.presence
        return rec is not None and rec.lifecycleUid == self._record.lifecycleUid

    def _may_share(self, holder: Presence) -> bool:
        """A one-shot sender under the default identity shares its own console's principal
        (so replies land in the inbox the console shows); never an agent's, never an ``--as``."""
        c = holder.card
        return self._as_name is None and c.kind == "endpoint" and c.role == ROLE

    def held_by(self, rows: Iterable[R]) -> R | None:
        """The live roster row (not this peer's own) holding our principal, if any: a check
        before anything starts (pure); the start re-checks the presence key itself."""
        if self.active:
            return None
        return self.holder_among(rows)

    def holder_among(self, rows: Iterable[R]) -> R | None:
        """The live row (not ours) that holds our principal, else one whose actor reads the
        same (``actor_fold``), else None."""
        me = self.id
        owner, _, actor = me.partition(".")
        fold = actor_fold(actor)
        alike = None
        for r in rows:
            rid = r.id
            if not rid or r.status == "offline":
                continue
            if rid == me:
                return r
            r_owner, _, r_actor = rid.partition(".")
            if alike is None and r_owner == owner and actor_fold(r_actor) == fold \
                    and not (self._as_name is None and self._may_share_row(r)):
                alike = r  # ``ada!`` (local.ada_) beside a live local.ada reads as ada
        return alike

    def _may_share_row(self, row: RosterRow) -> bool:
        return row.kind == "endpoint" and row.role == ROLE

    async def _heartbeat_loop(self) -> None:
        while self._taken is None:
            await asyncio.sleep(self.heartbeat_s)
            await self._beat()

    async def _beat(self) -> None:
        if self._record is None or self._closed or self._taken is not None:
            return  # never a live beat after (or racing) the offline record
        self._record = msgspec.structs.replace(self._record, ts=now_ms())
        try:
            await self._put_presence(self._record, deadline=max(self.heartbeat_s, ATTEMPT_S))
            self.last_error = None
        except IdentityTaken as e:  # somebody else writes our key now: stop, never fight it
            self.last_error = str(e)
        except ParticipantError as e:  # broker away or a denial: say so, keep beating
            self.last_error = str(e)
            self._state("error", self.last_error)

    async def _on_reconnect(self) -> None:
        # a newer heartbeat right away: peers should not wait a whole interval to see us back
        if self._ready and not self._closed and self._hb_task is not None:
            if self._rebeat is None or self._rebeat.done():
                self._rebeat = asyncio.get_running_loop().create_task(self._beat())

    async def _on_nats_error(self, e: Exception) -> None:
        m = _DENIED_PUB.search(str(e))
        if not m:
            return
        subj = m.group(1).lower()  # the server lowercases the whole error line
        for f in self._denials.get(subj, ()):
            if not f.done():
                f.set_result(subj)

    # ---------------------------------------------------------------- publishing

    async def _publish(self, subject: str, payload: bytes, headers: dict[str, str], *,
                       deadline: float) -> Any:
        """JetStream publish with retries (same headers, so the same Nats-Msg-Id) until acked,
        refused, or ``deadline`` seconds pass."""
        if self._js is None or self.nc is None:
            raise Closed("the participant is not connected; nothing was sent.")
        loop = asyncio.get_running_loop()
        denied: asyncio.Future = loop.create_future()
        self._denials.setdefault(subject.lower(), []).append(denied)
        end = time.monotonic() + deadline
        from nats.errors import (
            ConnectionClosedError,
            MaxPayloadError,
            NoRespondersError,
            OutboundBufferLimitError,
        )
        from nats.errors import (
            TimeoutError as NatsTimeout,
        )
        from nats.js.errors import APIError, NoStreamResponseError

        try:
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    raise SendFailed(f"no acknowledgement from the broker for {subject} "
                                     f"within {deadline:g}s.")
                self.attempts += 1
                attempt = asyncio.ensure_future(self._js.publish(
                    subject, payload, timeout=min(ATTEMPT_S, left), headers=dict(headers) or None))
                done, _ = await asyncio.wait({attempt, denied},
                                             return_when=asyncio.FIRST_COMPLETED)
                if denied in done:
                    attempt.cancel()
                    if denied.cancelled():
                        raise Closed("the participant was closed; the message may not have "
                                     "been sent.")
                    raise PublishDenied(f"the broker refused to let {self.id} publish on "
                                        f"{subject} (permission denied).")
                try:
                    return attempt.result()
                except MaxPayloadError:
                    raise SendFailed("the message is larger than the broker's maximum "
                                     "payload; nothing was sent.") from None
                except APIError as e:
                    if isinstance(e, NoStreamResponseError):
                        pass  # no stream answered (yet): JetStream still coming up
                    elif e.err_code == WRONG_LAST_SEQUENCE:
                        raise RevisionConflict(f"{subject} was written by someone else since "
                                               "(wrong last revision).") from None
                    else:
                        desc = e.description or str(e)
                        raise SendFailed(f"the broker refused the message: {desc}.") from None
                except (TimeoutError, NatsTimeout, NoRespondersError, OutboundBufferLimitError):
                    pass
                except ConnectionClosedError:
                    raise SendFailed("the connection to the broker is closed; the message "
                                     "may not have been sent.") from None
                if self.nc is None or self.nc.is_closed:
                    raise SendFailed("the connection to the broker is closed; the message "
                                     "may not have been sent.")
                # disconnected or slow: wait a little; the retry carries the same Nats-Msg-Id
                await asyncio.sleep(min(0.2, max(0.0, end - time.monotonic())))
        finally:
            lst = self._denials.get(subject.lower())
            if lst is not None:
                try:
                    lst.remove(denied)
                except ValueError:
                    pass
                if not lst:
                    self._denials.pop(subject.lower(), None)

    def check_writable(self) -> None:
        """Refuse, before anything touches the network: read-only, a principal someone else
        holds, or a closed participant."""
        if self.read_only:
            raise ReadOnly(f"read-only - {self.read_only_reason}; nothing was sent.")
        if self._taken is not None:
            raise IdentityTaken(self._taken)
        if self._closed:
            raise Closed("the participant is closed; nothing was sent.")

    async def send_message(self, msg: CotalMessage) -> Sent:
        """Publish one prepared envelope (after starting the peer) and wait for its ack."""
        self.check_writable()
        if msg.from_.id != self.id:
            raise ParticipantError(f"the envelope is from {msg.from_.id}, not {self.id}.")
        subject = delivery_subject(msg)
        payload = encode_message(msg)
        await self.start()
        ack = await self._publish(subject, payload, publish_headers(msg),
                                  deadline=self.send_timeout)
        return Sent(msg, subject, payload, ack.stream, ack.seq, bool(ack.duplicate))

    def _build(self, text: str, **route: Any) -> CotalMessage:
        try:
            return build_message(self.space, self.ref, text, **route)
        except ValueError as e:
            raise ParticipantError(f"{e}.".replace("..", ".")) from None

    # ---------------------------------------------------------------- sends

    def prepare(self, send: Send, original: Original | None = None) -> CotalMessage:
        """Vet ``send`` and mint its envelope (its id is the Nats-Msg-Id) without sending: a
        caller that keeps it can retry an unacknowledged send with the same id, so a broker
        that stored the first attempt stores it once. A ``reply`` is routed from ``original``
        (:func:`reply_send`). An ask that no live agent holds is refused (it would wait in
        the TASK stream, as a DM to an unknown agent would go nowhere) unless ``queue`` says
        the operator means it for a future holder; without a roster (a bare participant)
        there is nothing to check against, and every sender in cotal_tui supplies one."""
        self.check_writable()
        if send.kind == "reply":
            routed = reply_send(original, send.text, self.id) if original is not None else None
            if routed is None:
                raise ParticipantError("the original message has no single routing field.")
            send = routed
        route = dict(reply_to=send.reply_to, context_id=send.context_id)
        target = send.target or ""
        if send.kind == "channel":
            return self._build(send.text, channel=target.removeprefix("#"),
                               mentions=mentions_in(send.text), **route)
        if send.kind == "dm":
            return self._build(send.text, to=self.resolve_agent(target), **route)
        if send.kind != "ask":
            raise ParticipantError(f"unknown send kind {send.kind!r}.")
        r = target.removeprefix("@")
        if not r.strip():
            raise ParticipantError("an ask needs a role.")
        if not send.queue and self.roster is not None and not role_holders(self.roster(), r):
            from meshview.wire import sanitize

            raise NoRoleHolder(
                f"no live agent holds the role {sanitize.inline(r, 64)!r} on the roster, so nothing "
                "was sent; an ask waits in the TASK stream for a holder - queue it for a "
                "future holder with --queue.")
        return self._build(send.text, to_service=r, **route)

    async def send(self, send: Send, original: Original | None = None) -> Sent:
        """Send one message and wait for its ack. A channel post carries the ``@name``
        mentions in its text; a DM goes to an agent only (an endpoint target is refused before
        the peer starts or anything is published); an ask is an anycast that exactly one
        holder of the role takes (SPEC §4); a reply joins the original's thread."""
        await self.settle_identity()
        return await self.send_message(self.prepare(send, original))

    async def settle_identity(self) -> None:
        """On a per-user-auth mesh the sender is the signed-in user's principal, which only the
        exchange's bearer names: exchange (the baseline view, as the reference's send does)
        before the envelope is built. Refused, before anything is published, when this mesh
        gives no way to a bearer."""
        if not user_mesh_unexchanged(self.target) or self.read_only:
            return
        if not self.target.can_exchange:
            raise StartRefused(
                "sending on a per-user-auth mesh needs the signed-in user's bearer: give the auth "
                "service's exchange and an IdP token file (or --bearer-file); nothing was sent.")
        from meshview.link.connect import exchanged_target

        try:
            self.target = await exchanged_target(dataclasses.replace(self.target, role="operator"))
        except ConnectError as e:
            raise StartRefused(f"{e}; nothing was sent.") from None
        self._identity = None  # resolved again, from the bearer

    # ---------------------------------------------------------------- DM targets

    def resolve_agent(self, target: str) -> str:
        """The principal id of a DM target; raises NotAnAgent / UnknownPeer / AmbiguousPeer.

        A principal id that is not on the roster is accepted (an agent that left still has
        a DM inbox); a name must be on it. Pure: nothing is sent, nothing starts."""
        from meshview.model.resolve import AmbiguousName, candidates_of, matches, resolve

        t = target.strip().removeprefix("@").strip()
        if not t:
            raise UnknownPeer("a DM needs a recipient.")
        rows = list(self.roster()) if self.roster is not None else []
        cands = matches(t, candidates_of(rows))
        if len(cands) > 1:  # live or offline, a namesake is a candidate: never pick one
            try:
                resolve(t, cands, outcome="nothing was sent")
            except AmbiguousName as e:
                raise AmbiguousPeer(str(e), e.ids) from None
        if cands:
            p = cands[0].item
            if p.id == self.id or p.kind != "agent":
                raise NotAnAgent(f"{p.name} is an endpoint, not an agent; DMs go to agents "
                                 "only, and nothing was sent.")
            return p.id
        if split_principal(t) is not None:
            if t == self.id:
                raise NotAnAgent("that is this operator's own id; DMs go to agents only, "
                                 "and nothing was sent.")
            return t
        where = "on the roster" if self.roster is not None else "(no roster to look it up)"
        raise UnknownPeer(f"no agent named {t!r} {where}; nothing was sent.")

    # ---------------------------------------------------------------- one-shot helpers

    async def connect_only(self) -> None:
        """Open the connection without presence (a one-shot sender reads the roster first)."""
        if self.presence_enabled:
            raise ParticipantError("connect_only is for presence=False participants.")
        await self.start()

    async def read_roster(self, timeout: float = 3.0) -> list[RosterEntry]:
        """The presence bucket's current rows (one watch of the initial state, then stop)."""
        from meshview.observe import kvwatch

        if self.nc is None:
            raise Closed("the participant is not connected.")
        try:
            values = await asyncio.wait_for(
                kvwatch.current_values(self.nc, bucket_names(self.space).presence), timeout)
        except TimeoutError:
            raise ParticipantError(f"the roster could not be read within {timeout:g}s.") from None
        except ParticipantError:
            raise
        except Exception as e:  # noqa: BLE001 - e.g. no presence bucket in this space
            raise ParticipantError(f"the roster could not be read: {str(e) or type(e).__name__}.") from None
        return roster_from_presence(values.items())

    async def find_copies(self, message_id: str, *, depth: int = 2000,
                          timeout: float = 5.0) -> list[Delivery]:
        """Every copy of a message id among the newest ``depth`` channel and DM messages (the
        streams that keep history; anycast has none), any sender's, in stream order
        (meshview/observe/streamorder.py). Ids are the senders' own, so one id may name messages of
        several senders: :func:`meshview.model.originals.pick_reply` says which one a reply means.
        Empty when not found or unreadable."""
        if self.nc is None:
            raise Closed("the participant is not connected.")
        from nats.js import api

        from meshview.observe.streamorder import Stored, stored_ms, stream_order

        js = self.nc.jetstream(timeout=timeout)
        found: list[list[Stored]] = []
        for stream in (chat_stream(self.space), dm_stream(self.space)):
            rows: list[Stored] = []
            found.append(rows)
            try:
                info = await js.stream_info(stream)
            except Exception:  # noqa: BLE001 - no grant or no stream: look elsewhere [counted: COTAL_LOG]
                swallowed("meshview.act.participant:Participant.find_copies")
                continue
            last, first = info.state.last_seq, info.state.first_seq
            if not info.state.messages:
                continue
            start = max(first, last - depth + 1)
            ci = None
            psub = None
            try:
                ci = await js.add_consumer(stream, api.ConsumerConfig(
                    deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start,
                    ack_policy=api.AckPolicy.NONE, mem_storage=True, inactive_threshold=30.0))
                psub = await js.pull_subscribe_bind(consumer=ci.name, stream=stream)
                pending = ci.num_pending or 0  # nats-py's ConsumerInfo leaves it None when absent
                while pending > 0:
                    msgs = await psub.fetch(min(pending, 256), timeout=timeout)
                    if not msgs:
                        break
                    for m in msgs:
                        pending = m.metadata.num_pending
                        seq = m.metadata.sequence.stream
                        if message_id.encode() in (m.data or b""):
                            d = decode_delivery(m.subject, m.data, history=True)
                            if type(d) is Delivery and d.message.id == message_id:
                                rows.append(Stored(stream, seq, stored_ms(m), d))
                        if seq >= last:
                            pending = 0
            except Exception:  # noqa: BLE001 - history is best effort [counted: COTAL_LOG]
                swallowed("meshview.act.participant:Participant.find_copies#2")
            finally:
                if psub is not None:
                    try:
                        await psub.unsubscribe()
                    except Exception:  # noqa: BLE001 - teardown of a subscription that is ending anyway [counted: COTAL_LOG]
                        swallowed("meshview.act.participant:Participant.find_copies#3")
                if ci is not None:
                    try:
                        await js.delete_consumer(stream, ci.name)
                    except Exception:  # noqa: BLE001 - cleanup of a one-off consumer; the broker reaps it anyway [counted: COTAL_LOG]
                        swallowed("meshview.act.participant:Participant.find_copies#4")
        return stream_order(*found)
