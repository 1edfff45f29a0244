"""The console's attach hooks on the real thing: a real broker, the scripted team, a real
DemoManager serving real ptys, and the console's own ``LiveSession`` (observer + ``ps`` poller).

Roster ``a``/``p``, ``:attach``/``:peek``/``:tile``, the managed marker, the agent card's
managed lines, and the console coming back with its observer still live after a detach.
"""

from __future__ import annotations

from cotal_tui.keygate import TYPEAHEAD_S

import argparse
import time

import pytest
from cotal_tui.cli.connection import target_from_args
from support.console import screen_text, walk_to

from cotal_tui.app import CotalApp
from cotal_tui.cli.watch_console import session_options
from cotal_tui.session import LiveSession
from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.demo.team import Team, TeamSchedule
from cotal_tui.screens.attach import AttachScreen
from cotal_tui.screens.tile import TileScreen
from widgets.roster import Roster
from widgets.terminal_pane import TerminalPane
from conftest import until

SIZE = (120, 40)


def safe_text(app) -> str:
    try:
        return screen_text(app)
    except Exception as e:  # noqa: BLE001 - diagnostics only
        return f"<{e}>"


@pytest.fixture
async def mesh(broker, nc, space, tmp_path):
    """Four scripted agents; the first two are managed seats (line programs) on one manager."""
    team = Team(nc, space, seed=3, agents=4,
                schedule=TeamSchedule(crash_after=None, restart_after=None, chat_interval=0.7))
    await team.start()
    seats = [SeatSpec(name=a.name, principal_id=a.id, kind="line", incarnation=lambda a=a: a.lifecycle_uid)
             for a in team.members[:2]]
    mgr = DemoManager(nc, space, seats, root=str(tmp_path))
    await mgr.start()
    args = argparse.Namespace(server=[broker.url], space=space, backfill=20, no_dms=False)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    yield team, mgr, session
    await session.stop()
    await mgr.stop()
    await team.stop()


def pane_text(app) -> str:
    return "\n".join(app.screen.query_one(TerminalPane).content_text())


def roster_text(app) -> str:
    return "\n".join(app.screen.query_one(Roster).line_texts())


def is_console(app) -> bool:
    return type(app.screen).__name__ == "ConsoleScreen"


async def ready(pilot, session, team, managed: int = 2) -> None:
    """The roster is full and the ``ps`` poll has answered for the managed seats."""
    await until(pilot, lambda: session.started and len(session.model.snapshot().agents) >= len(team.members),
                what="roster")
    await until(pilot, lambda: roster_text(pilot.app).count("managed pty") >= managed,
                what="managed markers")


async def cursor_to(pilot, peer_id: str, timeout: float = 10.0) -> None:
    """Focus the roster and walk its cursor with real keys to ``peer_id`` (the roster reorders
    as statuses change, so each step looks again)."""
    app = pilot.app
    roster = app.screen.query_one(Roster)
    if app.screen.focused is not roster:
        await pilot.press("h")
    assert app.screen.focused is roster
    await walk_to(pilot, roster, peer_id, timeout)


async def test_roster_marks_managed_agents_once_ps_answered(mesh):
    team, mgr, session = mesh
    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, session, team)
        assert session.managed.fold.rounds >= 1
        lines = roster_text(app).splitlines()
        for a in team.members[:2]:
            head = next(ln for ln in lines if f"{a.name}/{a.role}" in ln)
            assert "managed pty" in head, head
        for a in team.members[2:]:
            head = next(ln for ln in lines if f"{a.name}/{a.role}" in ln)
            assert "managed" not in head, head


async def test_agent_card_shows_runtime_pid_uptime(mesh):
    team, mgr, session = mesh
    a = team.members[0]
    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, session, team)
        await cursor_to(pilot, a.id)
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen", what="card")
        text = screen_text(app)
        seat = mgr.seats[a.name]
        assert "managed seat" in text
        assert f"pty on manager {mgr.instance_id[:8]}" in text
        assert f"pid  {seat.pty.pid}" in text
        assert "process  running " in text
        assert "terminal  " not in text  # a contract row carries no pty size to show
        # a card's own `p` closes it and peeks
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen), what="peek from the card")
        assert app.screen.peek
        await until(pilot, lambda: f"{a.name}>" in pane_text(app), what="snapshot")
        await pilot.press("escape")
        await until(pilot, lambda: is_console(app), what="console")
        await until(pilot, lambda: mgr.live_sessions == 0, what="hand-back")


