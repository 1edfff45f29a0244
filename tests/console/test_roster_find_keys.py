"""Find, group and pin in the console's roster (issue 38 item 2), through keys: ``/`` on the
roster filters it (each status prefix; the feed's ``/`` still filters the feed), ``o`` groups
with header rows and counts the cursor never rests on, ``*`` pins by principal id (saved,
reloaded, never given to a peer that borrows the name), and the cursor stays on its agent
through all of it, in the roster and in NEEDS-YOU."""

from __future__ import annotations

from support.console import console, make_app, on_roster, pid, rec, roster_names

from conftest import until
from meshview.model.snapshot import PresenceRecord
from widgets.roster_find import is_header_key

WIDE = (120, 40)


async def typed(pilot, box, text: str) -> None:
    box.value = ""
    await pilot.press(*text)
    await until(pilot, lambda: box.value == text, what=f"{text!r} typed")


async def test_slash_filters_the_focused_panel(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        roster, feed, box = scr.query_one("#roster"), scr.query_one("#feed"), scr.query_one("#search")
        await pilot.press("h")
        await pilot.press("j", "j", "j")
        start = roster.cursor_key
        assert start == pid("dax")
        await pilot.press("slash")
        assert box.display and scr.focused is box and "filter the roster" in box.placeholder
        for raw, want in (("waiting:", ["bram", "dax"]), ("working:", ["ada", "eve"]),
                          ("idle:", ["cleo", "gus"]), ("offline:", ["finn"]),
                          ("wa: rev", ["dax"]), ("review", ["eve", "dax"])):
            await typed(pilot, box, raw)
            await until(pilot, lambda: roster_names(roster) == want, what=f"{raw} -> {want}")
            n = len(want)
            assert roster.border_title.endswith(f"roster · {n}/7 · /{raw}"), roster.border_title
        assert feed.filter_text == ""  # the feed kept its rows
        await typed(pilot, box, "waiting:")
        await until(pilot, lambda: roster_names(roster) == ["bram", "dax"])
        assert roster.cursor_key == pid("dax")  # kept while it is shown
        await pilot.press("enter")  # keeps the filter, back to the list
        assert not box.display and scr.focused is roster and roster.filter_text == "waiting:"
        await pilot.press("k")
        assert roster.cursor_key == pid("bram")
        await pilot.press("escape")  # Esc clears the kept filter
        await until(pilot, lambda: len(roster_names(roster)) == 8, what="every row back")
        assert roster.filter_text == "" and "7 agents" in roster.border_title
        # a filter that hid the cursor's agent gives it back when cleared
        await pilot.press("j")
        assert roster.cursor_key == pid("dax")
        await pilot.press("slash")
        await typed(pilot, box, "idle:")
        await until(pilot, lambda: roster_names(roster) == ["cleo", "gus"])
        await pilot.press("escape")
        await until(pilot, lambda: roster.cursor_key == pid("dax"), what="dax again")
        assert len(roster_names(roster)) == 8 and not box.display
        # the ambiguous w: is said, and matched as text
        await pilot.press("slash")
        await typed(pilot, box, "w:")
        await until(pilot, lambda: "working or waiting" in roster.border_title)
        await pilot.press("escape")
        # on the feed, / filters the feed
        await pilot.press("l")
        assert scr.focused is feed
        await pilot.press("slash")
        assert "search: sender" in box.placeholder
        await typed(pilot, box, "PR")
        await until(pilot, lambda: feed.filter_text == "PR")
        assert roster.filter_text == "" and len(roster_names(roster)) == 8
        await pilot.press("escape")
        assert feed.filter_text == ""


async def test_group_headers_counts_cursor_and_config(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = make_app()
    async with on_roster(app) as (pilot, scr, roster):
        await pilot.press("h", "j")
        assert roster.cursor_key == pid("eve")
        await pilot.press("o")
        await until(pilot, lambda: roster.group == "state")
        assert roster.header_rows() == ["▾ working · 2", "▾ waiting · 2", "▾ idle · 2",
                                        "▾ offline · 1", "▾ endpoints · 1"]
        assert "▾ working · 2" in roster.line_texts()
        assert roster.cursor_key == pid("eve") and "▾ state" in roster.border_title
        assert 'group = "state"' in (tmp_path / "config.toml").read_text()
        await pilot.press("g")  # first: the first agent, not the header above it
        assert roster.cursor_key == pid("ada")
        await pilot.press("k")
        assert roster.cursor_key == pid("ada")
        await pilot.press("j", "j")  # over the waiting header
        assert roster.cursor_key == pid("bram")
        await pilot.press("k")
        assert roster.cursor_key == pid("eve")
        await pilot.press("G")
        assert roster.cursor_key == "local.opsdesk"
        await pilot.press("o")
        await until(pilot, lambda: roster.group == "role")
        assert "▾ reviewer · 2" in roster.header_rows() and roster.cursor_key == "local.opsdesk"
        await pilot.press("o")
        await until(pilot, lambda: roster.group == "host")
        assert roster.header_rows() == ["▾ demo · 7", "▾ endpoints · 1"]
        # a grouped filter counts what it shows
        roster.set_filter("waiting:")
        await until(pilot, lambda: roster.header_rows() == ["▾ demo · 2"])
        roster.set_filter("")
        await pilot.press("o")
        await until(pilot, lambda: roster.group == "none")
        assert roster.header_rows() == [] and len(roster_names(roster)) == 8
        assert 'group = "none"' in (tmp_path / "config.toml").read_text()
    (tmp_path / "config.toml").write_text('[roster]\ngroup = "role"\n')
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        roster = console(app).query_one("#roster")
        assert roster.group == "role" and roster.header_rows()[0] == "▾ backend · 1"


async def test_pins_by_principal_saved_reloaded_and_not_borrowed(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = make_app()
    async with on_roster(app) as (pilot, scr, roster):
        model = scr.session.model
        await pilot.press("h", "G", "k", "k")  # gus (idle), above finn and opsdesk
        assert roster.cursor_key == pid("gus")
        await pilot.press("asterisk")
        await until(pilot, lambda: roster.pins == (pid("gus"),), what="gus pinned")
        assert roster.header_rows()[0] == "▾ pinned · 1" and roster_names(roster)[0] == "gus"
        assert roster.cursor_key == pid("gus")  # the cursor went up with it
        assert f'pins = ["{pid("gus")}"]' in (tmp_path / "config.toml").read_text()
        # a lying peer borrows gus's name: it is not pinned, and the pinned row is still gus
        model.apply_presence(PresenceRecord(id="local.mallory", name="gus", kind="agent",
                                            status="working", ts=model.clock(), role="qa"))
        await until(pilot, lambda: "local.mallory" in roster.snap.order, what="the namesake")
        await until(pilot, lambda: [k for k, _ in roster.items][:3] == [
            ("group", "pinned"), pid("gus"), ("group", "others")], what="gus alone pinned")
        assert roster.header_rows()[0] == "▾ pinned · 1"
        # the rail's cursor and the roster's survive a re-sort, a group and an unpin
        await pilot.press("j", "j")
        held = roster.cursor_key
        await pilot.press("s")
        await until(pilot, lambda: roster.sort_by == "name")
        assert roster.cursor_key == held
        await pilot.press("o")
        await until(pilot, lambda: roster.group == "state")
        assert roster.cursor_key == held
        await pilot.press("l", "l")
        rail = scr.query_one("#rail")
        assert scr.focused is rail
        await pilot.press("j")
        rail_at = rail.cursor_key
        roster.set_filter("offline:")
        roster.set_group("role")
        model.apply_presence(rec("cleo", "working", model.clock()))
        await until(pilot, lambda: roster.snap.signals.counts[0][1] >= 3, what="cleo working")
        assert rail.cursor_key == rail_at
        roster.set_filter("")
        await until(pilot, lambda: roster.cursor_key == held, what="the roster's agent back")
    app = make_app()  # the pin comes back from config.toml, by id
    async with on_roster(app) as (pilot, scr, roster):
        assert roster.pins == (pid("gus"),) and roster_names(roster)[0] == "gus"
        # o's last choice came back too (set_group from a test is not saved: o is)
        assert roster.group == "state" and roster.header_rows()[:2] == ["▾ pinned · 1",
                                                                         "▾ working · 2"]
        await pilot.press("h")
        assert roster.cursor_key == pid("gus")
        await pilot.press("asterisk")  # unpin: back in its group, the cursor with it
        await until(pilot, lambda: roster.pins == ())
        assert "▾ pinned · 1" not in roster.header_rows() and roster.cursor_key == pid("gus")
        assert "▾ idle · 2" in roster.header_rows()
        assert "pins = []" in (tmp_path / "config.toml").read_text()


async def test_help_on_the_roster_lists_find_group_and_pin():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("h", "question_mark")
        await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        body = app.screen.query_one("#help-body").line_texts()
        for key, what in (("/", "filter: name, role, activity; working: waiting:"),
                          ("o", "group: none / state / role / host"),
                          ("*", "pin / unpin the agent")):
            assert any(ln.split()[:1] == [key] and what in ln for ln in body), (key, body)


async def test_a_kept_filter_and_grouping_follow_the_roster_as_it_changes():
    app = make_app()
    async with on_roster(app) as (pilot, scr, roster):
        model = scr.session.model
        roster.set_filter("epic")
        await until(pilot, lambda: roster_names(roster) == ["ada"])
        # ada's activity moves on (no status, name or role change): she leaves the filter
        p = model.peer(pid("ada"))
        model.apply_presence(rec("ada", "working", model.clock(), activity="writing tests",
                                 status_since=p.status_since, active_at=model.clock()))
        await until(pilot, lambda: roster_names(roster) == [], what="ada filtered out")
        assert roster.shown_counts() == (0, 7)
        roster.set_filter("")
        roster.set_group("role")
        await until(pilot, lambda: "▾ qa · 1" in roster.header_rows())
        # gus takes another role: the role groups follow (names and roles move the labels)
        model.apply_presence(PresenceRecord(id=pid("gus"), name="gus", kind="agent",
                                            status="idle", ts=model.clock(), role="reviewer"))
        await until(pilot, lambda: "▾ reviewer · 3" in roster.header_rows(), what="gus regrouped")
        assert "▾ qa · 1" not in roster.header_rows()
        roster.set_group("host")  # meta.host: gus's new record has none
        await until(pilot, lambda: roster.header_rows() == ["▾ demo · 6", "▾ — · 1",
                                                            "▾ endpoints · 1"])


async def test_on_a_real_broker_a_lying_peer_neither_borrows_a_pin_nor_a_match(
        broker, nc, space, tmp_path, monkeypatch):
    """bob calls itself ``ada``, puts 10k characters of bidi and controls in its activity and
    names ada's channel in its frames: the pin (by principal) stays ada's alone, a filter on
    bob's tool finds bob only, and the title and headers stay one clean line."""
    import argparse

    from support.observer import presence, put_presence
    from test_roster_doing import Peer as Publisher, started, tool

    from cotal_tui.app import CotalApp
    from cotal_tui.cli.connection import target_from_args
    from cotal_tui.cli.watch_console import session_options
    from cotal_tui.session import LiveSession

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text('[roster]\npins = ["local.ada"]\ngroup = "host"\n')
    args = argparse.Namespace(server=[broker.url], space=space, backfill=0, no_dms=False)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    ada, bob = Publisher(nc, space, "ada"), Publisher(nc, space, "bob")
    async with app.run_test(size=(160, 44)) as pilot:
        await until(pilot, lambda: session.started, what="session")
        roster = console(app).query_one("#roster")
        await put_presence(nc, space, presence("ada", "working", role="planner"))
        liar = presence("bob", "working", role="planner",
                        activity="\u202e\x1b[2J" + "x" * 10_000 + "\u2066")
        liar["card"]["name"] = "ada"  # the borrowed name; its key and id stay bob's
        liar["card"]["meta"] = {"host": "\x1b]0;pwned\x07" + "h" * 500}
        await put_presence(nc, space, liar)
        await until(pilot, lambda: {"local.ada", "local.bob"} <= set(roster.snap.order),
                    what="both rows")
        assert roster.pins == ("local.ada",)
        await until(pilot, lambda: [k for k, _ in roster.items][:2] == [
            ("group", "pinned"), "local.ada"], what="ada pinned")
        assert roster.header_rows()[0] == "▾ pinned · 1"
        assert all("\x1b" not in h and "\x07" not in h and len(h) < 60
                   for h in roster.header_rows())
        await ada.frame("r1", [started("r1"), tool("Bash")])
        await bob.frame("rb", [started("rb"), tool("Evil")], channel_of="ada", name="ada")
        roster.set_filter("evil")
        await until(pilot, lambda: [k for k, _ in roster.items if not is_header_key(k)] == [
            "local.bob"], what="bob's tool finds bob")
        roster.set_filter("bash")
        await until(pilot, lambda: [k for k, _ in roster.items if not is_header_key(k)] == [
            "local.ada"], what="ada's tool finds ada")
        roster.set_filter("xxxx")  # in the liar's activity, under the bound
        await until(pilot, lambda: [k for k, _ in roster.items if not is_header_key(k)] == [
            "local.bob"], what="the liar's own activity")
        title = roster.border_title
        assert "roster · 1/2 · /xxxx" in title and "\n" not in title and "\x1b" not in title
    await session.stop()


async def test_a_heartbeat_under_a_grouping_shows_on_its_row():
    """Grouped, a heartbeat (clocks only: no re-arrangement) still puts the new record in its
    row: ``seen 0s ago`` after 30 s of silence."""
    app = make_app()
    async with on_roster(app) as (pilot, scr, roster):
        model = scr.session.model

        def row(key: str) -> str:
            return " ".join(t.plain for k, lines in roster.build(100) if k == key for t in lines)

        roster.set_group("state")
        await until(pilot, lambda: roster.header_rows()[:1] == ["▾ working · 2"])
        keys = roster.order()
        app.clock.advance(30_000)
        model.tick()
        await until(pilot, lambda: "seen 3" in row(pid("eve")), what="30 s of silence")
        p = model.peer(pid("eve"))
        model.apply_presence(rec("eve", "working", model.clock(), activity=p.activity,
                                 activity_since=p.activity_since, status_since=p.status_since,
                                 active_at=p.active_at))
        await until(pilot, lambda: "seen 0s ago" in row(pid("eve")), what="eve's heartbeat")
        assert roster.order() is keys  # the same arrangement, the new record in its row
