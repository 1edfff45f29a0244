"""The console's control verbs on the real thing: two DemoManagers serving real ptys, the
console's own ``LiveSession`` (observer + ``ps`` poller) and Pilot keys.

``D`` opens the red overlay where Enter does nothing, ``n`` cancels, ``y`` stops gracefully and
``f`` force-kills; the palette spawns (progress until the seat shows through presence), asks
status, types input; ``delchan``/``purge`` are armed only by the exact typed name; a read-only
console lists the mutating verbs as unavailable with the reason.
"""

from __future__ import annotations

import argparse
import json

import pytest
from textual.command import CommandInput, CommandList

from attach import control
from conftest import until
from cotal_tui.app import CotalApp
from cotal_tui.cli.connection import target_from_args
from cotal_tui.cli.watch_console import session_options
from cotal_tui.session import LiveSession
from cotal_tui.screens.control import StopConfirm, TypedConfirm
from meshview.connect import ConnectTarget
from meshview.wire.names import bucket_names
from support.observer import post
from support.managers import Managers
from test_console_attach import cursor_to, roster_text

SIZE = (120, 40)


@pytest.fixture
async def managers(broker, space, tmp_path):
    ms = Managers(broker, space, tmp_path)
    yield ms
    await ms.stop()


def live(nc, broker, space: str, **flags) -> LiveSession:
    args = argparse.Namespace(server=[broker.url], space=space, backfill=20, no_dms=False, **flags)
    return LiveSession(nc, target_from_args(args), space, session_options(args))


def notice(app) -> str:
    return app.last_notice or ""


async def palette(pilot, text: str) -> None:
    """Type ``text`` into the ``:`` palette, wait until its hit for exactly that text is the
    highlighted one (the palette searches in a worker), then run it with Enter."""
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


async def test_D_overlay_enter_does_not_kill_n_cancels_y_and_f_stop(broker, nc, space, managers):
    m1 = await managers.start()
    m2 = await managers.start()
    t = ConnectTarget((broker.url,), space, timeout=3)
    w1 = await control.spawn(t, "echo", name="w1", on=m1.instance_id)
    w2 = await control.spawn(t, "bash", name="w2", on=m2.instance_id)
    assert w1.joined and w2.joined
    session = live(nc, broker, space)
    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: roster_text(app).count("managed pty") >= 2, what="managed markers")
        await cursor_to(pilot, w1.principal)
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, StopConfirm), what="the stop overlay")
        assert f"manager {m1.instance_id}" in str(app.screen.query_one("#stop-where").render())
        # a reflex Enter: the overlay stays, says so, and the seat runs on
        await pilot.press("enter")
        await until(pilot, lambda: "Enter does not stop" in str(app.screen.query_one("#stop-hint").render()),
                    what="the Enter hint")
        assert isinstance(app.screen, StopConfirm)
        assert "w1" in m1.seats and m1.seats["w1"].pty.running
        await pilot.press("n")
        await until(pilot, lambda: notice(app) == "stop w1: cancelled", what="cancel")
        assert not isinstance(app.screen, StopConfirm) and m1.seats["w1"].pty.running
        # y: graceful
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, StopConfirm), what="the overlay again")
        await pilot.press("y")
        await until(pilot, lambda: notice(app) == "stopped w1", what="stopped w1")
        assert "w1" not in m1.seats
        await until(pilot, lambda: any(p.id == w1.principal and p.status == "offline"
                                       for p in session.model.snapshot().agents), what="w1 offline")
        # f: force, on the other manager
        await cursor_to(pilot, w2.principal)
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, StopConfirm), what="the overlay for w2")
        await pilot.press("f")
        await until(pilot, lambda: notice(app) == "force-killed w2", what="force-killed w2")
        assert "w2" not in m2.seats
        # D on an agent no manager hosts: a notice, no overlay
        await until(pilot, lambda: app.managed_fold().for_peer(w1.principal) is None,
                    what="the ps fold forgot w1")
        await cursor_to(pilot, w1.principal)
        await pilot.press("D")
        await until(pilot, lambda: notice(app).startswith("stop: w1 is not a managed seat"), what="refusal")
        assert not isinstance(app.screen, StopConfirm)
    await session.stop()


async def test_palette_spawn_status_input_ps(broker, nc, space, managers):
    m = await managers.start()
    session = live(nc, broker, space)
    app = CotalApp(session=session)
    said: list[str] = []
    orig = app.notify_line

    def record(text: str, error: bool = False) -> None:
        said.append(text)
        orig(text, error)

    app.notify_line = record  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: session.started, what="the session")
        await palette(pilot, "spawn echo w3")
        await until(pilot, lambda: "spawned w3" in said, what="spawned w3")
        assert said[said.index("spawned w3") - 3:said.index("spawned w3")] == [
            "spawning echo… (the manager answers on join, exit, or its readiness deadline)",
            f"spawning echo as w3 on manager {m.instance_id}…", "w3 joined the mesh"]
        # the notice came once the seat was on this console's roster (presence)
        assert any(p.name == "w3" and p.status != "offline" for p in session.model.snapshot().agents)
        await palette(pilot, "status w3")
        await until(pilot, lambda: notice(app).startswith("w3/echo · echo-line · pty · running · mesh "),
                    what="the status row")
        await palette(pilot, "input w3 hello from the palette")
        await until(pilot, lambda: notice(app) == "typed 23 bytes into w3", what="typed")
        await until(pilot, lambda: any("echo: hello from the palette" in ln
                                       for ln in m.seats["w3"].pty.mirror.text_lines()), what="echoed")
        await palette(pilot, "ps")
        await until(pilot, lambda: notice(app) == "agents: w3", what="ps")
        await until(pilot, lambda: type(app.screen).__name__ == "PsScreen", what="the ps table")
        await pilot.press("escape")
        await palette(pilot, "spawn nope")
        await until(pilot, lambda: notice(app).startswith("spawn: manager ") and "no agent file .cotal/agents/nope.md"
                    in notice(app), what="the refusal")
    await session.stop()


