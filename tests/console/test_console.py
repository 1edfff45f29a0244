"""The console App through ``run_test()`` + Pilot: every binding, lens and screen, asserting
on what is shown. Data comes from the real ``MeshModel`` reducers with a fixed clock."""

from __future__ import annotations

from cotal_tui.keygate import TYPEAHEAD_S

import json

import pytest
from support.console import StaticSession, build_model, console, make_app, pid, screen_text

from meshview.observe.spaces import SpaceInfo
from conftest import until
from meshview.wire.decode import Applied

WIDE = (120, 40)
NARROW = (80, 24)


def shown(app) -> str:
    return screen_text(app)


# --------------------------------------------------------------------------- main view


async def test_main_view_shows_every_part():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = shown(app)
        # tabs with retained counts and arrival badges
        # (the totals are the last poll's counts plus the live arrivals since it)
        assert "1:all" in text and "2:#general 17 +3" in text and "#team.backend 7 +1" in text
        # tiles (shape and count) and the stalest live heartbeat
        assert "● 2 working" in text and "◐ 2 waiting" in text and "○ 2 idle" in text
        assert "⨯ 1 offline" in text and "stalest live heartbeat" in text
        # roster: header, harness tags, honest working, endpoint dimmed with a gear
        assert "roster · 7 agents · 1 endpoint" in text
        assert "ada/planner cc" in text and "bram/backend cx" in text and "dax/reviewer oc" in text
        assert "working · progress unknown" in text
        assert "waiting (approval for" in text
        assert "⚙ ○ opsdesk/operator" in text
        # feed: heads, targets, bursts, anycast, lifecycle, history marker
        assert "ada/planner → #general: standup in 5" in text
        assert "cleo/frontend → dax, eve, gus (3×):" in text
        assert "gus/qa → @reviewer: please pick up" in text
        assert "✖ finn/ops heartbeat lapsed (crash detected)" in text
        assert "↺" in text
        # NEEDS YOU rail (open by default at 120 columns)
        assert "NEEDS YOU · 2" in text and "wants approval to run" in text
        # status bar
        assert "demo · all · 7 agents" in text and "msg/s" in text and "60s" in text
        assert "connected" in text and "! 1 rejected" in text
        assert "? help" in text


async def test_hostile_text_is_escaped_visibly():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        text = shown(app)
        for token in ("pwned", "\\x1b[2J\\x1b]0;owned\\x07", "\\u202eevil\\u202c"):
            assert token in text, token
        feed = console(app).query_one("#feed")
        assert any("\x1b[2J" in e.text for e in feed.visible_entries())  # raw in the model
        assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text


async def test_narrow_layout_puts_roster_above_feed_and_resizes_live():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        roster, feed = scr.query_one("#roster"), scr.query_one("#feed")
        assert not scr.has_class("-narrow")
        assert roster.region.x < feed.region.x and roster.region.y == feed.region.y
        await pilot.resize_terminal(*NARROW)
        await until(pilot, lambda: scr.has_class("-narrow"), what="narrow layout")
        await pilot.pause()
        assert roster.region.y < feed.region.y and roster.region.width == 80
        assert not scr.query_one("#rail").display
        text = shown(app)
        assert "standup in 5 minutes" in text  # the feed still follows the tail
        await pilot.resize_terminal(*WIDE)
        await until(pilot, lambda: not scr.has_class("-narrow"), what="wide layout")


async def test_live_model_changes_are_drained_in_batches():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        model = scr.session.model
        v0 = scr.snap.version
        for i in range(50):  # many changes land as one drain, not 50 messages
            model.apply_message(Applied(kind="channel", id=f"late{i}", ts=model.clock(),
                                        from_id=pid("gus"), from_name="gus", from_role="qa",
                                        text=f"late message {i}", channel="general"))
        await until(pilot, lambda: "late message 49" in shown(app), what="drained rows")
        assert scr.snap.version > v0
        feed = scr.query_one("#feed")
        assert feed.follow
        assert "late message 49" in shown(app)


# --------------------------------------------------------------------------- tabs


