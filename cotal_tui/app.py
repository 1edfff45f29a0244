"""The console App: a space picker or one space's console, the ``:`` palette, the keymap.

The App holds no connection of its own. It is handed a :class:`~cotal_tui.session.ConsoleSession`
(a live observer, a replay, or a test's fixed data), or an ``open_space`` callable that makes
one, plus an optional ``list_spaces`` coroutine for the admin overview; the mesh is reached
only through what a session carries (its observer, ``ps`` poll, seat sessions, operator) and
the control verbs' own connections (screens/control.py). Screens call the App through
:class:`~cotal_tui.shell.ConsoleShell`.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import time
from functools import partial
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Iterable

from textual import events, work
from textual.app import App
from textual.screen import Screen
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.command import CommandPalette, DiscoveryHit, Hit, Hits, Provider

from cotal_tui.gcpace import HOLD as GC_HOLD
from cotal_tui.keygate import KeyGate, Verdict
from cotal_tui.shell import ConsoleShell, ListSpaces, shell_of
from cotal_tui.themes import COTAL_THEMES, DEFAULT_THEME, theme_names
from meshview.errors import swallowed
from widgets.presentation import css_variables, look_from_theme

if TYPE_CHECKING:
    from textual.timer import Timer
    from attach.control.managed import ManagedFold
    from cotal_tui.alerts import toggle_notify
    from cotal_tui.boot import Boot
    from cotal_tui.palette import (
        THEME_HELP, WRITE_VERBS, MeshPalette, activity_hit, theme_hits, write_hit,
    )
    from cotal_tui.recording import toggle_recording
    from cotal_tui.screens.console import ConsoleScreen
    from cotal_tui.screens.control import (
        CONTROL_VERBS, Controls, control_hit, control_rows, stop_from_roster,
    )
    from cotal_tui.screens.lenses import LENSES
    from cotal_tui.screens.runs import RunsDesk, RunsScreen, open_answer, runs_note
    from cotal_tui.screens.spaces import SpacePickerScreen
    from cotal_tui.seats import SeatSessions
    from cotal_tui.session import ConsoleSession
    from meshview.model.labels import EMPTY as NO_LABELS
    from widgets.channel_tabs import ChannelTabs
    from widgets.feed import FeedView
    from widgets.needs_you import NeedsYouRail
    from widgets.roster import Roster
    from widgets.status_bar import StatusBar


# the console's heaviest imports, in the order load_console reaches them (a boot imports them one
# per loop turn, behind its first frame)
BOOT_IMPORTS = ("meshview.link.connect", "cotal_tui.session", "cotal_tui.alerts",
                "widgets.roster", "widgets.feed", "cotal_tui.screens.control",
                "cotal_tui.screens.runs", "cotal_tui.screens.console")


def load_console() -> None:
    """Bind the console's screens, widgets and mesh verbs into this module (idempotent).

    They are most of the console's import time (~250 ms: the model, nats-py, every screen), and
    the console's first frame (:class:`cotal_tui.boot.BootScreen`, ``connecting …``) needs none
    of them, so ``cotal watch`` paints that frame first and binds them behind it (issue 40,
    start-up). An App handed its session (tests, replay) binds them when it is made. Until
    then the App's methods that name them are not reached: the boot screen is the only one.
    """
    global ManagedFold, toggle_notify, THEME_HELP, WRITE_VERBS, MeshPalette, activity_hit
    global theme_hits, write_hit, toggle_recording, ConsoleScreen, CONTROL_VERBS, Controls
    global control_hit, control_rows, stop_from_roster, LENSES, RunsDesk, RunsScreen
    global open_answer, runs_note, SpacePickerScreen, SeatSessions, ConsoleSession, NO_LABELS
    global ChannelTabs, FeedView, NeedsYouRail, Roster, StatusBar
    if "ConsoleScreen" in globals():
        return
    from attach.control.managed import ManagedFold
    from cotal_tui.alerts import toggle_notify
    from cotal_tui.palette import (
        THEME_HELP, WRITE_VERBS, MeshPalette, activity_hit, theme_hits, write_hit,
    )
    from cotal_tui.recording import toggle_recording
    from cotal_tui.screens.control import (
        CONTROL_VERBS, Controls, control_hit, control_rows, stop_from_roster,
    )
    from cotal_tui.screens.lenses import LENSES
    from cotal_tui.screens.runs import RunsDesk, RunsScreen, open_answer, runs_note
    from cotal_tui.screens.spaces import SpacePickerScreen
    from cotal_tui.seats import SeatSessions
    from cotal_tui.session import ConsoleSession
    from meshview.model.labels import EMPTY as NO_LABELS
    from widgets.channel_tabs import ChannelTabs
    from widgets.feed import FeedView
    from widgets.needs_you import NeedsYouRail
    from widgets.roster import Roster
    from widgets.status_bar import StatusBar
    from cotal_tui.screens.console import ConsoleScreen  # last: the flag above


OpenSpace = Callable[[str], "ConsoleSession"]

# The seat screens (attach, tile, triage: terminal panes, pyte, the mirror) are imported when
# first opened: the console's first frame does not wait for them (issue 40, start-up).


def _max_panes() -> int:
    from cotal_tui.screens.tile import MAX_PANES

    return MAX_PANES


SEAT_VERBS = ("attach", "peek", "tile")


def _select_tab(screen: ConsoleScreen, name: str) -> None:
    """The palette's ``#channel``: that tab, looked up when chosen."""
    screen.query_one("#tabs", ChannelTabs).select(name)


