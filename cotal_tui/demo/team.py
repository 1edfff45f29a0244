"""A deterministic scripted team that speaks the real Cotal wire on an open mesh.

Each agent heartbeats presence into ``cotal_presence_<space>`` every 2 s and the team posts
channel messages (incl. the hierarchical ``team.backend``), DMs, anycast to roles, mentions,
data and artifact parts and threaded replies, all through JetStream with ``Nats-Msg-Id`` set
to the message id. One agent crashes (stops heartbeating, no delete) and one restarts as a
new incarnation (new ``lifecycleUid``, same principal), so every lifecycle path of the
console has something real to show. Every agent also streams its turns as ``ag-ui.frame`` parts
on its event channel (``cotal_tui/demo/activity.py``); a run owns its seat's working status. The
same ``--seed`` gives the same conversation and the same frames.

Size: over 500 lines because the scripted team is one deterministic story (schedule, presence
states, messages, answers to the operator); split, the story would scatter.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import string
import time
import uuid
from dataclasses import dataclass, field

import msgspec
from nats.aio.client import Client as NATS
from nats.js import api
from nats.js.kv import KeyValue

from cotal_tui.demo.activity import ActivityPlane
from meshview.errors import swallowed
from meshview.wire.decode import Delivery, decode_delivery
from meshview.wire.messages import EndpointRef
from meshview.wire.names import bucket_names, space_token, task_stream
from meshview.wire.outbound import (
    DEV_OWNER,
    PROTOCOL_VERSION,
    actor_token,
    anycast_pattern,
    build_message,
    delivery_subject,
    inbox_pattern,
    reply_context,
)
from meshview.wire.subjects import chat_subject, inst_subject, svc_subject

# name, role, connector, model, skills
ROSTER: list[tuple[str, str, str, str, list[str]]] = [
    ("ada", "planner", "claude-code", "claude-opus-4", ["plan", "triage"]),
    ("bram", "backend", "codex", "gpt-5-codex", ["python", "sql"]),
    ("cleo", "frontend", "claude-code", "claude-sonnet-4", ["react", "css"]),
    ("dax", "reviewer", "aider", "claude-sonnet-4", ["review", "security"]),
    ("eve", "reviewer", "claude-code", "claude-opus-4", ["review", "tests"]),
    ("finn", "ops", "gemini-cli", "gemini-2.5-pro", ["deploy", "k8s"]),
    ("gus", "qa", "codex", "gpt-5", ["pytest", "fuzz"]),
    ("hana", "docs", "claude-code", "claude-haiku-4", ["writing"]),
]

CHANNELS = ["general", "team.backend", "team.frontend", "releases"]

CONDITIONS = [
    ("approval", "wants approval to run migrations on staging"),
    ("input", "which branch should the hotfix target?"),
    ("rate_limit", "provider 429; backing off"),
]

ACTIVITIES = {
    "planner": ["splitting the auth epic", "triaging new issues", "writing the sprint plan"],
    "backend": ["refactoring the session store", "fixing the N+1 query", "adding retries"],
    "frontend": ["wiring the settings page", "fixing the dark-mode contrast", "lazy-loading"],
    "reviewer": ["reviewing PR 42", "reading the diff of PR 57", "checking test coverage"],
    "ops": ["rolling out v1.8.2", "tuning the autoscaler", "rotating certificates"],
    "qa": ["running the e2e suite", "bisecting a flaky test", "fuzzing the parser"],
    "docs": ["updating the API guide", "writing release notes", "fixing broken links"],
}

CHAT_LINES = [
    "pushed {branch}; CI is green",
    "heads up: {thing} is flaky on main",
    "who owns {thing}? I need a second pair of eyes",
    "done with {thing}, moving on to the next item",
    "@{peer} can you take a look at {thing}?",
    "benchmarks for {thing}: p99 down 18%",
    "blocked on {thing} until the schema lands",
]
THINGS = ["the login flow", "the cache layer", "PR 42", "the deploy script", "the rate limiter",
          "the settings page", "migration 0042", "the websocket reconnect"]


def mint_uid(rng: random.Random) -> str:
    """A lifecycleUid in the SPEC grammar ``[a-z0-9]{26,32}`` (deterministic under a seed)."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(rng.choice(alphabet) for _ in range(26))


