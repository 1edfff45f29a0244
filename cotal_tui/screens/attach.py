"""The embedded attach: one seat's terminal in the console, interactive or a read-only peek.

:class:`SeatSessions` is how the console reaches seats (a space and a factory for fresh bare
connections, the same shape ``cotal attach`` uses). :class:`PaneLink` ties one
:class:`~widgets.terminal_pane.TerminalPane` to one :class:`~attach.client.AttachSession`: output is
fed to the pane as it arrives (awaited, so credit returns at the rate we parse), keystrokes leave
in order through one sender task, notices and end reasons land in a status line in the CLI's
words, and closing hands the session back (``close`` on its rail, flushed).

A peek is the same session with the pane read-only: it sends ``ready`` to get the screen and
nothing else — no keystroke, no resize.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from attach.client import AttachError, AttachSession, Notice, end_text, locate
from attach.endpoint import EndpointClient, EndpointError
from widgets.terminal_pane import DEFAULT_DETACH, TerminalPane

DEFAULT_SIZE = (120, 32)  # the reference manager's pty size, used when a row carries none
CLOSE_WAIT_S = 3.0
FEED_SLICE = 8192  # a big frame is parsed in slices so keystrokes interleave (≈10 ms of pyte each)
Connect = Callable[[], Awaitable[Any]]


def detach_byte_from_env() -> int:
    """``COTAL_DETACH_KEY`` as the CLI reads it; a bad value falls back to Ctrl-]."""
    from attach.passthrough import DetachKeyError, parse_detach_key

    try:
        return parse_detach_key(os.environ.get("COTAL_DETACH_KEY"))
    except DetachKeyError:
        return DEFAULT_DETACH


def size_hint(row: dict | None) -> tuple[int, int] | None:
    """The remote pty size when the manager's row records it (``cols``/``rows``)."""
    if not isinstance(row, dict):
        return None
    c, r = row.get("cols"), row.get("rows")
    if isinstance(c, int) and isinstance(r, int) and 0 < c <= 1000 and 0 < r <= 1000:
        return c, r
    return None


class SeatSessions:
    """A space's seats: attach sessions on fresh connections, and ``inspect`` lookups."""

    def __init__(self, space: str, connect: Connect, *, default_size: tuple[int, int] = DEFAULT_SIZE,
                 sizes: dict[str, tuple[int, int]] | None = None) -> None:
        self.space = space
        self.connect = connect
        self.default_size = default_size
        self.sizes = dict(sizes or {})  # name → remote size learnt elsewhere (e.g. a ps poll)

    @classmethod
    def for_server(cls, space: str, server: str, **kw) -> "SeatSessions":
        from cotal_tui.cmd_attach import connect

        return cls(space, lambda: connect(server), **kw)

    def session(self, name: str, *, on_output, on_notice, instance_id: str | None = None) -> AttachSession:
        return AttachSession(self.space, name, connect=self.connect, on_output=on_output,
                             on_notice=on_notice, instance_id=instance_id)

    async def locate(self, name: str) -> tuple[dict | None, str | None]:
        """The seat's row and hosting instance (``None`` when it could not be looked up)."""
        try:
            nc = await self.connect()
        except Exception:
            return None, None
        try:
            loc = await locate(EndpointClient(nc, self.space), name)
            return loc.row, loc.instance_id
        except (EndpointError, AttachError, Exception):
            return None, None
        finally:
            with contextlib.suppress(Exception):
                await nc.close()

    def size_for(self, name: str, row: dict | None) -> tuple[int, int]:
        return size_hint(row) or self.sizes.get(name) or self.default_size


