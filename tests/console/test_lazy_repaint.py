"""A lazy list's rebuild paints only the rows on screen that show something else: a re-sort or
a data change off screen paints none, a change on screen paints its rows, and whatever was
painted is what a fresh paint of the whole screen draws (the rows kept are never stale)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from rich.text import Text
from textual.app import App, ComposeResult

from conftest import until

from widgets.lazy_list import LazyLineList
from meshview.wire.decode import Applied


@dataclass(frozen=True, eq=False)  # compared by identity, as the list compares data objects
class Row:
    text: str
    height: int = 1


class Rows(LazyLineList):
    def __init__(self, rows: list[tuple[str, Row]]) -> None:
        super().__init__()
        self.rows = rows
        self.painted: list[int] = []  # rows render_line was asked for

    def source(self):
        return list(self.rows)

    def measure(self, d: Row, width: int) -> int:
        return d.height

    def lines_of(self, d: Row, width: int) -> list[Text]:
        return [Text(f"{d.text} {n}") for n in range(d.height)]

    def render_line(self, y: int):
        self.painted.append(self.scroll_offset.y + y)
        return super().render_line(y)


class One(App):
    def __init__(self, rows) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        yield Rows(self.rows)


def screen_text(app: App) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def fresh_text(app: App, w: Rows) -> list[str]:
    """The screen as a paint from nothing draws it (every cache of the list dropped)."""
    w.drop_paint_caches()
    return screen_text(app)


async def test_rebuilds_paint_only_the_rows_that_changed_and_never_leave_one_stale():
    rows = [(f"k{i}", Row(f"item-{i}", 1 + i % 3)) for i in range(400)]
    app = One(rows)
    async with app.run_test(size=(40, 12)) as pilot:
        w = app.query_one(Rows)
        w.rebuild()
        await pilot.pause()
        assert screen_text(app)[0].startswith("item-0 0")

        async def rebuild_and_paint() -> list[int]:
            w.painted.clear()
            w.rebuild()
            await pilot.pause()
            return sorted(set(w.painted))

        # a re-sort and a data change far below the screen: nothing on screen is painted
        w.rows[300], w.rows[301] = w.rows[301], w.rows[300]
        w.rows[350] = ("k350", Row("changed-350", 2))
        assert await rebuild_and_paint() == []
        # one item on screen gets a new data object: its rows alone are painted
        w.rows[2] = ("k2", Row("changed-2", 3))  # item 2 starts at row 1 + 2 = 3
        assert await rebuild_and_paint() == [3, 4, 5]
        assert screen_text(app)[3].startswith("changed-2 0")
        # a taller item above the rest of the screen moves every row below it
        w.rows[0] = ("k0", Row("grown-0", 3))
        painted = await rebuild_and_paint()
        assert 0 in painted and len(painted) >= 9
        assert screen_text(app) == await fresh_text(app, w)

        # random churn: what is painted always equals a paint from nothing
        rng = random.Random(5)
        for step in range(60):
            op = rng.randrange(4)
            i = rng.randrange(len(w.rows))
            if op == 0:  # new data object, maybe another height
                k, d = w.rows[i]
                w.rows[i] = (k, Row(f"{d.text}'", 1 + rng.randrange(3)))
            elif op == 1:  # a re-sort
                j = rng.randrange(len(w.rows))
                w.rows[i], w.rows[j] = w.rows[j], w.rows[i]
            elif op == 2:  # one leaves
                del w.rows[i]
            else:  # one arrives
                w.rows.insert(i, (f"n{step}", Row(f"new-{step}", 1 + rng.randrange(3))))
            if rng.random() < 0.3:
                await pilot.press(rng.choice("jk"))
            w.rebuild()
            await pilot.pause()
            assert screen_text(app) == await fresh_text(app, w), f"step {step} (op {op})"
            w.rebuild()  # the caches dropped by fresh_text are the list's own: lay them out again
            await pilot.pause()
        # heights owed to items changed off screen are paid in slices; then it is a full build
        await until(pilot, lambda: not w.owed_measures, what="the owed measures")
        assert w.line_texts() == [t.plain for _, lines in w.build(w.content_width) for t in lines]


async def test_the_feed_and_the_rail_paint_nothing_when_nothing_they_show_moved():
    """Rows in another channel leave a channel's feed unpainted; a snapshot that only moved
    the clock inside the second leaves the NEEDS-YOU cards alone; the second turning, or a card
    changing, rebuilds them."""
    from support.console import make_app, pid

    from widgets.feed import FeedView
    from widgets.needs_you import NeedsYouRail

    app = make_app()
    m = app.session.model
    clk = m.clock
    async with app.run_test(size=(160, 48)) as pilot:
        feed = app.screen.query_one(FeedView)
        rail = app.screen.query_one(NeedsYouRail)
        assert rail.display and rail.items, "the fixed space has somebody waiting"
        feed.set_filter(tab="general")
        await pilot.pause()
        painted: list[str] = []
        real_feed, real_rail = feed.render_line, rail.rebuild
        feed.render_line = lambda y: (painted.append("feed"), real_feed(y))[1]  # type: ignore
        rail.rebuild = lambda: (painted.append("rail"), real_rail())[1]  # type: ignore

        async def drained() -> None:
            v = m.version
            await pilot.pause()
            while app.screen.snap is None or app.screen.snap.version != v:
                await pilot.pause(0.02)
            await pilot.pause()

        clk.t = (clk.t // 1000) * 1000 + 100  # early in a second
        m.apply_message(Applied(ts=clk.t, id="x1", kind="channel", channel="releases",
                                from_id=pid("ada"), from_name="ada", from_role="planner",
                                text="elsewhere"))
        m.tick()
        await drained()
        assert painted == [], painted  # another channel's row; the cards' ages read the same
        clk.advance(300)
        m.apply_message(Applied(ts=clk.t, id="x2", kind="channel", channel="general",
                                from_id=pid("ada"), from_name="ada", from_role="planner",
                                text="here"))
        m.tick()
        await drained()
        assert "feed" in painted and "rail" not in painted
        assert any("here" in line for line in screen_text(app))
        painted.clear()
        clk.advance(1000)  # the second turns: the cards' ages read again
        m.tick()
        await drained()
        assert "rail" in painted


async def test_a_churning_roster_is_drawn_at_the_busy_rate():
    """Thousands of model changes a second (10k agents heartbeating) with no chat at all: the
    console applies snapshots at BUSY_HZ, not as often as its duty cycle would let it."""
    from time import monotonic

    from support.console import make_app, rec

    from cotal_tui.screens import console as cs

    app = make_app()
    m = app.session.model
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await pilot.pause()
        assert m.snapshot().rates.msgs_per_sec < cs.BUSY_RATE  # no chat flood here
        for quiet in (True, False):
            t = monotonic()
            screen.set_drain_times(next_drain=0.0, drained_at=t - 1.0)
            for _ in range(10 if quiet else 2000):  # 10 or 2,000 changes in the last second
                m.clock.advance(1)
                m.apply_presence(rec("ada", "working", m.clock.t))
            screen.drain()
            gap = screen.next_drain - t
            if quiet:  # a human's reading pace, not the timer's 30 Hz
                assert 1 / cs.DRAW_HZ <= gap < 1 / cs.BUSY_HZ
            else:
                assert gap >= 1 / cs.BUSY_HZ


async def test_keys_first_a_drain_waits_while_keys_come_but_not_for_long():
    """A key under KEYS_FIRST_S ago holds the drain back (the key paints alone), unless the
    screen was last drawn KEYS_FIRST_MAX_S ago: the mesh keeps moving while the operator
    walks the roster."""
    from time import monotonic

    from support.console import make_app, rec

    from cotal_tui.screens import console as cs

    app = make_app()
    m = app.session.model
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await pilot.pause()
        await pilot.press("j")
        for waited, applies in ((0.0, False), (cs.KEYS_FIRST_MAX_S, True)):
            m.clock.advance(1)
            m.apply_presence(rec("ada", "working", m.clock.t))
            screen.set_drain_times(next_drain=0.0, drained_at=monotonic() - waited)
            app.key_at = monotonic()  # a key just now
            screen.drain_tick()
            assert (screen.snap.version == m.version) is applies, waited


async def _mid_list(app: App, pilot, rows: int = 2000) -> Rows:
    """A list of ``rows`` one-line items scrolled to row 1000, laid out."""
    w = app.query_one(Rows)
    w.rebuild()
    await pilot.pause()
    w.scroll_to(y=1000, animate=False, immediate=True)
    await pilot.pause()
    return w


def _paints_of(bar) -> list[int]:
    """A list that grows by one each time ``bar`` is asked to paint."""
    painted: list[int] = []
    real = bar.refresh
    bar.refresh = lambda *a, **k: (painted.append(1), real(*a, **k))[1]  # type: ignore
    return painted


async def _grow(pilot, w: Rows, items: range, by: int) -> None:
    """Items ``items`` get new data ``by`` rows taller; the owed measures are paid."""
    for i in items:
        k, d = w.rows[i]
        w.rows[i] = (k, Row(d.text, d.height + by))
    w.painted.clear()
    w.rebuild()
    await until(pilot, lambda: not w.owed_measures, what="the owed measures")
    await pilot.pause()


async def test_the_scrollbar_is_painted_only_when_its_thumb_moves():
    """A few rows more or less in a long list move the thumb by far less than the eighth of a
    cell it is drawn in: the bar (as tall as the list, so every row) is not painted, yet it
    knows the new extent; a change it can show paints it."""
    app = One([(f"k{i}", Row(f"item-{i}")) for i in range(2000)])
    async with app.run_test(size=(40, 12)) as pilot:
        w = await _mid_list(app, pilot)  # mid-list: the thumb follows the extent
        bar = w.vertical_scrollbar
        painted = _paints_of(bar)
        await _grow(pilot, w, range(1500, 1502), 1)  # below the screen
        assert painted == [] and bar.window_virtual_size == 2002 == w.virtual_size.height
        assert w.scroll_y == 1000
        await _grow(pilot, w, range(1502, 1900), 1)
        assert painted and bar.window_virtual_size == 2400 == w.virtual_size.height


async def test_rows_above_the_screen_that_grow_scroll_the_view_with_no_paint():
    """Items above the screen change height off screen (owed, measured in slices): the view
    scrolls by as much so what is shown stays put, and nothing is painted, neither rows nor
    the bar (when its thumb did not move); the screen still equals a paint from nothing, and
    a cursor move afterwards paints the right rows. At the top (no room to scroll) it paints."""
    app = One([(f"k{i}", Row(f"item-{i}")) for i in range(2000)])
    async with app.run_test(size=(40, 12)) as pilot:
        w = await _mid_list(app, pilot)
        w.move_cursor(1003)
        await pilot.pause()
        shown = screen_text(app)
        bar_painted = _paints_of(w.vertical_scrollbar)

        async def grow(items: range, by: int) -> None:
            await _grow(pilot, w, items, by)

        await grow(range(100, 103), 1)  # three rows more, far above the screen
        assert w.scroll_y == 1003 and w.virtual_size.height == 2003
        assert w.painted == [] and bar_painted == []
        assert screen_text(app) == shown
        w.drop_paint_caches(keep_lines=True)  # a whole repaint from the list's own line cache
        w.refresh()  # (as a focus change makes): the cache moved with its rows
        await pilot.pause()
        assert screen_text(app) == shown
        assert screen_text(app) == await fresh_text(app, w)
        w.rebuild()
        await pilot.pause()
        await grow(range(200, 202), 0)  # new data objects, same heights: no move, no paint
        assert w.scroll_y == 1003 and w.painted == []
        w.painted.clear()
        await pilot.press("j")  # the cache moved with the rows: the cursor's two rows repaint
        assert sorted(set(w.painted)) == [1006, 1007]
        assert screen_text(app) == await fresh_text(app, w)
        w.rebuild()
        await pilot.pause()
        await grow(range(0, 600), 1)  # the thumb moves: the bar is painted, the rows are not
        assert w.scroll_y == 1603 and bar_painted and w.painted == []
        assert screen_text(app) == await fresh_text(app, w)

        # at the top nothing is above the screen to grow: a change there paints (no shift)
        w.scroll_to(y=0, animate=False, immediate=True)
        w.move_cursor(0)
        await pilot.pause()
        await grow(range(1500, 1510), 1)
        assert w.scroll_y == 0
        assert screen_text(app) == await fresh_text(app, w)


async def test_a_rebuild_holds_the_cursors_item_in_place_unless_the_view_is_at_the_top():
    """Scroll anchoring, as browsers do it: items that arrive, leave or re-sort above the
    screen move the view by as many rows, so the cursor's item (or, with the cursor off
    screen, the top row's) stays on its row and nothing is painted; at the top of the list
    new rows above show as they come. What is drawn always equals a paint from nothing."""
    rows = [(f"k{i}", Row(f"item-{i}", 1 + i % 2)) for i in range(1000)]
    app = One(rows)
    async with app.run_test(size=(40, 12)) as pilot:
        w = app.query_one(Rows)
        w.rebuild()
        await pilot.pause()
        w.scroll_to(y=750, animate=False, immediate=True)
        w.move_cursor(502)  # item 502 starts at row 502 + 251 = 753: on screen, fourth row
        await pilot.pause()
        shown = screen_text(app)

        async def rebuild_and_paint() -> list[int]:
            w.painted.clear()
            w.rebuild()
            await pilot.pause()
            return sorted(set(w.painted))

        w.rows.insert(10, ("new", Row("new", 2)))  # arrives above the screen
        w.rows[20], w.rows[30] = w.rows[30], w.rows[20]  # a re-sort above it
        assert await rebuild_and_paint() == []
        assert w.scroll_y == 752 and w.cursor_key == "k502"
        assert screen_text(app) == shown
        w.drop_paint_caches(keep_lines=True)  # a whole repaint from the list's own line cache:
        w.refresh()  # its rows moved with the view
        await pilot.pause()
        assert screen_text(app) == shown
        del w.rows[5]  # item 5 (two rows) leaves
        assert await rebuild_and_paint() == []
        assert w.scroll_y == 750 and screen_text(app) == shown
        assert screen_text(app) == await fresh_text(app, w)
        w.rebuild()
        await pilot.pause()

        # the cursor moved off screen by hand: the top row's item is the anchor
        w.scroll_to(y=900, animate=False, immediate=True)
        await pilot.pause()
        shown = screen_text(app)
        w.rows.insert(0, ("new0", Row("new0")))
        assert await rebuild_and_paint() == []
        assert w.scroll_y == 901 and screen_text(app) == shown

        # the cursor's item, on the bottom row, re-sorted by an arrival above and grown: the
        # view still shows all of it
        bottom = w.scroll_offset.y + w.scrollable_content_region.height - 1
        w.move_cursor(max(i for i, s in enumerate(w.item_starts) if s + w.item_heights[i] - 1 <= bottom))
        await pilot.pause()
        key = w.cursor_key
        w.rows.insert(0, ("new1", Row("new1")))
        j = next(n for n, (k, _) in enumerate(w.rows) if k == key)
        w.rows[j] = (key, Row("grown", 4))
        await rebuild_and_paint()
        start = w.item_starts[w.cursor_index]
        assert w.cursor_key == key and w.item_heights[w.cursor_index] == 4
        assert w.scroll_offset.y <= start
        assert start + 4 <= w.scroll_offset.y + w.scrollable_content_region.height
        assert screen_text(app) == await fresh_text(app, w)
        w.rebuild()
        await pilot.pause()

        # j past the bottom row scrolls just far enough to show the next item, not a page
        top = w.scroll_offset.y
        bottom = top + w.scrollable_content_region.height - 1
        last = max(i for i, s in enumerate(w.item_starts) if s + w.item_heights[i] - 1 <= bottom)
        w.move_cursor(last)
        await pilot.pause()
        assert w.scroll_offset.y == top
        await pilot.press("j")
        assert w.scroll_offset.y == top + w.item_heights[last + 1] - (bottom - (w.item_starts[last]
                                                                  + w.item_heights[last] - 1))
        await pilot.press("k")
        assert w.scroll_offset.y <= w.item_starts[last]

        # at the top of the list a new item above shows
        w.scroll_to(y=0, animate=False, immediate=True)
        w.move_cursor(0)
        await pilot.pause()
        w.rows.insert(0, ("top", Row("top")))
        await rebuild_and_paint()
        assert w.scroll_y == 0 and screen_text(app)[0].startswith("top 0")
        assert screen_text(app) == await fresh_text(app, w)


# ---- clocks-only changes and the ages' re-measure cadence ----------------------------------

@dataclass(frozen=True, eq=False)
class Clocked:
    text: str
    height: int = 1
    clock: int = 0  # what the ages read: a change of it alone is clocks-only


class ClockedRows(Rows):
    def __init__(self, rows) -> None:
        super().__init__(rows)
        self.measured: list[str] = []
        self.second = 0

    def ages(self):
        return self.second

    def clocks_only(self, old, new) -> bool:
        return old.text == new.text and old.height == new.height

    def measure(self, d, width: int) -> int:
        self.measured.append(d.text)
        return d.height


async def rebuilt_after(pilot, w: Rows, change) -> list[int]:
    """The rows painted after ``change()`` and a rebuild, sorted."""
    w.painted.clear()
    change()
    w.rebuild()
    await pilot.pause()
    return sorted(set(w.painted))


def beat(w: ClockedRows, *idx: int) -> None:
    """A heartbeat on rows ``idx``: new data objects, same text and height (clocks only)."""
    for i in idx:
        k, d = w.rows[i]
        w.rows[i] = (k, Clocked(d.text, d.height, d.clock + 1))


class ClockedApp(One):
    def compose(self) -> ComposeResult:
        yield ClockedRows(self.rows)


async def test_clocks_only_changes_off_screen_cost_no_measure_and_ages_remeasure_every_nth():
    """A heartbeat's data (clocks only) off screen is not measured; on screen it is, at once.
    An ages move measures the shown items; only every AGES_REMEASURE_EVERY-th owes all of
    them, after which the list equals a full build."""
    from widgets.lazy_list import AGES_REMEASURE_EVERY

    rows = [(f"k{i}", Clocked(f"item-{i}")) for i in range(300)]
    app = ClockedApp(rows)
    async with app.run_test(size=(40, 12)) as pilot:
        w = app.query_one(ClockedRows)
        w.rebuild()
        await pilot.pause()
        await until(pilot, lambda: not w.owed_measures, what="the first measures")

        # 100 rows far below the screen and row 0 on it get a heartbeat (clocks only)
        for i in [0, *range(200, 300)]:
            old = w.rows[i][1]
            w.rows[i] = (f"k{i}", Clocked(old.text, old.height, old.clock + 1))
        w.measured.clear()
        w.rebuild()
        await pilot.pause()
        assert "item-0" in w.measured  # shown: measured at once
        assert not any(t in w.measured for t in (f"item-{i}" for i in range(200, 300)))
        assert not w.owed_measures  # and nothing owed for them

        # a real change off screen (its height) is owed and measured in slices
        w.rows[250] = ("k250", Clocked("item-250", 3, 9))
        w.rebuild()
        await until(pilot, lambda: not w.owed_measures, what="the owed measure")
        assert w.item_heights[250] == 3

        # ages moves: the shown items each time, every item only on the Nth
        # (a height that changed off screen meanwhile shows once they are all measured)
        w.rows[280] = ("k280", Clocked("item-280", 1, 0))  # a heartbeat: not measured
        object.__setattr__(w.rows[280][1], "height", 2)  # ... yet it is taller now
        for n in range(1, AGES_REMEASURE_EVERY + 1):
            w.measured.clear()
            w.second += 1
            w.rebuild()
            await pilot.pause()
            if n < AGES_REMEASURE_EVERY:
                assert len(w.measured) < 20 and not w.owed_measures  # the shown ones only
        await until(pilot, lambda: not w.owed_measures, what="every item measured")
        assert w.item_heights[280] == 2
        assert [k for k, _ in w.items] == [k for k, _ in w.build(w.content_width)]
        assert w.line_texts() == [t.plain for _, ls in w.build(w.content_width) for t in ls]


async def test_while_keys_come_a_drain_draws_only_the_focused_list_and_the_rest_follows():
    """A drain forced while keys come (KEYS_FIRST_MAX_S) updates the list the keys move and,
    from the same snapshot, what counts beside it (tiles, status bar: one snapshot per frame);
    the feed is drawn by the first drain after the keys stop, even with nothing new in the
    model, and at least every KEYS_FULL_S while they do not: then in two drains, what counts
    first and the feed next, so no frame a key waits behind holds both."""
    from time import monotonic

    from support.console import make_app, rec

    from cotal_tui.screens import console as cs
    from widgets.feed import FeedView
    from widgets.roster import Roster
    from widgets.status_tiles import Tiles

    app = make_app()
    m = app.session.model
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await pilot.pause()
        roster, feed, tiles = [screen.query_one(c) for c in (Roster, FeedView, Tiles)]
        roster.focus()
        await pilot.press("j")
        screen.set_drain_times(full_at=monotonic())  # everything was drawn just now

        def drain(keys: bool) -> None:
            # forced past keys first
            screen.set_drain_times(next_drain=0.0, drained_at=monotonic() - cs.KEYS_FIRST_MAX_S)
            app.key_at = monotonic() if keys else monotonic() - 1.0
            screen.drain_tick()

        m.clock.advance(1)
        m.apply_presence(rec("ada", "working", m.clock.t))
        tile_snap, feed_snap = tiles.snap, feed.snap
        drain(keys=True)
        assert roster.snap is screen.snap and roster.snap.version == m.version  # the keys' list
        assert tiles.snap is not tile_snap and tiles.snap is screen.snap  # its counts, with it
        assert feed.snap is feed_snap  # the feed waits
        assert screen.rest_owed

        drain(keys=False)  # the keys stopped; the model did not move
        assert tiles.snap is screen.snap and feed.snap is screen.snap and not screen.rest_owed

        m.clock.advance(1)
        m.apply_presence(rec("ada", "idle", m.clock.t))
        feed_snap = feed.snap
        screen.set_drain_times(full_at=monotonic() - cs.KEYS_FULL_S)  # keys for longer than that
        drain(keys=True)  # the rest, in two pieces: first what counts, its ages moved ...
        assert roster.snap is screen.snap and tiles.snap is screen.snap
        assert roster.line_texts() == [t.plain for _, ls in roster.build(roster.content_width)
                                       for t in ls]  # (not held: as a paint from nothing)
        assert feed.snap is feed_snap and screen.rest_owed  # ... the feed not in that frame
        m.apply_presence(rec("bram", "working", m.clock.t))
        counted = tiles.snap
        drain(keys=True)  # ... then the feed, alone
        assert feed.snap is screen.snap and tiles.snap is counted and screen.rest_owed
        m.apply_presence(rec("cleo", "idle", m.clock.t))
        drain(keys=True)  # the pieces drawn: the keys' own drains again, the feed waits
        assert tiles.snap is screen.snap and feed.snap is not screen.snap
        drain(keys=False)  # the keys stopped: everything
        assert tiles.snap is screen.snap and feed.snap is screen.snap and not screen.rest_owed


async def test_while_keys_come_a_drain_keeps_the_ages_and_shows_what_changed():
    """A drain while keys come shows the roster's and the rail's rows that changed (a status)
    but keeps their ages at the second they were read, so its frame paints those rows, not
    every row whose clock turned; the first drain after the keys stop moves the ages."""
    from time import monotonic

    from support.console import make_app, rec

    from cotal_tui.screens import console as cs
    from widgets.needs_you import NeedsYouRail
    from widgets.roster import Roster

    app = make_app()
    m = app.session.model
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        await pilot.pause()
        roster, rail = screen.query_one(Roster), screen.query_one(NeedsYouRail)
        roster.focus()
        await pilot.press("j")

        def drain(keys: bool) -> None:
            screen.set_drain_times(next_drain=0.0, drained_at=monotonic() - cs.KEYS_FIRST_MAX_S,
                                   full_at=monotonic())
            app.key_at = monotonic() if keys else monotonic() - 1.0
            screen.drain_tick()

        def block(who: str) -> list[str]:
            """The agent's row: its head line and the indented lines under it."""
            out: list[str] = []
            for t in roster.line_texts():
                if out and not t.startswith(" "):
                    break
                if out or (not t.startswith(" ") and f" {who}/" in t):
                    out.append(t)
            return out

        bram, cards = block("bram"), rail.line_texts()
        assert "   seen 4s ago" in bram and cards, (bram, cards)
        assert "   idle · unchanged for 32s" in block("cleo")
        m.clock.advance(60_000)  # every age reads a minute more
        m.apply_presence(rec("cleo", "working", m.clock.t))
        m.tick()
        drain(keys=True)
        await pilot.pause()
        assert roster.snap is screen.snap and roster.snap.version == m.version
        assert block("cleo")[1].startswith("   working")  # what changed shows
        assert block("bram") == bram and rail.line_texts() == cards  # the ages held
        drain(keys=False)  # the keys stopped
        await pilot.pause()
        assert "   seen 1m ago" in block("bram"), block("bram")
        assert rail.line_texts() != cards


