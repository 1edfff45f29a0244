"""The stalled verdict (meshview/model/stalled.py): an agent whose presence says ``working`` while no
fact the console observes moves (no presence change, no message sent, no activeAt advance, no
terminal output of an open session) is flagged after N; a busy one is not.

Against a real broker: agents heartbeat their presence into the KV bucket, the busy one also
posts on a channel; the observer feeds a model whose N is short (2 s). The ``--json`` line
stream (``stream_space``) carries the verdict as ``"stalled": {"for": s, "signals": [...]}``.
"""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from conftest import until
from meshview.link.connect import ConnectTarget, connect
from meshview.model.mesh import MeshModel
from meshview.observe.observer import Observer, ObserverOptions
from meshview.model.snapshot import PresenceRecord
from meshview.model.stalled import StallFacts, stall_ms, verdict
from meshview.lines.stream import StreamOptions, stream_space
from support.observer import Heartbeat, dm, post

N_MS = 2000.0


def test_verdict_needs_every_fact_quiet_for_n():
    f = StallFacts(since=0.0, presence=1000.0, message=500.0, active_at=None)
    assert verdict("working", f, 1000.0 + N_MS - 1, N_MS) is None
    v = verdict("working", f, 1000.0 + N_MS + 14 * 60_000, N_MS)
    assert v is not None and v.signals == ("presence", "messages", "activeAt")
    assert v.label() == "stalled? 14m (no messages)"
    assert verdict("waiting", f, 10 ** 9, N_MS) is None  # only a working claim is judged
    # a seat with an open session: output counts, and moving output keeps it off the list
    s = StallFacts(since=0.0, session=True, output=900_000.0, pending=(0.0, 1.0, 901_000.0))
    assert verdict("working", s, 900_000.0 + N_MS - 1, N_MS) is None
    v = verdict("working", s, 900_000.0 + N_MS, N_MS)
    assert v.signals[0] == "output" and v.unanswered == 2  # the last DM is younger than N
    assert v.label() == "stalled? 2s (no output, no messages, 2 unanswered)"
    assert v.as_json() == {"for": 2, "signals": ["output", "presence", "messages", "activeAt"],
                           "unanswered": 2}


def test_minutes_are_checked():
    assert stall_ms(None) == 600_000.0 and stall_ms(0.5) == 30_000.0
    for bad in (0, -1, "x", float("nan")):
        with pytest.raises(ValueError, match="stalled minutes must be"):
            stall_ms(bad)


def test_seat_output_and_manager_active_at_are_facts():
    t = [0.0]
    m = MeshModel("main", clock=lambda: t[0], stall_ms=N_MS)
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=0.0, status="working"))
    m.seat_activity("a", session_open=True, output_at=0.0)
    t[0] = 1500.0
    m.seat_activity("a", session_open=True, output_at=1500.0)  # it printed
    t[0] = 3000.0
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=3000.0, status="working"))  # heartbeat
    assert m.stalled() == {}
    t[0] = 3500.0
    v = m.stalled()["a"]
    assert v.signals[0] == "output" and 1999 <= v.for_ms <= 2000
    m.seat_activity("a", session_open=True, active_at=100.0)  # the manager's row: first sight
    m.seat_activity("a", session_open=True, active_at=200.0)  # ... and an advance
    assert m.stalled() == {}


async def test_a_stalled_agent_is_flagged_after_n_and_a_busy_one_is_not(broker, nc, space):
    hb = Heartbeat(nc, space, period=0.5)
    hb.add("quiet", status="working", role="dev")
    hb.add("busy", status="working", role="dev")
    hb.start()
    nc2, target = await connect(ConnectTarget((broker.url,), space, timeout=3))
    model = MeshModel(space, record_events=True, stall_ms=N_MS)
    obs = Observer(nc2, space, model, has_credential=target.has_credential,
                   options=ObserverOptions(backfill=0))
    stop = asyncio.Event()

    async def chatter():
        i = 0
        while not stop.is_set():
            await post(nc, space, "busy", "general", f"step {i}")
            i += 1
            await asyncio.sleep(0.3)

    talk = asyncio.create_task(chatter())
    try:
        await obs.start()
        await until(lambda: {p.name for p in model.snapshot().agents} == {"quiet", "busy"},
                    timeout=5, what="both agents in the roster")
        # nobody is stalled before the console watched it for N
        assert all(model.clock() - model.peer(pid).first_seen >= N_MS for pid in model.stalled())
        await dm(nc, space, "ops", "quiet", "are you there?")
        await until(lambda: "local.quiet" in model.stalled(), timeout=N_MS / 1000 + 5,
                    what="the quiet agent flagged")
        seen_at = model.peer("local.quiet").first_seen
        assert model.clock() - seen_at >= N_MS  # not before N of watching it
        v = model.stalled()["local.quiet"]
        assert set(v.signals) == {"presence", "messages", "activeAt"}
        # the DM to it counts once it has gone unanswered for N too
        await until(lambda: getattr(model.stalled().get("local.quiet"), "unanswered", 0) == 1,
                    timeout=3, what="the unanswered DM counted")
        assert "local.busy" not in model.stalled()  # its messages keep moving

        def flagged():
            return [e.peer.name for e in model.take_events() if getattr(e, "reason", None) == "stalled"]

        seen: list[str] = []
        await until(lambda: seen.extend(flagged()) or seen, timeout=3, what="the stalled line")
        assert seen == ["quiet"]  # one presence line, when it began (the model's once-a-second check)
        # the quiet one answers: the verdict clears at once
        await post(nc, space, "quiet", "general", "still on it")
        await until(lambda: "local.quiet" not in model.stalled(), timeout=3)
    finally:
        stop.set()
        talk.cancel()
        await hb.stop()
        await obs.stop()
        await nc2.close()


