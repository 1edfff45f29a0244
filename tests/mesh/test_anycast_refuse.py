"""An anycast to a role that no live agent holds is refused as a DM to an unknown agent is,
unless the operator says it is queued for a future holder: ``cotal send``
(a subprocess) and the console's palette, against the real broker."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys

from conftest import until
from cotal_tui.cli.connection import target_from_args
from support.observer import Heartbeat

COTAL = [sys.executable, "-m", "cotal_tui.cli"]


async def _send(broker, space, *argv: str) -> subprocess.CompletedProcess:
    cmd = COTAL + ["send", "--server", broker.url, "--space", space, "--connect-timeout", "2",
                   *argv]
    return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, timeout=60)


async def _tasks(nc, space) -> int:
    return (await nc.jetstream().stream_info(f"TASK_{space}")).state.messages


async def test_cotal_send_ask_to_a_role_nobody_holds(broker, nc, space):
    hb = Heartbeat(nc, space)
    hb.add("rex", role="reviewer")
    hb.add("olive", role="nosuchrole", status="offline")  # an offline holder does not count
    async with hb:
        r = await _send(broker, space, "--ask", "nosuchrole", "hi")
        err = r.stderr.decode()
        assert r.returncode == 1 and not r.stdout, err
        assert err.count("\n") == 1 and "no live agent holds the role 'nosuchrole'" in err
        assert "TASK stream" in err and "--queue" in err
        assert await _tasks(nc, space) == 0

        r = await _send(broker, space, "--queue", "--ask", "nosuchrole", "hi")
        out = r.stdout.decode()
        assert r.returncode == 0, r.stderr
        assert out.startswith("queued ") and "role nosuchrole" in out and "TASK stream" in out
        assert await _tasks(nc, space) == 1

        r = await _send(broker, space, "--ask", "reviewer", "look")
        out = r.stdout.decode()
        assert r.returncode == 0, r.stderr
        assert out.startswith("sent ") and "role reviewer" in out and "TASK stream" in out
        assert await _tasks(nc, space) == 2
    r = await _send(broker, space, "--queue", "#general", "x")
    assert r.returncode == 2  # --queue goes with --ask


async def test_the_console_refuses_an_ask_nobody_holds_unless_queued(broker, nc, space):
    from textual.command import CommandInput

    from cotal_tui.app import CotalApp
    from cotal_tui.cli.watch_console import session_options
    from cotal_tui.session import LiveSession

    hb = Heartbeat(nc, space)
    hb.add("rex", role="reviewer")
    await hb.beat()
    hb.start()
    args = argparse.Namespace(server=[broker.url], space=space, backfill=50, no_dms=False,
                              read_only=False, as_name="asker")
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)

    async def palette(pilot, text: str) -> None:
        await pilot.press("colon")
        await until(pilot, lambda: pilot.app.screen.query(CommandInput), what="the palette")
        await pilot.press(*text)
        await until(pilot, lambda: pilot.app.screen.query_one(CommandInput).value == text)
        await pilot.pause(0.3)  # the palette searches in a worker
        await pilot.press("enter")

    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: session.started and session.model.snapshot().agents,
                        what="the roster")
            await palette(pilot, "ask @nosuchrole anyone?")
            await until(pilot, lambda: "no live agent holds the role" in (app.last_notice or ""),
                        what=f"the refusal ({app.last_notice})")
            assert not session.operator.on_roster and await _tasks(nc, space) == 0
            await palette(pilot, "ask --queue @nosuchrole anyone?")
            await until(pilot, lambda: (app.last_notice or "").startswith("queued for @nosuchrole"),
                        what=f"the queued receipt ({app.last_notice})")
            assert await _tasks(nc, space) == 1
        await session.stop()
    finally:
        await hb.stop()


def test_chat_ask_can_be_queued_for_a_future_holder():
    from cotal_tui.cli.chat import parse
    from meshview.act.send import Send

    assert parse("/ask --queue @nosuchrole anyone?", "general") == Send(
        "ask", "nosuchrole", "anyone?", queue=True)
    assert parse("/ask @reviewer look", "general").queue is False
