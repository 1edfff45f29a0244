"""The agent card and the seats panel show what ``cotal ps --wide`` shows (issue 39 item 1), and
the card shows an agent's code context, ``meta.repo/branch/head/cwd`` (item 2), which the demo
team sets, a branch per agent from the seed; all on a real broker, hostile values neutralised."""

from __future__ import annotations

import nats
import pytest

from conftest import until
from cotal_tui.app import CotalApp
from cotal_tui.demo.team import Team, TeamSchedule
from cotal_tui.screens.control import PsScreen
from support.console import screen_text
from support.facts_manager import FactsManager
from support.hostile import raw_control_bytes
from support.observer import presence, put_presence
from support.strict_manager import HOSTILE
from test_control_console import live, palette
from widgets.detail_card import agent_card

QUIET = TeamSchedule(crash_after=None, restart_after=None, chat_interval=5.0, activity=False)


def card_text(p, snap, **kw) -> list[str]:
    return [t.plain for _, lines in agent_card(p, snap, 110, **kw) for t in lines]


def test_the_demo_gives_each_agent_its_own_branch_from_the_seed():
    a = [m.code for m in Team(None, seed=5, agents=8, schedule=QUIET).members]  # type: ignore[arg-type]
    b = [m.code for m in Team(None, seed=5, agents=8, schedule=QUIET).members]  # type: ignore[arg-type]
    c = [m.code for m in Team(None, seed=6, agents=8, schedule=QUIET).members]  # type: ignore[arg-type]
    assert a == b and a != c  # deterministic from the seed
    assert len({x["branch"] for x in a}) == 8 and len({x["cwd"] for x in a}) == 8
    assert all(set(x) == {"repo", "branch", "head", "cwd"} and len(x["head"]) == 40 for x in a)


async def test_the_card_shows_the_code_context_the_demo_sets(broker, nc, space):
    team = Team(nc, space, seed=5, agents=3, schedule=QUIET)
    await team.start()
    session = live(nc, broker, space)
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=(120, 50)) as pilot:
            await until(pilot, lambda: session.started and len(session.model.snapshot().agents) == 3,
                        what="roster")
            ada = team.members[0]
            # the console draws at a reading pace: the agent is in the drawn snapshot a frame later
            await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen"
                        or bool(app.screen.open_agent(ada.id)), what="the agent drawn, its card asked")
            await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen", what="the card")
            await until(pilot, lambda: f"branch  {ada.code['branch']}" in screen_text(app), what="the code block")
            text = screen_text(app)
            for k in ("repo", "head", "cwd"):
                assert f"{k:>10}  {ada.code[k]}" in text, k
            await pilot.press("escape")
    finally:
        await session.stop()
        await team.stop()


async def test_a_hostile_code_context_is_neutralised(broker, nc, space):
    rec = presence("mallory", "working")
    rec["card"]["meta"] = {"branch": "main" + HOSTILE, "repo": "r" * 5000, "head": "\u202edeadbeef", "cwd": 7}
    await put_presence(nc, space, rec)
    session = live(nc, broker, space)
    app = CotalApp(session=session)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: session.started and session.model.snapshot().agents, what="roster")
        snap = session.model.snapshot()
        [p] = [x for x in snap.agents if x.name == "mallory"]
        lines = card_text(p, snap)
        assert raw_control_bytes("\n".join(lines).encode()) == []
        assert any(x.startswith("    branch  main\\x1b]0;t") for x in lines)
        assert any(x.startswith("      head  \\u202edeadbeef") for x in lines)
        assert not any(x.strip().startswith("cwd") for x in lines)  # not a string: not shown
        repo = "".join(x for x in lines if "rrrr" in x)
        assert 0 < repo.count("r") <= 260  # the wire keeps 256 bytes of a meta value; the card no more
    await session.stop()


@pytest.fixture
async def facts(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    m = await FactsManager(c, space, seats=("waiter",), root=str(tmp_path / "f")).start()
    yield m
    await m.stop()
    await c.close()
    assert m.own_failures == []


async def test_the_seats_panel_and_the_card_show_the_seat_facts(broker, nc, space, facts):
    from attach.control import verbs as control
    from attach.control.managed import ps_seats
    from attach.control.seat_text import detail_lines
    from meshview.link.connect import ConnectTarget

    await put_presence(nc, space, presence("viewer", "waiting"))
    session = live(nc, broker, space)
    app = CotalApp(session=session)
    async with app.run_test(size=(200, 40)) as pilot:
        await until(pilot, lambda: session.started and session.model.snapshot().agents, what="the session")
        await palette(pilot, "ps")
        await until(pilot, lambda: isinstance(app.screen, PsScreen), what="the ps table")
        lines = app.screen.table()
        row = next(i for i, ln in enumerate(lines) if ln.startswith("waiter "))
        assert "mesh waiting (rate_limit for 40m) · active 40m ago" in lines[row]
        assert lines[row + 1].startswith("    model opus / high · provider anthropic · cwd ")
        assert 'forked from sess-1 "fix login"' in lines[row + 1]
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, PsScreen), what="closed")

        result = await control.ps(ConnectTarget((broker.url,), space, timeout=3))
        [(_, seat)] = ps_seats(result)
        pairs = dict(detail_lines(seat, "waiting"))
        assert pairs["manager's view"] == "mesh waiting (rate_limit for 40m) · active 40m ago"
        assert (pairs["model"], pairs["provider"], pairs["spawner"], pairs["pid"]) == (
            "opus / high", "anthropic", "local.operator", "4242")
        assert pairs["resume"].startswith('forked from sess-1 "fix login" sha256 ab12cd34ef56')
        snap = session.model.snapshot()
        [p] = [x for x in snap.agents if x.name == "viewer"]
        text = card_text(p, snap, managed=detail_lines(seat, p.status))  # its managed-seat section
        assert any(x.strip() == "model  opus / high" for x in text)
        assert any(x.strip().startswith("manager's view  mesh waiting (rate_limit for 40m)") for x in text)
    await session.stop()
