"""SVG baselines of the managed-seat marks: the roster's ``managed pty`` tags and the agent card's
managed section, from the fixed console model plus a fixed ``ps`` fold (no clock-dependent text:
no silent managers). Update with ``pytest --snapshot-update``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from support.console import T0, make_app, pid

from attach.managed import ManagedFold

SIZES = [pytest.param((120, 40), id="120x40"), pytest.param((80, 24), id="80x24")]


def _row(name: str, status: str = "running", **kw) -> dict:
    row = {"name": name, "id": name, "agent": "line", "space": "demo", "mode": "pty",
           "status": status, "uptimeMs": 3 * 3600 * 1000 + 1000, "mesh": "working",
           "meshView": "current", "lifecycleUid": f"uid{name}0000000000000000000000", "instanceId": "mgr0instance",
           "host": "demo-host", "pid": 4242, "cols": 100, "rows": 30}
    row.update(kw)
    return row


def managed_app():
    app = make_app()
    fold = ManagedFold()
    fold.apply({"mgr0instance"}, {"mgr0instance": [
        _row("ada"), _row("bram", status="exited", mesh="offline", pid=None),
    ]}, now=T0 / 1000)
    app.session.managed = SimpleNamespace(fold=fold)  # what LiveSession.managed exposes
    app.animation_level = "none"
    return app


def test_fold_names_the_fixed_agents():
    fold = managed_app().session.managed.fold
    assert fold.for_peer(pid("ada")).runtime == "pty"
    assert fold.for_peer(pid("bram")).process == "exited"


@pytest.mark.parametrize("size", SIZES)
def test_roster_managed_markers(snap_compare, size):
    assert snap_compare(managed_app(), terminal_size=size)


def test_agent_card_managed_section(snap_compare):
    assert snap_compare(managed_app(), press=["h", "g", "enter"], terminal_size=(120, 40))
