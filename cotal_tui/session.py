"""The console session: what the App and its screens hold for one open space.

:class:`ConsoleSession` is the contract; three things keep it. :class:`LiveSession` observes a
space on the mesh (``cotal watch``); ``meshview.record.replay.ReplaySession`` plays a recording
(``cotal replay``; the model layer cannot import this module, so it keeps the contract by
shape); the tests' ``StaticSession`` holds fixed data. Every one has every attribute, ``None``
where it does not apply, so nothing above is probed: ``kind`` says which one it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol, runtime_checkable

import msgspec

from attach.control.connection import connect as attach_connect, session_target
from attach.control.health import HealthPoller
from attach.control.verbs import ps_poller
from attach.control.managed import PsPoller
from cotal_tui.operator import Operator
from cotal_tui.seats import SeatSessions
from meshview.errors import swallowed
from meshview.link.connect import ConnectTarget
from meshview.model.agent_activity import ActivityRead, frames_of
from meshview.model.mesh import MeshModel
from meshview.observe.observer import Observer, ObserverOptions

if TYPE_CHECKING:
    from meshview.lines.notify import Notifier
    from meshview.record.record import Recorder
    from meshview.record.replay import ReplayOperator

SessionKind = Literal["live", "replay", "static"]
Skills = dict[str, list[tuple[str, str]]]  # peer id → (skill name, description), agent cards
StopHook = Callable[[], None]

SKILLS_CAP = 2000


@dataclass(frozen=True)
class SessionOptions:
    """What a live session is opened with, as plain values (the CLI builds them from its
    flags: ``cotal_tui.cli.watch_console.session_options``)."""

    backfill: int = 50  # channel messages read back on open (DMs: 20× that, at most 1000)
    dms: bool = True  # observe DMs too (``--no-dms`` turns it off)
    as_name: str | None = None  # the operator's name when it sends (``--as``)
    read_only: str | None = None  # why this console may not send, or None
    stall_ms: float | None = None  # the stalled verdict's quiet time (None: the model's default)
    health: bool = False  # the operator opted in to plane health (``--health`` / ``[ui] health``)


@runtime_checkable
class ConsoleSession(Protocol):
    """One open space as the console sees it. Read-only facts are properties (each kind keeps
    them as plain attributes); ``recorder`` and ``notifier`` are set by the recording and the
    alerts that attach to a session, ``on_stop`` is where they hook its end."""

    @property
    def kind(self) -> SessionKind: ...  # live observer, replay of a recording, or fixed data

    @property
    def model(self) -> MeshModel: ...

    @property
    def space(self) -> str: ...

    @property
    def target(self) -> ConnectTarget | None: ...  # how control verbs reach the mesh (None: no mesh)

    @property
    def operator(self) -> Operator | ReplayOperator | None: ...  # who sends (None: nobody)

    @property
    def managed(self) -> PsPoller | None: ...  # managers' ``ps`` poll: roster marks, cards

    @property
    def seat_sessions(self) -> SeatSessions | None: ...  # how attach/peek/tile reach seats

    @property
    def health(self) -> HealthPoller | None: ...  # plane health: only when the operator opted in

    @property
    def skills(self) -> Skills: ...

    @property
    def started(self) -> bool: ...  # ``start()`` ran (the console starts one that has not)

    @property
    def on_stop(self) -> list[StopHook]: ...  # run by ``stop()`` after its own stopping

    recorder: Recorder | None  # the recording started on this session, if any
    notifier: Notifier | None  # NEEDS-YOU alerts (cotal_tui/alerts.py), once attached

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def read_activity(self, agent_id: str, limit: int) -> ActivityRead: ...
    # the newest ``limit`` frames of the agent's event channel that it sent (the activity lens)


def run_stop_hooks(hooks: list[StopHook]) -> None:
    """Every hook once, in order (a hook added while they run waits for the next stop)."""
    for hook in list(hooks):
        hook()


class ConsoleObserver(Observer):
    """The observer plus the one card field the model does not keep: skills (agent card).

    An adapter, not a fork: it re-reads ``card.skills`` from the same presence entries the
    observer just applied, bounded, for the agent detail card."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.skills: Skills = {}

    def _on_presence(self, e: Any, initial: bool) -> None:
        prev = self._clock_templates.get(e.key)
        super()._on_presence(e, initial)
        if (e.operation or "PUT") != "PUT" or not e.value:
            return
        if prev is not None and self._clock_templates.get(e.key) is prev:
            return  # a heartbeat (clocks only) or a record not applied: the skills stand
        try:
            rec = msgspec.json.decode(e.value)
            skills = rec.get("card", {}).get("skills") or []
            out = []
            for s in skills[:50]:
                if isinstance(s, dict):
                    out.append((str(s.get("name") or s.get("id") or "?")[:64],
                                str(s.get("description") or "")[:200]))  # bounded
        except Exception:  # noqa: BLE001 - the observer already judged the record [counted: COTAL_LOG]
            swallowed("cotal_tui.session:ConsoleObserver._on_presence")
            return
        if not out:  # most cards list none: nothing kept, so the cap holds those that do
            self.skills.pop(e.key, None)
            return
        if len(self.skills) >= SKILLS_CAP and e.key not in self.skills:
            self.skills.pop(next(iter(self.skills)))
        self.skills[e.key] = out


