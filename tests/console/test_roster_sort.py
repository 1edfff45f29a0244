"""The roster's order: ``s`` cycles status / name / role / last activity,
the choice persists in ``$COTAL_HOME/config.toml`` (``[roster] sort``), and the cursor stays on
its agent - in view - when the rows re-sort under it."""

from __future__ import annotations

from support.console import (
    StaticSession, build_model, console, make_app, on_roster, pid, rec, roster_names,
)

from conftest import until
from cotal_tui.config import load_config, save_roster_sort
from meshview.model.roster import ROSTER_SORTS, last_active, sort_peers
from meshview.model.snapshot import PresenceRecord

WIDE = (120, 40)


def test_sort_peers_orders_agents_then_endpoints():
    model, _ = build_model()
    peers = model.snapshot().peers
    assert ROSTER_SORTS == ("status", "name", "role", "activity")
    by_status = sort_peers(peers, "status")
    assert [p.id for p in by_status] == list(model.snapshot().order)
    assert [p.name for p in sort_peers(peers, "name")] == [
        "ada", "bram", "cleo", "dax", "eve", "finn", "gus", "opsdesk"]
    assert [p.role for p in sort_peers(peers, "role")][:7] == [
        "backend", "frontend", "ops", "planner", "qa", "reviewer", "reviewer"]
    act = sort_peers(peers, "activity")
    assert act[-1].name == "opsdesk" and act[0].name == "dax"  # dax went waiting last
    stamps = [last_active(p) for p in act[:-1]]
    assert stamps == sorted(stamps, reverse=True)


def test_config_roundtrip_keeps_other_tables(tmp_path):
    (tmp_path / "config.toml").write_text('# mine\n[notify]\nenabled = true\n')
    assert load_config(tmp_path).roster_sort == "status"
    save_roster_sort("role", tmp_path)
    save_roster_sort("name", tmp_path)
    text = (tmp_path / "config.toml").read_text()
    assert text.count("[roster]") == 1 and 'sort = "name"' in text and "enabled = true" in text
    assert text.startswith("# mine\n")
    assert load_config(tmp_path).roster_sort == "name"
    (tmp_path / "config.toml").write_text('[roster]\nsort = "shoe size"\n')
    cfg = load_config(tmp_path)
    assert cfg.roster_sort == "status" and "sort must be one of" in (cfg.warning or "")


async def test_s_cycles_the_sort_keeps_the_cursor_and_persists(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = make_app()
    async with on_roster(app) as (pilot, scr, roster):
        await pilot.press("h")
        assert roster_names(roster)[:2] == ["ada", "eve"]  # working first
        await pilot.press("j")
        assert roster.cursor_key == pid("eve")
        await pilot.press("s")
        await until(pilot, lambda: roster.sort_by == "name", what="sorted by name")
        assert roster_names(roster) == ["ada", "bram", "cleo", "dax", "eve", "finn", "gus", "opsdesk"]
        assert roster.cursor_key == pid("eve") and roster.cursor_index == 4
        assert "by name" in roster.border_title
        assert 'sort = "name"' in (tmp_path / "config.toml").read_text()
        await pilot.press("s")
        await until(pilot, lambda: roster.sort_by == "role")
        assert roster_names(roster)[0] == "bram"
        await pilot.press("s", "s")
        await until(pilot, lambda: roster.sort_by == "status")
        await pilot.press("s")
        await until(pilot, lambda: roster.sort_by == "name")
        # a status change no longer reshuffles the rows
        model = scr.session.model
        model.apply_presence(rec("gus", "working", model.clock()))
        await until(pilot, lambda: roster.snap.signals.counts[0][1] == 3, what="gus working")
        assert roster_names(roster)[6] == "gus" and roster.cursor_key == pid("eve")
    # the next console starts with the saved order
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        roster = console(app).query_one("#roster")
        assert roster.sort_by == "name" and roster_names(roster)[:2] == ["ada", "bram"]


async def test_the_cursor_follows_its_agent_when_a_resort_moves_it_out_of_view():
    model, clk = build_model()
    for i in range(30):
        model.apply_presence(PresenceRecord(id=f"local.zz{i:02}", name=f"zz{i:02}", kind="agent",
                                            status="idle", ts=clk.t, role="extra"))
    from cotal_tui.app import CotalApp

    app = CotalApp(session=StaticSession(model))
    async with on_roster(app) as (pilot, scr, roster):
        await pilot.press("h")
        assert roster.cursor_key == pid("ada") and roster.scroll_offset.y == 0
        p = model.peer(pid("ada"))
        model.apply_presence(rec("ada", "idle", clk.t, activity=p.activity))  # working -> idle
        model.apply_presence(PresenceRecord(id=pid("ada"), name="ada", kind="agent",
                                            status="offline", ts=clk.t, role="planner"))
        await until(pilot, lambda: roster.cursor_index > 20, what="ada re-sorted down")
        assert roster.cursor_key == pid("ada")
        start = roster.item_starts[roster.cursor_index]
        top = roster.scroll_offset.y
        height = roster.scrollable_content_region.height
        assert top <= start < top + height, (top, start, height)
        await pilot.press("j")  # the walk goes on from where the agent is now
        assert roster.cursor_index > 20
