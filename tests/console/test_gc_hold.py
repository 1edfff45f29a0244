"""No garbage collection under the operator's keys (``cotal_tui/gcpace.py``): held from a key,
released once keys pause or after MAX_HOLD_S of them, never when someone else disabled it,
and wired into the console's keys."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from conftest import until
from cotal_tui.gcpace import COOL_S, MAX_HOLD_S, QUIET_S, GcHold


@pytest.fixture
def collector() -> Iterator[None]:
    """The process's collector as it was, whatever a test left."""
    was = gc.isenabled()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def test_a_key_holds_the_collector_until_keys_pause(collector: None) -> None:
    hold = GcHold()
    assert not hold.key(10.0) and gc.isenabled()  # off until the console's CLI turns it on
    hold.active = True
    assert hold.key(10.0) and hold.held and not gc.isenabled()
    assert not hold.key(10.1)  # one hold at a time
    assert not hold.tick(10.2, key_at=10.1) and not gc.isenabled()  # keys still coming
    assert hold.tick(10.1 + QUIET_S, key_at=10.1) and gc.isenabled() and not hold.held
    assert not hold.key(10.1 + QUIET_S + COOL_S / 2) and gc.isenabled()  # it owes a collection
    assert hold.key(10.1 + QUIET_S + COOL_S) and not gc.isenabled()


def test_unbroken_keys_release_the_collector_after_max_hold(collector: None) -> None:
    hold = GcHold()
    hold.active = True
    hold.key(0.0)
    t = 0.0
    while t < MAX_HOLD_S - 0.2:  # a key every 100 ms
        t += 0.1
        assert not hold.tick(t, key_at=t) and not gc.isenabled()
    assert hold.tick(MAX_HOLD_S, key_at=MAX_HOLD_S) and gc.isenabled()
    assert not hold.key(MAX_HOLD_S + 0.1) and gc.isenabled()  # the collection runs first


def test_a_collector_disabled_by_someone_else_is_left_alone(collector: None) -> None:
    hold = GcHold()
    hold.active = True
    gc.disable()
    assert not hold.key(1.0) and not hold.held
    assert not hold.tick(1.0 + QUIET_S, key_at=1.0) and not gc.isenabled()  # not enabled here


async def test_the_consoles_keys_hold_the_collector_and_a_pause_or_quitting_releases_it(
        collector: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from support.console import make_app

    import cotal_tui.app as app_module

    def fresh() -> GcHold:  # the process's hold, as tune_gc leaves it for `cotal watch`
        hold = GcHold()
        hold.active = True
        monkeypatch.setattr(app_module, "GC_HOLD", hold)
        return hold

    hold = fresh()
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert gc.isenabled()
        await pilot.press("j")
        assert hold.held and not gc.isenabled()
        await until(pilot, gc.isenabled, 5.0, "the collector back after the keys paused")
        assert not hold.held
    hold = fresh()
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:  # quit while the keys hold it
        await pilot.pause()
        await pilot.press("j")
        assert hold.held and not gc.isenabled()
    assert gc.isenabled() and not hold.held
