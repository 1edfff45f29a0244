"""Operator sends from the console, in-process on the real observer: real broker, real team.

``c`` composes to the active channel, ``c`` on a roster row DMs that agent, ``r`` on a feed row
replies in its thread, ``r`` on a NEEDS-YOU row answers the waiting agent; ``--read-only``
publishes nothing whatever keys are pressed; hostile typed text goes out byte-exact.
"""

from __future__ import annotations

import argparse
import json

import pytest

from conftest import until
from cotal_tui.cli.connection import target_from_args
from support.authmesh import auth_mesh  # noqa: F401  (fixture)
from support.team import steady_team
from cotal_tui.cli.watch_console import session_options
from cotal_tui.session import LiveSession
from meshview.act.send import Send
from widgets.composer import Composer


@pytest.fixture
async def team(nc, space):
    async with steady_team(nc, space, seed=5, agents=4, chat_interval=30) as t:
        yield t


class Probe:
    """Everything published in the space, as decoded envelopes (presence puts kept apart)."""

    def __init__(self) -> None:
        self.msgs: list[tuple[str, dict]] = []
        self.presence: list[tuple[str, dict]] = []

    async def start(self, nc, space: str) -> "Probe":
        async def on_msg(m):
            try:
                body = json.loads(m.data)
            except ValueError:
                return
            self.msgs.append((m.subject, body))

        async def on_kv(m):
            if m.data:
                try:
                    self.presence.append((m.subject, json.loads(m.data)))
                except ValueError:
                    pass

        await nc.subscribe(f"cotal.{space}.>", cb=on_msg)
        await nc.subscribe(f"$KV.cotal_presence_{space}.>", cb=on_kv)
        await nc.flush()
        return self

    def from_(self, pid: str) -> list[tuple[str, dict]]:
        return [(s, b) for s, b in self.msgs if b.get("from", {}).get("id") == pid]


def _args(broker, space, **kw) -> argparse.Namespace:
    return argparse.Namespace(server=[broker.url], space=space, backfill=50, no_dms=False,
                              read_only=kw.get("read_only", False),
                              as_name=kw.get("as_name", "opsy"))


def _session_app(nc, broker, space, **kw):
    """A live console session (real observer on ``nc``) and the App on it."""
    from cotal_tui.app import CotalApp

    args = _args(broker, space, **kw)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    return session, CotalApp(session=session)


async def _console(pilot, session, team):
    await until(pilot, lambda: session.started
                and len(session.model.snapshot().agents) == len(team.members), what="roster")


async def test_compose_posts_to_the_channel_once_and_the_operator_appears(broker, nc, space,
                                                                         team):
    probe = await Probe().start(nc, space)
    session, app = _session_app(nc, broker, space)
    async with app.run_test(size=(120, 40)) as pilot:
        await _console(pilot, session, team)
        me = session.operator.participant.id
        assert probe.presence == [] or all(me not in s for s, _ in probe.presence)
        await pilot.press("c")
        composer = app.screen.query_one(Composer)
        assert composer.is_open and composer.target.label == "#general"
        hostile = "hi \x1b]0;pwn\x07 \u202eevil"
        await pilot.press(*"hi ")  # typed text plus a pasted hostile tail
        composer.box.insert("\x1b]0;pwn\x07 \u202eevil")
        await pilot.press("ctrl+j")
        await pilot.press(*"line2")
        await pilot.press("enter")
        await until(pilot, lambda: probe.from_(me), what=f"the post on the wire ({app.last_notice})")
        subject, body = probe.from_(me)[0]
        assert subject == f"cotal.{space}.chat.{me}.general"
        assert body["parts"][0]["text"] == hostile + "\nline2"  # byte-exact, newline kept
        assert body["channel"] == "general" and body["from"]["id"] == me
        # the operator is an endpoint/operator on the roster, its post in the feed once
        await until(pilot, lambda: any(p.id == me for p in session.model.snapshot().peers),
                    what="the operator on the roster")
        peer = next(p for p in session.model.snapshot().peers if p.id == me)
        assert peer.kind == "endpoint" and peer.role == "operator"
        await until(pilot, lambda: any(e.from_id == me for e in session.model.snapshot().feed),
                    what="the post in the feed")
        await pilot.pause(0.5)
        assert sum(e.from_id == me and e.kind == "channel"
                   for e in session.model.snapshot().feed) == 1
        assert not composer.is_open
    await session.stop()
    await until(lambda: any(b.get("status") == "offline" and me in s
                            for s, b in probe.presence), 5, "the operator's offline record")


