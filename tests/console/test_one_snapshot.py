"""One snapshot per frame: whatever the console draws, the status tiles' summary (● working
◐ waiting ○ idle ⨯ offline), the roster's count, the NEEDS-YOU count, the status bar and the
tabs say the same mesh. Under churn (agents coming, statuses moving, chat, keys walking the
roster, a busy mesh), read back from the widgets after every drain."""

from __future__ import annotations

import random
import re
from time import monotonic

import pytest

from support.console import make_app, rec

from cotal_tui.screens import console as cs
from meshview.model.snapshot import PresenceRecord
from widgets.channel_tabs import ChannelTabs
from widgets.needs_you import NeedsYouRail
from widgets.roster import Roster
from widgets.status_bar import StatusBar
from widgets.status_tiles import Tiles

NAMES = ("ada", "bram", "cleo", "dax", "eve", "finn", "gus")
STATUS = ("working", "waiting", "idle", "working", "offline")


def newcomer(i: int, status: str, ts: float) -> PresenceRecord:
    return PresenceRecord(id=f"local.new{i:03d}", name=f"new{i:03d}", status=status, ts=ts,
                          role="backend", lifecycle_uid=f"{i:026d}")


def shown(screen) -> dict[str, int]:
    """The numbers as the widgets draw them (their titles and text, not the model)."""
    tiles = screen.query_one(Tiles).render().plain
    summary = {s: int(n) for n, s in re.findall(r"(\d+) (working|waiting|idle|offline)", tiles)}
    m = re.search(r"roster · (\d+) agents", str(screen.query_one(Roster).border_title or ""))
    assert m is not None, screen.query_one(Roster).border_title
    rail = re.search(r"NEEDS YOU(?: · (\d+))?", str(screen.query_one(NeedsYouRail).border_title))
    assert rail is not None
    return {"summary": sum(summary.values()), "roster": int(m.group(1)),
            "rail": int(rail.group(1) or 0), **summary}


@pytest.mark.parametrize("busy", [False, True])
async def test_every_drawn_frame_agrees_under_churn(monkeypatch, busy):
    app = make_app()
    m = app.session.model
    rng = random.Random(40)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = app.screen
        await pilot.pause()
        roster, rail, bar, tabs, tiles = [screen.query_one(c) for c in
                                          (Roster, NeedsYouRail, StatusBar, ChannelTabs, Tiles)]
        assert rail.display  # the rail is drawn at this width
        if busy:
            monkeypatch.setattr(cs, "BUSY_RATE", -1.0)  # every drain is a busy one
        roster.focus()
        joined = 0
        for step in range(60):
            for _ in range(rng.randint(1, 6)):  # the mesh moves
                m.clock.advance(rng.randint(1, 400))
                if rng.random() < 0.25:
                    joined += 1
                    m.apply_presence(newcomer(joined, rng.choice(STATUS), m.clock.t))
                else:
                    m.apply_presence(rec(rng.choice(NAMES), rng.choice(STATUS), m.clock.t))
            keys = step % 3 == 0
            if keys:  # keys walking the roster: a drain forced past keys first
                await pilot.press("j")
            screen.set_drain_times(next_drain=0.0, drained_at=monotonic() - cs.KEYS_FIRST_MAX_S)
            app.key_at = monotonic() if keys else monotonic() - 1.0
            screen.drain_tick()
            await pilot.pause()
            snap = screen.snap
            assert snap is not None and snap.version == m.version, step  # drawn, and current
            # one snapshot behind every count drawn
            assert roster.snap is snap and rail.snap is snap and bar.snap is snap, step
            assert tiles.snap is snap and tabs.channels is snap.channels, step
            got = shown(screen)
            assert got["roster"] == got["summary"] == len(snap.agents), (step, got)
            for s in ("working", "waiting", "idle", "offline"):
                assert got[s] == snap.signals.count(s), (step, s, got)
            runs = m.runs_view()
            assert got["rail"] == len(snap.signals.needs_you) + len(runs.needs), (step, got)
        assert joined > 5 and len(m.snapshot().agents) == 7 + joined
