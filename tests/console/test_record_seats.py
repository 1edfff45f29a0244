"""Record & replay of seat terminals (``cotal watch --record --record-seats``), on the real
thing: a real broker, a real DemoManager serving a real pty, the console's own LiveSession.

The operator attaches to a seat that prints known text and asks for a password with echo off;
the recording holds the seat's output but never the keys typed; ``cotal replay`` shows that text
in the pane when the seat is opened, following seeks; a truncated recording replays up to the
damage with one sentence; rotation keeps a seat stream replayable; a recording that stops on an
error says so on the console's status line."""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from cotal_tui.cli.connection import target_from_args
from support.console import screen_text

from conftest import until
from cotal_tui.app import CotalApp
from cotal_tui.demo.manager import DemoManager, SeatSpec
from cotal_tui.demo.team import Team, TeamSchedule
from cotal_tui.recording import KEY_BYTES, SeatTap, start_recording
from cotal_tui.cli.watch_console import record_and_notify, session_options
from cotal_tui.session import LiveSession
from cotal_tui.screens.attach import AttachScreen
from meshview.model.mesh import MeshModel
from meshview.record.record import Recorder, active_recorder
from meshview.record.replay import Replay, ReplaySession, load_recording
from meshview.record.seatreplay import SeatStream
from widgets.roster import Roster
from widgets.terminal_pane import TerminalPane

ROOT = Path(__file__).resolve().parents[2]
SIZE = (120, 40)
KNOWN = "KNOWN-TEXT-4711"
SECRET = "hunter2-Zq9x-pw"
# a seat that prints known text, then asks for a password with the tty's echo off (so only the
# keystroke path could ever carry it), then says how long it was
PROGRAM = f"""
import sys, termios
print("{KNOWN} ready", flush=True)
a = termios.tcgetattr(0)
a[3] &= ~termios.ECHO
termios.tcsetattr(0, termios.TCSANOW, a)
sys.stdout.write("password: ")
sys.stdout.flush()
line = sys.stdin.readline().strip()
print(f"\\r\\ngot {{len(line)}} chars", flush=True)
sys.stdin.read()
"""
SEAT = "sentry"


def _seat_lines(path: Path) -> list[dict]:
    raw = b""
    for p in (str(path) + ".1", str(path)):
        if os.path.exists(p):
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                raw += d.decompress(Path(p).read_bytes())
            except zlib.error:
                pass
    out = []
    for line in raw.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("type") == "seat":
            out.append(obj)
    return out


def pane_text(app) -> str:
    return "\n".join(app.screen.query_one(TerminalPane).content_text())


async def cursor_to_name(pilot, name: str, timeout: float = 10.0) -> None:
    """Focus the roster and walk its cursor with real keys to the row of ``name``."""
    import asyncio

    app = pilot.app
    roster = app.screen.query_one(Roster)
    if app.screen.focused is not roster:
        await pilot.press("h")
    assert app.screen.focused is roster
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        snap = app.screen.snap
        pid = next((p.id for p in snap.peers if p.name == name), None) if snap else None
        if pid is not None and roster.cursor_key == pid:
            return
        keys = [k for k, _ in roster.items]
        if loop.time() > end:
            raise AssertionError(f"cursor never reached {name}: {keys}")
        if pid is None or pid not in keys:
            await pilot.pause(0.05)
            continue
        cur = keys.index(roster.cursor_key) if roster.cursor_key in keys else 0
        await pilot.press("j" if keys.index(pid) > cur else "k")


_RECORDED: dict[str, SimpleNamespace] = {}


