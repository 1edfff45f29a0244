"""What a sender puts on the wire (SPEC §2, §3, §5, §6, §13.1): ids, envelopes, presence.

The read side (``decode.py``, ``presence.py``) judges what others publish; this module builds
what we publish, so each rule a publisher must keep lives next to its reader: exactly one
routing field, a unique ``id`` that doubles as ``Nats-Msg-Id``, mentions as lowercased names,
subjects from the same builders the reader parses, a presence key equal to ``card.id``, and a
fresh CSPRNG ``lifecycleUid``.  Text is never rewritten here: an envelope carries exactly the
characters it was given (terminal safety is the reader's job, in ``stream.py``/widgets).
Pure and network-free.
"""

from __future__ import annotations

import re
import secrets
import time
import uuid
from collections.abc import Sequence

import msgspec

from meshview.wire.messages import (
    AgentCard,
    CotalMessage,
    EndpointRef,
    Part,
    Presence,
    TextPart,
)
from meshview.wire.names import bucket_names, space_token
from meshview.wire.subjects import (
    chat_subject,
    inst_subject,
    is_concrete_channel,
    sanitize_channel,
    sanitize_token,
    split_principal,
    svc_subject,
)

PROTOCOL_VERSION = "0.4"  # SPEC §6: the wire version this revision advertises
DEV_OWNER = "local"  # open dev mode and static-creds owner token (SPEC §2)
MAX_NAME_LENGTH = 128  # AgentCard.name (SPEC §6)
MAX_ACTOR_LENGTH = 64  # owner/actor bound on the ep rails (§13.2): keep ours inside it
MSG_ID_HEADER = "Nats-Msg-Id"

_NOT_IDENTITY = re.compile(r"[^A-Za-z0-9_]")
_MENTION_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_NAME = re.compile(_MENTION_NAME)
# ``@name`` where the ``@`` starts a word (not ``a@b``) and the name is a run of name characters.
_MENTION = re.compile(rf"(?<![\w@])@({_MENTION_NAME})")


# ---- identity ----------------------------------------------------------------------------

def actor_token(raw: str) -> str:
    """A valid actor token from free text (an OS user name, ``--as NAME``): every character
    outside ``[A-Za-z0-9_]`` becomes ``_`` (``-`` is the dash-form separator, §2).

    Lossy, so it is for *choosing* our own actor only; builders still refuse invalid tokens.
    """
    t = _NOT_IDENTITY.sub("_", (raw or "").strip())[:MAX_ACTOR_LENGTH]
    return t or "_"


def actor_fold(raw: str) -> str:
    """How alike two actors *look* to a person: the actor token case-folded, without the
    underscores that stand for dropped punctuation at its ends (``ada!`` -> ``ada_`` folds to
    ``ada``, as ``Ada`` does). An identity whose fold equals a live peer's of the same owner
    would read as that peer on every roster, so it counts as taken (issue 19.3)."""
    return actor_token(raw).strip("_").casefold() or "_"


def principal_id(owner: str, actor: str) -> str:
    """Dot-form ``owner.actor``; raises ValueError unless both halves are identity tokens."""
    pid = f"{owner}.{actor}"
    if split_principal(pid) is None:
        raise ValueError(f"not a principal (owner.actor of [A-Za-z0-9_] tokens): {pid!r}")
    return pid


def new_message_id() -> str:
    """A unique message id (UUIDv4, as the reference): also the JetStream ``Nats-Msg-Id``."""
    return str(uuid.uuid4())


def mint_lifecycle_uid() -> str:
    """A fresh lifecycleUid (§13.1): 160 CSPRNG bits in base36, left-padded to 26 characters,
    so it always matches ``^[a-z0-9]{26,32}$`` and is never reused."""
    n = int.from_bytes(secrets.token_bytes(20), "big")
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out.rjust(26, "0")


def now_ms() -> int:
    return int(time.time() * 1000)


# ---- mentions ----------------------------------------------------------------------------

def normalize_mentions(names: Sequence[str] | None) -> list[str] | None:
    """Lowercased, trimmed, de-duplicated peer names in first-seen order; None when empty
    (the field is omitted rather than sent as ``[]``)."""
    out: list[str] = []
    for n in names or ():
        if isinstance(n, str):
            n = n.strip().lower()
            if n and n not in out:
                out.append(n)
    return out or None


def is_mention_name(word: str) -> bool:
    """Whether ``@word`` would be read back as a mention of exactly ``word`` (the mention
    grammar): what completion may offer a user to type."""
    return isinstance(word, str) and _NAME.fullmatch(word) is not None


def mentions_in(text: str) -> list[str] | None:
    """The ``@name`` mentions written in ``text`` (SPEC §5 ``mentions``: names, not ids).

    A mention starts a word (``mail a@b.com`` mentions nobody) and trailing ``.``/``-`` is
    punctuation (``thanks @bram.`` mentions ``bram``).
    """
    if not isinstance(text, str) or "@" not in text:
        return None
    return normalize_mentions([m.group(1).rstrip(".-") for m in _MENTION.finditer(text)])


# ---- envelopes ---------------------------------------------------------------------------

def _check_text(text: str) -> None:
    if not isinstance(text, str):
        raise TypeError("text must be a string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the text is not valid UTF-8 (it holds lone surrogates)") from None


