"""The console's plane-health segment is opt-in (issue 39 item 3): the probe publishes a request,
and a console is otherwise invisible on the mesh until its operator acts. Real broker: a tap on
``cotal.<space>.live.>`` sees the opted-in console's probes and the segment names what is not
bound; without the opt-in the tap sees nothing from the console (only the test's own control
probe, which proves the tap was listening)."""

from __future__ import annotations

import argparse

import nats

from attach.control.health import probe_plane
from conftest import until
from cotal_tui.app import CotalApp
from cotal_tui.cli.connection import target_from_args
from cotal_tui.cli.watch_console import session_options
from cotal_tui.demo.liveness import DeliveryStandIn
from cotal_tui.session import LiveSession
from support.console import screen_text


def status_row(app) -> str:
    return screen_text(app).splitlines()[-1]


async def tap(broker, space):
    seen: list[str] = []
    c = await nats.connect(broker.url)

    async def got(msg):
        seen.append(msg.subject)
    await c.subscribe(f"cotal.{space}.live.>", cb=got)
    await c.flush()
    return c, seen


async def test_opted_in_the_console_probes_and_names_what_is_not_bound(broker, nc, space, tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path / "home"))
    tapc, seen = await tap(broker, space)
    args = argparse.Namespace(server=[broker.url], space=space, backfill=0, no_dms=True, health=True)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    assert session.health is not None
    app = CotalApp(session=session)
    dc = await nats.connect(broker.url)
    delivery = DeliveryStandIn(dc, space)
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: any(".live.delivery." in s for s in seen), 15, "the console's probe")
            # the tap holds interest and never answers, as a wedged daemon would: unknown, not unbound
            await until(pilot, lambda: "✗ manager unknown, delivery unknown" in status_row(app), 15,
                        lambda: status_row(app))
            await delivery.set_answering(True)
            session.health.poke()
            await until(pilot, lambda: "✗ manager unknown" in status_row(app)
                        and "delivery" not in status_row(app), 15, lambda: status_row(app))
            assert [v.state for v in session.health.verdicts if v.component == "delivery-plane"] == ["bound"]
            await pilot.press("q")
    finally:
        await session.stop()
        await delivery.stop()
        await dc.close()
        await tapc.close()


async def test_without_the_opt_in_the_console_sends_no_probe(broker, nc, space, tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path / "home"))
    tapc, seen = await tap(broker, space)
    args = argparse.Namespace(server=[broker.url], space=space, backfill=0, no_dms=True)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    assert session.health is None
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            # the console has settled: its ps poller finished a round (an opted-in console has
            # probed by then: its first round starts with the session)
            await until(pilot, lambda: session.managed is not None and session.managed.fold.rounds, 20,
                        "a ps round")
            other = await nats.connect(broker.url)
            try:
                control = await probe_plane(other, space, "manager", timeout_ms=500)
            finally:
                await other.close()
            assert control.outcome == "timeout"  # the tap holds interest and never answers
            await until(pilot, lambda: len(seen) >= 1, 10, "the control probe on the tap")
            assert len(seen) == 1 and ".live.manager." in seen[0], seen  # the control's, nothing else
            assert "healthy" not in status_row(app) and "unbound" not in status_row(app)
            await pilot.press("q")
    finally:
        await session.stop()
        await tapc.close()


def test_the_opt_in_is_the_flag_or_ui_health_validated_and_listed(tmp_path):
    from cotal_tui.config import config_problems, read_config, settings, ui_health

    home = tmp_path / "home"
    home.mkdir()
    assert ui_health(argparse.Namespace(), home) == (False, "default")
    assert ui_health(argparse.Namespace(health=True), home) == (True, "flag")
    (home / "config.toml").write_text("[ui]\nhealth = true\n")
    assert ui_health(argparse.Namespace(), home) == (True, "config.toml")
    (home / "config.toml").write_text('[ui]\nhealth = "yes"\n')
    assert ui_health(argparse.Namespace(), home) == (False, "default")  # a bad value is not used...
    assert any("[ui] health must be true or false" in p for p in config_problems(read_config(home)))  # ...and named
    rows = {s.key: s for s in settings(argparse.Namespace(health=True), home)}
    assert (rows["ui.health"].value, rows["ui.health"].source, rows["ui.health"].origin) == (True, "flag", "--health")
