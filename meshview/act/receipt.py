"""What is true once a DM or an ask is acknowledged: the JetStream stored sequence and the
recipient's presence at send time, never "delivered" (the reference's CLI 0.57: a broker ack
proves the message is stored at a sequence, not that anyone read it; its docs give the status as
``idle`` / ``working`` / ``offline``, and a recipient with no presence record as "had no roster
row at send").

The recipient's status is looked up by the id the DM subject is addressed to, on rows whose
id is the presence record's KV key (``decode_presence`` drops a record whose card names another
key), so a peer that borrows the recipient's display name cannot change what it is shown as.
Pure: no NATS, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from meshview.wire import sanitize

NO_ROW = "had no roster row at send"  # the reference's words for an id with no presence record
MAX_HOLDERS_NAMED = 3  # an ask's receipt names this many holders, then counts the rest


@dataclass(frozen=True, slots=True)
class Holder:
    """One recipient as presence showed it at send time (id from the presence key)."""

    id: str
    name: str
    status: str | None  # idle / working / waiting / offline; None: no presence record at send

    def words(self) -> str:
        return f"{sanitize.inline(self.name or self.id, 64)} {self.status or NO_ROW}"


@dataclass(frozen=True, slots=True)
class Receipt:
    """A DM's or an ask's receipt: where it is stored and who it is for, at send time."""

    stream: str
    seq: int
    duplicate: bool  # the broker already held this id: ``seq`` is the first copy's
    kind: str  # "dm" or "ask"
    to: str  # the recipient's principal id, or the role asked
    holders: tuple[Holder, ...]  # the DM's one recipient, or the role's live holders

    def words(self) -> str:
        """``stored #1234 · bram working``; an ask names its live holders."""
        head = f"stored #{self.seq}" + (" (already stored)" if self.duplicate else "")
        if self.kind == "dm":
            return f"{head} · {self.holders[0].words()}"
        role = sanitize.inline(self.to, 64)
        if not self.holders:
            return f"{head} · no live agent holds {role}"
        named = ", ".join(h.words() for h in self.holders[:MAX_HOLDERS_NAMED])
        more = len(self.holders) - MAX_HOLDERS_NAMED
        return f"{head} · {role}: {named}" + (f" +{more} more" if more > 0 else "")

    def as_json(self) -> dict[str, Any]:
        """The same facts for ``--json`` (names as the presence record carries them)."""
        rows = [{"id": h.id, "name": h.name, "status": h.status} for h in self.holders]
        out: dict[str, Any] = {"stream": self.stream, "stored": self.seq,
                               "duplicate": self.duplicate}
        if self.kind == "dm":
            out["recipient"] = rows[0]
        else:
            out["role"], out["holders"] = self.to, rows
        return {"receipt": out}


def receipt(stream: str, seq: int, duplicate: bool, to: str | None, to_service: str | None,
            rows: Iterable[Any]) -> Receipt | None:
    """The receipt of an acknowledged DM (``to``) or ask (``to_service``) from the roster rows
    read at send time (anything with ``id``, ``name``, ``kind``, ``status``, ``role``: the
    model's ``Peer`` and a one-shot sender's ``RosterEntry``); None for a channel post."""
    if to:
        row = next((r for r in rows if getattr(r, "id", None) == to), None)
        h = (Holder(to, str(row.name or ""), str(row.status or "offline")) if row is not None
             else Holder(to, "", None))
        return Receipt(stream, seq, duplicate, "dm", to, (h,))
    if to_service:
        from meshview.act.participant import role_holders

        live = role_holders(list(rows), to_service)
        hs = tuple(Holder(r.id, str(r.name or ""), str(r.status or "")) for r in live)
        return Receipt(stream, seq, duplicate, "ask", to_service, hs)
    return None
