"""The space view: tabs, tiles, roster + feed + NEEDS YOU rail, lenses, search, status bar.

It looks at the model ~30 times a second and draws at most DRAW_HZ times a second: one
``snapshot()`` per drain when the model's version moved, applied to the visible widgets inside
one ``batch_update`` (no frame when nothing moved). NATS traffic never
becomes Textual messages.
"""

from __future__ import annotations

from time import monotonic, strftime
from typing import Any, Protocol, runtime_checkable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Input

from attach.control.managed import Binding as SeatBinding, ManagedFold, stranded
from cotal_tui.screens.compose import ComposeKeys
from cotal_tui.screens.lenses import BY_NAME as LENS, LENSES
from cotal_tui.session import ConsoleSession
from meshview.model.mesh import MeshModel
from meshview.record.record import active_recorder
from meshview.model.snapshot import FeedEntry, Peer, Snapshot
from widgets.channel_tabs import ChannelTabs
from widgets.composer import Composer
from widgets.detail_card import agent_card, message_card
from widgets.markdown_card import looks_like_markdown
from widgets.feed import FeedView
from widgets.line_list import LineList
from widgets.presentation import safe
from widgets.needs_you import NeedsYouRail
from widgets.roster import Roster
from attach.control.seat_text import detail_lines
from widgets.status_bar import StatusBar
from widgets.status_tiles import Tiles
from widgets.topology import TopologyLens

DRAIN_HZ = 30  # how often the drain timer looks at the model's version (a look is cheap)
# ... once a drain may run: between drains (the duty gap below, 1/DRAW_HZ at least) the timer
# sleeps. Every look is a Textual timer tick, and 30 a second cost more than half a percent of
# a core on their own (an idle App with an empty 30 Hz interval: 0.58 %); the drain's cost
# follows the frames it draws, not the rate it looks at.
# ... but a drain that draws comes at most DRAW_HZ times a second: a frame costs a paint of every
# panel that changed (~10-20 ms at 160x48), and at 30 Hz a 100-agent team with 20 msgs/s cost
# 29-32 % of a core, more than 1000 agents did. Nobody reads rows faster than this; keys do not
# wait for it (they paint their own widget at once), nor does :meth:`ConsoleScreen.drain_now`.
DRAW_HZ = 4
# above BUSY_RATE msgs/s (or model changes/s) nobody reads rows: drawn BUSY_HZ times a second
# (10 -> 6 at 10k agents: console 27-28 -> 22 % of a core, the key latency the same; k9s
# redraws every 2 s; 6 -> 3 as the bars now come with every drawn roster, one snapshot a frame;
# 3 -> 2 with the feed drawn once a second while busy: 10k agents 31 -> 27 % on a slow box)
BUSY_HZ = 2
BUSY_RATE = 300.0
# A drain (snapshot + widgets) may hold the loop at most this share of the time: at 10k agents a
# drain costs ~10-20 ms, and back to back at 30 Hz it starved keys and the observer it draws.
DRAIN_DUTY = 0.25
DRAIN_GAP_MAX = 0.5  # ... but the screen never rests longer than this after an outlier drain
# Keys first: while the operator is pressing keys (the last one under KEYS_FIRST_S ago) a drain
# waits, so each key paints alone, not behind a drain (10-20 ms at 10k agents) and its paint;
# the mesh is still drawn at least every KEYS_FIRST_MAX_S.
# The roster's first load (the presence watch's first snapshot) is drawn as it comes, not paced:
# at DRAW_HZ a team that arrived just after the first (empty) frame waited up to 250-333 ms to
# be shown (bench/startup.py: roster filled 690 -> 600 ms). At most this long after the mount.
FIRST_LOAD_S = 3.0
KEYS_FIRST_S = 0.15
KEYS_FIRST_MAX_S = 0.5
# ... and such a drain, while keys come, leaves out the panels the keys do not move: the feed
# while they walk the roster or the rail (those and the bars, which count what they show, are
# drawn from one snapshot), everything else while they scroll the feed. What was left out is
# drawn by the first drain after the keys stop, and at least every KEYS_FULL_S while they do not.
# Such a drain keeps the roster's and the rail's ages where they were, so it paints the rows
# whose status or text changed, not every row whose clock turned: at 10k agents its frame was
# the 35-60 ms a key waited behind.
KEYS_FULL_S = 1.5
# ... and that rest comes in two drains, KEYS_FIRST_MAX_S apart, each its own frame: first
# what counts, with its ages moved (the roster, the rail, the bars), then the feed. A key waits
# behind one piece, not both: at 10k agents on a slow 2-core box a frame of everything was
# 50-100 ms, the counts' 30-50 and the feed's 15-25.
# One snapshot per frame: the status bar's summary, the roster's count, the NEEDS-YOU rail and
# the tabs are always drawn together (a summary that lagged the roster by a second did not add
# up). Only the feed, scrolling faster than anyone reads it, is drawn at most every FEED_FLOW_S
# while over FEED_FLOW_RATE msgs/s arrive, and every FEED_BUSY_S while busy: it shows no count,
# and each of its frames repaints the whole panel (a scroll is a full repaint: at 100 agents +
# 20 msgs/s a third of what the console spent; at 10k agents a fifth of each frame).
FEED_FLOW_S = 0.5
FEED_BUSY_S = 1.0
FEED_FLOW_RATE = 5.0
# ... and over FEED_READ_RATE msgs/s, more lines a second than anyone reads, every FEED_BUSY_S,
# as when busy: with the ages' second, one frame a second for both (10 agents + 20 msgs/s
# drew 2 frames a second, each a whole-panel repaint of the feed)
FEED_READ_RATE = 10.0
# ... and it comes with the drain where the model's second turns, which repaints the ages, msg/s
# and the stalest heartbeat anyway: one frame for both, not a frame for each (at 10 agents +
# 20 msgs/s the two fell on separate frames, 3.1 frames/s for 2 feed draws and 1 tick a second)
WIDE = 100  # roster beside the feed and the rail as a column from here up
RAIL_DEFAULT = 120  # the rail starts open from here up
SEARCH_PLACEHOLDER = "search: sender, role, channel, service, targets, text (enter keeps, esc clears)"
FOCUS_MARK = "▶ "  # before the focused panel's title: focus survives NO_COLOR and any theme
REC_HZ = 2  # how often the status bar's recording size is read

