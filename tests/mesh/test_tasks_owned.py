"""Owned tasks (issue 36): a fire-and-forget task is held until it ends, and its failure is logged
on ``cotal.tasks`` and counted, never lost with the task."""

from __future__ import annotations

import asyncio
import gc
import logging

from conftest import until
from meshview.tasks import TaskOwner, task_failures


async def test_a_failed_owned_task_is_logged_and_counted(caplog):
    owner = TaskOwner("probe")

    async def boom() -> None:
        raise RuntimeError("lost before issue 36")

    before = task_failures().get("probe:boom", 0)
    with caplog.at_level(logging.ERROR, logger="cotal.tasks"):
        owner.spawn(boom(), "boom")
        await until(lambda: task_failures().get("probe:boom", 0) == before + 1, 5, "the failure counted")
    assert len(owner) == 0
    [rec] = [r for r in caplog.records if r.name == "cotal.tasks"]
    assert "probe:boom" in rec.getMessage() and "lost before issue 36" in str(rec.exc_info[1])


async def test_an_owned_task_outlives_its_callers_reference_and_close_cancels_it():
    owner = TaskOwner("probe")
    started, gate = asyncio.Event(), asyncio.Event()

    async def waits() -> None:
        started.set()
        await gate.wait()

    owner.spawn(waits())
    gc.collect()  # the owner, not the caller, keeps it alive
    await asyncio.wait_for(started.wait(), 5)
    assert len(owner) == 1
    assert await owner.close(timeout=5) == []
    assert len(owner) == 0
    assert not any("waits" in k for k in task_failures())  # a cancel is no failure
