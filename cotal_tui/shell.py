"""The console shell: the App as its screens, the palette, recording and alerts may call it.

Screens never import the App (``cotal_tui/app.py`` imports them); they reach it through
:class:`ShellScreen.shell`, typed as :class:`ConsoleShell`. ``CotalApp`` and ``ReplayApp`` keep
the contract by shape (a Textual App cannot also inherit a Protocol: their metaclasses differ).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable, Iterable, Protocol, cast, runtime_checkable

from textual.screen import Screen

if TYPE_CHECKING:
    from attach.control.managed import ManagedFold
    from cotal_tui.screens.console import ConsoleScreen
    from cotal_tui.screens.control import Controls
    from cotal_tui.screens.runs import RunsDesk
    from cotal_tui.seats import SeatSessions
    from cotal_tui.session import ConsoleSession

ListSpaces = Callable[[], Awaitable[list]]


@runtime_checkable
class LinkedLister(Protocol):
    """A ``list_spaces`` that also says how its connection is (``run_console.SpaceLister``);
    a bare coroutine function lists too, and the overview then shows what the listing proved."""

    server: str

    def link(self) -> str: ...

    def __call__(self) -> Awaitable[list]: ...


@runtime_checkable
class ConsoleShell(Protocol):
    """What the console's screens call on the App."""

    @property
    def is_running(self) -> bool: ...

    @property
    def exiting(self) -> bool: ...  # closing: keys dropped, palette commands and ticks idle

    @property
    def list_spaces(self) -> ListSpaces | None: ...  # the admin overview's lister (None: one space)

    @property
    def controls(self) -> Controls: ...  # the control verbs (screens/control.py)

    def notify_line(self, text: str, error: bool = False, *, sticky: bool = False,
                    seconds: float | None = None) -> None: ...

    def write_to_terminal(self, data: str) -> None: ...  # an escape between frames (alerts)

    @property
    def key_at(self) -> float: ...  # monotonic time of the operator's last key

    @property
    def runs(self) -> RunsDesk: ...  # the workflow runs: a poller per session, the answer call

    def console_screen(self) -> ConsoleScreen | None: ...

    def start_session(self, session: ConsoleSession) -> object: ...  # if not started; then its runs poll

    def open_space_named(self, space: str) -> None: ...

    def back_to_spaces(self) -> None: ...

    def managed_fold(self) -> ManagedFold | None: ...

    def reach_seats(self) -> SeatSessions | None: ...

    def open_seat(self, name: str, *, peek: bool = False, instance_id: str | None = None) -> bool: ...

    def open_runs(self) -> bool: ...  # the runs lens over the open console

    def open_tile(self, names: list[str] | None = None,
                  managed_names: Iterable[str] | None = None) -> bool: ...


class ShellScreen(Screen[None]):
    """A screen of the console: :attr:`shell` is the App it runs in, as a :class:`ConsoleShell`."""

    @property
    def shell(self) -> ConsoleShell:
        return shell_of(self.app)


# App classes that kept the contract once: a runtime Protocol check walks every member (~0.1 ms
# each time), and the console's drain timer asks for the shell 30 times a second
_SHELL_TYPES: set[type] = set()


def shell_of(app: object) -> ConsoleShell:
    """``app`` as the console shell; a screen pushed on another App says so in one sentence."""
    if type(app) in _SHELL_TYPES:
        return cast(ConsoleShell, app)  # its class passed the isinstance below
    if not isinstance(app, ConsoleShell):
        raise TypeError(f"this runs in the console App, not {type(app).__name__}")
    _SHELL_TYPES.add(type(app))
    return app
