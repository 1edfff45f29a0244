"""The model's state, declared: one value per part of :class:`~meshview.model.mesh.MeshModel`,
and :class:`ModelState`, the versioned whole a checkpoint holds (meshview/record/statecodec.py
writes and reads it; the model hands it out and takes it back: ``state()`` / ``restore()``).

A part that is an object of its own (the feed ring, the roster, the channel list, the runs
fold, the DM roll-up, the hop log, the rates) says its state with ``state()`` and is rebuilt
with ``from_state()``; the rest are the values below. What the model derives from these (the roster's kept sort, the channel list, labels,
the snapshot) is not state: a restore starts it afresh. Nor is the stalled verdict's tracker
(meshview/model/stalled.py): a replay rebuilds it from the inputs after a checkpoint.

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from meshview.model.rates import RatesState
from meshview.model.runs_state import RunsState
from meshview.model.snapshot import (
    ConnectionStatus,
    ManagerLease,
    Membership,
    MembershipPill,
    MemberView,
    Peer,
)
from meshview.wire import ChannelConfig, ChannelDefaults

STATE_VERSION = 3
"""The checkpoint schema: 1 was the model's attributes (``vars(model)``), 2 a table of them by
name, 3 :class:`ModelState`."""

MEMBERSHIP_STALE_MS = 45_000.0


@dataclass(slots=True)
class Burst:
    """A unicast burst still open: copies of one DM to several recipients, landing as one row
    when its window closes."""

    first_id: str
    ts: float
    received: float
    from_id: str
    from_name: str
    from_role: str | None
    text: str
    parts: tuple[Any, ...]
    historical: bool
    to_ids: list[str]
    ids: list[str]
    opened: float  # clock time the window opened
    context_id: str | None = None
    thread: tuple[Any, ...] = ()  # the first message's threading fields
    conflict: bool = False  # an id in it was used first by another sender


@dataclass(slots=True)
class RosterState:
    """The roster (meshview/model/roster.py, ``Roster.state()``), and its order as last sorted: heartbeat rewrites
    do not re-sort, so a restored model shows the order the live one showed."""

    peers: dict[str, Peer] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # principal -> roster name
    changed: bool = True  # the order is due for a sort
    agent_ids: tuple[str, ...] = ()
    endpoint_ids: tuple[str, ...] = ()
    peer_ids: tuple[str, ...] = ()  # the snapshot's ``order``
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # status -> [lo, hi)
    watch_last: float | None = None  # receipt time of the last watch delivery
    initial_load: bool = True


@dataclass(slots=True)
class ChannelsState:
    """The channel registry as wire records, and what the tap and the polls said of each
    (meshview/model/channels.py, ``Channels.state()``)."""

    registry: dict[str, ChannelConfig] = field(default_factory=dict)
    defaults: ChannelDefaults | None = None
    retained: dict[str, int] = field(default_factory=dict)
    arrivals: dict[str, int] = field(default_factory=dict)
    arrivals_at_poll: dict[str, int] = field(default_factory=dict)  # when ``retained`` was read
    last: dict[str, float] = field(default_factory=dict)  # newest ``ts`` per channel


@dataclass(slots=True)
class MembershipState:
    """The last membership read (or why it failed)."""

    members: dict[str, MemberView] = field(default_factory=dict)
    feed_at: float | None = None
    read: bool = False  # a read has completed
    unreadable: str | None = None

    def view(self, now: float) -> Membership:
        """The four-state pill at ``now``."""
        members = tuple(self.members[k] for k in sorted(self.members))
        if self.unreadable:
            pill: MembershipPill = "unreadable"
        elif not self.read or self.feed_at is None:
            pill = "traffic-only"
        elif now - self.feed_at > MEMBERSHIP_STALE_MS:
            pill = "stale"
        else:
            pill = "live"
        return Membership(pill, self.unreadable, self.feed_at, members)


@dataclass(slots=True)
class ModelState:
    """The whole state of a model, as a checkpoint holds it: the parameters a replay builds its
    model with, then one field per part. ``version`` is the schema (:data:`STATE_VERSION`);
    ``changes`` is the model's own change counter."""

    space: str
    feed_cap: int
    ttl_ms: float
    burst_ms: float
    changes: int
    feed: dict[str, Any]  # FeedRing.state()
    bursts: list[Burst]
    roster: RosterState
    channels: ChannelsState
    dms: dict[str, Any]  # DmRollup.state()
    topology: dict[str, Any]  # HopLog.state()
    rates: RatesState
    rejections: dict[str, int]
    cuts: dict[str, int]  # wire fields cut to their byte bounds
    membership: MembershipState
    managers: dict[str, ManagerLease]
    status: ConnectionStatus
    runs: RunsState  # workflow runs as the managers last reported them
    # FrameLedger.state() (meshview/model/frames.py); empty in a checkpoint from before it
    frames: dict[str, Any] = field(default_factory=dict)
    version: int = STATE_VERSION
