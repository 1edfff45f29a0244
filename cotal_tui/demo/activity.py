"""The demo team's event plane: every scripted agent publishes ``ag-ui.frame`` parts.

Real seats (Claude Code, Codex, ...) stream their turns on ``events.<owner>.<actor>`` as ordinary
chat (events.md §1, §2). Without this the console never meets a frame in the demo, so this module
publishes what a Claude Code connector publishes, at its cadence (§2.4): a run opens with a
``RUN_STARTED`` frame (plus the prompt on a human turn), each tool boundary ships a frame
(``TOOL_CALL_START``/``END`` only: args and results are withheld, §2.5), the stop flush carries
the closing assistant text, and a separate close frame holds only ``RUN_FINISHED`` or, now and
then, ``RUN_ERROR "run failed"``. One agent (one connector) also ships reasoning. Once per demo one
tool frame is skipped (its ``seq`` is used, the frame never sent) so a reader's gap notice has
something real to find.

One asyncio task drives every agent from a heap of due times, so 40 agents cost one task, not 40.
Each agent draws from its own seeded RNG: the same seed gives every agent the same turns, and the
team's scripted conversation (its own RNG) is unchanged.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from meshview.errors import swallowed
from meshview.wire.subjects import chat_subject

if TYPE_CHECKING:
    from cotal_tui.demo.team import Agent

PROTOCOL = "ag-ui/0.0.57"
FRAME_KIND = "ag-ui.frame"
EVENT_PREFIX = "events."
RUN_FAILED = "run failed"  # the only RUN_ERROR message on the wire since 0.59.0 (§2.5)

TOOLS = ("Bash", "Read", "Edit", "Grep", "Glob", "Write", "TodoWrite", "WebFetch")
TURN_SOURCES = (("human", 4), ("channel", 4), ("notification", 1), ("auto-continuation", 1))
PROMPTS = ["fix the failing test in {area}", "review what changed in {area}",
           "add a retry to {area}", "why is {area} slow?", "clean up {area} before the release"]
AREAS = ["the session store", "the login flow", "the cache layer", "the deploy script",
         "the rate limiter", "the settings page", "migration 0042", "the websocket reconnect"]
SAYS = ["Looking at {area} first.", "Found it: an off-by-one in {area}.",
        "Running the tests that cover {area}.", "That change touches {area} too.",
        "Checking the callers of {area} before editing."]
DONE = ["Done: {area} is fixed and covered by a test.", "Tests pass; {area} is ready for review.",
        "Stopped here: {area} needs a decision on the schema first."]
THINKS = ["The failure only shows under load, so {area} is racing.",
          "If {area} retries, the idempotency key must stay the same.",
          "Smaller diff first: touch {area} only."]


def event_channel(agent: Agent) -> str:
    """``events.<owner>.<actor>``: the agent's principal in dot form (events.md §1.1)."""
    return EVENT_PREFIX + agent.id


@dataclass
class ActivityStats:
    """What the plane did, for tests and the CPU report."""

    frames: int = 0  # published
    runs: int = 0  # opened
    errors: int = 0  # closed with RUN_ERROR
    skipped: list[tuple[str, int]] = field(default_factory=list)  # (agent id, seq never sent)
    failed: int = 0  # publishes that raised (broker away)
    build_cpu_s: float = 0.0  # thread CPU spent building frames (publish awaits excluded)


@dataclass
class _Seat:
    """One agent's writer: its chain ``(id, epoch, threadId)``, its RNG and its open run."""

    agent: Agent
    rng: random.Random
    reasoning: bool
    uid: str = ""  # the incarnation the chain belongs to: a new one starts a new chain
    thread_id: str = ""
    epoch: str = ""
    seq: int = 0
    run_id: str | None = None
    script: Iterator[tuple[list[dict], float, str | None]] | None = None
    task: str = ""  # what the run is about (the presence activity's tail)
    run_started: float = 0.0
    due: float = 0.0
    last_tool: str | None = None


def _hex(rng: random.Random, bits: int = 128) -> str:
    return f"{rng.getrandbits(bits):0{bits // 4}x}"


def _uuid(rng: random.Random) -> str:
    h = _hex(rng)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