class MeshCommands(Provider):
    """``:`` palette: navigation verbs, ``#channel`` tabs, ``@agent`` cards, and the seat verbs
    ``attach <name>``, ``peek <name>``, ``tile`` and ``tile <name> <name>…``."""

    @property
    def shell(self) -> ConsoleShell:
        return shell_of(self.app)

    def _console(self) -> ConsoleScreen | None:
        return self.shell.console_screen()

    def _seat_names(self, screen: ConsoleScreen | None) -> tuple[list[str], bool]:
        """(names the seat verbs offer, whether a manager's ``ps`` answered for them).

        Once the console's ``ps`` poll answered, the managed seats; before (or without a poll),
        every agent on the roster."""
        if screen is None:
            return [], False
        fold = screen.managed
        if fold is not None and fold.rounds:
            return sorted({s.name for s in fold.seats()}), True
        snap = screen.snap
        return [p.name for p in (snap.agents if snap is not None else ())], False

    def _seat_ids(self, screen: ConsoleScreen | None) -> set[str]:
        """The ids a seat verb also takes (an id always works as an address): the managed
        seats' principals once ``ps`` answered, else the roster agents'."""
        if screen is None:
            return set()
        fold = screen.managed
        if fold is not None and fold.rounds:
            return {i for s in fold.seats() for i in (s.principal, s.id)}
        snap = screen.snap
        return {p.id for p in (snap.agents if snap is not None else ())}

    def _open_log(self, mesh: str | None = None) -> None:
        from cotal_tui.screens.actionlog import ActionLogScreen

        self.app.push_screen(ActionLogScreen(mesh=mesh))

    def _commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        app = self.shell
        screen = self._console()
        cmds: list[tuple[str, str, Callable[[], Any]]] = [
            ("help", "show the keys of the focused panel",
             lambda: screen.action_help() if screen is not None else None),
            ("quit", "leave the console", lambda: self.app.exit(0)),
            ("theme", THEME_HELP, self.app.search_themes),
        ]
        if screen is not None:
            cmds += [
                ("record", "start or stop recording this space to $COTAL_HOME/recordings "
                 "(cotal replay FILE plays it back)", lambda: toggle_recording(app)),
                ("record seats", "record, with the terminals you attach to, peek at or tile "
                 "(their output, never your keys)", lambda: toggle_recording(app, seats=True)),
                ("notify", "bell + desktop notification when an agent starts waiting (on/off)",
                 lambda: toggle_notify(app)),
                ("log", "the action log: what was done, on which mesh, newest first (log NAME: one mesh)",
                 self._open_log),
            ]
            cmds[:0] = [
                *[(lens.name, lens.palette, lambda n=lens.name: screen.action_lens(n))
                  for lens in LENSES],
                ("needs-you", "agents blocked on input or approval", screen.action_needs_you),
                ("runs", "workflow runs the managers report: Enter journal, r answer a checkpoint",
                 app.open_runs),
                ("triage", "every waiting agent and run step: its prompt, its terminal, answer in place",
                 lambda: self.app.open_triage() if isinstance(self.app, CotalApp) else None),
                ("search", "filter the feed", screen.action_search),
                ("lifecycle", "show or hide lifecycle rows in the feed",
                 lambda: screen.query_one("#feed", FeedView).action_toggle_lifecycle()),
                ("events on", "show the agents' activity frames in the feed (E; saved as "
                 "[ui] show_events)", lambda: screen.set_events(True)),
                ("events off", "hide the activity frames from the feed, counted as ev N in the "
                 "status bar (E)", lambda: screen.set_events(False)),
                ("tile", f"live terminals of every managed seat (up to {_max_panes()}), read-only until "
                 "promoted",
                 lambda: self._tile(None)),
                ("activity", "what every agent is doing, from its event frames (activity @agent: "
                 "one agent's runs)", lambda: screen.open_activity(None)),
            ]
            names, _ = self._seat_names(screen)
            for n in names:
                cmds.append((f"attach {n}", f"open {n}'s terminal", partial(app.open_seat, n)))
                cmds.append((f"peek {n}", f"watch {n}'s terminal, read-only",
                             partial(app.open_seat, n, peek=True)))
            snap = screen.snap
            if snap is not None:
                for c in snap.channels:
                    cmds.append((f"#{c.name}", "switch to this channel tab",
                                 partial(_select_tab, screen, c.name)))
                for p in snap.peers:
                    cmds.append((f"@{p.name}", f"{p.role or p.kind} · agent card",
                                 partial(screen.open_agent, p.id)))
        if app.list_spaces is not None:
            cmds.append(("spaces", "the spaces overview", app.back_to_spaces))
        else:
            cmds.append(("spaces", "the spaces overview (not available: opened on one space)",
                         lambda: app.notify_line("no spaces overview: opened on one space")))
        return cmds

    def _tile(self, names: list[str] | None) -> None:
        screen = self._console()
        known, managed = self._seat_names(screen)
        if names:
            ids = self._seat_ids(screen)
            unknown = [n for n in names if n not in known and n not in ids]
            if unknown:
                self.shell.notify_line(f"tile: no {'managed seat' if managed else 'agent'} named "
                                       + ", ".join(unknown), True)
                return
        self.shell.open_tile(names, known if managed and not names else None)

    def _typed(self, q: str) -> Hit | None:
        """A seat verb typed out in full (``attach zed``, ``tile a b``): one exact hit, or a hit
        that says why it cannot run. Never a traceback."""
        verb, _, rest = q.partition(" ")
        args = rest.split()
        if verb not in SEAT_VERBS or (verb != "tile" and not args):
            return None
        app = self.shell
        screen = self._console()
        if screen is None:
            return Hit(0.5, q, lambda: app.notify_line(f"{verb}: open a space first", True),
                       help="needs a space console")
        if verb == "tile":
            return Hit(1.0, q, lambda: self._tile(args or None),
                       help=f"tile {len(args)} seat{'s' if len(args) != 1 else ''}"
                       if args else "tile every managed seat")
        name = " ".join(args)
        known, managed = self._seat_names(screen)
        if any(n.startswith(name) for n in known):
            return None  # the listed commands match it (a name typed in part, or whole)
        what = "managed seat" if managed else "agent"
        return Hit(0.5, q, lambda: app.notify_line(f"{verb}: no {what} named {name}", True),
                   help=f"no {what} by that name")

    def _write_verbs(self) -> list[tuple[str, str, Callable[[], Any]]]:
        """The write verbs as palette rows; unavailable ones say why instead of hiding."""
        screen = self._console()
        why = screen.refusal() if screen is not None else "open a space first"
        rows: list[tuple[str, str, Callable[[], Any]]] = []
        for verb, usage in WRITE_VERBS.items():
            help_ = usage if why is None else f"unavailable - {why}"
            rows.append((verb, help_, partial(self._write_verb_note, usage, why)))
        return rows

    def _write_verb_note(self, usage: str, why: str | None) -> None:
        self.shell.notify_line(f"unavailable - {why}" if why else f"type it out: {usage}",
                               why is not None)

    dropped = 0  # palette commands that found their screen gone (counted, never a traceback)

    def _guarded(self, cb: Callable[[], Any]) -> Callable[[], Any]:
        """A palette command that does nothing once the console is closing (Textual runs it
        after the palette is gone: by then the screens it acts on may be taken down)."""
        shell = self.shell

        async def run() -> None:
            if shell.exiting:
                return
            try:
                result = cb()
                if inspect.isawaitable(result):
                    await result
            except NoMatches:  # its screen was taken down while it was queued: nothing to act on
                self.dropped += 1
        return run

    async def discover(self) -> Hits:
        for name, help_, cb in self._commands() + self._write_verbs() + control_rows(self.shell):
            if name.startswith(("#", "@", "attach ", "peek ")):
                continue
            yield DiscoveryHit(name, self._guarded(cb), help=help_)

    async def search(self, query: str) -> Hits:
        async for hit in self._hits(query):
            yield replace(hit, command=self._guarded(hit.command))

    async def _hits(self, query: str) -> Hits:
        raw = query.strip()
        if raw.partition(" ")[0] in CONTROL_VERBS and " " in raw:
            hit = control_hit(self.shell, raw)
            if hit is not None:
                yield hit
                return
        if raw.partition(" ")[0] in WRITE_VERBS and " " in raw:
            hit = write_hit(self._console(), raw, self.shell.notify_line)
            if hit is not None:
                yield hit
                return
        if raw.partition(" ")[0] == "activity" and raw.partition(" ")[2].strip():
            yield activity_hit(self._console(), raw, self.shell.notify_line)
            return
        if raw.partition(" ")[0] == "log" and raw.partition(" ")[2].strip():
            mesh = raw.partition(" ")[2].strip()
            yield Hit(1.0, f"log {mesh}", lambda: self._open_log(mesh),
                      help="the action log of that mesh only (m in the log changes it)")
            return
        if raw.partition(" ")[0] == "theme" and " " in raw:
            for hit in theme_hits(self.app, raw.partition(" ")[2], self.matcher):
                yield hit
            return
        q = " ".join(query.split())
        typed = self._typed(q)
        if typed is not None:
            yield typed
            if q.startswith("tile"):
                return
        matcher = self.matcher(q)
        for name, help_, cb in self._commands() + self._write_verbs() + control_rows(self.shell):
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), cb, help=help_)


