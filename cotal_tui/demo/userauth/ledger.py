"""The actors ledger: which ``(owner, actor)`` pairs may act in a space, with what scope.

The reference keeps it as files on the auth service's own disk, one per row
(``<dir>/actors/<owner>.<actor>.json`` for interactive rows, ``<dir>/managed-actors/…`` for
managed-agent rows; ``implementations/auth/src/ledger.ts``). ``cotal_actors_<space>`` is the
name the issued-authority evidence gives that ledger (``actorLedgerSourceBucket``); upstream no
client opens it. This stand-in keeps the same rows in a KV bucket of that name which only the auth
plane and the manager's infrastructure connection touch: the manager stand-in reads an actor's
*current* scopes at each request, as the reference handler does, without sharing a disk.

Rules carried over: two disjoint row spaces (key prefix ``actors.`` / ``managed-actors.``, the
kind is never a field); a missing row denies; a corrupt row fails closed with a sentence; a
principal present in both spaces denies; every row carries a lifecycle uid (an interactive grant
mints one and rotates it on re-grant); reads are fresh per call.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TypeGuard

from nats.js.api import KeyValueConfig
from nats.js.errors import BucketNotFoundError, KeyNotFoundError

from cotal_tui.errors import CotalError
from meshview.wire.endpoint import SubjectError, check_owner
from meshview.wire.names import space_token
from meshview.wire.outbound import mint_lifecycle_uid
from meshview.wire.subjects import is_principal_owner

LEDGER_VER = 1
INTERACTIVE = "interactive"
MANAGED = "managed-agent"
_PREFIX = {INTERACTIVE: "actors", MANAGED: "managed-actors"}
SCOPES = ("admin", "spawn", "supervise", "run")  # the vocabulary the views and the manager read


class LedgerError(CotalError, RuntimeError):
    """A ledger row cannot be read or written; one sentence, naming the principal."""


def is_derived_owner(v: object) -> TypeGuard[str]:
    """A user mesh's owner: a derived ``u_`` token, never ``local``."""
    return isinstance(v, str) and v != "local" and is_principal_owner(v)


def is_actor(v: object) -> TypeGuard[str]:
    if not isinstance(v, str):
        return False
    try:
        check_owner(v, "actor")
    except (SubjectError, TypeError):
        return False
    return True


def _str_list(v: object) -> list[str] | None:
    """``v`` when it is a list of strings, else None."""
    return v if isinstance(v, list) and all(isinstance(s, str) for s in v) else None


def is_plain_token(v: object, extra: str = "_-") -> bool:
    """A capability or role token: ASCII letters, digits and ``extra``; compared by equality."""
    return isinstance(v, str) and bool(v) and v.isascii() and all(c.isalnum() or c in extra for c in v)


def ledger_bucket(space: str) -> str:
    return f"cotal_actors_{space_token(space)}"


def row_key(kind: str, owner: str, actor: str) -> str:
    if not is_derived_owner(owner):
        raise LedgerError(f"{owner!r} is not a derived owner (u_ + 26 base32 characters)")
    if not is_actor(actor):
        raise LedgerError(f"{actor!r} is not an actor name")
    return f"{_PREFIX[kind]}.{owner}.{actor}"


def source_key(owner: str, actor: str, uid: str) -> str:
    """The issued-authority source key of one row (design doc §3): ``actor.<owner>.<actor>.<uid>``."""
    return f"actor.{owner}.{actor}.{uid}"


@dataclass(frozen=True)
class ActorRow:
    """One granted row, as both trust boundaries (exchange and callout) and the manager read it."""

    owner: str
    actor: str
    kind: str
    scopes: frozenset[str]
    lifecycle_uid: str
    allow_subscribe: tuple[str, ...] = (">",)
    allow_publish: tuple[str, ...] = (">",)
    role: str | None = None
    parent: str | None = None
    label: str | None = None
    granted_at: str = ""
    token_hash: str | None = field(default=None, repr=False)

    @property
    def principal(self) -> str:
        return f"{self.owner}.{self.actor}"

    @property
    def interactive(self) -> bool:
        return self.kind == INTERACTIVE

    def as_json(self) -> dict:
        doc: dict = {"ver": LEDGER_VER, "owner": self.owner, "actor": self.actor,
                     "scope": sorted(self.scopes), "allowSubscribe": list(self.allow_subscribe),
                     "allowPublish": list(self.allow_publish), "lifecycleUid": self.lifecycle_uid,
                     "grantedAt": self.granted_at}
        for k, v in (("role", self.role), ("parent", self.parent), ("label", self.label),
                     ("tokenHash", self.token_hash)):
            if v is not None:
                doc[k] = v
        return doc


