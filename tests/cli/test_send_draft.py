"""A send the broker did not acknowledge keeps its draft: the console on a
real broker that is then really stopped, and a retry once it is back that stores the message
once, under the Nats-Msg-Id minted for the draft's first attempt."""

from __future__ import annotations

import argparse
import json

import nats
import pytest

from conftest import until
from cotal_tui.cli.connection import target_from_args
from cotal_tui.demo.provision import provision_space
from cotal_tui.cli.watch_console import session_options
from cotal_tui.session import LiveSession
from widgets.composer import Composer
from widgets.status_bar import StatusBar


@pytest.fixture
async def live(fresh_broker):
    nc = await nats.connect(fresh_broker.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
    await provision_space(nc, "drafts")
    args = argparse.Namespace(server=[fresh_broker.url], space="drafts", backfill=50,
                              no_dms=False, read_only=False, as_name="opsy",
                              connect_timeout=1.0)
    session = LiveSession(nc, target_from_args(args), "drafts", session_options(args))
    yield session, nc
    if not fresh_broker.running:
        fresh_broker.start()
    await session.stop()
    await nc.close()


def _app(session):
    from cotal_tui.app import CotalApp

    return CotalApp(session=session)


async def _fail_a_post(pilot, app, text: str) -> Composer:
    await pilot.press("c", *text, "enter")
    composer = app.screen.query_one(Composer)
    await until(pilot, lambda: composer.notes, 30, f"the refusal ({app.last_notice})")
    return composer


async def test_a_send_to_a_stopped_broker_keeps_the_draft_and_says_why(fresh_broker, live):
    session, _ = live
    app = _app(session)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: session.started, what="the console")
        fresh_broker.stop(keep_store=True)
        composer = await _fail_a_post(pilot, app, "keep me, exactly  ")
        why = app.last_notice or ""
        assert why.startswith("not sent to #general: ") and "draft is kept" in why
        assert "\n" not in why and "Traceback" not in why and "Error" not in why
        bar = app.screen.query_one(StatusBar)
        # not a toast: still there well past a transient notice's life (3 s)
        await pilot.pause(StatusBar.NOTICE_SECONDS + 0.5)
        assert bar.notice == why
        # c reopens the composer on the exact draft, the reason above it; the key cleared the line
        await pilot.press("c")
        assert composer.is_open and composer.box.text == "keep me, exactly  "
        assert bar.notice is None
        note = app.screen.query_one("#composer-note")
        assert note.display and "could not connect" in str(note.render())
        # Ctrl-C in the composer puts it away with the draft; the console keeps running
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running and app.return_code is None and not composer.is_open
        await pilot.press("c")
        assert composer.box.text == "keep me, exactly  "
        await pilot.press("escape")


async def test_a_retry_after_the_broker_is_back_is_stored_once_with_the_same_id(fresh_broker,
                                                                                live):
    session, nc = live
    app = _app(session)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: session.started, what="the console")
        fresh_broker.stop(keep_store=True)
        composer = await _fail_a_post(pilot, app, "once only")
        key = next(iter(composer.notes))
        first_id = session.operator.pending_id(key)
        assert first_id
        fresh_broker.start()
        await until(pilot, lambda: nc.is_connected, 15, "the observer back")
        await pilot.press("c")
        assert composer.box.text == "once only"
        await pilot.press("enter")
        await until(pilot, lambda: app.last_notice == "sent to #general", 30,
                    f"the receipt ({app.last_notice})")
        assert not composer.drafts and not composer.notes
        await pilot.press("c")
        assert composer.box.text == ""  # acknowledged: the draft is gone
        await pilot.press("escape")
    js = nc.jetstream()
    info = await js.stream_info("CHAT_drafts")
    me = session.operator.participant.id
    mine = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        m = await js.get_msg("CHAT_drafts", seq)
        body = json.loads(m.data)
        if body["from"]["id"] == me:
            mine.append(((m.headers or {}).get("Nats-Msg-Id"), body))
    assert len(mine) == 1, mine
    msg_id, body = mine[0]
    assert msg_id == body["id"] == first_id and body["parts"][0]["text"] == "once only"