async def test_tabs_digits_and_brackets_filter_the_feed_and_clear_badges():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        feed = scr.query_one("#feed")
        await pilot.press("2")
        await until(pilot, lambda: feed.tab == "general")
        text = shown(app)
        assert "feed · #general" in text
        assert all(e.kind == "channel" and e.channel == "general" for e in feed.visible_entries())
        assert "standup in 5" in text and "@reviewer" not in text
        assert "2:#general 17 +3" not in text  # viewing clears the badge
        assert "#general · 7 agents" in text  # status bar names the channel
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: feed.tab == "releases")
        await pilot.press("left_square_bracket", "left_square_bracket")
        await until(pilot, lambda: feed.tab is None)
        # a new arrival on a channel we are not viewing raises its badge, once the model's
        # second turns (the tab counts are read at each second, as msg/s is)
        model = scr.session.model
        model.apply_message(Applied(kind="channel", id="x1", ts=model.clock(), from_id=pid("ada"),
                                    from_name="ada", from_role="planner", text="one more",
                                    channel="general"))
        model.clock.advance(1000)
        model.tick()
        await until(pilot, lambda: "2:#general 18 +1" in shown(app), what="+1 badge")
        await pilot.press("9")  # no 9th tab: nothing happens
        assert feed.tab is None


async def test_first_message_on_a_new_channel_adds_a_tab_with_a_badge():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        model = console(app).session.model
        model.apply_message(Applied(kind="channel", id="f1", ts=model.clock(), from_id=pid("eve"),
                                    from_name="eve", from_role="reviewer", text="hello",
                                    channel="fresh"))
        await until(pilot, lambda: "#fresh 1 +1" in shown(app), what="fresh tab")


# --------------------------------------------------------------------------- feed


async def test_feed_tail_follow_and_more_marker():
    app = make_app(rows=120)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        feed = scr.query_one("#feed")
        assert feed.follow
        await pilot.press("k", "k", "k")
        assert not feed.follow and feed.cursor is not None
        model = scr.session.model
        for i in range(3):
            model.apply_message(Applied(kind="channel", id=f"n{i}", ts=model.clock(),
                                        from_id=pid("ada"),
                                        from_name="ada", from_role="planner", text=f"newer {i}",
                                        channel="general"))
        await until(pilot, lambda: "more · G to follow" in shown(app), what="more marker")
        assert "newer 2" not in shown(app)
        await pilot.press("G")
        await until(pilot, lambda: "newer 2" in shown(app), what="follow again")
        assert feed.follow and "G to follow" not in shown(app)
        # paging and top keep working
        await pilot.press("g")
        assert not feed.follow and feed.scroll_y == 0
        await pilot.press("pagedown", "ctrl+d", "ctrl+u", "pageup")
        await pilot.press("end")
        assert feed.follow


async def test_feed_message_navigation_and_detail_card():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        feed = console(app).query_one("#feed")
        await pilot.press("K")  # newest message selected
        assert feed.cursor == feed.rows[-1]
        await pilot.press("K", "J", "left_curly_bracket")
        assert feed.cursor == feed.rows[-2]
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen")
        text = shown(app)
        assert "delivery" in text and "multicast (channel)" in text
        assert "standup in 5 minutes" in text and "local.ada" in text
        await pilot.press("x")  # any key closes
        await until(pilot, lambda: type(app.screen).__name__ == "ConsoleScreen")


async def test_dm_burst_detail_lists_every_recipient():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        burst = next(e for e in scr.snap.feed if e.count == 3)
        scr.open_entry(burst)
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen")
        text = shown(app)
        assert "unicast (DM)" in text and "(3× burst)" in text
        assert "local.dax" in text and "local.gus" in text


async def test_lifecycle_rows_toggle():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        feed = console(app).query_one("#feed")
        assert any(e.kind == "lifecycle" for e in feed.visible_entries())
        await pilot.press("L")
        await until(pilot, lambda: "lifecycle rows hidden" in shown(app))
        assert not any(e.kind == "lifecycle" for e in feed.visible_entries())
        assert "crash detected" not in shown(app)
        await pilot.press("L")
        assert any(e.kind == "lifecycle" for e in feed.visible_entries())


