"""Event-plane benchmark (issue 37 "Performance"): agents streaming Claude-cadence turns as
``ag-ui.frame`` parts, measured side by side in one run, at 50 agents and then at 500.

Load (publisher processes, not measured): every agent runs turns of ``--turn-seconds`` (~30 s,
jittered) on its own event channel ``events.local.<key>`` (subject
``cotal.<space>.chat.local.<key>.events.local.<key>``): a run-open frame (``RUN_STARTED``, the
prompt on a human turn), 4-8 tool frames (``TOOL_CALL_START``/``END``, half with a short
assistant text), a stop flush (the closing text) and a close frame (``RUN_FINISHED``, now and
then ``RUN_ERROR "run failed"``), events.md §2, §2.4; seq 1, 2, ... per chain, never skipped.
On top: presence heartbeats every 2 s through the presence KV and ``--chat-rate`` channel
messages/s across 10 channels.

Measured, per agent count:

1. CPU (% of a core, /proc) of the observer (decode + model + frame ledger, a snapshot per
   batch, its own process) against a bare nats-py subscriber on the same subjects that only
   counts (its own process), over the same window: the ratio, goal <= 2.5x;
2. the console (the real Textual app, headless, its own process): % of a core with the roster
   only, then with the activity lens open on one agent (palette ``activity @<name>``), goal
   <= 30 % at 500 agents. When the palette opens no lens (the command does not exist in this
   tree) the line says "lens not available" and only the roster figure is measured. Frames
   painted per second are printed beside each (``--profile``: where the roster window goes).
   On 2+ CPUs the load (broker, publishers) is pinned to the last CPU and the console to the
   first for this phase (``--no-pin``: not);
3. key -> repaint: the time from a key sent to the first frame painted that shows the cursor
   moved, on the roster (``j``/``k``) and in the lens (``down``/``up``): p95 < 25 ms, worst
   < 50 ms;
4. (in a child process, no broker) the frame ledger's memory by tracemalloc after N turns per
   agent, frames decoded by the real wire decoder: bytes/agent, and that it stays flat as the
   turns grow (bounded); also one agent's lens ledger (``keep_frames=300``).

At these rates (a few hundred msgs/s) both processes of item 1 spend much of their CPU on fixed
costs (the event loop, timers), so the per-message figure is printed too, and item 4 times the
hot path alone: the wire decode and the ledger's ``admit`` per frame.

Usage: .venv/bin/python bench/events.py [--agents 50,500] [--turn-seconds 30] [--seconds 30]
       .venv/bin/python bench/events.py --quick        # a few seconds per phase, a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

PROTOCOL = "ag-ui/0.0.57"
HEARTBEAT_S = 2.0
TICK_S = 0.02
CHANNELS = 10
GOAL_RATIO = 2.5
GOAL_CONSOLE_PCT = 30.0
GOAL_P95_MS = 25.0
GOAL_WORST_MS = 50.0
LENS_CMD = "activity @{name}"
TOOLS = ("Bash", "Read", "Edit", "Grep", "Glob", "Write", "TodoWrite", "WebFetch")
SOURCES = ("human", "channel", "channel", "notification", "auto-continuation")


def agent_key(i: int) -> str:
    return f"a{i:04d}"


def agent_id(i: int) -> str:
    return f"local.{agent_key(i)}"


def say(*a: object) -> None:
    print("  ..", *a, file=sys.stderr, flush=True)


def _hex(rng: random.Random, bits: int = 128) -> str:
    return f"{rng.getrandbits(bits):0{bits // 4}x}"


def _ev(kind: str, ts: int, **fields: Any) -> dict:
    return {"type": kind, **fields, "timestamp": ts}


def _text(rng: random.Random, role: str, text: str, ts: int) -> list[dict]:
    mid = f"{_hex(rng, 64)}#0"
    return [_ev("TEXT_MESSAGE_START", ts, messageId=mid, role=role),
            _ev("TEXT_MESSAGE_CONTENT", ts, messageId=mid, delta=text),
            _ev("TEXT_MESSAGE_END", ts, messageId=mid)]


def turn_frames(rng: random.Random, thread_id: str, run_id: str, duration: float,
                ts: Callable[[], int]) -> Iterator[tuple[float, list[dict], str | None]]:
    """One Claude Code turn as frames (events.md §2.4): ``(seconds after the turn began,
    events, tool started)``, 4-8 tool frames between the run-open and the stop flush + close."""
    tools = rng.randint(4, 8)
    step = duration / (tools + 2)
    source = rng.choice(SOURCES)
    opened = [_ev("RUN_STARTED", ts(), threadId=thread_id, runId=run_id,
                  cotal={"turnSource": source, "runIdSource": "connector"})]
    if source == "human":
        opened += _text(rng, "user", "fix the failing test in the session store", ts())
    yield 0.0, opened, None
    for k in range(tools):
        tool = rng.choice(TOOLS)
        events = _text(rng, "assistant", "Looking at the callers first.", ts()) \
            if rng.random() < 0.5 else []
        call = "toolu_" + _hex(rng, 96)
        events += [_ev("TOOL_CALL_START", ts(), toolCallId=call, toolCallName=tool),
                   _ev("TOOL_CALL_END", ts(), toolCallId=call)]
        yield step * (k + 1) * rng.uniform(0.9, 1.1), events, tool
    at = step * (tools + 1)
    yield at, _text(rng, "assistant", "Done: the session store is fixed and covered.", ts()), None
    if rng.random() < 0.1:
        yield at + 0.3, [_ev("RUN_ERROR", ts(), message="run failed")], None
    else:
        yield at + 0.3, [_ev("RUN_FINISHED", ts(), threadId=thread_id, runId=run_id)], None


def envelope(space: str, i: int, channel: str, parts: list[dict], mid: str, ts: int) -> bytes:
    return json.dumps({"id": mid, "ts": ts, "space": space,
                       "from": {"id": agent_id(i), "name": agent_key(i), "role": "bench"},
                       "channel": channel, "parts": parts}, separators=(",", ":")).encode()


def frame_part(thread_id: str, run_id: str, epoch: str, seq: int, events: list[dict]) -> dict:
    return {"kind": "ag-ui.frame", "protocol": PROTOCOL, "threadId": thread_id, "runId": run_id,
            "epoch": epoch, "seq": seq, "events": events}


def _now_ms() -> int:
    return int(time.time() * 1000)


# ------------------------------------------------------------------ publisher (not measured)


class _Seat:
    """One agent's writer chain and its turn in progress."""

    def __init__(self, i: int, seed: int) -> None:
        self.i = i
        self.rng = random.Random(f"{seed}/{i}")
        self.thread_id = _hex(self.rng)
        self.epoch = _hex(self.rng, 64)
        self.seq = 0
        self.run_id = ""
        self.began = 0.0
        self.script: Iterator[tuple[float, list[dict], str | None]] | None = None
        self.pending: tuple[float, list[dict], str | None] | None = None
        self.tool: str | None = None


