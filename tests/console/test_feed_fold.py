"""Long messages fold (issue 38 item 6): a feed row shows at most ``[feed] max_lines`` body
lines, then ``… +N lines · Enter``, N the hidden wrapped lines at the panel's width; Enter
opens the whole message. A hostile body folds just as well, and measuring it stays cheap."""

from __future__ import annotations

import argparse
import re
import time

import pytest
from textual.app import App, ComposeResult

from conftest import until
from cotal_tui.cli.connection import target_from_args
from cotal_tui.cli.watch_console import session_options
from cotal_tui.demo.team import Team, TeamSchedule
from cotal_tui.session import LiveSession
from meshview.model.mesh import MeshModel
from meshview.wire.decode import Applied
from support.console import screen_text
from widgets.feed import FeedView, layout_rows
from widgets.fold import DEFAULT_MAX_LINES
from widgets.presentation import safe_body

N = DEFAULT_MAX_LINES
LABEL = re.compile(r"… \+(≈?)(\d+) lines?( · Enter)?")


class FeedApp(App):
    def compose(self) -> ComposeResult:
        yield FeedView(id="feed")


def _fold(strips) -> tuple[int, bool] | None:
    """The count a row's fold line says, and whether it is marked an estimate."""
    m = LABEL.search(strips[-1].text)
    return (int(m.group(2)), m.group(1) == "≈") if m else None


def _whole_rows(feed: FeedView, e, width: int) -> int:
    """Display rows the row would take unfolded with all of its text (the wrap rule itself)."""
    return len(layout_rows(feed.head_text(e), safe_body(e.text), width))


@pytest.fixture
async def team(nc, space):
    t = Team(nc, space, seed=7, agents=2, schedule=TeamSchedule(
        crash_after=None, restart_after=None, chat_interval=3600, activity=False))
    await t.start()
    yield t
    await t.stop()


async def test_a_long_broker_message_takes_at_most_n_plus_2_rows_and_enter_shows_it(
        broker, nc, space, team):
    """The trial's 2,750-character message took about 46 rows at 140×42."""
    from cotal_tui.app import CotalApp

    args = argparse.Namespace(server=[broker.url], space=space, backfill=50, no_dms=False)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    body = " ".join(f"word{k:04d}" for k in range(400))[:2730] + " and THE-LAST-WORDS."
    assert len(body) == 2750
    async with app.run_test(size=(140, 42)) as pilot:
        await until(pilot, lambda: session.started and len(session.model.snapshot().agents) == 2,
                    what="roster")
        await team.post(team.members[0], "general", body)
        feed = app.screen.query_one(FeedView)
        await until(pilot, lambda: any(e.text == body for e in feed.visible_entries()),
                    what="the long row")
        e = next(e for e in feed.visible_entries() if e.text == body)
        width = feed.scrollable_content_region.width
        strips = feed.row_strips(e.index, width)
        assert len(strips) == feed.row_height(e, width) <= N + 2
        hidden, approx = _fold(strips)
        assert not approx and hidden == _whole_rows(feed, e, width) - len(strips) + 1
        print(f"{len(body)} chars at a {width}-cell feed: {len(strips)} rows, "
              f"{_whole_rows(feed, e, width)} unfolded")
        await until(pilot, lambda: f"… +{hidden} lines · Enter" in screen_text(app),
                    what="the fold line on screen")
        assert "THE-LAST-WORDS" not in screen_text(app)
        feed.focus()
        await pilot.press("G", "k", "j")  # the newest row selected
        assert feed.selected_entry() is e
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen", what="card")
        await pilot.press("G")
        await until(pilot, lambda: "THE-LAST-WORDS." in screen_text(app),
                    what="the card's end of the body")
        await pilot.press("x", "q")
    await session.stop()