async def test_delchan_needs_the_exact_name_and_purge_the_space_name(broker, nc, space, managers):
    await managers.start()
    for i in range(2):
        await post(nc, space, "ada", "doomed", f"doomed {i}")
    await post(nc, space, "bram", "general", "stays")
    await post(nc, space, "bram", "keep", "stays too")
    kv = await nc.jetstream().key_value(bucket_names(space).channels)
    await kv.put("doomed", json.dumps({"description": "to be deleted"}).encode())
    session = live(nc, broker, space)
    app = CotalApp(session=session)
    js = nc.jetstream()

    async def stored() -> dict:
        info = await js.stream_info(f"CHAT_{space}", subjects_filter=">")
        return dict(info.state.subjects or {})

    def tabs() -> set[str]:
        return {c.name for c in session.model.snapshot().channels}

    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: {"doomed", "general", "keep"} <= tabs(), what="the tabs")
        # a live message too (a channel with live arrivals must still leave) and its tab open
        await post(nc, space, "ada", "doomed", "doomed live")
        await until(pilot, lambda: any(c.name == "doomed" and c.arrivals for c in
                                       session.model.snapshot().channels), what="live arrival")
        app.screen.query_one("#tabs").select("doomed")
        await palette(pilot, "delchan #doomed")
        await until(pilot, lambda: isinstance(app.screen, TypedConfirm), what="the typed confirm")
        # a near miss (one character short), Enter: nothing happens, the overlay stays
        await pilot.press(*"doome")
        await pilot.press("enter")
        await until(pilot, lambda: app.screen.misses == 1, what="the miss counted")
        assert isinstance(app.screen, TypedConfirm)
        assert f"cotal.{space}.chat.local.ada.doomed" in await stored()
        # Esc cancels; re-open and type the exact name
        await pilot.press("escape")
        await until(pilot, lambda: "cancelled" in notice(app), what="cancel")
        assert f"cotal.{space}.chat.local.ada.doomed" in await stored()
        await palette(pilot, "delchan #doomed")
        await until(pilot, lambda: isinstance(app.screen, TypedConfirm), what="the confirm again")
        await pilot.press(*"doomed")
        await pilot.press("enter")
        await until(pilot, lambda: notice(app) == "deleted #doomed · 3 messages purged", what="deleted")
        left = await stored()
        assert not [s for s in left if s.endswith(".doomed")]
        assert left[f"cotal.{space}.chat.local.bram.general"] == 1
        assert left[f"cotal.{space}.chat.local.bram.keep"] == 1
        with pytest.raises(Exception):
            await kv.get("doomed")
        await until(pilot, lambda: "doomed" not in tabs(), what="the tab leaves")
        assert {"general", "keep"} <= tabs()
        assert app.screen.query_one("#tabs").active is None  # back on all
        # purge: the space's name, exactly
        await palette(pilot, "purge")
        await until(pilot, lambda: isinstance(app.screen, TypedConfirm), what="the purge confirm")
        await pilot.press(*space[:-1])
        await pilot.press("enter")
        await until(pilot, lambda: app.screen.misses == 1, what="near miss")
        assert len(await stored()) == 2
        for _ in range(len(space) - 1):
            await pilot.press("backspace")
        await pilot.press(*space)
        await pilot.press("enter")
        await until(pilot, lambda: notice(app) == f"purged {space} · 2 messages", what="purged")
        assert await stored() == {}
    await session.stop()


async def test_read_only_lists_mutating_verbs_as_unavailable(broker, nc, space, managers):
    m = await managers.start()
    t = ConnectTarget((broker.url,), space, timeout=3)
    w = await control.spawn(t, "echo", name="ro1")
    session = live(nc, broker, space, read_only=True)
    app = CotalApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "managed pty" in roster_text(app), what="the managed marker")
        await pilot.press("colon")
        await until(pilot, lambda: app.screen.query(CommandList), what="the palette")
        await until(pilot, lambda: app.screen.query_one(CommandList).option_count > 5, what="discovery")
        ol = app.screen.query_one(CommandList)
        shown = [str(ol.get_option_at_index(i).prompt) for i in range(ol.option_count)]
        text = "\n".join(shown)
        for verb in ("spawn", "stop", "input", "purge", "delchan"):
            assert any(s.startswith(verb) and "unavailable - read-only - started with --read-only" in s
                       for s in shown), (verb, text)
        assert any(s.startswith("status") and "unavailable" not in s for s in shown), text
        await pilot.press("escape")
        await cursor_to(pilot, w.principal)
        await pilot.press("D")
        await until(pilot, lambda: notice(app) == "stop: unavailable - read-only - started with --read-only",
                    what="the refusal")
        assert not isinstance(app.screen, StopConfirm) and m.seats["ro1"].pty.running
        await palette(pilot, "spawn echo")
        await until(pilot, lambda: notice(app).startswith("spawn: unavailable - read-only"), what="refused")
        assert set(m.seats) == {"ro1"}
    await session.stop()
