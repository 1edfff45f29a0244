"""``:tile`` against a real manager: four live seats, every pane updating, promote one, close all."""

from __future__ import annotations

import re
import sys
import textwrap
from types import SimpleNamespace

import nats
import pytest
from textual.app import App

from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.seats import SeatSessions
from cotal_tui.screens.tile import TileScreen, tile_names
from widgets.tile_grid import TilePane, grid_shape
from conftest import until

TICKER = textwrap.dedent("""
    import os, sys, time, tty
    tty.setraw(0)
    log = open(sys.argv[2], "ab", buffering=0)
    os.set_blocking(0, False)
    i = 0
    while True:
        try:
            d = os.read(0, 4096)
            if d:
                log.write(d)
        except BlockingIOError:
            pass
        i += 1
        os.write(1, f"{sys.argv[1]} tick {i}\\r\\n".encode())
        time.sleep(0.05)
""")


def last_tick(pane: TilePane) -> int:
    ticks = [int(m.group(1)) for line in pane.content_text() for m in [re.search(r"tick (\d+)", line)] if m]
    return max(ticks, default=0)


def test_grid_shape():
    assert grid_shape(1) == (1, 1)
    assert grid_shape(4, 160, 48) == (2, 2)
    assert grid_shape(2, 200, 40)[0] == 2
    cols, rows = grid_shape(7, 160, 48)
    assert cols * rows >= 7


def test_tile_names_pick_working_hosted_agents():
    peers = [SimpleNamespace(name=n, kind=k, status=s) for n, k, s in
             [("a", "agent", "working"), ("b", "agent", "idle"), ("c", "agent", "working"),
              ("m", "endpoint", "working"), ("d", "agent", "working")]]
    assert tile_names(peers) == ["a", "c", "d"]
    assert tile_names(peers, managed_names={"a", "d"}) == ["a", "d"]
    assert tile_names(peers, chosen=["b", "b", "a"]) == ["b", "a"]


@pytest.fixture
async def four(nc, space, tmp_path):
    prog = tmp_path / "ticker.py"
    prog.write_text(TICKER)
    logs = {}
    specs = []
    for n in ("t1", "t2", "t3", "t4"):
        logs[n] = tmp_path / f"{n}.bin"
        logs[n].write_bytes(b"")
        specs.append(SeatSpec(name=n, principal_id=f"local.{n}", cols=50, rows=10,
                              argv=[sys.executable, str(prog), n, str(logs[n])]))
    mgr = DemoManager(nc, space, specs, root=str(tmp_path))
    await mgr.start()
    url = nc.connected_url.geturl()
    sessions = SeatSessions(space, lambda: nats.connect(url, allow_reconnect=False), default_size=(50, 10))
    yield sessions, mgr, logs
    await mgr.stop()


@pytest.mark.slow
async def test_tile_of_four_updates_every_pane_and_promotes_one(four):
    sessions, mgr, logs = four
    app = App()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = TileScreen(sessions, ["t1", "t2", "t3", "t4"])
        app.push_screen(screen)
        await until(pilot, lambda: mgr.live_sessions == 4, what="four sessions")
        await until(pilot, lambda: all(last_tick(p) > 0 for p in screen.panes), what="first output")
        first = [last_tick(p) for p in screen.panes]
        await until(pilot, lambda: all(last_tick(p) >= f + 5 for p, f in zip(screen.panes, first)),
                    what="every pane advancing")
        for p in screen.panes:  # and what is drawn follows the mirror
            assert any(f"{p.seat} tick" in p.render_line(y).text for y in range(p.size.height))
        # read-only: keys pressed on the grid reach no pty
        await pilot.press("x", "ctrl+c")
        # promote the second pane and type into it
        await pilot.press("right", "enter")
        assert screen.panes[1].interactive and not screen.panes[0].interactive
        await pilot.press("q", "ctrl+q")
        await until(pilot, lambda: logs["t2"].read_bytes() == b"q\x11", what="keys at t2's pty")
        await pilot.press("ctrl+right_square_bracket")  # release: read-only again, the tile stays
        await until(pilot, lambda: not screen.panes[1].interactive, what="demoted")
        assert app.screen is screen
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is not screen, what="tile closed")
        await until(pilot, lambda: mgr.live_sessions == 0, what="all sessions handed back")
        assert [logs[n].read_bytes() for n in ("t1", "t3", "t4")] == [b"", b"", b""]
        assert logs["t2"].read_bytes() == b"q\x11"