async def test_roster_a_attaches_types_detaches_and_the_observer_lives_on(mesh):
    team, mgr, session = mesh
    a = team.members[0]
    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, session, team)
        await cursor_to(pilot, a.id)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen), what="attach screen")
        scr = app.screen
        assert scr.seat == a.name and not scr.peek
        await until(pilot, lambda: f"{a.name}>" in pane_text(app), what="the seat's output")
        # the seat is fitted to the pane (it starts at 120×32: nothing in a row sizes a pane)
        pty = mgr.seats[a.name].pty
        await until(pilot, lambda: (pty.cols, pty.rows) == tuple(scr.pane.size) == scr.pane.remote_size,
                    what="the seat fitted to the pane")
        assert tuple(scr.pane.size) != (120, 32)
        cols, rows = scr.pane.size
        assert f"fitted {cols}×{rows}" in screen_text(app)
        assert mgr.live_sessions == 1
        await pilot.press(*"hello there", "enter")
        await until(pilot, lambda: "echo: hello there" in pane_text(app), what="echo")
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: is_console(app), what="the console back")
        await until(pilot, lambda: mgr.live_sessions == 0, what="session handed back")
        assert (pty.cols, pty.rows) == (120, 32)  # its size back before the hand-back
        # the observer never stopped: new traffic still lands in the feed
        await team.post(team.members[3], "general", "after the detach")
        await until(pilot, lambda: "after the detach" in screen_text(app), what="live row")
        assert session.started and not session.observer.nc.is_closed


async def test_roster_p_peeks_read_only(mesh):
    team, mgr, session = mesh
    a = team.members[1]
    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, session, team)
        await cursor_to(pilot, a.id)
        rail_open = app.screen.query_one("#rail").display
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen), what="peek screen")
        scr = app.screen
        assert scr.peek and not scr.pane.interactive
        await until(pilot, lambda: f"{a.name}>" in pane_text(app), what="snapshot")
        assert "peek · read-only" in screen_text(app)
        await pilot.press(*"typed", "enter")  # nothing leaves a peek
        await until(pilot, lambda: scr.link.state == "open", what="open")
        assert scr.link.keys_sent == 0
        assert "typed" not in pane_text(app)
        # Esc Esc out of a peek: the second Esc does not also close the console's rail
        await pilot.press("escape", "escape")
        await until(pilot, lambda: is_console(app), what="console")
        assert app.screen.query_one("#rail").display == rail_open
        await until(pilot, lambda: mgr.live_sessions == 0, what="hand-back")


async def test_roster_a_on_an_unmanaged_agent_says_so(mesh):
    team, mgr, session = mesh
    c = team.members[2]
    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, session, team)
        await cursor_to(pilot, c.id)
        await pilot.press("a")
        await until(pilot, lambda: f"attach: {c.name} is not hosted by any manager" in screen_text(app),
                    what="notice")
        assert is_console(app) and mgr.live_sessions == 0


async def palette(pilot, text: str, hint: str) -> None:
    await pilot.press("colon")
    await until(pilot, lambda: type(pilot.app.screen).__name__ == "MeshPalette", what="palette")
    await pilot.press(*text)
    await until(pilot, lambda: hint in screen_text(pilot.app), what=f"hit for {text!r}")
    await pilot.press("enter")


