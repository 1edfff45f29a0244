"""Record & replay: the scripted team recorded live through the real observer, replayed at 10x
with no broker, ends in the same feed, roster and NEEDS-YOU; damage replays up to itself with
one sentence; recordings rotate within their bound and hold no credential."""

from __future__ import annotations

import asyncio
import gzip
import inspect
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from types import SimpleNamespace

import nats
import pytest

from conftest import until
from cotal_tui.demo.provision import provision_space
from cotal_tui.demo.team import Team, TeamSchedule
from meshview.model.inputs import INPUTS
from meshview.model.mesh import FORWARDS, READS, REPLAYS, MeshModel
from meshview.observe.observer import Observer, ObserverOptions
from meshview.record.record import Recorder, active_recorder, parse_size, scrub
from meshview.record.replay import Player, Replay, RecordingError, ReplaySession, load_recording
from meshview.model.snapshot import Condition, PresenceRecord
from meshview.record.statecodec import checkpoint, decode, encode, restore
from meshview.wire import ChannelConfig
from meshview.wire.decode import Applied

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000_000.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def _lifecycle(snap, kind: str, name: str) -> bool:
    return any(e.kind == "lifecycle" and e.lifecycle == kind and e.from_name == name
               for e in snap.feed)


def _same_end(live: MeshModel, replayed: MeshModel, at: float) -> None:
    """The two models at the same instant: feed rows, roster and NEEDS-YOU equal."""
    live.clock = lambda: at
    replayed.clock = lambda: at
    live.touch()
    replayed.touch()
    a, b = live.snapshot(), replayed.snapshot()
    assert a.feed_base == b.feed_base and a.feed_end == b.feed_end
    for ra, rb in zip(a.feed, b.feed):
        assert ra == rb
    assert a.agents == b.agents and a.endpoints == b.endpoints
    assert a.signals == b.signals  # NEEDS-YOU (with ages), counts, stalest heartbeat
    assert a.channels == b.channels and a.dms == b.dms


_RECORDED: dict[str, SimpleNamespace] = {}


@pytest.fixture
async def recorded(broker, tmp_path_factory):
    """~12 s of the scripted team through the real observer, recorded once for this module:
    one crash (finn stops heartbeating, found by the presence sweep) and one restart (cleo, a
    new incarnation). The live model is kept to compare replays against."""
    if "team" in _RECORDED:
        return _RECORDED["team"]
    space = f"rec{os.getpid()}"
    path = str(tmp_path_factory.mktemp("recording") / "team.jsonl.gz")
    nc = await nats.connect(broker.url)
    await provision_space(nc, space)
    team = Team(nc, space, seed=7, agents=6, schedule=TeamSchedule(
        crash_after=1.0, crash_agent="finn", restart_after=2.0, restart_agent="cleo",
        chat_interval=0.25))
    model = MeshModel(space, server=broker.url)  # the console's model (bursts coalesced)
    recorder = Recorder(model, path, checkpoint_s=3.0)
    obs = Observer(nc, space, model, options=ObserverOptions(backfill=20))
    async def phase(what: str, aw, limit: float = 30.0):
        # each step bounded and named: a hang says where it is, never a bare 300 s timeout
        try:
            return await asyncio.wait_for(aw, limit)
        except asyncio.TimeoutError:
            raise AssertionError(f"recording fixture: {what} took over {limit} s") from None

    await phase("team.start", team.start())
    started = time.monotonic()
    await phase("observer.start", obs.start())
    try:
        # the crash is only seen when finn's last heartbeat is a presence TTL old
        await until(lambda: _lifecycle(model.snapshot(), "crash", "finn")
                    and _lifecycle(model.snapshot(), "incarnation", "cleo"), 40.0,
                    "the crash and the new incarnation")
    finally:
        await phase("observer.stop", obs.stop())
        recorder.close()
        await phase("team.stop", team.stop())
        await phase("nc.close", nc.close(), 10.0)
    assert recorder.error is None
    _RECORDED["team"] = SimpleNamespace(path=path, model=model, recorder=recorder,
                                        seconds=time.monotonic() - started)
    return _RECORDED["team"]


