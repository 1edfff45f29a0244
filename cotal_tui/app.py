"""The console App: a space picker or one space's console, the ``:`` palette, the keymap.

The App never touches NATS itself. It is handed a *session* (anything with a ``model`` — a
``meshview.model.MeshModel`` — and ``async stop()``), or an ``open_space`` coroutine that
makes one, plus an optional ``list_spaces`` coroutine for the admin overview. Tests hand it
a model filled with fixed data; ``cotal_tui.run_console`` hands it the real observer.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

OpenSpace = Callable[[str], Any]
ListSpaces = Callable[[], Awaitable[list]]


SEAT_VERBS = ("attach", "peek", "tile")


class MeshCommands(Provider):
    """``:`` palette: navigation verbs, ``#channel`` tabs, ``@agent`` cards, and the seat verbs
    ``attach <name>``, ``peek <name>``, ``tile`` and ``tile <name> <name>…``."""

    def _console(self):
        from cotal_tui.screens.console import ConsoleScreen

        return next((s for s in reversed(self.app.screen_stack) if isinstance(s, ConsoleScreen)),
                    None)

    def _seat_names(self, screen) -> tuple[list[str], bool]:
        """(names the seat verbs offer, whether a manager's ``ps`` answered for them).

        Once the console's ``ps`` poll answered, the managed seats; before (or without a poll),
        every agent on the roster."""
        fold = getattr(screen, "managed", None)
        if fold is not None and fold.rounds:
            return sorted({s.name for s in fold.seats()}), True
        snap = getattr(screen, "snap", None)
        return [p.name for p in (snap.agents if snap is not None else ())], False

    def _commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        from cotal_tui.screens.attach import open_seat

        app = self.app
        screen = self._console()
        cmds: list[tuple[str, str, Callable[[], Any]]] = [
            ("help", "show the keys of the focused panel", lambda: screen and screen.action_help()),
            ("quit", "leave the console", lambda: app.exit(0)),
        ]
        if screen is not None:
            cmds[:0] = [
                ("dms", "DM lens: per-peer roll-up and threads",
                 lambda: screen.action_lens("dms")),
                ("topo", "topology lens: sequence, matrix, ring map",
                 lambda: screen.action_lens("topo")),
                ("needs-you", "agents blocked on input or approval", screen.action_needs_you),
                ("search", "filter the feed", screen.action_search),
                ("lifecycle", "show or hide lifecycle rows in the feed",
                 lambda: screen.query_one("#feed").action_toggle_lifecycle()),
                ("tile", "live terminals of the working agents, read-only until promoted",
                 lambda: self._tile(None)),
            ]
            names, _ = self._seat_names(screen)
            for n in names:
                cmds.append((f"attach {n}", f"open {n}'s terminal",
                             lambda n=n: open_seat(app, n)))
                cmds.append((f"peek {n}", f"watch {n}'s terminal, read-only",
                             lambda n=n: open_seat(app, n, peek=True)))
            snap = screen.snap
            if snap is not None:
                for c in snap.channels:
                    cmds.append((f"#{c.name}", "switch to this channel tab",
                                 lambda n=c.name: screen.query_one("#tabs").select(n)))
                for p in snap.peers:
                    cmds.append((f"@{p.name}", f"{p.role or p.kind} · agent card",
                                 lambda i=p.id: screen.open_agent(i)))
        if getattr(app, "list_spaces", None) is not None:
            cmds.append(("spaces", "the spaces overview", app.back_to_spaces))
        else:
            cmds.append(("spaces", "the spaces overview (not available: opened on one space)",
                         lambda: app.notify_line("no spaces overview: opened on one space")))
        return cmds

    def _tile(self, names: list[str] | None) -> None:
        from cotal_tui.screens.tile import open_tile

        screen = self._console()
        known, managed = self._seat_names(screen)
        if names:
            unknown = [n for n in names if n not in known]
            if unknown:
                self.app.notify_line(f"tile: no {'managed seat' if managed else 'agent'} named "
                                     + ", ".join(unknown), True)
                return
        open_tile(self.app, names, known if managed and not names else None)

    def _typed(self, q: str) -> Hit | None:
        """A seat verb typed out in full (``attach zed``, ``tile a b``): one exact hit, or a hit
        that says why it cannot run. Never a traceback."""
        verb, _, rest = q.partition(" ")
        args = rest.split()
        if verb not in SEAT_VERBS or (verb != "tile" and not args):
            return None
        app = self.app
        screen = self._console()
        if screen is None:
            return Hit(0.5, q, lambda: app.notify_line(f"{verb}: open a space first", True),
                       help="needs a space console")
        if verb == "tile":
            return Hit(1.0, q, lambda: self._tile(args or None),
                       help=f"tile {len(args)} seat{'s' if len(args) != 1 else ''}"
                       if args else "tile the working agents")
        name = " ".join(args)
        known, managed = self._seat_names(screen)
        if any(n.startswith(name) for n in known):
            return None  # the listed commands match it (a name typed in part, or whole)
        what = "managed seat" if managed else "agent"
        return Hit(0.5, q, lambda: app.notify_line(f"{verb}: no {what} named {name}", True),
                   help=f"no {what} by that name")

    async def discover(self) -> Hits:
        for name, help_, cb in self._commands():
            if name.startswith(("#", "@", "attach ", "peek ")):
                continue
            yield DiscoveryHit(name, cb, help=help_)

    async def search(self, query: str) -> Hits:
        q = " ".join(query.split())
        typed = self._typed(q)
        if typed is not None:
            yield typed
            if q.startswith("tile"):
                return
        matcher = self.matcher(q)
        for name, help_, cb in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), cb, help=help_)


class CotalApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "cotal console"
    COMMANDS = {MeshCommands}
    COMMAND_PALETTE_BINDING = "ctrl+p"
    BINDINGS = [
        Binding("ctrl+c", "quit", "quit", show=False, priority=True, id="app.quit"),
        Binding("ctrl+q", "quit", "quit", show=False, priority=True, id="app.quit-alt"),
    ]

    def __init__(
        self,
        *,
        session: Any = None,
        open_space: OpenSpace | None = None,
        list_spaces: ListSpaces | None = None,
        keymap: dict[str, str] | None = None,
        notice: str | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.open_space = open_space
        self.list_spaces = list_spaces
        self._user_keymap = keymap or {}
        self._first_notice = notice
        self.sessions: list[Any] = []  # every session this app opened (closed on exit)

    def on_mount(self) -> None:
        if self._user_keymap:
            self.set_keymap(self._user_keymap)
        if self.session is not None:
            from cotal_tui.screens.console import ConsoleScreen

            self.push_screen(ConsoleScreen(self.session, can_go_back=False))
        elif self.list_spaces is not None:
            from cotal_tui.screens.spaces import SpacePickerScreen

            self.push_screen(SpacePickerScreen())
        if self._first_notice:
            self.call_after_refresh(self.notify_line, self._first_notice, True)

    # -- notices -------------------------------------------------------------------------

    def notify_line(self, text: str, error: bool = False) -> None:
        """A one-line notice on the status bar (cleared after 3 s); a toast elsewhere."""
        from widgets.status_bar import StatusBar

        for screen in reversed(self.screen_stack):
            bars = screen.query(StatusBar)
            if bars:
                bars.first().show_notice(text, error=error)
                return
        self.notify(text, severity="error" if error else "information")

    # -- spaces --------------------------------------------------------------------------

    def open_space_named(self, space: str) -> None:
        self._open_space(space)

    def _open_space(self, space: str) -> None:
        from cotal_tui.screens.console import ConsoleScreen

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
    async def start_session(self, session: Any) -> None:
        """Start a session's observer (connect-time reads, prefill) off the UI path."""
        start = getattr(session, "start", None)
        if start is None:
            return
        try:
            await start()
        except Exception as e:  # noqa: BLE001 - one line, never a traceback
            model = getattr(session, "model", None)
            if model is not None:
                model.set_connection(model.status.connection, error=f"observer: {e}")
            self.notify_line(f"observer failed: {e}", error=True)

    def back_to_spaces(self) -> None:
        from cotal_tui.screens.console import ConsoleScreen
        from cotal_tui.screens.spaces import SpacePickerScreen

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
        if not isinstance(self.screen, SpacePickerScreen):
            self.push_screen(SpacePickerScreen())
        else:
            self.screen.refresh_spaces()  # type: ignore[attr-defined]

    @work(group="close-session", exit_on_error=False)
    async def _close_session(self, session: Any) -> None:
        if session in self.sessions:
            self.sessions.remove(session)
        stop = getattr(session, "stop", None)
        if stop is not None:
            await stop()

    async def action_quit(self) -> None:
        self.exit(0)
