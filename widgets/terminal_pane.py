"""A remote terminal in a pane: a headless mirror drawn with the Line API, dirty rows only.

Live output is queued (:meth:`TerminalPane.queue`) and parsed by a task of the pane's own, one slice at
a time with the event loop free between slices, within a parse budget shared by every pane of
the process (a share of each 1/60 s frame window): however fast output arrives, parsing never
takes the loop for more than a slice, nor more than its share of it. Parsed bytes are reported
to the pane's link (:class:`PaneLinkEnd`) so the session returns credit at the rate we parse; a
session whose output outruns the budget skips ahead (``drop_pending``, then a repaint — see
``cotal_tui/seats.py``).
:meth:`TerminalPane.feed` parses at once, for callers that pace themselves.

Nothing repaints per chunk: a frame tick, at most 60 times a second and only while output
arrives, takes the mirror's dirty rows, drops their cached Strips and refreshes those rows
alone. A frame that repaints (nearly) everything waits longer for the next (20 fps attached),
and a flood — more lines scrolled by since the last frame than the screen holds — longer still
(10 fps). Mode 2026 (synchronized output) holds the tick until the frame is complete, or for at
most a quarter of a second.

Each row is one cached Strip of the pane's full width (margins included); a row whose runs
match a Strip made before (a line that scrolled up) reuses it. A plain pane (no border or
padding) hands those Strips to the compositor itself (``render_lines``): Textual's per-line
pass would build two new Strips per row per frame, most of a scrolling frame's cost.

Size: over 500 lines because parsing within a budget, the frame tick, cropped rendering and
input ownership share one mirror and one geometry.

The pane never resizes the remote program on its own. The mirror has the remote size; a
smaller pane crops around the cursor, a larger one centres the screen. When interactive and
focused it owns every key (``check_consume_key``), so no binding — not even Textual's priority
``ctrl+q`` — takes one from the remote program, except the escape hatch: the detach keys
(:class:`attach.terminal.detach.DetachKeys`; Ctrl-] alone by default, so Esc goes to the program
at once). An opt-in sequence (``esc esc``, ``ctrl-b d``) holds its first presses until the next
press or its window. The single detach key is also a prefix: ``[`` after it is copy mode, ``f``
asks the screen to toggle fit-to-pane (:class:`TerminalPane.FitToggle`). A read-only pane (a
peek, a tile pane) also posts :class:`TerminalPane.Detach` when a detach sequence is pressed.

Input leaves through the pane's link (:meth:`TerminalPane.bind_link`), the one object between
the pane and its session: keys, paste, mouse and focus reports go straight to it, in order, with
no message hop through the screen; parsed bytes go back to it as credit. A pane with no link
(a replay, a recording) sends nothing.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import deque
from typing import Protocol

from rich.color import Color, ColorParseError
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from attach.terminal.detach import DEFAULT_KEYS, DetachKeys
from attach.terminal.keycodes import encode_key, encode_mouse, encode_paste
from attach.terminal.mirror import Mirror
from attach.terminal.scrollback import DEFAULT_BYTES, DEFAULT_LINES, Scrollback
from meshview.link.home import cotal_home
from widgets.copy_mode import CopyMode

FRAME_S = 1 / 60
FULL_FRAME_S = 1 / 20  # after a frame that repainted (nearly) everything, e.g. a scrolling flood
FLOOD_FRAME_S = 1 / 10  # ... when more lines scrolled by since the last frame than the screen holds
SYNC_HOLD_MAX_S = 0.25
ESC_DOUBLE_S = 0.4  # how soon an Esc after leaving a pane is still part of the leaving (the App)
DEFAULT_DETACH = 0x1D
PREFIX_S = 0.4  # after the detach key: ``[`` within this opens copy mode, else it detaches
WHEEL_LINES = 3  # lines (or arrow keys, on an alternate screen) per wheel notch
COPY_STYLES = {
    "sel": Style(reverse=True),
    "match": Style(color="black", bgcolor="yellow"),
    "current": Style(color="black", bgcolor="dark_orange", bold=True),
    "cursor": Style(reverse=True, bold=True, underline=True),
    "status": Style(reverse=True, bold=True),
}
PARSE_SLICE = 2048  # bytes parsed between two looks at the event loop (~0.5-1 ms)
PARSE_SHARE = 0.4  # of each frame window, at most, spent parsing (all panes together)
PENDING_MIN = 256 * 1024  # queued output past max(this, 64 B a cell) means the pane fell behind


class _ParseBudget:
    """Parse time the panes of this process may still spend in the current frame window."""

    def __init__(self, window: float = FRAME_S, share: float = PARSE_SHARE) -> None:
        self.window, self.share = window, share
        self.start = -1.0
        self.used = 0.0

    def wait(self, now: float) -> float:
        """0 when parsing may go on now, else the seconds until the next window."""
        if now - self.start >= self.window:
            self.start, self.used = now, 0.0
        if self.used < self.window * self.share:
            return 0.0
        return self.start + self.window - now

    def spend(self, dt: float) -> None:
        self.used += dt


PARSE_BUDGET = _ParseBudget()

_NAMES = {
    "black": "black", "red": "red", "green": "green", "brown": "yellow", "yellow": "yellow",
    "blue": "blue", "magenta": "magenta", "cyan": "cyan", "white": "white",
}
_COLOR_CACHE: dict[str, Color | None] = {}


def rich_color(c: str) -> Color | None:
    """A mirror colour ("default", a pyte name such as "brown"/"brightblue", or "rrggbb")."""
    hit = _COLOR_CACHE.get(c, False)
    if hit is not False:
        return hit  # type: ignore[return-value]  # False is the miss sentinel: past it, a Color or None
    out: Color | None = None
    if c != "default":
        name = c
        if name == "bfightmagenta":  # pyte's spelling of SGR 105
            name = "brightmagenta"
        if name.startswith("bright") and name[6:] in _NAMES:
            out = Color.parse("bright_" + _NAMES[name[6:]])
        elif name in _NAMES:
            out = Color.parse(_NAMES[name])
        elif len(name) == 6:
            try:
                out = Color.parse("#" + name)
            except ColorParseError:
                out = None
    _COLOR_CACHE[c] = out
    return out


def attrs_style(attrs: tuple) -> Style:
    """The Style for :meth:`attach.terminal.mirror.Mirror.runs` attributes."""
    fg, bg, bold, italics, underscore, strike, reverse, _blink = attrs
    return Style(color=rich_color(fg), bgcolor=rich_color(bg), bold=bold or None, italic=italics or None,
                 underline=underscore or None, reverse=reverse or None, strike=strike or None)


class PaneLinkEnd(Protocol):
    """The session behind a pane, as the pane sees it (``cotal_tui.seats.PaneLink``): the pane
    calls it directly, so no screen forwards input and no callback is set on the pane."""

    def send(self, data: bytes) -> None:
        """Bytes for the remote program: keys, paste, mouse, focus reports (refused when read-only)."""

    def parsed(self, nbytes: int) -> None:
        """``nbytes`` of queued output were parsed: credit for the session to return."""


class TerminalPane(Widget, can_focus=True):
    """One remote screen. ``interactive`` panes forward input; others are read-only."""

    DEFAULT_CSS = """
    TerminalPane {
        width: 1fr;
        height: 1fr;
        background: $background;
        color: $foreground;
    }
    TerminalPane > .terminal--outside { background: $panel; }
    """
    COMPONENT_CLASSES = {"terminal--outside"}

    class Yanked(Message):
        """Copy mode yanked ``text`` to ``path`` (and to the clipboard when ``clipboard``)."""

        def __init__(self, pane: "TerminalPane", path: str | None, text: str, clipboard: bool,
                     problem: str | None = None) -> None:
            super().__init__()
            self.pane, self.path, self.text, self.clipboard, self.problem = pane, path, text, clipboard, problem

        @property
        def control(self) -> "TerminalPane":
            return self.pane

    class PaneSaid(Message):
        """A message that says only which pane it came from (the ones below)."""

        def __init__(self, pane: "TerminalPane") -> None:
            super().__init__()
            self.pane = pane

        @property
        def control(self) -> "TerminalPane":
            return self.pane

    class Detach(PaneSaid):
        """The escape hatch was pressed."""

    class FitToggle(PaneSaid):
        """The detach key then ``f``: the screen toggles fit-to-pane."""

    def __init__(
        self, cols: int = 80, rows: int = 24, *, interactive: bool = False,
        detach_byte: int | None = None, detach: DetachKeys | None = None, show_cursor: bool = True, frame_hz: float = 60.0,
        history_lines: int = DEFAULT_LINES, history_bytes: int = DEFAULT_BYTES,
        name: str | None = None, id: str | None = None, classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.mirror = Mirror(cols, rows)
        self.history = Scrollback(history_lines, history_bytes)  # what scrolled off (copy mode)
        self.mirror.keep_history(self.history)
        self.copy: CopyMode | None = None
        self.clip_name = name or "pane"  # the yank file's name: ``<clip_name>-<time>.txt``
        self._prefix_timer: Timer | None = None
        self._search_task: asyncio.Task | None = None
        self.interactive = interactive
        if detach is None:
            detach = DEFAULT_KEYS if detach_byte in (None, DEFAULT_DETACH) else \
                DetachKeys(((detach_byte,),), f"byte {detach_byte}")
        self.detach = detach
        self._matcher = detach.matcher()
        self.show_cursor = show_cursor
        self._rows_cache: dict[int, tuple[tuple, Strip]] = {}  # row → ((x, width, left, right), line)
        # (shape, *runs) → line, for a scrolled row's Strip again: this frame's and the last one's
        # (kept briefly: long-lived Strips would make the collector's older generations grow)
        self._strips: dict[tuple, Strip] = {}
        self._strips_before: dict[tuple, Strip] = {}
        self._reuse = True  # False during a flood: nothing shown now scrolls back into view
        self._blank: Strip | None = None
        self._styles: dict[tuple, Style] = {}
        self._styles_token = object()  # replaced whenever ``_styles`` is cleared
        self._style_of = self._style  # one bound method: the mirror keys its cache on it
        self._base = Style()
        self._base_at = -1.0  # when ``rich_style`` was last read (it costs; read it per frame)
        self._outside = Style()
        self._timer: Timer | None = None
        self._last_frame = 0.0
        self._frame_s = max(FRAME_S, 1.0 / frame_hz)
        # a full repaint (a scrolling flood) costs a whole screen of rows: a third of the rate
        self._full_frame_s = max(FULL_FRAME_S, 3.0 / frame_hz)
        self._gap = self._frame_s  # the gap before the next frame (longer after a full repaint)
        self._scrolled_at = 0  # the mirror's scroll count at the last frame
        self._styled_for: object = None
        self._sync_since: float | None = None
        self._held_timer: Timer | None = None  # a partly typed detach sequence's window
        self._view = (0, 0)  # crop offset (x, y) into the remote screen when the pane is smaller
        self._mouse_buttons = 0
        self._pending: deque[bytes | None] = deque()  # queued output; None: a fresh mirror here
        self._pending_bytes = 0
        self._parser: asyncio.Task | None = None
        self._link: PaneLinkEnd | None = None  # the session behind the pane (``bind_link``)
        # counters for tests and the bench
        self.frames = 0
        self.rows_refreshed = 0
        self.bytes_fed = 0

    # ------------------------------------------------------------------ remote screen

    @property
    def link(self) -> PaneLinkEnd | None:
        """The session behind the pane, or ``None`` (a replay, a recording: input goes nowhere)."""
        return self._link

    def bind_link(self, link: PaneLinkEnd) -> None:
        """Put ``link`` behind the pane: input leaves through it, parsed output is credited to it."""
        self._link = link

    @property
    def remote_size(self) -> tuple[int, int]:
        return self.mirror.cols, self.mirror.rows

    def feed(self, data: bytes) -> None:
        """Parse remote output now; repaint on the next frame tick."""
        if not data:
            return
        self.mirror.feed(data)
        self.bytes_fed += len(data)
        self._schedule()

    # -- queued output (live sessions)

    @property
    def pending_bytes(self) -> int:
        """Queued output not parsed yet."""
        return self._pending_bytes

    @property
    def pending_max(self) -> int:
        """Past this much queued output the pane is behind (room for the largest repaint)."""
        return max(PENDING_MIN, 64 * self.mirror.cols * self.mirror.rows)

    def queue(self, data: bytes) -> None:
        """Parse remote output soon, within the parse budget; repaint on a frame tick."""
        if data:
            self._pending.append(data)
            self._pending_bytes += len(data)
            self._start_parser()

    def queue_reset(self) -> None:
        """Output queued after this starts from a fresh mirror (a repaint follows a drop)."""
        self._pending.append(None)
        self._start_parser()

    def drop_pending(self) -> int:
        """Forget queued output (a repaint will supersede it); the number of bytes forgotten,
        which the history marks as a gap."""
        n = self._pending_bytes
        self._pending.clear()
        self._pending_bytes = 0
        self.history.gap(n)
        return n

    def _start_parser(self) -> None:
        if self._parser is None or self._parser.done():
            self._parser = asyncio.get_running_loop().create_task(self._parse_queued())

    async def _parse_queued(self) -> None:
        budget = PARSE_BUDGET
        pending = self._pending
        while pending:
            wait = budget.wait(time.perf_counter())
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            item = pending[0]
            t0 = time.perf_counter()
            if item is None:
                pending.popleft()
                self._fresh_mirror()
                n = 0
            else:
                if len(item) > PARSE_SLICE:
                    item, pending[0] = item[:PARSE_SLICE], item[PARSE_SLICE:]
                else:
                    pending.popleft()
                n = len(item)
                self._pending_bytes -= n
                self.mirror.feed(item)
                self.bytes_fed += n
            budget.spend(time.perf_counter() - t0)
            self._schedule()
            if n and self._link is not None:
                self._link.parsed(n)
            await asyncio.sleep(0)  # keys, timers and the network run between slices

    def _fresh_mirror(self) -> None:
        self.mirror.clear()
        self._scrolled_at = self.mirror.scrolled
        self._rows_cache.clear()
        self.refresh()

    def resize_remote(self, cols: int, rows: int) -> None:
        """Follow a remote size change the user asked for (the caller sends the resize)."""
        if (cols, rows) != self.remote_size and cols > 0 and rows > 0:
            self.mirror.resize(cols, rows)
            self._rows_cache.clear()
            self._schedule()

    def reset(self, cols: int | None = None, rows: int | None = None) -> None:
        """A fresh mirror (a new session repaints from its snapshot); queued output is dropped."""
        self.drop_pending()
        c, r = self.remote_size
        self.mirror = Mirror(cols or c, rows or r)
        self.mirror.keep_history(self.history)
        if len(self.history):
            self.history.note(f"new session {time.strftime('%H:%M:%S')}")
        self._scrolled_at = 0
        self._rows_cache.clear()
        self.refresh()

    def on_unmount(self) -> None:
        if self._parser is not None:
            self._parser.cancel()

    def content_text(self) -> list[str]:
        return self.mirror.text_lines()

    # -- for tests and diagnostics

    @property
    def frame_pending(self) -> bool:
        """A repaint frame is scheduled (output came since the last one)."""
        return self._timer is not None

    @property
    def frame_gap(self) -> float:
        """The gap before the next frame (longer after a full repaint, longer still in a flood)."""
        return self._gap

    def frame_now(self) -> None:
        """Run the scheduled frame at once (a test's way past the frame timer)."""
        if self._timer is not None:
            self._timer.stop()
        self._frame()

    def cached_row(self, y: int) -> tuple | None:
        """Row ``y``'s cache entry (its shape and Strip), kept while the row did not change."""
        return self._rows_cache.get(y)

    def _schedule(self) -> None:
        if self._timer is None and self.is_mounted:
            now = time.monotonic()
            gap = self._gap
            # on a grid shared by every pane: panes ticking together repaint in one screen update
            due = math.ceil(max(now, self._last_frame + 0.75 * gap) / gap) * gap
            self._timer = self.set_timer(max(0.001, due - now), self._frame, name="terminal-frame")

    def _frame(self) -> None:
        self._timer = None
        m = self.mirror
        now = time.monotonic()
        if m.synchronized:
            if self._sync_since is None:
                self._sync_since = now
            if now - self._sync_since < SYNC_HOLD_MAX_S:
                self._timer = self.set_timer(FRAME_S, self._frame, name="terminal-frame")
                return
        else:
            self._sync_since = None
        self._last_frame = now
        dirty = m.take_dirty()
        if not dirty:
            return
        self.frames += 1
        cache = self._rows_cache
        for y in dirty:
            cache.pop(y, None)
        self._gap = self._frame_s
        # a screenful or more scrolled by unseen since the last frame: nobody reads a flood, so
        # its full repaints (the costly kind) come at a lower rate
        scrolled = m.scrolled
        full_gap = self._full_frame_s
        flood = scrolled - self._scrolled_at > m.rows
        if flood:
            full_gap = max(full_gap, FLOOD_FRAME_S)
        self._scrolled_at = scrolled
        self._reuse = not flood
        self._strips_before, self._strips = ({}, {}) if flood else (self._strips, {})
        if self._follow_cursor():
            self.rows_refreshed += m.rows
            self._gap = full_gap
            self.refresh()
            return
        ox, oy = self._offsets()
        w, h = self.size
        regions = [Region(0, y - oy, w, 1) for y in dirty if 0 <= y - oy < h]
        self.rows_refreshed += len(regions)
        if len(regions) > h // 2:
            self._gap = full_gap
            self.refresh()
        elif regions:
            self.refresh(*regions)

    # ------------------------------------------------------------------ geometry

    def _offsets(self) -> tuple[int, int]:
        """Remote cell shown at pane cell (0, 0): negative = centred with a margin."""
        w, h = self.size
        cols, rows = self.remote_size
        vx, vy = self._view
        ox = vx if w < cols else -((w - cols) // 2)
        oy = vy if h < rows else -((h - rows) // 2)
        return ox, oy

    def _follow_cursor(self) -> bool:
        """Keep the cursor inside a cropped view; True when the view moved."""
        w, h = self.size
        cols, rows = self.remote_size
        cx, cy, _ = self.mirror.cursor
        vx, vy = self._view
        nx = vx if w >= cols else min(max(vx, cx - w + 1, 0), cx, cols - w)
        ny = vy if h >= rows else min(max(vy, cy - h + 1, 0), cy, rows - h)
        nx, ny = max(0, nx), max(0, ny)
        if (nx, ny) != (vx, vy):
            self._view = (nx, ny)
            return True
        return False

    def to_remote(self, x: int, y: int) -> tuple[int, int] | None:
        ox, oy = self._offsets()
        rx, ry = x + ox, y + oy
        cols, rows = self.remote_size
        if 0 <= rx < cols and 0 <= ry < rows:
            return rx, ry
        return None

    def on_resize(self, event: events.Resize) -> None:
        self._follow_cursor()
        self.refresh()

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return self.mirror.cols

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self.mirror.rows

    # ------------------------------------------------------------------ rendering

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._clear_styles()
        self._base_at = -1.0

    def _clear_styles(self) -> None:
        self._styles.clear()
        self._styles_token = object()
        self._rows_cache.clear()
        self._strips.clear()
        self._strips_before.clear()
        self._blank = None

    def _style(self, attrs: tuple) -> Style:
        s = self._styles.get(attrs)
        if s is None:
            s = self._styles[attrs] = self._base + attrs_style(attrs)
        return s

    def _geometry(self) -> tuple:
        """Where the remote screen sits in the pane, once per render pass: ``(w, oy, x0, shown,
        left, right, cursor x or -1, cursor row)`` — remote columns ``x0``..``x0 + shown`` are
        shown after ``left`` outside cells and before ``right`` ones."""
        w, h = self.size
        m = self.mirror
        cols, rows = m.cols, m.rows
        vx, vy = self._view
        ox = vx if w < cols else -((w - cols) // 2)
        oy = vy if h < rows else -((h - rows) // 2)
        x0 = max(ox, 0)
        shown = max(0, min(cols - x0, w))
        left = -ox if ox < 0 else 0
        right = max(0, w - shown - left)
        cx, cy, visible = m.cursor
        if not (visible and self.show_cursor and self.has_focus and x0 <= cx < x0 + shown):
            cx = -1
        return w, oy, x0, shown, left, right, cx, cy

    def _line(self, y: int, geom: tuple) -> Strip:
        if self.copy is not None:
            return self._copy_line(y, geom[0])
        w, oy, x0, shown, left, right, cx, cy = geom
        ry = y + oy
        if ry < 0 or ry >= self.mirror.rows:
            blank = self._blank
            if blank is None or blank.cell_length != w:
                blank = self._blank = Strip.blank(w, self._outside)
            return blank
        strip = self._row_strip(ry, x0, shown, left, right)
        if cy == ry and cx >= 0:
            strip = _with_cursor(strip, left + cx - x0, w)
        return strip

    def _row_strip(self, y: int, x: int, width: int, left: int = 0, right: int = 0) -> Strip:
        """Remote row ``y``, columns ``x``..``x + width`` (a cropped view renders only those),
        between ``left`` and ``right`` outside cells: the pane's whole line, one Strip. A row
        whose runs match a Strip made before (a scrolled line) reuses it, and with it Textual's
        per-Strip caches (line filters, cuts)."""
        shape = (x, width, left, right)
        hit = self._rows_cache.get(y)
        if hit is not None and hit[0] == shape:
            return hit[1]
        if len(self._styles) > 4096:
            self._clear_styles()
        m = self.mirror
        runs = m.styled_runs(y, self._style_of, self._styles_token, x, x + width)
        if runs is None:  # wide characters in a cropped row: crop whole cells
            full = m.styled_runs(y, self._style_of, self._styles_token) or ()  # uncropped: never None
            segs = list(Strip([Segment(t, st) for t, st in full if t], m.cols).crop(x, x + width))
            key = None
        else:
            key = (shape, *runs)
            strip = self._strips.get(key) or self._strips_before.get(key)
            if strip is not None:
                self._rows_cache[y] = (shape, strip)
                return strip
            segs = [Segment(t, st) for t, st in runs if t]
        if left:
            segs.insert(0, Segment(" " * left, self._outside))
        if right:
            segs.append(Segment(" " * right, self._outside))
        strip = Strip(segs, left + width + right)
        if key is not None:
            if self._reuse:
                self._strips[key] = strip
        self._rows_cache[y] = (shape, strip)
        return strip

    def _check_base_style(self) -> None:
        """Pick up a style change (theme, focus) — at most once per frame, ``rich_style`` is costly."""
        now = time.monotonic()
        if now - self._base_at < FRAME_S:
            return
        self._base_at = now
        base = self.rich_style
        if base is not self._styled_for:  # styles changed: rebuild the caches once
            self._styled_for = base
            if base != self._base:
                self._base = base
                self._clear_styles()
            self._base = base
            outside = base + self.get_component_rich_style("terminal--outside", partial=True)
            if outside != self._outside:
                self._outside = outside
                self._clear_styles()

    def render_line(self, y: int) -> Strip:
        self._check_base_style()
        return self._line(y, self._geometry())

    def _plain_box(self) -> bool:
        """No border, padding, outline, tint, hatch or opacity: Textual's per-line pass would
        hand our Strips through unchanged (``render_lines`` then skips it)."""
        st = self.styles
        return (not any(st.gutter) and not any(edge for edge, _ in st.outline) and not st.tint.a
                and st.text_opacity == 1.0 and self.opacity == 1.0 and not st.has_rule("hatch"))

    def render_lines(self, crop: Region) -> list[Strip]:
        """The pane's lines for the compositor. A plain pane (no border, padding, tint...)
        returns its cached row Strips as they are, with the app's line filters applied through
        each Strip's own cache: Textual's per-line pass would build two new Strips per row per
        frame, the larger part of a scrolling frame's cost. Anything else takes Textual's path."""
        if not self._plain_box():
            return super().render_lines(crop)
        self._check_base_style()
        geom = self._geometry()
        line = self._line
        strips = [line(y, geom) for y in crop.line_range]
        filters = self.get_line_filters()
        if filters:
            background = self.background_colors[1]
            for f in filters:
                strips = [s.apply_filter(f, background) for s in strips]
        x1, x2 = crop.column_span
        if x1 != 0 or x2 != geom[0]:
            strips = [s.crop(x1, x2) for s in strips]
        return strips

    # ------------------------------------------------------------------ input

    def check_consume_key(self, key: str, character: str | None) -> bool:
        # hides every binding, priority ones included, while focused (and in copy mode)
        return self.interactive or self.copy is not None

    def _send(self, data: bytes | None) -> None:
        if data and self._link is not None:
            self._link.send(data)

    @property
    def detach_byte(self) -> int | None:
        """The single detach key (the prefix), when one is configured."""
        return self.detach.key

    def _flush_held(self) -> None:
        """A partly typed detach sequence's window passed (or input moved on): its presses go
        to the program after all."""
        if self._held_timer is not None:
            self._held_timer.stop()
            self._held_timer = None
        if self._matcher.holding:
            self._send(self._matcher.flush())

    def on_key(self, event: events.Key) -> None:
        if self.copy is not None:
            event.stop()
            event.prevent_default()
            self._copy_key(event)
            return
        if not self.interactive:
            if event.key in ("pageup", "shift+pageup"):  # a peek: PgUp scrolls back
                event.stop()
                event.prevent_default()
                if self.enter_copy_mode() and self.copy is not None:
                    self.copy.page(-1)
                    self.refresh()
                return
            data = encode_key(event.key, event.character, app_cursor=self.mirror.app_cursor)
            if data and self._matcher.feed(data)[1]:  # read-only: nothing is sent, ever
                event.stop()
                event.prevent_default()
                self.post_message(self.Detach(self))
            return
        event.stop()
        event.prevent_default()
        if self._prefix_timer is not None:  # the detach key was pressed: ``[`` is copy mode
            self._prefix_timer.stop()
            self._prefix_timer = None
            if event.key == "left_square_bracket":
                self.enter_copy_mode()
            elif event.key == "f":
                self.post_message(self.FitToggle(self))
            else:
                self.post_message(self.Detach(self))
            return
        data = encode_key(event.key, event.character, app_cursor=self.mirror.app_cursor)
        if not data:
            return
        if self._held_timer is not None:
            self._held_timer.stop()
            self._held_timer = None
        out, done = self._matcher.feed(data)
        self._send(out)
        if done:
            if len(self._matcher.completed) > 1:  # the end of a sequence: out at once
                self.post_message(self.Detach(self))
            else:  # the single key: a prefix for a moment (``[`` copy mode, ``f`` fit)
                self._prefix_timer = self.set_timer(PREFIX_S, self._prefix_done, name="terminal-prefix")
        elif self._matcher.holding:
            self._held_timer = self.set_timer(self._matcher.window, self._flush_held,
                                              name="terminal-held")

    def _prefix_done(self) -> None:
        self._prefix_timer = None
        self.post_message(self.Detach(self))

    def on_paste(self, event: events.Paste) -> None:
        if not self.interactive:
            return
        event.stop()
        event.prevent_default()
        self._flush_held()
        self._send(encode_paste(event.text, self.mirror.bracketed_paste))

    def on_focus(self, event: events.Focus) -> None:
        self._base_at = -1.0
        self._rows_cache.pop(self.mirror.cursor[1], None)
        self.refresh()
        if self.interactive and self.mirror.focus_events:
            self._send(b"\x1b[I")

    def on_blur(self, event: events.Blur) -> None:
        self._base_at = -1.0
        self._flush_held()
        self.refresh()
        if self.interactive and self.mirror.focus_events:
            self._send(b"\x1b[O")

    # mouse: forwarded only when interactive and the program turned tracking on

    def _mouse(self, event: events.MouseEvent, *, press: bool, motion: bool = False,
               wheel: int = 0, button: int = 0) -> None:
        m = self.mirror
        if not self.interactive or m.mouse_tracking is None:
            return
        if motion and m.mouse_tracking == 1000:
            return
        if motion and m.mouse_tracking == 1002 and not self._mouse_buttons:
            return
        pos = self.to_remote(event.x, event.y)
        if pos is None:
            return
        event.stop()
        self._send(encode_mouse(button, pos[0], pos[1], press=press, motion=motion, wheel=wheel,
                                shift=event.shift, meta=event.meta, ctrl=event.ctrl, sgr=m.mouse_sgr))

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if not self.has_focus:
            self.focus()
        self._mouse_buttons |= 1 << event.button
        self._mouse(event, press=True, button=event.button)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        self._mouse_buttons &= ~(1 << event.button)
        self._mouse(event, press=False, button=event.button)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        held = next((b for b in (1, 2, 3) if self._mouse_buttons & (1 << b)), 0)
        self._mouse(event, press=True, motion=True, button=held)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, -1)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, 1)

    def _wheel(self, event: events.MouseEvent, d: int) -> None:
        """The wheel: scrolls copy mode; else forwarded to a program that asked for the mouse;
        else, on an alternate screen (``less``, ``vim``), arrow keys as xterm's alternateScroll
        sends them; else scrolls back into copy mode (tmux with the mouse on)."""
        event.stop()
        m = self.mirror
        if self.copy is not None:
            cm = self.copy
            if d > 0 and cm.top >= max(0, len(cm.lines) - cm.height) and cm.sel is None and cm.prompt is None:
                self.exit_copy_mode()  # scrolled past the bottom: live again
                return
            cm.move(d * WHEEL_LINES)
            self.refresh()
            return
        if self.interactive and m.mouse_tracking is not None:
            self._mouse(event, press=True, wheel=d)
            return
        if self.interactive and m.alt_screen:
            key = encode_key("up" if d < 0 else "down", None, app_cursor=m.app_cursor)
            if key is not None:  # an arrow always encodes
                self._send(key * WHEEL_LINES)
            return
        if d < 0 and self.enter_copy_mode() and self.copy is not None:
            self.copy.move(-WHEEL_LINES)
            self.refresh()

    # ------------------------------------------------------------------ copy mode

    def enter_copy_mode(self) -> bool:
        """Freeze history + screen into copy mode (``False`` when the pane has no size yet)."""
        h = self.size.height
        if h < 2 or self.size.width < 1:
            return False
        m = self.mirror
        alt = m.alt_screen
        history = [] if alt else list(self.history.lines)
        self.copy = CopyMode.open(history, m.text_lines(), h - 1, header=self.history.header(alt),
                                  alt=alt, cursor_row=m.cursor[1])
        self._flush_held()
        self.refresh()
        return True

    def exit_copy_mode(self) -> None:
        self.copy = None
        if self._search_task is not None:
            self._search_task.cancel()
            self._search_task = None
        self._rows_cache.clear()
        self.refresh()

    def _copy_key(self, event: events.Key) -> None:
        cm = self.copy
        assert cm is not None
        key, ch = event.key, event.character
        if cm.prompt is not None:  # typing a search
            if key == "escape":
                cm.prompt, cm.typed = None, ""
            elif key == "enter":
                q, fwd = cm.typed, cm.prompt == "/"
                cm.prompt, cm.typed = None, ""
                self._search(q, fwd)
            elif key == "backspace":
                cm.typed = cm.typed[:-1]
            elif ch and ch.isprintable() and len(cm.typed) < 200:
                cm.typed += ch
            self.refresh()
            return
        h = cm.height
        moves = {
            "j": lambda: cm.move(1), "down": lambda: cm.move(1), "k": lambda: cm.move(-1),
            "up": lambda: cm.move(-1), "h": lambda: cm.move_x(-1), "left": lambda: cm.move_x(-1),
            "l": lambda: cm.move_x(1), "right": lambda: cm.move_x(1),
            "pageup": lambda: cm.page(-1), "ctrl+b": lambda: cm.page(-1), "shift+pageup": lambda: cm.page(-1),
            "pagedown": lambda: cm.page(1), "ctrl+f": lambda: cm.page(1), "shift+pagedown": lambda: cm.page(1),
            "ctrl+u": lambda: cm.move(-(h // 2)), "ctrl+d": lambda: cm.move(h // 2),
            "g": cm.to_top, "home": cm.to_top, "G": cm.to_bottom, "end": cm.to_bottom,
            "0": cm.line_start, "dollar_sign": cm.line_end,
            "n": lambda: cm.next_match(), "N": lambda: cm.next_match(reverse=True),
            "v": lambda: cm.toggle_select("line"), "V": lambda: cm.toggle_select("line"),
            "ctrl+v": lambda: cm.toggle_select("block"),
        }
        if key in moves:
            moves[key]()
        elif key in ("slash", "question_mark"):
            cm.prompt, cm.typed = ("/" if key == "slash" else "?"), ""
        elif key in ("y", "Y"):
            self._yank(clipboard=key == "Y")
        elif key == "escape" and cm.sel is not None:
            cm.sel = None
        elif key in ("q", "escape"):
            self.exit_copy_mode()
            return
        self.refresh()

    def _search(self, query: str, forward: bool) -> None:
        cm = self.copy
        assert cm is not None
        cm.start_search(query, forward)
        if self._search_task is not None:
            self._search_task.cancel()

        async def scan() -> None:  # a slice of lines at a time, the loop free between slices
            while self.copy is cm and not cm.search_slice():  # noqa: ASYNC110 - a yield between slices
                await asyncio.sleep(0)
            self.refresh()

        self._search_task = asyncio.get_running_loop().create_task(scan())

    def _yank(self, *, clipboard: bool) -> None:
        cm = self.copy
        assert cm is not None
        text = cm.selected_text()
        n = text.count("\n") + 1
        path, problem = None, None
        try:
            clips = cotal_home() / "clips"
            clips.mkdir(parents=True, exist_ok=True, mode=0o700)
            stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.clip_name)[:40] or "pane"
            base = clips / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
            p, i = base.with_suffix(".txt"), 1
            while p.exists():
                i += 1
                p = clips / f"{base.name}-{i}.txt"
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text + "\n")
            path = str(p)
        except OSError as e:
            problem = f"cannot write the clip: {e.strerror or e}"
        if clipboard:
            self.app.copy_to_clipboard(text)  # OSC 52, on this explicit key only
        where = path or problem or ""
        cm.message = (f"yanked {n} line{'s' if n != 1 else ''} to {where}"
                      + (" and the clipboard" if clipboard else "")) if path else (problem or "")
        cm.sel = None
        self.post_message(self.Yanked(self, path, text, clipboard, problem))

    def _copy_line(self, y: int, width: int) -> Strip:
        cm = self.copy
        assert cm is not None
        base = self._base
        if y == cm.height:  # the status row
            text = cm.status()[:width].ljust(width)
            return Strip([Segment(text, base + COPY_STYLES["status"])], width)
        i = cm.top + y
        line = cm.lines[i] if i < len(cm.lines) else ""
        cells = line[:width].ljust(width)
        marked = cm.sel is not None or cm.matches or i == cm.row
        if not marked:
            return Strip([Segment(cells, base)], width)
        segs: list[Segment] = []
        kinds = cm.match_kinds(i, width)
        cursor_x = min(cm.col, width - 1) if i == cm.row else -1
        styles: dict[tuple[int, bool, bool], Style] = {}  # the few combinations on this row
        for x, c in enumerate(cells):
            key = (kinds[x], cm.in_selection(i, x), x == cursor_x)
            st = styles.get(key)
            if st is None:
                st = base
                if key[0]:
                    st = st + COPY_STYLES["current" if key[0] == 2 else "match"]
                if key[1]:
                    st = st + COPY_STYLES["sel"]
                if key[2]:
                    st = st + COPY_STYLES["cursor"]
                styles[key] = st
            if segs and segs[-1].style == st:
                segs[-1] = Segment(segs[-1].text + c, st)
            else:
                segs.append(Segment(c, st))
        return Strip(segs, width)


def _with_cursor(strip: Strip, x: int, cols: int) -> Strip:
    before, at, after = strip.divide([x, x + 1, cols])[:3] if x + 1 < cols else (*strip.divide([x, cols])[:2], Strip([]))
    segs = [Segment(s.text, (s.style or Style()) + Style(reverse=not (s.style and s.style.reverse)))
            for s in at]
    if not segs:
        segs = [Segment(" ", Style(reverse=True))]
    return Strip.join([before, Strip(segs), after])
