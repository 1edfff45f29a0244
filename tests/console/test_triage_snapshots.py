"""SVG baselines of the triage screen (``T``) from the deterministic model data the console's
other baselines use (fixed clock, no cursor blink): two agents waiting on the mesh, no managed
seat, so their cards say why no terminal is shown and which actions cannot run."""

from __future__ import annotations

import pytest
from support.console import make_app

SIZES = [pytest.param((120, 40), id="120x40"), pytest.param((80, 24), id="80x24")]


@pytest.mark.parametrize("size", SIZES)
def test_triage_screen(snap_compare, size):
    app = make_app()
    app.animation_level = "none"
    assert snap_compare(app, press=["T"], terminal_size=size)
