"""The console App: a space picker or one space's console, the ``:`` palette, the keymap.

The App never touches NATS itself. It is handed a *session* (anything with a ``model`` — a
``meshview.model.MeshModel`` — and ``async stop()``), or an ``open_space`` coroutine that
makes one, plus an optional ``list_spaces`` coroutine for the admin overview. Tests hand it
a model filled with fixed data; ``cotal_tui.console`` hands it the real observer.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

OpenSpace = Callable[[str], Any]
ListSpaces = Callable[[], Awaitable[list]]


class MeshCommands(Provider):
    """``:`` palette: navigation verbs, ``#channel`` tabs, ``@agent`` cards, ``attach``."""

    def _commands(self) -> list[tuple[str, str, Callable[[], Any]]]:
        from cotal_tui.screens.console import ConsoleScreen

        app = self.app
        screen = next((s for s in reversed(app.screen_stack) if isinstance(s, ConsoleScreen)),
                      None)
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
            ]
            snap = screen.snap
            if snap is not None:
                for p in snap.agents:
                    cmds.append((f"attach {p.name}", f"open {p.name}'s terminal",
                                 lambda: app.notify_line("attach: coming with the attach pane")))
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

    async def discover(self) -> Hits:
        for name, help_, cb in self._commands():
            if name.startswith(("#", "@", "attach ")):
                continue
            yield DiscoveryHit(name, cb, help=help_)

    async def search(self, query: str) -> Hits:
        q = query.strip()
        if q == "attach" or q.startswith("attach "):
            pass
        matcher = self.matcher(q)
        for name, help_, cb in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), cb, help=help_)
        if q.startswith("attach"):
            yield Hit(0.01, "attach", lambda: self.app.notify_line(
                "attach: coming with the attach pane"), help="reserved")


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