def test_tile_targets_bind_by_id_and_refuse_a_shared_seat_name():
    """Two managers each report a seat named ``ada`` under different principals: without words
    each working peer gets its own seat (by id, labelled apart); ``tile ada`` is refused with both
    ids and nothing tiled; an id always works."""
    from attach.control.managed import ManagedFold
    from cotal_tui.screens.tile import tile_targets
    from meshview.model.labels import Labels
    from meshview.model.snapshot import Peer

    def row(rid: str, iid: str) -> dict:
        return {"name": "ada", "id": rid, "agent": "line", "space": "s", "mode": "pty",
                "status": "running", "uptimeMs": 1000, "mesh": "working",
                "lifecycleUid": "u" * 26, "instanceId": iid}

    fold = ManagedFold()
    fold.apply({"m1", "m2"}, {"m1": [row("A1", "m1")], "m2": [row("B2", "m2")]}, now=1.0)
    peers = [Peer(id="local.A1", name="ada", kind="agent", status="working", reported_status="working",
                  ts=0, seen_at=0, lifecycle_uid="u" * 26),
             Peer(id="local.B2", name="ada", kind="agent", status="working", reported_status="working",
                  ts=0, seen_at=0, lifecycle_uid="u" * 26)]
    labels = Labels([(p.id, p.name, None) for p in peers])
    got, why = tile_targets(peers, fold, labels)
    assert why is None
    assert {(t.instance_id, t.label) for t in got} == {("m1", labels.label("local.A1")),
                                                      ("m2", labels.label("local.B2"))}
    assert len({t.label for t in got}) == 2 and all(t.label.startswith("ada") for t in got)
    got, why = tile_targets(peers, fold, labels, ["ada"])
    assert got == [] and why is not None and "2 seats are named ada" in why
    assert "local.A1" in why and "local.B2" in why
    got, why = tile_targets(peers, fold, labels, ["local.B2"])
    assert why is None and [(t.instance_id, t.label) for t in got] == [("m2", labels.label("local.B2"))]
    # a peer whose lifecycle uid is not the seat's is not that seat
    stranger = Peer(id="local.A1", name="ada", kind="agent", status="working",
                    reported_status="working", ts=0, seen_at=0, lifecycle_uid="v" * 26)
    got, _ = tile_targets([stranger], fold, labels)
    assert sorted(t.instance_id or "" for t in got) == ["m1", "m2"]  # nobody bound: every seat


def test_palette_tab_offers_each_id_of_a_shared_name():
    """``dm @ad`` Tab: two peers named ada stop at the shared name, and each one's id is a
    candidate of its own (the name alone is refused by every verb); a unique name adds no id."""
    from cotal_tui.palette import candidates, complete
    from meshview.model.labels import Labels
    from meshview.model.snapshot import Peer

    def peer(pid: str, name: str) -> Peer:
        return Peer(id=pid, name=name, kind="agent", status="idle", reported_status="idle",
                    ts=0, seen_at=0)

    peers = [peer("local.ada1", "ada"), peer("local.ada2", "ada"), peer("local.bo", "bo")]
    snap = SimpleNamespace(channels=[], peers=peers,
                           labels=Labels([(p.id, p.name, None) for p in peers]))
    words = candidates(SimpleNamespace(snap=snap), ["dm"])  # type: ignore[arg-type]
    assert {"@ada", "@local.ada1", "@local.ada2", "@bo"} <= set(words)
    assert "@local.bo" not in words
    assert complete("dm @ad", words) == "dm @ada "
    assert complete("dm @local.ada2", words) == "dm @local.ada2 "
