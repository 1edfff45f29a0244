"""The activity lens (issue 37 item 4): what one agent is doing, from its event frames, and a
line per agent for all of them.

Opened by ``A`` on the console (the roster's or NEEDS-YOU's selected agent; none selected: all
agents), on an agent card and on a triage card, and by the palette (``activity`` / ``activity
@agent``). One agent's lens fills its own frame ledger (meshview/model/agent_activity.py): the
event rows already in the feed ring, then a direct read of the agent's event subject through
the session (``read_activity``: refused reads are said in the header, the lens stays live-only),
then the ring again on every drain from its cursor. The header carries the ledger's notices
(the dashboard's words; a gap in warning style). ``/`` searches the runs, ``n``/``N`` walk the
matches, ``A`` switches to all agents and back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Input, Static

from cotal_tui.shell import ShellScreen
from meshview.model.agent_activity import READ_LIMIT, ActivityRead, AgentFrames
from meshview.model.labels import Labels
from meshview.model.resolve import ResolveError, UnknownName, candidates_of, resolve
from meshview.model.snapshot import Snapshot
from meshview.wire import is_principal_id
from widgets.activity import AgentRuns, AllAgents
from widgets.presentation import look_of, safe
from widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from cotal_tui.session import ConsoleSession

AGENT_HINTS = "enter expand  / search  n/N next  A all agents  esc back  ? help"
ALL_HINTS = "enter open the agent  A back to the agent  esc back  ? help"
TICK_S = 1.0  # ages and the open run's duration move this often with no new frame


class ActivityScreen(ShellScreen):
    """One agent's runs (``agent_id``), or every agent's line (None)."""

    CSS_PATH = "activity.tcss"
    BINDINGS = [
        Binding("escape,q", "back", "back (search, then the lens)", id="activity.close"),
        Binding("slash", "search", "search the runs", id="activity.search"),
        Binding("n", "find(1)", "next match", id="activity.next"),
        Binding("N", "find(-1)", "previous match", id="activity.prev"),
        Binding("A", "switch", "all agents / this agent", id="activity.switch"),
        Binding("question_mark", "help", "help", id="activity.help"),
    ]

    def __init__(self, session: ConsoleSession, agent_id: str | None = None) -> None:
        super().__init__()
        self.session = session
        self.agent_id = agent_id
        self.last_agent = agent_id  # where ``A`` goes back to from all agents
        self.frames: AgentFrames | None = None
        self._drawn: Any = None
        self._labels: Labels | None = None  # the last drained snapshot's (names by id)

    # -- composition -------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static("", id="activity-head")
        yield AgentRuns(id="activity-runs", classes="panel")
        yield AllAgents(id="activity-all", classes="panel")
        yield Input(placeholder="search the runs (enter keeps, esc clears)", id="activity-search")
        yield StatusBar(id="activity-status")

    def on_mount(self) -> None:
        self.query_one("#activity-search", Input).display = False
        self.set_interval(TICK_S, self._tick, name="activity")
        self._open(self.agent_id)

    # -- what is shown -------------------------------------------------------------------

    @property
    def runs_list(self) -> AgentRuns:
        return self.query_one(AgentRuns)

    @property
    def all_list(self) -> AllAgents:
        return self.query_one(AllAgents)

    def _open(self, agent_id: str | None) -> None:
        """Show ``agent_id``'s lens (a fresh ledger and read) or all agents (None)."""
        self.agent_id = agent_id
        runs, every = self.runs_list, self.all_list
        runs.display = agent_id is not None
        every.display = agent_id is None
        self.frames = None
        self._drawn = None
        if agent_id is not None:
            self.last_agent = agent_id
            runs.expanded.clear()
            runs.cursor_key = None
            try:
                self.frames = AgentFrames(agent_id)
            except ValueError:
                self.frames = None
            else:
                self._follow()
                self._read(self.frames)
            runs.focus()
        else:
            every.focus()
        self.query_one(StatusBar).set_hints(AGENT_HINTS if agent_id is not None else ALL_HINTS)
        self.redraw(force=True)

    @work(group="activity-read", exit_on_error=False)
    async def _read(self, frames: AgentFrames) -> None:
        try:
            got = await self.session.read_activity(frames.agent, READ_LIMIT)
        except Exception as e:  # noqa: BLE001 - a read that broke is said, never a traceback
            got = ActivityRead(error=f"the history read failed ({type(e).__name__})")
        if frames is not self.frames or not self.is_mounted:
            return  # the lens moved on while it read
        self._follow()  # the rows that came while it read are live, held until the settle
        frames.settle(got)
        self.redraw()

    def _follow(self, snap: Snapshot | None = None) -> None:
        af = self.frames
        if af is None:
            return
        snap = snap or self.session.model.snapshot()
        self._labels = snap.labels
        end = snap.feed_base + len(snap.feed)
        if end < af.cursor:  # the ring went back (a replay's seek): read the agent afresh
            self._open(af.agent)
            return
        af.follow(snap.feed, snap.feed_base)

    def update_snapshot(self, snap: Snapshot) -> None:
        """The console drained: follow the ring from the cursor (new rows only), then draw."""
        if not self.is_mounted:
            return
        self._labels = snap.labels
        self._follow(snap)
        self.redraw()
        bar = self.query_one(StatusBar)
        bar.update_snapshot(snap, None)

    def _tick(self) -> None:
        if self.shell.exiting or not self.is_mounted:
            return
        self._labels = None  # names may have changed with no drain reaching this screen
        self._follow()
        self.redraw(force=True)

    def redraw(self, force: bool = False) -> None:
        model = self.session.model
        now = model.clock()
        if self.agent_id is None:
            if self._labels is None:
                self._labels = model.snapshot().labels
            self.all_list.show(model.frames.agents(now), self._labels, now)
            self._head()
            return
        af = self.frames
        key = (af.version if af is not None else -1, af.phase if af is not None else None)
        if key == self._drawn and not force:
            return
        self._drawn = key
        if af is None:
            self.runs_list.show([], now, empty="no activity: this is not an agent id")
        else:
            empty = ("reading this agent's activity…" if af.phase == "reading"
                     else "no activity frames from this agent")
            self.runs_list.show(af.runs(), now, empty=empty)
        self._head()

    def name_of(self, pid: str) -> str:
        labels = self._labels or self.session.model.snapshot().labels
        return labels.shown(pid)

    def _head(self) -> None:
        look = look_of(self)
        t = Text()
        if self.agent_id is None:
            t.append("activity · all agents", style="bold")
            banner, gap = self.session.model.frames.banner(), self.session.model.frames.has_gap()
        else:
            t.append(f"activity · {safe(self.name_of(self.agent_id), 40)}", style="bold")
            t.append(f" ({safe(self.agent_id, 80)})", style="dim")
            af = self.frames
            banner, gap = (af.banner(), af.has_gap()) if af is not None else ([], False)
            if af is not None and af.phase == "reading":
                t.append(" · reading history…", style="dim italic")
            elif af is not None and af.error:
                t.append("\n" + safe(af.error, 300) + " · live frames only", style=look.waiting)
            if af is not None and af.dropped:
                t.append(f"\n{af.dropped} frame{'' if af.dropped == 1 else 's'} on this channel "
                         "from other senders not shown", style=look.waiting)
        if banner:
            # a gap in warning style, with a glyph (it must never be missed, NO_COLOR too)
            t.append("\n" + ("⚠ " if gap else "") + " · ".join(banner),
                     style=f"bold {look.waiting}" if gap else "dim")
        self.query_one("#activity-head", Static).update(t)

    # -- keys ----------------------------------------------------------------------------

    @on(AgentRuns.Selected, "#activity-runs")
    def _toggle(self, event: AgentRuns.Selected) -> None:
        event.stop()
        k = event.key
        if isinstance(k, tuple) and len(k) == 2 and k[0] == "run":
            self.runs_list.toggle(str(k[1]))

    @on(AllAgents.Selected, "#activity-all")
    def _open_agent(self, event: AllAgents.Selected) -> None:
        event.stop()
        self._open(str(event.key))

    def action_switch(self) -> None:
        if self.agent_id is not None:
            self._open(None)
        elif self.last_agent is not None:
            self._open(self.last_agent)
        else:
            k = self.all_list.cursor_key
            if k is not None:
                self._open(str(k))

    def action_search(self) -> None:
        if self.agent_id is None:
            self.shell.notify_line("search: open an agent's lens first (enter)")
            return
        box = self.query_one("#activity-search", Input)
        box.value = self.runs_list.search_text
        box.display = True
        box.focus()

    @on(Input.Changed, "#activity-search")
    def _query(self, event: Input.Changed) -> None:
        self.runs_list.set_query(event.value)

    @on(Input.Submitted, "#activity-search")
    def _query_done(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.runs_list.focus()
        if event.value and not self.runs_list.find(1):
            self.shell.notify_line(f"no run matches {safe(event.value, 40)!r}")

    def action_find(self, delta: int) -> None:
        if self.agent_id is None or not self.runs_list.search_text:
            self.shell.notify_line("/ to search first")
            return
        if not self.runs_list.find(delta):
            self.shell.notify_line(f"no run matches {safe(self.runs_list.search_text, 40)!r}")

    def action_back(self) -> None:
        box = self.query_one("#activity-search", Input)
        if box.display:
            box.display = False
            box.value = ""
            self.runs_list.set_query("")
            self.runs_list.focus()
            return
        self.dismiss()

    def action_help(self) -> None:
        from cotal_tui.screens.help import HelpScreen, describe_bindings

        panel, panel_rows, global_rows = describe_bindings(self)
        self.app.push_screen(HelpScreen(panel, panel_rows, global_rows))


def open_activity(app: App[Any], session: ConsoleSession, agent_id: str | None) -> bool:
    """The activity lens over the console: ``agent_id``'s, or all agents' (None). Over an open
    lens it switches that one instead of stacking another."""
    screen = app.screen
    if isinstance(screen, ActivityScreen) and screen.session is session:
        screen._open(agent_id)
        return True
    app.push_screen(ActivityScreen(session, agent_id))
    return True


def activity_target(arg: str, peers: Any) -> str | None | ResolveError:
    """The agent ``activity <arg>`` names (by id, the way the other verbs resolve: a name two
    peers share is refused), None for all agents (no argument)."""
    arg = arg.strip()
    if not arg:
        return None
    word = arg.split()[0]
    try:
        return resolve(word, candidates_of(peers), what="agent", outcome="no lens was opened").id
    except UnknownName as e:  # an agent off the roster (its presence gone) by its id
        pid = word.removeprefix("@")
        return pid if is_principal_id(pid) else e
    except ResolveError as e:
        return e


def activity_key_target(console: Any) -> str | None:
    """The agent the console's ``A`` opens: the roster's or the NEEDS-YOU rail's selection
    when that panel has focus (None: all agents)."""
    from widgets.needs_you import NeedsYouRail
    from widgets.roster import Roster

    f = console.focused
    if isinstance(f, (Roster, NeedsYouRail)):
        k = f.cursor_key
        if isinstance(k, str):
            return k
    return None

