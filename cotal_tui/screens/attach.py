"""The embedded attach: one seat's terminal full-screen in the console, interactive or a
read-only peek. The session behind the pane is a :class:`~cotal_tui.seats.PaneLink`; how the
console opens this screen (roster ``a``/``p``, ``:attach <name>``) is the App's navigation.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from attach.terminal.detach import key_label
from meshview.errors import swallowed, swallowing
from meshview.wire import sanitize
from cotal_tui.seats import PaneLink, SeatSessions, detach_byte_from_env
from widgets.terminal_pane import TerminalPane


class AttachScreen(Screen[None]):
    """One seat full-screen. Interactive: every key goes to the program except the detach key
    (Ctrl-] or ``COTAL_DETACH_KEY``) and Esc Esc. ``peek=True``: read-only; ``a`` promotes.
    ``hold_escape`` runs as it closes (the console's: a following Esc is not the console's)."""

    CSS_PATH = str(Path(__file__).with_name("attach.tcss"))
    BINDINGS = [
        Binding("escape", "leave", "back", id="attach.back"),
        Binding("a", "promote", "attach (interactive)", id="attach.promote"),
    ]

    def __init__(self, sessions: SeatSessions, name: str, *, peek: bool = False,
                 instance_id: str | None = None, detach_byte: int | None = None,
                 size: tuple[int, int] | None = None,
                 hold_escape: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.hold_escape = hold_escape
        self.sessions = sessions
        self.seat = name
        self.peek = peek
        self.instance_id = instance_id
        self.detach_byte = detach_byte_from_env() if detach_byte is None else detach_byte
        cols, rows = size or sessions.sizes.get(name) or sessions.default_size
        self.pane = TerminalPane(cols, rows, interactive=not peek, detach_byte=self.detach_byte,
                                 id="attach-pane")
        self.pane.clip_name = name
        self.link = PaneLink(sessions, name, self.pane, on_status=self._status, instance_id=instance_id)
        if size is not None:
            sessions.sizes.setdefault(name, size)
        self._leaving = False
        self.viewers = ""  # ``2 viewers: you, alice (read-only)`` (attach/control/viewers.py), when known

    VIEWERS_S = 3.0  # how often the session ledger is read for who else is here

    def set_viewers(self, label: str) -> None:
        """Who else is on this seat, in the title (``viewers_label``; empty: nobody known)."""
        if label != self.viewers:
            self.viewers = label
            self._status(self.link.status)

    @work(exclusive=True, group="attach-viewers", exit_on_error=False)
    async def _watch_viewers(self) -> None:
        """The session ledger, read every :attr:`VIEWERS_S` on one connection of the screen's
        own (closed with it); nothing readable: the title says nothing about viewers."""
        from attach.control.viewers import read_viewers, viewers_label

        try:
            nc = await self.sessions.connect()
        except Exception:  # noqa: BLE001 - no viewers shown, the pane is unaffected [counted: COTAL_LOG]
            swallowed("cotal_tui.screens.attach:AttachScreen._watch_viewers")
            return
        try:
            while not self._leaving:
                s = self.link.session
                mine = [s.caller.principal] if s is not None else []
                if s is not None and s.is_open:
                    seen = await read_viewers(nc, self.sessions.space, self.seat, mine=mine)
                    # only when someone else is here: alone, the title stays as it was
                    self.set_viewers(viewers_label(seen) if any(not v.you for v in seen) else "")
                await asyncio.sleep(self.VIEWERS_S)
        finally:
            with swallowing("cotal_tui.screens.attach:AttachScreen._watch_viewers"):
                await nc.close()

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="attach-title", markup=False)
        yield self.pane
        yield Static("", id="attach-status", markup=False)

    def _title(self) -> str:
        cols, rows = self.pane.remote_size
        key = key_label(self.detach_byte)
        if self.pane.copy is not None:
            how = "copy mode · q back to live"
        elif self.pane.interactive:
            how = f"attached · {key} or Esc Esc detaches · {key} [ copy mode"
        elif self.link.state == "ended":
            how = "ended · PgUp scroll back · esc back"
        else:
            how = "peek · read-only · PgUp scroll back · a attach · esc back"
        who = f" · {sanitize.inline(self.viewers, 120)}" if self.viewers else ""
        return f" {self.seat} · {cols}×{rows} · {how}{who}"

    def on_mount(self) -> None:
        self.pane.focus()
        self.start_session()

    def start_session(self) -> None:
        self.link.start()
        self._watch_viewers()

    def _status(self, text: str) -> None:
        try:
            self.query_one("#attach-status", Static).update(text)
            self.query_one("#attach-title", Static).update(self._title())
        except Exception:  # noqa: BLE001 - not composed yet, or already gone [counted: COTAL_LOG]
            swallowed("cotal_tui.screens.attach:AttachScreen._status")

    @on(TerminalPane.Yanked)
    def _on_pane_yanked(self, event: TerminalPane.Yanked) -> None:
        event.stop()
        self._status(event.problem or f"yanked to {event.path}" + (" and the clipboard" if event.clipboard else ""))

    @on(TerminalPane.Detach)
    async def _on_pane_detach(self, event: TerminalPane.Detach) -> None:
        event.stop()
        await self.action_leave()

    async def action_leave(self) -> None:
        """Back to the console; the session is handed back, the console's observer never stopped."""
        if self._leaving:
            return
        self._leaving = True
        await self.link.close()
        if self.app.screen is self:
            if self.hold_escape is not None:
                self.hold_escape()  # after the hand-back: Escs queued meanwhile land in the window
            self.app.pop_screen()

    def action_promote(self) -> None:
        if self.link.state in ("open", "reconnecting") and not self.pane.interactive:
            self.pane.interactive = True
            self.peek = False
            self.pane.focus()
            self._status(self.link.status)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "promote":
            return not self.pane.interactive and self.link.state in ("open", "reconnecting")
        return True

    async def on_unmount(self) -> None:
        if not self.link.closing:
            await self.link.close()
