"""Deterministic mesh data for the console tests and snapshots (fixed clock, fixed TZ).

Not a test module: imported by ``test_console*.py``. Everything goes through the real
``MeshModel`` reducers, so the console is exercised on exactly what the observer produces.
"""

from __future__ import annotations

import os
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

os.environ["TZ"] = "UTC"
time.tzset()

from meshview.model.mesh import MeshModel  # noqa: E402
from meshview.model.snapshot import (  # noqa: E402
    ChannelSettings, Condition, MemberView, PresenceRecord,
)
from meshview.wire.decode import Applied

T0 = 1_767_225_600_000.0  # 2026-01-01 00:00:00 UTC


class FixedClock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, ms: float) -> None:
        self.t += ms


@dataclass
class StaticSession:
    """A ``ConsoleSession`` on fixed data: a model and nothing behind it (no mesh, no managers,
    no seats, nobody sending unless a test sets ``operator``); ``stop()`` is remembered."""

    model: MeshModel
    space: str = "demo"
    skills: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    stopped: bool = False
    kind: str = "static"
    target: Any = None
    operator: Any = None
    managed: Any = None
    health: Any = None  # no plane-health probe (the operator did not opt in)
    seat_sessions: Any = None
    recorder: Any = None
    notifier: Any = None
    started: bool = True  # nothing to start
    on_stop: list[Callable[[], None]] = field(default_factory=list)

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True
        for hook in list(self.on_stop):
            hook()

    async def read_activity(self, agent_id: str, limit: int) -> Any:
        """The activity lens's read: the agent's own frames among the model's feed rows."""
        from meshview.model.agent_activity import ActivityRead, frames_of

        return ActivityRead(frames_of(self.model.snapshot().feed, agent_id, limit))


AGENTS = [
    # name, role, connector, model
    ("ada", "planner", "claude-code", "claude-opus-4"),
    ("bram", "backend", "codex", "gpt-5-codex"),
    ("cleo", "frontend", "claude-code", "claude-sonnet-4"),
    ("dax", "reviewer", "opencode", "claude-sonnet-4"),
    ("eve", "reviewer", "claude-code", "claude-opus-4"),
    ("finn", "ops", "gemini-cli", "gemini-2.5-pro"),
    ("gus", "qa", "codex", "gpt-5"),
]

HOSTILE = "pwned \x1b[2J\x1b]0;owned\x07 \u202eevil\u202c done"


def pid(name: str) -> str:
    return f"local.{name}"


def rec(name: str, status: str, ts: float, **kw: Any) -> PresenceRecord:
    role, conn, model = next((r, c, m) for n, r, c, m in AGENTS if n == name)
    return PresenceRecord(
        id=pid(name), name=name, kind="agent", status=status, ts=ts, role=role,
        lifecycle_uid=kw.pop("uid", f"uid{name}0000000000000000000000"),
        meta=(("connector", conn), ("model", model), ("host", "demo")),
        description=f"{role} agent in the demo team", tags=("demo", role), **kw,
    )


