"""The dense roster (issue 38 item 1): one line per agent in aligned columns, so a team of forty
fits a 140×42 terminal; ``auto`` is dense whenever the full rows would not fit, ``L`` cycles
auto → dense → full and ``[roster] layout`` holds the choice; columns degrade down to 80×24 and a
hostile name never breaks the alignment."""

from __future__ import annotations

import re

import pytest
from rich.cells import cell_len
from support.console import console, screen_text
from support.team import team_app, team_model

from conftest import until
from cotal_tui.config import load_config, save_roster_layout
from cotal_tui.screens.detail import DetailScreen
from meshview.model.snapshot import PresenceRecord
from widgets.roster import Roster
from widgets.roster_row import GLYPH, columns

ROW = re.compile(r"^[●◐○⨯] (\S+?)/")  # a roster row at the screen's left edge


def roster_of(app) -> Roster:
    return console(app).query_one(Roster)


def shown_agents(app) -> set[str]:
    """The agents whose roster row is on the terminal right now."""
    return {m.group(1) for line in screen_text(app).splitlines() if (m := ROW.match(line))}


def after_cells(plain: str, n: int) -> str:
    """``plain`` from its ``n``-th cell on."""
    used = 0
    for i, ch in enumerate(plain):
        if used >= n:
            return plain[i:]
        used += cell_len(ch)
    return ""


async def test_forty_agents_at_140x42_show_at_least_35_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = team_app(40)
    async with app.run_test(size=(140, 42)) as pilot:
        roster = roster_of(app)
        await until(pilot, lambda: roster.dense and len(shown_agents(app)) >= 35,
                    what="35 dense rows on screen")
        assert roster.row_layout == "auto"
        assert set(roster.item_heights) == {1}  # one line per agent, never wrapped
        assert len(roster.item_heights) == 40


async def test_auto_is_full_while_it_fits_and_dense_once_the_rows_do_not(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = team_app(4)
    async with app.run_test(size=(140, 42)) as pilot:
        roster = roster_of(app)
        await until(pilot, lambda: len(roster.item_heights) == 4, what="4 rows")
        assert not roster.dense and max(roster.item_heights) > 1  # the full rows fit
        # agents join: the full rows no longer fit, the roster goes dense
        model = console(app).session.model
        t = model.clock()
        for i in range(4, 30):
            model.apply_presence(PresenceRecord(id=f"local.a{i:02d}", name=f"new-{i}", kind="agent",
                                                status="idle", ts=t, role="qa"))
        await until(pilot, lambda: roster.dense, what="dense after the joins")
        # ... and gets the wider column its columns need (full rows live in 34)
        await until(pilot, lambda: roster.size.width > 40, what="the dense roster widened")
        # a short terminal with few agents is dense too; back to full when it is tall again
    app = team_app(8)
    async with app.run_test(size=(140, 42)) as pilot:
        roster = roster_of(app)
        await until(pilot, lambda: len(roster.item_heights) == 8, what="8 rows")
        assert not roster.dense
        await pilot.resize_terminal(140, 16)
        await until(pilot, lambda: roster.dense, what="dense on a short terminal")
        await pilot.resize_terminal(140, 42)
        await until(pilot, lambda: not roster.dense, what="full again on a tall one")


async def test_L_cycles_the_layout_keeps_the_cursor_and_persists(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = team_app(40)
    async with app.run_test(size=(140, 42)) as pilot:
        roster = roster_of(app)
        await until(pilot, lambda: roster.dense, what="auto: dense")
        await pilot.press("h")
        assert roster.has_focus
        await pilot.press(*"jjjjjjjjjjjj")
        key = roster.cursor_key
        assert key is not None
        await pilot.press("L")
        await until(pilot, lambda: roster.row_layout == "dense", what="dense")
        assert "roster rows: dense" in (app.last_notice or "")
        assert 'layout = "dense"' in (tmp_path / "config.toml").read_text()
        await pilot.press("L")
        await until(pilot, lambda: roster.row_layout == "full" and not roster.dense, what="full")
        assert max(roster.item_heights) > 1 and roster.cursor_key == key
        # the cursor's agent is still on screen after the rows grew
        start = roster.item_starts[roster.cursor_index]
        await until(pilot, lambda: roster.scroll_offset.y <= start
                    < roster.scroll_offset.y + roster.scrollable_content_region.height,
                    what="the cursor's row in view")
        await pilot.press("L")
        await until(pilot, lambda: roster.row_layout == "auto" and roster.dense, what="auto")
        assert "now dense" in (app.last_notice or "") and roster.cursor_key == key
        # Enter still opens the full card of the agent under the cursor
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen), what="the agent card")
    assert load_config(tmp_path).roster_layout == "auto"


