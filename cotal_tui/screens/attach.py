"""The embedded attach: one seat's terminal full-screen in the console, interactive or a
read-only peek. The session behind the pane is a :class:`~cotal_tui.seats.PaneLink`; how the
console opens this screen (roster ``a``/``p``, ``:attach <name>``) is the App's navigation.

Attached, the seat is fitted to the pane (``PaneLink.fit``, the one path tile's ``f`` takes:
the attach ``resize`` frame) and gets its size back on detach, as raw ``cotal attach`` does.
Not when someone else is on the seat (the session ledger names another viewer: their screen
would change under them) nor when fitting is off (``[attach] fit = false``; ``f`` in a peek,
the detach key then ``f`` attached, toggles it): then a seat larger than the pane is cropped,
and the title says ``cropped 120×32 → 78×20``.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Callable

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static

from attach.terminal.detach import DetachKeys, key_label
from meshview.errors import swallowed, swallowing
from meshview.wire import sanitize
from cotal_tui.seats import PaneLink, SeatSessions, console_detach_keys
from widgets.terminal_pane import TerminalPane


class AttachScreen(Screen[None]):
    """One seat full-screen. Interactive: every key goes to the program except the detach keys
    (Ctrl-] alone unless ``COTAL_DETACH_KEY`` / ``[attach] detach_keys`` say otherwise).
    ``peek=True``: read-only; ``a`` promotes. ``fit``: fit the seat to the pane when attached
    (None: ``[attach] fit``). ``hold_escape`` runs as it closes (the console's: a following Esc
    is not the console's)."""

    CSS_PATH = str(Path(__file__).with_name("attach.tcss"))
    BINDINGS = [
        Binding("escape", "leave", "back", id="attach.back"),
        Binding("a", "promote", "attach (interactive)", id="attach.promote"),
        Binding("f", "fit", "fit the seat to the pane on attach (toggle)", id="attach.fit"),
    ]
    REFIT_S = 0.2  # a fitted seat follows the pane once the terminal stops resizing this long

    def __init__(self, sessions: SeatSessions, name: str, *, peek: bool = False,
                 instance_id: str | None = None, detach: DetachKeys | None = None,
                 size: tuple[int, int] | None = None, fit: bool | None = None,
                 hold_escape: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.hold_escape = hold_escape
        self.sessions = sessions
        self.seat = name
        self.peek = peek
        self.instance_id = instance_id
        self.detach = console_detach_keys() if detach is None else detach
        if fit is None:
            from cotal_tui.config import attach_fit

            fit = attach_fit()[0]
        self.fit_on = fit  # fit the seat to the pane while attached (``f`` toggles)
        self.shared = False  # another viewer is on the seat (the session ledger says so)
        self._viewers_read = asyncio.Event()  # the ledger was looked at once (or could not be)
        self._opened = asyncio.Event()  # the link said it is open (wakes the viewers watch)
        self._refit: Timer | None = None
        cols, rows = size or sessions.sizes.get(name) or sessions.default_size
        self.pane = TerminalPane(cols, rows, interactive=not peek, detach=self.detach,
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
            self._viewers_read.set()
            return
        try:
            while not self._leaving:
                s = self.link.session
                mine = [s.caller.principal] if s is not None else []
                if s is not None and s.is_open:
                    seen = await read_viewers(nc, self.sessions.space, self.seat, mine=mine)
                    # only when someone else is here: alone, the title stays as it was
                    self.shared = any(not v.you for v in seen)
                    self.set_viewers(viewers_label(seen) if self.shared else "")
                    if not self._viewers_read.is_set():
                        self._viewers_read.set()
                        self._apply_fit()
                    await asyncio.sleep(self.VIEWERS_S)
                else:  # not open yet: look as soon as it is (the first fit waits on this look)
                    self._opened.clear()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._opened.wait(), self.VIEWERS_S)
        finally:
            with swallowing("cotal_tui.screens.attach:AttachScreen._watch_viewers"):
                await nc.close()

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="attach-title", markup=False)
        yield self.pane
        yield Static("", id="attach-status", markup=False)

    @property
    def cropped(self) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """The seat's size and what of it is in view, when the seat is larger than the pane."""
        w, h = self.pane.size
        cols, rows = self.pane.remote_size
        if w <= 0 or h <= 0 or (w >= cols and h >= rows):
            return None
        return (cols, rows), (min(w, cols), min(h, rows))

    def _title(self) -> str:
        cols, rows = self.pane.remote_size
        label = self.detach.label
        key = self.detach.key
        prefix = f" · {key_label(key)} [ copy mode" if key is not None else ""
        if self.pane.copy is not None:
            how = "copy mode · q back to live"
        elif self.pane.interactive:
            how = f"attached · {label} detaches{prefix}"
        elif self.link.state == "ended":
            how = "ended · PgUp scroll back · esc back"
        else:
            how = "peek · read-only · PgUp scroll back · a attach · esc back"
        who = f" · {sanitize.inline(self.viewers, 120)}" if self.viewers else ""
        crop = self.cropped
        size = (f"cropped {crop[0][0]}×{crop[0][1]} → {crop[1][0]}×{crop[1][1]}" if crop
                else f"fitted {cols}×{rows}" if self.link.fitted_from is not None else f"{cols}×{rows}")
        return f" {self.seat} · {size} · {how}{who}"

    def on_mount(self) -> None:
        self.pane.focus()
        self.start_session()

    def start_session(self) -> None:
        self.link.start()
        self._watch_viewers()

    # -- fit-to-pane ------------------------------------------------------------------

    @property
    def wants_fit(self) -> bool:
        """Attached, fitting on, and nobody else on the seat."""
        return self.pane.interactive and self.fit_on and not self.shared and not self._leaving

    def _apply_fit(self) -> None:
        """Bring the seat to what :attr:`wants_fit` says, in a worker (the link orders the
        frames; ``PaneLink.fit`` is tile's ``f`` path): fitted to the pane, or its own size back
        when fitting was turned off. Waits for the first look at the ledger (a shared seat is
        never fitted) and for an open session."""
        self._update_title()
        if self._leaving or not self._viewers_read.is_set():
            return
        w, h = self.pane.size
        if self.wants_fit and self.link.can_resize and w > 0 and h > 0 and (
                self.link.fitted_from is None or (w, h) != self.pane.remote_size):
            self.run_worker(self._fit(w, h), name="attach-fit", group="attach-fit",
                            exit_on_error=False)
        elif not self.fit_on and self.link.fitted_from is not None:
            self.run_worker(self._unfit(), name="attach-fit", group="attach-fit",
                            exit_on_error=False)

    async def _fit(self, cols: int, rows: int) -> None:
        await self.link.fit(cols, rows)
        self._update_title()

    async def _unfit(self) -> None:
        await self.link.unfit()
        self._update_title()

    def action_fit(self) -> None:
        """Toggle fitting: on fits the seat (when attached and alone on it), off gives it back."""
        self.fit_on = not self.fit_on
        self._status(f"fit {'on' if self.fit_on else 'off'}"
                     + (" · someone else is on this seat: not resized" if self.fit_on and self.shared
                        else ""))
        self._apply_fit()

    @on(TerminalPane.FitToggle)
    def _on_fit_toggle(self, event: TerminalPane.FitToggle) -> None:
        event.stop()
        self.action_fit()

    def on_resize(self, event: events.Resize) -> None:
        """The terminal changed size: the title follows now, a fitted seat once it settles."""
        self._update_title()
        if self._refit is not None:
            self._refit.stop()
        self._refit = self.set_timer(self.REFIT_S, self._apply_fit)

    def _update_title(self) -> None:
        try:
            self.query_one("#attach-title", Static).update(self._title())
        except Exception:  # noqa: BLE001 - not composed yet, or already gone [counted: COTAL_LOG]
            swallowed("cotal_tui.screens.attach:AttachScreen._update_title")

    def _status(self, text: str) -> None:
        if self.link.state == "open":
            self._opened.set()
        if self.link.state == "open" and self.link.fitted_from is None and self.wants_fit:
            self._apply_fit()  # the session just opened (or came back): fit it
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
        if self._refit is not None:
            self._refit.stop()
        await self.link.close()  # a fitted seat gets its size back first
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
            self._apply_fit()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "promote":
            return not self.pane.interactive and self.link.state in ("open", "reconnecting")
        return True

    async def on_unmount(self) -> None:
        if not self.link.closing:
            await self.link.close()