TITLE_PUSH = "\x1b[22;2t"  # XTWINOPS: save the terminal's title before the first of ours
TITLE_POP = "\x1b[23;2t"  # ... and give it back on exit


def window_title(space: str, waiting: int) -> str:
    """``2 waiting · cotal main``; the space made terminal-safe (no escape, no control, no
    bidi character reaches the title)."""
    from meshview.wire.sanitize import inline

    name = "".join(c for c in inline(space, 64) if c.isprintable())
    return f"{waiting} waiting · cotal {name}" if waiting > 0 else f"cotal {name}"


class CotalApp(App[int]):
    """The console App; it keeps :class:`~cotal_tui.shell.ConsoleShell` for its screens."""

    CSS_PATH = "app.tcss"
    TITLE = "cotal console"
    COMMANDS = {MeshCommands}
    COMMAND_PALETTE_BINDING = "ctrl+p"
    BINDINGS = [
        Binding("ctrl+c", "interrupt", "quit", show=False, priority=True, id="app.quit"),
        Binding("ctrl+q", "quit", "quit", show=False, priority=True, id="app.quit-alt"),
        Binding("R", "runs", "runs lens: workflow runs and their checkpoints", id="app.runs"),
        Binding("T", "triage", "triage: who is waiting, why, and answer in place", id="app.triage"),
    ]
    RUNS_TICK_S = 1.0  # the runs note on the console's status bar, and run alerts
    last_notice: str | None = None  # the newest status-line notice (tests, replay)
    _sticky_bar: StatusBar | None = None  # holds a notice until the next key
    key_at = 0.0  # monotonic time of the operator's last key (the console drains around keys)
    _gc_timer: Timer | None = None  # releases the collector held for keys (cotal_tui/gcpace.py)
    KEY_RETRY_S = 0.02  # held keys are offered again this often (a screen mounts in a frame or two)

    def __init__(
        self,
        *,
        session: ConsoleSession | None = None,
        open_space: OpenSpace | None = None,
        list_spaces: ListSpaces | None = None,
        keymap: dict[str, str] | None = None,
        notice: str | None = None,
        theme: str = DEFAULT_THEME,
        boot: Boot | None = None,
    ) -> None:
        super().__init__()
        self.boot = boot  # `cotal watch`: connect (and bind the console) behind the first frame
        for t in COTAL_THEMES:
            self.register_theme(t)
        if theme not in theme_names():
            raise ValueError(f"no theme named {theme!r}")  # the CLI says it in a sentence first
        self.theme = theme
        self.session = session
        self.open_space = open_space
        self.list_spaces = list_spaces
        self._user_keymap = keymap or {}
        self._first_notice = notice
        self.sessions: list[ConsoleSession] = []  # every session this app opened (closed on exit)
        if boot is None:
            self._bind_console()
        self._run_alerts: dict[int, Any] = {}  # session -> its runs' waiting episodes (--notify)
        self.keygate = KeyGate()  # keys during mount, a palette command and shutdown
        self._errors_said = 0  # error notices so far (a refused palette command drops its type-ahead)
        self._release_armed = False
        self._first_screen_pushed = False  # on_mount ran: the stack holds the screen we start on
        self._title_counts = True  # [ui] title_counts (read in on_mount)
        self._title_written: str | None = None  # the terminal title we last set (OSC 2)

    def _bind_console(self) -> None:
        load_console()
        self.controls = Controls(self)  # the control verbs (screens/control.py)
        self.runs = RunsDesk()  # workflow runs: a poller per session, the answer call

    @property
    def booting(self) -> bool:
        """The first frame is the boot screen (``connecting …``): the console is not in yet."""
        return self.boot is not None and not self.boot.done

    @property
    def exiting(self) -> bool:
        """The App is closing: keys are dropped, palette commands and ticks do nothing."""
        return self.keygate.closing

    def exit(self, result: int | None = None, return_code: int = 0,
             message: Any = None) -> None:
        """Close the gate first (keys already queued must not act on screens being taken
        down), and stop the palette's search (it would query a list no longer there)."""
        self.keygate.close()
        if self._title_written is not None:  # the title the terminal had before ours (XTWINOPS pop)
            self._title_written = None
            self.write_to_terminal(TITLE_POP)
        for screen in self.screen_stack:
            if isinstance(screen, CommandPalette):
                self.workers.cancel_node(screen)
        super().exit(result, return_code, message)

    def stop_signal(self) -> None:
        """SIGINT or SIGTERM (a Ctrl-C before Textual made the terminal raw, or a kill): exit 0,
        never while a screen mounts. Before Textual runs, exit() stops it starting; once it runs,
        the exit waits, as held keys do, for on_mount to push the first screen and the screen
        on top to be mounted (one taken down while it mounted raised ``NoMatches`` from its
        on_mount: a traceback on the terminal)."""
        if self.keygate.closing:
            return
        if self.is_running and not self.booting and not (self._first_screen_pushed
                                                         and self._screen_ready()):
            asyncio.get_running_loop().call_later(self.KEY_RETRY_S, self.stop_signal)
            return
        self.exit(0)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """``$cotal-working``… for CSS under every theme (a Cotal theme's own win)."""
        return css_variables(look_from_theme(self.current_theme))

    def on_mount(self) -> None:
        if self.boot is not None:
            from cotal_tui.boot import BootScreen

            self.push_screen(BootScreen(self.boot))
            self._first_screen_pushed = True
            self.call_after_refresh(self._start_boot)
            return
        self._start()

    def _start_boot(self) -> None:
        self.run_worker(self._booted(), name="boot", group="boot", exit_on_error=False)

    async def _booted(self) -> None:
        """Behind the boot screen: bind the console, then the boot's own steps (the keymap,
        the connect, the space check); its session or spaces overview replaces the boot
        screen, or its refusal ends the App (the CLI says it once the terminal is back)."""
        boot = self.boot
        assert boot is not None
        steps = boot.task = asyncio.ensure_future(boot.run(self))
        try:
            for name in BOOT_IMPORTS:  # one per loop turn: the connect's round trips go on between
                await asyncio.sleep(0)
                importlib.import_module(name)
            self._bind_console()
            await steps
        except asyncio.CancelledError:
            steps.cancel()  # quit while it boots: the steps end too (the CLI awaits them)
            raise
        except Exception as e:  # noqa: BLE001 - one sentence after the terminal is restored
            boot.fail(f"{type(e).__name__}: {e}")
        if boot.error is not None or self.keygate.closing:
            self.exit(boot.rc)
            return
        self.session, self.open_space, self.list_spaces = boot.session, boot.open_space, boot.lister
        self._user_keymap = boot.keymap or self._user_keymap
        self._first_notice = "; ".join(w for w in (boot.notice, self._first_notice) if w) or None
        self._start(replace=True)
        boot.done = True

    def _start(self, replace: bool = False) -> None:
        """The first real screen: the session's console, or the spaces overview."""
        if self._user_keymap:
            self.set_keymap(self._user_keymap)
        self.set_interval(self.RUNS_TICK_S, self._runs_tick, name="runs")
        try:
            from cotal_tui.config import read_config, ui_title_counts

            self._title_counts = ui_title_counts(read_config())[0]
        except Exception:  # noqa: BLE001 - a config that cannot be read keeps the default [counted: COTAL_LOG]
            swallowed("cotal_tui.app:on_mount.title_counts")
        first: Screen | None = None
        if self.session is not None:
            first = ConsoleScreen(self.session, can_go_back=False)
        elif self.list_spaces is not None:
            first = SpacePickerScreen()
        if first is not None:
            (self.switch_screen if replace else self.push_screen)(first)
        if self._first_notice:
            self.call_after_refresh(self.notify_line, self._first_notice, True)
        self._first_screen_pushed = True

    # -- notices -------------------------------------------------------------------------

    def notify_line(self, text: str, error: bool = False, *, sticky: bool = False,
                    seconds: float | None = None) -> None:
        """A one-line notice on the status bar (cleared after ``seconds``, 3 s by default, or
        when ``sticky`` at the next key); a toast elsewhere."""
        self.last_notice = text
        self._sticky_bar = None
        if error:
            self._errors_said += 1
        for screen in reversed(self.screen_stack):
            bars = screen.query(StatusBar)
            if bars:
                bar = bars.first()
                bar.show_notice(text, error=error, sticky=sticky, seconds=seconds)
                self._sticky_bar = bar if sticky else None
                return
        self.notify(text, severity="error" if error else "information")

    def write_to_terminal(self, data: str) -> None:
        """Escapes of our own (the bell, a desktop notification) through the driver, between
        frames, so they never tear the screen."""
        driver = self._driver
        if driver is not None:
            driver.write(data)
            driver.flush()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key):
            if not self._admit(event):
                return
            self.key_at = time.monotonic()
            if GC_HOLD.key(self.key_at):  # no collection under the keys (cotal_tui/gcpace.py)
                self._gc_timer = self.set_interval(0.1, self._gc_tick, name="gc-hold")
            if self._sticky_bar is not None:
                bar, self._sticky_bar = self._sticky_bar, None  # the next action clears it
                if bar.is_attached:
                    bar.clear_notice()
        await super().on_event(event)

    def on_unmount(self) -> None:
        GC_HOLD.release(time.monotonic())  # quit while keys held the collector

    def _gc_tick(self) -> None:
        """While the collector is held for keys: release it once they pause."""
        GC_HOLD.tick(time.monotonic(), self.key_at)
        if not GC_HOLD.held and self._gc_timer is not None:
            self._gc_timer.stop()
            self._gc_timer = None

    # -- the key gate (cotal_tui/keygate.py) ---------------------------------------------

    def _screen_ready(self) -> bool:
        """The screen on top takes keys: mounted, and not the boot screen (keys typed while
        it connects are held, in order, for the console that replaces it)."""
        stack = self.screen_stack
        return bool(stack) and stack[-1].is_mounted and not self.booting

    BOOT_KEYS = ("ctrl+c", "ctrl+q")  # taken on the boot screen: they quit while it connects

    def _admit(self, event: events.Key) -> bool:
        if self.booting and event.key in self.BOOT_KEYS and not self.keygate.closing:
            return True
        stack = self.screen_stack
        verdict = self.keygate.admit(
            event.key, event.character, screen_ready=self._screen_ready(),
            palette_on_top=bool(stack) and isinstance(stack[-1], CommandPalette),
            errors=self._errors_said, opens_palette=self._opens_palette(event.key))
        if verdict is Verdict.HOLD:
            self._arm_release()
        return verdict is Verdict.TAKE

    def _opens_palette(self, key: str) -> bool:
        """The key is bound to the palette on the screen on top (``:`` on the console)."""
        if not self._screen_ready():
            return False
        active = self.screen.active_bindings.get(key)
        return active is not None and active.binding.action in ("palette", "command_palette",
                                                                 "app.command_palette")

    def _arm_release(self) -> None:
        if not self._release_armed and not self.keygate.closing:
            self._release_armed = True
            self.set_timer(self.KEY_RETRY_S, self._release_keys, name="held keys")

    def _release_keys(self) -> None:
        """Held keys go back into the App's queue in order once the screen on top can take them."""
        self._release_armed = False
        gate = self.keygate
        if gate.closing or not gate.held:
            return
        if gate.waiting(screen_ready=self._screen_ready()):
            self._arm_release()
            return
        for key, character in gate.release():
            self.post_message(events.Key(key, character))

    def on_command_palette_closed(self, event: CommandPalette.Closed) -> None:
        """The palette's command (queued just before this) runs first; then the gate learns
        whether it was refused."""
        self.call_later(self._palette_settled)

    def _palette_settled(self) -> None:
        self.keygate.palette_settled(self._errors_said)
        if self.keygate.held:
            self._arm_release()

    # -- spaces --------------------------------------------------------------------------

    def open_space_named(self, space: str) -> None:
        self._open_space(space)

    def _open_space(self, space: str) -> None:
        if self.open_space is None:
            return
        try:
            session = self.open_space(space)
        except Exception as e:  # noqa: BLE001 - one line, never a traceback
            self.notify_line(f"could not open {space}: {e}", error=True)
            return
        self.sessions.append(session)
        self.push_screen(ConsoleScreen(session, can_go_back=True))

    @work(exclusive=False, group="start-session", exit_on_error=False)
    async def start_session(self, session: ConsoleSession) -> None:
        """Start ``session`` (if it has not started), off the UI path: its observer
        (connect-time reads, prefill), then its runs poll (a first round's connection would
        compete with the roster's first frame). Its console screen asks on mount (started
        earlier, beside the mount, the roster was full ~400 ms later on the demo:
        bench/startup.py, 3 runs); a session started already gets its runs poll only."""
        try:
            if not session.started:
                await session.start()
        except Exception as e:  # noqa: BLE001 - one line, never a traceback
            model = session.model
            model.set_connection(model.status.connection, error=f"observer: {e}")
            self.notify_line(f"observer failed: {e}", error=True)
        finally:
            if not self.keygate.closing:
                self.runs.ensure(session)

    def back_to_spaces(self) -> None:
        if self.list_spaces is None:
            return
        while isinstance(self.screen, ConsoleScreen) or (
            len(self.screen_stack) > 2 and not isinstance(self.screen, SpacePickerScreen)
        ):
            screen = self.screen
            self.pop_screen()
            if isinstance(screen, ConsoleScreen):
                self._close_session(screen.session)
                break
        picker = self.screen
        if isinstance(picker, SpacePickerScreen):
            picker.refresh_spaces()
        else:
            self.push_screen(SpacePickerScreen())

    @work(group="close-session", exit_on_error=False)
    async def _close_session(self, session: ConsoleSession) -> None:
        if session in self.sessions:
            self.sessions.remove(session)
        await session.stop()

    async def action_quit(self) -> None:
        self.exit(0)

    async def action_interrupt(self) -> None:
        """Ctrl-C: in the palette it closes the palette, in the composer it puts the box away (the
        draft kept); elsewhere it quits."""
        from widgets.composer import Composer

        if isinstance(self.screen, CommandPalette):  # the palette closes; the console stays
            await self.screen.run_action("escape")
            return
        for composer in self.screen.query(Composer):
            if composer.is_open and composer.box.has_focus:
                composer.cancel()
                return
        self.exit(0)

    # -- seats: attach, peek and tile (roster ``a``/``p``, ``:attach <name>``, ``:tile``) -------

    def action_command_palette(self) -> None:
        """``:``: the palette with Tab completion of verbs, #channels, @agents and @roles."""
        # Textual types is_open(app: App[object]); App is invariant and this one is App[int]
        if self.use_command_palette and not MeshPalette.is_open(self):  # type: ignore[arg-type]
            self.push_screen(MeshPalette(id="--command-palette"))

    def console_screen(self) -> ConsoleScreen | None:
        """The topmost space console on the stack, if any."""
        return next((s for s in reversed(self.screen_stack) if isinstance(s, ConsoleScreen)), None)

    def hold_escape(self) -> None:
        """Leaving a terminal with Esc (or Esc Esc): the console ignores an Esc that follows within
        the double-Esc window, so a habitual second Esc does not also close the rail or the lens."""
        from widgets.terminal_pane import ESC_DOUBLE_S

        screen = self.console_screen()
        if screen is not None:
            screen.escape_grace_until = time.monotonic() + ESC_DOUBLE_S

    def reach_seats(self) -> SeatSessions | None:
        """How this app reaches seats: the open console's session's own (``LiveSession``: its
        target, creds included); ``None`` without a console or a mesh behind it."""
        screen = self.console_screen()
        return screen.session.seat_sessions if screen is not None else None

    # -- workflow runs (screens/runs.py): the lens, the journal, answers, the rail's run cards ---

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("runs", "triage"):  # R, T only over a space console (a pane keeps its keys)
            return not self.booting and isinstance(self.screen, ConsoleScreen)
        return True

    def action_triage(self) -> None:
        self.open_triage()

    def open_triage(self, focus_id: str | None = None) -> bool:
        """``T`` / ``:triage`` / Enter on a NEEDS-YOU agent: the triage screen over the console."""
        if self.console_screen() is None:
            self.notify_line("triage: open a space first")
            return False
        from cotal_tui.screens.triage import TriageScreen

        if isinstance(self.screen, TriageScreen):
            if focus_id is not None:
                self.screen.focus_on(focus_id)
            return True
        self.push_screen(TriageScreen(focus_id=focus_id))
        return True

    def on_needs_you_rail_open_triage(self, event: NeedsYouRail.OpenTriage) -> None:
        """Enter on an agent's NEEDS-YOU card: triage, on that agent."""
        event.stop()
        self.open_triage(event.peer_id)

    def action_runs(self) -> None:
        self.open_runs()

    def open_runs(self) -> bool:
        """``R`` / ``:runs``: the runs lens over the open console."""
        screen = self.console_screen()
        if screen is None:
            self.notify_line("runs: open a space first")
            return False
        if isinstance(self.screen, RunsScreen):
            return True
        self.push_screen(RunsScreen(screen.session, self.runs))
        return True

    def _run_of(self, run_id: str, instance_id: str):
        screen = self.console_screen()
        if screen is None:
            return None, None
        view = screen.session.model.runs_view()
        run = next((r for r in view.runs if r.key == (instance_id, run_id)), None)
        return screen.session, run

    def on_needs_you_rail_answer_run(self, event: NeedsYouRail.AnswerRun) -> None:
        """``r`` on a run's NEEDS-YOU card: the answer composer for that step."""
        event.stop()
        session, run = self._run_of(event.run_id, event.instance_id)
        if session is None or run is None:
            self.notify_line("that run is no longer reported by its manager")
            return
        open_answer(self, session, self.runs, run, event.step_key)

    def on_needs_you_rail_open_run(self, event: NeedsYouRail.OpenRun) -> None:
        """Enter on a run's NEEDS-YOU card: its journal."""
        from cotal_tui.screens.runs import JournalScreen

        event.stop()
        session, run = self._run_of(event.run_id, event.instance_id)
        if session is None or run is None:
            self.notify_line("that run is no longer reported by its manager")
            return
        self.push_screen(JournalScreen(session, self.runs, run.run_id, run.instance_id))

    def _runs_tick(self) -> None:
        """Once a second: the console's status bar says when runs are stale or a manager did not
        answer, and ``--notify`` alerts on a run pause opening as on an agent that starts waiting."""
        screen = self.console_screen()
        if screen is None or not screen.is_mounted or self.exiting:
            return
        session = screen.session
        self._set_title(session)
        view = session.model.runs_view()
        bars = screen.query(StatusBar)
        if bars:
            bars.first().set_runs(runs_note(view))
            health = session.health  # a poller only when the operator opted in
            bars.first().set_health(health.note() if health is not None else None)
        n = session.notifier
        if n is None:
            return
        from meshview.lines.notify import WaitingEpisodes
        from meshview.model.runs_state import as_needs_you

        episodes = self._run_alerts.get(id(session))
        if episodes is None:
            episodes = self._run_alerts[id(session)] = WaitingEpisodes(session.space, session.model.status.server)
        alerts = episodes.update([as_needs_you(x) for x in view.needs])
        if n.enabled:
            for a in alerts:
                n.deliver(a)

    def _set_title(self, session: Any) -> None:
        """The terminal title: ``2 waiting · cotal main`` (``cotal main`` when nobody waits),
        written (OSC 2) only when it changes; ``[ui] title_counts = false`` leaves it alone."""
        if not self._title_counts:
            return
        counts = dict(session.model.snapshot().signals.counts)
        title = window_title(session.space, counts.get("waiting", 0))
        if title == self._title_written:
            return
        # the App's own title is set as a value only: nothing on screen shows it, and the
        # reactive's refresh repainted the whole screen each time the waiting count moved
        self.set_reactive(App.title, title)
        push = TITLE_PUSH if self._title_written is None else ""
        self._title_written = title
        self.write_to_terminal(f"{push}\x1b]2;{title}\x07")

    def on_roster_stop_seat(self, event: Roster.StopSeat) -> None:
        """Roster ``D``: the red stop overlay for a managed seat (screens/control.py)."""
        stop_from_roster(self, event.peer_id, event.name)

    def managed_fold(self) -> ManagedFold | None:
        """The open console's ``ps`` fold (``None`` when the session polls no managers)."""
        screen = self.console_screen()
        return screen.managed if screen is not None else None

    def open_seat(self, name: str, *, peek: bool = False, instance_id: str | None = None) -> bool:
        """Push the attach (or peek) screen for ``name``; False (with a notice) when it cannot.

        When the console's ``ps`` poll has answered, a name no manager hosts is refused here with
        a notice (not a screen that opens only to say so), and a known seat opens at its real size."""
        sessions = self.reach_seats()
        verb = "peek" if peek else "attach"
        if sessions is None:
            self.notify_line(f"{verb}: no mesh connection to attach through")
            return False
        fold = self.managed_fold()
        if fold is not None and fold.rounds and not any(s.name == name for s in fold.seats()):
            n = len(fold.managers)
            why = f"{n} manager{'s' if n != 1 else ''} asked" if n else "no manager serves this space"
            self.notify_line(f"{verb}: {name} is not hosted by any manager ({why})")
            return False
        from cotal_tui.screens.attach import AttachScreen

        self.push_screen(AttachScreen(sessions, name, peek=peek, instance_id=instance_id,
                                      hold_escape=self.hold_escape))
        return True

    def open_tile(self, names: list[str] | None = None,
                  managed_names: Iterable[str] | None = None) -> bool:
        """Push a tile of ``names`` (seat names or ids), or of every managed seat once a manager's
        ``ps`` answered (before that, every working agent), up to the cap, saying how many were
        left out past it; seats are bound to roster peers by id. A name two seats share is
        refused with their ids.
        ``managed_names`` is not read: the ``ps`` fold is the source of truth."""
        sessions = self.reach_seats()
        if sessions is None:
            self.notify_line("tile: no mesh connection to attach through")
            return False
        from cotal_tui.screens.tile import MAX_PANES, TileScreen, every_seat, tile_targets

        screen = self.console_screen()
        snap = screen.snap if screen is not None else None
        fold = self.managed_fold()
        peers, labels = (snap.agents, snap.labels) if snap is not None else ((), NO_LABELS)
        left = 0
        if names:
            targets, why = tile_targets(peers, fold, labels, names)
        else:
            (targets, left), why = every_seat(peers, fold, labels), None
        if why is not None:
            self.notify_line(why, True)
            return False
        if not targets:
            self.notify_line("tile: no managed seats to show" if fold is not None and fold.rounds
                             else "tile: no working agents to show")
            return False
        self.push_screen(TileScreen(sessions, targets, hold_escape=self.hold_escape))
        if left:
            self.notify_line(f"tile: {len(targets)} seats shown, {left} left out past the cap of "
                             f"{MAX_PANES} (name them: :tile a b …)")
        return True
