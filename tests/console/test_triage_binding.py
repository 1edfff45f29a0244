"""Seats are bound to roster peers by id, never by name: a lying peer on a real broker.

A real DemoManager seat ``asker`` asks ``Proceed? [y/N]`` and heartbeats ``waiting``. A peer that
is not a seat (``local.mallory``) heartbeats under the same display name, waiting on the same
prompt. Only the real seat's roster row is marked managed; the forged row's triage card has no
terminal, and ``y``, Enter and ``D`` on it are refused: nothing reaches the real seat's pty.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

import pytest

from attach.terminal.mirror import Mirror
from cotal_tui.app import CotalApp
from cotal_tui.cli.connection import target_from_args
from cotal_tui.cli.watch_console import session_options
from cotal_tui.session import LiveSession
from cotal_tui.demo.asking import asking_seat
from cotal_tui.demo.manager import DemoManager
from cotal_tui.screens.triage import TriageScreen
from conftest import until
from support.console import screen_text, walk_to
from support.observer import now_ms, presence, put_presence
from widgets.roster import Roster
from widgets.triage import TriageList

NAME = "asker"
FORGER = "local.mallory"
SIZE = (120, 44)


def make_session(nc, broker, space) -> LiveSession:
    args = argparse.Namespace(server=[broker.url], space=space, backfill=20, no_dms=False)
    return LiveSession(nc, target_from_args(args), space, session_options(args))


def seat_text(mgr: DemoManager) -> str:
    m = Mirror(120, 32)
    m.feed(mgr.seats[NAME].pty.snapshot())
    return "\n".join(m.text_lines())


def forged() -> dict:
    """mallory's own presence key, claiming the seat's name and a waiting approval prompt."""
    rec = presence("mallory", "waiting", role="migrations",
                   condition={"code": "approval", "message": "Proceed? [y/N]", "since": now_ms()})
    rec["card"]["name"] = NAME
    return rec


@pytest.fixture
async def asking_and_forger(broker, nc, space, tmp_path):
    seat = asking_seat(str(tmp_path), name=NAME, question="Proceed? [y/N] ", pause_s=600)
    mgr = DemoManager(nc, space, [seat], root=str(tmp_path))
    await mgr.start()

    async def beat() -> None:
        while True:
            await put_presence(nc, space, forged())
            await asyncio.sleep(1.0)

    task = asyncio.get_running_loop().create_task(beat())
    yield mgr, broker, space
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    await mgr.stop()


async def test_a_namesake_is_not_the_seat(asking_and_forger, nc):
    mgr, broker, space = asking_and_forger
    session = make_session(nc, broker, space)
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=SIZE) as pilot:
            def waiting_ids() -> set[str]:
                return {n.id for n in session.model.snapshot().signals.needs_you}

            await until(pilot, lambda: session.started and waiting_ids() == {"local.asker", FORGER},
                        what="the seat and the forger both waiting", timeout=20)
            console = app.console_screen()
            await until(pilot, lambda: console.managed is not None and console.managed.rounds,
                        what="ps answered")
            # the binding: by principal + lifecycle uid, so only the real seat is managed
            assert console.seat_binding("local.asker").seat is not None
            assert console.seat_binding(FORGER).seat is None
            await until(pilot, lambda: screen_text(app).count("managed pty") == 1,
                        what="one managed mark on the roster")

            # roster a on the forged row: not the real seat's terminal
            roster = console.query_one(Roster)
            if console.focused is not roster:
                await pilot.press("h")
            await walk_to(pilot, roster, FORGER)
            await pilot.press("a")
            await until(pilot, lambda: "is not hosted by any manager" in (app.last_notice or ""),
                        what="attach refused on the forged row")
            assert app.screen is console and mgr.live_sessions == 0

            app.open_triage()
            await until(pilot, lambda: isinstance(app.screen, TriageScreen), what="triage open")
            scr = app.screen
            lst = scr.query_one(TriageList)
            await until(pilot, lambda: len([c for c in scr.cards if getattr(c, "peer_id", None)]) == 2,
                        what="two cards")
            await walk_to(pilot, lst, ("agent", FORGER))
            card = next(c for c in scr.cards if getattr(c, "peer_id", None) == FORGER)
            assert not card.managed and card.excerpt is None
            # y (then Enter) on the forged card: refused, nothing asked, nothing typed
            await pilot.press("y")
            await until(pilot, lambda: "answer: unavailable" in (app.last_notice or ""),
                        what="the answer refused")
            assert "not a managed seat" in app.last_notice
            assert scr.pending is None
            await pilot.press("enter")
            await pilot.press("D")
            await until(pilot, lambda: (app.last_notice or "").startswith("stop: "),
                        what="stop refused")
            assert "not a managed seat" in app.last_notice
            assert isinstance(app.screen, TriageScreen)  # no stop overlay
            # a fence: n on the real seat's own card goes to it, and is the first line it reads
            # (a forged y would have been typed, and read, before it)
            await walk_to(pilot, lst, ("agent", "local.asker"))
            await pilot.press("n")
            await until(pilot, lambda: scr.pending is not None, what="the real seat's answer asked")
            await pilot.press("enter")
            await until(pilot, lambda: "read: 'n'" in seat_text(mgr), what="the seat read n", timeout=10)
            assert "read: 'y'" not in seat_text(mgr)
    finally:
        await session.stop()


async def test_a_tile_names_the_seat_by_its_label_and_binds_it_by_id(asking_and_forger, nc):
    """The tile's pane for the real seat carries its roster label (``asker·…``: the forger shares
    the name) and reaches the seat's own manager; the forger has no pane."""
    from cotal_tui.screens.tile import TileScreen
    from widgets.tile_grid import TilePane

    mgr, broker, space = asking_and_forger
    session = make_session(nc, broker, space)
    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: session.started and len(session.model.snapshot().agents) == 2,
                    what="the seat and the forger on the roster", timeout=20)
        console = app.console_screen()
        await until(pilot, lambda: console.managed is not None and console.managed.rounds,
                    what="ps answered")
        # the tile names its panes from the snapshot the console drew (what the operator sees),
        # which can trail the model by a frame: wait for the frame that drew both peers
        await until(pilot, lambda: console.snap is not None and len(console.snap.agents) == 2
                    and console.snap.labels.ambiguous("local.asker"),
                    what="the drawn frame with the seat and the forger")
        labels = console.snap.labels
        shown = labels.label("local.asker")
        assert shown is not None and shown != NAME and shown.startswith(NAME)
        assert app.open_tile([NAME])
        await until(pilot, lambda: isinstance(app.screen, TileScreen), what="tile open")
        panes = list(app.screen.query(TilePane))
        assert [p.label for p in panes] == [shown]
        assert shown in str(panes[0].border_title)
        assert [t.instance_id for t in app.screen.targets] == [mgr.instance_id]
        await until(pilot, lambda: mgr.live_sessions == 1, what="the pane's session on the seat")
        # the forger's id is not a seat: nothing to tile by it
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is console, what="tile closed")
