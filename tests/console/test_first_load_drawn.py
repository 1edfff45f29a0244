"""The roster's first load is drawn as it comes, not at the paced frame rate (issue 40: roster
filled <= 600 ms). The console draws at most DRAW_HZ times a second; a team whose presence
arrived just after the first (empty) frame used to wait up to a whole frame gap (250-333 ms)
to be shown. Once the presence watch's first snapshot is in, drawing is paced again."""

from __future__ import annotations

import time

from support.console import AGENTS, FixedClock, StaticSession, T0, console, rec

from cotal_tui.app import CotalApp
from meshview.model.mesh import MeshModel


def names_drawn(scr) -> set[str]:
    snap = scr.snap
    return {p.name for p in snap.agents} if snap is not None else set()


async def test_the_first_load_is_drawn_as_it_comes_then_paced():
    clk = FixedClock(T0)
    model = MeshModel("demo", clock=clk, server="nats://127.0.0.1:4222")
    model.set_connection("connected")
    app = CotalApp(session=StaticSession(model))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        scr = console(app)
        scr.drain()  # the first frame, empty: the next paced drawing is a frame gap away
        assert names_drawn(scr) == set()
        first, *rest = [n for n, *_ in AGENTS]
        model.apply_presence(rec(first, "working", T0))
        scr.drain()  # within the gap: drawn anyway, the roster is filling
        assert names_drawn(scr) == {first}
        for n in rest:
            model.apply_presence(rec(n, "working", T0))
        model.end_initial_load()
        scr.drain()  # the drawing that has the whole first load
        drawn_at = time.monotonic()
        assert names_drawn(scr) == {n for n, *_ in AGENTS}
        clk.advance(1000)
        model.apply_presence(rec(first, "idle", clk.t))
        scr.drain()  # the load is in: back to the paced rate, this change waits its frame
        if time.monotonic() - drawn_at < 0.2:  # (a box that stalled a whole frame gap: moot)
            assert next(p for p in scr.snap.agents if p.name == first).status == "working"
