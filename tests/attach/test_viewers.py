"""Who else is here (attach/control/viewers.py): a second client's session on a managed seat shows up as
a viewer to the first, read from the session ledger the demo manager records
(``cotal_sessions_<space>``), on a real broker; it leaves when that session closes."""

from __future__ import annotations

import asyncio

import nats

from attach.session.client import AttachSession
from attach.control.viewers import Viewer, read_viewers, viewers_label, viewers_of
from conftest import until
from cotal_tui.demo.manager import DemoManager, SeatSpec
from meshview.wire.endpoint import Caller


async def test_a_second_clients_session_shows_up_as_a_viewer(broker, nc, space, tmp_path):
    m = DemoManager(nc, space, [SeatSpec(name="alice", principal_id="local.alice"),
                                SeatSpec(name="bob", principal_id="local.bob")],
                    root=str(tmp_path / "m"))
    await m.start()
    nc_a = await nats.connect(broker.url)
    nc_b = await nats.connect(broker.url)
    me, other = Caller.fresh(), Caller("local", "ops2", Caller.fresh().uid)
    first = AttachSession(space, "alice", nc=nc_a, caller=me, reconnect=False)
    second = AttachSession(space, "alice", nc=nc_b, caller=other, reconnect=False)
    try:
        await first.open()
        got = await read_viewers(nc_a, space, "alice", mine=[me.principal])
        assert [(v.name, v.you) for v in got] == [("you", True)]
        assert viewers_label(got) == "1 viewer: you"

        await second.open()  # another console peeks at the same seat
        seen: list[Viewer] = []

        async def two() -> bool:
            seen[:] = await read_viewers(nc_a, space, "alice", mine=[me.principal],
                                         names={"local.ops2": "ops two"})
            return len(seen) == 2

        await until(two, timeout=5, what="the second session in the ledger")
        assert [v.name for v in seen] == ["you", "ops two"]
        assert viewers_label(seen) == "2 viewers: you, ops two"
        assert await read_viewers(nc_a, space, "bob") == []  # another seat: nobody

        await second.close()  # its row goes terminal: it is no viewer any more

        async def one() -> bool:
            return len(await read_viewers(nc_a, space, "alice", mine=[me.principal])) == 1

        await until(one, timeout=5, what="the closed session gone from the viewers")
    finally:
        for s in (first, second):
            try:
                await asyncio.wait_for(s.close(), 5)
            except Exception:
                pass
        await m.stop()
        await nc_a.close()
        await nc_b.close()


def test_rows_that_are_not_viewers_and_the_read_only_mark():
    now = 1_000_000.0
    live = {"state": "active", "holder": {"id": "local.alice", "principal": "local.alice"},
            "target": {"name": "s1", "lifecycleUid": "U1"}, "exp": now + 1}
    rows = [
        ("session.a", live),
        ("session.b", {**live, "holder": {"principal": "local.bob"}, "mode": "peek"}),
        ("session.c", {**live, "state": "closed"}),
        ("session.d", {**live, "exp": now - 1}),  # expired
        ("session.e", {**live, "target": {"name": "s2"}}),
        ("session.f", {**live, "target": {"name": "s1", "lifecycleUid": "OLD"}}),
        ("session.g", "not a row"),
        ("session.h", {**live, "holder": {"principal": "local." + "ab" * 16}}),
    ]
    got = viewers_of(rows, "s1", mine=["local.bob"], now_ms=now, lifecycle_uid="U1")
    assert viewers_label(got) == "3 viewers: you (read-only), a console …abab, alice"
    assert viewers_label([]) == ""