async def test_record_the_team_and_replay_at_10x(recorded):
    rec = load_recording(recorded.path)
    assert rec.damage is None
    assert len(rec.checkpoints) >= 3  # the start and one per 3 s
    kinds = {e.kind for e in rec.entries}
    assert {"message", "presence", "state", "channels"} <= kinds  # (no manager here)
    span = (rec.end - rec.start) / 1000
    assert span > 6

    replay = Replay(rec)
    player = Player(replay, speed=10)
    began = time.monotonic()
    await asyncio.wait_for(_play(player), timeout=span / 10 + 10)
    took = time.monotonic() - began
    assert span / 10 - 0.5 <= took <= span / 10 + 3, (span, took)  # paced at 10x

    snap = replay.model.snapshot()
    assert _lifecycle(snap, "crash", "finn") and _lifecycle(snap, "incarnation", "cleo")
    _same_end(recorded.model, replay.model, replay.end)
    print(f"\nrecorded {span:.1f}s, {len(rec.entries)} inputs, {len(rec.checkpoints)} checkpoints, "
          f"{os.path.getsize(recorded.path)} bytes; replayed at 10x in {took:.2f}s")


async def test_the_recorded_demo_carries_its_frames(recorded):
    """The scripted team publishes an event plane (issue 37 item 8): its frames are recorded
    as the messages they are, one per frame, from more than one agent."""
    with gzip.open(recorded.path, "rt") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    frames = [line for line in lines if line.get("type") == "in" and line.get("k") == "message"
              and '"ag-ui.frame"' in json.dumps(line)]
    assert len(frames) >= 6, len(frames)
    senders = {m for line in frames for m in ("local.ada", "local.bram", "local.cleo", "local.dax",
                                                "local.eve", "local.finn") if m in json.dumps(line)}
    assert len(senders) >= 3, senders


async def _play(player: Player) -> None:
    task = asyncio.create_task(player.run(0.02))
    try:
        await player.done.wait()
    finally:
        task.cancel()


async def test_seeking_back_and_forth_ends_in_the_same_place(recorded):
    """Seeking back restores a checkpoint written live, so this also proves checkpoints exact."""
    rec = load_recording(recorded.path)
    replay = Replay(rec)
    replay.seek(replay.end)
    full = tuple(replay.model.snapshot().feed)
    mid = replay.start + (replay.end - replay.start) / 2
    replay.seek(mid)
    assert replay.model.feed_end < len(full) and replay.now == mid
    assert all(e.received <= mid for e in replay.model.snapshot().feed)
    # step by event: one event back, then forward again
    n, total = replay.event_number()
    replay.step(-1)
    assert replay.event_number()[0] == n - 1
    replay.step(1)
    assert replay.event_number()[0] == n
    # from a position between two events (the last input applied is not an event, as after
    # most seeks), one step back is still one event back
    marks = set(replay.marks)
    between = next(i for i in range(len(rec.entries) - 1)
                   if i not in marks and sum(1 for m in marks if m < i) >= 2
                   and rec.entries[i + 1].t > rec.entries[i].t)
    replay.seek(rec.entries[between].t)
    n = replay.event_number()[0]
    assert replay.pos - 1 not in marks
    replay.step(-1)
    assert replay.event_number()[0] == n - 1
    replay.step(1)
    assert replay.event_number()[0] == n
    replay.seek(replay.end)
    _same_end(recorded.model, replay.model, replay.end)
    assert replay.event_number() == (total, total)


