"""A grid of terminal panes, one per seat, read-only until one is promoted.

The grid picks its shape from the pane count and the space it has (wide terminals get more
columns), and each pane carries its seat name and status in its border, so a tile of live
agents reads like a wall of small terminals.

A pane smaller than its seat's screen crops it (around the cursor); it says so in its border —
``cropped 120×40 → 48×11`` — whenever the remote or the pane size changes, so a cropped view is
never mistaken for the whole screen. A fitted pane (the seat resized to it, ``fitted_from``
set by the tile) says what it will go back to.
"""

from __future__ import annotations

import math

from textual import events
from textual.containers import Grid
from textual.content import Content
from textual.message import Message
from textual.widget import Widget

from meshview.wire.sanitize import inline
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


LABEL_CELLS = 40  # a border title names one seat: a longer (peer-chosen) label is cut


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
    TilePane.-cropped { border-title-color: $warning; }
    """

    class Reshaped(Message):
        """The pane's own size changed (the grid reflowed or the terminal was resized)."""

        def __init__(self, pane: "TilePane") -> None:
            super().__init__()
            self.pane = pane

        @property
        def control(self) -> "TilePane":
            return self.pane

    def __init__(self, seat: str, cols: int, rows: int, *, label: str | None = None, **kw) -> None:
        kw.setdefault("frame_hz", 30.0)  # a wall of previews: 30 frames a second is plenty
        super().__init__(cols, rows, **kw)
        self.seat = seat
        # the border's name: the roster label of the seat's principal (``ada·3f2ac1`` when two
        # peers share ``ada``), else the seat name; the label is peer text, sanitized here
        self.label = inline(label or seat, LABEL_CELLS)
        self.fitted_from: tuple[int, int] | None = None  # the seat's size before a fit
        self.size_known = True  # False while the remote size is a guess (no mark on a guess)
        self.mark = ""  # the crop / fit note in the border ("" when the screen fits as it is)
        self.border_title = Content(self.label)
        self.set_status("")

    @property
    def cropped(self) -> bool:
        """Part of the remote screen is out of view."""
        w, h = self.size
        cols, rows = self.remote_size
        return self.size_known and w > 0 and h > 0 and (w < cols or h < rows)

    def update_mark(self) -> None:
        """Say in the border whether the remote screen is cropped, or fitted to the pane."""
        w, h = self.size
        cols, rows = self.remote_size
        if self.cropped:
            mark = f"cropped {cols}×{rows} → {min(w, cols)}×{min(h, rows)}"  # what is in view
        elif self.fitted_from is not None:
            fc, fr = self.fitted_from
            mark = f"fitted {cols}×{rows} · was {fc}×{fr}"
        else:
            mark = ""
        self.set_class(self.cropped, "-cropped")
        if mark != self.mark:
            self.mark = mark
            self.border_title = Content(f"{self.label} · {mark}" if mark else self.label)

    def on_resize(self, event: events.Resize) -> None:  # TerminalPane.on_resize runs too
        self.update_mark()
        self.post_message(self.Reshaped(self))

    def reset(self, cols: int | None = None, rows: int | None = None) -> None:
        super().reset(cols, rows)
        self.update_mark()

    def resize_remote(self, cols: int, rows: int) -> None:
        super().resize_remote(cols, rows)
        self.update_mark()

    def set_status(self, text: str) -> None:
        mode = f"attached · {self.detach.label} releases" if self.interactive else "read-only"
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
