"""``:ps`` shows the seats as the ``cotal ps`` table, on a real manager."""

from __future__ import annotations

from conftest import until
from cotal_tui.app import CotalApp
from cotal_tui.screens.control import PsScreen
from test_control_console import live, managers, palette  # noqa: F401  (fixture)


async def test_ps_is_a_table_with_the_cotal_ps_columns(broker, nc, space, managers):  # noqa: F811
    from attach.control import verbs as control
    from meshview.link.connect import ConnectTarget

    m = await managers.start()
    r = await control.spawn(ConnectTarget((broker.url,), space, timeout=3), "echo", name="w9",
                            on=m.instance_id)
    assert r.joined
    session = live(nc, broker, space)
    app = CotalApp(session=session)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: session.started, what="the session")
        await palette(pilot, "ps")
        await until(pilot, lambda: isinstance(app.screen, PsScreen), what="the ps table")
        lines = app.screen.table()
        assert lines[0].split() == ["NAME", "KIND", "PROCESS", "MESH", "MANAGER"]
        row = next(ln for ln in lines if ln.startswith("w9 "))
        assert row.split()[1:3] == ["echo-line", "running"] and m.instance_id in row
        assert "1 seat · 1 manager" in app.screen.query_one("#ps-body").border_title
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, PsScreen), what="closed")
    await session.stop()
