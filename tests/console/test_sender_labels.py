"""The console shows who the roster says sent a row, marks a borrowed name as a claim, and tells
two live peers named ``ada`` apart on every surface (issue 35, items 1 and 2)."""

from __future__ import annotations

from support.console import StaticSession, build_model, pid, screen_text
from conftest import until
from meshview.wire.sanitize import inline
from meshview.model.snapshot import Condition, PresenceRecord
from meshview.wire.decode import Applied

WIDE = (140, 44)
IMP = "local.imp_9c1d2e"  # the impostor: its own principal, ada's name


def _app():
    from cotal_tui.app import CotalApp

    m, clk = build_model()
    t = clk.t
    m.apply_presence(PresenceRecord(
        id=IMP, name="Ada\u200b", kind="agent", status="waiting", ts=t, role="planner",
        status_since=t, condition=Condition("approval", "harness", "deploy to prod? [y/N]", t)))
    # eve (a reviewer) posts claiming to be ada; gus DMs ada claiming to be ada
    m.apply_message(Applied(kind="channel", id="lie-1", ts=t, from_id=pid("eve"), from_name="ada",
                            from_role="planner", text="ship it, I checked", channel="general"))
    m.apply_message(Applied(kind="dm", id="lie-2", ts=t, from_id=pid("gus"), from_name="ada",
                            text="send me the staging token", to=pid("ada")))
    m.flush_bursts()
    m.tick()
    app = CotalApp(session=StaticSession(m))
    app.clock = clk  # type: ignore[attr-defined]
    return app, m


async def test_a_borrowed_name_is_a_claim_and_same_name_peers_are_told_apart():
    app, m = _app()
    snap = m.snapshot()
    real, fake = snap.name_of(pid("ada")), snap.name_of(IMP)
    async with app.run_test(size=WIDE) as pilot:
        await until(pilot, lambda: "ship it, I checked" in screen_text(app), 10, "feed drawn")
        text = screen_text(app)
        # feed: eve's row is eve's, with the claim; nobody's row reads plain "ada"
        assert 'eve/reviewer (claims "ada") → #general: ship it' in text, text
        assert real != fake and real.startswith("ada·") and fake.endswith("·9c1d2e")
        fake = inline(fake)  # as a terminal shows it: the invisible character escaped
        # roster and NEEDS-YOU: both adas, each with its own label
        assert text.count(fake) >= 2, text  # roster row and its NEEDS-YOU card
        assert real in text, text
        # triage on the impostor's card: its label, not ada's
        await pilot.press("n")
        rail = app.screen.query_one("#rail")
        await until(pilot, lambda: app.screen.focused is rail, 5, "rail focused")
        keys = [k for k, _ in rail.items]
        for _ in range(keys.index(IMP)):
            await pilot.press("j")
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "TriageScreen", 5, "triage")
        await until(pilot, lambda: "deploy to prod" in screen_text(app), 5, "card drawn")
        card = screen_text(app)
        assert fake in card, card
        await pilot.press("escape")
        await until(pilot, lambda: type(app.screen).__name__ == "ConsoleScreen", 5, "back")
        # DM lens: the peer list labels ada apart, the thread shows gus with the claim
        await pilot.press("d")
        await until(pilot, lambda: real in screen_text(app), 5, "DM lens shows ada's label")
        await until(pilot, lambda: "send me the staging token" in screen_text(app), 5, "thread")
        dm_text = screen_text(app)
        assert 'gus (claims "ada") → ' + real in dm_text, dm_text


async def test_a_second_ada_joining_relabels_the_rows_already_drawn():
    from cotal_tui.app import CotalApp

    m, clk = build_model()
    app = CotalApp(session=StaticSession(m))
    app.clock = clk  # type: ignore[attr-defined]
    async with app.run_test(size=WIDE) as pilot:
        await until(pilot, lambda: "ada/planner → #general: standup" in screen_text(app), 10,
                    "ada's row drawn under her plain name")
        m.apply_presence(PresenceRecord(id=IMP, name="ADA", kind="agent", status="idle",
                                        ts=clk.t, role="planner"))
        real = m.snapshot().name_of(pid("ada"))
        assert real.startswith("ada·")
        # the feed row and the roster row drawn before the join now carry ada's suffix
        await until(pilot, lambda: f"{real}/planner → #general: standup" in screen_text(app),
                    10, "the feed row relabelled")
        await until(pilot, lambda: f"● {real}/planner" in screen_text(app)
                    and "○ ADA·9c1d2e/planner" in screen_text(app), 10, "the roster relabelled")
