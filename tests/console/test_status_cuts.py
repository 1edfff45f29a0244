"""Cut counts on the status bar (issue 35): a peer that sends fields past the wire's byte
bounds shows as ``⚠ cut N`` beside the link, absent before; help says which fields, and the
records refused, per kind."""

from __future__ import annotations

import json

import pytest
from conftest import until
from support.console import T0, make_app, screen_text

from meshview.model.snapshot import PresenceRecord
from meshview.wire import decode_presence


def status_line(app) -> str:
    return screen_text(app).rstrip("\n").splitlines()[-1]


def lying_card(name: str, t: float) -> bytes:
    """A presence card as mallory writes it in open mode: a megabyte name and role."""
    return json.dumps({
        "card": {"id": f"local.{name}", "name": "M" * 1_000_000, "kind": "agent",
                 "role": "r" * 300_000, "owner": "local", "actor": name},
        "status": "working", "ts": int(t), "lifecycleUid": "m" * 26}).encode()


def feed(model, key: str, value: bytes) -> None:
    """One presence entry through the wire decoder into the model, as the observer does."""
    d = decode_presence(key, "PUT", value, int(model.clock()), None, ttl_ms=int(model.ttl_ms))
    assert d.presence is not None
    if d.cuts:
        model.note_cuts(d.cuts)
    model.apply_presence(PresenceRecord.from_wire(d.presence))


@pytest.mark.parametrize("width", [80, 120])
async def test_a_lying_peer_s_oversized_fields_show_as_cut_on_the_bar_and_in_help(width):
    from cotal_tui.screens.console import ConsoleScreen
    from cotal_tui.screens.help import HelpBody

    app = make_app()
    async with app.run_test(size=(width, 24)) as pilot:
        await pilot.pause()
        line = status_line(app)
        assert "cut" not in line and "● demo" in line, line
        model = next(s for s in app.screen_stack if isinstance(s, ConsoleScreen)).session.model
        assert model.cut_count() == 0
        feed(model, "local.mallory", lying_card("mallory", T0))
        assert model.cut_count() == 2  # the name and the role
        await until(pilot, lambda: "⚠ cut 2" in status_line(app), what=status_line(app))
        line = status_line(app)
        assert " connected" in line and "● demo" in line, line  # the link is never cut
        await pilot.press("question_mark")
        await until(pilot, lambda: app.screen.query(HelpBody), what="the help screen")
        text = screen_text(app)
        assert "2 wire fields cut to their bounds" in text, text
        assert "name 1" in text and "role 1" in text, text


async def test_refused_presence_keys_are_said_per_kind_in_help():
    """Keys refused at the live cap are a named rejection: ``! N rejected`` on the bar, and
    ``presence:live-cap N`` in help; the agents already shown stay."""
    from cotal_tui.app import CotalApp
    from cotal_tui.screens.help import HelpBody
    from meshview.model.mesh import MeshModel
    from support.console import FixedClock, StaticSession

    clk = FixedClock()
    model = MeshModel("demo", clock=clk, live_cap=3)
    for name in ("ada", "bo", "cy"):
        model.apply_presence(PresenceRecord(id=f"local.{name}", name=name, ts=clk.t))
    model.set_connection("connected")
    app = CotalApp(session=StaticSession(model))
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: "3 agents" in status_line(app), what=status_line(app))
        assert "rejected" not in status_line(app)
        for i in range(5):
            model.apply_presence(PresenceRecord(id=f"local.flood{i}", name=f"flood{i}", ts=clk.t))
        await until(pilot, lambda: "! 5 rejected" in status_line(app), what=status_line(app))
        assert "3 agents" in status_line(app)
        await pilot.press("question_mark")
        await until(pilot, lambda: app.screen.query(HelpBody), what="the help screen")
        assert "5 records refused (presence:live-cap 5)" in screen_text(app), screen_text(app)