async def test_the_config_layout_is_used_and_a_bad_one_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    save_roster_layout("full", tmp_path)
    app = team_app(40)
    async with app.run_test(size=(140, 42)) as pilot:
        roster = roster_of(app)
        await until(pilot, lambda: len(roster.item_heights) == 40, what="40 rows")
        assert roster.row_layout == "full" and not roster.dense and max(roster.item_heights) > 1
    # ``cotal config`` lists it with where it came from
    from cotal_tui.config import settings

    row = next(r for r in settings(home=tmp_path) if r.key == "roster.layout")
    assert (row.value, row.source) == ("full", "config.toml")
    (tmp_path / "config.toml").write_text('[roster]\nlayout = "tiny"\n')
    cfg = load_config(tmp_path)
    assert cfg.roster_layout == "auto" and "layout must be one of" in (cfg.warning or "")
    row = next(r for r in settings(home=tmp_path) if r.key == "roster.layout")
    assert (row.value, row.source) == ("auto", "default")


def test_columns_degrade_seen_first_then_code_then_the_doing_shrinks():
    wide = columns(200, 16, code=True)
    assert wide.code and wide.seen and wide.doing >= 20
    mid = columns(82, 16, code=True)
    assert mid.code and mid.seen == 0 and mid.doing >= 20  # the last-seen column went first
    for w in range(34, 200):  # ... then the code: never a row with last seen but no code
        c = columns(w, 16, code=True)
        assert not (c.seen and not c.code), c
    narrow = columns(60, 16, code=True)
    assert narrow.code == 0 and narrow.seen == 0 and narrow.doing >= 12
    assert columns(80, 16).seen  # no code context anywhere: last seen where it fits
    tiny = columns(34, 24, code=True)
    assert tiny.name < 24 and tiny.doing >= 12  # the name, status and gaps gave to the doing
    assert tiny.gap == 1 and columns(80, 16).gap == 2
    for c in (wide, mid, narrow, tiny, columns(80, 40), columns(120, 12, code=True)):
        used = GLYPH + c.name + c.gap + c.status + c.gap + c.doing
        used += (c.gap + c.code if c.code else 0) + (c.gap + c.seen if c.seen else 0)
        assert used == c.width


