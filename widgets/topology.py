"""Topology lens (stub, replaced below)."""

from __future__ import annotations

from textual.widget import Widget

from meshview.model import Snapshot


class TopologyLens(Widget, can_focus=True):
    def update_snapshot(self, snap: Snapshot) -> None:
        pass