async def test_roster_c_dms_the_agent_and_r_replies_in_thread(broker, nc, space, team):
    probe = await Probe().start(nc, space)
    session, app = _session_app(nc, broker, space)
    async with app.run_test(size=(120, 40)) as pilot:
        await _console(pilot, session, team)
        me = session.operator.participant.id
        agent = team.members[1]
        roster = app.screen.query_one("#roster")
        roster.focus()

        def on_agent() -> bool:  # the roster draws on its next drain: select once it has the row
            roster.select_key(agent.id)
            return roster.cursor_key == agent.id

        await until(pilot, on_agent, what="the agent's roster row under the cursor")
        await pilot.press("c")
        composer = app.screen.query_one(Composer)
        assert composer.target.kind == "dm" and composer.target.to == agent.id
        await pilot.press(*"status?", "enter")
        await until(pilot, lambda: [b for s, b in probe.from_(me) if b.get("to") == agent.id],
                    what="the DM")
        # the agent answers in the thread; r on that row replies to it
        await until(pilot, lambda: [b for s, b in probe.from_(agent.id) if b.get("to") == me],
                    what="the agent's answer")
        answer = next(b for s, b in probe.from_(agent.id) if b.get("to") == me)
        assert answer.get("replyTo")
        await until(pilot, lambda: any(e.id == answer["id"] for e in
                                       session.model.snapshot().feed), what="answer in the feed")
        feed = app.screen.query_one("#feed")
        feed.focus()

        def on_answer() -> bool:  # the feed draws the row on its next drain: select once it has it
            feed.cursor = next(e.index for e in session.model.snapshot().feed
                               if e.id == answer["id"])
            e = feed.selected_entry()
            return e is not None and e.id == answer["id"]

        await until(pilot, on_answer, what="the answer under the feed's cursor")
        await pilot.press("r")
        assert composer.target.kind == "dm" and composer.target.to == agent.id
        assert composer.target.reply_to == answer["id"]
        await pilot.press(*"thanks", "enter")
        await until(pilot, lambda: [b for s, b in probe.from_(me)
                                    if b.get("replyTo") == answer["id"]], what="the reply")
        reply = next(b for s, b in probe.from_(me) if b.get("replyTo") == answer["id"])
        assert reply["contextId"] == (answer.get("contextId") or answer["id"])
    await session.stop()


async def test_escape_keeps_the_draft_per_target(broker, nc, space, team):
    session, app = _session_app(nc, broker, space)
    async with app.run_test(size=(120, 40)) as pilot:
        await _console(pilot, session, team)
        await pilot.press("c", *"half a thought", "escape")
        composer = app.screen.query_one(Composer)
        assert not composer.is_open
        await pilot.press("right_square_bracket")  # another tab: its own (empty) draft
        await pilot.press("left_square_bracket")
        await pilot.press("c")
        assert composer.box.text == "half a thought"
    await session.stop()


