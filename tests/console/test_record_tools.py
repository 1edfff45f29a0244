"""``cotal replay FILE --seat NAME --asciicast OUT`` and a cut window with seat terminals: the
cast parses as asciinema v2 (header, then ``[time, code, data]`` events in time order) and its
concatenated output, fed to a fresh pane, reproduces the seat's final screen; a cut window's seat
screens are rebuilt at its start."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from test_record_seats import _Link, _play

from cotal_tui.recording import SeatTap
from meshview.model.mesh import MeshModel
from meshview.record.record import Recorder
from meshview.record.recordtools import asciicast, cut
from meshview.record.replay import RecordingError, Replay, load_recording
from widgets.terminal_pane import TerminalPane

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000.0


def _seat_recording(tmp_path, *, lines: int = 400, resize_at: int = 300) -> tuple[str, list[str]]:
    t = [T0]
    model = MeshModel("main", clock=lambda: t[0])
    path = str(tmp_path / "seats.jsonl.gz")
    rec = Recorder(model, path, seats=True)
    tap = SeatTap(rec)
    link = _Link("ada", 60, 12)
    tap(link, "reset")
    for i in range(lines):
        t[0] += 25
        # a multi-byte character split across two output lines, colour, a cursor move
        chunk = f"\x1b[3{i % 8}mline {i} é\x1b[0m\r\n".encode()
        half = len(chunk) // 2 if i % 7 == 0 else len(chunk)
        for part in (chunk[:half], chunk[half:]):
            if part:
                tap(link, "out", part)
                link.pane.feed(part)
        if i == resize_at:
            link.pane.resize_remote(70, 14)
    live = link.pane.content_text()
    tap(link, "end")
    rec.close()
    assert rec.error is None
    return path, live


def test_the_asciicast_parses_as_v2_and_reproduces_the_final_screen(tmp_path):
    path, live = _seat_recording(tmp_path)
    rec = load_recording(path)
    buf = io.StringIO()
    n = asciicast(rec, "ada", buf)
    rows = buf.getvalue().splitlines()
    header = json.loads(rows[0])
    assert header["version"] == 2 and (header["width"], header["height"]) == (60, 12)
    assert isinstance(header["timestamp"], int)
    events = [json.loads(r) for r in rows[1:]]
    assert len(events) == n > 400
    times = [e[0] for e in events]
    assert times == sorted(times) and times[0] == 0
    assert all(isinstance(e[0], float | int) and e[1] in ("o", "r", "m") and isinstance(e[2], str)
               for e in events)
    assert [e[2] for e in events if e[1] == "r"] == ["70x14"]
    # what a player does: feed every "o" in order, resize on "r"
    pane = TerminalPane(header["width"], header["height"])
    for _, code, data in events:
        if code == "o":
            pane.feed(data.encode("utf-8"))
        elif code == "r":
            c, r = data.split("x")
            pane.resize_remote(int(c), int(r))
    assert pane.content_text() == live
    assert "é" in "".join(live)  # the split character was joined, not replaced


def test_asciicast_of_a_seat_that_was_not_recorded_names_the_recorded_ones(tmp_path):
    path, _ = _seat_recording(tmp_path, lines=5, resize_at=-1)
    rec = load_recording(path)
    try:
        asciicast(rec, "bob", io.StringIO())
    except RecordingError as e:
        assert "bob" in str(e) and "ada" in str(e)
    else:
        raise AssertionError("an unknown seat must be refused by name")


def test_the_cli_writes_the_cast_and_refuses_half_flags(tmp_path):
    path, live = _seat_recording(tmp_path, lines=50, resize_at=-1)
    out = tmp_path / "ada.cast"
    env = dict(os.environ, COTAL_HOME=str(tmp_path / "home"))
    p = subprocess.run([sys.executable, "-m", "cotal_tui", "replay", path, "--seat", "ada",
                        "--asciicast", str(out)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "wrote" in p.stderr and json.loads(out.read_text().splitlines()[0])["version"] == 2
    p = subprocess.run([sys.executable, "-m", "cotal_tui", "replay", path, "--asciicast", str(out)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and "--seat NAME" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "cotal_tui", "replay", path, "--from", "00:01"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and "--out FILE" in p.stderr
    p = subprocess.run([sys.executable, "-m", "cotal_tui", "replay", path, "--from", "soon", "--out", "x"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and "not a time offset" in p.stderr


def test_a_cut_window_rebuilds_each_seat_screen_at_its_start(tmp_path):
    path, live = _seat_recording(tmp_path)
    whole = load_recording(path)
    span = whole.end - whole.start
    mid = span / 2
    part = str(tmp_path / "part.jsonl.gz")
    r = cut(whole, mid, span, part)
    alone = load_recording(part)
    assert alone.start == whole.start + mid and alone.damage is None and r.seat_lines > 0
    # the seat's screen at the window's start is the whole recording's screen at that time
    s_whole, s_part = Replay(whole).seat_stream("ada"), Replay(alone).seat_stream("ada")
    assert _play(s_part, alone.start) == _play(Replay(whole).seat_stream("ada"), whole.start + mid)
    # and at the end both show the live screen
    assert _play(s_part, alone.end) == _play(s_whole, whole.end) == live