async def role_pub(url: str, space: str, lo: int, hi: int, turn_s: float, chat_rate: float,
                   tmp: str) -> None:
    """Agents ``lo..hi-1``: their turns' frames, their heartbeats, their share of the chat;
    until ``tmp/stop`` appears. Core NATS publishes with ``Nats-Msg-Id`` (the CHAT stream keeps
    them, as a connector's JetStream publishes would)."""
    import nats

    from meshview.wire.names import bucket_names
    from meshview.wire.subjects import chat_subject

    nc = await nats.connect(url, pending_size=32 * 1024 * 1024)
    kv = f"$KV.{bucket_names(space).presence}."
    seats = [_Seat(i, 37) for i in range(lo, hi)]
    subjects = {s.i: chat_subject(space, agent_id(s.i), f"events.{agent_id(s.i)}") for s in seats}
    heap: list[tuple[float, int]] = []
    t0 = time.monotonic()
    for s in seats:  # each agent joins its first turn at a random point: steady from the start
        s.run_id = _hex(s.rng)
        s.script = turn_frames(s.rng, s.thread_id, s.run_id, turn_s * s.rng.uniform(0.7, 1.3),
                               _now_ms)
        s.began = t0 - s.rng.uniform(0.0, turn_s)
        s.pending = next(s.script)
        while s.pending is not None and s.began + s.pending[0] < t0:
            s.pending = next(s.script, None)  # before the start: never sent, no seq spent
        if s.pending is None:
            s.script = None
            heapq.heappush(heap, (t0 + s.rng.uniform(0.0, 0.2 * turn_s), s.i))
        else:
            heapq.heappush(heap, (s.began + s.pending[0], s.i))
    by_i = {s.i: s for s in seats}
    counts = {"frames": 0, "runs": 0, "presence": 0, "chat": 0}
    n = hi - lo
    per_tick = max(1, round(n * TICK_S / HEARTBEAT_S))
    k = 0
    chat_acc = 0.0
    next_tick = t0
    next_stop_check = t0
    stop = os.path.join(tmp, "stop")
    open(os.path.join(tmp, f"pub-ready-{lo}"), "w").close()
    while True:
        now = time.monotonic()
        if now >= next_stop_check:
            if os.path.exists(stop):
                break
            next_stop_check = now + 0.5
        while heap and heap[0][0] <= now:
            _, i = heapq.heappop(heap)
            s = by_i[i]
            if s.script is None:  # a new turn
                s.run_id = _hex(s.rng)
                s.began = now
                s.script = turn_frames(s.rng, s.thread_id, s.run_id,
                                       turn_s * s.rng.uniform(0.7, 1.3), _now_ms)
                s.pending = next(s.script)
                counts["runs"] += 1
            assert s.pending is not None
            _, events, tool = s.pending
            s.seq += 1
            if tool is not None:
                s.tool = tool
            ts = _now_ms()
            mid = f"{s.thread_id[:16]}-{s.seq:012d}"
            data = envelope(space, i, f"events.{agent_id(i)}",
                            [frame_part(s.thread_id, s.run_id, s.epoch, s.seq, events)], mid, ts)
            await nc.publish(subjects[i], data, headers={"Nats-Msg-Id": mid})
            counts["frames"] += 1
            s.pending = next(s.script, None)
            if s.pending is None:  # closed: idle a little, then the next turn
                s.script, s.tool = None, None
                heapq.heappush(heap, (now + turn_s * s.rng.uniform(0.0, 0.2), i))
            else:
                heapq.heappush(heap, (s.began + s.pending[0], i))
        ts = _now_ms()
        for _ in range(per_tick):
            s = seats[k]
            k = (k + 1) % n
            working = s.script is not None
            rec = {"card": {"id": agent_id(s.i), "name": agent_key(s.i), "kind": "agent",
                            "role": "bench", "meta": {"connector": "claude-code"}},
                   "status": "working" if working else "idle", "ts": ts,
                   "lifecycleUid": f"{s.i:026d}"}
            if working:
                rec["activity"] = f"{s.tool}: the session store" if s.tool else "the session store"
            await nc.publish(kv + agent_id(s.i), json.dumps(rec, separators=(",", ":")).encode())
            counts["presence"] += 1
        chat_acc += chat_rate * TICK_S
        while chat_acc >= 1.0:
            chat_acc -= 1.0
            counts["chat"] += 1
            s = seats[random.randrange(n)]
            ch = f"c{random.randrange(CHANNELS):02d}"
            mid = f"chat-{lo}-{counts['chat']}-{ts}"
            await nc.publish(chat_subject(space, agent_id(s.i), ch), envelope(
                space, s.i, ch, [{"kind": "text", "text": f"status update {counts['chat']}"}],
                mid, ts), headers={"Nats-Msg-Id": mid})
        next_tick += TICK_S
        delay = next_tick - time.monotonic()
        if delay < -1.0:
            next_tick = time.monotonic()  # fell behind (a busy box): no burst to catch up
        await asyncio.sleep(max(0.0, delay))
    await nc.flush()
    await nc.close()
    print(json.dumps(counts), flush=True)