@pytest.mark.slow
async def test_palette_attach_peek_and_tile(mesh):
    team, mgr, session = mesh
    a, b, c = team.members[:3]
    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, session, team)
        # :attach <name>
        await palette(pilot, f"attach {a.name}", f"open {a.name}'s terminal")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen), what="attach screen")
        assert app.screen.seat == a.name and app.screen.pane.interactive
        await until(pilot, lambda: f"{a.name}>" in pane_text(app), what="snapshot")
        await pilot.press("ctrl+right_square_bracket")  # Esc Esc would go to the program
        await until(pilot, lambda: is_console(app), what="console")
        # :peek <name>
        await palette(pilot, f"peek {b.name}", f"watch {b.name}'s terminal, read-only")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen), what="peek screen")
        assert app.screen.seat == b.name and app.screen.peek
        await until(pilot, lambda: f"{b.name}>" in pane_text(app), what="snapshot")
        await pilot.press("escape")
        await until(pilot, lambda: is_console(app), what="console")
        # :attach on a seat no manager hosts: a notice, no screen
        await palette(pilot, f"attach {c.name}", "no managed seat by that name")
        await until(pilot, lambda: f"attach: no managed seat named {c.name}" in screen_text(app),
                    what="notice")
        assert is_console(app)
        await pilot.pause(TYPEAHEAD_S)  # keys typed ahead of a refusal are dropped
        # :tile a b — both panes live and read-only
        await palette(pilot, f"tile {a.name} {b.name}", "tile 2 seats")
        await until(pilot, lambda: isinstance(app.screen, TileScreen), what="tile")
        tile = app.screen
        assert tile.names == [a.name, b.name]
        await until(pilot, lambda: all(link.state == "open" for link in tile.links.values()),
                    what="both panes open")
        await until(pilot, lambda: all(f"{n}>" in "\n".join(p.content_text())
                                       for n, p in zip(tile.names, tile.panes)), what="tile output")
        assert not any(p.interactive for p in tile.panes)
        await pilot.press("escape")
        await until(pilot, lambda: is_console(app), what="console")
        await until(pilot, lambda: mgr.live_sessions == 0, what="every session handed back")
        # :tile — every managed seat
        await palette(pilot, "tile", "tile every managed seat")
        await until(pilot, lambda: isinstance(app.screen, TileScreen), what="tile of the roster")
        assert set(app.screen.names) <= {a.name, b.name} and app.screen.names
        await pilot.press("escape")
        await until(pilot, lambda: is_console(app), what="console")
        await until(pilot, lambda: mgr.live_sessions == 0, what="every session handed back")


async def test_seat_sessions_use_the_consoles_own_target(mesh):
    """Attach goes through the console's target (servers, creds, TLS), not a URL re-derived
    from the observer connection (which would drop credentials)."""
    team, mgr, session = mesh
    from cotal_tui.seats import SeatSessions

    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: session.started, what="started")
        got = app.reach_seats()
        assert isinstance(got, SeatSessions) and got is session.seat_sessions
        nc = await got.connect()
        try:
            assert nc.is_connected and nc.options["allow_reconnect"] is False
        finally:
            await nc.close()


async def test_needs_you_a_and_p_open_the_waiting_seat(mesh):
    """Blocked agents are the ones an operator steps into: the NEEDS YOU rail attaches too."""
    team, mgr, session = mesh
    for t in team._tasks:  # freeze the script so the waiting agent stays waiting
        if t.get_name() == "team-script":
            t.cancel()
    b = team.members[1]
    await team.pose(b, "waiting", "blocked", {"code": "approval", "message": "ok to deploy?"},
                    int(time.time() * 1000))
    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, session, team)
        rail = app.screen.query_one("#rail")
        await until(pilot, lambda: [k for k, _ in rail.items] == [b.id], what="b in NEEDS YOU")
        rail.focus()
        await pilot.press("g")
        assert rail.cursor_key == b.id
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen), what="peek screen")
        assert app.screen.seat == b.name and app.screen.peek
        await until(pilot, lambda: f"{b.name}>" in pane_text(app), what="the seat's screen")
        await pilot.press("escape")  # a peek takes no keys, so Esc alone backs out
        await until(pilot, lambda: is_console(app), what="the console back")
        assert app.screen.focused is rail
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, AttachScreen), what="attach screen")
        assert app.screen.seat == b.name and not app.screen.peek
        await pilot.press("ctrl+right_square_bracket")
        await until(pilot, lambda: mgr.live_sessions == 0, what="session handed back")
