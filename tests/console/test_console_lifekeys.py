"""No traceback from any key at any moment (issue 35, item 10): keys queued behind a quit, keys
on a screen still mounting, Ctrl-C in the palette, type-ahead after a refused palette command,
and random keys in the first and the last second of the console's life.

Keys are posted the way the terminal driver posts them (``app.post_message``), several before
the App has handled the first: that is what a fast typist or a paste does, and what Pilot's
``press`` (which waits for each key) never does."""

from __future__ import annotations

import asyncio
import random

from textual import events
from textual.command import CommandPalette

from conftest import until
from support.console import make_app


def post(app, *keys: str) -> None:
    for k in keys:
        app.post_message(events.Key(k, k if len(k) == 1 else None))


async def test_q_then_n_at_80x24_exits_cleanly():
    """``q`` then ``n`` queued together: ``n`` used to push the NEEDS-YOU overlay onto a console
    being taken down (NoMatches traceback); run_test re-raises any such exception."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        post(app, "q", "n", "j", "enter")
        await until(lambda: not app.is_running, 5, "the console to exit")
    assert app.return_code == 0


async def test_keys_on_a_screen_still_mounting_wait_for_it():
    """``n`` at 80×24 pushes the NEEDS-YOU overlay; ``escape`` right behind it reached the
    overlay before its rail existed. Now it waits and closes the overlay."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        console = app.screen
        post(app, "n", "escape")
        await until(pilot, lambda: app.screen is console, 5, "the overlay opened and closed")
        assert app.is_running


async def test_ctrl_c_in_the_palette_closes_the_palette_not_the_console():
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        console = app.screen
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), 5, "palette open")
        await pilot.press("ctrl+c")
        await until(pilot, lambda: app.screen is console, 5, "palette closed")
        assert app.is_running and app.return_code is None
        await pilot.press("ctrl+c")  # outside the palette Ctrl-C still quits
        await until(lambda: not app.is_running, 5, "quit")
    assert app.return_code == 0


async def test_type_ahead_after_a_refused_palette_command_is_dropped():
    """``:attach zed⏎d`` typed in one go: the command is refused, and the ``d`` typed ahead
    must not run as the DM-lens hotkey."""
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        console = app.screen
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), 5, "palette open")
        await pilot.press(*"attach zed")
        await pilot.pause(0.3)  # the palette's search has listed its hit
        post(app, "enter")
        # the refusal lands; the keys typed ahead arrive a moment later, before anyone read it
        await until(lambda: app.last_notice and "zed" in app.last_notice, 5, "refusal")
        post(app, "d", "t")
        await until(pilot, lambda: app.screen is console, 5, "palette closed")
        await pilot.pause(0.1)
        assert console.lens == "body", "type-ahead ran as hotkeys"
        await pilot.pause(0.5)  # past the type-ahead window keys work again
        await pilot.press("d")
        await until(pilot, lambda: console.lens == "dms", 5, "d opens the DM lens")


KEYS = list("qnNcrdtTRb?/:hljkapDm123[]gG x") + [
    "escape", "enter", "tab", "ctrl+c", "ctrl+p", "up", "down", "backspace"]


async def _keys(app, rng: random.Random, seconds: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        k = rng.choice(KEYS)
        if k in ("q", "ctrl+c") and rng.random() < 0.8:
            k = "x"  # quit now and then, not at once
        post(app, k)
        await asyncio.sleep(0 if rng.random() < 0.4 else rng.random() * 0.03)


async def test_random_keys_in_the_first_and_last_second_never_raise():
    """Keys from the first instant (the console still mounting) and through the exit (by ``q``,
    Ctrl-C or ``exit()``) for a second more; any exception in the App fails run_test."""
    for seed in range(10):
        rng = random.Random(seed)
        app = make_app()
        size = rng.choice([(80, 24), (120, 40), (60, 20)])
        async with app.run_test(size=size):
            keys = asyncio.ensure_future(_keys(app, rng, 1.0))
            await asyncio.sleep(rng.random())
            how = rng.choice(["q", "ctrl+c", "exit"])
            if how == "exit":
                app.exit(0)
            else:
                post(app, how)
            await asyncio.sleep(0.2)
            app.exit(0)
            await keys
        assert app.return_code == 0, (seed, size, how)


def test_the_palette_key_after_a_refusal_is_taken_and_ends_the_drop():
    """After a refused palette command, type-ahead is dropped but ``:`` opens the palette again
    (the refusal's own advice is to try again) and what follows it is typed into the palette."""
    from cotal_tui.keygate import KeyGate, Verdict

    gate = KeyGate()
    ready = dict(screen_ready=True, palette_on_top=True, errors=0, now=10.0)
    assert gate.admit("enter", None, **ready) is Verdict.TAKE
    gate.palette_settled(1, now=10.01)
    after = dict(screen_ready=True, palette_on_top=False, errors=1)
    assert gate.admit("j", "j", **after, now=10.05) is Verdict.DROP
    assert gate.admit("colon", ":", **after, opens_palette=True, now=10.1) is Verdict.TAKE
    assert gate.admit("a", "a", screen_ready=True, palette_on_top=True, errors=1,
                      now=10.15) is Verdict.TAKE