async def test_search_filters_by_sender_role_channel_service_target_text():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        feed = scr.query_one("#feed")
        await pilot.press("slash")
        assert scr.query_one("#search").display and scr.focused.id == "search"
        await pilot.press(*"standup")
        await until(pilot, lambda: feed.filter_text == "standup")
        assert [e.text for e in feed.visible_entries()] == ["standup in 5 minutes"]
        assert "/standup" in shown(app)
        await pilot.press("enter")  # keep the query, back to the feed
        assert not scr.query_one("#search").display and feed.filter_text == "standup"
        for q, expect in (("reviewer", "please pick up: the rate limiter"),  # service / role
                          ("team.backend", "session store refactor is half done"),  # channel
                          ("gus", "can you review PR 57 today?")):  # a target name
            feed.set_filter(query=q)
            assert expect in [e.text for e in feed.visible_entries()], q
        await pilot.press("escape")  # the first esc after a search clears it (rail stays)
        assert feed.filter_text == "" and scr.query_one("#rail").display
        await pilot.press("slash", *"zzz-nothing")
        await until(pilot, lambda: "no messages match the search" in shown(app))
        await pilot.press("escape")
        assert feed.filter_text == "" and not scr.query_one("#search").display


# --------------------------------------------------------------------------- roster, rail


async def test_roster_enter_opens_agent_card_with_skills_model_and_traffic():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("h")  # focus the roster
        scr = console(app)
        assert scr.focused.id == "roster"
        await pilot.press("g", "enter")  # ada is first (working)
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen")
        text = shown(app)
        assert "agent" in text and "ada/planner" in text
        assert "working · progress unknown" in text
        assert "claude-code · cc" in text and "claude-opus-4" in text
        assert "plan - plan work" in text and "triage - triage issues" in text
        assert "recent traffic" in text and "→ #general: standup in 5 minutes" in text
        assert "← eve: PR 42 looks good" in text or "←" in text
        await pilot.press("escape")
        await pilot.press("j", "a")  # a fixed model has no mesh to attach through: one notice
        await until(pilot, lambda: "attach: no mesh connection to attach through" in shown(app))
        await pilot.press("p")
        await until(pilot, lambda: "peek: no mesh connection to attach through" in shown(app))
        assert type(app.screen).__name__ == "ConsoleScreen"


async def test_needs_you_rail_toggles_and_opens_cards():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        rail = scr.query_one("#rail")
        assert rail.display
        await pilot.press("N")  # N hides the rail, n goes to it (opening it)
        assert not rail.display
        await pilot.press("n")
        assert rail.display and scr.focused is rail
        assert [k for k, _ in rail.items] == [pid("bram"), pid("dax")]  # by name
        await pilot.press("j", "enter")  # Enter on an agent: triage, on that agent
        await until(pilot, lambda: type(app.screen).__name__ == "TriageScreen")
        assert "which branch should the hotfix target?" in shown(app)


async def test_needs_you_is_an_overlay_on_narrow_terminals():
    app = make_app()
    async with app.run_test(size=NARROW) as pilot:
        await pilot.pause()
        await pilot.press("n")
        await until(pilot, lambda: type(app.screen).__name__ == "NeedsYouScreen")
        text = shown(app)
        assert "NEEDS YOU · 2" in text and "bram/backend" in text and "dax/reviewer" in text
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "TriageScreen")
        await pilot.press("escape")  # back to the overlay triage was opened from
        await until(pilot, lambda: type(app.screen).__name__ == "NeedsYouScreen")
        await pilot.press("escape")
        await until(pilot, lambda: type(app.screen).__name__ == "ConsoleScreen")


async def test_needs_you_all_clear():
    model, _ = build_model()
    from meshview.model.snapshot import PresenceRecord

    for name in ("bram", "dax"):
        p = model.peer(pid(name))
        model.apply_presence(PresenceRecord(id=p.id, name=p.name, status="idle", ts=model.clock(),
                                            role=p.role, lifecycle_uid=p.lifecycle_uid))
    from cotal_tui.app import CotalApp

    app = CotalApp(session=StaticSession(model))
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert "nothing waiting - all clear ✓" in shown(app)


async def test_focus_moves_between_panels():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        assert scr.focused.id == "feed"
        await pilot.press("l")
        assert scr.focused.id == "rail"
        await pilot.press("l")  # no wrap-around: the right edge stays put
        assert scr.focused.id == "rail"
        await pilot.press("left", "left")
        assert scr.focused.id == "roster"
        await pilot.press("h")
        assert scr.focused.id == "roster"
        await pilot.press("right")
        assert scr.focused.id == "feed"