async def test_while_busy_the_feed_is_drawn_less_often_and_the_bars_with_the_roster(monkeypatch):
    """Busy (a flood or a churning roster), a drain draws the roster, the rail and the bars
    that count them (channel tabs, tiles, status bar) every time, from one snapshot, and the
    feed at most every FEED_BUSY_S (less often than a merely flowing one); once the load stops the feed is drawn by the next drain,
    with no news."""
    from time import monotonic

    from support.console import make_app, rec

    from cotal_tui.screens import console as cs
    from widgets.channel_tabs import ChannelTabs
    from widgets.feed import FeedView
    from widgets.roster import Roster
    from widgets.status_bar import StatusBar
    from widgets.status_tiles import Tiles

    app = make_app()
    m = app.session.model
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await pilot.pause()
        roster, tiles, bar, tabs, feed = [screen.query_one(c) for c in
                                          (Roster, Tiles, StatusBar, ChannelTabs, FeedView)]
        monkeypatch.setattr(cs, "BUSY_RATE", -1.0)  # every drain is a busy one

        def drain() -> None:
            screen.set_drain_times(next_drain=0.0)
            app.key_at = monotonic() - 1.0  # no keys
            screen.drain_tick()

        def bars_drawn() -> bool:
            return (tiles.snap is screen.snap and bar.snap is screen.snap
                    and tabs.channels is screen.snap.channels)

        def news(status: str) -> None:
            m.clock.advance(1)
            m.apply_presence(rec("ada", status, m.clock.t))

        screen.set_drain_times(feed_at=monotonic())  # the feed drawn just now
        news("idle")
        drain()
        assert roster.snap is screen.snap and roster.snap.version == m.version  # the body
        assert bars_drawn() and screen.rest_owed  # the bars with it, every drain
        assert feed.snap is not screen.snap  # the feed waits
        screen.set_drain_times(feed_at=monotonic() - cs.FEED_FLOW_S)
        news("working")
        drain()  # a flowing feed's turn, but busy: the feed waits longer (once a second)
        assert cs.FEED_BUSY_S > cs.FEED_FLOW_S and feed.snap is not screen.snap
        screen.set_drain_times(feed_at=monotonic() - cs.FEED_BUSY_S)
        news("working")
        drain()
        assert feed.snap is screen.snap and bars_drawn() and not screen.rest_owed

        news("working")
        m.set_warning("slow consumer")  # the connection's state: drawn with the rest
        drain()
        assert bars_drawn() and bar.snap.status.warning == "slow consumer"
        assert feed.snap is not screen.snap and screen.rest_owed  # (the feed's turn has not come)

        monkeypatch.setattr(cs, "BUSY_RATE", 1e9)  # the load stopped; the model did not move
        drain()
        assert bars_drawn() and feed.snap is screen.snap and not screen.rest_owed
        await pilot.pause()


