"""A deterministic team of N agents for the dense-roster tests and snapshots (fixed clock,
every status, conditions, activities, code context), through the real ``MeshModel`` reducers."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from support.console import T0, FixedClock, StaticSession

from meshview.model.mesh import MeshModel
from meshview.model.snapshot import Condition, PresenceRecord

ROLES = ("planner", "backend", "frontend", "reviewer", "ops", "qa")
NAMES = ("ada", "bram", "cleo", "dax", "eve", "finn", "gus", "hana", "ivo", "jun")


@asynccontextmanager
async def steady_team(nc: Any, space: str, *, seed: int, agents: int,
                      chat_interval: float) -> AsyncIterator[Any]:
    """A scripted team on a real broker that chats every ``chat_interval`` s and never crashes
    or restarts (what a console test watches), stopped when the block ends."""
    from cotal_tui.demo.team import Team, TeamSchedule

    team = Team(nc, space, seed=seed, agents=agents, schedule=TeamSchedule(
        crash_after=None, restart_after=None, chat_interval=chat_interval))
    await team.start()
    try:
        yield team
    finally:
        await team.stop()


def team_model(n: int = 40, *, names: dict[int, str] | None = None,
               code: bool = True) -> tuple[MeshModel, FixedClock]:
    """``n`` agents at ``T0 + 60 s``: a third working (with an activity), every seventh waiting
    on a condition, the rest idle; ``names`` replaces agent ``i``'s name (a hostile one);
    ``code``: each carries ``meta.repo``/``branch``."""
    clk = FixedClock(T0)
    m = MeshModel("demo", clock=clk, server="nats://127.0.0.1:4222")
    m.set_connection("connected")
    m.set_tap(["cotal.demo.>"], True)
    m.end_initial_load()
    clk.advance(60_000)
    t = clk.t
    for i in range(n):
        name = (names or {}).get(i) or f"{NAMES[i % len(NAMES)]}-{i:02d}"
        role = ROLES[i % len(ROLES)]
        kw: dict[str, Any] = {"status_since": t - 1_000 * (i * 7 % 50)}
        status = "idle"
        if i % 7 == 3:
            status = "waiting"
            kw.update(activity="blocked", activity_since=t - 5_000, condition=Condition(
                "approval" if i % 2 else "input", "harness", "may I run the migration?",
                t - 9_000))
        elif i % 3 == 0:
            status = "working"
            kw.update(activity=f"task {i}: splitting the auth epic", activity_since=t - 2_000,
                      active_at=t - 1_000)
        meta: tuple[tuple[str, str], ...] = (("connector", "claude-code"), ("host", "demo"))
        if code:
            meta += (("repo", "github.com/acme/shop"), ("branch", f"feat/task-{i}"))
        m.apply_presence(PresenceRecord(
            id=f"local.a{i:02d}", name=name, kind="agent", status=status, ts=t - 1_000 * (i % 5),
            role=role, lifecycle_uid=f"uid{i:02d}" + "0" * 27, meta=meta, **kw))
    m.tick()
    return m, clk


def team_app(n: int = 40, **kw: Any):
    from cotal_tui.app import CotalApp

    model, clk = team_model(n, **kw)
    app = CotalApp(session=StaticSession(model))
    app.clock = clk  # type: ignore[attr-defined]
    app.animation_level = "none"
    return app
