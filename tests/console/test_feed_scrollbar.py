"""A followed feed keeps its scrollbar still unless the thumb is drawn elsewhere: each new row
grows the extent and scrolls by as much, which over a long feed moves the thumb by less than the
eighth of a cell it is drawn in. The bar still knows the new extent and place, a change it can
show paints it, and what is on screen is what a fresh paint of the bar draws."""

from __future__ import annotations

from support.console import make_app, pid
from test_lazy_repaint import _paints_of, screen_text

from meshview.wire.decode import Applied
from widgets.feed import FeedView


async def _post(pilot, app, n: int, start: int, *, each: bool = True) -> None:
    """``n`` rows in ``general``, each drained and drawn before the next (``each`` False: all
    of them, then one drain)."""
    m = app.session.model
    clk = m.clock
    for i in range(start, start + n):
        clk.advance(50)
        m.apply_message(Applied(ts=clk.t, id=f"sb{i}", kind="channel", channel="general",
                                from_id=pid("ada"), from_name="ada", from_role="planner",
                                text=f"row {i}"))
        m.tick()
        if each or i == start + n - 1:
            await _drawn(pilot, app)


async def _drawn(pilot, app) -> None:
    """The model as it is now is drained and drawn."""
    v = app.session.model.version
    app.screen.drain_now()  # not paced: the test steps the feed row by row
    while app.screen.snap is None or app.screen.snap.version != v:
        await pilot.pause(0.02)
    await pilot.pause()


async def _agrees(pilot, app, feed: FeedView) -> None:
    """The bar knows the feed's extent and place, and a fresh paint of it draws what is shown."""
    bar = feed.vertical_scrollbar
    assert bar.window_virtual_size == feed.virtual_size.height
    assert bar.position == bar.validate_position(feed.scroll_y)
    shown = screen_text(app)
    bar.refresh()
    await pilot.pause()
    assert screen_text(app) == shown


async def test_a_followed_feed_paints_its_bar_only_when_the_thumb_moves():
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        feed = app.screen.query_one(FeedView)
        feed.set_filter(tab="general")
        await pilot.pause()
        assert feed.follow
        bar = feed.vertical_scrollbar
        painted = _paints_of(bar)
        await _post(pilot, app, 35, 0)  # the feed overflows its 44 lines
        painted.clear()
        await _post(pilot, app, 20, 35)  # a short feed: most rows move the thumb
        assert len(painted) >= 10, len(painted)
        await _agrees(pilot, app, feed)
        await _post(pilot, app, 575, 55, each=False)
        painted.clear()
        await _post(pilot, app, 40, 630)  # a long feed: the thumb stays within its eighth
        assert feed.follow and round(feed.scroll_y) == feed.max_scroll_y
        assert len(painted) < 10, len(painted)
        await _agrees(pilot, app, feed)
        # scrolled up (not following): a new row below leaves the view where it is
        feed.scroll_to(y=feed.max_scroll_y // 2, animate=False, immediate=True)
        await pilot.pause()
        y = feed.scroll_y
        await _post(pilot, app, 5, 670)
        assert feed.scroll_y == y and not feed.follow
        await _agrees(pilot, app, feed)
