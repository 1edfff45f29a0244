"""What the operator means to send, parsed from any front-end, and the one reply-routing rule.

Pure values (no NATS import), so ``cotal chat --help`` / ``cotal send --help`` stay light:
:class:`meshview.act.participant.Participant` is what delivers a :class:`Send`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from meshview.model.snapshot import FeedEntry
from meshview.wire.decode import Delivery
from meshview.wire.messages import CotalMessage
from meshview.wire.outbound import reply_context

SendKind = Literal["channel", "dm", "ask", "reply"]


@dataclass(frozen=True, slots=True)
class Send:
    """One message the operator means to send: what every front-end (the composer, the palette,
    ``cotal chat``, ``cotal send``) parses its input into, and :meth:`Participant.send` takes.

    ``kind``: ``channel`` (``target`` a channel), ``dm`` (an agent's name, ``@name`` or
    principal id), ``ask`` (a role: an anycast) or ``reply`` (no ``target``: it goes where
    the :class:`Original` it answers came from, by :func:`reply_send`). ``reply_to`` and
    ``context_id`` thread an explicit channel/dm/ask into a conversation; ``queue`` sends an
    ask that no live agent holds yet (for a future holder)."""

    kind: SendKind
    target: str | None
    text: str
    reply_to: str | None = None
    context_id: str | None = None
    queue: bool = False


@dataclass(frozen=True, slots=True)
class Original:
    """What a reply needs of the message it answers, from an envelope or a feed row."""

    id: str
    kind: str  # channel | dm | anycast (anything else cannot be answered)
    thread: str  # the contextId a reply joins (wire.reply_context)
    sender: str
    channel: str | None = None
    recipient: str | None = None  # a unicast's (first) recipient

    @classmethod
    def of(cls, original: CotalMessage | Delivery) -> Original:
        """A delivery's authenticated kind and sender, else the envelope's own fields."""
        kind: str | None
        if isinstance(original, Delivery):
            kind, msg, sender = original.kind, original.message, original.sender
        else:
            msg = original
            r = msg.routing
            kind = {"channel": "channel", "to": "dm", "toService": "anycast"}.get(r[0]) if r else ""
            sender = msg.from_.id
        return cls(msg.id, kind or "", reply_context(msg), sender, msg.channel, msg.to)

    @classmethod
    def of_entry(cls, e: FeedEntry) -> Original:
        """A feed row (its ``context_id`` is already the thread a reply joins)."""
        return cls(e.id, e.kind, e.context_id or e.id, e.from_id, e.channel,
                   e.to_ids[0] if e.to_ids else None)


def reply_send(original: Original, text: str, me: str | None) -> Send | None:
    """Where a reply goes - the one reply-routing rule: a channel message is answered on its
    channel, anything else by a DM to the other side of the conversation (its recipient when
    the operator ``me`` sent it, else its sender: an anycast goes back to the asker);
    ``replyTo`` is the original's id and ``contextId`` its thread. None for what cannot be
    answered (a lifecycle row, a channel message without its channel)."""
    if original.kind == "channel":
        if not original.channel:
            return None
        return Send("channel", original.channel, text, reply_to=original.id,
                    context_id=original.thread)
    if original.kind not in ("dm", "anycast"):
        return None
    mine = me is not None and original.sender == me and original.recipient
    return Send("dm", original.recipient if mine else original.sender, text,
                reply_to=original.id, context_id=original.thread)