async def test_replay_console_keys_and_timeline(recorded):
    from cotal_tui.replay_app import ReplayApp
    from cotal_tui.screens.replay import Timeline

    rec = load_recording(recorded.path)
    session = ReplaySession(rec, speed=10)
    app = ReplayApp(session=session)
    async with app.run_test(size=(140, 40)) as pilot:
        at_10x = (rec.end - rec.start) / 10_000  # ms of recording, played at 10x, in seconds
        await until(pilot, lambda: session.replay.at_end, 20.0 + at_10x, "the end of the replay")
        screen = app.screen
        assert type(screen).__name__ == "ReplayScreen"
        await until(pilot, lambda: screen.snap is not None
                    and screen.snap.feed_end == recorded.model.feed_end, 5.0, "the last rows")
        assert "■ end" in screen.query_one(Timeline).describe()[2]
        await pilot.press("space")
        assert session.player.paused
        n, total = session.replay.event_number()
        # the first ← lands on an event: the last one itself when the recording ends with a
        # non-event input after it (a state line, a checkpoint), else the one before
        await pilot.press("left")
        m = session.replay.event_number()[0]
        assert m in (n, n - 1)
        await pilot.press("left")
        assert session.replay.event_number()[0] == m - 1
        await until(pilot, lambda: screen.snap.feed_end <= recorded.model.feed_end, 5.0, "drain")
        await pilot.press("left_square_bracket")
        assert session.replay.now == session.replay.start  # the recording is under a minute
        assert session.replay.event_number()[0] == 0
        await pilot.press("right_square_bracket")
        assert session.replay.at_end
        left, right, state = screen.query_one(Timeline).describe()
        assert f"event {total}/{total}" in right and "paused" in state or "end" in state
        # nothing can be sent from a replay
        assert "replay" in screen.refusal()


def _cut(path: str, out: Path, keep: float) -> str:
    data = Path(path).read_bytes()
    out.write_bytes(data[: int(len(data) * keep)])
    return str(out)


def _flip(path: str, out: Path, at: float) -> str:
    data = bytearray(Path(path).read_bytes())
    k = int(len(data) * at)
    for i in range(k, k + 64):
        data[i] ^= 0xA5
    out.write_bytes(bytes(data))
    return str(out)


def _replay_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cotal_tui.cli", "replay", *args],
                          cwd=str(ROOT), capture_output=True, text=True, timeout=60)


async def test_damaged_recordings_replay_up_to_the_damage(recorded, tmp_path):
    whole = load_recording(recorded.path)
    for name, path in (("cut", _cut(recorded.path, tmp_path / "cut.gz", 0.6)),
                       ("flipped", _flip(recorded.path, tmp_path / "flip.gz", 0.7))):
        rec = load_recording(path)
        assert rec.damage and rec.damage.count(". ") == 0 and rec.damage.endswith(".")
        assert "up to the damage" in rec.damage, name
        assert 0 < len(rec.entries) < len(whole.entries), name
        replay = Replay(rec)
        replay.seek(replay.end)
        # what it did replay is exactly the live run up to there
        live_rows = [e for e in recorded.model.snapshot().feed if e.index < replay.model.feed_end]
        assert [r.id for r in replay.model.snapshot().feed] == [r.id for r in live_rows][
            -len(replay.model.snapshot().feed):]
        p = _replay_cli(path, "--plain", "--speed", "0")
        assert p.returncode == 0, p.stderr
        assert "Traceback" not in p.stderr and rec.damage in p.stderr
        assert p.stdout.count("\n") > 3
    # not a recording at all, or nothing left: one sentence, exit 1
    junk = tmp_path / "junk.gz"
    junk.write_bytes(b"this is not gzip")
    for path in (str(junk), _cut(recorded.path, tmp_path / "tiny.gz", 0.001),
                 str(tmp_path / "missing.gz")):
        p = _replay_cli(path, "--json")
        assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
        assert p.stderr.startswith("cotal: ") and "Traceback" not in p.stderr
        with pytest.raises(RecordingError):
            load_recording(path)