# --------------------------------------------------------------------------- lenses


async def test_dm_lens_roll_up_and_thread():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("d")
        scr = console(app)
        assert scr.lens == "dms"
        text = shown(app)
        assert "direct messages · 5 peers" in text
        assert "▾" in text and "↳" in text
        # newest conversation first: ada <-> eve
        assert "ada ↔ eve · 1 msg" in text or "eve ↔ ada · 1 msg" in text
        assert "PR 42 looks good, one nit on naming" in text
        # walk to cleo and her conversation with dax
        peers = scr.query_one("#dm-peers")
        for _ in range(10):
            if peers.cursor_key == ("peer", pid("cleo")):
                break
            await pilot.press("j")
        assert peers.cursor_key == ("peer", pid("cleo"))
        await pilot.press("j")
        assert peers.cursor_key[0] == "conv"
        await until(pilot, lambda: "yes, after lunch" in shown(app) or
                    "can you review PR 57 today?" in shown(app))
        await pilot.press("l")  # to the thread pane
        assert scr.focused.id == "dm-thread"
        await pilot.press("k", "ctrl+u", "ctrl+d", "G")
        await pilot.press("d")  # d again: back to the body
        assert scr.lens == "body"


async def test_dm_lens_under_chat_only_creds():
    app = make_app(dm_visible=False)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert "chat-only" in shown(app)
        await pilot.press("d")
        await until(pilot, lambda: "DMs hidden (chat-only creds)" in shown(app))


@pytest.mark.parametrize("membership,pill", [("live", "membership: live"),
                                             ("none", "membership: traffic-only"),
                                             ("unreadable",
                                              "membership: unreadable (permissions violation)")])
async def test_topology_lens_views_and_pill(membership, pill):
    app = make_app(membership=membership)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("t")
        scr = console(app)
        topo = scr.query_one("#topo")
        assert scr.lens == "topo" and scr.focused is topo
        text = shown(app)
        assert "topology · ① sequence ② matrix ③ map · window 2m · 11 msgs" in text
        assert pill in text
        assert "├" in text and "#general" in text  # swimlane arrows
        await pilot.press("v")
        assert topo.view == 1
        text = shown(app)
        assert "heat ░▒▓█" in text and "▒2" in text
        if membership == "live":
            assert "◌" in text  # hana is a durable member of #releases
        if membership == "unreadable":
            assert "hana" not in text  # an unreadable feed draws no links or phantom nodes
        await pilot.press("3")
        assert topo.view == 2
        text = shown(app)
        assert "#team.backend" in text and "●ada" in text and "jk spotlight" in text
        await pilot.press("1")
        assert topo.view == 0
        await pilot.press("escape")
        assert scr.lens == "body"


async def test_topology_matrix_cursor_and_open():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("t", "2")
        topo = console(app).query_one("#topo")
        cols = topo.fold.columns()
        target = cols.index("#general")
        for _ in range(target):
            await pilot.press("l")
        assert topo.cell == (0, target)
        assert "ada → #general: 2 msgs" in shown(app)
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "DetailScreen")
        assert "standup in 5 minutes" in shown(app)


async def test_topology_map_needs_room():
    app = make_app()
    async with app.run_test(size=(70, 14)) as pilot:
        await pilot.pause()
        await pilot.press("t", "3")
        await until(pilot, lambda: "terminal too small for the map - try ② matrix" in shown(app))


# --------------------------------------------------------------------------- navigation


async def test_help_lists_panel_and_global_keys_and_closes_on_q():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        text = shown(app)
        assert "cotal console - help" in text and "context: feed panel" in text
        assert "feed keys" in text and "lifecycle rows" in text and "newest / follow" in text
        assert "global keys" in text and "DM lens" in text and "topology lens" in text
        body = "\n".join(app.screen.query_one("#help-body").line_texts())
        assert "1 2 3 4 5 6 7 8 9" in body and "jump to tab" in body
        assert "Scroll Left" not in body  # only our own, remappable bindings
        await pilot.press("q")
        await until(pilot, lambda: type(app.screen).__name__ == "ConsoleScreen")
        # the topology panel's own keys
        await pilot.press("t", "question_mark")
        await until(pilot, lambda: "context: topology panel" in shown(app))
        assert "cycle view" in shown(app)
        # the roster's own keys: attach and peek
        await pilot.press("q", "t", "h", "question_mark")
        await until(pilot, lambda: "context: roster panel" in shown(app))
        body = app.screen.query_one("#help-body").line_texts()
        assert any(line.split()[:2] == ["a", "attach"] for line in body), body
        assert any(line.split()[:2] == ["p", "peek"] for line in body), body


