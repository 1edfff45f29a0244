"""The demo team publishes a real event plane (issue 37 item 8): ``ag-ui.frame`` parts on each
agent's ``events.<owner>.<actor>``, Claude-like, on a real broker, read back by a plain tap."""

from __future__ import annotations

import json
from collections import defaultdict

from conftest import until
from cotal_tui.demo.activity import FRAME_KIND, PROTOCOL, TOOLS
from cotal_tui.demo.team import Team, TeamSchedule
from meshview.wire.decode import Delivery, decode_delivery
from meshview.wire.messages import ExtensionPart

RAW: dict[str, list[bytes]] = {}  # each space's frames as they came, for the decoder check
FAST = dict(chat_interval=0.05, crash_after=None, restart_after=None, activity_pace=0.01)


async def _tap(nc, space: str) -> list[tuple[str, dict]]:
    got: list[tuple[str, dict]] = []
    raw = RAW.setdefault(space, [])

    async def on_msg(m):
        got.append((m.subject, json.loads(m.data)))
        raw.append(m.data)

    await nc.subscribe(f"cotal.{space}.chat.*.*.events.>", cb=on_msg)
    await nc.flush()
    return got


def _frames(got: list[tuple[str, dict]]) -> list[tuple[str, dict, dict]]:
    return [(s, m, m["parts"][0]) for s, m in got]


def _types(got) -> list[tuple[str, dict]]:
    return [(m["from"]["id"], e) for _, m, f in _frames(got) for e in f["events"]]


async def _quiet(team: Team, got: list) -> None:
    """Stop the team, then wait until every published frame has reached the tap."""
    await team.stop()
    assert team.activity is not None
    published = team.activity.stats.frames
    await until(lambda: len(got) >= published, 10, f"{published} frames at the tap")
    assert len(got) == published