async def test_read_only_sends_nothing_whatever_the_keys(broker, nc, space, team):
    probe = await Probe().start(nc, space)
    session, app = _session_app(nc, broker, space, read_only=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await _console(pilot, session, team)
        for keys in (["c"], ["r"], ["h", "c"], ["h", "r"], ["n", "r"]):
            await pilot.press(*keys, *"hello", "enter", "escape")
        assert not app.screen.query_one(Composer).is_open
        assert "read-only" in (app.last_notice or "")  # type: ignore[attr-defined]
        await pilot.pause(0.5)
    await session.stop()
    team_ids = {m.id for m in team.members}
    assert [b for s, b in probe.msgs if b.get("from", {}).get("id") not in team_ids] == []
    assert all(any(m.id in s for m in team.members) for s, _ in probe.presence)


async def _palette(pilot, text: str) -> None:
    from textual.command import CommandInput

    await pilot.press("colon")
    await until(pilot, lambda: pilot.app.screen.query(CommandInput), what="the palette")
    await pilot.press(*text)


@pytest.mark.slow
async def test_palette_verbs_complete_and_send(broker, nc, space, team):
    from textual.command import CommandInput

    probe = await Probe().start(nc, space)
    session, app = _session_app(nc, broker, space)
    async with app.run_test(size=(120, 40)) as pilot:
        await _console(pilot, session, team)
        me = session.operator.participant.id
        agent = team.members[2]
        # Tab completes @agent names from the live roster
        await _palette(pilot, f"dm @{agent.name[:2]}")
        await pilot.press("tab")
        box = app.screen.query_one(CommandInput)
        assert box.value.startswith(f"dm @{agent.name}")
        await pilot.press(*" ping from the palette")
        await until(pilot, lambda: app.screen.query_one(CommandInput).value.endswith("palette"))
        await pilot.pause(0.3)  # the palette searches in a worker
        await pilot.press("enter")
        await until(pilot, lambda: [b for s, b in probe.from_(me) if b.get("to") == agent.id],
                    what="the palette DM")
        # ask @role reaches the role (one holder); msg posts to a named channel
        await _palette(pilot, f"ask @{agent.role} who is on call?")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await until(pilot, lambda: [b for s, b in probe.from_(me)
                                    if b.get("toService") == agent.role], what="the ask")
        await _palette(pilot, "msg #releases shipping   now")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await until(pilot, lambda: [b for s, b in probe.from_(me)
                                    if b.get("channel") == "releases"], what="the msg")
        body = next(b for s, b in probe.from_(me) if b.get("channel") == "releases")
        assert body["parts"][0]["text"] == "shipping   now"
    await session.stop()


async def test_palette_dm_to_an_endpoint_is_refused_before_anything(broker, nc, space, team):
    # a second console's operator is an endpoint on the roster
    other, _ = _session_app(nc, broker, space, as_name="other")
    await other.operator.send(Send("channel", "general", "here"))
    probe = await Probe().start(nc, space)
    session, app = _session_app(nc, broker, space)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: session.started and any(
            p.name == "other" for p in session.model.snapshot().peers), what="the endpoint")
        await _palette(pilot, "dm @other hello")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await until(pilot, lambda: "endpoint" in (app.last_notice or ""), what="the refusal")
        await pilot.pause(0.3)
        assert not session.operator.on_roster  # nothing started, nothing sent
    await session.stop()
    await other.operator.close()
    assert [b for s, b in probe.msgs if b.get("to", "").endswith("other")] == []


async def test_a_server_denial_turns_the_console_read_only(auth_mesh):
    """Observer creds cannot publish: the first send says so in one sentence, and from then
    on the console is read-only (the composer refuses) without touching the network."""
    from cotal_tui.operator import Operator, SendRefused

    args = argparse.Namespace(server=[auth_mesh.url], space=auth_mesh.space, nkey=None,
                              creds=str(auth_mesh.creds("observer")))
    op = Operator(target_from_args(args), auth_mesh.space, name=None, read_only=None,
                  roster=lambda: [])
    with pytest.raises(SendRefused, match="permission denied") as e:
        await op.send(Send("channel", "general", "hello"))
    assert "\n" not in str(e.value) and "Traceback" not in str(e.value)
    assert op.read_only == "these credentials cannot publish"
    starts = op.participant.starts
    with pytest.raises(SendRefused, match="read-only - these credentials cannot publish"):
        await op.send(Send("channel", "general", "again"))
    assert op.participant.starts == starts  # refused before any network use
    await op.close()


async def test_palette_record_starts_and_stops_a_recording(tmp_path, monkeypatch):
    """``:record`` writes the space to ``$COTAL_HOME/recordings``; a second ``:record`` stops."""
    from support.console import make_app

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    app = make_app()
    notices = []
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for _ in range(2):
            app.last_notice = None
            await _palette(pilot, "record")
            await pilot.pause(0.3)  # the palette searches in a worker
            await pilot.press("enter")
            await until(pilot, lambda: app.last_notice, what="the record notice")
            notices.append(app.last_notice)
            if len(notices) == 1:
                assert list((tmp_path / "recordings").glob("*.jsonl.gz")), notices
    files = list((tmp_path / "recordings").glob("*.jsonl.gz"))
    assert len(files) == 1 and files[0].stat().st_size > 0
    assert "recording" in notices[0] and "stop" in notices[1], notices
