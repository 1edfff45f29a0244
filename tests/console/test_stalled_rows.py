"""The stalled verdict and the viewers on the roster row and the agent card (widgets/roster.py
``set_stalled``, widgets/detail_card.py ``agent_card(stalled=, viewers=)``); nothing changes for
an agent without a verdict."""

from __future__ import annotations

from support.console import make_app, pid

from meshview.model.stalled import Stalled
from widgets.detail_card import agent_card

WIDE = (120, 40)
V = Stalled(14 * 60_000.0, ("output", "presence", "messages", "activeAt"), unanswered=2)


async def test_the_row_and_the_card_say_stalled_and_who_else_is_here():
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        roster = app.screen.query_one("#roster")
        snap = roster.snap
        ada = next(p for p in snap.agents if p.id == pid("ada"))
        assert ada.status == "working"
        before = [t.plain for t in roster.lines_of(ada, 60)]
        assert not any("stalled?" in x for x in before)
        roster.set_stalled({ada.id: V})
        after = [t.plain for t in roster.lines_of(ada, 80)]
        assert "   working · stalled? 14m (no output, no messages, 2 unanswered)" in after
        assert roster.measure(ada, 80) == len(after)
        roster.set_stalled({})
        assert [t.plain for t in roster.lines_of(ada, 60)] == before

        card = [t.plain for _, lines in agent_card(ada, snap, 100, stalled=V,
                                                    viewers="2 viewers: you, alice (read-only)")
                for t in lines]
        assert any(x.strip() == "stalled  working · stalled? 14m (no output, no messages, 2 unanswered)"
                   for x in card)
        assert any(x.strip() == "viewers  2 viewers: you, alice (read-only)" for x in card)
        plain = [t.plain for _, lines in agent_card(ada, snap, 100) for t in lines]
        assert not any("stalled" in x or "viewers" in x for x in plain)


async def test_the_console_flags_a_working_agent_that_went_quiet():
    """The model's once-a-second check (tick) finds the stall; the console's roster follows."""
    from conftest import until

    app = make_app()
    model, clk = app.session.model, app.clock
    model.stall_ms = 60_000.0
    async with app.run_test(size=WIDE) as pilot:
        roster = app.screen.query_one("#roster")
        await until(pilot, lambda: roster.snap is not None, 5.0, "the roster")
        ada = next(p for p in roster.snap.agents if p.id == pid("ada"))

        def row() -> str:
            return "\n".join(t.plain for t in roster.lines_of(ada, 80))

        assert "stalled?" not in row()
        clk.t += 30 * 60_000  # half an hour with nothing from anyone
        model.tick(clk.t)
        assert pid("ada") in model.stalled_ids
        await until(pilot, lambda: "stalled? 30m" in row(), 5.0, "the stalled line")


async def test_an_open_seat_session_feeds_its_output_to_the_verdict():
    """The console's tick turns the seat sessions' output into the model's facts: a working
    agent whose open terminal keeps printing is not stalled; once the output stops it is, with
    ``output`` among the signals."""
    import time
    from types import SimpleNamespace


    from attach.control.managed import ManagedFold

    app = make_app()
    model, clk = app.session.model, app.clock
    model.stall_ms = 60_000.0
    fold = ManagedFold()
    fold.apply({"i" * 26}, {"i" * 26: [{"name": "ada", "id": pid("ada").split(".", 1)[1],
                                         "mode": "pty", "process": "running"}]})
    seats = SimpleNamespace(open_on={"ada": 1}, output_seen={"ada": time.monotonic()})
    app.session.seat_sessions = seats
    app.session.managed = SimpleNamespace(fold=fold)
    async with app.run_test(size=WIDE) as pilot:
        screen = app.screen
        clk.t += 30 * 60_000
        seats.output_seen["ada"] = time.monotonic()  # it printed just now
        screen._seat_facts()
        model.tick(clk.t)
        assert pid("ada") not in model.stalled_ids  # output moved: busy, not stalled
        clk.t += 2 * 60_000  # then two quiet minutes (nothing new from the pane)
        screen._seat_facts()
        model.tick(clk.t)
        v = model.stalled(pid("ada")).get(pid("ada"))
        assert v is not None and "output" in v.signals
        await pilot.pause()
