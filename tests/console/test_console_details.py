"""Console behaviour a new user tripped over: a live agent card, the
feed selection across ``L``, honest unread badges, the roster header. The real App through
Pilot on the real ``MeshModel`` reducers with a fixed clock (tests/support/console.py)."""

from __future__ import annotations

from conftest import until
from support.console import console, make_app, pid, rec, screen_text
from meshview.wire.decode import Applied

WIDE = (120, 40)


async def test_agent_card_updates_live_while_open():
    """Item 5: the card was a frozen snapshot of the moment it opened."""
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        model, clk = scr.session.model, app.clock
        assert scr.open_agent(pid("gus"))
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen")
        assert "gus/qa" in screen_text(app) and "bisecting the flaky test" not in screen_text(app)
        clk.advance(1_000)
        model.apply_presence(rec("gus", "working", clk.t, activity="bisecting the flaky test",
                                 activity_since=clk.t, status_since=clk.t, active_at=clk.t))
        model.apply_message(Applied(kind="channel", id="live-1", ts=clk.t, from_id=pid("gus"),
                                    from_name="gus", from_role="qa", channel="general",
                                    text="found it: a timezone bug"))
        await until(pilot, lambda: "bisecting the flaky test" in screen_text(app),
                    what="the new activity on the open card")
        text = screen_text(app)
        assert "working · progress unknown" in text
        assert "→ #general: found it: a timezone bug" in text
        assert type(app.screen).__name__ == "DetailScreen"  # still the same open card


def interleave(scr, clk, n: int = 40) -> None:
    """Messages with lifecycle rows between them, as a live mesh has (managers coming and
    going), so hiding or showing lifecycle rows moves every row on screen."""
    model = scr.session.model
    for i in range(n):
        clk.advance(500)
        model.apply_message(Applied(kind="channel", id=f"x{i}", ts=clk.t, from_id=pid("ada"),
                                    from_name="ada", from_role="planner", channel="general",
                                    text=f"msg {i}"))
        model.apply_manager(f"mgr{i:04d}aaaaaaaaaaaa", up=bool(i % 2), runtime="pty")


def in_view(feed, index: int) -> bool:
    k = feed.rows.index(index)
    top = round(feed.scroll_y)
    return top <= feed.row_start(k) < top + feed.scrollable_content_region.height


async def test_lifecycle_toggle_keeps_the_selection_in_view_and_enter_opens_it():
    """Item 6: ``L`` lost the feed selection and Enter then opened an off-screen row."""
    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.pause()
        scr = console(app)
        interleave(scr, app.clock)
        await pilot.pause(0.1)
        feed = scr.query_one("#feed")
        feed.focus()
        await pilot.press("G", *["k"] * 3)
        chosen = feed.selected_entry()
        assert chosen is not None and chosen.kind == "channel"
        for _ in range(2):  # hide the lifecycle rows, then show them again
            await pilot.press("L")
            await pilot.pause()
            assert feed.cursor == chosen.index, "the selection moved off its row"
            assert in_view(feed, chosen.index), "the selected row is off screen"
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen")
        assert chosen.text in screen_text(app)


async def test_lifecycle_toggle_on_a_lifecycle_row_keeps_a_nearby_selection():
    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        await pilot.pause()
        scr = console(app)
        interleave(scr, app.clock)
        await pilot.pause(0.1)
        feed = scr.query_one("#feed")
        feed.focus()
        await pilot.press("G", *["k"] * 4)
        e = feed.selected_entry()
        assert e.kind == "lifecycle"
        await pilot.press("L")
        await pilot.pause()
        got = feed.selected_entry()
        assert feed.cursor is not None and not feed.follow
        assert got.kind != "lifecycle" and got.index < e.index and in_view(feed, got.index)
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen")
        assert got.text in screen_text(app)


async def test_unread_badge_never_exceeds_the_channel_total():
    """Item 9: ``#team.backend 12 +13`` - the total is the broker's count as of its last poll
    (every 2 s, and capped per sender), so live arrivals since then count into it."""
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        scr = console(app)
        model, clk = scr.session.model, app.clock
        model.set_retained_counts({"general": 14, "team.backend": 6, "releases": 2})
        for i in range(13):
            clk.advance(100)
            model.apply_message(Applied(kind="channel", id=f"tb{i}", ts=clk.t, from_id=pid("bram"),
                                        from_name="bram", from_role="backend",
                                        channel="team.backend",
                                        text=f"build step {i}"))
        await until(pilot, lambda: "#team.backend" in screen_text(app) and "+14" in screen_text(app),
                    what="the badge")
        tabs = scr.query_one("#tabs")
        for lbl in tabs.labels():
            parts = lbl.plain.split()
            if len(parts) >= 3 and parts[-1].startswith("+"):
                total, unread = int(parts[-2]), int(parts[-1][1:])
                assert unread <= total, lbl.plain
        assert "#team.backend 19 +14" in screen_text(app)
        model.set_retained_counts({"general": 14, "team.backend": 19, "releases": 2})  # a poll
        await pilot.pause()
        assert "#team.backend 19 +14" in screen_text(app)