HOSTILE = {
    "one line of 100k": "x" * 100_000,
    "prose of 100k": ("a lot of words, said at length. " * 3200)[:100_000],
    "50k newlines": "\n" * 50_000,
    "invisibles": "\u200b\u202e\u2066\x1b[2J\x1b]8;;evil\x07\r\x00\x85\u2028ok" * 6_000,
    "wide": "界" * 100_000,
    "wide words": ("漢字 テキスト 한국어 😀 " * 8_000)[:100_000],
    "short lines": "ab\n" * 40_000,
}


async def test_hostile_bodies_fold_to_n_plus_1_rows_with_a_true_count_fast():
    m = MeshModel("main", burst_ms=0)
    for k, text in enumerate(HOSTILE.values()):
        m.apply_message(Applied(kind="channel", id=f"h{k}", ts=1_700_000_000_000.0 + k,
                                from_id="local.mallory", from_name="mallory", text=text,
                                channel="general"))
    m.flush_bursts()
    snap = m.snapshot()
    app = FeedApp()
    async with app.run_test(size=(140, 42)):
        feed = app.query_one(FeedView)
        t = time.process_time()
        feed.update_snapshot(snap)  # every row measured cold: sanitised, laid out, tail counted
        cold = time.process_time() - t
        report = [f"{len(HOSTILE)} hostile rows measured cold: {cold * 1000:.1f} ms"]
        assert cold < 1.0, report
        for (name, text), e in zip(HOSTILE.items(), snap.feed):
            assert e.text.startswith(text[:1000])
            for width in (140, 80, 33):
                # a width never measured: nothing of this row is kept for it yet
                t = time.process_time()
                height = feed.row_height(e, width)
                first = time.process_time() - t
                t = time.process_time()
                feed.row_height(e, width)
                again = time.process_time() - t
                strips = feed.row_strips(e.index, width)
                # at 33 cells the head has its own two rows (the body needs 12 cells beside it)
                assert len(strips) == height <= N + 1 + (2 if width < 40 else 0), (name, width)
                for st in strips:
                    assert st.cell_length == width and "\x1b" not in st.text
                hidden, approx = _fold(strips)
                exact = _whole_rows(feed, e, width) - (height - 1)
                # past the laid-out first kB the count is an estimate, marked so: a line's
                # cells over the width (word wrap and wide characters at odd widths cut a
                # little earlier)
                assert approx == (len(e.text) > 4000 or len(e.text) > (N + 2) * width)
                assert abs(hidden - exact) <= max(2, exact * 0.05), (name, width, hidden, exact)
                report.append(f"{name} @{width}: {hidden} (exact {exact}) "
                              f"first {first * 1000:.2f} ms, again {again * 1000:.3f} ms")
                assert first < 0.25 and again < 0.005, report[-1]
        print("\n".join(report))


async def test_a_row_folds_only_when_it_hides_two_lines_and_zero_never_folds():
    m = MeshModel("main", burst_ms=0)
    texts = ["\n".join(f"line {k}" for k in range(n)) for n in (N, N + 1, N + 2, 40)]
    for k, text in enumerate(texts):
        m.apply_message(Applied(kind="channel", id=f"t{k}", ts=1_700_000_000_000.0 + k,
                                from_id="local.ada", from_name="ada", text=text,
                                channel="general"))
    m.flush_bursts()
    snap = m.snapshot()
    app = FeedApp()
    async with app.run_test(size=(140, 42)):
        feed = app.query_one(FeedView)
        feed.update_snapshot(snap)
        rows = {n: feed.row_strips(e.index, 140) for n, e in zip((N, N + 1, N + 2, 40), snap.feed)}
        assert _fold(rows[N]) is None and len(rows[N]) == N
        assert _fold(rows[N + 1]) is None and len(rows[N + 1]) == N + 1  # one more: shown
        assert _fold(rows[N + 2]) == (2, False) and len(rows[N + 2]) == N + 1
        assert _fold(rows[40]) == (40 - N, False)
        assert rows[40][-1].text.strip() == f"… +{40 - N} lines · Enter"
        feed.max_lines = 0
        e = snap.feed[3]
        assert feed.row_height(e, 140) == 40 and _fold(feed.row_strips(e.index, 140)) is None
        feed.max_lines = 2
        assert feed.row_height(e, 140) == 3
        assert _fold(feed.row_strips(e.index, 140)) == (38, False)