class ActivityPlane:
    """Publishes every agent's frames; the team calls :meth:`wake` when an agent starts work."""

    def __init__(self, agents: list[Agent], *, space: str, seed: int, pace: float,
                 envelope: Callable[..., dict], js: Any, set_status: Callable[..., None],
                 skip_after: int | None = 12, error_rate: float = 0.12,
                 stopping: Callable[[], bool] = lambda: False) -> None:
        self.space = space
        self.pace = pace  # seconds scale: 1.0 = a Claude-like 20-40 s between turns
        self.skip_after = skip_after  # the first tool frame past this seq, in any agent's chain, is skipped
        self.error_rate = error_rate
        self.stats = ActivityStats()
        self._envelope, self._js, self._set_status = envelope, js, set_status
        self._stopping = stopping
        reasoner = next((a for a in agents if a.connector == "codex"), agents[0] if agents else None)
        self._seats = {a.id: _Seat(a, random.Random(f"{seed}/activity/{a.name}"), a is reasoner)
                       for a in agents}
        self.reasoner = reasoner.id if reasoner is not None else None
        self._heap: list[tuple[float, int, str]] = []
        self._n = 0
        self._kick = asyncio.Event()

    # -- the team's hooks ---------------------------------------------------------------------

    def in_run(self, agent: Agent) -> bool:
        seat = self._seats.get(agent.id)
        return seat is not None and seat.run_id is not None

    def last_tool(self, agent: Agent) -> str | None:
        """The tool the agent's newest frame started (what its presence activity names)."""
        seat = self._seats.get(agent.id)
        return seat.last_tool if seat is not None else None

    def wake(self, agent: Agent) -> None:
        """The agent went to work: its next turn (or its paused run) goes now."""
        seat = self._seats.get(agent.id)
        if seat is None:
            return
        now = time.monotonic()
        if seat.script is None and seat.due > now:  # an open run keeps its own pace
            self._push(seat, now)
            self._kick.set()

    def resume(self, agent: Agent) -> None:
        """A blocked agent mid-run is unblocked: working again on its run's last tool."""
        seat = self._seats.get(agent.id)
        if seat is None or seat.run_id is None or agent.status != "waiting":
            return
        act = f"{seat.last_tool}: {seat.task}" if seat.last_tool else seat.task
        self._set_status(agent, "working", act, None, _now_ms())

    def halt(self) -> None:
        """Wake the loop so it sees ``stopping`` after the frame in flight (none is cut off)."""
        self._kick.set()

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        now = time.monotonic()
        for i, seat in enumerate(self._seats.values()):  # staggered first turns
            self._push(seat, now + self.pace * seat.rng.uniform(0.5, 6.0) + i * 0.01)
        while not self._stopping():
            if not self._heap:
                await asyncio.sleep(self.pace)
                continue
            due, _, pid = self._heap[0]
            wait = due - time.monotonic()
            if wait > 0:
                self._kick.clear()
                try:
                    await asyncio.wait_for(self._kick.wait(), wait)
                except asyncio.TimeoutError:
                    pass
                continue
            heapq.heappop(self._heap)
            seat = self._seats[pid]
            if seat.due != due:
                continue  # superseded by a wake
            try:
                await self._advance(seat)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one failed frame never stops the plane [counted: COTAL_LOG]
                swallowed("cotal_tui.demo.activity:ActivityPlane.run")
                self.stats.failed += 1
                self._push(seat, time.monotonic() + max(self.pace, 0.5))

    def _push(self, seat: _Seat, due: float) -> None:
        seat.due = due
        self._n += 1
        heapq.heappush(self._heap, (due, self._n, seat.agent.id))

    async def _advance(self, seat: _Seat) -> None:
        """One step of one agent: open a run, ship its next frame, or close it."""
        a = seat.agent
        now = time.monotonic()
        if not a.alive:  # crashed: nothing more from this seat (its open run stays open)
            self._push(seat, now + 5 * self.pace)
            return
        if seat.uid != a.lifecycle_uid:  # a new incarnation: a new session, a new chain
            seat.uid = a.lifecycle_uid
            seat.thread_id, seat.epoch, seat.seq = _uuid(seat.rng), _hex(seat.rng, 64), 0
            seat.script, seat.run_id = None, None
        if seat.script is None:
            if a.status == "waiting":  # blocked seats start no turn
                self._push(seat, now + 2 * self.pace)
                return
            seat.run_id, seat.last_tool = _uuid(seat.rng), None
            area = seat.rng.choice(AREAS)  # drawn either way: a seat's draws never hang on timing
            seat.task = _task(a.activity) if a.status == "working" else area
            seat.script = self._turn(seat, seat.run_id, area)
            seat.run_started = now
            self.stats.runs += 1
            self._set_status(a, "working", seat.task, None, _now_ms())
        elif a.status == "waiting":  # mid-run and blocked (approval, input): the run pauses
            self._push(seat, now + 2 * self.pace)
            return
        t0 = time.thread_time()
        step = next(seat.script, None)
        if step is None:  # the close frame went out: the agent is idle until its next turn
            seat.script, seat.run_id = None, None
            if a.status == "working":
                self._set_status(a, "idle", None, None, _now_ms())
            turn = self.pace * seat.rng.uniform(20.0, 40.0)
            self._push(seat, max(seat.run_started + turn, now + 2 * self.pace))
            self.stats.build_cpu_s += time.thread_time() - t0
            return
        events, gap, tool = step
        seat.seq += 1
        skip = (tool is not None and self.skip_after is not None and not self.stats.skipped
                and seat.seq > self.skip_after)  # past one agent's first turn: a console
        # started with the demo is listening by then (a skip in the first second went unseen)
        if tool is not None:
            seat.last_tool = tool
            if a.status == "working":  # presence names the tool the frame names
                self._set_status(a, "working", f"{tool}: {seat.task}", None, _now_ms())
        if skip:  # the one frame a reader must notice: its seq is spent, nothing is sent
            self.stats.skipped.append((a.id, seat.seq))
            self.stats.build_cpu_s += time.thread_time() - t0
        else:
            part = {"kind": FRAME_KIND, "protocol": PROTOCOL, "threadId": seat.thread_id,
                    "runId": seat.run_id, "epoch": seat.epoch, "seq": seat.seq, "events": events}
            channel = event_channel(a)
            msg = self._envelope(a, [part], channel=channel)
            data = json.dumps(msg, separators=(",", ":")).encode()
            subject = chat_subject(self.space, a.id, channel)
            self.stats.build_cpu_s += time.thread_time() - t0
            await self._js.publish(subject, data, headers={"Nats-Msg-Id": msg["id"]})
            self.stats.frames += 1
        if events and events[0]["type"] in ("RUN_FINISHED", "RUN_ERROR"):
            self.stats.errors += events[0]["type"] == "RUN_ERROR"
        self._push(seat, time.monotonic() + gap * self.pace)

    # -- one turn --------------------------------------------------------------------------

    def _turn(self, seat: _Seat, run_id: str, area: str) -> Iterator[tuple[list[dict], float, str | None]]:
        """A Claude Code turn as frames: (events, seconds to the next frame at pace 1, tool)."""
        rng, tid = seat.rng, seat.thread_id
        source = rng.choices([s for s, _ in TURN_SOURCES], [w for _, w in TURN_SOURCES])[0]
        opened: list[dict] = [_ev("RUN_STARTED", threadId=tid, runId=run_id,
                                  cotal={"turnSource": source, "runIdSource": "connector"})]
        if source == "human":  # a peer's prompt is never republished; a human's is (§2.5)
            opened += _text(rng, "user", rng.choice(PROMPTS).format(area=area))
        yield opened, rng.uniform(1.0, 3.0), None
        for _ in range(rng.randint(4, 8)):
            tool = rng.choice(TOOLS)
            events: list[dict] = []
            if seat.reasoning and rng.random() < 0.6:
                events += _reasoning(rng, rng.choice(THINKS).format(area=area))
            if rng.random() < 0.5:
                events += _text(rng, "assistant", rng.choice(SAYS).format(area=area))
            call = "toolu_" + _hex(rng, 96)
            events += [_ev("TOOL_CALL_START", toolCallId=call, toolCallName=tool),
                       _ev("TOOL_CALL_END", toolCallId=call)]
            yield events, rng.uniform(1.0, 4.0), tool
        yield _text(rng, "assistant", rng.choice(DONE).format(area=area)), rng.uniform(0.1, 0.5), None
        if rng.random() < self.error_rate:  # StopFailure: the kind goes to presence, never here
            yield [_ev("RUN_ERROR", message=RUN_FAILED)], 0.0, None
        else:
            yield [_ev("RUN_FINISHED", threadId=tid, runId=run_id)], 0.0, None


def _task(activity: str | None) -> str:
    """The run's subject from a presence activity, without a tool prefix this plane put there."""
    head, sep, tail = (activity or "").partition(": ")
    return (tail if sep and head in TOOLS else activity) or "the backlog"


def _ev(kind: str, **fields: Any) -> dict:
    return {"type": kind, **fields, "timestamp": _now_ms()}


def _text(rng: random.Random, role: str, text: str) -> list[dict]:
    """One settled content block: START/CONTENT/END, never token deltas (§3.1)."""
    mid = f"{_uuid(rng)}#0"
    return [_ev("TEXT_MESSAGE_START", messageId=mid, role=role),
            _ev("TEXT_MESSAGE_CONTENT", messageId=mid, delta=text),
            _ev("TEXT_MESSAGE_END", messageId=mid)]


def _reasoning(rng: random.Random, text: str) -> list[dict]:
    mid = f"rs_{_hex(rng, 64)}"
    return [_ev("REASONING_MESSAGE_START", messageId=mid, role="reasoning"),
            _ev("REASONING_MESSAGE_CONTENT", messageId=mid, delta=text),
            _ev("REASONING_MESSAGE_END", messageId=mid)]


def _now_ms() -> int:
    return int(time.time() * 1000)
