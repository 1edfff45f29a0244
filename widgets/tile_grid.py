"""A grid of terminal panes, one per seat, read-only until one is promoted.

The grid picks its shape from the pane count and the space it has (wide terminals get more
columns), and each pane carries its seat name and status in its border, so a tile of live
agents reads like a wall of small terminals.
"""

from __future__ import annotations

import math

from textual.containers import Grid
from textual.widget import Widget

from widgets.terminal_pane import TerminalPane


def grid_shape(n: int, width: int = 160, height: int = 48) -> tuple[int, int]:
    """(columns, rows) for ``n`` panes, each as close to a terminal's 80×24 shape as fits."""
    if n <= 1:
        return 1, 1
    best: tuple[float, int, int] | None = None
    for cols in range(1, n + 1):
        rows = math.ceil(n / cols)
        w, h = width / cols, height / rows
        aspect = (w / max(h, 1)) / (80 / 24)
        score = abs(math.log(max(aspect, 1e-6))) + 0.3 * (cols * rows - n)
        if best is None or score < best[0]:
            best = (score, cols, rows)
    assert best is not None
    return best[1], best[2]


class TilePane(TerminalPane):
    """A terminal pane with its seat in the border; focus shows as the accent border."""

    DEFAULT_CSS = """
    TilePane {
        border: round $panel-lighten-2;
        border-title-color: $text;
        border-subtitle-color: $text-muted;
        height: 1fr;
        width: 1fr;
    }
    TilePane:focus { border: round $accent; }
    TilePane.-interactive { border: heavy $warning; }
    TilePane.-ended { border: round $error 50%; }
    """

    def __init__(self, seat: str, cols: int, rows: int, **kw) -> None:
        kw.setdefault("frame_hz", 30.0)  # a wall of previews: 30 frames a second is plenty
        super().__init__(cols, rows, **kw)
        self.seat = seat
        self.border_title = seat
        self.set_status("")

    def set_status(self, text: str) -> None:
        mode = "attached · Ctrl-] releases" if self.interactive else "read-only"
        self.border_subtitle = f"{text} · {mode}" if text else mode
        self.set_class(self.interactive, "-interactive")


class TileGrid(Grid):
    DEFAULT_CSS = """
    TileGrid {
        grid-gutter: 0;
        height: 1fr;
    }
    """

    def on_resize(self) -> None:
        self.reshape()

    def on_mount(self) -> None:
        self.reshape()

    def reshape(self) -> None:
        panes = [w for w in self.children if isinstance(w, Widget)]
        w, h = self.size
        cols, rows = grid_shape(len(panes), w or 160, h or 48)
        self.styles.grid_size_columns = cols
        self.styles.grid_size_rows = rows
