"""What a seat is: the personas a manager seeds, the spec a seat is started from, the live seat
the manager keeps, and the spawn goal a caller waits on. Data only; the families of this package
act on it."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from attach.session.host import PtySeat
from cotal_tui.demo.personas import DEFAULT_CONNECTOR, PersonaFile, PersonaStore, connector_argv
from meshview.wire.endpoint import Caller

if TYPE_CHECKING:
    from attach.session.host import ServingBridge

# the program kinds a static seat may name, and the connector each one is
KIND_CONNECTOR = {"line": "echo-line", "fullscreen": "dashboard", "shell": "bash"}


@dataclass(frozen=True)
class Persona:
    """A persona the manager seeds as a file under its root: the program kind it runs (its
    connector, see :data:`KIND_CONNECTOR`; an ``argv`` makes it the ``command`` connector), the
    card's role, and a description (also its persona text)."""

    kind: str
    role: str
    description: str
    argv: tuple[str, ...] | None = None

    def as_file(self, name: str, store: PersonaStore) -> PersonaFile:
        agent = "command" if self.argv else KIND_CONNECTOR.get(self.kind, DEFAULT_CONNECTOR)
        return PersonaFile(name=name, path=store.path_for(name), role=self.role, description=self.description,
                           agent=agent, subscribe=[],
                           launch_options={"argv": list(self.argv)} if self.argv else None,
                           persona=self.description)


PERSONAS: dict[str, Persona] = {
    "echo": Persona("line", "echo", "the echo line program: a prompt that echoes each line"),
    "dashboard": Persona("fullscreen", "dashboard", "a full-screen live dashboard"),
    "bash": Persona("shell", "shell", "an interactive bash"),
}


@dataclass
class SeatSpec:
    name: str
    principal_id: str
    kind: str = "line"  # "line" | "fullscreen" | "shell"
    cols: int = 120  # the size a reference manager starts every pty at
    rows: int = 32
    argv: list[str] | None = None
    role: str | None = None
    persona: str | None = None
    presence: bool = False  # the manager heartbeats this seat's presence (spawned seats)
    agent: str | None = None  # the connector; from ``kind`` (or ``command`` for an argv) when unset
    model: str | None = None
    variant: str | None = None
    cwd: str | None = None
    prompt: str | None = None  # typed into the pty once the program is up (spawn's initial prompt)
    description: str | None = None
    # a file the program writes its condition to while it waits (``COTAL_SEAT_CONDITION``; see
    # programs/migrate_ask.py): present, the seat heartbeats ``waiting`` with that condition
    condition_file: str | None = None
    # an agent that heartbeats on its own (a scripted team member): its lifecycle uid as it says
    # it, which the manager's rows report (as a real manager reports the agent it launched), so
    # the console binds the seat to that agent by principal + lifecycle uid
    incarnation: Callable[[], str] | None = None

    @property
    def connector(self) -> str:
        if self.agent:
            return self.agent
        return "command" if self.argv else KIND_CONNECTOR.get(self.kind, DEFAULT_CONNECTOR)


@dataclass
class Goal:
    goal_id: str
    caller: Caller
    seat: str
    settled: bool = False
    timer: asyncio.TimerHandle | None = None


@dataclass
class Seat:
    spec: SeatSpec
    owner: str
    actor: str
    minted_uid: str
    pty: PtySeat
    started: float
    exited_at: float | None = None
    sessions: set[ServingBridge] = field(default_factory=set)
    joined_at: float | None = None
    last_output: float = 0.0
    waiting: bool = False  # the condition file was there at the last presence put
    spawner: str | None = None
    goal: Goal | None = None
    stopping: bool = False

    @property
    def lifecycle_uid(self) -> str:
        inc = self.spec.incarnation
        return inc() if inc is not None else self.minted_uid


def argv_for(spec: SeatSpec) -> list[str]:
    if spec.argv:
        return list(spec.argv)
    return connector_argv(spec.connector, spec.name, None)


def read_condition(path: str | None) -> dict[str, object] | None:
    """The condition a waiting program wrote (code, message, since), bounded; None when absent
    or unreadable."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.loads(f.read(4096))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("code"), str):
        return None
    since = raw.get("since")
    cond: dict[str, object] = {"code": raw["code"][:64], "source": "terminal",
                               "since": int(since) if isinstance(since, (int, float)) else int(time.time() * 1000)}
    if isinstance(raw.get("message"), str):
        cond["message"] = raw["message"][:1024]
    return cond