async def test_each_agent_streams_claude_like_frames(nc, space):
    got = await _tap(nc, space)
    team = Team(nc, space, seed=5, agents=6, schedule=TeamSchedule(**FAST))
    await team.start()
    plane = team.activity
    assert plane is not None
    try:
        def enough():
            types = _types(got)
            closed = defaultdict(int)
            for who, e in types:
                closed[who] += e["type"] in ("RUN_FINISHED", "RUN_ERROR")
            return (plane.stats.skipped
                    and any(e["type"] == "RUN_ERROR" for _, e in types)
                    and len(closed) == 6 and min(closed.values()) >= 2)
        await until(enough, 60, "two closed runs per agent, a skip and a failed run")
    finally:
        await _quiet(team, got)

    for (subject, m), data in zip(got, RAW[space], strict=True):
        d = decode_delivery(subject, data)  # the console's own decoder takes every frame whole
        assert type(d) is Delivery, d
        (part,) = d.message.parts
        assert type(part) is ExtensionPart and part.kind == FRAME_KIND and part.dropped == 0
        assert len(part.events) == len(m["parts"][0]["events"])

    chains: dict[tuple, list[int]] = defaultdict(list)
    reasoners, runs_per_chain = set(), defaultdict(list)
    for subject, m, f in _frames(got):
        sender = m["from"]["id"]
        # the channel is the sender's own principal, on the sender's own chat subject
        assert m["channel"] == f"events.{sender}"
        assert subject == f"cotal.{space}.chat.{sender}.events.{sender}"
        assert len(m["parts"]) == 1 and f["kind"] == FRAME_KIND  # no text part, by design
        assert f["protocol"] == PROTOCOL and f["threadId"] and f["runId"] and f["epoch"]
        assert f["events"]
        chain = (sender, f["epoch"], f["threadId"])
        chains[chain].append(f["seq"])
        runs_per_chain[chain].append(f)
        for e in f["events"]:
            assert e["type"] not in ("TOOL_CALL_ARGS", "TOOL_CALL_RESULT")  # stripped (§2.5)
            if e["type"].startswith("REASONING_MESSAGE"):
                reasoners.add(sender)
            if e["type"] == "RUN_ERROR":
                assert e["message"] == "run failed" and "code" not in e
            if e["type"] == "TOOL_CALL_START":
                assert e["toolCallName"] in TOOLS
            if "runId" in e:
                assert e["runId"] == f["runId"]  # a frame names exactly one run

    assert len(chains) == 6  # one chain per agent, none shared
    jumps = []
    for chain, seqs in chains.items():
        assert seqs[0] == 1 and seqs == sorted(seqs), (chain, seqs[:20])
        jumps += [(chain, b - a) for a, b in zip(seqs, seqs[1:]) if b - a != 1]
    assert [j for _, j in jumps] == [2], jumps  # exactly one frame skipped in the whole demo
    assert [(c[0], 0) for c, _ in jumps] == [(a, 0) for a, _ in plane.stats.skipped]
    assert reasoners == {plane.reasoner}  # reasoning on one connector only

    for chain, frames in runs_per_chain.items():  # brackets balance within a chain
        open_run, tools = None, 0
        for f in frames:
            for e in f["events"]:
                if e["type"] == "RUN_STARTED":
                    assert open_run is None, chain
                    open_run, tools = e["runId"], 0
                elif e["type"] == "TOOL_CALL_START":
                    assert open_run is not None
                    tools += 1
                elif e["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                    assert open_run == f["runId"], chain
                    # 4-8 tools per turn; the skipped frame took one of them
                    assert 3 <= tools <= 8 and (tools >= 4 or chain[0] == plane.stats.skipped[0][0])
                    open_run = None
                    assert len(f["events"]) == 1  # the close frame holds only the close

    # presence agrees with the frames: a working seat in a run names the tool it last started
    for a in team.members:
        tool = plane.last_tool(a)
        if plane.in_run(a) and a.status == "working" and tool is not None:
            assert a.activity is not None and a.activity.startswith(f"{tool}: "), (a.name, a.activity)


async def test_forty_agents_each_their_own_chain(nc, space):
    got = await _tap(nc, space)
    team = Team(nc, space, seed=2, agents=40, schedule=TeamSchedule(
        **{**FAST, "chat_interval": 0.2, "activity_pace": 0.02}))
    await team.start()
    try:
        await until(lambda: len({m["from"]["id"] for _, m in got}) == 40, 60,
                    "a frame from each of 40 agents")
    finally:
        await _quiet(team, got)
    chains = {(m["from"]["id"], f["epoch"], f["threadId"]) for _, m, f in _frames(got)}
    assert len(chains) == 40 and len({c[1] for c in chains}) == 40


async def test_a_new_incarnation_starts_a_new_chain(nc, space):
    got = await _tap(nc, space)
    team = Team(nc, space, seed=3, agents=3, schedule=TeamSchedule(**FAST))
    await team.start()
    try:
        cleo = team.by_name("cleo")
        await until(lambda: any(m["from"]["id"] == cleo.id for _, m in got), 30, "cleo's first frame")
        await team.restart_incarnation("cleo")
        n = len(got)

        def second_chain():
            return len({(f["epoch"], f["threadId"]) for _, m, f in _frames(got)
                        if m["from"]["id"] == cleo.id}) == 2
        await until(second_chain, 30, "cleo's new session")
        assert n < len(got)
    finally:
        await _quiet(team, got)
    firsts: dict[tuple, int] = {}
    for _, m, f in _frames(got):
        firsts.setdefault((m["from"]["id"], f["epoch"], f["threadId"]), f["seq"])
    assert all(s in (1, 2) for s in firsts.values()), firsts  # each chain starts at 1 (2 if skipped)


async def test_no_frames_when_the_plane_is_off(nc, space):
    got = await _tap(nc, space)
    team = Team(nc, space, seed=5, agents=3, schedule=TeamSchedule(**{**FAST, "activity": False}))
    await team.start()
    try:
        await until(lambda: team.published >= 30, 20, "the team's chat")
    finally:
        await team.stop()
    await nc.flush()
    assert team.activity is None and got == []


async def test_the_same_seed_gives_every_agent_the_same_turns(nc, space_name):
    """Each agent draws from its own seeded RNG: two demos with one seed publish the same
    frames (ids, tools, texts), whatever the timing; another seed does not."""
    from cotal_tui.demo.provision import provision_space

    async def first_frames(space: str, seed: int) -> dict[str, list]:
        await provision_space(nc, space)
        got = await _tap(nc, space)
        team = Team(nc, space, seed=seed, agents=4,
                    schedule=TeamSchedule(**{**FAST, "skip_frame_after": None}))
        await team.start()
        try:
            def six_each():
                n = defaultdict(int)
                for _, m in got:
                    n[m["from"]["id"]] += 1
                return len(n) == 4 and min(n.values()) >= 6
            await until(six_each, 30, "six frames from each agent")
        finally:
            await _quiet(team, got)
        out: dict[str, list] = defaultdict(list)
        for _, m, f in _frames(got):
            if len(out[m["from"]["id"]]) < 6:
                out[m["from"]["id"]].append(
                    (f["seq"], f["threadId"], f["runId"],
                     [{k: v for k, v in e.items() if k != "timestamp"} for e in f["events"]]))
        return out

    a, b = await first_frames(space_name + "a", 11), await first_frames(space_name + "b", 11)
    c = await first_frames(space_name + "c", 12)
    assert a == b
    assert a != c
