"""What the broker holds for one DM recipient right now: its DM durable's counters on
``DM_<space>`` and a bounded list of the messages from its ack floor (the reference's
``cotal deliver pending``, CLI 0.57).

Read-only: consumer and stream info, and one ephemeral consumer that acks nothing and is deleted
after; never a durable, never an ack, never a claim that anything was delivered. A candidate's
sender is the principal in its stored subject (the broker binds it to the sender's credential),
never the ``from`` written inside the message; one whose subject or body fails the reader's rules
(a body whose ``from`` is not the subject's sender among them) is withheld, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshview.errors import swallowed
from meshview.wire.decode import Delivery, decode_delivery
from meshview.wire.names import dm_stream
from meshview.wire.subjects import recipient_pattern

MAX_LIMIT = 1000  # candidates read at most, whatever --limit says
FETCH_TIMEOUT_S = 3.0


class DurableNotFound(Exception):
    """The recipient has no DM durable of that name on ``DM_<space>``."""


@dataclass(frozen=True, slots=True)
class Held:
    """A DM durable's counters, as JetStream reports them (upstream's field names in JSON)."""

    durable: str
    pending: int  # stored past the durable's delivered point, not yet handed out
    ack_pending: int  # handed out, not yet acknowledged
    delivered: int  # the last stream seq handed out
    ack_floor: int  # every seq at or below this is acknowledged
    created: str
    frontier: int  # the durable's start sequence minus one
    max_age: float
    max_msgs_per_subject: int
    discard: str

    def as_json(self) -> dict[str, Any]:
        return {"durable": self.durable, "pending": self.pending, "ackPending": self.ack_pending,
                "delivered": self.delivered, "ackFloor": self.ack_floor, "created": self.created,
                "frontier": self.frontier, "max_age": self.max_age,
                "max_msgs_per_subject": self.max_msgs_per_subject, "discard": self.discard}


@dataclass(frozen=True, slots=True)
class Candidate:
    """One stored DM past the ack floor: not proof of a hole, only what is there."""

    seq: int
    id: str | None  # None: withheld (its subject or body does not pass the reader's rules)
    sender: str | None  # the subject's sender principal
    ts: int | None
    withheld: str | None = None  # why it is withheld (the decode's rejection reason)


def _num(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) else 0


async def held(nc: Any, space: str, durable: str, *, timeout: float = 5.0) -> Held:
    """The durable's counters; raises :class:`DurableNotFound` when it does not exist."""
    from nats.js.errors import NotFoundError

    js = nc.jetstream(timeout=timeout)
    stream = dm_stream(space)
    try:
        ci = await js.consumer_info(stream, durable)
    except NotFoundError:
        raise DurableNotFound(durable) from None
    si = await js.stream_info(stream)
    cfg, sc = ci.config, si.config
    created = getattr(ci, "created", None)
    return Held(
        durable=durable, pending=_num(ci.num_pending), ack_pending=_num(ci.num_ack_pending),
        delivered=_num(getattr(ci.delivered, "stream_seq", 0)),
        ack_floor=_num(getattr(ci.ack_floor, "stream_seq", 0)),
        created=str(created) if created is not None else "",
        frontier=max(0, _num(getattr(cfg, "opt_start_seq", None) or 1) - 1),
        max_age=float(sc.max_age or 0), max_msgs_per_subject=_num(sc.max_msgs_per_subject),
        discard=str(getattr(sc.discard, "value", sc.discard) or ""))


async def candidates(nc: Any, space: str, recipient_id: str, after_seq: int, limit: int, *,
                     timeout: float = FETCH_TIMEOUT_S) -> list[Candidate]:
    """At most ``limit`` (capped at :data:`MAX_LIMIT`) DMs to ``recipient_id`` stored after
    ``after_seq``, read through one ephemeral consumer that acks nothing and is deleted after."""
    from nats.js import api

    limit = max(0, min(int(limit), MAX_LIMIT))
    if limit == 0:
        return []
    js = nc.jetstream(timeout=timeout)
    stream = dm_stream(space)
    ci = await js.add_consumer(stream, api.ConsumerConfig(
        deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=max(1, after_seq + 1),
        filter_subject=recipient_pattern(space, recipient_id), ack_policy=api.AckPolicy.NONE,
        mem_storage=True, inactive_threshold=30.0))
    out: list[Candidate] = []
    psub = None
    try:
        psub = await js.pull_subscribe_bind(consumer=ci.name, stream=stream)
        left = min(_num(ci.num_pending), limit)
        while left > 0:
            msgs = await psub.fetch(min(left, 256), timeout=timeout)
            if not msgs:
                break
            for m in msgs:
                out.append(_candidate(m))
                left -= 1
                if m.metadata.num_pending == 0:
                    left = 0
                if left <= 0:
                    break
    finally:
        if psub is not None:
            try:
                await psub.unsubscribe()
            except Exception:  # noqa: BLE001 - a subscription that is ending anyway [counted: COTAL_LOG]
                swallowed("meshview.observe.pending:candidates")
        try:
            await js.delete_consumer(stream, ci.name)
        except Exception:  # noqa: BLE001 - an ephemeral consumer the broker reaps anyway [counted: COTAL_LOG]
            swallowed("meshview.observe.pending:candidates#2")
    return out


def _candidate(m: Any) -> Candidate:
    seq = _num(m.metadata.sequence.stream)
    d = decode_delivery(m.subject, m.data, history=True)
    if type(d) is not Delivery:
        return Candidate(seq, None, None, None, str(getattr(d, "reason", "")) or "unreadable")
    ts = d.message.ts
    return Candidate(seq, d.message.id, d.sender, int(ts) if isinstance(ts, (int, float)) else None)