async def test_a_long_dm_folds_in_the_dm_lens_and_enter_opens_all_of_it():
    from support.console import make_app, pid

    app = make_app()
    body = "\n".join(f"step {k}: do the thing" for k in range(60)) + "\nDM-LAST-LINE"
    async with app.run_test(size=(140, 42)) as pilot:
        await pilot.pause()
        scr = app.screen
        clk = app.clock
        clk.advance(1_000)
        scr.session.model.apply_message(Applied(
            kind="dm", id="long-dm", ts=clk.t, from_id=pid("ada"), from_name="ada",
            from_role="planner", to=pid("eve"), text=body))
        clk.advance(5_000)
        scr.session.model.tick()  # the DM's burst window closes: it is a row
        await pilot.press("d")
        await until(pilot, lambda: "step 0: do the thing" in screen_text(app),
                    what="the long DM in the thread")
        thread = scr.query_one("#dm-thread")
        key, lines = next((k, ls) for k, ls in thread.items if k == (pid("ada"), "long-dm"))
        assert len(lines) == 1 + N + 1  # head, N body lines, the fold line
        assert lines[-1].plain.strip() == f"… +{61 - N} lines · Enter"
        assert "DM-LAST-LINE" not in screen_text(app)
        await pilot.press("l", "G")
        assert thread.cursor_key == key
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen", what="card")
        await pilot.press("G")
        await until(pilot, lambda: "DM-LAST-LINE" in screen_text(app), what="the whole DM")


async def test_the_count_follows_the_width_on_resize():
    from support.console import make_app, pid

    app = make_app()
    body = ("All of this is one long paragraph that wraps differently at each width. " * 40)
    async with app.run_test(size=(140, 42)) as pilot:
        await pilot.pause()
        scr = app.screen
        app.clock.advance(1_000)
        scr.session.model.apply_message(Applied(
            kind="channel", id="long", ts=app.clock.t, from_id=pid("ada"), from_name="ada",
            from_role="planner", channel="general", text=body))
        feed = scr.query_one(FeedView)
        await until(pilot, lambda: any(e.text == body for e in feed.visible_entries()))
        e = next(e for e in feed.visible_entries() if e.text == body)

        def exact() -> int:
            w = feed.scrollable_content_region.width
            return _whole_rows(feed, e, w) - feed.row_height(e, w) + 1

        await until(pilot, lambda: f"… +{exact()} lines · Enter" in screen_text(app),
                    what="the fold line at 140")
        wide = exact()
        await pilot.resize_terminal(100, 42)
        await until(pilot, lambda: exact() != wide
                    and f"… +{exact()} lines · Enter" in screen_text(app),
                    what="the fold line's count at the new width")
        assert exact() > wide


def test_max_lines_in_config_is_validated_and_listed(tmp_path):
    from cotal_tui.config import config_problems, load_config, read_config, settings

    cfg = tmp_path / "config.toml"
    for bad in ("-1", '"six"', "true", "2.5", "1001"):
        cfg.write_text(f"[feed]\nmax_lines = {bad}\n")
        problems = config_problems(read_config(tmp_path))
        assert len(problems) == 1 and "max_lines" in problems[0] and ":2" in problems[0], bad
        assert load_config(tmp_path).feed_max_lines == N  # the default applies
    cfg.write_text("[feed]\nmax_lines = 0\n")
    assert config_problems(read_config(tmp_path)) == []
    assert load_config(tmp_path).feed_max_lines == 0
    row = next(s for s in settings(None, tmp_path) if s.key == "feed.max_lines")
    assert (row.value, row.source) == (0, "config.toml")
