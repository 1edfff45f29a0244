"""The console on the real observer, in-process: real broker, real team, real NATS."""

from __future__ import annotations

import argparse

import pytest

from cotal_tui.cli.connection import target_from_args
from cotal_tui.cli.watch_console import session_options, wants_picker
from cotal_tui.session import LiveSession
from support.team import steady_team
from meshview.observe.spaces import list_spaces
from conftest import until


@pytest.fixture
async def team(nc, space):
    async with steady_team(nc, space, seed=5, agents=4, chat_interval=0.5) as t:
        yield t


async def test_list_spaces_reads_streams_and_presence(nc, space, team):
    await team.post(team.members[0], "general", "hello")
    await team.post(team.members[1], "releases", "v2")
    # an agent's activity frame is neither a channel nor a message of the overview
    await team.post(team.members[2], "events." + team.members[2].id, "a frame")
    rows = {s.space: s for s in await list_spaces(nc)}
    assert space in rows
    row = rows[space]
    assert row.agents >= 4 and row.channels == 2 and row.messages >= 2


async def test_console_on_the_real_observer(broker, nc, space, team):
    from support.console import screen_text

    from cotal_tui.app import CotalApp

    args = argparse.Namespace(server=[broker.url], space=space, backfill=50, no_dms=False)
    target = target_from_args(args)
    assert not wants_picker(args, target)
    session = LiveSession(nc, target, space, session_options(args))
    app = CotalApp(session=session)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: session.started and len(session.model.snapshot().agents) == 4,
                    what="roster")
        a = team.members[0]
        await team.post(a, "general", "live from the test")
        await until(pilot, lambda: "live from the test" in screen_text(app), what="live row")
        text = screen_text(app)
        assert f"{a.name}/{a.role}" in text and "connected" in text
        app.screen.open_agent(a.id)
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen")
        await pilot.pause()
        skill = a.skills[0]
        assert f"{skill} - {skill} work" in screen_text(app)  # card skills via the adapter
        await pilot.press("x", "q")
    await session.stop()
    assert app.return_value == 0


def test_picker_only_for_an_open_mesh_without_space():
    ns = argparse.Namespace(server=["nats://127.0.0.1:1"], space=None, creds=None, nkey=None)
    assert wants_picker(ns, target_from_args(ns))
    ns.space = "main"
    assert not wants_picker(ns, target_from_args(ns))
