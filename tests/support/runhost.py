"""The demo manager as a run host on the session broker (a static-mesh run host, one seat), with
the release checklist already waiting at ``/checkpoint:approve#0``: the ``host`` fixture the run
tests share (``from support.runhost import host  # noqa: F401``)."""

from __future__ import annotations

import nats
import pytest

from cotal_tui.demo.manager import DemoManager, SeatSpec

STEP = "/checkpoint:approve#0"


@pytest.fixture
async def host(broker, space, tmp_path):
    c = await nats.connect(broker.url)
    m = DemoManager(c, space, [SeatSpec("near", "local.near")], root=str(tmp_path / "m"), run_mesh="static",
                    boot_run="release-checklist")
    await m.start()
    yield m
    await m.stop()
    await c.close()