DEMO_REPO = "github.com/cotal-demo/shop"
BRANCH_TOPICS = ("checkout-retry", "cart-cache", "search-ranking", "login-rate-limit", "invoice-pdf",
                 "flaky-ci", "price-rounding", "stock-sync", "email-digest", "api-v2")


def code_context(name: str, rng: random.Random) -> dict[str, str]:
    """An agent's code context as the reserved meta keys carry it: the team's repo, a branch of
    its own (``<name>/<topic>``: distinct per agent, the topic drawn from the seed), the head
    commit on it, and its worktree."""
    return {"repo": DEMO_REPO, "branch": f"{actor_token(name)}/{rng.choice(BRANCH_TOPICS)}",
            "head": "".join(rng.choice("0123456789abcdef") for _ in range(40)),
            "cwd": f"/home/dev/shop-{actor_token(name)}"}


@dataclass
class Agent:
    name: str
    role: str
    connector: str
    model: str
    skills: list[str]
    lifecycle_uid: str
    status: str = "idle"
    activity: str | None = None
    condition: dict | None = None
    status_since: int = 0
    activity_since: int = 0
    active_at: int = 0
    alive: bool = True  # False once crashed: no more heartbeats, no delete
    owner: str = DEV_OWNER  # a derived ``u_…`` owner on a user-auth mesh
    code: dict[str, str] = field(default_factory=dict)  # meta repo/branch/head/cwd (SPEC §6 reserved keys)

    @property
    def id(self) -> str:
        return f"{self.owner}.{actor_token(self.name)}"

    def card(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "kind": "agent",
            "owner": self.owner,
            "actor": actor_token(self.name),
            "role": self.role,
            "description": f"{self.role} agent in the demo team",
            "tags": ["demo", self.role],
            "skills": [{"id": s, "name": s, "description": f"{s} work"} for s in self.skills],
            "meta": {"connector": self.connector, "model": self.model, "host": "demo", **self.code},
            "protocolVersion": PROTOCOL_VERSION,
        }

    def presence(self, now_ms: int) -> dict:
        rec: dict = {
            "card": self.card(),
            "status": self.status,
            "ts": now_ms,
            "lifecycleUid": self.lifecycle_uid,
            "statusSince": self.status_since,
            "attention": "open",
        }
        if self.activity:
            rec["activity"] = self.activity
            rec["activitySince"] = self.activity_since
        if self.active_at:
            rec["activeAt"] = self.active_at
        if self.condition:
            rec["condition"] = self.condition
        return rec


@dataclass
class TeamSchedule:
    """When the scripted lifecycle happens, in seconds after start (None = never)."""

    crash_after: float | None = 25.0
    crash_agent: str = "finn"
    restart_after: float | None = 40.0
    restart_agent: str = "cleo"
    chat_interval: float = 1.5
    # the event plane (cotal_tui/demo/activity.py): frames on every agent's events channel
    activity: bool = True
    activity_pace: float | None = None  # 1.0 = a turn every 20-40 s; None: chat_interval / 1.5
    skip_frame_after: int | None = 12  # once per demo, the first tool frame past seq N of an agent is skipped
    run_error_rate: float = 0.12  # runs that close with RUN_ERROR "run failed"


