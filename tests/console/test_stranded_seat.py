"""A stuck agent is never invisible (issue 35, item 9): a managed seat its manager's ``ps``
reports running, whose agent has no presence record (it stopped heartbeating and the key
expired before this console started), shows on the roster as ``⨯ finn · seat running, no
presence``, keyed by the row's principal. Real broker, the demo manager with a real pty, the
console's own ``ps`` poll."""

from __future__ import annotations

import argparse

from conftest import until
from cotal_tui.app import CotalApp
from cotal_tui.cli.connection import target_from_args
from cotal_tui.cli.watch_console import session_options
from cotal_tui.session import LiveSession
from support.console import screen_text
from support.managers import Managers


async def test_a_running_seat_with_no_presence_shows_on_the_roster(broker, nc, space, tmp_path):
    managers = Managers(broker, space, tmp_path)
    await managers.start("finn")  # a pty seat; nobody heartbeats as local.finn
    args = argparse.Namespace(server=[broker.url], space=space, backfill=0, no_dms=True)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            await until(pilot, lambda: session.managed is not None and session.managed.fold.rounds
                        and any(s.name == "finn" for s in session.managed.fold.seats()),
                        30, "ps reports finn")
            seat = next(s for s in session.managed.fold.seats() if s.name == "finn")
            assert seat.process == "running" and seat.mesh == "absent"
            # the roster's column cuts the reason ("seat running, no pr…")
            await until(pilot, lambda: "offline · seat running, no pr" in screen_text(app), 10,
                        "the stranded seat on the roster")
            p = session.model.peer(seat.principal)
            assert p is not None and p.status == "offline"
            assert p.offline_reason == "seat-no-presence" and p.lifecycle_uid == seat.lifecycle_uid
            rows = [ln for ln in screen_text(app).splitlines() if "⨯ finn" in ln]
            assert rows and "managed pty" in rows[0], screen_text(app)
            # the roster's counts say it: one offline agent, the stranded seat
            assert dict(session.model.snapshot().signals.counts)["offline"] == 1
            await pilot.press("q")
    finally:
        await session.stop()
        await managers.stop()