@pytest.fixture
async def recorded(broker, nc, space, tmp_path_factory):
    """One console session recorded with --record-seats (made once for this module): attach to
    the seat, see its known text, type a password into it, detach."""
    if "seats" in _RECORDED:
        return _RECORDED["seats"]
    path = tmp_path_factory.mktemp("seats") / "seats.jsonl.gz"
    team = Team(nc, space, seed=5, agents=2,
                schedule=TeamSchedule(crash_after=None, restart_after=None, chat_interval=0.5))
    await team.start()
    spec = SeatSpec(name=SEAT, principal_id=f"local.{SEAT}", argv=[sys.executable, "-c", PROGRAM],
                    presence=True, cols=120, rows=32)
    mgr = DemoManager(nc, space, [spec], root=str(tmp_path_factory.mktemp("mgr")))
    await mgr.start()
    args = argparse.Namespace(server=[broker.url], space=space, backfill=20, no_dms=False,
                              record=str(path), record_seats=True, max_size=None)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    record_and_notify(session, args, lambda: app)  # what cotal watch --record --record-seats runs
    keys_sent = 0
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: session.started and app.screen.snap is not None
                        and any(p.name == SEAT for p in app.screen.snap.peers), 30.0,
                        what="the seat on the roster")
            await until(pilot, lambda: "managed pty" in "\n".join(
                app.screen.query_one(Roster).line_texts()), 30.0, what="the managed marker")
            await cursor_to_name(pilot, SEAT)
            await pilot.press("a")
            await until(pilot, lambda: isinstance(app.screen, AttachScreen), what="attach screen")
            await until(pilot, lambda: KNOWN in pane_text(app) and "password:" in pane_text(app),
                        15.0, what="the seat's known text")
            await pilot.press(*SECRET, "enter")
            await until(pilot, lambda: f"got {len(SECRET)} chars" in pane_text(app), 15.0,
                        what="the program read the password")
            keys_sent = app.screen.link.keys_sent
            await pilot.press("ctrl+right_square_bracket")
            await until(pilot, lambda: type(app.screen).__name__ == "ConsoleScreen",
                        what="the console back")
            await until(pilot, lambda: mgr.live_sessions == 0, what="hand-back")
            # a peek is recorded the same way (a second stream of the seat, from its snapshot)
            await pilot.press("p")
            await until(pilot, lambda: isinstance(app.screen, AttachScreen) and app.screen.peek,
                        what="peek screen")
            await until(pilot, lambda: f"got {len(SECRET)} chars" in pane_text(app), 15.0,
                        what="the peek's snapshot")
            await pilot.press("escape")
            await until(pilot, lambda: type(app.screen).__name__ == "ConsoleScreen",
                        what="the console back")
            await until(pilot, lambda: mgr.live_sessions == 0, what="hand-back")
    finally:
        await session.stop()  # closes the recording
        await mgr.stop()
        await team.stop()
    assert session.recorder.error is None and session.recorder.closed
    assert keys_sent == len(SECRET) + 1  # the keys did go, through the session
    _RECORDED["seats"] = SimpleNamespace(path=path, recorder=session.recorder)
    return _RECORDED["seats"]


async def test_seat_output_is_recorded_and_keystrokes_are_not(recorded):
    lines = _seat_lines(recorded.path)
    evs = [x["ev"] for x in lines]
    assert evs[0] == "open" and lines[0]["seat"] == SEAT and "out" in evs and evs[-1] == "end"
    assert evs.count("open") == 2 and evs.count("end") == 2  # the attach, then the peek
    # the seat's own size, or the pane's when the console's fit (``a`` fits the seat to its pane)
    # reached the seat before the recording's open: each is the size the seat had then
    assert (lines[0]["cols"], lines[0]["rows"]) in ((120, 32), (SIZE[0], SIZE[1] - 2)), lines[0]
    sizes = {(x["cols"], x["rows"]) for x in lines if x["ev"] in ("open", "size")}
    assert (SIZE[0], SIZE[1] - 2) in sizes  # the fitted size is recorded, from the open or a resize
    output = b"".join(base64.b64decode(x["b64"]) if "b64" in x else x["u"].encode()
                      for x in lines if "b64" in x or "u" in x)
    assert KNOWN.encode() in output and f"got {len(SECRET)} chars".encode() in output
    # the password the operator typed is nowhere: not in the output, not in the file at all
    whole = gzip.decompress(recorded.path.read_bytes())
    for form in (SECRET.encode(), base64.b64encode(SECRET.encode())[:12], SECRET[:7].encode()):
        assert form not in output and form not in whole
    header = json.loads(whole.splitlines()[0])
    assert header["seats"] is True
    assert "seat lines" in recorded.recorder.summary()