async def test_palette_runs_navigation_verbs_and_seat_verbs():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("colon")
        await until(pilot, lambda: type(app.screen).__name__ == "MeshPalette")
        await pilot.press(*"dms")
        await until(pilot, lambda: "DM lens" in shown(app), what="dms suggestion")
        await pilot.press("enter")
        await until(pilot, lambda: console(app).lens == "dms")
        await pilot.press("escape", "colon", *"attach ada")
        await until(pilot, lambda: "open ada's terminal" in shown(app), what="attach hit")
        await pilot.press("enter")
        await until(pilot, lambda: "attach: no mesh connection to attach through" in shown(app))
        await pilot.press("colon", *"attach nobody")  # an unknown name: a notice, no traceback
        await until(pilot, lambda: "no agent by that name" in shown(app), what="unknown hit")
        await pilot.press("enter")
        await until(pilot, lambda: "attach: no agent named nobody" in shown(app))
        await pilot.pause(TYPEAHEAD_S)  # keys typed ahead of a refusal are dropped
        await pilot.press("colon", *"tile ada zed")
        await until(pilot, lambda: "tile 2 seats" in shown(app), what="tile hit")
        await pilot.press("enter")
        await until(pilot, lambda: "tile: no agent named zed" in shown(app))
        await pilot.pause(TYPEAHEAD_S)
        await pilot.press("colon", *"#releases")
        await until(pilot, lambda: "switch to this channel tab" in shown(app))
        await pilot.press("enter")
        await until(pilot, lambda: console(app).query_one("#feed").tab == "releases")
        await pilot.press("colon", *"topo")
        await until(pilot, lambda: "topology lens" in shown(app))
        await pilot.press("enter")
        await until(pilot, lambda: console(app).lens == "topo")


async def test_escape_backs_out_one_level_at_a_time():
    """Issue 13 item 3: Esc goes back exactly one level and never hides NEEDS-YOU - not on the
    main view, not as the first Esc after a search; in a DM thread it goes back to the peers,
    not out of the whole lens."""
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        feed, rail = scr.query_one("#feed"), scr.query_one("#rail")
        await pilot.press("escape")  # the main view: nothing to leave, the rail stays
        assert rail.display and scr.lens == "body" and app.screen is scr
        await pilot.press("slash", *"ada", "enter")  # a kept search
        await until(pilot, lambda: feed.filter_text == "ada")
        await pilot.press("escape")  # first Esc: the filter goes, not the rail
        assert feed.filter_text == "" and rail.display
        feed.set_filter(query="ada")
        await pilot.press("t")
        await pilot.press("escape")  # a lens: back to the body, the query kept
        assert scr.lens == "body" and rail.display and feed.filter_text == "ada"
        await pilot.press("escape")
        assert feed.filter_text == "" and rail.display
        await pilot.press("d", "l")  # the DM lens, then its thread pane
        assert scr.lens == "dms" and scr.focused.id == "dm-thread"
        await pilot.press("escape")  # thread -> peers, still in the lens
        assert scr.lens == "dms" and scr.focused.id == "dm-peers"
        await pilot.press("escape")  # peers -> the body
        assert scr.lens == "body" and rail.display
        await pilot.press("escape")  # nothing left: stays put (no overview on one space)
        assert app.screen is scr and rail.display


async def test_q_quits_with_zero():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
    assert app.return_value == 0


async def test_status_bar_shows_connection_states():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        model = console(app).session.model
        model.set_connection("reconnecting")
        await until(pilot, lambda: "◌ demo" in shown(app) and "reconnecting" in shown(app))
        model.set_connection("connected")
        model.sweep(model.clock() + 60_000)  # the presence watch went silent: stale view
        await until(pilot, lambda: "stale" in shown(app))
        model.set_backlog(lagging=True, dropped=1234)  # the mesh outran the observer
        await until(pilot, lambda: "⚠ lagging · 1234 dropped" in shown(app))
        model.set_backlog(lagging=False)  # caught up; the shed count stays on show
        await until(pilot, lambda: "lagging" not in shown(app) and "1234 dropped" in shown(app))


