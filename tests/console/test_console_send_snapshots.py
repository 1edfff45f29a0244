"""SVG baseline of the composer open on the deterministic console (fixed clock, no blink).
Update with ``pytest --snapshot-update``; ``snapshots/console-compose-120x40.svg`` is a copy."""

from __future__ import annotations

from support.console import make_app

from cotal_tui.operator import Operator
from meshview.link.connect import ConnectTarget


def test_composer_open_with_a_draft(snap_compare):
    app = make_app()
    app.animation_level = "none"
    # an operator that could send (nothing is sent: the test never presses Enter)
    app.session.operator = Operator(ConnectTarget(servers=("nats://127.0.0.1:9",), space="demo"),
                                    "demo", name="ops", read_only=None, roster=lambda: [])
    assert snap_compare(app, press=["c", *"deploy window moves to 14:00", "ctrl+j",
                                    *"@bram can you confirm?"], terminal_size=(120, 40))