async def test_replay_shows_the_seat_in_the_pane_and_follows_seeks(recorded):
    from cotal_tui.replay_app import ReplayApp
    from cotal_tui.screens.replay import ReplaySeatScreen

    rec = load_recording(str(recorded.path))
    assert rec.damage is None and rec.seats == [SEAT]
    session = ReplaySession(rec, speed=0)  # as fast as possible: straight to the end
    app = ReplayApp(session=session)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: session.replay.now >= session.replay.end, 30.0, what="the end")
        await until(pilot, lambda: app.screen.snap is not None
                    and any(p.name == SEAT for p in app.screen.snap.peers), 10.0, what="roster")
        await pilot.press("space")  # pause: the seeks below stay where they land
        await cursor_to_name(pilot, SEAT)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ReplaySeatScreen), what="seat screen")
        scr = app.screen
        assert not scr.pane.interactive and scr.pane.remote_size == (120, 32)
        await until(pilot, lambda: KNOWN in pane_text(app)
                    and f"got {len(SECRET)} chars" in pane_text(app), 10.0, what="the seat's text")
        assert "closed here" in screen_text(app)  # the detach ended the stream
        # a minute back: before the seat was opened - a fresh, empty screen, and a line saying so
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: KNOWN not in pane_text(app), 10.0, what="rebuilt screen")
        await until(pilot, lambda: "not open yet" in screen_text(app), 10.0, what="status line")
        # back to the end: rebuilt from the stream (bounded per tick) to the same screen
        await pilot.press("right_square_bracket")
        await until(pilot, lambda: f"got {len(SECRET)} chars" in pane_text(app), 10.0,
                    what="the screen again")
        await pilot.press("escape")
        await until(pilot, lambda: type(app.screen).__name__ == "ReplayScreen", what="console")
        # a peer with no recorded terminal: one notice, no screen
        other = next(p.name for p in app.screen.snap.peers if p.name != SEAT and p.kind == "agent")
        await cursor_to_name(pilot, other)
        await pilot.press("a")
        await until(pilot, lambda: f"no terminal of {other} in this recording" in screen_text(app),
                    what="notice")
        assert type(app.screen).__name__ == "ReplayScreen"


async def palette(pilot, text: str, hint: str) -> None:
    await pilot.press("colon")
    await until(pilot, lambda: type(pilot.app.screen).__name__ == "MeshPalette", what="palette")
    await pilot.press(*text)
    await until(pilot, lambda: hint in screen_text(pilot.app), what=f"hit for {text!r}")
    await pilot.press("enter")


def _replay_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cotal_tui.cli", "replay", *args],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=60)


async def test_plain_and_json_replays_summarize_seat_lines_never_raw_bytes(recorded):
    p = _replay_cli(str(recorded.path), "--plain", "--speed", "0")
    assert p.returncode == 0, p.stderr
    seat = [ln for ln in p.stdout.splitlines() if f"seat {SEAT}" in ln]
    assert any("opened  120×32" in ln for ln in seat), seat
    assert any(KNOWN in ln and "output" in ln for ln in seat), seat
    assert "\x1b" not in p.stdout and "\r" not in p.stdout
    j = _replay_cli(str(recorded.path), "--json", "--speed", "0")
    rows = [json.loads(ln) for ln in j.stdout.splitlines()]
    seats = [r for r in rows if r.get("type") == "seat"]
    assert seats[0]["event"] == "open" and seats[-1]["event"] == "end"
    assert any(KNOWN in r.get("text", "") for r in seats) and "\x1b" not in j.stdout


async def test_a_truncated_recording_with_seat_lines_replays_up_to_the_damage(recorded, tmp_path):
    whole = load_recording(str(recorded.path))
    data = recorded.path.read_bytes()
    cut = None
    for keep in [k / 40 for k in range(39, 4, -1)]:  # the first cut whose screen shows KNOWN
        path = tmp_path / f"cut{keep}.gz"
        path.write_bytes(data[: int(len(data) * keep)])
        rec = load_recording(str(path))
        if not rec.damage or len(rec.seat_lines) >= len(whole.seat_lines):
            continue
        # what the last screen kept shows: the output since its last fresh screen or snapshot
        # (a cut just after the peek's "open" keeps a blank screen: not this test's case)
        keys = [i for i, x in enumerate(rec.seat_lines) if x.ev in ("open", "reset", "snap")]
        shown = b"".join(x.data for x in rec.seat_lines[keys[-1]:] if x.ev in ("out", "snap"))
        if KNOWN.encode() in shown:
            cut = (path, rec)
            break
    assert cut is not None, "no cut kept part of the seat stream"
    path, rec = cut
    assert "up to the damage" in rec.damage and "seat lines" in rec.damage
    assert rec.damage.count(". ") == 0 and rec.damage.endswith(".")
    p = _replay_cli(str(path), "--plain", "--speed", "0")
    assert p.returncode == 0 and "Traceback" not in p.stderr
    assert rec.damage in p.stderr and p.stderr.count(rec.damage) == 1
    assert f"seat {SEAT}" in p.stdout
    # the stream up to the damage plays onto a screen
    replay = Replay(rec)
    stream = replay.seat_stream(SEAT)
    pane = TerminalPane(80, 24)
    for step in stream.plan(replay.end, 1 << 30):
        if step[0] == "reset":
            pane.reset(step[1], step[2])
        elif step[0] == "resize":
            pane.resize_remote(step[1], step[2])
        else:
            pane.feed(step[1])
    assert stream.caught_up(replay.end) and KNOWN in "\n".join(pane.content_text())