# ---- rows that read the same are not painted ------------------------------------------------

class Ticking(ClockedRows):
    """Items whose text starts with ``t`` read the ages (the second); the rest do not. The
    order is one tuple object while the keys keep their order, as the roster's."""

    def __init__(self, rows) -> None:
        super().__init__(rows)
        self._order_token: tuple = ()

    def order(self):
        keys = tuple(k for k, _ in self.rows)
        if keys != self._order_token:
            self._order_token = keys
        return self._order_token

    def data(self):
        return [d for _, d in self.rows]

    def lines_of(self, d, width: int) -> list[Text]:
        tick = f" @{self.second}" if d.text.startswith("t") else ""
        return [Text(f"{d.text}{tick} {n}") for n in range(d.height)]


class TickingApp(One):
    def compose(self) -> ComposeResult:
        yield Ticking(self.rows)


async def test_a_row_that_reads_as_before_is_not_painted_on_any_rebuild_path():
    """A new data object that reads as the last one (a heartbeat whose ages read the same), a
    new second that changes only some rows' text, and a re-sort carrying look-alike objects
    paint only the rows whose text changed; the screen always equals a paint from nothing."""
    rows = [(f"k{i}", Clocked(("t" if i % 4 == 0 else "s") + f"-{i}")) for i in range(200)]
    app = TickingApp(rows)
    async with app.run_test(size=(40, 12)) as pilot:
        w = app.query_one(Ticking)
        w.rebuild()
        await pilot.pause()

        async def painted_after(step) -> list[int]:
            painted = await rebuilt_after(pilot, w, step)
            assert screen_text(app) == await fresh_text(app, w)
            w.rebuild()  # (fresh_text dropped the list's caches: lay them out again)
            await pilot.pause()
            return painted

        # same order: two heartbeats on screen read as before -> nothing painted
        assert await painted_after(lambda: beat(w, 1, 2)) == []
        # ... a real change on screen paints its row alone
        assert await painted_after(lambda: w.rows.__setitem__(3, ("k3", Clocked("s-3!")))) == [3]

        # a new second: only the rows that read it (every fourth) are painted
        def tick() -> None:
            w.second += 1
        assert await painted_after(tick) == [0, 4, 8]

        # a re-sort far below the screen with look-alike objects on screen: nothing painted
        def resort() -> None:
            w.rows[150], w.rows[151] = w.rows[151], w.rows[150]
            beat(w, 5, 6)
        assert await painted_after(resort) == []
        # ... and with a new second as well: the ticking rows only
        def resort_and_tick() -> None:
            w.rows[160], w.rows[161] = w.rows[161], w.rows[160]
            beat(w, 7)
            w.second += 1
        assert await painted_after(resort_and_tick) == [0, 4, 8]