def build_model(*, dm_visible: bool = True, membership: str = "live",
                rows: int = 0) -> tuple[MeshModel, FixedClock]:
    """A settled demo space at ``T0 + 120 s``: 7 agents (one crashed), an endpoint, history,
    live channel traffic, DM bursts, anycast, lifecycle rows, a hostile message."""
    clk = FixedClock(T0)
    m = MeshModel("demo", clock=clk, server="nats://127.0.0.1:4222")
    m.set_connection("connected")
    m.set_tap(["cotal.demo.>"] if dm_visible else ["cotal.demo.chat.>"], dm_visible)
    m.set_channel_registry({"general": ChannelSettings(description="everyone"),
                            "releases": ChannelSettings()}, ChannelSettings())
    t = T0
    for name, *_ in AGENTS:
        m.apply_presence(rec(name, "idle", t, status_since=t))
    m.apply_presence(PresenceRecord(id="local.opsdesk", name="opsdesk", kind="endpoint",
                                    status="idle", ts=t, role="operator"))
    m.end_initial_load()
    # history (historical rows, oldest first)
    hist = []
    for i, (name, ch, text) in enumerate([
        ("ada", "general", "morning all, sprint plan is in the doc"),
        ("bram", "team.backend", "session store refactor is half done"),
        ("cleo", "general", "dark-mode contrast fix is up for review"),
    ]):
        role = next(r for n, r, *_ in AGENTS if n == name)
        hist.append(Applied(kind="channel", id=f"h{i}", ts=t - 3_600_000 + i * 60_000,
                            from_id=pid(name), from_name=name, from_role=role, text=text,
                            channel=ch))
    m.apply_history(hist)
    m.set_retained_counts({"general": 14, "team.backend": 6, "releases": 2})

    def say(dt: float, name: str, **kw: Any) -> None:
        clk.advance(dt)
        role = next(r for n, r, *_ in AGENTS if n == name)
        kw.setdefault("id", f"m{clk.t:.0f}{name}")
        m.apply_message(Applied(ts=clk.t, from_id=pid(name), from_name=name, from_role=role, **kw))
        m.tick()

    # presence moves
    clk.advance(2_000)
    m.apply_presence(rec("ada", "working", clk.t, activity="splitting the auth epic",
                         activity_since=clk.t, status_since=clk.t, active_at=clk.t))
    m.apply_presence(rec("bram", "waiting", clk.t, activity="blocked", activity_since=clk.t,
                         status_since=clk.t, condition=Condition(
                             "approval", "harness", "wants approval to run migrations on staging",
                             clk.t)))
    m.apply_presence(rec("eve", "working", clk.t, activity="reviewing PR 42",
                         activity_since=clk.t, status_since=clk.t, active_at=clk.t))
    say(3_000, "ada", kind="channel", channel="general",
        text="pushed feat/auth-12; CI is green")
    say(4_000, "bram", kind="channel", channel="team.backend",
        text="@cleo can you take a look at the cache layer? The invalidation path double-frees "
             "the session handle when the reconnect races the eviction timer, and I would like "
             "a second pair of eyes before I merge.")
    say(1_000, "cleo", kind="dm", to=pid("dax"), text="can you review PR 57 today?")
    say(100, "cleo", kind="dm", to=pid("eve"), text="can you review PR 57 today?")
    say(100, "cleo", kind="dm", to=pid("gus"), text="can you review PR 57 today?")
    clk.advance(500)
    m.tick()
    say(2_000, "dax", kind="dm", to=pid("cleo"), text="yes, after lunch")
    clk.advance(500)
    m.tick()
    say(3_000, "gus", kind="anycast", to_service="reviewer",
        text="please pick up: the rate limiter",
        parts=())
    say(2_000, "eve", kind="channel", channel="releases", text="v1.8.2 notes drafted")
    say(1_500, "finn", kind="channel", channel="general", text=HOSTILE)
    # dax goes waiting on input
    clk.advance(1_000)
    m.apply_presence(rec("dax", "waiting", clk.t, activity="blocked", activity_since=clk.t,
                         status_since=clk.t, condition=Condition(
                             "input", "harness", "which branch should the hotfix target?",
                             clk.t)))
    # finn crashes: heartbeats stop, the others keep heartbeating
    finn_ts = clk.t
    for _step in range(4):
        clk.advance(2_000)
        for name, *_ in AGENTS:
            if name == "finn":
                continue
            p = m.peer(pid(name))
            assert p is not None
            m.apply_presence(rec(name, p.reported_status, clk.t, activity=p.activity,
                                 activity_since=p.activity_since, status_since=p.status_since,
                                 active_at=p.active_at, condition=p.condition))
        m.apply_presence(PresenceRecord(id="local.opsdesk", name="opsdesk", kind="endpoint",
                                        status="idle", ts=clk.t, role="operator"))
        m.sweep()
    assert m.peer(pid("finn")).status == "offline", finn_ts
    for i in range(rows):
        say(50, AGENTS[i % 5][0], kind="channel", channel=("general", "releases")[i % 2],
            text=f"load {i}")
    say(2_000, "ada", kind="channel", channel="general", text="standup in 5 minutes")
    say(1_000, "eve", kind="dm", to=pid("ada"), text="PR 42 looks good, one nit on naming")
    clk.advance(500)
    m.tick()
    if membership == "live":
        m.set_membership({pid("ada"): MemberView(pid("ada"), ("cotal.demo.chat.*.*.general",), (), clk.t),
                          pid("hana"): MemberView(pid("hana"), (), ("releases",), clk.t)},
                         clk.t)
    elif membership == "unreadable":
        m.set_membership_unreadable("permissions violation")
    m.apply_rejection("malformed-json", "cotal.demo.chat.local.x.general")
    clk.advance(700)
    m.tick()
    return m, clk


def make_app(**kw: Any):
    from cotal_tui.app import CotalApp

    model, clk = build_model(**{k: v for k, v in kw.items()
                                if k in ("dm_visible", "membership", "rows")})
    session = StaticSession(model, skills={pid("ada"): [("plan", "plan work"),
                                                        ("triage", "triage issues")]})
    app = CotalApp(session=session, **{k: v for k, v in kw.items()
                                       if k in ("keymap", "list_spaces", "open_space")})
    app.clock = clk  # type: ignore[attr-defined]
    return app


def console(app) -> Any:
    """The console screen, under whatever card or lens is pushed over it."""
    from cotal_tui.screens.console import ConsoleScreen

    return next(s for s in reversed(app.screen_stack) if isinstance(s, ConsoleScreen))


def roster_names(roster) -> list[str]:
    """The agents' names in the roster's order (group headers left out)."""
    from widgets.roster_find import is_header_key

    snap = roster.snap
    return [snap.name_of(k) for k, _ in roster.items if not is_header_key(k)]


@asynccontextmanager
async def on_roster(app, size: tuple[int, int] = (120, 40)) -> AsyncIterator[tuple[Any, Any, Any]]:
    """``app`` running at ``size`` with its first frame drawn: (pilot, console, roster)."""
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        scr = console(app)
        yield pilot, scr, scr.query_one("#roster")


def screen_text(app) -> str:
    """What the terminal shows right now, as plain text (one line per row)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False,
                      safe_box=False)
    update = app.screen._compositor.render_update(full=True,
                                                  screen_stack=app._background_screens)
    console.print(update)
    return console.export_text(styles=False)


async def walk_to(pilot, lst, key, timeout: float = 10.0) -> None:
    """Walk ``lst``'s cursor (any list with ``items`` and ``cursor_key``: roster, triage) to
    ``key`` with real j/k presses. Each step reads the order drawn now: rows reorder as
    statuses (and a forger's restamped waiting-since) change."""
    import asyncio

    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while lst.cursor_key != key:
        keys = [k for k, _ in lst.items]
        if loop.time() > end or key not in keys:
            raise AssertionError(f"cursor never reached {key}: {keys}")
        cur = keys.index(lst.cursor_key) if lst.cursor_key in keys else 0
        await pilot.press("j" if keys.index(key) > cur else "k")
        await pilot.pause()
