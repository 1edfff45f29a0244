"""The console's DM/ask notice says what is true at send time (``sent to @bram · stored #N ·
bram working``), never "delivered": the stored sequence is the stream's, and the status is the
recipient's own presence, whatever a peer borrowing its name claims."""

from __future__ import annotations

import json

from conftest import until
from support.observer import Heartbeat, presence, put_presence
from test_console_send import _session_app
from widgets.composer import Composer


class Namesakes(Heartbeat):
    """Live peers whose display names are not their actors (``{actor: name}``), claiming idle."""

    def __init__(self, nc, space: str, names: dict[str, str]) -> None:
        super().__init__(nc, space, period=1.0)
        self.names = names

    async def beat(self) -> None:
        for actor, name in self.names.items():
            rec = presence(actor, "idle")
            rec["card"]["name"] = name
            await put_presence(self.nc, self.space, rec)


async def test_a_dm_from_the_roster_notices_stored_seq_and_status(broker, nc, space):
    hb = Heartbeat(nc, space)
    hb.add("bram", status="working")
    liars = Namesakes(nc, space, {"mallory": "bram"})  # claims the name, and idle
    await hb.beat()
    await liars.beat()
    await put_presence(nc, space, presence("cleo", "offline"))
    hb.start()
    liars.start()
    session, app = _session_app(nc, broker, space)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: session.started and {"local.bram", "local.mallory"} <= {
                p.id for p in session.model.snapshot().peers}, what="the roster")
            roster = app.screen.query_one("#roster")
            roster.focus()

            def on(pid: str) -> bool:
                roster.select_key(pid)
                return roster.cursor_key == pid

            await until(pilot, lambda: on("local.bram"), what="bram's row under the cursor")
            await pilot.press("c")
            composer = app.screen.query_one(Composer)
            assert composer.target.kind == "dm" and composer.target.to == "local.bram"
            await pilot.press(*"status?", "enter")
            await until(pilot, lambda: "stored #" in (app.last_notice or ""),
                        what=f"the receipt ({app.last_notice})")
            notice = app.last_notice or ""
            assert notice == "sent to @bram · stored #1 · bram working", notice
            got = await nc.jetstream().get_msg(f"DM_{space}", 1)
            assert json.loads(got.data)["to"] == "local.bram"

            # an offline recipient is said offline; the sequence is the stream's next
            await until(pilot, lambda: on("local.cleo"), what="cleo's row under the cursor")
            await pilot.press("c")
            await pilot.press(*"when you are back", "enter")
            await until(pilot, lambda: "cleo" in (app.last_notice or ""), what="cleo's receipt")
            assert app.last_notice == "sent to @cleo · stored #2 · cleo offline"
            got = await nc.jetstream().get_msg(f"DM_{space}", 2)
            assert json.loads(got.data)["to"] == "local.cleo"
    finally:
        await session.stop()
        await hb.stop()
        await liars.stop()


async def test_an_ask_notices_its_task_sequence_and_holder(broker, nc, space):
    hb = Heartbeat(nc, space)
    hb.add("bram", status="waiting", role="reviewer")
    await hb.beat()
    hb.start()
    session, app = _session_app(nc, broker, space)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until(pilot, lambda: session.started and any(
                p.id == "local.bram" for p in session.model.snapshot().peers), what="the roster")
            from meshview.act.send import Send

            said = await session.operator.send(Send("ask", "reviewer", "review PR 42"))
            assert said.startswith("asked @reviewer · stored #1 · reviewer: bram waiting"), said
            assert "delivered" not in said
            got = await nc.jetstream().get_msg(f"TASK_{space}", 1)
            assert json.loads(got.data)["toService"] == "reviewer"
    finally:
        await session.stop()
        await hb.stop()
