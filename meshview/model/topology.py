"""The topology lens's window: a pure function of a snapshot's recent hops, roster and membership.

The model keeps the hops (``traffic.HopLog``, bounded, oldest first); this folds the last
2 minutes of them for the lens: edges carry a count and a decayed rate (Σ exp(−age/20 s) per
hop); the membership feed adds silent subscribers and their links (live or durable), wide
readers (``>``/``*`` on the channel) are flagged instead of spoking every hub, and an
unreadable feed draws no links. No Textual import; ``widgets.topology`` renders what this returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from meshview.model.snapshot import Snapshot
from meshview.wire.subjects import pattern_channel, subject_matches

WINDOW_MS = 120_000.0
TAU_MS = 20_000.0
HEAT = " ░▒▓█"
HEAT_STEPS = (0.05, 0.5, 2.0, 5.0)


def heat(rate: float) -> str:
    for i, step in enumerate(HEAT_STEPS):
        if rate < step:
            return HEAT[i]
    return HEAT[-1]


@dataclass
class FoldEdge:
    src: str
    dst: str  # peer id, "#channel" or "@role"
    kind: str
    count: int = 0
    rate: float = 0.0
    last_ts: float = 0.0


@dataclass
class Fold:
    now: float
    senders: list[str]  # agent ids that sent in the window, by name
    nodes: list[str]  # every agent node (traffic or membership), by name
    hubs: list[str]  # "#chan" / "@role" targets, sorted
    edges: dict[tuple[str, str], FoldEdge]
    hops: list  # Hop rows in the window, oldest first
    members: dict[tuple[str, str], str] = field(default_factory=dict)  # (id, "#ch") -> live|durable
    wide: set[str] = field(default_factory=set)  # ids reading every channel
    total: int = 0
    pill: str = "traffic-only"
    reason: str | None = None

    def columns(self) -> list[str]:
        """Matrix columns: nodes with inbound traffic, then hubs (incl. membership channels)."""
        inbound = sorted({d for (_, d) in self.edges if not d.startswith(("#", "@"))},
                         key=lambda i: self._names.get(i, i))
        return inbound + self.hubs

    _names: dict[str, str] = field(default_factory=dict)


def _expand(chan_pat: str, channels: list[str]) -> list[str]:
    """The known channels a channel pattern reads (none for a wide ``>``/``*`` reader)."""
    if chan_pat in (">", "*"):
        return []
    if "*" not in chan_pat and ">" not in chan_pat:
        return [chan_pat]
    return [ch for ch in channels if subject_matches(chan_pat, ch)]


def fold(snap: Snapshot) -> Fold:
    now = snap.now
    floor = now - WINDOW_MS
    hops = [h for h in snap.topology.recent if h.ts >= floor]
    edges: dict[tuple[str, str], FoldEdge] = {}
    for h in hops:
        e = edges.get((h.from_id, h.to))
        if e is None:
            e = edges[(h.from_id, h.to)] = FoldEdge(h.from_id, h.to, h.kind)
        e.count += 1
        e.rate += math.exp(-max(0.0, now - h.ts) / TAU_MS)
        e.last_ts = max(e.last_ts, h.ts)
    names = dict(snap.names)
    for p in snap.peers:
        names[p.id] = p.name
    hubs = {d for (_, d) in edges if d.startswith(("#", "@"))}
    nodes = {s for (s, _) in edges} | {d for (_, d) in edges if not d.startswith(("#", "@"))}
    f = Fold(now=now, senders=[], nodes=[], hubs=[], edges=edges, hops=hops, total=len(hops),
             pill=snap.membership.pill, reason=snap.membership.reason)
    if snap.membership.pill != "unreadable":
        channels = sorted({c.name for c in snap.channels} | {h[1:] for h in hubs if h[0] == "#"})
        for mv in snap.membership.members:
            linked = False
            for pat in mv.live:
                ch = pattern_channel(pat)
                if ch is None:
                    continue
                if ch in (">", "*"):
                    f.wide.add(mv.id)
                    linked = True
                    continue
                for c in _expand(ch, channels):
                    f.members[(mv.id, "#" + c)] = "live"
                    hubs.add("#" + c)
                    linked = True
            for c in mv.durable:
                f.members.setdefault((mv.id, "#" + c), "durable")
                hubs.add("#" + c)
                linked = True
            if linked:
                nodes.add(mv.id)

    def key(i: str) -> tuple[str, str]:
        return (names.get(i, i).lower(), i)

    f.nodes = sorted(nodes, key=key)
    f.senders = sorted({s for (s, _) in edges}, key=key)
    f.hubs = sorted(hubs)
    f._names = names
    return f