# ------------------------------------------------------------------ observer and baseline


async def _count_file(tmp: str, name: str, get: Callable[[], int]) -> None:
    """Writes ``get()`` to ``tmp/name`` every 0.2 s until ``tmp/stop-watch`` appears."""
    path = os.path.join(tmp, name)
    while not os.path.exists(os.path.join(tmp, "stop-watch")):
        with open(path + ".tmp", "w") as f:
            f.write(str(get()))
        os.replace(path + ".tmp", path)
        await asyncio.sleep(0.2)


async def role_bare(url: str, space: str, tmp: str) -> None:
    """The baseline: a bare nats-py subscriber on the observer's subjects that only counts."""
    import nats

    from meshview.wire.names import bucket_names

    nc = await nats.connect(url)
    count = 0

    async def cb(msg: Any) -> None:
        nonlocal count
        count += 1

    for subj in (f"cotal.{space}.>", f"$KV.{bucket_names(space).presence}.>"):
        await nc.subscribe(subj, cb=cb, pending_msgs_limit=2_000_000,
                           pending_bytes_limit=1024 * 1024 * 1024)
    await nc.flush()
    open(os.path.join(tmp, "bare-ready"), "w").close()
    await _count_file(tmp, "bare-count", lambda: count)
    await nc.close()


async def role_observer(url: str, space: str, tmp: str) -> None:
    """The observer as the console runs it (decode, model, frame ledger), a snapshot per batch."""
    from meshview.link.connect import ConnectTarget, connect
    from meshview.model.mesh import MeshModel
    from meshview.observe.observer import Observer, ObserverOptions

    nc, _ = await connect(ConnectTarget((url,), space))
    model = MeshModel(space)
    obs = Observer(nc, space, model, options=ObserverOptions(backfill=0))
    def listener(m: MeshModel) -> None:
        m.snapshot()  # a UI takes a snapshot per batch

    obs.add_listener(listener)
    await obs.start()
    open(os.path.join(tmp, "obs-ready"), "w").close()
    await _count_file(tmp, "obs-count", lambda: model.total)
    s = model.snapshot()
    led = model.frames
    print(json.dumps({"agents": len(s.agents), "ledger_agents": len(led.agents()),
                      "notes": [n.type for n in led.notes()], "dropped": s.status.dropped,
                      "total": model.total}), flush=True)
    await obs.stop()
    await nc.close()


# ------------------------------------------------------------------ console (measured)


def _cursor(app: Any) -> tuple[str, object] | None:
    """The focused widget's cursor (the first cursor-like attribute it has), or None."""
    w = app.focused
    if w is None:
        return None
    for attr in ("cursor_key", "cursor_index", "cursor_row", "cursor_line", "highlighted"):
        if hasattr(w, attr):
            try:
                return (f"{type(w).__name__}.{attr}", getattr(w, attr))
            except Exception:  # noqa: BLE001 - a property that needs a mounted child
                continue
    return None


async def _presses(app: Any, shown: list[tuple[float, object]], keys: tuple[str, str],
                   presses: int, timeout: float) -> dict:
    """``presses`` keys (20 one way, 20 back, turning at a list's ends), each timed from its
    send to the first frame painted with the focused widget's cursor moved. A key that moved
    nothing within ``timeout`` (a list whose ends we cannot see) is counted as ``still`` and
    turns the direction."""
    from textual import events

    lat: list[float] = []
    still = 0
    d = 0
    run = 0
    driver = app._driver
    for _ in range(presses):
        if run >= 20:
            d, run = 1 - d, 0
        w = app.focused
        try:  # a list that says where its cursor is: turn at its ends, not on a timeout
            at, size = w.cursor_index, len(w.items)
            if size > 1 and at >= size - 1:
                d, run = 1, 0
            elif size > 1 and at <= 0:
                d, run = 0, 0
        except Exception:  # noqa: BLE001 - no such API: the timeout turns it
            pass
        key = keys[d]
        was = _cursor(app)
        mark = len(shown)
        t0 = time.perf_counter()
        ev = events.Key(key, key if len(key) == 1 else None)
        ev.set_sender(app)
        driver.send_message(ev)
        end = t0 + timeout
        while True:
            hit = next((t for t, c in shown[mark:] if c != was), None)
            if hit is not None:
                lat.append((hit - t0) * 1000)
                run += 1
                break
            if time.perf_counter() > end:
                still += 1
                d, run = 1 - d, 0
                break
            await asyncio.sleep(0.0005)
        await asyncio.sleep(0.03)  # a person's key rate, not a held key
    return {"ms": lat, "still": still, "cursor": (_cursor(app) or ("none",))[0]}