def build_message(
    space: str,
    sender: EndpointRef,
    text: str | None = None,
    *,
    parts: Sequence[Part] | None = None,
    channel: str | None = None,
    to: str | None = None,
    to_service: str | None = None,
    mentions: Sequence[str] | None = None,
    reply_to: str | None = None,
    context_id: str | None = None,
    message_id: str | None = None,
    ts: int | None = None,
) -> CotalMessage:
    """One delivery envelope with exactly one routing field (SPEC §4, §5).

    ``channel`` and ``to_service`` are sanitized exactly as their subject tokens are, so the
    payload and the subject agree; ``to`` and ``sender.id`` must already be principals.
    ``text`` becomes the first text part, byte-for-byte.
    """
    routes = [r for r in (channel, to, to_service) if r is not None]
    if len(routes) != 1:
        raise ValueError("exactly one of channel, to, to_service must be set")
    if split_principal(sender.id) is None:
        raise ValueError(f"sender is not a principal id (owner.actor): {sender.id!r}")
    all_parts: list[Part] = []
    if text is not None:
        _check_text(text)
        all_parts.append(TextPart(text))
    all_parts += list(parts or ())
    if not all_parts:
        raise ValueError("a message needs at least one part")
    if channel is not None:
        channel = sanitize_channel(channel)
        if not is_concrete_channel(channel):
            raise ValueError(f"publish channel must be concrete: {channel!r}")
    if to is not None and split_principal(to) is None:
        raise ValueError(f"DM recipient is not a principal id (owner.actor): {to!r}")
    if to_service is not None:
        to_service = sanitize_token(to_service)
    return CotalMessage(
        id=message_id if message_id is not None else new_message_id(),
        ts=ts if ts is not None else now_ms(),
        space=space_token(space),
        from_=sender,
        parts=all_parts,
        channel=channel,
        to=to,
        toService=to_service,
        mentions=normalize_mentions(mentions) if channel is not None else None,
        replyTo=reply_to,
        contextId=context_id,
    )


def delivery_subject(msg: CotalMessage) -> str:
    """The concrete publish subject of ``msg``: its routing field picks chat / inst / svc."""
    r = msg.routing
    if r is None:
        raise ValueError("exactly one of channel, to, toService must be set")
    field, value = r
    if field == "channel":
        return chat_subject(msg.space, msg.from_.id, value)
    if field == "to":
        return inst_subject(msg.space, value, msg.from_.id)
    return svc_subject(msg.space, value, msg.from_.id)


def inbox_pattern(space: str, recipient_id: str) -> str:
    """The DM inbox a principal reads: every ``inst`` subject addressed to it (SPEC §8's
    ``dm_<owner>-<actor>-<uid>`` filter), whoever the sender."""
    if split_principal(recipient_id) is None:
        raise ValueError(f"not a principal id (owner.actor): {recipient_id!r}")
    return f"cotal.{space_token(space)}.inst.{recipient_id}.>"


def anycast_pattern(space: str, role: str) -> str:
    """What the holders of ``role`` consume (SPEC §8's role-shared ``svc_<role>`` filter)."""
    return f"cotal.{space_token(space)}.svc.{sanitize_token(role)}.>"


def publish_headers(msg: CotalMessage) -> dict[str, str]:
    """JetStream headers of a delivery publish: ``Nats-Msg-Id`` = the message id (SPEC §8).

    An empty id is never used as a dedup key (§4), so it gets no header."""
    return {MSG_ID_HEADER: msg.id} if msg.id else {}


def reply_context(original: CotalMessage) -> str:
    """The thread a reply joins: the original's ``contextId``, else the original's id."""
    return original.contextId or original.id


# ---- presence ----------------------------------------------------------------------------

EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
WRONG_LAST_SEQUENCE = 10071  # JetStream's err_code when that expectation fails


def presence_put_headers(revision: int) -> dict[str, str]:
    """A presence put that only lands on ``revision`` of its key (0: the key holds no record):
    KV create/update. A writer that keeps its last revision never overwrites, nor offlines,
    a record someone else wrote since; the broker answers :data:`WRONG_LAST_SEQUENCE`."""
    return {EXPECTED_LAST_SUBJECT_SEQ: str(max(0, int(revision)))}


def presence_subject(space: str, key: str) -> str:
    """The KV put subject of presence key ``key`` (= ``card.id``): what ``kv.put`` publishes."""
    if split_principal(key) is None:
        raise ValueError(f"presence key must be a principal id: {key!r}")
    return f"$KV.{bucket_names(space).presence}.{key}"


def build_card(owner: str, actor: str, name: str, *, kind: str = "agent",
               role: str | None = None, description: str | None = None,
               tags: list[str] | None = None, meta: dict | None = None) -> AgentCard:
    """An AgentCard whose ``id`` is the dot-form principal (§2, §6)."""
    if kind not in ("agent", "endpoint"):
        raise ValueError("kind must be agent or endpoint")
    if not name or len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"name must be 1..{MAX_NAME_LENGTH} characters")
    return AgentCard(id=principal_id(owner, actor), name=name, kind=kind, owner=owner,
                     actor=actor, role=role, description=description, tags=tags, meta=meta,
                     protocolVersion=PROTOCOL_VERSION)


def heartbeat_record(card: AgentCard, status: str, lifecycle_uid: str, *, ts: int | None = None,
                     status_since: int | None = None, activity: str | None = None) -> Presence:
    """A live heartbeat. Live clients never heartbeat ``offline`` (§6)."""
    if status not in ("idle", "waiting", "working"):
        raise ValueError("a live heartbeat is idle, waiting or working")
    return Presence(card=card, status=status, ts=ts if ts is not None else now_ms(),
                    lifecycleUid=lifecycle_uid, statusSince=status_since, activity=activity)


def offline_record(p: Presence, *, ts: int | None = None) -> Presence:
    """The one final record a graceful disconnect may write (§6): status ``offline``, no
    statusSince/attention/channelModes, a fresh ``ts``."""
    return msgspec.structs.replace(p, status="offline", ts=ts if ts is not None else now_ms(),
                                   statusSince=None, attention=None, channelModes=None)