async def test_a_flowing_feed_is_drawn_at_a_reading_pace_and_the_counts_every_drain(monkeypatch):
    """Over FEED_FLOW_RATE msgs/s (a busy channel, not a flood) the feed, whose every frame is
    a whole-panel repaint, is drawn at most every FEED_FLOW_S, and over FEED_READ_RATE every
    FEED_BUSY_S; the roster and the bars that count it are drawn by every drain; when the flow
    stops the feed follows at once."""
    from time import monotonic

    from support.console import make_app, rec

    from cotal_tui.screens import console as cs
    from widgets.feed import FeedView
    from widgets.roster import Roster
    from widgets.status_tiles import Tiles

    app = make_app()
    m = app.session.model
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await pilot.pause()
        roster, tiles, feed = [screen.query_one(c) for c in (Roster, Tiles, FeedView)]
        assert m.snapshot().rates.msgs_per_sec < cs.BUSY_RATE  # not busy
        monkeypatch.setattr(cs, "FEED_FLOW_RATE", -1.0)  # but the feed flows

        def drain() -> None:
            screen.set_drain_times(next_drain=0.0)
            app.key_at = monotonic() - 1.0
            screen.drain_tick()

        screen.set_drain_times(feed_at=monotonic())  # the feed drawn just now
        m.clock.advance(1)
        m.apply_presence(rec("ada", "idle", m.clock.t))
        drain()
        assert roster.snap is screen.snap and tiles.snap is screen.snap
        assert feed.snap is not screen.snap and screen.rest_owed
        screen.set_drain_times(feed_at=monotonic() - cs.FEED_FLOW_S)
        drain()  # its turn came (no news needed)
        assert feed.snap is screen.snap and not screen.rest_owed
        screen.set_drain_times(feed_at=monotonic())
        m.clock.advance(1)
        m.apply_presence(rec("ada", "working", m.clock.t))
        drain()
        assert feed.snap is not screen.snap
        monkeypatch.setattr(cs, "FEED_FLOW_RATE", 1e9)  # the flow stopped
        drain()
        assert feed.snap is screen.snap and not screen.rest_owed

        # faster than anyone reads (over FEED_READ_RATE), not busy: every FEED_BUSY_S
        monkeypatch.setattr(cs, "FEED_FLOW_RATE", -1.0)
        monkeypatch.setattr(cs, "FEED_READ_RATE", -1.0)
        # (the last drain long ago: one change since is no churn, this drain is not busy)
        screen.set_drain_times(feed_at=monotonic() - cs.FEED_FLOW_S, drained_at=monotonic() - 60)
        m.clock.advance(1)
        m.apply_presence(rec("ada", "idle", m.clock.t))
        drain()  # a flowing feed's turn came, but this one flows too fast to read: it waits
        assert cs.FEED_BUSY_S > cs.FEED_FLOW_S
        assert roster.snap is screen.snap and feed.snap is not screen.snap and screen.rest_owed
        screen.set_drain_times(feed_at=monotonic() - cs.FEED_BUSY_S)
        drain()
        assert feed.snap is screen.snap and not screen.rest_owed
        await pilot.pause()


