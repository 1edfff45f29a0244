"""``cotal watch --json`` / ``--plain`` print run lines: a run's state, a pause opening (with its
step key and prompt) and settling, from the demo's run host polled beside the observer."""

from __future__ import annotations

import asyncio
import io
import json

import nats
import pytest

from attach.control import runs as client
from conftest import until
from cotal_tui.cli.watch_stream import _runs_poll
from meshview.link.connect import ConnectTarget
from meshview.lines.stream import StreamOptions, stream_space
from support.runhost import host  # noqa: F401 - the shared run-host fixture


@pytest.mark.parametrize("mode", ["json", "plain"])
async def test_watch_prints_run_lines(broker, space, host, mode):
    target = ConnectTarget((broker.url,), space, timeout=3)
    out, err, stop = io.StringIO(), io.StringIO(), asyncio.Event()
    nc = await nats.connect(broker.url)
    task = asyncio.create_task(stream_space(nc, target, StreamOptions(mode=mode), out, err, stop,
                                            runs_poll=lambda m: _runs_poll(target, m)))
    try:
        await until(lambda: "/checkpoint:approve#0" in out.getvalue(), 20, "the pause line")
        [row] = await client.run_ps(ConnectTarget((broker.url,), space, timeout=3, role="control"))
        await client.run_answer(ConnectTarget((broker.url,), space, timeout=3, role="control"), row.run_id,
                                "/checkpoint:approve#0", "yes")
        await until(lambda: "completed" in out.getvalue(), 20, "the completed line")
    finally:
        stop.set()
        await task
    text = out.getvalue()
    if mode == "json":
        runs = [json.loads(x) for x in text.splitlines() if '"type": "run"' in x]
        kinds = [(r["event"], r.get("stepKey"), r["state"]) for r in runs]
        assert ("pause-open", "/checkpoint:approve#0", "running") in kinds
        assert ("pause-settled", "/checkpoint:approve#0", "completed") in kinds or \
            ("pause-settled", "/checkpoint:approve#0", "running") in kinds
        assert any(r["event"] == "state" and r["state"] == "completed" and r["previous"] == "running"
                   for r in runs)
        assert next(r for r in runs if r["event"] == "pause-open")["prompt"] == "ship release 1.8?"
    else:
        assert f'run {row.run_id[:8]}… waits /checkpoint:approve#0: "ship release 1.8?"' in text
        assert f"run {row.run_id[:8]}… running -> completed" in text