HINTS = {
    "body": "? help  / search  : cmd  c send  r reply  d DMs  t topo  n needs-you  hl panels  "
            "q quit",
    **{lens.name: lens.hints for lens in LENSES},
}


@runtime_checkable
class SnapshotOverlay(Protocol):
    """An overlay that follows the drain while it is on top (agent card, NEEDS-YOU)."""

    def update_snapshot(self, snap: Snapshot) -> None: ...


class ConsoleScreen(ComposeKeys):
    CSS_PATH = "console.tcss"
    BINDINGS = [
        Binding("question_mark", "help", "help", id="console.help"),
        Binding("slash", "search", "search", id="console.search"),
        Binding("colon", "palette", "command palette", id="console.palette"),
        Binding("q", "quit", "quit", id="console.quit"),
        Binding("b", "overview", "spaces overview", id="console.overview"),
        Binding("escape", "back", "back one level", id="console.back"),
        *[lens.binding() for lens in LENSES],
        Binding("n", "needs_you", "go to NEEDS YOU (opens the rail)", id="console.needs-you"),
        Binding("N", "toggle_rail", "hide / show the NEEDS-YOU rail", id="console.needs-you-hide"),
        Binding("c", "compose", "compose (channel, or DM the agent)", id="console.compose"),
        Binding("r", "reply", "reply (thread, DM, or answer the agent)", id="console.reply"),
        Binding("h,left", "focus_step(-1)", "focus the panel left", id="console.focus-left"),
        Binding("l,right", "focus_step(1)", "focus the panel right", id="console.focus-right"),
        Binding("left_square_bracket", "tab_step(-1)", "previous tab", id="console.tab-prev"),
        Binding("right_square_bracket", "tab_step(1)", "next tab", id="console.tab-next"),
        Binding("m", "mark", "marker in the recording (with a label)", id="console.mark"),
        Binding("E", "toggle_events", "activity frames in the feed (events on/off)",
                id="console.events"),
        Binding("A", "activity", "activity lens (the selected agent's runs; none: all agents)",
                id="console.activity"),
        *[Binding(str(i), f"tab({i})", "jump to tab", id=f"console.tab-{i}", show=False)
          for i in range(1, 10)],
    ]

    def __init__(self, session: ConsoleSession, *, can_go_back: bool = False) -> None:
        super().__init__()
        self.session = session
        self.can_go_back = can_go_back
        self.snap: Snapshot | None = None
        self._version = -1
        self._managed_version = -1
        self.escape_grace_until = 0.0  # set by the attach/tile screens as they close
        self._managed_noticed = False  # the ps fold's notice is said once
        self.rail_open: bool | None = None  # decided on the first layout
        self._last_panel: dict[str, Any] = {}  # lens -> the panel focused last in it
        self._prev_panel: dict[str, Any] = {}  # lens -> the one focused before that
        self._seat_fact_last: dict[str, tuple[bool, float]] = {}  # seat -> (open, output at)
        self._drain_timer: Timer | None = None  # the drain's next look (see DRAIN_HZ)

    # -- composition ---------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield ChannelTabs(id="tabs")
        yield Tiles(id="tiles")
        with ContentSwitcher(initial="body", id="lens"):
            with Horizontal(id="body"):
                yield Roster(id="roster", classes="panel")
                yield FeedView(id="feed", classes="panel")
                yield NeedsYouRail(id="rail", classes="panel")
            for lens in LENSES:
                yield lens.widget(id=lens.name)
        yield Input(placeholder=SEARCH_PLACEHOLDER, id="search")
        yield Composer(id="composer")
        yield StatusBar(id="status")

    def on_mount(self) -> None:
        self.shell.start_session(self.session)  # started already: its runs poll only
        from cotal_tui.config import load_config

        self.query_one(StatusBar).set_hints(HINTS["body"])
        # what config.toml holds that is not used is said once, by the App's start-up notice
        # (cotal_tui.cli.config.console_start), not again by each space opened
        cfg = load_config()
        roster = self.query_one(Roster)
        roster.set_sort(cfg.roster_sort)
        roster.set_group(cfg.roster_group)
        roster.set_pins(cfg.roster_pins)
        roster.set_layout(cfg.roster_layout)
        self.query_one(FeedView).show_events = cfg.show_events
        self.query_one(FeedView).max_lines = cfg.feed_max_lines
        self.query_one(FeedView).focus()
        self._next_drain = 0.0
        self._drained_at = 0.0
        self._mounted_at = monotonic()
        self._filling = True  # the roster's first load is not all drawn yet
        self._full_at = 0.0  # the last drain that drew everything
        self._rest_owed = False  # the last drain left a panel out (keys first, or busy)
        self._feed_at = 0.0  # the last drain that drew the feed
        self._feed_next = False  # keys come: the rest's first piece is drawn, the feed is next
        self._second = -1  # the model second (snapshot ``now``) of the last drain that drew all
        self._exact = False  # drain_now's drain reads every figure afresh
        self.drain()
        self._arm_drain()
        self._recording_tick()
        self.set_interval(1 / REC_HZ, self._recording_tick, name="recording")
        self._stalled_shown = False
        self.set_interval(1.0, self._stalled_tick, name="stalled")

    def _stalled_tick(self) -> None:
        """Once a second: the open seat sessions' output as facts for the stalled verdict, then
        the roster's ``stalled?`` lines (meshview/model/stalled.py), only while some agent is (or was
        just) flagged, so a quiet mesh costs nothing here."""
        if self.shell.exiting:
            return
        model = self.model
        self._seat_facts()
        if not model.stalled_ids and not self._stalled_shown:
            return
        verdicts = model.stalled() if model.stalled_ids else {}
        self._stalled_shown = bool(verdicts)
        self.query_one(Roster).set_stalled(verdicts)

    def _recording_tick(self) -> None:
        """``--record``/``:record`` running: the status bar says so, with the size so far."""
        if self.shell.exiting:
            return
        rec = active_recorder(self.session.model)
        self.query_one(StatusBar).set_recording(rec.size if rec is not None else None)

    def _seat_facts(self) -> None:
        """A seat with a session open in this console: whether its terminal showed output since
        the last tick (one model input per seat whose facts moved, at most once a second)."""
        sessions, fold = self.session.seat_sessions, self.managed
        if sessions is None or fold is None:
            return
        now_m = monotonic()
        opened = set(getattr(sessions, "open_on", {}))
        seen = getattr(sessions, "output_seen", {})
        last = self._seat_fact_last
        for name in opened | set(last):
            is_open = name in opened
            out_at = seen.get(name, 0.0)
            if last.get(name) == (is_open, out_at):
                continue
            if not is_open:
                last.pop(name, None)
            else:
                last[name] = (is_open, out_at)
            seat = next((x for x in fold.seats() if x.name == name), None)
            if seat is None:
                continue
            ago = now_m - out_at if out_at else None
            clock = self.model.clock()
            self.model.seat_activity(seat.principal, session_open=is_open,
                                     output_at=clock - ago * 1000 if ago is not None else None)

    @property
    def model(self) -> MeshModel:
        return self.session.model

    @property
    def lens(self) -> str:
        return self.query_one("#lens", ContentSwitcher).current or "body"

    # -- the drain -----------------------------------------------------------------------

    @property
    def managed(self) -> ManagedFold | None:
        """The session's ``ps`` fold, if it polls managers."""
        poller = self.session.managed
        return poller.fold if poller is not None else None

    @property
    def next_drain(self) -> float:
        """When (``monotonic()``) the duty cycle lets the next drain run (tests read it)."""
        return self._next_drain

    @property
    def rest_owed(self) -> bool:
        """The last drain left some panels undrawn (keys first, or busy); a later one draws them."""
        return self._rest_owed

    def set_drain_times(self, *, next_drain: float | None = None, drained_at: float | None = None,
                        full_at: float | None = None,
                        feed_at: float | None = None) -> None:
        """Stand in for time passed since the drain's last draws (``monotonic()`` values): what
        a test sets instead of waiting out the duty gap, the keys-first hold or the busy rates."""
        if next_drain is not None:
            self._next_drain = next_drain
            if self._drain_timer is not None:
                self._arm_drain()  # the timer looks again when the new time says
        if drained_at is not None:
            self._drained_at = drained_at
        if full_at is not None:
            self._full_at = full_at
        if feed_at is not None:
            self._feed_at = feed_at

    def _arm_drain(self) -> None:
        """The drain timer's next look: when the duty gap lets a drain run, and never sooner
        than ``1 / DRAIN_HZ`` (one timer at a time, re-armed after each look)."""
        if self._drain_timer is not None:
            self._drain_timer.stop()
        now = monotonic()
        # the roster's first load is drawn as it comes: looked for at every 1 / DRAIN_HZ
        wait = 1 / DRAIN_HZ if self._first_load(now) else max(1 / DRAIN_HZ, self._next_drain - now)
        self._drain_timer = self.set_timer(wait, self._drain_look, name="drain")

    def _first_load(self, now: float) -> bool:
        """The roster's first load is not all drawn yet (and the mount is under
        ``FIRST_LOAD_S`` old): drawn as it comes, not paced."""
        return self._filling and now - self._mounted_at < FIRST_LOAD_S

    def _drain_look(self) -> None:
        self._drain_timer = None
        self.drain_tick()
        if not self.shell.exiting:
            self._arm_drain()

    def drain_tick(self) -> None:
        """The drain timer: keys first (see ``KEYS_FIRST_S``); :meth:`drain_now` is never held."""
        if self.shell.exiting:  # the widgets it draws are being taken down
            return
        now = monotonic()
        if (now - self.shell.key_at < KEYS_FIRST_S
                and now - self._drained_at < KEYS_FIRST_MAX_S and self.snap is not None):
            return
        self.drain()

    def on_screen_resume(self) -> None:
        if self.snap is not None:  # back from a screen over it (the keys that closed it
            self.drain_now()  # would hold the timer's drain): current at once

    def drain_now(self) -> None:
        """A drain asked for (a replay's seek or step): past the duty gap and the keys, and
        every figure read from this snapshot (none held to its second: a step inside one
        second shows its message in the tab counts too)."""
        self._next_drain = self._feed_at = 0.0
        self._exact = True
        try:
            self.drain()
        finally:
            self._exact = False  # (a drain with nothing new to draw leaves it set: not later)
        if self._drain_timer is not None:
            self._arm_drain()  # the gap is over if nothing was drawn: the timer looks soon

    def drain(self) -> None:
        """Apply everything that changed since the last drain in one go."""
        fold = self.managed
        if fold is not None and fold.version != self._managed_version and self.lens == "body":
            self._managed_version = fold.version  # a ps round finished: one roster rebuild
            self._stranded(fold)
            self.query_one(Roster).set_managed(fold)
            if fold.notice and not self._managed_noticed:
                self._managed_noticed = True  # said once: the poller has stopped asking
                self.notify(fold.notice, severity="warning", timeout=12)
        model = self.model
        if model.version == self._version and self.snap is not None and not self._rest_owed:
            return
        now = monotonic()
        if now < self._next_drain and not self._first_load(now):
            return  # paced; but the roster's first load is drawn as it comes
        if not model.first_load:
            self._filling = False  # this drawing has the whole first load: paced from now on
        snap = model.snapshot()
        hold = not self._exact
        keys = self._focused_list() if now - self.shell.key_at < KEYS_FIRST_S else None
        only = keys if now - self._full_at < KEYS_FULL_S else None
        # busy: a chat flood, or a churning roster (10k agents heartbeating are 5k changes/s)
        changes = (snap.version - self._version) / max(1e-3, now - self._drained_at)
        busy = snap.rates.msgs_per_sec > BUSY_RATE or changes > BUSY_RATE
        self._version, self._drained_at = snap.version, now
        if only is not None:  # keys come: the panels they move, from one snapshot
            on_feed = isinstance(only, FeedView)
            self.apply(snap, counts=not on_feed, feed=on_feed, hold=hold, ages=False)
            self._rest_owed = True
        elif keys is not None:  # ... for KEYS_FULL_S: the rest, in two pieces (above)
            on_feed = isinstance(keys, FeedView)
            if self._feed_next and not on_feed:
                self.apply(snap, counts=False, feed=True, hold=hold)  # 2: the feed
                self._feed_next, self._full_at, self._feed_at = False, now, now
            else:  # 1: what counts, its ages moved; the feed (unless the keys scroll it) next
                self.apply(snap, feed=on_feed, hold=hold)
                self._feed_next = not on_feed
                if on_feed:
                    self._full_at = self._feed_at = now
            self._rest_owed = True  # the first drain after the keys draws everything
        else:
            self._feed_next = False
            flowing = busy or snap.rates.msgs_per_sec > FEED_FLOW_RATE
            second, turned = int(snap.now // 1000), False
            if second != self._second:  # the clocks shown read again this frame
                self._second, turned = second, True
            fast = busy or snap.rates.msgs_per_sec > FEED_READ_RATE
            feed = (not flowing or turned
                    or now - self._feed_at >= (FEED_BUSY_S if fast else FEED_FLOW_S))
            self.apply(snap, feed=feed, hold=hold)
            self._full_at = now
            if feed:
                self._feed_at = now
            self._rest_owed = not feed  # a later drain draws it, news or not
        cost = monotonic() - now
        rest = min(DRAIN_GAP_MAX, cost * (1 / DRAIN_DUTY - 1))  # idle after it, for keys and I/O
        self._next_drain = now + max(1 / (BUSY_HZ if busy else DRAW_HZ), cost + rest)

    def _stranded(self, fold: ManagedFold) -> None:
        """Seats ``ps`` reports running with no presence (mesh ``absent``) join the roster as
        ``⨯ name · seat running, no presence``: a stuck agent whose presence expired before this
        console started is never invisible. Keyed by the row's principal + lifecycle uid."""
        model = self.model
        for s in stranded(fold.seats()):  # the one rule ``cotal ps`` and the overview count by
            p = model.peer(s.principal)
            if p is None or (p.status == "offline" and (p.offline_reason != "seat-no-presence"
                                                        or p.lifecycle_uid != s.lifecycle_uid)):
                model.apply_stranded_seat(s.principal, s.lifecycle_uid, s.name)

    def _focused_list(self) -> Roster | FeedView | NeedsYouRail | None:
        """The body's list the keys are moving, when nothing is over the console."""
        if self.lens != "body" or self.app.screen is not self:
            return None
        f = self.focused
        return f if isinstance(f, (Roster, FeedView, NeedsYouRail)) else None

    def apply(self, snap: Snapshot, *, counts: bool = True, feed: bool = True,
              hold: bool = True, ages: bool = True) -> None:
        """Draw ``snap``: what counts (the bars, the roster, the rail, or the lens) and the feed,
        as asked. Everything that shows a count is drawn from this one snapshot, in one frame;
        the figures that move with the clock or every message (msg/s, the sparkline, the
        stalest heartbeat) are read at each model second's first snapshot, unless ``hold`` is
        False; the tab counts with every feed drawn (held with it while messages flow).
        ``ages`` False keeps the roster's and the rail's ages where they were (while keys come:
        see ``KEYS_FULL_S``)."""
        self.snap = snap
        tabs = self.query_one(ChannelTabs)
        lens = self.lens
        with self.app.batch_update():
            if counts:  # the tab counts come with the feed they count: one snapshot for both
                tabs.update_snapshot(snap, hold=hold and not (feed and lens == "body"))
                self.query_one(Tiles).update_snapshot(snap, hold=hold)
                self._events_count()
                self.query_one(StatusBar).update_snapshot(snap, tabs.active, hold=hold)
            if lens == "body":
                if counts:
                    roster = self.query_one(Roster)
                    roster.update_snapshot(snap, ages=ages, hold=hold)
                    if self.has_class("-narrow"):
                        roster.styles.height = max(3, min(8, len(snap.peers) + 1))
                    rail = self.query_one(NeedsYouRail)
                    if rail.display:
                        rail.update_snapshot(snap, ages=ages)
                if feed:
                    self.query_one(FeedView).update_snapshot(snap)
            elif lens in LENS and counts:
                shown = self.query_one(f"#{lens}")
                if isinstance(shown, SnapshotOverlay):  # every lens widget follows the drain
                    shown.update_snapshot(snap)
            self._mark_focus()
        overlay = self.app.screen
        if counts and overlay is not self and isinstance(overlay, SnapshotOverlay):
            overlay.update_snapshot(snap)

    # -- layout --------------------------------------------------------------------------

    def on_resize(self, event) -> None:
        width = event.size.width
        narrow = width < WIDE
        self.set_class(narrow, "-narrow")
        if self.rail_open is None:
            self.rail_open = width >= RAIL_DEFAULT
        self._apply_rail()
        roster = self.query_one(Roster)
        roster.set_wide(not narrow)
        if narrow and self.snap is not None:
            roster.styles.height = max(3, min(8, len(self.snap.peers) + 1))
        elif not narrow:
            roster.styles.height = None
            roster.styles.height = "1fr"

    def _apply_rail(self) -> None:
        rail = self.query_one(NeedsYouRail)
        show = bool(self.rail_open) and not self.has_class("-narrow")
        if rail.display != show:
            rail.display = show
            if show and self.snap is not None:
                rail.update_snapshot(self.snap)

    # -- messages from widgets -----------------------------------------------------------

    # -- activity frames in the feed ---------------------------------------------------------

    def _events_count(self) -> None:
        """The status bar's ``ev N``: the frames seen, while the feed hides them."""
        shown = self.query_one(FeedView).show_events
        self.query_one(StatusBar).set_events(0 if shown else self.model.event_rows)

    def action_toggle_events(self) -> None:
        self.set_events(not self.query_one(FeedView).show_events)

    def set_events(self, show: bool) -> None:
        """Show or hide the agents' activity frames in the feed, and remember it
        (``[ui] show_events``): the E key and the palette's ``events on|off``."""
        from cotal_tui.config import config_path, save_show_events

        self.query_one(FeedView).show_events = show
        self._events_count()
        n = self.model.event_rows
        said = f"activity frames {'shown in' if show else 'hidden from'} the feed"
        if not show and n:
            said += f" ({n} so far: ev in the status bar, E shows them)"
        try:
            save_show_events(show)
        except OSError as e:
            self.shell.notify_line(f"{said}; not saved to {config_path()}: {e.strerror or e}", True)
            return
        self.shell.notify_line(said)

    @on(ChannelTabs.Changed)
    def _tab_changed(self, event: ChannelTabs.Changed) -> None:
        self.query_one(FeedView).set_filter(tab=event.tab)
        if self.snap is not None:
            self.query_one(StatusBar).update_snapshot(self.snap, event.tab)

    @on(FeedView.Open)
    def _open_entry(self, event: FeedView.Open) -> None:
        self.open_entry(event.entry)

    @on(TopologyLens.OpenAgent)
    def _topology_agent(self, event: TopologyLens.OpenAgent) -> None:
        event.stop()
        self.open_agent(event.peer_id)

    @on(TopologyLens.OpenEntry)
    def _topology_entry(self, event: TopologyLens.OpenEntry) -> None:
        event.stop()
        self.open_entry(event.entry)

    def open_entry(self, e: FeedEntry) -> None:
        snap = self.snap
        if e.kind == "lifecycle" and snap is not None:
            if any(p.id == e.from_id for p in snap.peers):
                self.open_agent(e.from_id)
                return
        keys = {}
        if e.reply_to:  # a reply's card: Enter closes it and puts the cursor on the original
            feed = self.query_one(FeedView)
            keys = {"enter": lambda: feed.jump_to_original(e)}
        md: list[bool | None] = [None]  # None: Markdown when the body is (m flips it)

        def flip() -> None:
            md[0] = not (looks_like_markdown(e.text) if md[0] is None else md[0])

        self.app.push_screen(_detail("message", lambda w: message_card(e, self.snap, w, md[0]),
                                     keys, {"m": flip}))

    @on(LineList.Selected, "#roster, #rail")
    def _open_peer(self, event: LineList.Selected) -> None:
        self.open_agent(str(event.key))

    @on(Roster.SortChanged)
    def _sort_changed(self, event: Roster.SortChanged) -> None:
        from cotal_tui.config import config_path, save_roster_sort

        try:
            save_roster_sort(event.sort_by)
        except OSError as e:
            self.shell.notify_line(f"sort not saved to {config_path()}: {e.strerror or e}", True)

    @on(Roster.GroupChanged)
    def _group_changed(self, event: Roster.GroupChanged) -> None:
        from cotal_tui.config import config_path, save_roster_group

        try:
            save_roster_group(event.group)
        except OSError as e:
            self.shell.notify_line(f"grouping not saved to {config_path()}: {e.strerror or e}",
                                   True)

    @on(Roster.PinsChanged)
    def _pins_changed(self, event: Roster.PinsChanged) -> None:
        from cotal_tui.config import config_path, save_roster_pins

        try:
            save_roster_pins(event.pins)
        except OSError as e:
            self.shell.notify_line(f"pins not saved to {config_path()}: {e.strerror or e}", True)
    @on(Roster.LayoutChanged)
    def _layout_changed(self, event: Roster.LayoutChanged) -> None:
        from cotal_tui.config import config_path, save_roster_layout

        try:
            save_roster_layout(event.row_layout)
        except OSError as e:
            self.shell.notify_line(f"roster layout not saved to {config_path()}: "
                                   f"{e.strerror or e}", True)

    @on(Roster.OpenSeat)
    def _open_seat(self, event: Roster.OpenSeat) -> None:
        event.stop()
        bound = self.seat_binding(event.peer_id) if event.peer_id is not None else None
        fold, verb = self.managed, "peek" if event.peek else "attach"
        if bound is not None and bound.ambiguous:
            self.shell.notify_line(bound.refusal(verb, safe(event.name, 40)) or verb, True)
            return
        if bound is not None and bound.seat is None and fold is not None and fold.rounds:
            # no manager reports this peer's id: a seat of the same name elsewhere is not it
            n = len(fold.managers)
            why = f"{n} manager{'s' if n != 1 else ''} asked" if n else "no manager serves this space"
            self.shell.notify_line(f"{verb}: {safe(event.name, 40)} is not hosted by any manager ({why})")
            return
        seat = bound.seat if bound is not None else None
        if seat is not None:  # the bound seat on its own manager, never a namesake elsewhere
            self.shell.open_seat(seat.name, peek=event.peek, instance_id=seat.instance_id)
        else:
            self.shell.open_seat(event.name, peek=event.peek)

    def seat_binding(self, pid: str) -> SeatBinding | None:
        """The managed seat roster peer ``pid`` is, through its principal and lifecycle uid as a
        manager's ``ps`` reports them (None when this console polls no manager)."""
        fold = self.managed
        if fold is None:
            return None
        snap = self.snap
        peer = next((p for p in snap.peers if p.id == pid), None) if snap is not None else None
        return fold.bind(pid, peer.lifecycle_uid if peer is not None else None)

    def open_agent(self, pid: str) -> bool:
        snap = self.snap
        if snap is None:
            return False
        peer = next((p for p in snap.peers if p.id == pid), None)
        if peer is None:
            return False
        skills = self.session.skills
        fold = self.managed

        def build(width: int):
            s = self.snap or snap
            p = next((q for q in s.peers if q.id == pid), peer)
            seat = fold.for_peer(p.id, p.lifecycle_uid) if fold is not None else None
            return agent_card(p, s, width, skills, detail_lines(seat, p.status) if seat else None,
                              stalled=self.model.stalled(p.id).get(p.id),
                              activity=self.model.frames.agent(p.id, s.now))

        keys = {"A": lambda: self.open_activity(pid)}
        bound = fold.for_peer(peer.id, peer.lifecycle_uid) if fold is not None else None
        if bound is not None:
            shell, iid = self.shell, bound.instance_id
            keys |= {"a": lambda: shell.open_seat(bound.name, instance_id=iid),
                     "p": lambda: shell.open_seat(bound.name, peek=True, instance_id=iid)}
        self.app.push_screen(_detail(f"{peer.name}", build, keys))
        return True

    # -- search --------------------------------------------------------------------------

    # ``/`` filters the focused panel: the roster when it has focus, else the feed
    search_target = "feed"

    def action_search(self) -> None:
        roster = self.query_one(Roster)
        on_roster = self.lens == "body" and self.focused is roster
        if self.lens != "body":
            self.query_one("#lens", ContentSwitcher).current = "body"
            self._lens_changed()
        box = self.query_one("#search", Input)
        self.search_target = "roster" if on_roster else "feed"
        if on_roster:
            box.placeholder = ("filter the roster: name, role, activity; working: waiting: "
                               "idle: offline: (enter keeps, esc clears)")
            box.value = roster.filter_text
        else:
            box.placeholder = SEARCH_PLACEHOLDER
            box.value = self.query_one(FeedView).filter_text
        box.display = True
        box.focus()

    def _set_search(self, query: str) -> None:
        if self.search_target == "roster":
            self.query_one(Roster).set_filter(query)
        else:
            self.query_one(FeedView).set_filter(query=query)

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        self._set_search(event.value)

    @on(Input.Submitted, "#search")
    def _search_done(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.focus_back()

    # -- focus: one panel is unmistakably it, and focus comes back to it -------------------

    def _all_panels(self) -> list:
        out = [self.query_one(Roster), self.query_one(FeedView), self.query_one(NeedsYouRail)]
        for lens in LENSES:
            out += LENS[lens.name].panels(self.query_one(f"#{lens.name}"))
        return out

    def _mark_focus(self) -> None:
        """The focused panel's title starts with :data:`FOCUS_MARK`; no other's does."""
        focused = self.focused
        for w in self._all_panels():
            title = w.border_title
            if not isinstance(title, str) or not title:
                continue
            bare = title.removeprefix(FOCUS_MARK)
            want = FOCUS_MARK + bare if w is focused else bare
            if title != want:
                w.border_title = want

    def on_descendant_focus(self, event) -> None:
        if event.widget in self._panels():
            lens = self.lens
            if self._last_panel.get(lens) is not event.widget:
                self._prev_panel[lens] = self._last_panel.get(lens)
                self._last_panel[lens] = event.widget
        self._mark_focus()

    def on_descendant_blur(self, event) -> None:
        self.call_after_refresh(self._mark_focus)

    def focus_back(self) -> None:
        """Focus the panel focus last left in the shown body or lens (after the composer, the
        search box or a lens closes); its default panel when that one is gone."""
        lens = self.lens
        w = self._last_panel.get(lens)
        if w is not None and w in self._panels():
            w.focus()
        elif lens in LENS:
            LENS[lens].focus(self.query_one(f"#{lens}"))
        else:
            self.query_one(FeedView).focus()

    # -- actions -------------------------------------------------------------------------

    def action_help(self) -> None:
        from cotal_tui.screens.help import HelpScreen, describe_bindings
        from widgets.status_bar import bounds_detail, internal_errors

        panel, panel_rows, global_rows = describe_bindings(self)
        model = self.session.model
        st = model.status
        said = [internal_errors(st.listener_errors, st.listener_error),
                bounds_detail(model.snapshot())]
        self.app.push_screen(HelpScreen(panel, panel_rows, global_rows,
                                        "\n".join(s for s in said if s) or None))

    def action_palette(self) -> None:
        self.app.action_command_palette()

    def action_mark(self) -> None:
        """``m``: a hand marker in the running recording (``{``/``}`` and ``M`` find it in a
        replay); without a recording, the sentence that says how to start one."""
        rec = active_recorder(self.session.model)
        if rec is None:
            self.shell.notify_line("not recording: :record (or --record FILE) starts a recording "
                                   "that markers go into", True)
            return
        from cotal_tui.screens.markers import MarkerLabel

        at = strftime("%H:%M:%S")

        def done(label: str | None) -> None:
            if label is None:
                return
            line = rec.mark(label)
            if line is None:
                self.shell.notify_line(f"marker not stored: {rec.error or 'the recording stopped'}", True)
            else:
                self.shell.notify_line(f"◆ marker {line['label']!r} at {at} in {rec.path}")

        self.app.push_screen(MarkerLabel(at), done)

    def action_quit(self) -> None:
        self.app.exit(0)

    def action_overview(self) -> None:
        if self.can_go_back:
            self.shell.back_to_spaces()
        else:
            self.shell.notify_line("no spaces overview: this console was opened on one space")

    def action_lens(self, lens: str) -> None:
        switcher = self.query_one("#lens", ContentSwitcher)
        switcher.current = "body" if switcher.current == lens else lens
        self._lens_changed()

    def _lens_changed(self) -> None:
        lens = self.lens
        self.query_one(StatusBar).set_hints(HINTS.get(lens, ""))
        if self.snap is not None:
            self.apply(self.snap)
        self.focus_back()

    def action_needs_you(self) -> None:
        """``n``: go to NEEDS YOU - the rail (opened when hidden), or the overlay when narrow."""
        if self.has_class("-narrow"):
            from cotal_tui.screens.needs_you import NeedsYouScreen

            self.app.push_screen(NeedsYouScreen(self))
            return
        if self.lens != "body":
            self.query_one("#lens", ContentSwitcher).current = "body"
            self._lens_changed()
        if not self.rail_open:
            self.rail_open = True
            self._apply_rail()
        self.query_one(NeedsYouRail).focus()

    def action_toggle_rail(self) -> None:
        """``N``: hide (or show again) the NEEDS-YOU rail on a wide terminal."""
        if self.has_class("-narrow"):
            self.shell.notify_line("the NEEDS-YOU rail needs a wide terminal: n opens it as an overlay")
            return
        rail = self.query_one(NeedsYouRail)
        back = self._prev_panel.get("body") if rail.has_focus else None
        self.rail_open = not self.rail_open
        self._apply_rail()
        if back is not None and not self.rail_open:
            self._last_panel["body"] = back
            self.focus_back()

    def action_back(self) -> None:
        """Esc goes back exactly one level: close the search box (and its query) → a lens's
        inner level (the DM thread back to its peers) → leave the lens → clear the kept
        query → the spaces overview. It never hides the NEEDS-YOU rail (``n`` does)."""
        if monotonic() < self.escape_grace_until:  # the second Esc of leaving a terminal
            self.escape_grace_until = 0.0
            return
        box = self.query_one("#search", Input)
        if box.display:
            box.display = False
            box.value = ""
            self._set_search("")
            self.focus_back()
            return
        if self.lens != "body":
            if LENS[self.lens].back(self.query_one(f"#{self.lens}")):
                return
            self.query_one("#lens", ContentSwitcher).current = "body"
            self._lens_changed()
            return
        feed, roster = self.query_one(FeedView), self.query_one(Roster)
        if roster.filter_text and (roster.has_focus or not feed.filter_text):
            roster.set_filter("")
            return
        if feed.filter_text:
            feed.set_filter(query="")
            return
        if self.can_go_back:
            self.shell.back_to_spaces()

    def _panels(self) -> list:
        lens = self.lens
        if lens in LENS:
            return LENS[lens].panels(self.query_one(f"#{lens}"))
        out = [self.query_one(Roster), self.query_one(FeedView)]
        rail = self.query_one(NeedsYouRail)
        if rail.display:
            out.append(rail)
        return out

    def action_focus_step(self, delta: int) -> None:
        """``h``/``l``: the panel to the left or right; at either edge focus stays put."""
        panels = self._panels()
        if not panels:
            return
        cur = self.focused
        i = panels.index(cur) if cur in panels else 0
        panels[max(0, min(len(panels) - 1, i + delta))].focus()

    # -- the DM lens: c and r continue the selected conversation ---------------------------

    def _dm_counterpart(self) -> tuple[Peer, tuple[str, str]] | None:
        """The agent a DM from the DM lens goes to (the selected conversation's other side),
        and the conversation pair; None when the DM lens has no selection in focus."""
        from widgets.dm_lens import DmPeers, DmThread

        if self.lens != "dms" or not isinstance(self.focused, (DmPeers, DmThread)):
            return None
        peers = self.query_one(DmPeers)
        pair = peers.selected_pair()
        snap = self.snap
        if pair is None or snap is None:
            return None
        op = self.operator
        me = op.participant.id if op is not None and op.read_only is None else None
        key = peers.cursor_key
        if me in pair:
            pid = pair[1] if pair[0] == me else pair[0]
        elif isinstance(key, tuple) and key[0] == "conv":
            pid = key[2]  # the row names the other side of this peer's conversation
        else:
            pid = pair[0]  # the peer row: that peer
        peer = next((p for p in snap.peers if p.id == pid), None)
        return (peer, pair) if peer is not None else None

    def _dm_continue(self, *, reply: bool) -> bool:
        hit = self._dm_counterpart()
        if hit is None:
            from widgets.dm_lens import DmPeers, DmThread

            if self.lens == "dms" and isinstance(self.focused, (DmPeers, DmThread)):
                self.shell.notify_line("pick a conversation first (j/k on the left)")
                return True
            return False
        if self._refused():
            return True
        peer, (a, b) = hit
        entry = None
        if reply and self.snap is not None:
            msgs = self.snap.dm_thread(a, b)
            last = next((m for m in reversed(msgs) if m.from_id == peer.id), None) or (
                msgs[-1] if msgs else None)
            if last is not None and last.id:
                entry = self.snap.row_of(last)
        self._compose_dm(peer, reply_to=entry)
        return True

    def action_compose(self) -> None:
        if not self._dm_continue(reply=False):
            super().action_compose()

    def action_reply(self) -> None:
        if not self._dm_continue(reply=True):
            super().action_reply()

    # -- the activity lens (screens/activity.py) ------------------------------------------

    def action_activity(self) -> None:
        """``A``: the selected agent's activity (roster or NEEDS-YOU focused), else all agents."""
        from cotal_tui.screens.activity import activity_key_target

        self.open_activity(activity_key_target(self))

    def open_activity(self, agent_id: str | None) -> bool:
        from cotal_tui.screens.activity import open_activity

        return open_activity(self.app, self.session, agent_id)

    def action_tab_step(self, delta: int) -> None:
        self.query_one(ChannelTabs).step(delta)

    def action_tab(self, n: int) -> None:
        self.query_one(ChannelTabs).select_index(n - 1)


def _detail(title: str, builder, keys: dict | None = None, modes: dict | None = None):
    from cotal_tui.screens.detail import DetailScreen

    return DetailScreen(title, builder, keys, modes)