async def role_console(url: str, space: str, agents: int, presses: int, tmp: str,
                       lens_cmd: str, profile: bool = False) -> None:
    from meshview.link.connect import ConnectTarget, connect
    from textual.command import CommandInput, CommandList, CommandPalette

    from cotal_tui.app import CotalApp
    from cotal_tui.cli.watch_console import session_options, tune_gc
    from cotal_tui.screens.console import ConsoleScreen
    from cotal_tui.session import LiveSession
    from widgets.roster import Roster

    nc, target = await connect(ConnectTarget((url,), space))
    args = argparse.Namespace(server=[url], space=space, backfill=50, no_dms=False)
    session = LiveSession(nc, target, space, session_options(args))
    app = CotalApp(session=session)
    tune_gc(settle=session.observer.presence_loaded)  # as ``cotal watch`` does on a terminal
    out: dict[str, Any] = {}
    shown: list[tuple[float, object]] = []  # (when, focused cursor) of every painted frame
    real_display = app._display

    def display(screen: Any, renderable: Any) -> Any:
        if renderable is not None:
            shown.append((time.perf_counter(), _cursor(app)))
        return real_display(screen, renderable)

    app._display = display  # type: ignore[method-assign]

    async def until(cond: Callable[[], bool], timeout: float) -> bool:
        end = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > end:
                return False
            await asyncio.sleep(0.05)
        return True

    def mark(name: str, body: dict | None = None) -> None:
        with open(os.path.join(tmp, name + ".tmp"), "w") as f:
            json.dump(body or {}, f)
        os.replace(os.path.join(tmp, name + ".tmp"), os.path.join(tmp, name))

    async def wait_mark(name: str) -> None:
        while not os.path.exists(os.path.join(tmp, name)):
            await asyncio.sleep(0.05)

    async with app.run_test(size=(160, 48)) as pilot:
        roster = app.screen.query_one(Roster)
        if not await until(lambda: len(roster.items) >= agents, 120):
            raise SystemExit(f"console: the roster did not reach {agents} agents in 120 s")
        roster.focus()
        await pilot.pause()
        mark("console-ready")
        paints = [(time.perf_counter(), len(shown))]  # frames painted per window
        prof = None
        if profile:  # what the roster window is spent on (stderr)
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        await wait_mark("lens")
        paints.append((time.perf_counter(), len(shown)))
        if prof is not None:
            import pstats

            prof.disable()
            print(f"--- console profile, roster window, {agents} agents", file=sys.stderr)
            pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(14)
        # the lens on one agent, through the palette as a person opens it
        name = agent_key(agents // 2)
        text = lens_cmd.format(name=name)
        app.action_command_palette()
        lens: dict[str, Any] = {"cmd": text, "open": False, "why": ""}
        if not await until(lambda: isinstance(app.screen, CommandPalette)
                           and bool(app.screen.query(CommandInput)), 5):
            lens["why"] = "the palette did not open"
        else:
            app.screen.query_one(CommandInput).value = text
            listed = await until(lambda: app.screen.query_one(CommandList).option_count > 0, 3)
            if not listed:
                lens["why"] = f"the palette lists no command for `{text}`"
                await pilot.press("escape")
            else:
                await asyncio.sleep(0.5)  # the search streams its hits: let it finish
                cl = app.screen.query_one(CommandList)
                lens["hits"] = [str(cl.get_option_at_index(i).prompt).split("\n")[0][:60]
                                for i in range(min(cl.option_count, 3))]
                verb = text.split()[0].lower()
                if not lens["hits"] or not lens["hits"][0].lower().startswith(verb):
                    top = lens["hits"][0].splitlines()[0] if lens["hits"] else "nothing"
                    lens["why"] = (f"no `{verb}` command in the palette (its top hit for "
                                   f"`{text}`: {top})")
                    await pilot.press("escape")
                else:
                    await pilot.press("enter")

                    def opened() -> bool:
                        s = app.screen
                        if isinstance(s, CommandPalette):
                            return False
                        if not isinstance(s, ConsoleScreen):
                            return True
                        return any("activity" in type(w).__module__ for w in s.walk_children())

                    lens["open"] = await until(opened, 8)
                    if not lens["open"]:
                        lens["why"] = f"`{text}` opened nothing"
        await until(lambda: not isinstance(app.screen, CommandPalette), 3)
        if lens["open"]:
            await asyncio.sleep(1.0)  # its history read
            s = app.screen
            lens["screen"] = type(s).__name__
            lens["cursor"] = (_cursor(app) or ("none",))[0]
            lens["items"] = len(getattr(app.focused, "items", ()) or ())
        mark("lens-ready", lens)
        t_lens = (time.perf_counter(), len(shown))
        await wait_mark("keys")
        out["paints_roster"] = (paints[1][1] - paints[0][1]) / (paints[1][0] - paints[0][0])
        out["paints_lens"] = (len(shown) - t_lens[1]) / (time.perf_counter() - t_lens[0])
        if lens["open"]:
            out["lens_keys"] = await _presses(app, shown, ("down", "up"), presses, 1.0)
            await pilot.press("escape")
            await until(lambda: isinstance(app.screen, ConsoleScreen), 3)
        roster.focus()
        await pilot.pause()
        out["roster_keys"] = await _presses(app, shown, ("j", "k"), presses, 5.0)
        snap = session.model.snapshot()
        out["agents"] = len(snap.agents)
        out["roster_rows"] = len(roster.items)
        out["ledger_agents"] = len(session.model.frames.agents())
        out["dropped"] = snap.status.dropped
        out["lens"] = lens
        await pilot.press("q")
    await session.stop()
    await nc.close()
    print(json.dumps(out), flush=True)


# ------------------------------------------------------------------ ledger memory (no broker)


def role_ledger(agents_list: list[int], turns_list: list[int], turn_s: float) -> None:
    """tracemalloc of a FrameLedger fed ``turns`` Claude turns per agent, each frame through
    the real decoder (``decode_delivery`` -> ``Applied`` -> ``FrameIn``), at a turn clock of
    ``turn_s`` (so the per-hour counters fill as they would). Also one agent's lens ledger."""
    import gc
    import tracemalloc

    from meshview.model.frames import FrameIn, FrameLedger
    from meshview.wire.decode import Delivery, decode_delivery
    from meshview.wire.subjects import chat_subject

    space = "bench"

    def feed(led: FrameLedger, agents: int, turns: int) -> int:
        seats = [_Seat(i, 37) for i in range(agents)]
        subj = {s.i: chat_subject(space, agent_id(s.i), f"events.{agent_id(s.i)}") for s in seats}
        t0 = time.time()
        frames = 0
        for turn in range(turns):
            for s in seats:
                run_id = _hex(s.rng)
                began = t0 + turn * turn_s
                for at, events, _ in turn_frames(s.rng, s.thread_id, run_id, turn_s * 0.9,
                                                 lambda: int(began * 1000)):
                    s.seq += 1
                    ts = int((began + at) * 1000)
                    d = decode_delivery(subj[s.i], envelope(
                        space, s.i, f"events.{agent_id(s.i)}",
                        [frame_part(s.thread_id, run_id, s.epoch, s.seq, events)],
                        f"{s.thread_id[:16]}-{s.seq:012d}", ts))
                    assert type(d) is Delivery, d
                    f = FrameIn.of(d.applied(received=began + at))
                    assert f is not None
                    led.admit(f)
                    frames += 1
        return frames

    def measure(agents: int, turns: int, keep: int = 0) -> dict:
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        led = FrameLedger(keep_frames=keep)
        frames = feed(led, agents, turns)
        gc.collect()
        cur = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        notes = len(led.notes())
        tracked = len(led.agents())
        del led
        return {"agents": agents, "turns": turns, "frames": frames, "bytes": cur,
                "per_agent": cur / agents, "notes": notes, "tracked": tracked, "keep": keep}

    # bytes per agent do not hang on the agent count (up to the ledger's max_agents): the
    # growth in turns is measured at the first count, the others at 40 turns (past RUNS_CAP;
    # the per-hour counters fill for 120 turns of 30 s, so flatness is judged past that)
    # (tracemalloc makes every allocation several times dearer: 500 x 160 turns would take
    # minutes)
    at = min(turns_list[-1], 40)  # past RUNS_CAP runs per agent
    rows = [measure(agents_list[0], t) for t in turns_list]
    rows += [measure(a, at) for a in agents_list[1:]]
    rows += [measure(1, t, keep=300) for t in turns_list]
    rows.append(timing(agents_list[-1]))
    print(json.dumps(rows), flush=True)


def timing(agents: int, turns: int = 4) -> dict:
    """The hot path's cost per frame, no tracemalloc: the wire decode (``decode_delivery`` +
    ``applied`` + ``FrameIn.of``) and the ledger's ``admit``, best of 3."""
    from meshview.model.frames import FrameIn, FrameLedger
    from meshview.wire.decode import Delivery, decode_delivery
    from meshview.wire.subjects import chat_subject

    seats = [_Seat(i, 38) for i in range(agents)]
    raw = []
    for turn in range(turns):
        for s in seats:
            run_id = _hex(s.rng)
            for at, events, _ in turn_frames(s.rng, s.thread_id, run_id, 27.0, _now_ms):
                s.seq += 1
                ch = f"events.{agent_id(s.i)}"
                raw.append((chat_subject("bench", agent_id(s.i), ch), envelope(
                    "bench", s.i, ch, [frame_part(s.thread_id, run_id, s.epoch, s.seq, events)],
                    f"{s.thread_id[:16]}-{s.seq:012d}", _now_ms()), 1000.0 + turn * 30 + at))
    best_d = best_a = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        frames = []
        for subj, data, at in raw:
            d = decode_delivery(subj, data)
            assert type(d) is Delivery
            frames.append(FrameIn.of(d.applied(received=at)))
        best_d = min(best_d, time.perf_counter() - t)
        led = FrameLedger()
        t = time.perf_counter()
        for f in frames:
            led.admit(f)  # type: ignore[arg-type]
        best_a = min(best_a, time.perf_counter() - t)
    return {"timing": True, "agents": agents, "frames": len(raw),
            "decode_us": 1e6 * best_d / len(raw), "admit_us": 1e6 * best_a / len(raw),
            "bytes_avg": sum(len(d) for _, d, _ in raw) / len(raw)}


# ------------------------------------------------------------------ driver


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def child(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--role", *args], stdout=subprocess.PIPE,
                            text=True)


def wait_file(path: str, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{what}: the process exited ({proc.returncode}) before it was ready")
        if time.monotonic() > end:
            raise SystemExit(f"{what}: not ready after {timeout:g}s")
        time.sleep(0.05)


def read_int(path: str) -> int:
    try:
        with open(path) as f:
            return int(f.read() or 0)
    except (OSError, ValueError):
        return 0


def last_json(proc: subprocess.Popen, timeout: float) -> Any:
    out, _ = proc.communicate(timeout=timeout)
    lines = (out or "").strip().splitlines()
    if proc.returncode or not lines:
        raise SystemExit(f"a child failed (exit {proc.returncode}): {(out or '')[-400:]}")
    return json.loads(lines[-1])


def window(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """% of a core each process spent over ``seconds`` of wall time."""
    c0 = {k: cpu_s(p) for k, p in pids.items()}
    w0 = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - w0
    return {k: 100 * (cpu_s(p) - c0[k]) / wall for k, p in pids.items()}


def pin(pids: list[int], cpus: set[int]) -> bool:
    """Every thread of each process onto ``cpus`` (taskset -a; nats-server's and the
    console's threads included)."""
    if not shutil.which("taskset"):
        return False
    arg = ",".join(map(str, sorted(cpus)))
    return all(subprocess.run(["taskset", "-a", "-p", "-c", arg, str(p)],
                              capture_output=True).returncode == 0 for p in pids)


def run_load(url: str, n: int, a: argparse.Namespace, broker_pid: int | None = None) -> dict:
    """One agent count: the load, the observer against the bare subscriber, then the console."""
    import nats

    from cotal_tui.demo.provision import provision_space

    space = f"ev{n}"

    async def prov() -> None:
        nc = await nats.connect(url)
        await provision_space(nc, space)
        await nc.close()

    asyncio.run(prov())
    tmp = tempfile.mkdtemp(prefix=f"cotal-events-{n}-")
    procs: list[subprocess.Popen] = []
    res: dict[str, Any] = {"agents": n, "load0": os.getloadavg()[0]}
    try:
        step = -(-n // a.publishers)
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            p = child("pub", "--url", url, "--space", space, "--lo", str(lo), "--hi", str(hi),
                      "--turn-seconds", str(a.turn_seconds),
                      "--chat-rate", str(a.chat_rate * (hi - lo) / n), "--tmp", tmp)
            procs.append(p)
            wait_file(os.path.join(tmp, f"pub-ready-{lo}"), 30, "publisher", p)
        say(f"{n} agents: observer and bare subscriber")
        common = ["--url", url, "--space", space, "--tmp", tmp]
        bare, obs = child("bare", *common), child("observer", *common)
        procs += [bare, obs]
        wait_file(os.path.join(tmp, "bare-ready"), 30, "bare subscriber", bare)
        wait_file(os.path.join(tmp, "obs-ready"), 30, "observer", obs)
        time.sleep(a.warmup)  # past the presence load, into steady state
        b0 = read_int(os.path.join(tmp, "bare-count"))
        o0 = read_int(os.path.join(tmp, "obs-count"))
        w0 = time.monotonic()
        res["cpu"] = window({"bare": bare.pid, "observer": obs.pid}, a.seconds)
        wall = time.monotonic() - w0
        res["rate_bare"] = (read_int(os.path.join(tmp, "bare-count")) - b0) / wall
        res["rate_obs"] = (read_int(os.path.join(tmp, "obs-count")) - o0) / wall
        res["rss_obs"] = rss_mb(obs.pid)
        open(os.path.join(tmp, "stop-watch"), "w").close()
        bare.communicate(timeout=30)
        res["obs"] = last_json(obs, 30)
        if not a.no_console:
            say(f"{n} agents: console (roster fill)")
            cons = child("console", *common, "--agents", str(n), "--presses", str(a.presses),
                         "--lens-cmd", a.lens_cmd, *(["--profile"] if a.profile else []))
            procs.append(cons)
            cpus = sorted(os.sched_getaffinity(0))
            res["pinned"] = False
            if a.pin and len(cpus) >= 2 and broker_pid is not None:
                # the load (broker, publishers) on the last CPU, the console on the first:
                # key -> repaint then measures the console, not our own load beside it
                pubs = [p.pid for p in procs if p not in (bare, obs, cons)]
                res["pinned"] = pin([broker_pid, *pubs], {cpus[-1]}) and pin([cons.pid],
                                                                           {cpus[0]})
            wait_file(os.path.join(tmp, "console-ready"), 180, "console", cons)
            time.sleep(a.warmup)
            say(f"{n} agents: console CPU, roster")
            res["cpu_roster"] = window({"c": cons.pid}, a.seconds)["c"]
            open(os.path.join(tmp, "lens"), "w").close()
            wait_file(os.path.join(tmp, "lens-ready"), 60, "lens", cons)
            with open(os.path.join(tmp, "lens-ready")) as f:
                res["lens"] = json.load(f)
            if res["lens"]["open"]:
                time.sleep(min(a.warmup, 3.0))
                say(f"{n} agents: console CPU, lens open")
                res["cpu_lens"] = window({"c": cons.pid}, a.seconds)["c"]
            res["rss_console"] = rss_mb(cons.pid)
            say(f"{n} agents: keys")
            open(os.path.join(tmp, "keys"), "w").close()
            res["console"] = last_json(cons, 600)
        res["load1"] = os.getloadavg()[0]
    finally:
        open(os.path.join(tmp, "stop"), "w").close()
        open(os.path.join(tmp, "stop-watch"), "w").close()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        if res.get("pinned") and broker_pid is not None:
            pin([broker_pid], set(os.sched_getaffinity(0)))  # the next load starts unpinned
    return res


def keys_line(what: str, k: dict | None) -> str:
    if not k or not k["ms"]:
        return f"  {what:<32} n/a" + (f" ({k['still']} presses moved no cursor: "
                                      f"{k['cursor']})" if k else "")
    lat = sorted(k["ms"])
    p95 = lat[int(0.95 * (len(lat) - 1))]
    worst = lat[-1]
    at = k["ms"].index(worst) + 1  # the first press after a screen closed pays its catch-up
    ok = p95 < GOAL_P95_MS and worst < GOAL_WORST_MS
    still = f", {k['still']} moved nothing (list end: direction turned)" if k["still"] else ""
    return (f"  {what:<32} median {statistics.median(lat):5.1f}  p95 {p95:5.1f}  worst "
            f"{worst:5.1f} ms (press {at}) over {len(lat)} presses{still} (goal p95 < {GOAL_P95_MS:g}, "
            f"worst < {GOAL_WORST_MS:g}): {'met' if ok else 'MISSED'}")


def report(results: list[dict], ledger: list[dict] | None, a: argparse.Namespace) -> None:
    ok = lambda c: "met" if c else "MISSED"  # noqa: E731
    cols = [f"{r['agents']} agents" for r in results]
    print(f"events: Claude-cadence turns ({a.turn_seconds:g} s, 4-8 tools, a frame per tool + "
          f"open + stop + close) on events.local.<key>, presence every {HEARTBEAT_S:g} s, "
          f"{a.chat_rate:g} chat msgs/s; {a.seconds:g} s windows; {os.cpu_count()} cores shared "
          "with other work (every figure skews with it)")

    def row(label: str, cells: list[str]) -> None:
        print(f"  {label:<36}" + "".join(f"{c:>22}" for c in cells))

    row("", cols)
    row("load average (1 min) before -> after", [f"{r['load0']:.1f} -> {r['load1']:.1f}"
                                                  for r in results])
    row("msgs/s: bare count (all subjects)", [f"{r['rate_bare']:.0f}" for r in results])
    row("bare subscriber CPU % of a core", [f"{r['cpu']['bare']:.1f}" for r in results])
    row("observer CPU % (decode+model+ledger)", [f"{r['cpu']['observer']:.1f}" for r in results])
    ratios = [r["cpu"]["observer"] / max(r["cpu"]["bare"], 1e-9) for r in results]
    row(f"ratio observer/bare (goal <= {GOAL_RATIO:g}x)",
        [f"{x:.2f}x {ok(x <= GOAL_RATIO)}" for x in ratios])
    row("CPU us per message: bare / observer",
        [f"{1e4 * r['cpu']['bare'] / max(r['rate_bare'], 1e-9):.0f} / "
         f"{1e4 * r['cpu']['observer'] / max(r['rate_bare'], 1e-9):.0f}" for r in results])
    row("observer RSS MB", [f"{r['rss_obs']:.0f}" for r in results])
    row("observer: agents / in ledger / dropped",
        [f"{r['obs']['agents']} / {r['obs']['ledger_agents']} / {r['obs']['dropped']}"
         for r in results])
    row("observer: ledger notes (joined mid-chain)",
        [", ".join(f"{n} {t}" for t, n in sorted(Counter(r["obs"]["notes"]).items())) or "none"
         for r in results])
    if not a.no_console:
        row("console phase: load / console CPUs",
            ["pinned apart" if r.get("pinned") else "unpinned" for r in results])
        row("console CPU %, roster only", [f"{r['cpu_roster']:.1f}" for r in results])
        row(f"console CPU %, lens open (goal <= {GOAL_CONSOLE_PCT:g})",
            [f"{r['cpu_lens']:.1f} {ok(r['cpu_lens'] <= GOAL_CONSOLE_PCT)}"
             if "cpu_lens" in r else "lens not available" for r in results])
        row("console frames painted/s: roster",
            [f"{r['console']['paints_roster']:.1f}" for r in results])
        row("console frames painted/s: lens",
            [f"{r['console']['paints_lens']:.1f}" if r["lens"]["open"] else "-"
             for r in results])
        row("console RSS MB", [f"{r['rss_console']:.0f}" for r in results])
        row("console: roster rows / ledger agents",
            [f"{r['console']['roster_rows']} / {r['console']['ledger_agents']}" for r in results])
        for r in results:
            lens = r["lens"]
            if lens.get("hits"):
                print(f"  lens at {r['agents']}: the palette's top hits for `{lens['cmd']}`: "
                      + "; ".join(lens["hits"]))
            if lens["open"]:
                print(f"  lens at {r['agents']}: palette `{lens['cmd']}` opened "
                      f"{lens.get('screen')} (cursor {lens.get('cursor')}, "
                      f"{lens.get('items', 0)} items)")
            else:
                print(f"  lens at {r['agents']}: lens not available ({lens['why']}): the console "
                      "figure above is the roster without it")
            print(keys_line(f"roster j/k key -> repaint ({r['agents']})",
                            r["console"].get("roster_keys")))
            if lens["open"]:
                print(keys_line(f"lens down/up key -> repaint ({r['agents']})",
                                r["console"].get("lens_keys")))
    if ledger:
        print("frame ledger memory (tracemalloc, frames through the real decoder; model ledger "
              "keep_frames=0, lens ledger keep_frames=300 for one agent)")
        timing_rows = [x for x in ledger if x.get("timing")]
        ledger = [x for x in ledger if not x.get("timing")]
        for x in ledger:
            what = "lens ledger, 1 agent" if x["keep"] else f"{x['agents']} agents"
            print(f"  {what:<22} {x['turns']:>4} turns/agent ({x['frames']:>7,} frames): "
                  f"{x['bytes'] / 1024:8.0f} KiB, {x['per_agent']:8,.0f} B/agent "
                  f"(agents tracked {x['tracked']}, notes {x['notes']})")
        groups = [(f"{n} agents", [x for x in ledger if x["agents"] == n and not x["keep"]])
                  for n in sorted({x["agents"] for x in ledger if not x["keep"]})]
        groups.append(("lens ledger", [x for x in ledger if x["keep"]]))
        for what, xs in groups:
            if len(xs) < 2:
                continue
            lo, hi = xs[-2], xs[-1]  # past the caps (RUNS_CAP runs, keep_frames) both
            growth = hi["per_agent"] / max(lo["per_agent"], 1.0)
            print(f"  {what}: {lo['turns']} -> {hi['turns']} turns per agent: bytes per agent "
                  f"x{growth:.2f} (flat once the caps are reached: goal < x1.1, "
                  f"{ok(growth < 1.1)})")
        for x in timing_rows:
            print(f"  hot path per frame ({x['agents']} agents, {x['frames']:,} frames of "
                  f"{x['bytes_avg']:.0f} B): decode {x['decode_us']:.1f} us + ledger admit "
                  f"{x['admit_us']:.1f} us (best of 3, no tracemalloc)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--role", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--space", help=argparse.SUPPRESS)
    ap.add_argument("--tmp", help=argparse.SUPPRESS)
    ap.add_argument("--lo", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--hi", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--agents", default="50,500", help="agent counts, comma separated")
    ap.add_argument("--turn-seconds", type=float, default=30.0, help="one turn's length (~30 s)")
    ap.add_argument("--chat-rate", type=float, default=4.0, help="chat msgs/s in total")
    ap.add_argument("--publishers", type=int, default=2, help="publisher processes")
    ap.add_argument("--seconds", type=float, default=30.0, help="each CPU window")
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--presses", type=int, default=120, help="key presses per list")
    ap.add_argument("--ledger-turns", default="10,40,130,260",
                    help="turns per agent, ledger memory (the last two past every cap)")
    ap.add_argument("--ledger-agents", help="agent counts for the ledger memory (default "
                    "--agents; the growth over turns is measured at the first)")
    ap.add_argument("--lens-cmd", default=LENS_CMD,
                    help="palette text that opens the lens ({name}: an agent's name)")
    ap.add_argument("--quick", action="store_true", help="a few seconds per phase (a smoke run)")
    ap.add_argument("--no-console", action="store_true", help="observer and ledger only")
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="do not pin the load (broker, publishers) and the console to separate "
                         "CPUs in the console phase")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile the console's roster window (stderr; inflates its CPU figure)")
    ap.add_argument("--no-ledger", action="store_true", help="skip the ledger memory phase")
    a = ap.parse_args()
    if a.role == "pub":
        return asyncio.run(role_pub(a.url, a.space, a.lo, a.hi, a.turn_seconds, a.chat_rate,
                                    a.tmp))
    if a.role == "bare":
        return asyncio.run(role_bare(a.url, a.space, a.tmp))
    if a.role == "observer":
        return asyncio.run(role_observer(a.url, a.space, a.tmp))
    if a.role == "console":
        return asyncio.run(role_console(a.url, a.space, int(a.agents), a.presses, a.tmp,
                                        a.lens_cmd, a.profile))
    agents = [int(x) for x in a.agents.split(",") if x.strip()]
    turns = [int(x) for x in a.ledger_turns.split(",") if x.strip()]
    if a.quick:
        a.seconds, a.warmup, a.presses = min(a.seconds, 4.0), min(a.warmup, 2.0), min(a.presses, 30)
        turns = [5, 130, 260] if a.ledger_turns == "10,40,130,260" else turns
        a.ledger_agents = a.ledger_agents or "10,100"
    if a.role == "ledger":
        return role_ledger(agents, turns, a.turn_seconds)

    from cotal_tui.demo.broker import Broker

    def _term(*_: object) -> None:
        raise SystemExit("interrupted")

    signal.signal(signal.SIGTERM, _term)
    b = Broker(name="cotal-bench-events").start()
    results = []
    try:
        for n in agents:
            results.append(run_load(b.url, n, a, b.proc.pid if b.proc is not None else None))
    finally:
        b.stop()
    ledger = None
    if not a.no_ledger:
        say("ledger memory")
        led = subprocess.Popen([sys.executable, __file__, "--role", "ledger", "--agents",
                                a.ledger_agents or a.agents, "--ledger-turns", ",".join(map(str, turns)),
                                "--turn-seconds", str(a.turn_seconds)],
                               stdout=subprocess.PIPE, text=True)
        ledger = last_json(led, 1800)
    report(results, ledger, a)


if __name__ == "__main__":
    main()
