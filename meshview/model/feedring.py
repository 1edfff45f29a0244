"""The feed ring: rows addressed by absolute index, bounded in rows and in kept text.

The model appends; snapshots take an O(1) :class:`FeedRows` window that never changes under
them. Rows before ``base`` are evicted; the backing list is compacted by starting a new one,
never by shrinking a list a snapshot may share.

The dedupe index keys messages by (sender principal, id): a sender's id seen twice is a
duplicate, an id another sender used first is a conflict (both rows kept, the later marked).
An id maps to the row of its first copy; later copies by other senders are kept apart (rare,
so the common path stays one dict lookup). Entries go when their rows do.
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import msgspec

from meshview.wire.messages import ExtensionPart

if TYPE_CHECKING:
    from meshview.model.snapshot import FeedEntry

# The ring is bounded in bytes as well as rows: any agent may send ~1 MiB messages, and 10,000
# of them would be ~10 GiB. A row keeps at most KEPT_TEXT characters (the line stream still
# gets the exact text: events carry the full row), and the oldest rows go once the kept text
# of the whole ring, with what rows keep beyond their text (``extra_bytes``), passes
# FEED_TEXT_BUDGET.
KEPT_TEXT = 64 * 1024
FEED_TEXT_BUDGET = 64 * 1024 * 1024
PENDING = -1  # the dedupe index's mark for an id held by an open burst, not yet a row
NEW, DUPLICATE, CONFLICT = 0, 1, 2  # what :meth:`FeedRing.check` says of (sender, id)
COPIES_CAP = 64  # copies of one id a reply's original is looked for among


def extra_bytes(parts: Sequence[Any]) -> int:
    """What a row's parts keep beyond its text, in bytes: an ``ag-ui`` frame's events (the
    text is their fold; the wire's frame bound caps them); other parts are their text."""
    n = 0
    for p in parts:
        if type(p) is ExtensionPart and p.events:
            n += len(msgspec.json.encode(p.events))
    return n


def keep_text(text: str) -> str:
    """``text`` cut to :data:`KEPT_TEXT` characters, saying how much was not kept."""
    if len(text) <= KEPT_TEXT:
        return text
    return text[:KEPT_TEXT] + f"\n… [{len(text) - KEPT_TEXT} more characters not kept]"


class FeedRows(Sequence):
    """An immutable window ``[base, end)`` over the model's append-only feed buffer.

    Taking one is O(1): the model only ever appends past ``end`` to the list it shares, and
    when it compacts it starts a new list instead of shrinking the shared one. So rows a
    snapshot handed out never change and never move. ``rows[k]`` is the row at absolute index
    ``base + k``; slices return tuples."""

    __slots__ = ("_buf", "_off", "_base", "_end")

    def __init__(self, buf: list[FeedEntry], off: int, base: int, end: int) -> None:
        self._buf, self._off, self._base, self._end = buf, off, base, end

    def __len__(self) -> int:
        return self._end - self._base

    def __getitem__(self, k: Any) -> Any:
        n = self._end - self._base
        if isinstance(k, slice):
            start = self._base - self._off
            return tuple(self._buf[start + j] for j in range(*k.indices(n)))
        if k < 0:
            k += n
        if k < 0 or k >= n:
            raise IndexError(k)
        return self._buf[self._base - self._off + k]

    def __iter__(self) -> Iterator[FeedEntry]:
        return islice(self._buf, self._base - self._off, self._end - self._off)

    def __reversed__(self) -> Iterator[FeedEntry]:
        lo = self._base - self._off
        return (self._buf[j] for j in range(self._end - self._off - 1, lo - 1, -1))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (FeedRows, tuple, list)):
            return len(self) == len(other) and all(a is b or a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable, as list is: typeshed types object's a method

    def __repr__(self) -> str:
        return f"FeedRows(base={self._base}, end={self._end})"

    def at(self, i: int) -> FeedEntry:
        """The row at absolute index ``i`` (IndexError when outside ``[base, end)``)."""
        if i < self._base or i >= self._end:
            raise IndexError(i)
        return self._buf[i - self._off]

    def since(self, i: int) -> Iterator[FeedEntry]:
        """Rows from absolute index ``max(i, base)`` to the end, oldest first."""
        return islice(self._buf, max(i, self._base) - self._off, self._end - self._off)


class FeedRing:
    """The append-only row store behind the feed, with its dedupe index."""

    __slots__ = ("cap", "_buf", "_off", "_base", "_compact_at", "_text", "_ids", "_extra",
                 "_held", "_other")

    def __init__(self, cap: int) -> None:
        self.cap = max(1, int(cap))
        # ``_buf[0]`` is absolute index ``_off``; rows before ``_base`` are evicted and leave
        # memory when the list is compacted (a new list, never in place)
        self._buf: list[FeedEntry] = []
        self._off = 0
        self._base = 0
        self._compact_at = max(1024, self.cap // 4)
        self._text = 0  # characters of text kept by the live rows, plus their ``_extra``
        self._ids: dict[str, int] = {}  # message id -> absolute index of its row (or PENDING)
        # absolute index -> bytes a row keeps beyond its text (an ag-ui frame's events: its
        # text is the fold, often far shorter); only rows that keep any
        self._extra: dict[int, int] = {}
        self._held: dict[str, str] = {}  # a PENDING first copy's id -> its sender
        # id -> {sender: index or PENDING} for copies by senders other than the first's
        self._other: dict[str, dict[str, int]] = {}

    @property
    def base(self) -> int:
        return self._base

    @property
    def end(self) -> int:
        return self._off + len(self._buf)

    def __len__(self) -> int:
        return self.end - self._base

    def at(self, i: int) -> FeedEntry:
        if i < self._base or i >= self.end:
            raise IndexError(i)
        return self._buf[i - self._off]

    def rows(self) -> FeedRows:
        """An immutable O(1) view of the live rows."""
        return FeedRows(self._buf, self._off, self._base, self.end)

    def seen(self, message_id: str) -> bool:
        """True if a non-empty id is in a live row or held as pending (any sender's copy)."""
        return bool(message_id) and message_id in self._ids

    def check(self, message_id: str, sender: str) -> int:
        """:data:`NEW`, :data:`DUPLICATE` (this sender's copy of the id is here) or
        :data:`CONFLICT` (another sender used the id first) for a non-empty id."""
        i = self._ids.get(message_id)
        if i is None:
            return NEW
        if i == PENDING:
            first = self._held.get(message_id, sender)
        else:
            first = self._buf[i - self._off].from_id
        if first == sender:
            return DUPLICATE
        o = self._other.get(message_id)
        return DUPLICATE if o is not None and sender in o else CONFLICT

    def index_of(self, message_id: str) -> int | None:
        """The absolute index of the live row holding the first copy of ``message_id`` (None:
        not a row now)."""
        i = self._ids.get(message_id) if message_id else None
        return i if i is not None and i >= self._base else None

    def copies(self, message_id: str, limit: int = COPIES_CAP) -> list[int]:
        """The absolute indices of the live rows holding ``message_id``, any sender's, in ring
        order (the first copy first), at most ``limit`` of them: a flood of senders reusing one
        id must not make every reply to it cost a walk over all their rows."""
        first = self.index_of(message_id)
        out = [] if first is None else [first]
        o = self._other.get(message_id) if message_id else None
        if o:
            out.extend(sorted(i for i in o.values() if i >= self._base)[:max(0, limit - 1)])
        return out

    def hold(self, message_id: str, sender: str = "") -> None:
        """Mark (sender, id) as seen before its row lands (a unicast burst still open)."""
        if not message_id:
            return
        if message_id in self._ids:
            self._other.setdefault(message_id, {})[sender] = PENDING
        else:
            self._ids[message_id] = PENDING
            self._held[message_id] = sender

    def ids(self) -> int:
        """How many ids the dedupe index holds (bounded with the ring)."""
        return len(self._ids)

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (meshview/record/statecodec.py): the live rows and the dedupe
        index. Evicted rows still waiting for a compaction are not state."""
        return {"cap": self.cap, "base": self._base, "rows": list(self.rows()),
                "ids": dict(self._ids), "held": dict(self._held),
                "other": {k: dict(v) for k, v in self._other.items()}}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FeedRing:
        """A ring holding what :meth:`state` returned."""
        ring = cls(state["cap"])
        ring._buf = list(state["rows"])
        ring._off = ring._base = int(state["base"])
        ring._ids = dict(state["ids"])
        ring._extra = {e.index: x for e in ring._buf if (x := extra_bytes(e.parts))}
        ring._text = sum(len(e.text) for e in ring._buf) + sum(ring._extra.values())
        # (a checkpoint from before per-sender keys has neither: every id had one sender)
        ring._held = dict(state.get("held") or {})
        ring._other = {k: dict(v) for k, v in (state.get("other") or {}).items()}
        return ring

    @classmethod
    def from_v1(cls, attrs: dict[str, Any]) -> FeedRing:
        """A ring from a format 1 checkpoint, which kept this class's attributes by their names
        of then (evicted rows included; no per-sender index: every id had one sender)."""
        live = attrs["_base"] - attrs["_off"]
        return cls.from_state({"cap": attrs["cap"], "base": attrs["_base"],
                               "rows": list(attrs["_buf"])[live:], "ids": attrs["_ids"],
                               "held": attrs.get("_held"), "other": attrs.get("_other")})

    def push(self, e: FeedEntry) -> FeedEntry:
        """Store row ``e`` (its ``index`` must be :attr:`end`); returns the row as kept, text
        cut by :func:`keep_text`. Evicts the oldest rows past the row cap or text budget."""
        buf = self._buf
        if len(e.text) > KEPT_TEXT:
            e = msgspec.structs.replace(e, text=keep_text(e.text), parts=())
        buf.append(e)
        self._text += len(e.text)
        for p in e.parts:
            if type(p) is ExtensionPart and p.events:
                x = self._extra[e.index] = extra_bytes(e.parts)
                self._text += x
                break
        ids, other = self._ids, self._other
        for mid in e.ids:
            if mid:
                i = ids.get(mid)
                if i is None or (i == PENDING and self._held.get(mid, e.from_id) == e.from_id):
                    ids[mid] = e.index
                    if i is not None:
                        self._held.pop(mid, None)
                else:
                    other.setdefault(mid, {})[e.from_id] = e.index
        end = e.index + 1
        while end - self._base > self.cap or (
                self._text > FEED_TEXT_BUDGET and end - self._base > 1):
            old = buf[self._base - self._off]
            self._base += 1
            self._text -= len(old.text) + (self._extra.pop(old.index, 0) if self._extra else 0)
            for mid in old.ids:
                if ids.get(mid) == old.index:
                    del ids[mid]
                    if other:
                        self._promote(mid)
                elif other:
                    o = other.get(mid)
                    if o is not None and o.get(old.from_id) == old.index:
                        del o[old.from_id]
                        if not o:
                            del other[mid]
        if self._base - self._off >= self._compact_at:
            # a fresh list: snapshots keep the old one, which nobody appends to again
            self._buf = buf[self._base - self._off:]
            self._off = self._base
        return e

    def _promote(self, mid: str) -> None:
        """The first copy of ``mid`` left the ring: the oldest other copy becomes the first
        (so a sender's later duplicate is still caught)."""
        o = self._other.get(mid)
        if not o:
            return
        sender = min(o, key=lambda k: (o[k] == PENDING, o[k]))
        i = o.pop(sender)
        if not o:
            del self._other[mid]
        self._ids[mid] = i
        if i == PENDING:
            self._held[mid] = sender