def test_an_input_that_cannot_be_applied_ends_the_replay_with_a_sentence(tmp_path):
    c = Clock()
    m = MeshModel("main", clock=c)
    path = str(tmp_path / "r.gz")
    r = Recorder(m, path)
    for i in range(5):
        c.t += 100
        m.apply_message(Applied(kind="channel", id=f"m{i}", ts=c.t, from_id="a", from_name="a",
                                text=str(i), channel="general", received=c.t))
    r.close()
    lines = gzip.decompress(Path(path).read_bytes()).decode().splitlines()
    bad = json.loads(lines[4])
    bad["a"][0]["f"]["nonsense"] = 1  # valid JSON, not a valid input (an unknown field)
    lines[4] = json.dumps(bad)
    Path(path).write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    replay = Replay(load_recording(path))
    replay.seek(replay.end)
    assert replay.model.feed_end == 2 and "cannot be applied" in replay.damage
    assert replay.damage.endswith("replaying up to there.")


def test_recordings_rotate_within_their_bound(tmp_path):
    c = Clock()
    m = MeshModel("main", clock=c, feed_cap=200)
    path = str(tmp_path / "big.jsonl.gz")
    bound = 64 * 1024
    r = Recorder(m, path, max_size=bound, checkpoint_s=5)
    for i in range(6000):
        c.t += 50
        m.apply_message(Applied(kind="channel", id=f"m{i}", ts=c.t, from_id=f"p{i % 7}",
                                from_name=f"agent-{i % 7}", text=os.urandom(6).hex(),
                                channel=f"ch{i % 3}", received=c.t))
        if i % 10 == 0:
            m.apply_presence(PresenceRecord(id="p1", name="agent-1", ts=c.t,
                                            status="waiting" if i % 20 else "working"),
                             received=c.t)
    m.tick(c.t)
    r.close()
    assert r.segment >= 2 and r.error is None
    assert os.path.exists(path + ".1") and not os.path.exists(path + ".2")
    on_disk = os.path.getsize(path) + os.path.getsize(path + ".1")
    assert on_disk <= bound + 16 * 1024, on_disk  # one flush of slack past the bound
    rec = load_recording(path)  # both segments, each starting from a checkpoint
    assert len(rec.paths) == 2 and rec.damage is None
    alone = load_recording(path + ".1")
    assert alone.header["segment"] == rec.header["segment"]
    replay = Replay(rec)
    replay.seek(replay.end)
    _same_end(m, replay.model, c.t)