def test_record_seats_without_record_is_a_sentence(tmp_path):
    env = {**os.environ, "COTAL_HOME": str(tmp_path)}
    base = [sys.executable, "-m", "cotal_tui.cli", "watch", "--server", "nats://127.0.0.1:1",
            "--space", "main"]
    p = subprocess.run([*base, "--record-seats"], cwd=str(ROOT), env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith("cotal: --record-seats") and "--record FILE" in p.stderr
    # the line stream opens no terminals: saying so beats recording nothing
    p = subprocess.run([*base, "--json", "--record", str(tmp_path / "r.gz"), "--record-seats"],
                       cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "line stream" in p.stderr
    h = subprocess.run([sys.executable, "-m", "cotal_tui.cli", "watch", "--help"], cwd=str(ROOT),
                       env={**env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=60)
    flat = " ".join(h.stdout.split())
    assert "--record-seats" in flat and "keystrokes are never recorded" in flat


class _Link:
    """What the tap reads of a PaneLink: a name, a pane (a real TerminalPane), its state."""

    def __init__(self, name: str, cols: int = 80, rows: int = 24) -> None:
        self.name = name
        self.pane = TerminalPane(cols, rows)
        self.state = "open"
        self.closing = False
        self.end_reason = None


def _play(stream: SeatStream, t: float) -> list[str]:
    pane = TerminalPane(10, 10)
    while not stream.caught_up(t):
        for step in stream.plan(t, 4096):
            if step[0] == "reset":
                pane.reset(step[1], step[2])
            elif step[0] == "resize":
                pane.resize_remote(step[1], step[2])
            else:
                pane.feed(step[1])
    return pane.content_text()


def test_rotation_and_snapshots_keep_a_seat_stream_replayable(tmp_path):
    """A long seat stream over a small bound: the newest segment alone rebuilds the live screen
    (it starts with a snapshot), so do both together, and seeking back re-feeds at most about
    one keyframe interval."""
    t = [1_700_000_000_000.0]
    model = MeshModel("main", clock=lambda: t[0])
    path = tmp_path / "rot.jsonl.gz"
    rec = Recorder(model, str(path), max_size=64 * 1024, seats=True)
    tap = SeatTap(rec)
    link = _Link("ada", 60, 12)
    tap(link, "reset")
    for i in range(6000):
        t[0] += 10
        chunk = (f"\x1b[3{i % 8}mline {i} {os.urandom(8).hex()}\x1b[0m\r\n").encode()
        tap(link, "out", chunk)
        link.pane.feed(chunk)  # the pane parses what it was given (nothing left queued)
        if i == 5900:
            link.pane.resize_remote(70, 14)
    live = link.pane.content_text()
    tap(link, "end")
    rec.close()
    assert rec.error is None and rec.segment >= 2 and os.path.exists(str(path) + ".1")
    newest = gzip.decompress(path.read_bytes()).decode().splitlines()
    first_seat = next(json.loads(ln) for ln in newest if '"type":"seat"' in ln)
    assert first_seat["ev"] in ("snap", "reset"), first_seat  # the segment starts with the screen
    newest_alone = tmp_path / "newest.jsonl.gz"  # no FILE.1 beside it: this segment on its own
    newest_alone.write_bytes(path.read_bytes())
    r = load_recording(str(newest_alone))
    assert len(r.paths) == 1 and r.seat_lines[0].ev in ("snap", "reset")
    stream = Replay(r).seat_stream("ada")
    assert _play(stream, stream.lines[-1].t) == live
    alone = load_recording(str(path))  # both segments
    stream = Replay(alone).seat_stream("ada")
    end = stream.lines[-1].t
    assert _play(stream, end) == live
    # seeking back from the end re-feeds from the last keyframe, not from the stream's start
    stream.plan(end, 1 << 30)
    before = stream.fed
    mid = stream.lines[len(stream.lines) // 2].t
    while not stream.caught_up(mid):
        stream.plan(mid, 4096)
    assert stream.fed - before <= KEY_BYTES + 4096
    sizes = [(x.ev, x.cols, x.rows) for x in alone.seat_lines if x.ev == "size"]
    assert sizes == [("size", 70, 14)]


async def test_a_recording_error_shows_on_the_console(broker, nc, space, tmp_path, monkeypatch):
    """Disk full (``/dev/full``) at the start and the file removed mid-recording: both reach the
    status line, not only ``Recorder.error``."""
    team = Team(nc, space, seed=9, agents=3,
                schedule=TeamSchedule(crash_after=None, restart_after=None, chat_interval=0.2))
    await team.start()
    args = argparse.Namespace(server=[broker.url], space=space, backfill=5, no_dms=False)
    session = LiveSession(nc, target_from_args(args), space, session_options(args))
    app = CotalApp(session=session)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: session.started, what="started")
            full = start_recording(session, "/dev/full", app=lambda: app)
            assert full.error and full.closed
            await until(pilot, lambda: "No space left on device" in screen_text(app), 10.0,
                        what="the disk-full sentence on screen")
            path = tmp_path / "gone.jsonl.gz"
            rec = start_recording(session, str(path), app=lambda: app)
            assert rec.error is None
            await until(pilot, lambda: rec.inputs > 0, 10.0, what="inputs recorded")
            os.unlink(path)
            await until(pilot, lambda: rec.error is not None, 15.0, what="the removal noticed")
            assert "was removed" in rec.error
            await until(pilot, lambda: "was removed" in screen_text(app), 10.0,
                        what="the removal on screen")
            # the palette's ``record seats``: a recording with the terminals, then stopped
            monkeypatch.setenv("COTAL_HOME", str(tmp_path / "home"))
            await palette(pilot, "record seats", "never your keys")
            await until(pilot, lambda: active_recorder(session.model) is not None, 5.0,
                        what="recording")
            seats_rec = active_recorder(session.model)
            assert seats_rec.seats and isinstance(session.seat_sessions.tap, SeatTap)
            assert seats_rec.path.startswith(str(tmp_path / "home"))
            await palette(pilot, "record seats", "never your keys")
            await until(pilot, lambda: active_recorder(session.model) is None, 5.0, what="stopped")
            assert session.seat_sessions.tap is None
    finally:
        await session.stop()
        await team.stop()


async def test_a_segment_that_begins_mid_stream_says_so_then_catches_up(tmp_path):
    """Rotating while the pane still has output queued: the new segment's seat stream starts
    with a note (shown on the replay's status line) and gets its snapshot at the first output
    after the pane caught up."""
    t = [1_700_000_000_000.0]
    model = MeshModel("main", clock=lambda: t[0])
    path = tmp_path / "mid.jsonl.gz"
    rec = Recorder(model, str(path), seats=True)
    tap = SeatTap(rec)
    link = _Link("bo", 40, 6)
    tap(link, "reset")
    first = b"\x1b[1mhello\x1b[0m from bo\r\n"
    tap(link, "out", first)
    link.pane.queue(first)  # queued, not parsed yet (the parser runs when we yield)
    assert link.pane.pending_bytes > 0
    t[0] += 10
    rec._rotate(t[0])  # what the size bound does
    await until(lambda: link.pane.pending_bytes == 0, 5.0, what="the pane parsed")
    t[0] += 10
    more = b"second line\r\n"
    tap(link, "out", more)
    link.pane.feed(more)
    rec.close()
    seg = tmp_path / "alone.jsonl.gz"
    seg.write_bytes(path.read_bytes())
    r = load_recording(str(seg))
    assert [x.ev for x in r.seat_lines] == ["note", "snap", "out"]
    stream = Replay(r).seat_stream("bo")
    assert "resumes mid-stream" in stream.status(r.seat_lines[0].t)
    assert stream.status(r.seat_lines[-1].t) == ""
    assert _play(stream, r.seat_lines[-1].t) == link.pane.content_text()
    assert "hello from bo" in "\n".join(link.pane.content_text())
