"""One agent's activity, as the activity lens reads it (issue 37 item 4; events.md §4.2, §7.5).

The lens keeps its own :class:`~meshview.model.frames.FrameLedger` (``keep_frames``: it draws
the frames, the model's ledger keeps facts only) and fills it the dashboard's way: the prefill
begins, the agent's event rows already in the feed ring are admitted as live (held until the
settle), the newest frames of its event subject are read directly (history), then it settles
and follows the ring from its cursor, O(new rows) per tick.

Trust: any peer B may publish on its own subject with channel ``events.<A>``, so both the ring
and a history read of A's event channel can hold B's frames. Only frames whose authenticated
sender (``from_id``, from the subject) is A and whose channel is A's event channel count here.

Pure (no I/O, no clock): the session does the read (``ConsoleSession.read_activity``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Literal

import msgspec

from meshview.model.frames import FrameIn, FrameLedger, Run
from meshview.wire import Applied, event_channel

KEEP_FRAMES = 300  # frames one lens draws (the oldest runs fall off)
READ_LIMIT = 300  # history frames read when the lens opens
SEEN_CAP = 4 * KEEP_FRAMES  # message ids remembered to drop a frame seen twice (ring + read)

Phase = Literal["reading", "settled", "failed"]


class ActivityRead(msgspec.Struct, frozen=True, gc=False):
    """What a session's ``read_activity`` answers: the agent's history frames, oldest first
    (``historical``, its own only), or why none could be read (``error``: one sentence)."""

    frames: tuple[FrameIn, ...] = ()
    error: str | None = None


def frame_of_row(row: Any) -> FrameIn | None:
    """A feed row's ``ag-ui.frame`` as a ledger frame: a ``FeedEntry`` carries the field names
    of :class:`~meshview.wire.Applied` that :meth:`FrameIn.of` reads."""
    return FrameIn.of(row)


def frames_of(rows: Iterable[Applied | Any], agent_id: str, limit: int) -> tuple[FrameIn, ...]:
    """The newest ``limit`` frames among ``rows`` (applied deliveries or feed rows) that
    ``agent_id`` sent on its own event channel, marked historical, oldest first."""
    try:
        channel = event_channel(agent_id)
    except ValueError:
        return ()
    out: list[FrameIn] = []
    for r in rows:
        if r.from_id != agent_id or r.channel != channel:
            continue
        f = FrameIn.of(r)
        if f is not None:
            out.append(f if f.historical else msgspec.structs.replace(f, historical=True))
    return tuple(out[-limit:]) if limit > 0 else ()


class AgentFrames:
    """The lens's frames of one agent: its own ledger, the ring cursor, the read's outcome.

    ``version`` moves whenever something drawn changed (a frame admitted, the settle)."""

    def __init__(self, agent_id: str, keep_frames: int = KEEP_FRAMES) -> None:
        self.agent = agent_id
        self.channel = event_channel(agent_id)  # ValueError: no principal id
        self.ledger = FrameLedger(keep_frames=keep_frames, max_chains=16, max_agents=1)
        self.ledger.begin_prefill()
        self.phase: Phase = "reading"
        self.error: str | None = None
        self.cursor = 0  # the next feed ring index to look at
        self.version = 0
        self.dropped = 0  # frames from others on this channel (a lying peer), never drawn
        self._seen: OrderedDict[str, None] = OrderedDict()

    def _mine(self, row: Any) -> bool:
        return bool(row.event) and row.channel == self.channel

    def _admit(self, f: FrameIn) -> None:
        mid = f.msg_id
        if mid and f.seq is None:  # a frame with a seq is deduped by the ledger (by seq)
            if mid in self._seen:
                return
            self._seen[mid] = None
            if len(self._seen) > SEEN_CAP:
                self._seen.popitem(last=False)
        if self.ledger.admit(f) or not self.ledger.settled:
            self.version += 1

    def follow(self, rows: Any, base: int) -> int:
        """Admit the agent's event rows of ``rows`` (a ``FeedRows`` window whose first row is
        absolute index ``base``) from the cursor on, as live; returns how many rows were read."""
        end = base + len(rows)
        start = max(self.cursor, base)
        if start >= end:
            self.cursor = max(self.cursor, end)
            return 0
        for row in rows.since(start):
            if not self._mine(row):
                continue
            if row.from_id != self.agent:
                self.dropped += 1
                continue
            f = FrameIn.of(row)
            if f is not None:
                self._admit(f if not f.historical else msgspec.structs.replace(f, historical=False))
        self.cursor = end
        return end - start

    def settle(self, read: ActivityRead) -> None:
        """The history read came back: its frames join the batch, then the ledger settles
        (``backfill-failed`` when the read was refused, said in :attr:`error`)."""
        if self.phase != "reading":
            return
        if read.error is None:
            for f in read.frames:
                if f.sender != self.agent:
                    self.dropped += 1
                    continue
                self._admit(f if f.historical else msgspec.structs.replace(f, historical=True))
        self.ledger.settle(failed=read.error is not None)
        self.phase = "failed" if read.error is not None else "settled"
        self.error = read.error
        self.version += 1

    def runs(self) -> list[Run]:
        """The agent's runs, newest first, each with its frames."""
        return self.ledger.runs(self.agent)

    def seen_ids(self) -> int:
        """Message ids remembered to drop a seq-less frame seen twice (at most SEEN_CAP)."""
        return len(self._seen)

    def banner(self) -> list[str]:
        return self.ledger.banner()

    def has_gap(self) -> bool:
        return self.ledger.has_gap()
