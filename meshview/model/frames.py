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
    drawn, next advances); baseline > FIRST_SEQ is ``prefix-incomplete`` once a history read
    began (a ledger that never read history, the console's own, cannot know what the stream
    retains and says nothing); a failed history read is ``backfill-failed``.
  * ``notes()`` (last 50 :class:`Note`), ``banner()`` (the dashboard's four sentences, same
    words), ``faulted(sender)``.
  * ``agent(sender, now=None) -> Activity | None`` and ``agents(now=None)`` (most recent
    first): open run, last tool started, last assistant text, last run error, last finish,
    runs and tools in the last hour, last activity, frame count.
  * ``runs(sender) -> list[Run]`` newest first; with ``keep_frames > 0`` each run holds its
    frames (at most ``keep_frames`` per agent; the oldest fall off, a run left with none drops).
  * ``state()`` / ``from_state()`` for checkpoints (like ``FeedRing``'s).
  * what changed, for readers that follow the ledger without draining it (the roster, the
    line stream, the notifier; several at once): ``version`` moves with every fact change and
    ``changed_since(v)`` names the agents whose facts moved after ``v`` (None: too long ago,
    read them all); ``transitions_since(n)`` / ``notes_since(n)`` give the run transitions
    (:class:`Transition`) and notes that came after the ``n``-th (``transitions`` / ``notes_seen``
    count them). None of these are checkpointed: a restored ledger starts them afresh.

Times (``at``, and every ``*_at`` of the facts) are the model's clock: epoch milliseconds.

No Textual or Rich import (the model layer).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any, Literal

import msgspec

from meshview.wire import Applied, ExtensionPart
from meshview.wire.frames import FIRST_SEQ, MAX_SEQ
from meshview.wire.parts import AGUI_FRAME_KIND

KIND = AGUI_FRAME_KIND
ID_CAP = 128  # chars kept of a thread, run, epoch, message or tool-call id
NAME_CAP = 64  # of a tool name or turn source
TEXT_CAP = 200  # of the last assistant text or run error
NOTES_KEPT = 50
HOLES_CAP = 16  # seq ranges per chain still open for a late frame; beyond, the lowest is closed
BATCH_CAP = 4096  # history seqs per chain audited at settle; beyond, the lowest are not
RUNS_CAP = 32  # runs kept per agent
OPEN_MSGS_CAP = 8  # text messages accumulating per agent
HOUR_BUCKETS = 60  # minutes of run / tool counts
MINUTE_MS = 60_000.0  # ``at`` is epoch ms (the model's clock)
TOOL_NAMES_CAP = 16  # tool names kept per run (the first ones started; ``tools`` counts all)
NAME_MEMO_CAP = 1024  # distinct tool names shared across runs (Bash, Read...), then not shared
CHANGES_KEPT = 4096  # (version, agent) pairs a reader may ask about with ``changed_since``
TRANSITIONS_KEPT = 1024  # run transitions kept for ``transitions_since``
HELD_PER_AGENT = 2000  # live frames held per sender before settle; beyond, they pass unordered
EVENTS_READ = 10_000  # events of one frame the facts read (the wire bounds them already)

NoteType = Literal["gap", "boundary-hole", "prefix-incomplete", "backfill-failed"]
# ``unclosed``: a newer run of the agent started before this one's close was seen (a lost
# frame, or a second thread); a close that comes later still settles it
Outcome = Literal["open", "finished", "error", "unclosed"]


def _id(v: Any, cap: int = ID_CAP) -> str | None:
    """A string field as kept (cut), or None when absent or not a string."""
    return v[:cap] if type(v) is str else None


def _seq(v: Any) -> int | None:
    return v if type(v) is int and 0 <= v <= MAX_SEQ else None


class FrameIn(msgspec.Struct, frozen=True, gc=False):
    """One ``ag-ui.frame`` as the ledger reads it: who sent it (authenticated), when it came
    (``at``, receipt) and the envelope fields the ordering and the facts need."""

    sender: str
    msg_id: str
    at: float  # receipt time (epoch ms, the model's clock)
    ts: float  # the sender's stamp (never an order)
    historical: bool
    protocol: str | None
    thread_id: str | None
    run_id: str | None
    epoch: str | None
    seq: int | None  # None: not orderable (absent, negative, not a safe int)
    events: tuple[Any, ...]

    @classmethod
    def of(cls, applied: Applied, at: float | None = None) -> FrameIn | None:
        """The first ``ag-ui.frame`` part of ``applied`` as a frame, or None. ``at`` is the
        receipt time when ``applied.received`` is None (the model's clock)."""
        for p in applied.parts:
            if type(p) is ExtensionPart and p.kind == KIND:
                ev = p.events
                recv = applied.received
                return cls(
                    applied.from_id, applied.id,
                    float(recv if recv is not None else at if at is not None else applied.ts),
                    applied.ts, applied.historical, _id(p.protocol, NAME_CAP), _id(p.threadId),
                    _id(p.runId), _id(p.epoch), _seq(p.seq),
                    tuple(ev) if type(ev) is list or type(ev) is tuple else ())
        return None


def frame_of(applied: Applied, at: float | None = None) -> FrameIn | None:
    """:meth:`FrameIn.of`."""
    return FrameIn.of(applied, at)


class Note(msgspec.Struct, frozen=True, gc=False):
    """One ordering notice (events.md §4.3). ``agent`` is None for ``backfill-failed``; a
    ``prefix-incomplete`` names the chain's baseline as ``got``; a ``gap`` or ``boundary-hole``
    names the seq ``expected``, the one that came (``got``) and how many are ``missing``."""

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
    tool_names: tuple[str, ...] = ()  # the first TOOL_NAMES_CAP tools started, in order


class Transition(msgspec.Struct, frozen=True, gc=False):
    """A run of ``agent`` started, finished or failed (its ``RUN_STARTED`` / ``RUN_FINISHED`` /
    ``RUN_ERROR``), as the frame that said so was admitted: what ``--json``'s ``run`` lines and
    the ``run-failed`` / ``finished`` alerts are made of. ``historical``: the frame came from a
    history read (an alert never rings for one)."""

    agent: str
    run_id: str
    state: Literal["started", "finished", "error"]
    at: float
    historical: bool
    turn_source: str | None
    tools: tuple[str, ...]  # the run's tool names so far (the first TOOL_NAMES_CAP)
    tool_count: int


class Activity(msgspec.Struct, frozen=True, gc=False):
    """An agent's facts from its frames, at one moment. ``tool`` is the last
    ``TOOL_CALL_START``'s name ("last tool", never "running": nothing says a tool finished).
    ``run_started`` is the open run's ``RUN_STARTED`` receipt, else its first frame's."""

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


class _Chain:
    """One writer's stream ``(sender, epoch, threadId)``. What was seen below ``next`` is
    "everything from ``holes``' complement": a few open ranges instead of a set of seqs, so
    a chain costs the same at seq 10 and at seq 10**15."""

    __slots__ = ("baseline", "next", "prefix", "faulted", "released", "holes", "batch")

    def __init__(self) -> None:
        self.baseline: int | None = None
        self.next: int | None = None
        self.prefix = False
        self.faulted = False
        self.released = False  # the first held frame crossed the seam
        self.holes: list[list[int]] = []  # sorted [lo, hi) ranges below next never seen
        self.batch: list[int] | None = None  # history seqs before settle

    def fresh(self, seq: int) -> bool:
        """``seq`` not seen yet (and not too old to tell); marks it seen."""
        nxt = self.next
        assert nxt is not None
        if seq >= nxt:
            return True
        for i, h in enumerate(self.holes):
            lo, hi = h
            if lo <= seq < hi:
                if seq == lo:
                    h[0] = lo + 1
                elif seq == hi - 1:
                    h[1] = hi - 1
                else:
                    self.holes.insert(i + 1, [seq + 1, hi])
                    h[1] = seq
                    self._cap()
                if h[0] >= h[1]:
                    self.holes.remove(h)
                return True
        return False

    def hole(self, lo: int, hi: int) -> None:
        if lo < hi:
            self.holes.append([lo, hi])
            self.holes.sort()
            self._cap()

    def _cap(self) -> None:
        while len(self.holes) > HOLES_CAP:
            del self.holes[0]  # the oldest range: a late frame for it reads as a duplicate

    def state(self) -> tuple[Any, ...]:
        return (self.baseline, self.next, self.prefix, self.faulted, self.released,
                [tuple(h) for h in self.holes], list(self.batch) if self.batch is not None else None)

    @classmethod
    def from_state(cls, st: Any) -> _Chain:
        c = cls()
        c.baseline, c.next, c.prefix, c.faulted, c.released, holes, batch = st
        c.holes = [list(h) for h in holes]
        c.batch = list(batch) if batch is not None else None
        return c


class _Run:
    __slots__ = ("run_id", "first_at", "started", "ended", "outcome", "tools", "turn_source",
                 "frames", "names")

    def __init__(self, run_id: str, first_at: float) -> None:
        self.run_id = run_id
        self.first_at = first_at
        self.started: float | None = None
        self.ended: float | None = None
        self.outcome: Outcome = "open"
        self.tools = 0
        self.turn_source: str | None = None
        self.frames: list[FrameIn] = []  # (keep_frames; a list: an empty deque weighs 600 B)
        self.names: tuple[str, ...] = ()  # the first TOOL_NAMES_CAP tool names

    def view(self) -> Run:
        return Run(self.run_id, self.first_at, self.started, self.ended, self.outcome,
                   self.tools, self.turn_source, tuple(self.frames), self.names)


class _Agent:
    """One sender's chains, runs and facts (each bounded)."""

    __slots__ = ("chains", "runs", "open", "tool", "tool_at", "text", "text_at", "msgs",
                 "user_msgs", "error", "error_at", "finished_at", "buckets", "last_at",
                 "frames", "kept", "faulted", "gaps", "missing", "races", "prefixes")

    def __init__(self) -> None:
        self.chains: OrderedDict[tuple[str | None, str | None], _Chain] = OrderedDict()
        self.runs: OrderedDict[str, _Run] = OrderedDict()
        self.open: str | None = None
        self.tool: str | None = None
        self.tool_at: float | None = None
        self.text: str | None = None
        self.text_at: float | None = None
        self.msgs: OrderedDict[str, str] = OrderedDict()  # messageId -> text so far
        self.user_msgs: OrderedDict[str, None] = OrderedDict()  # role "user": not assistant text
        self.error: str | None = None
        self.error_at: float | None = None
        self.finished_at: float | None = None
        self.buckets: deque[list[int]] = deque(maxlen=HOUR_BUCKETS)  # [minute, runs, tools]
        self.last_at = float("-inf")
        self.frames = 0
        self.kept = 0  # frames held in runs (keep_frames)
        self.faulted = False
        # this agent's share of the banner (counts, so a flood costs no memory)
        self.gaps = self.missing = self.races = self.prefixes = 0

    def count(self, at: float, runs: int, tools: int) -> None:
        m = int(at // MINUTE_MS)
        b = self.buckets
        if b and b[-1][0] >= m:  # this minute, or a clock that went back: the newest bucket
            b[-1][1] += runs
            b[-1][2] += tools
        else:
            b.append([m, runs, tools])

    def hour(self, now: float) -> tuple[int, int]:
        lo = int(now // MINUTE_MS) - (HOUR_BUCKETS - 1)
        r = t = 0
        for m, runs, tools in self.buckets:
            if m >= lo:
                r += runs
                t += tools
        return r, t

    def run(self, run_id: str, at: float) -> _Run:
        r = self.runs.get(run_id)
        if r is None:
            r = self.runs[run_id] = _Run(run_id, at)
            while len(self.runs) > RUNS_CAP:
                _, old = self.runs.popitem(last=False)
                self.kept -= len(old.frames)
                if self.open == old.run_id:
                    self.open = None
        return r


class FrameLedger:
    """The ordering machine and per-agent facts (see the module docstring).

    ``keep_frames``: frames kept per agent inside its runs (0: none, facts only);
    ``max_chains``: streams tracked per agent (least recently used dropped);
    ``max_agents``: agents tracked (least recently active dropped, with their facts)."""

    def __init__(self, keep_frames: int = 0, max_chains: int = 16, max_agents: int = 512) -> None:
        self.keep_frames = max(0, int(keep_frames))
        self.max_chains = max(1, int(max_chains))
        self.max_agents = max(1, int(max_agents))
        self._agents: OrderedDict[str, _Agent] = OrderedDict()  # least recent first
        self._settled = True  # no prefill: settled from the start
        # whether any history was read: only then can a late baseline say "not retained"
        # (the console's own ledger follows live frames only; its first seq says nothing)
        self._history_read = False
        self._held: dict[str, list[FrameIn]] = {}
        self._held_order = 0
        self._notes: deque[Note] = deque(maxlen=NOTES_KEPT)
        self._backfill_failed = 0
        # banner totals over the agents kept (sums of their counters)
        self._gaps = self._missing = self._races = self._prefixes = 0
        # what changed, for readers that follow (not checkpointed)
        self._version = 0
        self._changes: deque[tuple[int, str]] = deque(maxlen=CHANGES_KEPT)
        self._transitions: deque[Transition] = deque(maxlen=TRANSITIONS_KEPT)
        self._trans_n = 0
        self._notes_n = 0
        self._names: dict[str, str] = {}  # one copy of each common tool name

    # ------------------------------------------------------------------ ordering

    @property
    def settled(self) -> bool:
        """The phase boundary has passed: gap checking is armed."""
        return self._settled

    def begin_prefill(self) -> None:
        """A history read starts: live frames with a usable seq are held until :meth:`settle`.
        Begun again while unsettled, the frames held so far stay held; each chain known
        already gets a seam again (its first held frame's hole is unconfirmed)."""
        self._settled = False
        self._history_read = True
        for a in self._agents.values():
            for c in a.chains.values():
                c.released = False

    def admit(self, f: FrameIn) -> list[FrameIn]:
        """One frame: the frames to draw now (``[]``: held, or a duplicate seq). A history
        frame before settle joins the batch and is drawn at once (history is in stream order);
        a frame without a usable seq always passes, never ordered."""
        seq = f.seq
        if seq is None:
            self._facts(self._agent(f.sender), f)
            return [f]
        if not self._settled:
            if f.historical:
                a = self._agent(f.sender)
                c = self._chain(a, f)
                if c.next is None:  # (a chain armed before this prefill is audited live)
                    if c.batch is None:
                        c.batch = []
                    if len(c.batch) < BATCH_CAP:
                        c.batch.append(seq)
                    elif seq > min(c.batch):
                        c.batch.remove(min(c.batch))
                        c.batch.append(seq)
                    if c.baseline is None or seq < c.baseline:
                        c.baseline = seq
                    self._facts(a, f)
                    return [f]
                return self._step(a, c, f, False)
            held = self._held.setdefault(f.sender, [])
            if len(held) < HELD_PER_AGENT:
                held.append(f)
                return []
            self._facts(self._agent(f.sender), f)  # a flood past the hold: drawn, unordered
            return [f]
        a = self._agent(f.sender)
        c = self._chain(a, f)
        if c.next is None:
            # first seen live after the boundary: this frame is the baseline
            self._arm(a, c, f, seq)
        return self._step(a, c, f, False)

    def settle(self, failed: bool = False) -> list[FrameIn]:
        """The history batch is in (``failed``: the read failed, the batch is empty): set each
        chain's baseline (the batch's minimum) and audit its interior holes, then release the
        held frames sorted by seq (stable), the first of each chain a straddle."""
        if failed:
            self._backfill_failed += 1
            self._notes.append(Note("backfill-failed"))
            self._notes_n += 1
        for sender, a in list(self._agents.items()):
            for (epoch, thread), c in a.chains.items():
                if c.batch is None or c.next is not None:
                    continue
                seqs = sorted(set(c.batch))
                c.batch = None
                base = c.baseline if c.baseline is not None else seqs[0]
                c.baseline, c.next = base, seqs[-1] + 1
                c.prefix = base > FIRST_SEQ
                if c.prefix:
                    c.hole(0, base)
                    self._count(a, Note("prefix-incomplete", sender, epoch, thread, got=base))
                prev = seqs[0]
                for s in seqs[1:]:
                    if s > prev + 1:
                        c.hole(prev + 1, s)
                        c.faulted = a.faulted = True
                        self._count(a, Note("gap", sender, epoch, thread, prev + 1, s, s - prev - 1))
                    prev = s
        held = [f for fs in self._held.values() for f in fs]
        self._held = {}
        held.sort(key=lambda f: f.seq or 0)  # stable: arrival order within a seq
        self._settled = True
        out: list[FrameIn] = []
        for f in held:
            a = self._agent(f.sender)
            c = self._chain(a, f)
            if c.next is None:
                self._arm(a, c, f, f.seq or 0)
            straddle = not c.released
            c.released = True
            out += self._step(a, c, f, straddle)
        return out

    def _arm(self, a: _Agent, c: _Chain, f: FrameIn, seq: int) -> None:
        c.baseline = c.next = seq
        c.prefix = seq > FIRST_SEQ and self._history_read
        if seq > FIRST_SEQ:
            c.hole(0, seq)
        if c.prefix:
            self._count(a, Note("prefix-incomplete", f.sender, f.epoch, f.thread_id, got=seq))

    def _step(self, a: _Agent, c: _Chain, f: FrameIn, straddle: bool) -> list[FrameIn]:
        """Admit ``f`` against an armed chain (``event-order.js``' ``admit``)."""
        seq = f.seq
        nxt = c.next
        assert seq is not None and nxt is not None
        if not c.fresh(seq):
            return []  # a duplicate seq: dropped
        if seq > nxt:
            if straddle:
                self._count(a, Note("boundary-hole", f.sender, f.epoch, f.thread_id,
                                    nxt, seq, seq - nxt))
            else:
                c.faulted = a.faulted = True
                self._count(a, Note("gap", f.sender, f.epoch, f.thread_id, nxt, seq, seq - nxt))
            c.hole(nxt, seq)
        if seq >= nxt:
            c.next = seq + 1
        self._facts(a, f)
        return [f]

    def _agent(self, sender: str) -> _Agent:
        agents = self._agents
        a = agents.get(sender)
        if a is None:
            a = agents[sender] = _Agent()
            while len(agents) > self.max_agents:
                _, old = agents.popitem(last=False)
                self._gaps -= old.gaps
                self._missing -= old.missing
                self._races -= old.races
                self._prefixes -= old.prefixes
        else:
            agents.move_to_end(sender)
        return a

    def _chain(self, a: _Agent, f: FrameIn) -> _Chain:
        key = (f.epoch, f.thread_id)
        chains = a.chains
        c = chains.get(key)
        if c is None:
            c = chains[key] = _Chain()
            while len(chains) > self.max_chains:
                chains.popitem(last=False)
        else:
            chains.move_to_end(key)
        return c

    def _count(self, a: _Agent, n: Note) -> None:
        t = n.type
        if t == "gap":
            a.gaps += 1
            a.missing += n.missing or 0
            self._gaps += 1
            self._missing += n.missing or 0
        elif t == "boundary-hole":
            a.races += 1
            self._races += 1
        elif t == "prefix-incomplete":
            a.prefixes += 1
            self._prefixes += 1
        self._notes.append(n)
        self._notes_n += 1

    # ------------------------------------------------------------------ facts

    def _facts(self, a: _Agent, f: FrameIn) -> None:
        at = f.at
        if at > a.last_at:
            a.last_at = at
        a.frames += 1
        self._version += 1
        self._changes.append((self._version, f.sender))
        run = None
        was_open = a.open  # the run open before this frame (a RUN_STARTED supersedes it)
        if f.run_id is not None:
            run = a.run(f.run_id, at)
            if run.outcome == "open" and a.open != f.run_id:
                a.open = f.run_id
        runs = tools = 0
        for i, ev in enumerate(f.events):
            if i >= EVENTS_READ:
                break
            if type(ev) is not dict:
                continue
            t = ev.get("type")
            if t == "TOOL_CALL_START":
                name = ev.get("toolCallName")
                a.tool = name[:NAME_CAP] if type(name) is str else None
                a.tool_at = at
                tools += 1
                if run is not None:
                    run.tools += 1
                    if a.tool is not None and len(run.names) < TOOL_NAMES_CAP:
                        run.names += (self._name(a.tool),)
            elif t == "TEXT_MESSAGE_CONTENT":
                mid = _id(ev.get("messageId")) or ""
                delta = ev.get("delta")
                if mid in a.user_msgs or type(delta) is not str:
                    continue
                acc = a.msgs.get(mid)
                if acc is None:
                    acc = self._open_msg(a, mid)
                if len(acc) < TEXT_CAP:
                    acc += delta[:TEXT_CAP - len(acc)]
                    a.msgs[mid] = acc
                a.text, a.text_at = acc, at
            elif t == "TEXT_MESSAGE_START":
                mid = _id(ev.get("messageId")) or ""
                if ev.get("role") == "user":
                    a.user_msgs[mid] = None
                    while len(a.user_msgs) > OPEN_MSGS_CAP:
                        a.user_msgs.popitem(last=False)
                else:
                    self._open_msg(a, mid)
            elif t == "TEXT_MESSAGE_END":
                mid = _id(ev.get("messageId")) or ""
                a.msgs.pop(mid, None)
                a.user_msgs.pop(mid, None)
            elif t == "RUN_STARTED":
                r = self._run_of(a, ev, run, at)
                if r is None:
                    continue
                r.started, r.outcome, r.ended = at, "open", None
                cot = ev.get("cotal")
                src = cot.get("turnSource") if type(cot) is dict else None
                r.turn_source = src[:NAME_CAP] if type(src) is str else None
                prev = (a.runs.get(was_open) if was_open is not None and was_open != r.run_id
                        else None)
                if prev is not None and prev.outcome == "open":
                    prev.outcome, prev.ended = "unclosed", at
                a.open = r.run_id
                a.error = a.error_at = None
                runs += 1
                self._transition(f, r, "started")
            elif t == "RUN_FINISHED" or t == "RUN_ERROR":
                r = self._run_of(a, ev, run, at)
                if r is not None:
                    r.ended = at
                    r.outcome = "finished" if t == "RUN_FINISHED" else "error"
                    if a.open == r.run_id:
                        a.open = None
                if t == "RUN_FINISHED":
                    a.finished_at = at
                else:
                    msg = ev.get("message")
                    a.error = msg[:TEXT_CAP] if type(msg) is str else None
                    a.error_at = at
                if r is not None:
                    self._transition(f, r, "finished" if t == "RUN_FINISHED" else "error")
        if runs or tools:
            a.count(at, runs, tools)
        if self.keep_frames and run is not None:
            run.frames.append(f)
            a.kept += 1
            while a.kept > self.keep_frames:
                for rid, r in a.runs.items():
                    if r.frames:
                        del r.frames[0]
                        a.kept -= 1
                        if not r.frames and r is not run:
                            del a.runs[rid]
                        break
                else:
                    break

    def _name(self, name: str) -> str:
        """One shared copy of a tool name (the same few names repeat in every run)."""
        memo = self._names
        kept = memo.get(name)
        if kept is not None:
            return kept
        if len(memo) < NAME_MEMO_CAP:
            memo[name] = name
        return name

    def _transition(self, f: FrameIn, r: _Run, state: Literal["started", "finished", "error"],
                    ) -> None:
        self._transitions.append(Transition(f.sender, r.run_id, state, f.at, f.historical,
                                            r.turn_source, r.names, r.tools))
        self._trans_n += 1

    @staticmethod
    def _open_msg(a: _Agent, mid: str) -> str:
        a.msgs[mid] = ""
        while len(a.msgs) > OPEN_MSGS_CAP:
            a.msgs.popitem(last=False)
        return ""

    @staticmethod
    def _run_of(a: _Agent, ev: dict[str, Any], run: _Run | None, at: float) -> _Run | None:
        """The run an event names (its ``runId``, else the frame's)."""
        rid = _id(ev.get("runId"))
        if rid is None or (run is not None and rid == run.run_id):
            return run
        return a.run(rid, at)

    # ------------------------------------------------------------------ reads

    @property
    def version(self) -> int:
        """Moves whenever an agent's facts change (a frame reached them)."""
        return self._version

    def changed_since(self, version: int) -> set[str] | None:
        """The agents whose facts changed after ``version`` (an earlier :attr:`version`);
        None when that is further back than the ledger remembers: every agent may have."""
        if version >= self._version:
            return set()
        ch = self._changes
        if not ch or ch[0][0] > version + 1:
            return None
        out: set[str] = set()
        for v, sender in reversed(ch):
            if v <= version:
                break
            out.add(sender)
        return out

    @property
    def transitions(self) -> int:
        """Run transitions seen so far (the next one is number ``transitions + 1``)."""
        return self._trans_n

    def transitions_since(self, n: int) -> list[Transition]:
        """The run transitions after the ``n``-th (at most the last TRANSITIONS_KEPT), oldest
        first."""
        k = min(self._trans_n - n, len(self._transitions))
        return list(self._transitions)[-k:] if k > 0 else []

    @property
    def notes_seen(self) -> int:
        """Notes made so far (:meth:`notes` keeps the last 50)."""
        return self._notes_n

    def notes_since(self, n: int) -> list[Note]:
        """The notes after the ``n``-th (at most the last 50), oldest first."""
        k = min(self._notes_n - n, len(self._notes))
        return list(self._notes)[-k:] if k > 0 else []

    def notes(self) -> list[Note]:
        """The last 50 notes, oldest first."""
        return list(self._notes)

    def banner(self) -> list[str]:
        """The dashboard's four statements (app.js), those that are non-zero, in its order;
        the UI joins them with `` · ``. Counted over the agents kept, not the last 50 notes,
        so one agent's flood of notes cannot push another's gap out of the banner."""
        out = []
        if self._gaps:
            m, g = self._missing, self._gaps
            out.append(f"{m} event frame{'' if m == 1 else 's'} missing "
                       f"({g} break{'' if g == 1 else 's'} in the stream)")
        if self._races:
            n = self._races
            out.append(f"{n} possible ordering race{'' if n == 1 else 's'} at start-up, unconfirmed")
        if self._prefixes:
            n = self._prefixes
            out.append(f"{n} stream{'' if n == 1 else 's'} joined after the start, "
                       "earlier frames not retained")
        if self._backfill_failed:
            out.append("history unavailable, so ordering is based on live frames only")
        return out

    def has_gap(self) -> bool:
        """A gap is among the banner's statements (the dashboard's ``fault`` style)."""
        return self._gaps > 0

    def faulted(self, sender: str) -> bool:
        """A real gap was seen in one of ``sender``'s streams (boundary holes and a late join
        are not faults)."""
        a = self._agents.get(sender)
        return a is not None and a.faulted

    def agent(self, sender: str, now: float | None = None) -> Activity | None:
        """``sender``'s facts; the hour counts end at ``now`` (default: its last activity)."""
        a = self._agents.get(sender)
        return None if a is None else self._view(sender, a, now)

    def agents(self, now: float | None = None) -> list[Activity]:
        """Every agent's facts, the most recently active first."""
        views = [self._view(s, a, now) for s, a in self._agents.items()]
        views.sort(key=lambda v: v.last_at, reverse=True)
        return views

    def _view(self, sender: str, a: _Agent, now: float | None) -> Activity:
        r = a.runs.get(a.open) if a.open is not None else None
        runs_h, tools_h = a.hour(a.last_at if now is None else now)
        return Activity(
            sender, a.open, None if r is None else (r.started if r.started is not None
                                                     else r.first_at),
            None if r is None else r.turn_source, a.tool, a.tool_at, a.text, a.text_at,
            a.error_at, a.error, a.finished_at, runs_h, tools_h, a.last_at, a.frames, a.faulted)

    def runs(self, sender: str) -> list[Run]:
        """``sender``'s runs kept, newest first (by first frame seen)."""
        a = self._agents.get(sender)
        return [] if a is None else [r.view() for r in reversed(a.runs.values())]

    def chains(self, sender: str) -> int:
        """How many of ``sender``'s streams are tracked (at most ``max_chains``)."""
        a = self._agents.get(sender)
        return 0 if a is None else len(a.chains)

    def held(self) -> int:
        """Frames held until settle (0 once settled)."""
        return sum(len(v) for v in self._held.values())

    # ------------------------------------------------------------------ checkpoints

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (meshview/record/statecodec.py): plain values and this
        module's frozen structs, so a checkpoint never names a private class."""
        agents = []
        for sender, a in self._agents.items():
            agents.append({
                "sender": sender,
                "chains": [[k[0], k[1], *c.state()] for k, c in a.chains.items()],
                "runs": [r.view() for r in a.runs.values()],
                "open": a.open, "tool": a.tool, "tool_at": a.tool_at, "text": a.text,
                "text_at": a.text_at, "msgs": dict(a.msgs), "user_msgs": list(a.user_msgs),
                "error": a.error, "error_at": a.error_at, "finished_at": a.finished_at,
                "buckets": [tuple(b) for b in a.buckets], "last_at": a.last_at,
                "frames": a.frames, "faulted": a.faulted,
                "counts": (a.gaps, a.missing, a.races, a.prefixes),
            })
        return {"keep_frames": self.keep_frames, "max_chains": self.max_chains,
                "max_agents": self.max_agents, "settled": self._settled,
                "history_read": self._history_read,
                "held": [f for fs in self._held.values() for f in fs],
                "notes": list(self._notes), "backfill_failed": self._backfill_failed,
                "agents": agents}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FrameLedger:
        """A ledger holding what :meth:`state` returned."""
        led = cls(state.get("keep_frames", 0), state.get("max_chains", 16),
                  state.get("max_agents", 512))
        led._settled = bool(state.get("settled", True))
        led._history_read = bool(state.get("history_read", False))
        for f in state.get("held") or ():
            led._held.setdefault(f.sender, []).append(f)
        led._notes.extend(state.get("notes") or ())
        led._backfill_failed = int(state.get("backfill_failed", 0))
        for st in state.get("agents") or ():
            a = led._agents[st["sender"]] = _Agent()
            for ch in st["chains"]:
                a.chains[(ch[0], ch[1])] = _Chain.from_state(ch[2:])
            for rv in st["runs"]:
                r = a.runs[rv.run_id] = _Run(rv.run_id, rv.first_at)
                r.started, r.ended, r.outcome = rv.started, rv.ended, rv.outcome
                r.tools, r.turn_source, r.frames = rv.tools, rv.turn_source, list(rv.frames)
                r.names = tuple(rv.tool_names)
                a.kept += len(r.frames)
            a.open, a.tool, a.tool_at = st["open"], st["tool"], st["tool_at"]
            a.text, a.text_at = st["text"], st["text_at"]
            a.msgs = OrderedDict(st["msgs"])
            a.user_msgs = OrderedDict.fromkeys(st["user_msgs"])
            a.error, a.error_at, a.finished_at = st["error"], st["error_at"], st["finished_at"]
            a.buckets.extend(list(b) for b in st["buckets"])
            a.last_at, a.frames, a.faulted = st["last_at"], st["frames"], st["faulted"]
            a.gaps, a.missing, a.races, a.prefixes = st["counts"]
            led._gaps += a.gaps
            led._missing += a.missing
            led._races += a.races
            led._prefixes += a.prefixes
        return led
