"""SVG baselines of the dense roster: ``cotal demo``-like team of 40 at 140×42 and 80×24, from
deterministic model data (fixed clock, UTC, no animation). Update with ``--snapshot-update``."""

from __future__ import annotations

import pytest
from support.team import team_app


@pytest.mark.parametrize("size", [pytest.param((140, 42), id="140x42"),
                                  pytest.param((80, 24), id="80x24")])
def test_dense_roster_forty(snap_compare, size, tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))  # no operator's config.toml
    assert snap_compare(team_app(40), press=["h"], terminal_size=size)