async def test_roster_header_names_endpoints():
    """Item 9: ``1 ep`` was unexplained."""
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "roster · 7 agents · 1 endpoint" in text and " ep▔" not in text


async def test_topology_matrix_headers_are_unique_with_a_legend():
    """Item 7: ``#team.backend`` and ``#team.frontend`` both read ``#team.``."""
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        model, clk = scr.session.model, app.clock
        clk.advance(500)
        model.apply_message(Applied(kind="channel", id="tf1", ts=clk.t, from_id=pid("cleo"),
                                    from_name="cleo", from_role="frontend", channel="team.frontend",
                                    text="new palette merged"))
        await pilot.press("t", "2")
        topo = scr.query_one("#topo")
        await until(pilot, lambda: topo.fold is not None and "#team.frontend" in topo.fold.hubs)
        lines = screen_text(app).splitlines()
        head = next(ln for ln in lines if ln.lstrip().startswith("ada ") and "#" in ln)
        labels = head.split()
        assert len(labels) == len(set(labels)), labels  # no two columns read the same
        legend = "\n".join(ln for ln in lines if " = #" in ln or " = @" in ln)
        for full in ("#team.backend", "#team.frontend", "#general", "@reviewer"):
            short = next(x for x in labels if f"{x} = {full}" in legend)
            assert short != full[:6] or len(full) <= 6, (short, full)


async def test_topology_map_spells_out_the_spotlighted_edges():
    """Item 7: the ring map drew every edge into one hub box; each hub is now its own labelled
    target, edges end in arrowheads, and the spotlighted node's edges are written out."""
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("t", "3")
        topo = console(app).query_one("#topo")
        await until(pilot, lambda: "jk spotlight" in screen_text(app))
        text = screen_text(app)
        assert "┌" not in text  # no box every edge runs into
        for hub in ("#general", "#team.backend", "#releases", "@reviewer"):
            assert hub in text
        assert "ada  → #general ×2" in text and "← eve ×1" in text
        assert any(a in text for a in "▶◀▲▼↗↘↙↖")
        spotted = topo.fold.nodes[topo.spot]
        await pilot.press("j")
        await until(pilot, lambda: topo.fold.nodes[topo.spot % len(topo.fold.nodes)] != spotted)
        bram = [ln for ln in screen_text(app).splitlines() if ln.startswith(" bram ")]
        assert bram and "→ #team.backend ×1" in bram[0], bram


async def test_channel_tabs_row_scrolls_to_the_active_tab_and_builds_only_what_fits():
    """60 channels: the row is the labels from the first one that lets the active tab show,
    cut with ``›`` at the width, ``‹`` when scrolled; only the labels that fit are built."""
    from meshview.model.snapshot import ChannelInfo

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        tabs = console(app).query_one("#tabs")
        tabs.channels = tuple(ChannelInfo(f"ch{i:02d}", i, i + 3, True, True, "durable", None)
                              for i in range(60))
        built = []
        real = tabs._label
        tabs._label = lambda i, c: built.append(i) or real(i, c)
        for active in (None, "ch00", "ch07", "ch30", "ch59"):
            tabs.active = active
            built.clear()
            row = tabs.render().plain
            names = [None, *(c.name for c in tabs.channels)]
            at = names.index(active)
            assert max(built) < at + 12  # (not all 61 labels built)
            labels = [t.plain for t in tabs.labels()]
            assert labels[at] in row  # the active tab shows ...
            lo = 0 if row.startswith(labels[0]) else next(
                i for i in range(1, at + 1) if row.startswith("‹" + labels[i]))
            assert (lo > 0) == row.startswith("‹")
            assert lo == 0 or sum(len(t) + 1 for t in labels[lo - 1:at + 1]) > 100 - 2
            assert row.endswith("›") or at == 60  # ... and the rest is cut at the width
            assert len(row) <= 100
        assert labels[5].split()[-2:] == ["4", "+4"]  # ch04: 4 of them, all unread