class PaneLink:
    """One pane's session: open, stream, send keys in order, show status, close cleanly."""

    def __init__(self, sessions: SeatSessions, name: str, pane: TerminalPane, *,
                 on_status: Callable[[str], None], instance_id: str | None = None) -> None:
        self.sessions = sessions
        self.name = name
        self.pane = pane
        self.on_status = on_status
        self.instance_id = instance_id
        self.session: AttachSession | None = None
        self.state = "opening"  # opening | open | reconnecting | ended
        self.end_reason: str | None = None
        self.status = ""
        self.keys_sent = 0
        self._link = None
        self._closing = False
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._sender: asyncio.Task | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name=f"pane-link-{self.name}")
        self._sender = loop.create_task(self._send_loop(), name=f"pane-keys-{self.name}")

    def _set_status(self, text: str) -> None:
        self.status = text
        self.on_status(text)

    async def _run(self) -> None:
        self._set_status(f"[cotal: attaching to {self.name}]")
        row, iid = await self.sessions.locate(self.name)
        if self._closing:
            return
        size = self.sessions.size_for(self.name, row)
        if size != self.pane.remote_size:
            self.pane.reset(*size)
        self.session = s = self.sessions.session(
            self.name, on_output=self._output, on_notice=self._notice, instance_id=self.instance_id or iid)
        try:
            await s.open()
        except AttachError as e:
            self._ended(e.code, f"[cotal: {e.message}]" if e.code != "not-found" else None)
            return
        if self._closing:
            await s.close()
        else:
            self.state = "open"
            self._set_status("")
        reason = await s.run()
        self._ended(reason)

    def _ended(self, reason: str, text: str | None = None) -> None:
        self.state = "ended"
        self.end_reason = reason
        self.pane.interactive = False
        self._set_status(text or end_text(reason, self.name))

    async def _output(self, data: bytes) -> None:
        link = self.session.link if self.session is not None else None
        if link is not self._link:  # a fresh session repaints from its snapshot into a clean mirror
            if self._link is not None:
                self.pane.reset()
            self._link = link
        if len(data) <= FEED_SLICE:
            self.pane.feed(data)
            return
        for i in range(0, len(data), FEED_SLICE):  # awaited: credit returns only once all is parsed
            self.pane.feed(data[i:i + FEED_SLICE])
            await asyncio.sleep(0)

    def _notice(self, n: Notice) -> None:
        if n.kind == "reconnecting":
            self.state = "reconnecting"
        elif n.kind == "reconnected":
            self.state = "open"
        self._set_status(n.text)

    def send(self, data: bytes) -> None:
        """Queue keystrokes for the remote; never for a read-only pane."""
        if self.pane.interactive and not self._closing:
            self._queue.put_nowait(data)

    async def _send_loop(self) -> None:
        while True:
            data = await self._queue.get()
            s = self.session
            if s is not None and await s.send_keys(data):
                self.keys_sent += len(data)

    async def close(self) -> None:
        """Hand the session back and wait (bounded) for it to finish."""
        if self._closing:
            return
        self._closing = True
        self.pane.interactive = False
        if self.session is not None:
            with contextlib.suppress(Exception):
                await self.session.close()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_WAIT_S)
            except (asyncio.TimeoutError, Exception):
                self._task.cancel()
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(BaseException):
                await self._sender


class AttachScreen(Screen[None]):
    """One seat full-screen. Interactive: every key goes to the program except the detach key
    (Ctrl-] or ``COTAL_DETACH_KEY``) and Esc Esc. ``peek=True``: read-only; ``a`` promotes."""

    CSS_PATH = str(Path(__file__).with_name("attach.tcss"))
    BINDINGS = [
        Binding("escape", "leave", "back", id="attach.back"),
        Binding("a", "promote", "attach (interactive)", id="attach.promote"),
    ]

    def __init__(self, sessions: SeatSessions, name: str, *, peek: bool = False,
                 instance_id: str | None = None, detach_byte: int | None = None,
                 size: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.sessions = sessions
        self.seat = name
        self.peek = peek
        self.instance_id = instance_id
        self.detach_byte = detach_byte_from_env() if detach_byte is None else detach_byte
        cols, rows = size or sessions.sizes.get(name) or sessions.default_size
        self.pane = TerminalPane(cols, rows, interactive=not peek, detach_byte=self.detach_byte,
                                 id="attach-pane")
        self.link = PaneLink(sessions, name, self.pane, on_status=self._status, instance_id=instance_id)
        if size is not None:
            sessions.sizes.setdefault(name, size)
        self._leaving = False

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="attach-title", markup=False)
        yield self.pane
        yield Static("", id="attach-status", markup=False)

    def _title(self) -> str:
        cols, rows = self.pane.remote_size
        key = _key_name(self.detach_byte)
        if self.pane.interactive:
            how = f"attached · {key} or Esc Esc detaches"
        elif self.link.state == "ended":
            how = "ended · esc back"
        else:
            how = "peek · read-only · a attach · esc back"
        return f" {self.seat} · {cols}×{rows} · {how}"

    def on_mount(self) -> None:
        self.pane.focus()
        self.start_session()

    def start_session(self) -> None:
        self.link.start()

    def _status(self, text: str) -> None:
        try:
            self.query_one("#attach-status", Static).update(text)
            self.query_one("#attach-title", Static).update(self._title())
        except Exception:  # not composed yet, or already gone
            pass

    @on(TerminalPane.Send)
    def _on_pane_send(self, event: TerminalPane.Send) -> None:
        event.stop()
        self.link.send(event.data)

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
            hold_escape(self.app)  # after the hand-back: Escs queued meanwhile land in the window
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
        if not self.link._closing:
            await self.link.close()


