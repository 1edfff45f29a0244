"""The space picker (admin overview of an open mesh): Enter opens, ``r`` refreshes, ``q``
quits; ``b``/Esc inside a space come back here."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from cotal_tui.shell import LinkedLister, ShellScreen
from meshview.errors import swallowed
from meshview.observe.spaces import SpaceInfo
from widgets.line_list import LineList
from widgets.space_list import SpaceList
from widgets.status_bar import StatusBar


STRANDED_CONCURRENCY = 4  # spaces asked for their stuck seats at once


class SpacePickerScreen(ShellScreen):
    CSS_PATH = "spaces.tcss"
    BINDINGS = [
        Binding("r", "refresh_spaces", "refresh", id="spaces.refresh"),
        Binding("q", "quit", "quit", id="spaces.quit"),
        Binding("question_mark", "help", "help", id="spaces.help"),
    ]

    def compose(self) -> ComposeResult:
        yield Static(Text("cotal · spaces on this broker", style="bold"), id="spaces-title")
        lst = SpaceList(id="space-list")
        lst.border_title = "spaces"
        lst.border_subtitle = "enter open · r refresh · q quit"
        yield lst
        yield StatusBar(id="status")

    def on_mount(self) -> None:
        self.query_one(StatusBar).set_hints("enter open  r refresh  ? help  q quit")
        self.query_one(SpaceList).focus()
        self._count = ""
        self.refresh_spaces()
        self.set_interval(1.0, self._show_link, name="link")

    def _show_link(self, state: str | None = None) -> None:
        """The broker link on the status bar: what the lister's connection says when it can
        say (``link()``), else what the last listing proved."""
        lister = self.shell.list_spaces
        server = ""
        if isinstance(lister, LinkedLister):
            state = lister.link()
            server = lister.server or ""
        if state is None:
            return
        self.query_one(StatusBar).set_link(state, server, self._count)

    def refresh_spaces(self) -> None:
        self._load()

    @work(exclusive=True, group="list-spaces", exit_on_error=False)
    async def _load(self) -> None:
        lister = self.shell.list_spaces
        if lister is None:
            return
        lst = self.query_one(SpaceList)
        lst.border_title = "spaces · loading…"
        try:
            spaces = await lister()
        except Exception as e:  # noqa: BLE001 - one line on the status bar
            lst.border_title = "spaces · unreadable"
            self._show_link("closed")
            self.shell.notify_line(f"could not list spaces: {e}", error=True)
            return
        lst.set_spaces(spaces)
        lst.border_title = f"spaces · {len(spaces)}"
        self._count = f"{len(spaces)} space{'s' if len(spaces) != 1 else ''}"
        self._show_link("connected")
        if callable(getattr(lister, "stranded", None)):
            self._load_stranded(spaces)

    @work(exclusive=True, group="stranded", exit_on_error=False)
    async def _load_stranded(self, spaces: list[SpaceInfo]) -> None:
        """Each space's stuck seats (one ``ps`` round each, a few at a time), after the listing:
        the list shows at once, the counts when the managers have answered."""
        lister = self.shell.list_spaces
        sem = asyncio.Semaphore(STRANDED_CONCURRENCY)

        async def one(s: SpaceInfo) -> SpaceInfo:
            async with sem:
                try:
                    n = await lister.stranded(s.space)  # type: ignore[union-attr]
                except Exception:  # noqa: BLE001 - a count that cannot be read is not shown [counted: COTAL_LOG]
                    swallowed("cotal_tui.screens.spaces:stranded")
                    return s
            return replace(s, stranded=n)

        counted = await asyncio.gather(*(one(s) for s in spaces))
        self.query_one(SpaceList).set_spaces(list(counted))

    def action_refresh_spaces(self) -> None:
        self.refresh_spaces()
        self.shell.notify_line("refreshing spaces…")

    def action_quit(self) -> None:
        self.app.exit(0)

    def action_help(self) -> None:
        from cotal_tui.screens.help import HelpScreen, describe_bindings

        self.app.push_screen(HelpScreen(*describe_bindings(self)))

    @on(LineList.Selected, "#space-list")
    def _open(self, event: LineList.Selected) -> None:
        self.shell.open_space_named(str(event.key))
