"""The frame ledger: what every agent is doing, from its ``ag-ui.frame`` event frames (issue 37
item 3; events.md §2.2, §4.2, §4.3, §7.3-7). Pure and bounded: no I/O, no clock of its own,
no asyncio or Textual; every per-sender structure has a cap, because any peer may send any
envelope (a million thread ids, lying seq numbers) and must not grow memory or change what
another peer is shown as.

Public API (others build UI on it; names are kept):

- :class:`FrameIn`: one frame as the ledger reads it. :meth:`FrameIn.of` / :func:`frame_of`
  build it from a :class:`~meshview.wire.decode.Applied` whose parts hold an ``ag-ui.frame``
  (None otherwise). ``sender`` is the authenticated ``from_id``; ``seq`` is None unless a safe
  non-negative integer (old recordings, hostile peers): such a frame is never ordered and
  never produces a gap claim.
- :class:`FrameLedger`: the dashboard's ordering machine (events.md §4.2, ``event-order.js``)
  plus per-agent facts.

  * ``begin_prefill()`` then ``admit(f)`` for each history frame (``historical``) and each live
    one, then ``settle(failed=False)``. Before settle, live frames with a usable seq are held
    and come back from ``settle`` (sorted by seq, stable); everything else passes through at
    once. A ledger that never began a prefill is settled from the start. ``admit`` returns the
    frames to draw now: ``[]`` for a held frame or a duplicate seq, else ``[f]``.
  * per chain ``(sender, epoch, threadId)``: baseline = the batch's MIN seq, next = max + 1,
    interior holes one ``gap`` note per run; the first released held frame's hole is a
    ``boundary-hole`` (unconfirmed, not a fault); later holes are ``gap`` (the frame is still
    drawn, next advances); baseline > FIRST_SEQ is ``prefix-incomplete``; a failed history
    read is ``backfill-failed``.
  * ``notes()`` (last 50 :class:`Note`), ``banner()`` (the dashboard's four sentences, same
    words), ``faulted(sender)``.
  * ``agent(sender, now=None) -> Activity | None`` and ``agents(now=None)`` (most recent
    first): open run, last tool started, last assistant text, last run error, last finish,
    runs and tools in the last hour, last activity, frame count.
  * ``runs(sender) -> list[Run]`` newest first; with ``keep_frames > 0`` each run holds its
    frames (at most ``keep_frames`` per agent; the oldest fall off, a run left with none drops).
  * ``state()`` / ``from_state()`` for checkpoints (like ``FeedRing``'s).

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from meshview.wire import Applied

# TODO(fwire): import AGUI_PROTOCOL and FIRST_SEQ from meshview.wire once its frame module lands
AGUI_PROTOCOL = "ag-ui/0.0.57"
FIRST_SEQ = 1

NoteType = Literal["gap", "boundary-hole", "prefix-incomplete", "backfill-failed"]
Outcome = Literal["open", "finished", "error"]


class FrameIn(msgspec.Struct, frozen=True, gc=False):
    """One ``ag-ui.frame`` as the ledger reads it: who sent it (authenticated), when it came
    (``at``, receipt) and the envelope fields the ordering and the facts need."""

    sender: str
    msg_id: str
    at: float  # receipt time (s)
    ts: float  # the sender's stamp (never an order)
    historical: bool
    protocol: str | None
    thread_id: str | None
    run_id: str | None
    epoch: str | None
    seq: int | None  # None: not orderable (absent, negative, not a safe int)
    events: tuple[Any, ...]

    @classmethod
    def of(cls, applied: Applied) -> FrameIn | None:
        """The first ``ag-ui.frame`` part of ``applied`` as a frame, or None."""
        raise NotImplementedError


def frame_of(applied: Applied) -> FrameIn | None:
    """:meth:`FrameIn.of`."""
    return FrameIn.of(applied)


class Note(msgspec.Struct, frozen=True, gc=False):
    """One ordering notice (events.md §4.3). ``agent`` is None for ``backfill-failed``."""

    type: NoteType
    agent: str | None = None
    epoch: str | None = None
    thread_id: str | None = None
    expected: int | None = None
    got: int | None = None
    missing: int | None = None


class Run(msgspec.Struct, frozen=True, gc=False):
    """One run (native turn) of an agent as its frames told it. ``started`` is None when the
    ledger joined after its ``RUN_STARTED``; ``first_at`` is its first frame's receipt."""

    run_id: str
    first_at: float
    started: float | None
    ended: float | None
    outcome: Outcome
    tools: int
    turn_source: str | None
    frames: tuple[FrameIn, ...] = ()


class Activity(msgspec.Struct, frozen=True, gc=False):
    """An agent's facts from its frames, at one moment. ``tool`` is the last
    ``TOOL_CALL_START``'s name ("last tool", never "running": nothing says a tool finished)."""

    agent: str
    run_id: str | None  # the open run, if any
    run_started: float | None
    turn_source: str | None
    tool: str | None
    tool_at: float | None
    text: str | None  # last assistant text (bounded)
    text_at: float | None
    error_at: float | None  # last RUN_ERROR, cleared by the next RUN_STARTED
    error: str | None
    finished_at: float | None
    runs_hour: int
    tools_hour: int
    last_at: float
    frames: int
    faulted: bool


class FrameLedger:
    """The ordering machine and per-agent facts (see the module docstring)."""

    def __init__(self, keep_frames: int = 0, max_chains: int = 64, max_agents: int = 512) -> None:
        raise NotImplementedError

    def begin_prefill(self) -> None:
        """A history read starts: hold live sequenced frames until :meth:`settle`."""

    def settle(self, failed: bool = False) -> list[FrameIn]:
        """The history batch is in: audit it, release the held frames (seq order)."""
        raise NotImplementedError

    def admit(self, f: FrameIn) -> list[FrameIn]:
        """One frame: the frames to draw now."""
        raise NotImplementedError

    def notes(self) -> list[Note]:
        raise NotImplementedError

    def banner(self) -> list[str]:
        raise NotImplementedError

    def faulted(self, sender: str) -> bool:
        raise NotImplementedError

    def agent(self, sender: str, now: float | None = None) -> Activity | None:
        raise NotImplementedError

    def agents(self, now: float | None = None) -> list[Activity]:
        raise NotImplementedError

    def runs(self, sender: str) -> list[Run]:
        raise NotImplementedError

    def state(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FrameLedger:
        raise NotImplementedError
