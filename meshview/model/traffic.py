"""The model's traffic logs: the DM roll-up and the hop log, each bounded.

Both only accumulate what deliveries say (who sent what to whom, when); the model decides
what is a delivery and when a snapshot reads them.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Callable

from meshview.model.feedring import keep_text
from meshview.model.snapshot import DmConversation, DmMessage, Edge, FeedKind, Hop, Topology

DM_LOG_CAP = 1000
DM_CONV_CAP = 4096
#: Characters of a conversation's last message kept in its roll-up (a preview): 4096 of them
#: each holding a whole 64K-character message were 256 MB a peer could fill with DMs to
#: made-up recipients. The DM log keeps the messages themselves.
CONV_PREVIEW = 1024
TOPO_RECENT_CAP = 2000
TOPO_EDGE_CAP = 4096


@dataclass(slots=True)
class _Conv:
    count: int
    last_ts: float
    last_text: str


class DmRollup:
    """The DM log (newest ``cap`` messages, deduped by (sender, id): another sender's copy of
    an id is kept, marked ``conflict``) and one roll-up per pair that talked."""

    def __init__(self, cap: int = DM_LOG_CAP) -> None:
        self.log: deque[DmMessage] = deque(maxlen=cap)
        self._convs: dict[tuple[str, str], _Conv] = {}
        self._seen: set[tuple[str, str]] = set()

    def add(self, mid: str, ts: float, f: str, t: str, text: str, hist: bool,
            claimed_name: str = "", conflict: bool = False) -> None:
        if mid:
            key = (f, mid)
            if key in self._seen:
                return
            if len(self._seen) > 4 * (self.log.maxlen or DM_LOG_CAP):
                self._seen = {(m.from_id, m.id) for m in self.log}
            self._seen.add(key)
        text = keep_text(text)
        self.log.append(DmMessage(mid, ts, f, t, text, hist, claimed_name, conflict))
        if f == t:
            return  # self-DMs are skipped in the roll-up
        pair = (f, t) if f < t else (t, f)
        text = text[:CONV_PREVIEW]  # (the same object when it is shorter)
        c = self._convs.get(pair)
        if c is None:
            self._convs[pair] = _Conv(1, ts, text)
        else:
            c.count += 1
            if ts >= c.last_ts:
                c.last_ts, c.last_text = ts, text
        if len(self._convs) > DM_CONV_CAP:  # bound: drop the stalest conversation
            stalest = min(self._convs, key=lambda k: self._convs[k].last_ts)
            del self._convs[stalest]

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (meshview/record/statecodec.py): the log, the pairs, the seen ids."""
        return {"cap": self.log.maxlen, "log": list(self.log), "seen": set(self._seen),
                "convs": [[a, b, c.count, c.last_ts, c.last_text]
                          for (a, b), c in self._convs.items()]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> DmRollup:
        """A roll-up holding what :meth:`state` returned."""
        d = cls(state["cap"] or DM_LOG_CAP)
        d.log.extend(state["log"])
        # (a checkpoint from before per-sender keys kept bare ids: rebuilt from the log)
        d._seen = set(state["seen"])
        if any(type(k) is not tuple for k in d._seen):
            d._seen = {(m.from_id, m.id) for m in d.log if m.id}
        d._convs = {(a, b): _Conv(n, ts, text) for a, b, n, ts, text in state["convs"]}
        return d

    @classmethod
    def from_v1(cls, attrs: dict[str, Any]) -> DmRollup:
        """A roll-up from a format 1 checkpoint (this class's attributes by their names of then)."""
        log = attrs["log"]
        return cls.from_state({"cap": log.maxlen, "log": list(log), "seen": attrs["_seen"],
                               "convs": [[a, b, c.count, c.last_ts, c.last_text]
                                         for (a, b), c in attrs["_convs"].items()]})

    def conversations(self, name_of: Callable[[str], str]) -> tuple[DmConversation, ...]:
        """Every pair that talked, newest first."""
        convs = sorted(self._convs.items(), key=lambda kv: -kv[1].last_ts)
        return tuple(
            DmConversation(a, b, name_of(a), name_of(b), c.count, c.last_ts, c.last_text)
            for (a, b), c in convs
        )


_EdgeKey = tuple[str, str, FeedKind]  # (sender, target, kind)


class HopLog:
    """Sender -> target edge counts (least recently used edges go first) and recent hops: what
    the topology lens folds into its window (``meshview.model.topology.fold``)."""

    def __init__(self) -> None:
        self._edges: OrderedDict[_EdgeKey, list] = OrderedDict()
        self._hops: deque[Hop] = deque(maxlen=TOPO_RECENT_CAP)
        # what :meth:`topology` handed out, kept: each edge's row, the edges moved since, and
        # the last answer (None: something moved). A snapshot is taken 30 times a second and
        # 4096 edges were 4096 new rows in each
        self._reset_rows()

    def _reset_rows(self) -> None:
        """The kept rows start again from the edges (also after a checkpoint's restore)."""
        self._rows: dict[_EdgeKey, Edge] = {}
        self._moved: set[_EdgeKey] = set(self._edges)
        self._topo: Topology | None = None

    def hop(self, ts: float, f: str, to: str, kind: FeedKind, historical: bool) -> None:
        key = (f, to, kind)
        edges = self._edges
        e = edges.get(key)
        self._moved.add(key)
        self._topo = None
        if e is None:
            edges[key] = [1, ts]
            if len(edges) > TOPO_EDGE_CAP:
                gone, _ = edges.popitem(last=False)
                self._rows.pop(gone, None)
                self._moved.discard(gone)
        else:
            e[0] += 1
            if ts > e[1]:
                e[1] = ts
            edges.move_to_end(key)
        if not historical:
            self._hops.append(Hop(ts, f, to, kind))

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the edges, least recently used first, and the recent hops."""
        return {"edges": [[f, t, k, n, ts] for (f, t, k), (n, ts) in self._edges.items()],
                "hops": list(self._hops)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> HopLog:
        """A log holding what :meth:`state` returned."""
        log = cls()
        log._edges = OrderedDict(((f, t, k), [n, ts]) for f, t, k, n, ts in state["edges"])
        log._hops.extend(state["hops"])
        log._reset_rows()
        return log

    @classmethod
    def from_v1(cls, attrs: dict[str, Any]) -> HopLog:
        """A log from a format 1 checkpoint (this class's attributes by their names of then)."""
        return cls.from_state({"edges": [[f, t, k, n, ts] for (f, t, k), (n, ts)
                                         in attrs["_edges"].items()],
                               "hops": list(attrs["_hops"])})

    def topology(self) -> Topology:
        """The edges least recently used first (``Topology.edges`` sorts them by count when
        read), and the recent hops. Only the edges moved since the last call get a new row."""
        if self._topo is None:
            rows, edges = self._rows, self._edges
            for key in self._moved:
                n, ts = edges[key]
                rows[key] = Edge(key[0], key[1], key[2], n, ts)
            self._moved.clear()
            self._topo = Topology(
                tuple(map(rows.__getitem__, edges)),
                tuple(self._hops))
        return self._topo
