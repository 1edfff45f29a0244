"""The console's managers view (``:managers``, and ``d`` in ``:ps``): each manager's own status,
and deregistration offered on a ``gone`` slot only, armed by typing the instance id's first 8
characters (or the whole id, or ``yes``); a near miss removes nothing."""

from __future__ import annotations

import argparse

import nats
import pytest
from textual.command import CommandInput, CommandList

from conftest import until
from cotal_tui.app import CotalApp
from cotal_tui.cli.connection import target_from_args
from cotal_tui.cli.watch_console import session_options
from cotal_tui.demo.manager import DemoManager
from cotal_tui.screens.control import PsScreen, TypedConfirm
from cotal_tui.session import LiveSession
from meshview.wire.names import bucket_names
from support import manager_proc

SIZE = (120, 40)


@pytest.fixture
async def demo(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    m = DemoManager(c, space, [], root=str(tmp_path / "live"))
    await m.start()
    yield m
    await m.stop()
    await c.close()


def live(nc, broker, space: str) -> LiveSession:
    # no_dms: the chat tap only. On an open mesh the default tap is the whole space, and a
    # subscription on cotal.<space>.> is interest on every instance rail too, so the broker never
    # answers "no responders" for a dead manager while this console watches (its probe says
    # unknown); the chat-only tap leaves the rails to the manager that holds them.
    args = argparse.Namespace(server=[broker.url], space=space, backfill=20, no_dms=True)
    return LiveSession(nc, target_from_args(args), space, session_options(args))


def notice(app) -> str:
    return app.last_notice or ""


async def palette(pilot, text: str) -> None:
    """Type ``text`` into the ``:`` palette and run its highlighted hit (as test_control_console)."""
    await pilot.press("colon")
    await until(pilot, lambda: pilot.app.screen.query(CommandInput), what="the palette")
    await pilot.press(*text)

    def ready() -> bool:
        lists = pilot.app.screen.query(CommandList)
        if not lists or lists.first().option_count == 0 or lists.first().highlighted is None:
            return False
        ol = lists.first()
        return str(ol.get_option_at_index(ol.highlighted).prompt).startswith(text)

    await until(pilot, ready, what=f"the palette hit for {text!r}")
    await pilot.press("enter")


async def registered(nc, space: str, iid: str) -> bool:
    kv = await nc.jetstream().key_value(bucket_names(space).records)
    try:
        return bool((await kv.get(f"svc.manager.{iid}.spec")).value)
    except Exception:  # noqa: BLE001 - deleted
        return False


async def test_managers_view_and_deregister_a_gone_slot(broker, nc, space, demo, tmp_path):
    m = demo
    proc, far = await manager_proc.start(broker.url, space, str(tmp_path / "far"), "far")
    proc.kill()  # a crashed host: its registration stays
    await proc.wait()
    session = live(nc, broker, space)
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: session.started, what="the session")
            await palette(pilot, "managers")
            await until(pilot, lambda: isinstance(app.screen, PsScreen), what="the managers view", timeout=20)
            screen = app.screen
            assert isinstance(screen, PsScreen)
            lines = "\n".join(screen.table())
            assert lines.startswith(f"manager {m.instance_id} · ") and "static reconciliation:" in lines
            assert f"manager {far}: registration is stale" in lines
            assert screen.gone == [far]
            await pilot.press("d")
            await until(pilot, lambda: isinstance(app.screen, TypedConfirm), what="the typed confirmation")
            confirm = app.screen
            assert isinstance(confirm, TypedConfirm) and confirm.expect == far[:8]
            await pilot.press(*"nope", "enter")  # a near miss: nothing happens
            assert confirm.misses == 1 and isinstance(app.screen, TypedConfirm)
            assert await registered(nc, space, far)
            confirm.query_one("#confirm-input").value = ""
            await pilot.press(*far[:8], "enter")
            await until(pilot, lambda: notice(app).startswith(f"deregistered manager {far}"),
                        what="the deregistration", timeout=20)
            assert not await registered(nc, space, far)
            assert await registered(nc, space, m.instance_id)
            await pilot.press("escape")
            # a live manager is never offered: the view of the live one has nothing to deregister
            await palette(pilot, "managers")
            await until(pilot, lambda: isinstance(app.screen, PsScreen) and app.screen is not screen,
                        what="the managers view again", timeout=20)
            assert app.screen.gone == []
            await pilot.press("d")
            await until(pilot, lambda: notice(app).startswith("deregister: no manager here is gone"),
                        what="nothing to deregister")
    finally:
        await session.stop()
        await manager_proc.finish(proc)
