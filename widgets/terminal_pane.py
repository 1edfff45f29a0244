"""A remote terminal in a pane: a headless mirror drawn with the Line API, dirty rows only.

Live output is queued (:meth:`TerminalPane.queue`) and parsed by a task of the pane's own, one slice at
a time with the event loop free between slices, within a parse budget shared by every pane of
the process (a share of each 1/60 s frame window): however fast output arrives, parsing never
takes the loop for more than a slice, nor more than its share of it. Parsed bytes are reported
(``on_parsed``) so the session returns credit at the rate we parse; a session whose output
outruns the budget skips ahead (``drop_pending``, then a repaint — see ``cotal_tui/seats.py``).
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
``ctrl+q`` — takes one from the remote program, except the escape hatch: the detach key
(Ctrl-] by default) or Esc twice within 0.4 s. A single Esc goes to the program after that.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from typing import Callable

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from attach.mirror import Mirror
from attach.keycodes import encode_key, encode_mouse, encode_paste

FRAME_S = 1 / 60
FULL_FRAME_S = 1 / 20  # after a frame that repainted (nearly) everything, e.g. a scrolling flood
FLOOD_FRAME_S = 1 / 10  # ... when more lines scrolled by since the last frame than the screen holds
SYNC_HOLD_MAX_S = 0.25
ESC_DOUBLE_S = 0.4
DEFAULT_DETACH = 0x1D
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
        return hit  # type: ignore[return-value]
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
            except Exception:
                out = None
    _COLOR_CACHE[c] = out
    return out


def attrs_style(attrs: tuple) -> Style:
    """The Style for :meth:`attach.mirror.Mirror.runs` attributes."""
    fg, bg, bold, italics, underscore, strike, reverse, _blink = attrs
    return Style(color=rich_color(fg), bgcolor=rich_color(bg), bold=bold or None, italic=italics or None,
                 underline=underscore or None, reverse=reverse or None, strike=strike or None)


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

    class Send(Message):
        """Bytes for the remote program (keys, paste, mouse, focus reports)."""

        def __init__(self, pane: "TerminalPane", data: bytes) -> None:
            super().__init__()
            self.pane = pane
            self.data = data

        @property
        def control(self) -> "TerminalPane":
            return self.pane

    class Detach(Message):
        """The escape hatch was pressed."""

        def __init__(self, pane: "TerminalPane") -> None:
            super().__init__()
            self.pane = pane

        @property
        def control(self) -> "TerminalPane":
            return self.pane

    def __init__(
        self, cols: int = 80, rows: int = 24, *, interactive: bool = False,
        detach_byte: int = DEFAULT_DETACH, show_cursor: bool = True, frame_hz: float = 60.0,
        name: str | None = None, id: str | None = None, classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.mirror = Mirror(cols, rows)
        self.interactive = interactive
        self.detach_byte = detach_byte
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
        self._esc_timer: Timer | None = None
        self._view = (0, 0)  # crop offset (x, y) into the remote screen when the pane is smaller
        self._mouse_buttons = 0
        self._pending: deque[bytes | None] = deque()  # queued output; None: a fresh mirror here
        self._pending_bytes = 0
        self._parser: asyncio.Task | None = None
        self.on_parsed: Callable[[int], None] | None = None  # bytes of queued output parsed
        # counters for tests and the bench
        self.frames = 0
        self.rows_refreshed = 0
        self.bytes_fed = 0

    # ------------------------------------------------------------------ remote screen

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
        """Forget queued output (a repaint will supersede it); the number of bytes forgotten."""
        n = self._pending_bytes
        self._pending.clear()
        self._pending_bytes = 0
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
            if n and self.on_parsed is not None:
                self.on_parsed(n)
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
        self._scrolled_at = 0
        self._rows_cache.clear()
        self.refresh()

    def on_unmount(self) -> None:
        if self._parser is not None:
            self._parser.cancel()

    def content_text(self) -> list[str]:
        return self.mirror.text_lines()

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
            full = m.styled_runs(y, self._style_of, self._styles_token)
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
        return self.interactive  # hides every binding, priority ones included, while focused

    def _send(self, data: bytes | None) -> None:
        if data:
            self.post_message(self.Send(self, data))

    def _flush_esc(self) -> None:
        if self._esc_timer is not None:
            self._esc_timer.stop()
            self._esc_timer = None
            self._send(b"\x1b")

    def on_key(self, event: events.Key) -> None:
        if not self.interactive:
            return
        event.stop()
        event.prevent_default()
        if event.key == "escape":
            if self._esc_timer is not None:
                self._esc_timer.stop()
                self._esc_timer = None
                self.post_message(self.Detach(self))
                return
            self._esc_timer = self.set_timer(ESC_DOUBLE_S, self._flush_esc, name="terminal-esc")
            return
        self._flush_esc()
        data = encode_key(event.key, event.character, app_cursor=self.mirror.app_cursor)
        if data == bytes([self.detach_byte]):
            self.post_message(self.Detach(self))
            return
        self._send(data)

    def on_paste(self, event: events.Paste) -> None:
        if not self.interactive:
            return
        event.stop()
        event.prevent_default()
        self._flush_esc()
        self._send(encode_paste(event.text, self.mirror.bracketed_paste))

    def on_focus(self, event: events.Focus) -> None:
        self._base_at = -1.0
        self._rows_cache.pop(self.mirror.cursor[1], None)
        self.refresh()
        if self.interactive and self.mirror.focus_events:
            self._send(b"\x1b[I")

    def on_blur(self, event: events.Blur) -> None:
        self._base_at = -1.0
        self._flush_esc()
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
        self._mouse(event, press=True, wheel=-1)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._mouse(event, press=True, wheel=1)


def _with_cursor(strip: Strip, x: int, cols: int) -> Strip:
    before, at, after = strip.divide([x, x + 1, cols])[:3] if x + 1 < cols else (*strip.divide([x, cols])[:2], Strip([]))
    segs = [Segment(s.text, (s.style or Style()) + Style(reverse=not (s.style and s.style.reverse)))
            for s in at]
    if not segs:
        segs = [Segment(" ", Style(reverse=True))]
    return Strip.join([before, Strip(segs), after])