class LiveSession:
    """One observed space: the observer and its model, plus how the console reaches the space's
    managed seats: ``managed`` (a ``ps`` poller over the observer's connection, feeding the
    roster markers and agent cards) and ``seat_sessions`` (attach sessions on fresh connections
    made with the console's own target: same servers, creds, nkey and TLS, so attach works
    wherever the console connects)."""

    kind: SessionKind = "live"

    def __init__(self, nc: Any, target: ConnectTarget, space: str,
                 options: SessionOptions = SessionOptions()) -> None:
        backfill = options.backfill
        self.space = space
        self.target = target
        self.model = (MeshModel(space, server=target.display, stall_ms=options.stall_ms)
                      if options.stall_ms else MeshModel(space, server=target.display))
        self.observer = ConsoleObserver(
            nc, space, self.model, has_credential=target.has_credential,
            options=ObserverOptions(dms=options.dms, backfill=backfill,
                                    dm_backfill=min(1000, max(backfill, 0) * 20)))
        self.managed = ps_poller(nc, target, space)  # static mesh: a minted instrument per round
        self.operator = Operator(target, space, name=options.as_name, read_only=options.read_only,
                                 roster=lambda: self.model.snapshot().peers)
        self.seat_sessions = SeatSessions(space, self._seat_connect)
        # plane health probes publish requests: made only when the operator opted in
        self.health: HealthPoller | None = HealthPoller(nc, target, space) if options.health else None
        self.recorder: Recorder | None = None
        self.notifier: Notifier | None = None
        self.on_stop: list[StopHook] = []
        self.started = False

    @property
    def skills(self) -> Skills:
        return self.observer.skills

    async def _seat_connect(self) -> Any:
        """A fresh connection for one attach session through the console's own target, made
        the way ``cotal attach`` makes it (the session owns reconnects)."""
        return await attach_connect(session_target(self.target))

    async def start(self) -> None:
        self.started = True
        await self.observer.start()
        self.managed.start()
        if self.health is not None:
            self.health.start()

    async def read_activity(self, agent_id: str, limit: int) -> ActivityRead:
        """A direct read of ``agent_id``'s event subject (history), its own frames only; a
        refused read is one sentence naming the channel (a scoped credential may not read it)."""
        from meshview.link.connect import short_error
        from meshview.wire import chat_pattern, event_channel
        from meshview.wire.names import chat_stream

        try:
            channel = event_channel(agent_id)
        except ValueError:
            return ActivityRead(error=f"{agent_id[:80]!r} is not an agent id (owner.actor)")
        try:
            got = await self.observer.history.read_stored(
                chat_stream(self.space), chat_pattern(self.space, channel), limit)
        except Exception as e:  # noqa: BLE001 - refused or failed: the lens says why, live only
            return ActivityRead(error=f"this credential cannot read {channel} history "
                                      f"({short_error(e)})")
        return ActivityRead(frames_of((r.delivery.applied(received=r.stored_ms or None,
                                                          historical=True) for r in got),
                                      agent_id, limit))

    async def stop(self) -> None:
        try:
            if self.started:
                self.started = False
                await self.managed.stop()
                if self.health is not None:
                    await self.health.stop()
                await self.observer.stop()
            await self.operator.close()  # the operator's offline record, if it ever sent
        finally:
            run_stop_hooks(self.on_stop)