# --------------------------------------------------------------------------- keymap


async def test_keymap_remaps_bindings_by_id(tmp_path, monkeypatch):
    from cotal_tui.keymap import load_keymap

    (tmp_path / "keymap.toml").write_text('[keymap]\n"console.dms" = "x"\n"console.topo" = "y"\n')
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    keymap, warning = load_keymap()
    assert keymap == {"console.dms": "x", "console.topo": "y"} and warning is None
    app = make_app(keymap=keymap)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        scr = console(app)
        await pilot.press("d")
        assert scr.lens == "body"
        await pilot.press("x")
        assert scr.lens == "dms"
        await pilot.press("y")
        assert scr.lens == "topo"
        await pilot.press("escape", "question_mark")
        await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        body = app.screen.query_one("#help-body").line_texts()
        assert any(line.split()[:1] == ["x"] and "DM lens" in line for line in body), body


def test_keymap_files_json_and_bad(tmp_path):
    from cotal_tui.keymap import load_keymap

    (tmp_path / "keymap.json").write_text(json.dumps({"feed.follow": ["end", "f"]}))
    assert load_keymap(tmp_path) == ({"feed.follow": "end,f"}, None)
    (tmp_path / "keymap.json").write_text("{not json")
    keymap, warning = load_keymap(tmp_path)
    assert keymap == {} and "ignored" in warning


def test_every_binding_has_an_id():
    from cotal_tui.app import CotalApp
    from cotal_tui.screens.console import ConsoleScreen
    from cotal_tui.screens.needs_you import NeedsYouScreen
    from cotal_tui.screens.spaces import SpacePickerScreen
    from widgets.dm_lens import DmThread
    from widgets.feed import FeedView
    from widgets.line_list import LineList
    from widgets.roster import Roster
    from widgets.topology import TopologyLens

    ids = []
    for cls in (CotalApp, ConsoleScreen, NeedsYouScreen, SpacePickerScreen, DmThread, FeedView,
                LineList, Roster, TopologyLens):
        for b in cls.BINDINGS:
            assert b.id, (cls.__name__, b.key)
            ids.append(b.id)
    assert len(ids) == len(set(ids))


# --------------------------------------------------------------------------- space picker


async def test_space_picker_opens_returns_and_refreshes():
    calls = []
    sessions = []

    async def lister():
        calls.append(1)
        return [SpaceInfo("alpha", 3, 2, 40), SpaceInfo("demo", 7, 3, 22)]

    def opener(space):
        model, _ = build_model()
        s = StaticSession(model, space=space)
        sessions.append(s)
        return s

    from cotal_tui.app import CotalApp

    app = CotalApp(list_spaces=lister, open_space=opener)
    async with app.run_test(size=WIDE) as pilot:
        await until(pilot, lambda: "alpha" in shown(app), what="space rows")
        text = shown(app)
        assert "3 agents · 2 ch · 40 msgs" in text and "7 agents · 3 ch · 22 msgs" in text
        await pilot.press("r")
        await until(pilot, lambda: len(calls) == 2)
        await pilot.press("j", "enter")
        await until(pilot, lambda: type(app.screen).__name__ == "ConsoleScreen")
        assert sessions[-1].space == "demo" and "standup in 5" in shown(app)
        await pilot.press("b")
        await until(pilot, lambda: type(app.screen).__name__ == "SpacePickerScreen")
        await until(pilot, lambda: sessions[-1].stopped, what="session stopped")
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "ConsoleScreen")
        await pilot.press("escape")  # a plain main view: one Esc is the overview
        await until(pilot, lambda: type(app.screen).__name__ == "SpacePickerScreen")
        await pilot.press("q")
    assert app.return_value == 0


async def test_space_picker_error_is_one_line():
    async def lister():
        raise RuntimeError("broker said no")

    from cotal_tui.app import CotalApp

    app = CotalApp(list_spaces=lister, open_space=lambda s: None)
    async with app.run_test(size=WIDE) as pilot:
        await until(pilot, lambda: "could not list spaces: broker said no" in shown(app))