class Seen(Ticking):
    """Every row reads its own clock (the roster's ``seen 2s``): a heartbeat changes its text."""

    def lines_of(self, d, width: int) -> list[Text]:
        return [Text(f"{d.text} seen@{d.clock}/{self.second} {n}") for n in range(d.height)]


class SeenApp(One):
    def compose(self) -> ComposeResult:
        yield Seen(self.rows)


async def test_held_clocks_on_screen_show_when_the_ages_move_and_a_real_change_at_once():
    """``hold_clocks`` (the console's drains): a heartbeat on screen whose only change is its
    clock paints nothing until the ages move, when it shows with every other age; a change of
    what a row says paints at once; off, a heartbeat paints its row at once (a replay's step)."""
    rows = [(f"k{i}", Clocked(f"s-{i}")) for i in range(200)]
    app = SeenApp(rows)
    async with app.run_test(size=(40, 12)) as pilot:
        w = app.query_one(Seen)
        w.rebuild()
        await pilot.pause()

        def tick() -> None:
            w.second += 1

        # off (the default): a heartbeat on screen is painted at once
        assert await rebuilt_after(pilot, w, lambda: beat(w, 1)) == [1]
        assert screen_text(app)[1].startswith("s-1 seen@1/0")
        assert screen_text(app) == await fresh_text(app, w)
        w.rebuild()
        await pilot.pause()

        w.hold_clocks = True
        # held: two heartbeats on screen paint nothing and the rows still read their old clock
        assert await rebuilt_after(pilot, w, lambda: beat(w, 2, 3)) == []
        assert screen_text(app)[2].startswith("s-2 seen@0/0")
        # ... a real change on screen is painted at once, held rows or not
        assert await rebuilt_after(pilot, w, lambda: w.rows.__setitem__(4, ("k4", Clocked("s-4!")))) == [4]
        assert screen_text(app)[4].startswith("s-4! seen@0/0")
        assert screen_text(app)[3].startswith("s-3 seen@0/0")
        # the ages move: every row on screen reads the new second, the held ones their new clock
        painted = await rebuilt_after(pilot, w, tick)
        assert {2, 3} <= set(painted)
        s = screen_text(app)
        assert s[2].startswith("s-2 seen@1/1") and s[3].startswith("s-3 seen@1/1")
        assert s == await fresh_text(app, w)
