"""The NEEDS-YOU rail keeps the roster's cadence for its ages: every snapshot builds its cards
anew (at 10k agents ~500 of them, every second), yet a card that differs only in the ages it
reads is measured again only when shown, or on every AGES_REMEASURE_EVERY-th second; a card
whose text changed (a lying peer's huge condition message) is measured, and the rail always
ends equal to a full build."""

from __future__ import annotations

from conftest import until

from meshview.model.snapshot import Condition, PresenceRecord
from widgets.lazy_list import AGES_REMEASURE_EVERY

WAITING = 150


def waiting(i: int, t: float, message: str = "needs a review of the plan") -> PresenceRecord:
    return PresenceRecord(id=f"local.w{i:03d}", name=f"w{i:03d}", status="waiting", ts=t,
                          role="dev", status_since=t - 60_000,
                          condition=Condition(code="needs-review", message=message,
                                              since=t - 30_000))


async def test_the_rails_ages_measure_only_the_shown_cards_but_every_nth_second():
    from support.console import make_app

    from widgets.needs_you import NeedsYouRail

    app = make_app()
    m = app.session.model
    clk = m.clock
    for i in range(WAITING):
        m.apply_presence(waiting(i, clk.t))
    m.tick()
    async with app.run_test(size=(160, 48)) as pilot:
        rail = app.screen.query_one(NeedsYouRail)

        async def second(heartbeat: bool = True) -> None:
            """One second on, every waiting agent heartbeating (new cards, same text)."""
            clk.advance(1000)
            if heartbeat:
                for i in range(WAITING):
                    m.refresh_clocks(f"local.w{i:03d}", clk.t, None, clk.t - 60_000, None)
            m.tick()
            v = m.version
            await until(pilot, lambda: app.screen.snap is not None
                        and app.screen.snap.version == v, what="the snapshot drained")
            await pilot.pause()

        await until(pilot, lambda: len(rail.items) >= WAITING, what="the cards")
        await until(pilot, lambda: not rail.owed_measures, what="the first measures")
        measured: list[str] = []
        real = rail.measure
        rail.measure = lambda d, w: (measured.append(getattr(d, "id", "run")), real(d, w))[1]  # type: ignore[method-assign]

        # seconds that move only the ages: the shown cards are measured, the rest hold
        shown = rail.size.height  # at most one card per row on screen
        counts = []
        for _ in range(AGES_REMEASURE_EVERY - 1):
            measured.clear()
            await second()
            counts.append(len(measured))
            assert not rail.owed_measures
        assert max(counts) <= shown < WAITING, counts

        # the Nth second owes every card a measure, paid in slices
        measured.clear()
        await second()
        await until(pilot, lambda: not rail.owed_measures, what="the Nth second's measures")
        assert len(set(measured)) >= WAITING, len(set(measured))

        # a lying peer's card far below the screen grows (a huge message): it is measured,
        # and its height is the one a full build gives
        far = f"local.w{WAITING - 1:03d}"
        m.apply_presence(waiting(WAITING - 1, clk.t, message="x " * 5000))
        measured.clear()
        await second(heartbeat=False)
        await until(pilot, lambda: not rail.owed_measures, what="the changed card measured")
        assert far in measured
        built = rail.build(rail.content_width)
        assert [k for k, _ in rail.items] == [k for k, _ in built]
        assert rail.item_heights == [len(ls) for _, ls in built]
        assert rail.line_texts() == [t.plain for _, ls in built for t in ls]