async def test_80x24_rows_fit_the_width_and_never_wrap(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = team_app(40)
    async with app.run_test(size=(80, 24)) as pilot:
        roster = roster_of(app)
        await until(pilot, lambda: len(roster.item_heights) == 40, what="40 rows")
        assert roster.dense and set(roster.item_heights) == {1}
        width = roster.content_width
        lines = [t for _, ls in roster.build(width) for t in ls]
        assert len(lines) == 40 and all(t.cell_len <= width for t in lines)
        assert len(shown_agents(app)) >= 5


HOSTILE = {
    0: "evil\x1b[2J\x1b]0;owned\x07",  # escape sequences
    1: "\u202eli\u202cve-bidi",  # a right-to-left override
    2: "zero\u200b\u200d\u2060width",  # zero-width characters
    3: "x" * 10_000,  # a 10k name
    4: "全角の名前全角の名前全角の名前",  # double-width characters
}


async def test_hostile_names_do_not_break_the_alignment(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = team_app(40, names=HOSTILE)
    async with app.run_test(size=(140, 42)) as pilot:
        roster = roster_of(app)
        await until(pilot, lambda: roster.dense and len(roster.item_heights) == 40,
                    what="40 dense rows")
        width = roster.content_width
        snap = roster.snap
        by_id = {p.id: p for p in snap.peers}
        cols = roster_columns(roster, width)
        for key, lines in roster.build(width):
            (t,) = lines
            plain = t.plain
            assert t.cell_len == width, plain  # every column padded or cut to its cells
            for bad in ("\x1b", "\x07", "\u202e", "\u202c", "\u200b", "\u200d", "\u2060"):
                assert bad not in plain
            # the status column starts at the same cell on every row
            status = after_cells(plain, GLYPH + cols.name + cols.gap)
            assert status.startswith(by_id[key].status), plain
        # the other rows still read as they should: finn-05's row is intact
        assert any(ROW.match(line) and "finn-05/" in line for line in screen_text(app).splitlines())


def roster_columns(roster: Roster, width: int):
    """The columns the roster drew at ``width`` (as the row renderer was given them)."""
    from widgets.roster_row import NAME_CAP, name_cells

    snap = roster.snap
    cells = max(name_cells(snap.name_of(p.id), p.role, "cc") for p in snap.peers)
    return columns(width, min(NAME_CAP, cells), code=True)


def test_team_model_is_deterministic():
    a, _ = team_model(5)
    b, _ = team_model(5)
    assert a.snapshot().peers == b.snapshot().peers


async def test_auto_keeps_a_margin_before_going_back_to_full(tmp_path, monkeypatch):
    """Dense once the full rows overflow by one row; full again only with FULL_MARGIN rows to
    spare, so a roster at the edge does not flap between the two on every resize."""
    from widgets.roster import FULL_MARGIN

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = team_app(8)
    async with app.run_test(size=(140, 42)) as pilot:
        roster = roster_of(app)
        await until(pilot, lambda: len(roster.item_heights) == 8, what="8 rows")
        assert not roster.dense
        full = sum(roster.item_heights)
        chrome = 42 - roster.scrollable_content_region.height  # rows around the roster's

        async def at(rows: int) -> None:
            await pilot.resize_terminal(140, rows + chrome)
            await until(pilot, lambda: roster.scrollable_content_region.height == rows,
                        what=f"a roster {rows} rows high")

        await at(full - 1)
        await until(pilot, lambda: roster.dense, what="dense: one row short")
        await at(full)  # the full rows would fit exactly: not enough to go back
        await pilot.pause()
        assert roster.dense
        await at(full + FULL_MARGIN)
        await until(pilot, lambda: not roster.dense, what="full with the margin to spare")
        assert sum(roster.item_heights) == full


def test_code_context_is_the_cards_repo_and_branch_neutralised_and_capped():
    from widgets.roster_row import code_of

    assert code_of((("repo", "github.com/acme/shop"), ("branch", "feat/x"))) == "shop@feat/x"
    assert code_of((("branch", "main"),)) == "main" and code_of((("host", "h"),)) is None
    hostile = code_of((("repo", "r"), ("branch", "\x1b[31m\u202e" + "b" * 100_000)))
    assert hostile is not None and "\x1b" not in hostile and "\u202e" not in hostile
    assert len(hostile) < 120


async def test_a_wide_panel_shows_the_code_column_only_when_agents_say_it(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    for code in (True, False):
        app = team_app(40, code=code)
        async with app.run_test(size=(240, 50)) as pilot:
            roster = roster_of(app)
            await until(pilot, lambda: len(roster.item_heights) == 40, what="40 rows")
            N = console(app)
            await pilot.press("N")  # the rail hidden: the roster gets its widest
            await until(pilot, lambda: not N.query_one("#rail").display, what="rail hidden")
            text = {k: t.plain for k, (t,) in roster.build(roster.content_width)}
            assert ("shop@feat/task-3" in text["local.a03"]) is code
            assert "seen " in text["local.a03"]


async def test_a_dense_row_is_measured_without_any_wrap_or_facts(tmp_path, monkeypatch):
    """The paint cost: a dense row's height is 1 without reading its facts or wrapping them
    (the full row's measure does both, for every one of 10k rows on a re-measure)."""
    import widgets.roster as roster_mod

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = team_app(40)
    async with app.run_test(size=(140, 42)) as pilot:
        roster = roster_of(app)
        await until(pilot, lambda: roster.dense and len(roster.item_heights) == 40, what="dense")

        def boom(*_a, **_k):
            raise AssertionError("a dense row read the full row's facts")

        monkeypatch.setattr(roster_mod, "peer_facts", boom)
        monkeypatch.setattr(roster_mod, "join_wrapped", boom)
        width = roster.content_width
        rows = roster.build(width)  # every row built as the dense renderer draws it
        assert len(rows) == 40 and all(len(lines) == 1 for _, lines in rows)
        assert [roster.measure(d, width) for d in roster.data()] == [1] * 40
        with pytest.raises(AssertionError, match="full row's facts"):
            roster.set_layout("full")  # the full rows do read them (the guard above is live)


def test_a_managed_seats_marker_is_whole_when_it_says_more():
    from rich.text import Text

    from widgets.doing import Doing
    from widgets.roster_row import dense_row

    model, clk = team_model(1)
    (p,) = model.snapshot().peers
    cols = columns(100, 20)
    mark = Text("▸ managed pty · exited", style="dim")
    bash = Doing("tool", "Bash", clk.t - 3_000)
    whole = dense_row(p, p.name, cols, clk.t, doing=bash, marker=mark, marker_whole=True).plain
    assert "▸ managed pty · exited · ⚙ Bash · 3s" in whole
    short = dense_row(p, p.name, cols, clk.t, doing=bash, marker=Text("▸ managed pty")).plain
    assert "▸ ⚙ Bash · 3s" in short and "managed pty" not in short
    import msgspec

    quiet = msgspec.structs.replace(p, activity=None)  # nothing else to say: the marker whole
    alone = dense_row(quiet, p.name, cols, clk.t, marker=Text("▸ managed pty"))
    assert "▸ managed pty" in alone.plain and alone.cell_len == 100