@dataclass
class Team:
    nc: NATS
    space: str = "main"
    seed: int = 1
    agents: int = 6
    rate: float | None = None
    schedule: TeamSchedule = field(default_factory=TeamSchedule)
    heartbeat_s: float = 2.0
    answer: bool = True  # reply to the operator's DMs and asks ("answering the operator")
    answer_delay_s: float = 0.5  # mean "thinking" time before an answer
    owners: tuple[str, ...] = (DEV_OWNER,)  # agent i belongs to owners[i % len]: u_… on a user mesh

    def __post_init__(self) -> None:
        self.space = space_token(self.space)
        self.rng = random.Random(self.seed)
        self.members: list[Agent] = []
        for i in range(self.agents):
            name, role, conn, model, skills = ROSTER[i % len(ROSTER)]
            if i >= len(ROSTER):
                name = f"{name}{i // len(ROSTER) + 1}"
            self.members.append(
                Agent(name, role, conn, model, list(skills), lifecycle_uid=mint_uid(self.rng),
                      owner=self.owners[i % len(self.owners)])
            )
        code = random.Random(f"{self.seed}/code")  # its own draws: the conversation is unchanged
        for a in self.members:
            a.code = code_context(a.name, code)
        self._tasks: list[asyncio.Task] = []
        self._stopping = False
        self._kv: KeyValue | None = None  # the presence bucket, once started
        self._started = 0.0
        self.published = 0  # messages published (acked or queued)
        self.last_ids: list[str] = []
        self.activity: ActivityPlane | None = None  # the event plane, once started

    # -- plumbing ---------------------------------------------------------------------------

    def by_name(self, name: str) -> Agent:
        for a in self.members:
            if a.name == name:
                return a
        raise KeyError(name)

    async def start(self) -> None:
        js = self.nc.jetstream()
        self._js = js
        self._kv = await js.key_value(bucket_names(self.space).presence)
        self._started = time.monotonic()
        now = _now_ms()
        for a in self.members:
            self._set_status(a, "idle", None, None, now)
        await self._heartbeat_all()
        self._tasks = [
            asyncio.create_task(self._heartbeat_loop(), name="team-heartbeat"),
            asyncio.create_task(self._script_loop(), name="team-script"),
        ]
        sched = self.schedule
        if sched.activity and self.members:
            pace = sched.activity_pace if sched.activity_pace is not None else sched.chat_interval / 1.5
            self.activity = ActivityPlane(
                self.members, space=self.space, seed=self.seed, pace=pace, envelope=self._envelope,
                js=js, set_status=self._set_status, skip_after=sched.skip_frame_after,
                error_rate=sched.run_error_rate, stopping=lambda: self._stopping)
            self._tasks.append(asyncio.create_task(self.activity.run(), name="team-activity"))
        await self._start_answering()
        if self.rate:
            self._tasks.append(asyncio.create_task(self._flood_loop(), name="team-flood"))

    async def stop(self, graceful: bool = True) -> None:
        # bounded: a task whose library call swallowed its cancel (a JetStream fetch racing the
        # cancel can turn it into a timeout) sees ``_stopping`` on its next turn instead
        self._stopping = True
        plane = next((t for t in self._tasks if t.get_name() == "team-activity"), None)
        if plane is not None and self.activity is not None:  # let the frame in flight finish
            self.activity.halt()
            await asyncio.wait([plane], timeout=3.0)
        for t in self._tasks:
            t.cancel()
        if self._tasks:
            _, stuck = await asyncio.wait(self._tasks, timeout=5.0)
            for t in stuck:
                t.cancel()
        self._tasks = []
        if graceful and self._kv is not None and not self.nc.is_closed:
            for a in self.members:
                if a.alive:
                    try:  # a graceful disconnect may write one final offline record (§6)
                        rec = a.presence(_now_ms())
                        rec["status"] = "offline"
                        rec.pop("statusSince", None)
                        rec.pop("attention", None)
                        await self._kv.put(a.id, json.dumps(rec).encode())
                    except Exception:  # noqa: BLE001 - a scripted agent's last presence is best effort [counted: COTAL_LOG]
                        swallowed("cotal_tui.demo.team:Team.stop")

    # -- presence ---------------------------------------------------------------------------

    def _set_status(self, a: Agent, status: str, activity: str | None,
                    condition: dict | None, now: int) -> None:
        if status != a.status or activity != a.activity:
            a.status_since = now
        if activity != a.activity:
            a.activity_since = now
        a.status, a.activity, a.condition = status, activity, condition
        if status == "working":
            a.active_at = now

    async def pose(self, a: Agent, status: str, activity: str | None, condition: dict | None,
                   now: int) -> None:
        """Set ``a``'s status and put its presence at once (how a test poses an agent)."""
        self._set_status(a, status, activity, condition, now)
        await self._put_presence(a)

    async def _put_presence(self, a: Agent) -> None:
        assert self._kv is not None
        await self._kv.put(a.id, json.dumps(a.presence(_now_ms())).encode())

    async def _heartbeat_all(self) -> None:
        for a in self.members:
            if a.alive:
                await self._put_presence(a)

    async def _heartbeat_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self._heartbeat_all()
            except Exception:  # noqa: BLE001 - one failed heartbeat never stops the loop [counted: COTAL_LOG]
                swallowed("cotal_tui.demo.team:Team._heartbeat_loop")
                await asyncio.sleep(0.5)  # broker away: keep trying, like a real agent

    async def crash(self, name: str) -> None:
        """Stop heartbeating without a delete: only staleness reveals it (wire.md §4 r3/r4)."""
        self.by_name(name).alive = False

    async def restart_incarnation(self, name: str) -> str:
        """Despawn + same-name respawn: a new lifecycleUid under the same principal."""
        a = self.by_name(name)
        a.lifecycle_uid = mint_uid(self.rng)
        a.alive = True
        self._set_status(a, "idle", None, None, _now_ms())
        a.status_since = _now_ms()
        await self._put_presence(a)
        return a.lifecycle_uid

    # -- messages ---------------------------------------------------------------------------

    def _envelope(self, a: Agent, parts: list[dict], **route) -> dict:
        msg = {
            "id": str(uuid.uuid4()),  # unique per run; the seed fixes content, not ids
            "ts": _now_ms(),
            "space": self.space,
            "from": {"id": a.id, "name": a.name, "role": a.role},
            "parts": parts,
        }
        msg.update({k: v for k, v in route.items() if v is not None})
        return msg

    async def _publish(self, subject: str, msg: dict, wait_ack: bool = True) -> None:
        data = json.dumps(msg, separators=(",", ":")).encode()
        headers = {"Nats-Msg-Id": msg["id"]}
        if wait_ack:
            await self._js.publish(subject, data, headers=headers)
        else:
            await self._js.publish_async(subject, data, headers=headers)
        self.published += 1
        self.last_ids.append(msg["id"])
        del self.last_ids[:-200]

    async def post(self, a: Agent, channel: str, text: str, *, mentions: list[str] | None = None,
                   extra_parts: list[dict] | None = None, reply_to: str | None = None,
                   context_id: str | None = None, wait_ack: bool = True) -> dict:
        parts = [{"kind": "text", "text": text}] + (extra_parts or [])
        msg = self._envelope(a, parts, channel=channel, mentions=mentions or None,
                             replyTo=reply_to, contextId=context_id)
        await self._publish(chat_subject(self.space, a.id, channel), msg, wait_ack)
        return msg

    async def dm(self, a: Agent, b: Agent, text: str, *, reply_to: str | None = None) -> dict:
        msg = self._envelope(a, [{"kind": "text", "text": text}], to=b.id, replyTo=reply_to)
        await self._publish(inst_subject(self.space, b.id, a.id), msg)
        return msg

    async def anycast(self, a: Agent, role: str, text: str, data: object | None = None) -> dict:
        parts: list[dict] = [{"kind": "text", "text": text}]
        if data is not None:
            parts.append({"kind": "data", "data": data})
        msg = self._envelope(a, parts, toService=role, contextId=f"ctx-{self.rng.randrange(1000)}")
        await self._publish(svc_subject(self.space, role, a.id), msg)
        return msg

    def _alive(self) -> list[Agent]:
        return [a for a in self.members if a.alive]

    async def step(self) -> None:
        """One beat of the script: a status change and one message of some kind."""
        rng = self.rng
        live = self._alive()
        if not live:
            return
        now = _now_ms()
        a = rng.choice(live)
        roll = rng.random()
        plane = self.activity
        if roll < 0.45:
            task = rng.choice(ACTIVITIES[a.role])
            if plane is not None and plane.in_run(a):  # a run owns its seat's status
                plane.resume(a)
            else:
                self._set_status(a, "working", task, None, now)
                if plane is not None:
                    plane.wake(a)  # working means a turn: the agent's next run starts now
        elif roll < 0.65:
            code, message = rng.choice(CONDITIONS)
            self._set_status(a, "waiting", "blocked",
                             {"code": code, "source": "harness", "message": message,
                              "since": now}, now)
        elif plane is not None and plane.in_run(a):
            plane.resume(a)
        else:
            self._set_status(a, "idle", None, None, now)
        await self._put_presence(a)

        sender = rng.choice(live)
        peers = [p for p in self.members if p is not sender]
        peer = rng.choice(peers) if peers else sender
        kind = rng.random()
        text = rng.choice(CHAT_LINES).format(
            branch=f"feat/{rng.choice(['auth', 'cache', 'ui', 'ops'])}-{rng.randrange(100)}",
            thing=rng.choice(THINGS), peer=peer.name)
        if kind < 0.55:
            channel = rng.choice(CHANNELS)
            mentions = [peer.name.lower()] if f"@{peer.name}" in text else None
            extra: list[dict[str, object]] | None = None
            if rng.random() < 0.15:
                extra = [{"kind": "data", "data": {"tests": rng.randrange(50, 500),
                                                   "failed": rng.randrange(3), "ok": True}}]
            elif rng.random() < 0.1:
                body = f"notes {rng.random()}".encode()
                extra = [{"kind": "artifact", "name": "notes.md", "mediaType": "text/markdown",
                          "digest": "sha256:" + hashlib.sha256(body).hexdigest(),
                          "size": len(body)}]
            reply = self.last_ids[-1] if self.last_ids and rng.random() < 0.2 else None
            await self.post(sender, channel, text, mentions=mentions, extra_parts=extra,
                            reply_to=reply, context_id="ctx-standup" if reply else None)
        elif kind < 0.8:
            await self.dm(sender, peer, text)
        else:
            role = rng.choice(["reviewer", "qa", "ops"])
            await self.anycast(sender, role, f"please pick up: {rng.choice(THINGS)}",
                               data={"priority": rng.choice(["low", "high"]),
                                     "pr": rng.randrange(1, 99)})

    async def _script_loop(self) -> None:
        sched = self.schedule
        crashed = restarted = False
        while not self._stopping:
            await asyncio.sleep(sched.chat_interval)
            elapsed = time.monotonic() - self._started
            try:
                if not crashed and sched.crash_after is not None and elapsed >= sched.crash_after:
                    crashed = True
                    if any(a.name == sched.crash_agent for a in self.members):
                        await self.crash(sched.crash_agent)
                if (not restarted and sched.restart_after is not None
                        and elapsed >= sched.restart_after):
                    restarted = True
                    if any(a.name == sched.restart_agent for a in self.members):
                        await self.restart_incarnation(sched.restart_agent)
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one failed script step never stops the script [counted: COTAL_LOG]
                swallowed("cotal_tui.demo.team:Team._script_loop")
                await asyncio.sleep(0.5)  # broker away; the heartbeat loop keeps retrying

    async def _flood_loop(self) -> None:
        """``--rate N``: N channel msgs/s in 10 ms slices, JetStream-acked asynchronously."""
        assert self.rate
        tick = 0.01
        per_tick = self.rate * tick
        owed = 0.0
        i = 0
        next_t = time.monotonic()
        while not self._stopping:
            owed += per_tick
            live = self._alive() or self.members
            while owed >= 1:
                owed -= 1
                a = live[i % len(live)]
                i += 1
                try:
                    await self.post(a, CHANNELS[i % len(CHANNELS)], f"load {i}", wait_ack=False)
                except Exception:  # noqa: BLE001 - the flood goes on past a failed post [counted: COTAL_LOG]
                    swallowed("cotal_tui.demo.team:Team._flood_loop")
                    await asyncio.sleep(0.05)
            next_t += tick
            await asyncio.sleep(max(0.0, next_t - time.monotonic()))

    # -- answering the operator ---------------------------------------------------------------
    # Agents read their own DM inbox and their role's shared anycast queue (SPEC §8: the
    # ``dm_`` filter, the role-shared ``svc_<role>`` durable on the WorkQueue TASK stream, so an
    # ask reaches exactly one holder). They answer senders outside the team (the operator)
    # with a threaded reply DM (replyTo = the message, contextId = its thread); the team's own
    # traffic is consumed silently. A seat waiting on ``input``/``approval`` that hears from
    # the operator goes back to ``working`` before it answers, so NEEDS-YOU clears. Answers
    # draw from their own rng (seeded from ``seed``), so the scripted conversation is unchanged.

    async def _start_answering(self) -> None:
        self._answer_rng = random.Random(f"{self.seed}/answers")
        self.answers: list[dict] = []
        if not self.answer:
            return
        pending: set[asyncio.Task[None]] = set()
        self._answer_pending = pending
        subs = [await self.nc.subscribe(inbox_pattern(self.space, a.id), cb=self._on_dm)
                for a in self.members]
        for role in sorted({a.role for a in self.members}):
            psub = await self._js.pull_subscribe(
                anycast_pattern(self.space, role), durable=f"svc_{role}",
                stream=task_stream(self.space),
                config=api.ConsumerConfig(ack_policy=api.AckPolicy.EXPLICIT, ack_wait=60.0,
                                          deliver_policy=api.DeliverPolicy.ALL))
            self._tasks.append(asyncio.create_task(self._ask_loop(role, psub, pending),
                                                   name=f"team-asks-{role}"))
        await self.nc.flush()
        self._tasks.append(asyncio.create_task(self._hold_answering(subs, pending),
                                               name="team-answering"))

    async def _hold_answering(self, subs: list, pending: set[asyncio.Task]) -> None:
        """Keeps the inbox subscriptions for the team's lifetime; stop() cancels it."""
        try:
            await asyncio.Event().wait()
        finally:
            for t in list(pending):
                t.cancel()
            for sub in subs:
                try:
                    await sub.unsubscribe()
                except Exception:  # noqa: BLE001 - teardown of a subscription that is ending anyway [counted: COTAL_LOG]
                    swallowed("cotal_tui.demo.team:Team._hold_answering")

    def _member(self, pid: str) -> Agent | None:
        return next((a for a in self.members if a.id == pid), None)

    async def _on_dm(self, m) -> None:
        d = decode_delivery(m.subject, m.data)
        if type(d) is not Delivery or self._member(d.sender) is not None:
            return  # malformed, or the team's own chatter
        a = self._member(d.target)
        if a is None or not a.alive:
            return  # a crashed seat reads nothing
        self._schedule_answer(a, d, self._answer_pending)

    async def _ask_loop(self, role: str, psub, pending: set[asyncio.Task]) -> None:
        try:
            await self._asks(role, psub, pending)
        finally:
            try:  # a pull subscription left behind would hold up the connection's drain
                await psub.unsubscribe()
            except Exception:  # noqa: BLE001 - teardown of a subscription that is ending anyway [counted: COTAL_LOG]
                swallowed("cotal_tui.demo.team:Team._ask_loop")

    async def _asks(self, role: str, psub, pending: set[asyncio.Task]) -> None:
        while not self._stopping:
            try:
                msgs = await psub.fetch(8, timeout=1.0)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - timeout (idle) or broker away [counted: COTAL_LOG]
                if not isinstance(e, asyncio.TimeoutError):
                    swallowed("cotal_tui.demo.team:Team._ask_loop")
                    await asyncio.sleep(0.5)
                continue
            for m in msgs:
                try:
                    d = decode_delivery(m.subject, m.data, history=True)
                    if type(d) is not Delivery:
                        await m.term()  # permanent anomaly (SPEC §4)
                        continue
                    if self._member(d.sender) is not None:
                        await m.ack()  # the team's own asks: taken off the queue, unanswered
                        continue
                    holders = [a for a in self.members if a.role == role and a.alive]
                    if not holders:
                        await m.nak(delay=5.0)  # nobody alive holds the role: back in queue
                        continue
                    a = self._answer_rng.choice(holders)
                    self._schedule_answer(a, d, pending, ack=m)
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - one failed ask never stops the loop [counted: COTAL_LOG]
                    swallowed("cotal_tui.demo.team:Team._asks")

    def _schedule_answer(self, a: Agent, d, pending: set[asyncio.Task], ack=None) -> None:
        """Draw the answer now (so it depends only on the seed and arrival order), send it later."""
        rng = self._answer_rng
        delay = self.answer_delay_s * (0.5 + rng.random())
        unblock = (a.status == "waiting" and a.condition is not None
                   and a.condition.get("code") in ("input", "approval"))
        activity = rng.choice(ACTIVITIES[a.role])
        if unblock:
            text = f"thanks - that unblocks me; back to {activity}"
        else:
            text = rng.choice(ANSWER_LINES).format(thing=rng.choice(THINGS), activity=activity)
        t = asyncio.create_task(self._answer(a, d, text, activity, unblock, delay, ack))
        pending.add(t)
        t.add_done_callback(pending.discard)

    async def _answer(self, a: Agent, d, text: str, activity: str, unblock: bool,
                      delay: float, ack) -> None:
        try:
            await asyncio.sleep(delay)
            if unblock:  # the operator answered: back to work before saying so
                if self.activity is not None and self.activity.in_run(a):
                    self.activity.resume(a)  # on the run's own tool, as its frames say
                else:
                    self._set_status(a, "working", activity, None, _now_ms())
                await self._put_presence(a)
            msg = build_message(self.space, EndpointRef(a.id, a.name, a.role), text,
                                to=d.sender, reply_to=d.message.id,
                                context_id=reply_context(d.message))
            await self._publish(delivery_subject(msg), msgspec.to_builtins(msg))
            if ack is not None:
                await ack.ack()  # handled: only now off the work queue (SPEC §8)
            self.answers.append({"by": a.name, "to": d.sender, "kind": d.kind,
                                 "reply_to": d.message.id, "id": msg.id, "unblocked": unblock})
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - an answer that fails is redelivered (nak below) [counted: COTAL_LOG]
            swallowed("cotal_tui.demo.team:Team._answer")
            if ack is not None:
                try:
                    await ack.nak(delay=1.0)
                except Exception:  # noqa: BLE001 - no nak: the ack wait redelivers it [counted: COTAL_LOG]
                    swallowed("cotal_tui.demo.team:Team._answer#2")


ANSWER_LINES = [
    "on it - I'll look at {thing} next",
    "good call; {thing} is next after {activity}",
    "done: {thing} is sorted, details in #general",
    "I need a bit more context on {thing} - can you point me at the issue?",
    "ack. parking {activity} to take {thing}",
]

def _now_ms() -> int:
    return int(time.time() * 1000)
