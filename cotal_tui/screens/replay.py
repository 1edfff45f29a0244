"""The console on a recording: the same screen, fed by a replay, plus a timeline.

Keys (priority over the panels', except while typing in the search box): space pauses, ←/→
jump to the previous/next event (message, lifecycle, presence change), ``[``/``]`` jump a minute
back/forward, ``{``/``}`` to the previous/next marker, ``M`` lists the markers, ``m`` adds one at
the replay's time (stored at the end of the recording file). Markers are the hand ones and those
derived from the recording (an agent starting to wait, a crash, a new incarnation, a manager up
or down, rejected input: :mod:`meshview.record.markers`, derived in a thread worker). The timeline
under the panels shows where the replay is and ``◆`` where the markers are. Nothing is ever
sent.

A recording made with ``--record-seats`` holds the terminals the operator had open: roster
``a``/``p`` (or ``:attach``/``:peek``) on such a seat opens :class:`ReplaySeatScreen`, its
terminal in a read-only pane that follows the replay's time, with the same keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Input, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from cotal_tui.screens.console import ConsoleScreen
from cotal_tui.screens.markers import FindBox, MarkerLabel
from cotal_tui.shell import ShellScreen
from meshview.record.markers import Marker, auto_markers
from meshview.record.recordtools import grep
from meshview.record.replay import ReplaySession
from meshview.record.seatreplay import SeatStream
from widgets.status_bar import StatusBar
from widgets.terminal_pane import TerminalPane

# the screens ReplaySeek is mixed into are ShellScreens; at run time it stays a plain mixin, out
# of Textual's DOM class chain (its bindings, CSS type names and handler walk stay as they were)
if TYPE_CHECKING:
    _SeekHost = ShellScreen
else:
    _SeekHost = object

REPLAY_ACTIONS = ("replay_pause", "replay_step", "replay_minute", "replay_marker", "replay_markers",
                  "replay_mark", "replay_find")


def clock(ms: float) -> str:
    s = max(0, int(ms // 1000))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


class Timeline(Widget):
    """One line: play state, speed, position / length, a bar, the event count, the keys."""

    DEFAULT_CSS = """
    Timeline {
        height: 1;
        background: $panel;
        color: $text;
    }
    """

    def __init__(self, session: ReplaySession, **kw: Any) -> None:
        super().__init__(**kw)
        self.session = session

    def on_mount(self) -> None:
        self.set_interval(0.1, self.refresh, name="timeline")

    def describe(self) -> tuple[str, str, str]:
        """(left, right, state) texts: ``▶ 10× 00:12 / 00:30``, ``event 4/17 ...``."""
        player = self.session.player
        r = player.replay
        span = r.end - r.start
        pos = r.now - r.start
        if r.at_end and r.now >= r.end:
            state = "■ end"
        elif player.paused:
            state = "⏸ paused"
        else:
            state = f"▶ {player.speed:g}×" if player.speed else "▶ max"
        n, total = r.event_number()
        left = f" {state}  {clock(pos)} / {clock(span)} "
        marks = self.session.markers
        mk = f"  {len(marks)} marker{'s' if len(marks) != 1 else ''} {{/}}" if marks else ""
        right = f" event {n}/{total}{mk}  space pause  ←/→ event  [/] minute "
        return left, right, state

    def render(self) -> Text:
        r = self.session.player.replay
        left, right, _ = self.describe()
        width = self.size.width
        bar_w = max(0, width - len(left) - len(right))
        span = max(1.0, r.end - r.start)
        filled = int(round(bar_w * min(1.0, max(0.0, (r.now - r.start) / span))))
        t = Text(left, style="bold")
        if bar_w:
            bar = ["━"] * max(0, filled - 1) + ["●"] + ["─"] * max(0, bar_w - max(filled, 1))
            for m in self.session.markers:
                i = min(bar_w - 1, int(bar_w * min(1.0, max(0.0, (m.t - r.start) / span))))
                if bar[i] != "●":
                    bar[i] = "◆"
            for i, ch in enumerate(bar):
                t.append(ch, style="bold" if i < filled or ch == "◆" else "dim")
        t.append(right, style="dim")
        return t


REPLAY_BINDINGS = [
    Binding("space", "replay_pause", "pause / play", priority=True, id="replay.pause"),
    Binding("left", "replay_step(-1)", "previous event", priority=True, id="replay.prev"),
    Binding("right", "replay_step(1)", "next event", priority=True, id="replay.next"),
    Binding("left_square_bracket", "replay_minute(-1)", "a minute back", priority=True,
            id="replay.minute-back"),
    Binding("right_square_bracket", "replay_minute(1)", "a minute forward", priority=True,
            id="replay.minute-forward"),
    Binding("left_curly_bracket", "replay_marker(-1)", "previous marker", priority=True,
            id="replay.marker-back"),
    Binding("right_curly_bracket", "replay_marker(1)", "next marker", priority=True,
            id="replay.marker-forward"),
    Binding("M", "replay_markers", "list the markers", priority=True, id="replay.markers"),
    Binding("m", "replay_mark", "add a marker here", priority=True, id="replay.mark"),
    Binding("slash", "replay_find", "find text in the recording", priority=True, id="replay.find"),
]


class ReplaySeek(_SeekHost):
    """←/→ by event and [/] by minute, for every screen of a replay (each says how it moved)."""

    session: ReplaySession
    if TYPE_CHECKING:
        def _moved(self) -> None: ...  # each screen says how it follows a seek

    def action_replay_step(self, delta: int) -> None:
        self.session.replay.step(delta)
        self._moved()

    def action_replay_minute(self, delta: int) -> None:
        r = self.session.replay
        r.seek(r.now + delta * 60_000)
        self._moved()

    def action_replay_marker(self, delta: int) -> None:
        m = self.session.marker_near(delta)
        if m is None:
            self.shell.notify_line(f"no marker {'after' if delta > 0 else 'before'} this point"
                                 + ("" if self.session.markers_ready else " (still finding them)"), True)
            return
        self.seek_marker(m)

    def seek_marker(self, m: Marker) -> None:
        self.session.replay.seek(m.t)
        self._moved()
        self.shell.notify_line(f"◆ {clock(m.t - self.session.replay.start)} {m.kind}: {m.label}")

    def action_replay_markers(self) -> None:
        self.app.push_screen(MarkerList(self.session), self._picked)

    def _picked(self, m: Marker | None) -> None:
        if m is not None:
            self.seek_marker(m)

    def action_replay_find(self) -> None:
        self.app.push_screen(FindBox(self.session.find_query), self._find)

    def _find(self, text: str | None) -> None:
        if not text:
            return
        s = self.session
        if text == s.find_query and s.find_matches is not None:
            self._next_match()
            return
        s.find_query, s.find_matches = text, None
        self.shell.notify_line(f"finding {text!r}…")
        self.run_worker(lambda: self._grep(text), thread=True, exclusive=True, group="find")

    def _grep(self, text: str) -> None:
        """Thread worker: the whole recording searched off the event loop."""
        found = list(grep(self.session.recording, text))
        self.app.call_from_thread(self._found, text, found)

    def _found(self, text: str, found: list) -> None:
        s = self.session
        if text != s.find_query:
            return  # a newer search replaced this one
        s.find_matches = found
        if not found:
            self.shell.notify_line(f"{text!r}: not in this recording", True)
            return
        self._next_match()

    def _next_match(self) -> None:
        s = self.session
        found = s.find_matches or []
        if not found:
            self.shell.notify_line(f"{s.find_query!r}: not in this recording", True)
            return
        now = s.replay.now
        i = next((k for k, m in enumerate(found) if m.t > now + 1), 0)  # after here, else wrap
        m = found[i]
        s.replay.seek(m.t)
        self._moved()
        self.shell.notify_line(f"match {i + 1}/{len(found)} at {clock(m.offset)}: {m.line[:100]}")

    def action_replay_mark(self) -> None:
        self.app.push_screen(MarkerLabel(clock(self.session.replay.now - self.session.replay.start)),
                             self._label)

    def _label(self, label: str | None) -> None:
        if label is None:
            return
        m, problem = self.session.add_mark(label)
        self.query_one(Timeline).refresh()
        if problem:
            self.shell.notify_line(f"marker kept for this replay only: {problem}", True)
        else:
            self.shell.notify_line(f"◆ marker {m.label!r} at {clock(m.t - self.session.replay.start)} "
                                 "stored in the recording")


class MarkerList(ModalScreen["Marker | None"]):
    """``M``: every marker with its time and kind; Enter seeks there, Esc closes."""

    BINDINGS = [Binding("escape", "dismiss_none", "close", id="replay.markers-close")]
    DEFAULT_CSS = """
    MarkerList { align: center middle; }
    MarkerList > Vertical { width: 90%; max-width: 110; height: 80%; border: round $accent;
                            background: $panel; }
    MarkerList #markers-title { height: 1; text-style: bold; }
    MarkerList OptionList { height: 1fr; }
    """

    def __init__(self, session: ReplaySession) -> None:
        super().__init__()
        self.session = session
        self.marks = list(session.markers)

    def compose(self) -> ComposeResult:
        start = self.session.replay.start
        more = "" if self.session.markers_ready else " (still finding the automatic ones)"
        with Vertical():
            yield Static(f" markers: {len(self.marks)}{more} · Enter go · Esc close", id="markers-title",
                         markup=False)
            ol = OptionList(*[Option(Text(f"{clock(m.t - start)}  {m.kind:<11} {m.label}"))
                              for m in self.marks] or [Option("no markers in this recording", disabled=True)],
                            id="markers")
            yield ol

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        now = self.session.replay.now
        if self.marks:
            ol.highlighted = max(0, min(len(self.marks) - 1,
                                        sum(1 for m in self.marks if m.t <= now) - 1))
        ol.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if self.marks:
            self.dismiss(self.marks[event.option_index])

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class ReplayScreen(ReplaySeek, ConsoleScreen):
    """:class:`ConsoleScreen` on a :class:`meshview.record.replay.ReplaySession`."""

    BINDINGS = list(REPLAY_BINDINGS)
    session: ReplaySession  # the console's session, narrowed: the replay's player and markers

    def __init__(self, session: ReplaySession, *, can_go_back: bool = False) -> None:
        super().__init__(session, can_go_back=can_go_back)
        self.session = session

    def compose(self):
        for w in super().compose():
            if isinstance(w, StatusBar):
                yield Timeline(self.session, id="timeline")
            yield w

    # Textual hands the Mount event to a handler that takes one (prevent_default: the console's
    # on_mount runs once, from here); the base's handler takes none, hence the override ignore.
    def on_mount(self, event: events.Mount) -> None:  # type: ignore[override]
        event.prevent_default()  # the console's on_mount runs here, once, then ours
        super().on_mount()
        seats = "  a seat's terminal" if self.session.recording.seat_lines else ""
        self.query_one(StatusBar).set_hints(
            f"replay: space pause  ←/→ event  [/] minute  {{/}} marker  M markers  m mark  / find{seats}  "
            "? help  q quit")
        if not self.session.markers_ready:
            self.run_worker(self._find_markers, thread=True, exclusive=True, group="markers")
        damage = self.session.replay.damage
        if damage:
            self.call_after_refresh(self.shell.notify_line, damage, True)

    def _find_markers(self) -> None:
        """Thread worker: derive the automatic markers off the event loop, then show them."""
        found = auto_markers(self.session.recording)
        self.app.call_from_thread(self._found_markers, found)

    def _found_markers(self, found: list[Marker]) -> None:
        self.session.set_auto_markers(found)
        self.query_one(Timeline).refresh()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in REPLAY_ACTIONS and isinstance(self.focused, (Input, TextArea)):
            return False  # typing in the search box or the composer keeps its keys
        return super().check_action(action, parameters)

    def _moved(self) -> None:
        self.session.player.rebase()
        self.drain_now()
        self.query_one(Timeline).refresh()

    def action_replay_pause(self) -> None:
        paused = self.session.player.toggle_pause()
        self.shell.notify_line("paused" if paused else "playing")
        self._moved()


FEED_AHEAD = 128 * 1024  # recorded output handed to the pane ahead of its parsing, at most
SEAT_TICK_S = 0.05


class ReplaySeatScreen(ReplaySeek, ShellScreen):
    """One recorded seat's terminal at the replay's time: read-only, following play, pause and
    seeks (the replay keys work here too). Each tick hands the pane at most
    :data:`FEED_AHEAD` bytes beyond what it has parsed (the pane parses within its budget), so
    a seek back that re-feeds from a snapshot never holds the loop."""

    BINDINGS = [Binding("escape", "leave", "back", id="replay.seat-back"), *REPLAY_BINDINGS]
    DEFAULT_CSS = """
    ReplaySeatScreen { layout: vertical; background: $background; }
    ReplaySeatScreen #attach-title { height: 1; background: $panel; color: $text; text-style: bold; }
    ReplaySeatScreen #attach-pane { height: 1fr; }
    ReplaySeatScreen #attach-status { height: 1; background: $panel; color: $text-warning; }
    """

    def __init__(self, session: ReplaySession, name: str, stream: SeatStream) -> None:
        super().__init__()
        self.session = session
        self.seat = name
        self.stream = stream
        first = stream.lines[0]
        self.pane = TerminalPane(first.cols or 80, first.rows or 24, interactive=False,
                                 id="attach-pane")
        self._status_text = ""

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="attach-title", markup=False)
        yield self.pane
        yield Static("", id="attach-status", markup=False)
        yield Timeline(self.session, id="timeline")

    def _title(self) -> str:
        cols, rows = self.pane.remote_size
        return f" {self.seat} · {cols}×{rows} · replay · read-only · esc back"

    def on_mount(self) -> None:
        self.set_interval(SEAT_TICK_S, self.tick, name="replay-seat")
        self.tick()

    def tick(self) -> None:
        """Bring the pane to the replay's time, a bounded amount at a time."""
        pane, stream = self.pane, self.stream
        now = self.session.replay.now
        budget = FEED_AHEAD - pane.pending_bytes
        if budget > 0 and not stream.caught_up(now):
            size = pane.remote_size
            for step in stream.plan(now, budget):
                if step[0] == "reset":
                    pane.reset(step[1], step[2])
                elif step[0] == "resize":
                    pane.resize_remote(step[1], step[2])
                else:
                    pane.queue(step[1])
            if pane.remote_size != size:
                self.query_one("#attach-title", Static).update(self._title())
        text = stream.status(now)
        if text != self._status_text:
            self._status_text = text
            self.query_one("#attach-status", Static).update(text)

    def action_leave(self) -> None:
        if self.app.screen is self:
            self.app.pop_screen()

    def _moved(self) -> None:
        self.session.player.rebase()
        self.tick()
        self.query_one(Timeline).refresh()

    def action_replay_pause(self) -> None:
        paused = self.session.player.toggle_pause()
        self.query_one("#attach-status", Static).update("paused" if paused else "playing")
        self._status_text = "-"  # the next tick puts the stream's own line back
        self._moved()
