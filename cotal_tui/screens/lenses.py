"""The console's lenses, one table entry each: a lens is this entry plus its widget.

A lens replaces the roster/feed/rail body while it is shown. The console screen builds its
switcher panes, its ``console.<lens>`` key bindings, the status-bar hints, focus and panel
stepping from :data:`LENSES`; the ``:`` palette lists one verb per lens. The widget takes
``id=`` and has ``update_snapshot(snap)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from textual.binding import Binding
from textual.widget import Widget

from widgets.dm_lens import DmLens
from widgets.topology import TopologyLens


def _focus_self(w: Any) -> None:
    w.focus()


def _self_panel(w: Any) -> list:
    return [w]


def _no_inner_level(w: Any) -> bool:  # noqa: ARG001 - one level only: Esc leaves the lens
    return False


@dataclass(frozen=True)
class Lens:
    name: str  # the switcher pane's id and the ``:`` palette verb
    widget: Callable[..., Widget]  # called with ``id=name``
    key: str  # default key; remappable through ``binding_id``
    binding_id: str
    title: str  # the key's description (help, footer)
    palette: str  # the palette verb's description
    hints: str  # the status bar while the lens is shown
    focus: Callable[[Any], None] = _focus_self  # where focus lands when the lens opens
    panels: Callable[[Any], list] = _self_panel  # what ←/→ steps through
    back: Callable[[Any], bool] = _no_inner_level  # Esc inside the lens: True when it went back

    def binding(self) -> Binding:
        return Binding(self.key, f"lens('{self.name}')", self.title, id=self.binding_id)


LENSES: tuple[Lens, ...] = (
    Lens("dms", DmLens, "d", "console.dms", "DM lens", "DM lens: per-peer roll-up and threads",
         "esc back  ←→ panes  jk walk  ? help", focus=DmLens.focus_peers, panels=DmLens.panes,
         back=DmLens.back),
    Lens("topo", TopologyLens, "t", "console.topo", "topology lens",
         "topology lens: sequence, matrix, ring map",
         "esc back  v cycle  1-3 view  jk/hjkl move  ? help"),
)
BY_NAME: dict[str, Lens] = {lens.name: lens for lens in LENSES}
