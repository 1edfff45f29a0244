"""The console's first frame: its shell, painted before the connect and the heavy imports.

``cotal watch`` used to import the whole console (the model, nats-py, every screen: ~250 ms)
and wait for the broker before Textual drew anything. Now the App starts on :class:`BootScreen`
(the console's panels, empty, and a status line ``connecting to <server> … Ns``) as soon as
Textual itself is imported; behind it the App binds the console (:func:`cotal_tui.app.load_console`)
and runs the :class:`Boot`'s steps, which the CLI supplies (read the keymap, connect, check the
space, open the session). Their outcome replaces the boot screen - the space's console or the
spaces overview - or ends the App with one sentence the CLI prints once the terminal is back.

Keys typed while it boots are held, in order, for the console (the App's key gate); Ctrl-C and
Ctrl-Q quit at once. This module imports Textual and nothing of the console's own.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Static

if TYPE_CHECKING:
    from cotal_tui.session import ConsoleSession


@dataclass
class Boot:
    """What a console started behind its first frame has to do, and what came of it.

    ``steps`` (the CLI's) fill ``session`` (one space) or ``lister`` + ``open_space`` (the
    overview), and may set ``keymap`` and ``notice``; or call :meth:`fail`."""

    server: str  # as the operator named it: "connecting to <server> …" ("" until resolved)
    steps: Callable[[Boot, Any], Awaitable[None]]  # (boot, app)
    session: ConsoleSession | None = None
    open_space: Callable[[str], ConsoleSession] | None = None
    lister: Any = None
    keymap: dict[str, str] | None = None
    notice: str | None = None
    error: str | None = None  # the sentence the CLI prints after the terminal is restored
    rc: int = 0
    done: bool = False  # the console (or overview) replaced the boot screen
    doing: str = ""  # past the connect, what the steps do now ("opening space main")
    task: asyncio.Task | None = None  # the steps, running (the CLI ends them on its way out)

    def status(self) -> str:
        """What the boot screen says it waits for."""
        from meshview.wire.sanitize import inline

        where = inline(self.server, 200)
        if self.doing:
            return f"{inline(self.doing, 80)} on {where}"
        return f"connecting to {where}" if where else "connecting"

    async def run(self, app: Any) -> None:
        await self.steps(self, app)

    def fail(self, error: str, rc: int = 1) -> None:
        self.error, self.rc = error, rc


BOOT_TICK_S = 0.5  # the status line's seconds


class BootScreen(Screen):
    """The console's frame with nothing in it yet, and what it waits for."""

    DEFAULT_CSS = """
    BootScreen {
        layout: vertical;
        background: $background;
    }
    BootScreen #boot-tabs {
        height: 1;
        color: $text-muted;
        padding: 0 1;
    }
    BootScreen #boot-body {
        height: 1fr;
    }
    BootScreen .boot-panel {
        height: 1fr;
        border-top: hkey $panel-lighten-1;
        border-title-color: $text-disabled;
        color: $text-muted;
        padding: 0 1;
    }
    BootScreen #boot-roster {
        width: 30%;
        min-width: 24;
        max-width: 34;
    }
    BootScreen #boot-feed {
        width: 1fr;
    }
    BootScreen #boot-status {
        height: 1;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    """

    def __init__(self, boot: Boot) -> None:
        super().__init__()
        self.boot = boot
        self.started = time.monotonic()
        self._status = Static(self._line(), id="boot-status", markup=False)

    def compose(self) -> ComposeResult:
        yield Static("", id="boot-tabs")
        with Horizontal(id="boot-body"):
            roster = Static("", id="boot-roster", classes="boot-panel")
            roster.border_title = "roster"
            yield roster
            feed = Static("", id="boot-feed", classes="boot-panel")
            feed.border_title = "feed"
            yield feed
        yield self._status

    def on_mount(self) -> None:
        self.set_interval(BOOT_TICK_S, self._tick, name="boot")

    def _line(self) -> str:
        secs = time.monotonic() - self.started
        return f"{self.boot.status()} … {secs:.0f}s   ctrl+c quit"

    def _tick(self) -> None:
        self._status.update(self._line())