def parse_row(data: bytes, *, kind: str, owner: str, actor: str) -> ActorRow:
    """Fail closed: any shape but the ledger's own is a sentence, never a skip."""
    where = f"the ledger row of {owner}.{actor}"
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise LedgerError(f"{where} is not JSON; re-grant the actor") from None
    if not isinstance(doc, dict) or doc.get("ver") != LEDGER_VER:
        raise LedgerError(f"{where} has an unknown version; refusing to guess at an authorization row")
    if doc.get("owner") != owner or doc.get("actor") != actor:
        raise LedgerError(f"{where} names another principal; refusing to authenticate one row as another")
    scope, allow_sub, allow_pub = (_str_list(doc.get(k)) for k in ("scope", "allowSubscribe", "allowPublish"))
    if scope is None or allow_sub is None or allow_pub is None:
        raise LedgerError(f"{where} is missing explicit scope/allowSubscribe/allowPublish lists")
    th = doc.get("tokenHash")
    if kind == INTERACTIVE and th is not None:
        raise LedgerError(f"{where} is interactive but carries an agent token hash; re-grant it")
    if kind == MANAGED and not (isinstance(th, str) and re.fullmatch(r"[0-9a-f]{64}", th)):
        raise LedgerError(f"{where} is a managed-agent row without a valid secret hash; respawn the agent")
    uid = doc.get("lifecycleUid")
    if not isinstance(uid, str):
        uid = ""  # a pre-cut row: the exchange and the callout refuse it by name
    opt = {k: doc[k] for k in ("role", "parent", "label") if isinstance(doc.get(k), str)}
    return ActorRow(owner, actor, kind, frozenset(scope), uid, tuple(allow_sub), tuple(allow_pub),
                    granted_at=str(doc.get("grantedAt", "")), token_hash=th, **opt)


async def ensure_ledger(js, space: str, *, replicas: int = 1):
    """The ledger bucket (history 1: a grant is an upsert of the whole row)."""
    try:
        return await js.key_value(ledger_bucket(space))
    except BucketNotFoundError:
        return await js.create_key_value(config=KeyValueConfig(
            bucket=ledger_bucket(space), history=1, replicas=replicas))


async def _get(kv, key: str) -> bytes | None:
    try:
        entry = await kv.get(key)
    except KeyNotFoundError:  # also KeyDeletedError: a revoke
        return None
    return entry.value if entry.value else None


async def read_row(kv, kind: str, owner: str, actor: str) -> ActorRow | None:
    data = await _get(kv, row_key(kind, owner, actor))
    return None if data is None else parse_row(data, kind=kind, owner=owner, actor=actor)


async def read_actor(nc, space: str, owner: str, actor: str) -> ActorRow | None:
    """The actor's *current* row in either space, read fresh; None when not (or no longer)
    granted or the space keeps no ledger. A principal granted in both spaces raises."""
    try:
        kv = await nc.jetstream().key_value(ledger_bucket(space))
    except BucketNotFoundError:
        return None
    return await read_unified(kv, owner, actor)


async def read_unified(kv, owner: str, actor: str) -> ActorRow | None:
    interactive = await read_row(kv, INTERACTIVE, owner, actor)
    managed = await read_row(kv, MANAGED, owner, actor)
    if interactive and managed:
        raise LedgerError(f"actor {actor!r} is granted in both the interactive and managed row spaces; "
                          "a broken ledger denies")
    return interactive or managed


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _check_inputs(scopes, subs, pubs, role) -> None:
    for s in scopes:
        if not is_plain_token(s, "_:-"):
            raise LedgerError(f"scope entry {s!r} must be a plain capability token (letters, digits, _ : -)")
    if role is not None and not is_plain_token(role):
        raise LedgerError(f"role {role!r} must be a plain token (letters, digits, _ -)")
    if isinstance(subs, str) or isinstance(pubs, str):
        raise LedgerError("channel ACLs are lists of patterns")


async def grant_actor(kv, owner: str, actor: str, *, scopes, allow_subscribe=(">",),
                      allow_publish=(">",), role: str | None = None, label: str | None = None,
                      lifecycle_uid: str | None = None) -> ActorRow:
    """Grant (upsert) an interactive row; a re-grant rotates the lifecycle uid like the
    reference's ``grantActor``. Refuses to shadow a managed-agent row."""
    _check_inputs(scopes, allow_subscribe, allow_publish, role)
    if await read_row(kv, MANAGED, owner, actor):
        raise LedgerError(f"actor {actor!r} is a managed agent; pick another actor name for an interactive grant")
    row = ActorRow(owner, actor, INTERACTIVE, frozenset(scopes), lifecycle_uid or mint_lifecycle_uid(),
                   tuple(allow_subscribe), tuple(allow_publish), role=role, label=label,
                   granted_at=_now_iso())
    await kv.put(row_key(INTERACTIVE, owner, actor), json.dumps(row.as_json()).encode())
    return row


async def grant_managed_actor(kv, owner: str, actor: str, *, scopes, lifecycle_uid: str, token_hash: str,
                              parent: str | None = None, allow_subscribe=(), allow_publish=(),
                              role: str | None = None) -> ActorRow:
    """A managed-agent row (the spawn path's): the lifecycle uid is the spawn's, never minted here."""
    _check_inputs(scopes, allow_subscribe, allow_publish, role)
    if not lifecycle_uid:
        raise LedgerError("a managed grant must carry the lifecycle uid the spawn path provisioned under")
    if await read_row(kv, INTERACTIVE, owner, actor):
        raise LedgerError(f"actor {actor!r} already has an interactive grant; a managed agent cannot shadow it")
    row = ActorRow(owner, actor, MANAGED, frozenset(scopes), lifecycle_uid, tuple(allow_subscribe),
                   tuple(allow_publish), role=role, parent=parent, granted_at=_now_iso(),
                   token_hash=token_hash)
    await kv.put(row_key(MANAGED, owner, actor), json.dumps(row.as_json()).encode())
    return row


async def revoke_actor(kv, owner: str, actor: str, *, kind: str = INTERACTIVE) -> bool:
    """Stops new exchanges and new connects at once; a live connection dies at its JWT expiry."""
    key = row_key(kind, owner, actor)
    if await _get(kv, key) is None:
        return False
    await kv.delete(key)
    return True