async def test_no_credentials_in_a_recording(broker, space, tmp_path):
    """--record through a server URL with a user and password: the file never holds them."""
    secret = "s3cr3t-Pw-7781"
    path = tmp_path / "cred.jsonl.gz"
    url = broker.url.replace("nats://", f"nats://alice:{secret}@")
    env = {**os.environ, "COTAL_HOME": str(tmp_path)}
    p = subprocess.Popen([sys.executable, "-m", "cotal_tui.cli", "watch", "--json", "--server",
                          url, "--space", space, "--record", str(path)], cwd=str(ROOT),
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        await until(lambda: path.exists() and path.stat().st_size > 200, 30.0, "the recording")
        await until(lambda: b"set_tap" in _readable(path), 30.0, "the first inputs")
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(10)
    assert p.returncode == 0
    header = json.loads(gzip.decompress(path.read_bytes()).decode().splitlines()[0])
    assert header["server"].startswith("nats://***@127.0.0.1:")
    # connection strings reaching the model are scrubbed as they are recorded
    c = Clock()
    m = MeshModel("main", clock=c, server="nats://***@127.0.0.1:4222")
    r = Recorder(m, str(tmp_path / "m.gz"))
    m.set_warning(f"could not reach nats://bob:{secret}@10.0.0.1:4222")
    m.set_connection("reconnecting", error=f"auth failed for nats://{secret}@host")
    m.set_warning("seed SUAIBDPBAUTWCWBKIO6XTXB2OBKQQOBLEJBLIQD4YHQV2JO3XE5PAQJFFL4 leaked?")
    m.set_warning("jwt eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJqdGkiOiJ4In0.c2ln")
    r.close()
    for f in (tmp_path / "m.gz", path):
        text = gzip.decompress(f.read_bytes()).decode()
        assert secret not in text and "SUAIBDPBAU" not in text and "eyJqdGki" not in text
    assert scrub(f"nats://u:{secret}@h") == "nats://***@h"


def _readable(path: Path) -> bytes:
    """What a recording being written holds so far (up to its last sync point)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        return d.decompress(path.read_bytes())
    except zlib.error:
        return b""


def test_every_model_method_is_an_input_a_read_or_a_forward():
    public = {n for n, v in inspect.getmembers(MeshModel) if not n.startswith("_")
              and callable(v)}
    unknown = public - set(INPUTS) - READS - FORWARDS - REPLAYS
    assert not unknown, f"register these MeshModel methods as inputs (@model_input) or list them in READS/FORWARDS/REPLAYS (meshview/model/mesh.py): {unknown}"


def test_state_codec_round_trips_what_json_cannot_say():
    from collections import OrderedDict, deque

    import msgspec

    from meshview.wire.messages import DataPart, TextPart

    v = {"t": (1, 2.5, "x"), "k": {("a", "b"): [1, {"$x": None}]}, "s": {1, 2},
         "q": deque([1, 2], maxlen=5), "o": OrderedDict([(("x",), 1)]), "f": float("inf"),
         "u": msgspec.UNSET, "p": (TextPart(text="hi"), DataPart(data={"$not": "a tag"})),
         "c": ChannelConfig(replay=False), "r": PresenceRecord(id="a", name="n",
                                                                 condition=Condition("input"))}
    back = decode(json.loads(json.dumps(encode(v))))
    assert back == v and type(back["q"]) is deque and back["q"].maxlen == 5
    with pytest.raises(ValueError):
        decode({"$o": "os:system", "f": {}})  # only the model's own types are ever built
    with pytest.raises(ValueError):
        decode({"$o": "subprocess:Popen", "f": {}})


def test_checkpoint_restores_a_model_in_place():
    c = Clock()
    m = MeshModel("main", clock=c)
    m.apply_presence(PresenceRecord(id="a", name="ada", ts=c.t, status="waiting",
                                    condition=Condition("approval", since=c.t)), received=c.t)
    m.apply_message(Applied(kind="dm", id="d1", ts=c.t, from_id="a", from_name="ada", text="hi",
                            to="b",
                            received=c.t))
    state = json.loads(json.dumps(checkpoint(m)))
    other = MeshModel("main", clock=c)
    other.version = 99
    restore(other, state)
    assert other.version == 100  # only grows: a console holding it notices
    c.t += 600
    m.tick(c.t)
    other.tick(c.t)  # the open DM burst came along and lands the same
    assert tuple(m.snapshot().feed) == tuple(other.snapshot().feed)
    assert m.snapshot().signals == other.snapshot().signals


def test_the_palette_record_verb_starts_and_stops(tmp_path, monkeypatch):
    from cotal_tui.recording import toggle_recording

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    from support.console import StaticSession

    model = MeshModel("main")
    notices = []
    session = StaticSession(model, space="main")
    app = SimpleNamespace(console_screen=lambda: SimpleNamespace(session=session),
                          notify_line=lambda text, error=False: notices.append((text, error)))
    msg = toggle_recording(app)
    assert msg.startswith("recording to ") and active_recorder(model) is not None
    path = active_recorder(model).path
    assert path.startswith(str(tmp_path / "recordings")) and path.endswith(".jsonl.gz")
    model.set_warning("something")
    msg = toggle_recording(app)
    assert msg.startswith("recording stopped: ") and active_recorder(model) is None
    assert load_recording(path).entries[-1].op == "set_warning"
    assert notices[-1] == (msg, False)
    nowhere = SimpleNamespace(console_screen=lambda: None, notify_line=lambda *a: None)
    assert toggle_recording(nowhere) == "record: open a space first"
    assert parse_size("100M") == 100 * 1024 * 1024
    with pytest.raises(ValueError):
        parse_size("12 apples")
