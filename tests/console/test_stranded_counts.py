"""Stranded-seat counts agree (issue 35 item 9): the roster's ``⨯ … seat running, no presence``
rows, ``cotal ps`` and the spaces overview count stuck agents by one rule
(``attach.control.managed.stranded``). Real broker, the demo manager with real ptys: finn has
no presence record (stuck), ada heartbeats (not stuck)."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys

from conftest import until
from cotal_tui.app import CotalApp
from cotal_tui.cli.connection import target_from_args
from cotal_tui.cli.watch_console import SpaceLister, session_options
from cotal_tui.session import LiveSession
from support.managers import Managers
from support.observer import Heartbeat

from attach.control.managed import ManagedSeat, is_stranded, stranded
from meshview.observe.spaces import list_spaces


async def cotal_ps(broker, space: str, *argv: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "cotal_tui.cli", "ps", "--server", broker.url, "--space", space,
           "--connect-timeout", "2", *argv]
    return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=90)


def seat(name: str, **kw) -> ManagedSeat:
    base = dict(name=name, id=f"local.{name}", instance_id="i" * 26, runtime="pty",
                process="running", mesh="absent")
    return ManagedSeat(**{**base, **kw})


def test_the_rule_running_no_presence_current_view_manager_answering_one_per_principal():
    assert is_stranded(seat("finn"))
    assert not is_stranded(seat("finn", process="exited"))
    assert not is_stranded(seat("finn", mesh="working"))
    assert not is_stranded(seat("finn", mesh="offline"))  # a record, lapsed: the roster shows it
    assert not is_stranded(seat("finn", mesh_view="unknown"))
    assert not is_stranded(seat("finn", silent_since=1.0))
    # two managers reporting one principal are one roster row, so one stranded seat
    two = [seat("finn"), seat("finn", instance_id="j" * 26), seat("gus")]
    assert [s.name for s in stranded(two)] == ["finn", "gus"]


async def test_roster_ps_and_the_spaces_overview_count_the_same_stranded_seats(
        broker, nc, space, tmp_path):
    managers = Managers(broker, space, tmp_path)
    hb = Heartbeat(nc, space, period=1.0)
    await managers.start("finn", "ada")  # nobody heartbeats as finn: stuck
    hb.add("ada", status="working")
    async with hb:
        # cotal ps: the rows, the stranded flag in --json, the count line in text
        r = await cotal_ps(broker, space, "--json")
        assert r.returncode == 0, r.stderr
        rows = [json.loads(ln) for ln in r.stdout.splitlines()]
        assert {x["name"]: x["stranded"] for x in rows} == {"finn": True, "ada": False}, rows
        r = await cotal_ps(broker, space)
        assert r.returncode == 0, r.stderr
        assert "cotal ps: 1 seat running with no presence (stranded): finn" in r.stderr, r.stderr
        ps_count = sum(x["stranded"] for x in rows)

        # the console's roster
        args = argparse.Namespace(server=[broker.url], space=space, backfill=0, no_dms=True)
        session = LiveSession(nc, target_from_args(args), space, session_options(args))
        app = CotalApp(session=session)
        try:
            async with app.run_test(size=(140, 40)) as pilot:
                def stuck_rows() -> list[str]:
                    return [p.id for p in session.model.snapshot().agents
                            if p.offline_reason == "seat-no-presence"]
                await until(pilot, lambda: stuck_rows(), 30, "the stranded seat on the roster")
                await until(pilot, lambda: session.managed.fold.rounds >= 2, 30, "a second ps round")
                assert stuck_rows() == ["local.finn"]
                assert session.model.peer("local.ada").status == "working"
                roster_count = len(stuck_rows())
                await pilot.press("q")
        finally:
            await session.stop()

        # the spaces overview, over the same broker
        lister = SpaceLister(nc, broker.url, list_spaces)
        overview = CotalApp(list_spaces=lister, open_space=lambda s: None)
        async with overview.run_test(size=(120, 24)) as pilot:
            from widgets.space_list import SpaceList

            def counted() -> int | None:
                lst = overview.screen.query(SpaceList)
                got = [s for s in lst.first().spaces if s.space == space] if lst else []
                return got[0].stranded if got else None
            await until(pilot, lambda: counted() is not None, 30, "the overview's count")

            def row_text() -> str:  # the space's own row, drawn or scrolled out of view
                lst = overview.screen.query(SpaceList).first()
                return next((" ".join(t.plain for t in lines) for key, lines in lst.build(120)
                             if key == space), "")
            await until(pilot, lambda: "⨯ 1 stranded" in row_text(), 20,
                        lambda: f"count {counted()}: {row_text()!r}")
            overview_count = counted()
            await pilot.press("q")

        assert ps_count == roster_count == overview_count == 1
        await managers.stop()
