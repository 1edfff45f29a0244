"""The bars (status bar, tiles, channel tabs) repaint only when the text they show changes:
snapshots that move only what they hold to the model second (msg/s, the sparkline, the stalest
heartbeat) or nothing they show at all draw no bar; the tab counts come with the feed that
shows the messages they count; the second turning draws the new figures, a count that moves
draws at once, and a replay's step (``drain_now``) reads everything afresh. Renders are counted by each bar's public ``renders``."""

from __future__ import annotations

from conftest import until
from support.console import make_app, pid, rec, screen_text

from meshview.wire.decode import Applied
from widgets.channel_tabs import ChannelTabs
from widgets.roster import Roster
from widgets.status_bar import StatusBar
from widgets.status_tiles import Tiles


def tab_row(app) -> str:
    return screen_text(app).splitlines()[0]


async def test_the_bars_repaint_only_when_what_they_show_changes():
    app = make_app()
    m = app.session.model
    clk = m.clock
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        bar, tiles, tabs, roster = [screen.query_one(c)
                                    for c in (StatusBar, Tiles, ChannelTabs, Roster)]

        async def drawn() -> None:
            """The model's latest version applied by the drain timer, and every dirty widget
            painted (a full paint renders whatever is dirty, and nothing else)."""
            v = m.version
            screen.set_drain_times(next_drain=0.0)
            await until(pilot, lambda: screen.snap is not None and screen.snap.version == v,
                        what="the drain of the model's latest version")
            screen_text(app)

        def renders() -> tuple[int, int, int]:
            return bar.renders, tiles.renders, tabs.renders

        def say(text: str) -> None:
            m.apply_message(Applied(kind="channel", id=f"b{clk.t}", ts=clk.t, from_id=pid("ada"),
                                    from_name="ada", from_role="planner", text=text,
                                    channel="general"))

        clk.t = (clk.t // 1000) * 1000 + 100  # early in a second
        m.tick()
        await drawn()
        assert "2:#general 17 +3 " in tab_row(app)  # (17 of them, 3 unread)
        before = renders()
        ada = next(p for p in screen.snap.agents if p.id == pid("ada"))

        # heartbeats (ada's status as it was) inside the second: the roster follows, no bar
        # is drawn again
        for n in range(3):
            clk.advance(100)
            m.apply_presence(rec("ada", ada.status, clk.t))
            await drawn()
            assert roster.snap is screen.snap and bar.snap is screen.snap
            assert tabs.channels is screen.snap.channels
            assert renders() == before, n
        # a message inside the second: the feed shows it, and the tab counts it in the same
        # frame (one snapshot for both); the status bar and tiles, whose figures are held to
        # the second (msg/s, the sparkline), are not drawn
        say("inside the second")
        await drawn()
        assert "2:#general 18 +4 " in tab_row(app)
        assert "inside the second" in screen_text(app)
        moved = renders()
        assert moved[:2] == before[:2] and moved[2] == before[2] + 1, (before, moved)

        # the second turns: msg/s is read again, the status bar drawn once
        clk.advance(1000)
        m.tick()
        await drawn()
        after = renders()
        assert after[0] == before[0] + 1 and after[2] == moved[2], (before, after)

        # a snapshot that moved nothing the bars show: no bar drawn
        clk.advance(10)
        m.apply_presence(rec("ada", ada.status, clk.t))
        await drawn()
        assert renders() == after
        # ... a count that moves (an agent goes offline) draws at once, inside the second
        clk.advance(10)
        m.apply_presence(rec("ada", "offline", clk.t))
        await drawn()
        assert tiles.renders == after[1] + 1 and renders()[2] == after[2]

        # a replay's step (drain_now) reads every figure afresh, inside the second
        clk.advance(10)
        say("stepped to")
        screen.drain_now()
        screen_text(app)
        assert "2:#general 19 +5 " in tab_row(app)


async def test_the_stalest_heartbeat_names_its_own_principal_when_a_peer_borrows_the_name():
    """A lying peer calls itself ``ada`` and is the stalest live heartbeat: the tiles name it by
    its own principal's label (told apart from the real ada), never as the real ada."""
    from msgspec.structs import replace

    from support.console import AGENTS

    app = make_app()
    m = app.session.model
    clk = m.clock
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        tiles = screen.query_one(Tiles)
        forger = "local.forger"
        clk.advance(1_000)
        m.apply_presence(replace(rec("ada", "working", clk.t - 3_000), id=forger,
                                 lifecycle_uid="uidforger000000000000000000"))
        for name, *_ in AGENTS:  # everyone else heartbeats now
            m.apply_presence(rec(name, "working", clk.t))
        m.tick()
        v = m.version
        screen.drain_now()
        await until(pilot, lambda: screen.snap is not None and screen.snap.version == v,
                    what="the drain of the forger's heartbeat")
        snap = screen.snap
        assert snap.signals.stalest_live_id == forger
        mine, real = snap.name_of(forger), snap.name_of(pid("ada"))
        assert mine != real, (mine, real)
        line = tiles.render().plain
        assert f"({mine})" in line and f"({real})" not in line, line