def _key_name(byte: int) -> str:
    if byte == 0:
        return "Ctrl-@"
    if 1 <= byte <= 26:
        return f"Ctrl-{chr(ord('a') + byte - 1)}"
    return f"Ctrl-{chr(byte | 0x40)}"


# ---- entry points for the console (roster ``a``/``p``, ``:attach <name>``) -----------------------

def console_screen(app):
    """The topmost space console on the stack, if any."""
    from cotal_tui.screens.console import ConsoleScreen

    return next((s for s in reversed(app.screen_stack) if isinstance(s, ConsoleScreen)), None)


def hold_escape(app) -> None:
    """Leaving a terminal with Esc (or Esc Esc): the console ignores an Esc that follows within
    the double-Esc window, so a habitual second Esc does not also close the rail or the lens."""
    from widgets.terminal_pane import ESC_DOUBLE_S

    screen = console_screen(app)
    if screen is not None:
        screen.escape_grace_until = time.monotonic() + ESC_DOUBLE_S


_SESSIONS: "dict[int, tuple[object, SeatSessions]]" = {}


def seat_sessions_for(app) -> SeatSessions | None:
    """How this app reaches seats: ``app.seat_sessions`` when the app sets one, else the open
    console's session's own (``LiveSession.seat_sessions``: its target, creds included), else
    derived from the observer connection's URL (open meshes only)."""
    given = getattr(app, "seat_sessions", None)
    if isinstance(given, SeatSessions):
        return given
    screen = console_screen(app)
    session = getattr(screen, "session", None)
    given = getattr(session, "seat_sessions", None)
    if isinstance(given, SeatSessions):
        return given
    observer = getattr(session, "observer", None)
    nc = getattr(observer, "nc", None)
    space = getattr(session, "space", None) or getattr(getattr(session, "model", None), "space", None)
    if nc is None or space is None or getattr(nc, "connected_url", None) is None:
        return None
    key = id(session)
    hit = _SESSIONS.get(key)
    if hit is not None and hit[0] is session:
        return hit[1]
    url = nc.connected_url.geturl()
    sessions = SeatSessions.for_server(space, url)
    _SESSIONS.clear()
    _SESSIONS[key] = (session, sessions)
    return sessions


def managed_fold(app):
    """The open console's ``ps`` fold (``None`` when the session polls no managers)."""
    session = getattr(console_screen(app), "session", None)
    return getattr(getattr(session, "managed", None), "fold", None)


def learn_sizes(sessions: SeatSessions, fold) -> None:
    """Seed the panes' sizes from the ``ps`` rows (``cols``/``rows``), so a pane opens at the
    seat's real size rather than resizing when the seat's own ``inspect`` row arrives."""
    for s in fold.seats() if fold is not None else ():
        if s.cols and s.rows and not s.silent:
            sessions.sizes[s.name] = (s.cols, s.rows)


def open_seat(app, name: str, *, peek: bool = False) -> bool:
    """Push the attach (or peek) screen for ``name``; False (with a notice) when it cannot.

    When the console's ``ps`` poll has answered, a name no manager hosts is refused here with a
    notice (not a screen that opens only to say so), and a known seat opens at its real size."""
    sessions = seat_sessions_for(app)
    say = getattr(app, "notify_line", None) or app.notify
    verb = "peek" if peek else "attach"
    if sessions is None:
        say(f"{verb}: no mesh connection to attach through")
        return False
    fold = managed_fold(app)
    if fold is not None and fold.rounds and not any(s.name == name for s in fold.seats()):
        n = len(fold.managers)
        why = f"{n} manager{'s' if n != 1 else ''} asked" if n else "no manager serves this space"
        say(f"{verb}: {name} is not hosted by any manager ({why})")
        return False
    learn_sizes(sessions, fold)
    app.push_screen(AttachScreen(sessions, name, peek=peek))
    return True
