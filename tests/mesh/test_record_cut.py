"""Cut and grep on the scripted team's recording (the fixture of test_record): a window written
with ``--from/--to --out`` replays alone and ends where the same window of the whole recording
ends (feed, roster, NEEDS-YOU); ``--grep`` finds a message's text with its time and exits 1 when
nothing matches."""

from __future__ import annotations

import os
import subprocess
import sys

from test_record import ROOT, _same_end, recorded  # noqa: F401 - the module's recording fixture

from meshview.record.recordtools import clock, cut, grep, parse_offset
from meshview.record.replay import RecordingError, Replay, load_recording


def test_offsets_parse_and_bad_ones_are_named():
    assert parse_offset("00:10") == 10_000 and parse_offset("1:02:03") == 3_723_000
    assert parse_offset("90s") == 90_000 and parse_offset("12.5") == 12_500
    for bad in ("", "ten", "1:2:3:4", "-5"):
        try:
            parse_offset(bad)
        except ValueError as e:
            assert "not a time offset" in str(e)
        else:
            raise AssertionError(bad)


async def test_a_cut_window_replays_alone_and_equals_that_window_of_the_whole(recorded, tmp_path):  # noqa: F811
    whole = load_recording(recorded.path)
    span = whole.end - whole.start
    a, b = span * 0.3, span * 0.8
    out = str(tmp_path / "part.jsonl.gz")
    r = cut(whole, a, b, out)
    part = load_recording(out)
    assert part.damage is None and part.header["cut"]["from"] == whole.header["recording"]
    assert part.start == whole.start + a and 0 < r.inputs < len(whole.entries)
    assert all(whole.start + a <= e.t <= whole.start + b for e in part.entries)
    rp, rw = Replay(part), Replay(whole)
    rp.seek(rp.end)
    rw.seek(whole.start + b)
    at = whole.start + b
    _same_end(rw.model, rp.model, at)
    # seeking back inside the cut restores its own checkpoints and still agrees
    mid = whole.start + (a + b) / 2
    rp.seek(mid)
    rw.seek(mid)
    _same_end(rw.model, rp.model, mid)


async def test_bad_windows_are_sentences(recorded, tmp_path):  # noqa: F811
    whole = load_recording(recorded.path)
    for a, b, want in ((5000, 1000, "end after it starts"), (10 ** 9, 2 * 10 ** 9, "past its end")):
        try:
            cut(whole, a, b, str(tmp_path / "x.gz"))
        except RecordingError as e:
            assert want in str(e)
        else:
            raise AssertionError((a, b))
    try:
        cut(whole, 0, 1000, str(tmp_path / "no" / "such" / "dir.gz"))
    except RecordingError as e:
        assert "cannot write" in str(e)
    else:
        raise AssertionError("an unwritable output must be refused")


async def test_grep_finds_a_message_with_its_time_and_the_cli_exits_1_on_no_match(recorded):  # noqa: F811
    whole = load_recording(recorded.path)
    msgs = [m for m in grep(whole, "finn")]
    assert msgs and all("finn" in m.line.casefold() for m in msgs)
    assert [m.t for m in msgs] == sorted(m.t for m in msgs)
    assert any("heartbeat lapsed" in m.line for m in msgs)  # the crash row the model derived
    env = dict(os.environ, COTAL_HOME=os.path.dirname(recorded.path))
    p = subprocess.run([sys.executable, "-m", "cotal_tui", "replay", recorded.path, "--grep", "FINN"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and p.stdout.splitlines()[0].startswith(clock(msgs[0].offset))
    assert len(p.stdout.splitlines()) == len(msgs) and "\x1b" not in p.stdout
    p = subprocess.run([sys.executable, "-m", "cotal_tui", "replay", recorded.path, "--grep",
                        "no-such-text-anywhere-4711"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 1 and p.stdout == ""