async def test_json_presence_lines_carry_the_verdict(broker, nc, space):
    hb = Heartbeat(nc, space, period=0.5)
    hb.add("quiet", status="working")
    hb.start()
    nc2, target = await connect(ConnectTarget((broker.url,), space, timeout=3))
    out, err = io.StringIO(), io.StringIO()
    stop = asyncio.Event()
    run = asyncio.create_task(stream_space(
        nc2, target, StreamOptions(mode="json", stall_ms=N_MS), out, err, stop))

    def stalled_lines():
        rows = [json.loads(x) for x in out.getvalue().splitlines() if x.strip()]
        return [r for r in rows if r.get("type") == "presence" and "stalled" in r]

    try:
        await until(lambda: stalled_lines(), timeout=N_MS / 1000 + 6, what="a stalled line")
        line = stalled_lines()[0]
        assert line["name"] == "quiet" and line["status"] == "working"
        assert line["reason"] == "stalled" and line["stalled"]["for"] >= 2
        assert line["stalled"]["signals"] == ["presence", "messages", "activeAt"]
        first = [json.loads(x) for x in out.getvalue().splitlines()
                 if '"presence"' in x][0]
        assert "stalled" not in first  # the join line: not yet
    finally:
        stop.set()
        await asyncio.wait_for(run, 5)
        await hb.stop()


def test_notify_stalled_alerts_once_per_stalled_episode(tmp_path):
    import argparse

    from cotal_tui.config import notify_settings, settings
    from meshview.lines.notify import Notifier

    args = argparse.Namespace(notify=False, notify_cmd=None, notify_escape=None,
                              notify_stalled=True, stalled_minutes=0.5)
    s = notify_settings(args, tmp_path)
    assert s.stalled and s.terminal and s.stalled_minutes == 0.5  # implies --notify
    (tmp_path / "config.toml").write_text("[notify]\nstalled = true\nstalled_minutes = 3\n")
    s = notify_settings(None, tmp_path)
    assert s.stalled and s.stalled_minutes == 3 and s.stalled_sources == {
        "stalled": "config.toml", "stalled_minutes": "config.toml"}
    rows = {r.key: r for r in settings(None, tmp_path)}
    assert rows["notify.stalled_minutes"].value == 3 and rows["notify.stalled"].source == "config.toml"

    t = [0.0]
    m = MeshModel("main", clock=lambda: t[0], stall_ms=N_MS)
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=0.0, status="working"))
    written: list[str] = []
    n = Notifier("main", write=written.append, stalled=True)
    n.on_model(m)
    assert n.delivered == 0
    t[0] = N_MS + 1000
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=t[0], status="working"))  # heartbeat only
    n.on_model(m)
    assert n.delivered == 1 and "ada may be stalled - stalled? 3s (no messages)" in written[0]
    t[0] += 1500
    n.on_model(m)
    assert n.delivered == 1  # the same episode


def test_bad_stalled_minutes_flag_is_one_sentence():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "cotal_tui.cli", "watch", "--plain",
                        "--stalled-minutes", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "stalled minutes must be a positive number of minutes" in r.stderr


def test_the_plain_line_says_it():
    from meshview.model.snapshot import PresenceEvent
    from meshview.lines.stream import StreamWriter

    t = [0.0]
    m = MeshModel("main", clock=lambda: t[0], stall_ms=N_MS, record_events=True)
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=0.0, status="working"))
    t[0] = 15 * 60_000.0
    m.tick(t[0])
    out, err = io.StringIO(), io.StringIO()
    w = StreamWriter("plain", out, err, colour=False)
    w.stalled_of = lambda pid, now: m.stalled(pid, now).get(pid)
    w.write([e for e in m.take_events() if isinstance(e, PresenceEvent)])
    last = out.getvalue().splitlines()[-1]
    assert "update" in last and last.endswith("● working · progress unknown · stalled? 15m (no messages)")


def test_the_consoles_notifier_alerts_for_a_stalled_agent_when_asked(tmp_path):
    """``cotal watch --notify-stalled`` in the console: the notifier the console attaches rings
    for a stalled agent (it was built without ``stalled=`` and never did)."""
    import argparse
    import types

    from cotal_tui.alerts import attach_notifier

    t = [0.0]
    m = MeshModel("main", clock=lambda: t[0], stall_ms=N_MS)
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=0.0, status="working"))
    session = types.SimpleNamespace(model=m, operator=None, notifier=None, on_stop=[])
    written: list[str] = []
    shell = types.SimpleNamespace(write_to_terminal=written.append, notify_line=lambda s: None)
    args = argparse.Namespace(notify=False, notify_cmd=None, notify_escape=None,
                              notify_stalled=True, stalled_minutes=0.5)
    n = attach_notifier(session, args, lambda: shell)  # a stand-in session: it reads these four
    assert session.notifier is n
    n.on_model(m)
    t[0] = N_MS + 1000
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=t[0], status="working"))
    n.on_model(m)
    assert n.delivered == 1 and any("ada may be stalled" in w for w in written)
