"""How the console reaches seats, and one pane's live session: the controllers behind the
attach, peek and tile screens.

:class:`SeatSessions` is a space and a factory for fresh bare connections (the same shape
``cotal attach`` uses). :class:`PaneLink` ties one :class:`~widgets.terminal_pane.TerminalPane`
to one :class:`~attach.session.client.AttachSession`, both ways, and is the only thing between
them: it binds itself to the pane (:meth:`~widgets.terminal_pane.TerminalPane.bind_link`), so the
pane hands it keys, paste and focus reports (``send``) and parsed byte counts (``parsed``, the
credit) directly; output, fresh mirrors and resizes go to the pane from it. Keystrokes leave in
order through one sender task, notices and end reasons land in the host's status line
(``on_status``) in the CLI's words, and closing hands the session back (``close`` on its rail,
flushed).

Output is queued to the pane, which parses it within a budget; the session runs on consumer
credit, returned as the pane parses. When output outruns the pane (more queued than it can
parse soon) the link skips ahead, the way the host mirror does, but through the protocol:
queued and arriving output is thrown away *without* credit until the manager's window is full —
the manager then drops what the program writes — and once credit comes back the manager sends
its ``drop`` notice and a repaint, which lands in a fresh mirror. Keys never wait behind
output, and no bytes pile up on either side. A window that does not fill (the program went
quiet mid-skip) ends the skip with an explicit repaint (``ready``).

``SeatSessions.tap`` (``cotal watch --record-seats``, cotal_tui/recording.py) is told of each
pane's output as it is queued, of every fresh mirror (``reset``) and of the end; never of a key.

A peek is the same session with the pane read-only: it sends ``ready`` to get the screen and
nothing else — no keystroke, and no resize unless the user asks for one. Fit-to-pane
(:meth:`PaneLink.fit`) is that ask: the terminal profile's ``resize`` frame (§3.6 allows it on any
session; no driver role exists) sets the seat's pty to the pane, a repaint rebuilds the mirror at
the new size, and :meth:`PaneLink.unfit` — or closing the link — puts the seat back to the size
it had.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from attach.session.client import AttachError, AttachSession, Notice, end_text, locate, user_pin
from attach.control.endpoint import EndpointClient
from meshview.errors import swallowed, swallowing
from meshview.tasks import TaskOwner
from meshview.wire.envelope import EndpointError
from attach.terminal.detach import DEFAULT_KEYS, DetachKeyError, DetachKeys

if TYPE_CHECKING:  # the pane is handed in; importing it (pyte, the mirror) waits for a seat screen
    from widgets.terminal_pane import TerminalPane

# The size a reference manager starts every pty at. Nothing a manager sends says a pty's size
# (no row field, no grant field, no serving-side frame; the snapshot is opaque bytes), so a pane
# knows it only as this, or as the size this console itself set (fit-to-pane).
DEFAULT_SIZE = (120, 32)
CLOSE_WAIT_S = 3.0
SKIP_STATUS = "[cotal: output outran the pane - skipping ahead]"
_owned = TaskOwner("seats")  # repaint requests, held until answered; a failure is logged
SKIP_QUIET_S = 1.0  # skipping, and nothing arrived this long: the window will not fill; repaint
Connect = Callable[[], Awaitable[Any]]


def console_detach_keys() -> DetachKeys:
    """What detaches in the console's panes: ``COTAL_DETACH_KEY``, then ``[attach]
    detach_keys`` (:func:`cotal_tui.config.detach_keys`, the CLI's reading). The console refused
    a bad value at start (``cotal watch`` exits 2); one made bad since is Ctrl-] alone."""
    from cotal_tui.config import detach_keys

    try:
        return detach_keys()[0]
    except DetachKeyError:
        return DEFAULT_KEYS


class SeatSessions:
    """A space's seats: attach sessions on fresh connections, and ``inspect`` lookups."""

    def __init__(self, space: str, connect: Connect, *, default_size: tuple[int, int] = DEFAULT_SIZE,
                 sizes: dict[str, tuple[int, int]] | None = None) -> None:
        self.space = space
        self.connect = connect
        self.default_size = default_size
        self.sizes = dict(sizes or {})  # name → the size this console set the seat's pty to
        # (link, "reset" | "out" | "end", bytes): what the panes show, for a recording; no keys
        self.tap: Callable[[PaneLink, str, bytes], None] | None = None
        # seat name -> when its open session last showed output (monotonic), and how many panes
        # have a session open on it: facts for the stalled verdict (meshview/model/stalled.py)
        self.output_seen: dict[str, float] = {}
        self.open_on: dict[str, int] = {}

    def session(self, name: str, *, on_output, on_notice, instance_id: str | None = None,
                consumer_credit: bool = False) -> AttachSession:
        return AttachSession(self.space, name, connect=self.connect, on_output=on_output,
                             on_notice=on_notice, instance_id=instance_id, consumer_credit=consumer_credit)

    async def locate(self, name: str) -> tuple[dict | None, str | None]:
        """The seat's row and hosting instance (``None`` when it could not be looked up)."""
        try:
            nc = await self.connect()
        except Exception:  # noqa: BLE001 - no broker: the seat is not located [counted: COTAL_LOG]
            swallowed("cotal_tui.seats:SeatSessions.locate")
            return None, None
        try:
            # a user-auth mesh: the manager the view is pinned to, never a scatter
            loc = await locate(EndpointClient(nc, self.space), name, instance_id=user_pin(nc))
            return loc.row, loc.instance_id
        except (EndpointError, AttachError, Exception):  # noqa: BLE001 - any refusal of the lookup: the seat is not located [counted: COTAL_LOG]
            swallowed("cotal_tui.seats:SeatSessions.locate#2")
            return None, None
        finally:
            with swallowing("cotal_tui.seats:SeatSessions.locate"):
                await nc.close()

    def size_for(self, name: str) -> tuple[int, int]:
        """The seat's pty size as far as this console knows it: what it set, else the default.
        Never a row field (a ``cols``/``rows`` in a row is outside the closed AgentRow)."""
        return self.sizes.get(name) or self.default_size


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
        self._serving: object = None  # the session's rail link output last came on (identity only)
        self._closing = False
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._sender: asyncio.Task | None = None
        self._skipping = False
        self._expect_drop = False  # credit came back after a skip: a drop + repaint should follow
        self._quiet: asyncio.TimerHandle | None = None
        self._release_soon: asyncio.Handle | None = None  # credit back once a full window is through
        self.skips = 0  # times the pane skipped ahead
        self.repaints = 0  # repaints asked for (``ready``) after a skip the manager did not end
        self.bytes_skipped = 0
        self.fitted_from: tuple[int, int] | None = None  # the seat's size before fit-to-pane
        self._resizing = asyncio.Lock()
        pane.bind_link(self)

    @property
    def closing(self) -> bool:
        """``close()`` has begun: the pane is being handed back."""
        return self._closing

    @property
    def skipping(self) -> bool:
        """Output outran the pane: arriving output is thrown away until the manager repaints."""
        return self._skipping

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.sessions.open_on[self.name] = self.sessions.open_on.get(self.name, 0) + 1
        self._task = loop.create_task(self._run(), name=f"pane-link-{self.name}")
        self._sender = loop.create_task(self._send_loop(), name=f"pane-keys-{self.name}")

    def _tap(self, ev: str, data: bytes = b"") -> None:
        tap = self.sessions.tap
        if tap is not None:
            tap(self, ev, data)

    def _set_status(self, text: str) -> None:
        if text == self.status:
            return  # a status line repaint (a layout pass) per repeated notice would be waste
        self.status = text
        self.on_status(text)

    async def _run(self) -> None:
        self._set_status(f"[cotal: attaching to {self.name}]")
        _row, iid = await self.sessions.locate(self.name)
        if self._closing:
            return
        size = self.sessions.size_for(self.name)
        if size != self.pane.remote_size:
            self.pane.reset(*size)
        self.session = s = self.sessions.session(
            self.name, on_output=self._output, on_notice=self._notice, instance_id=self.instance_id or iid,
            consumer_credit=True)
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
        self._tap("end")
        self.pane.interactive = False
        self._set_status(text or end_text(reason, self.name))

    def _output(self, data: bytes) -> None:
        link = self.session.link if self.session is not None else None
        if link is not self._serving:  # a fresh session repaints from its snapshot into a clean mirror
            if self._serving is not None:
                self.pane.reset()
            self._serving = link
            self._end_skip()
            self._expect_drop = False
            self._tap("reset")
        if self._skipping:
            self.bytes_skipped += len(data)
            self._skip_check()
            return
        if self._expect_drop:  # credit came back but the manager had dropped nothing: repaint
            self._expect_drop = False
            self._repaint()
        self._tap("out", data)
        self.sessions.output_seen[self.name] = time.monotonic()
        self.pane.queue(data)
        if self.pane.pending_bytes > self.pane.pending_max:
            self._skipping = True
            self.skips += 1
            self.bytes_skipped += self.pane.drop_pending()
            self._skip_check()

    def parsed(self, nbytes: int) -> None:
        """The pane parsed ``nbytes`` of queued output: the session returns that much credit."""
        if self.session is not None:
            self.session.release(nbytes)

    def _skip_check(self) -> None:
        """Skipping: once the manager's window is full, give all credit back (it drops, then
        sends ``drop`` and a repaint); until then, wait — or repaint if output stops."""
        s = self.session
        if s is not None and s.peer_window_full:
            # frames already received behind this one (the rest of the full window, sent before
            # the manager blocked) are delivered in this same pass: they are skipped too, and
            # the credit goes back once they are through. Released now, they would arrive as if
            # the manager had resumed without a drop, and ask for a needless repaint.
            if self._release_soon is None:
                self._release_soon = asyncio.get_running_loop().call_soon(self._window_full)
            return
        if self._quiet is not None:
            self._quiet.cancel()
        self._quiet = asyncio.get_running_loop().call_later(SKIP_QUIET_S, self._skip_quiet)

    def _window_full(self) -> None:
        """The manager's window is full and every frame in it is through: all credit back (it
        drops, then sends ``drop`` and a repaint)."""
        self._release_soon = None
        s = self.session
        if self._skipping and s is not None:
            self._end_skip()
            s.release_all()
            self._expect_drop = True

    def _skip_quiet(self) -> None:
        self._quiet = None
        if self._skipping and self.session is not None:
            self._end_skip()
            self.session.release_all()
            self._repaint()

    def _end_skip(self) -> None:
        self._skipping = False
        if self._release_soon is not None:
            self._release_soon.cancel()
            self._release_soon = None
        if self._quiet is not None:
            self._quiet.cancel()
            self._quiet = None

    def _repaint(self) -> None:
        """Ask for a fresh snapshot (a repeated ``ready``); it rebuilds the screen wherever it lands."""
        if self.session is not None:
            self.repaints += 1
            _owned.spawn(self.session.repaint(), "repaint")

    def _notice(self, n: Notice) -> None:
        if n.kind == "reconnecting":
            self.state = "reconnecting"
        elif n.kind == "reconnected":
            self.state = "open"
        elif n.kind == "drop":  # a repaint follows at once: older output is moot
            self._end_skip()
            self._expect_drop = False
            self.pane.drop_pending()
            self.pane.queue_reset()
            self._tap("reset")
            if self.session is not None:
                self.session.release_all()
            if self.skips:  # the pane asked for it: say so once, not a new count every time
                self._set_status(SKIP_STATUS)
                return
        self._set_status(n.text)

    def send(self, data: bytes) -> None:
        """Queue the pane's input for the remote, in order; never for a read-only pane."""
        if self.pane.interactive and not self._closing:
            self._queue.put_nowait(data)

    async def _send_loop(self) -> None:
        while True:
            data = await self._queue.get()
            s = self.session
            if s is not None and await s.send_keys(data):
                self.keys_sent += len(data)

    # -- fit-to-pane ------------------------------------------------------------------

    @property
    def can_resize(self) -> bool:
        s = self.session
        return s is not None and s.is_open and not self._closing

    async def fit(self, cols: int, rows: int) -> bool:
        """Ask the seat to resize its pty to ``cols``×``rows`` (the pane), remembering the size
        to restore; again while fitted, follow the pane. False when no session is open."""
        if cols < 1 or rows < 1 or not self.can_resize:
            return False
        async with self._resizing:
            if not self.can_resize:
                return False
            if self.fitted_from is None:
                self.fitted_from = self.pane.remote_size
            if (cols, rows) != self.pane.remote_size:
                await self._resize(cols, rows)
            return True

    async def unfit(self) -> bool:
        """Put the seat back to the size it had before :meth:`fit`; False when not fitted."""
        async with self._resizing:
            orig, self.fitted_from = self.fitted_from, None
            if orig is None:
                return False
            s = self.session
            if s is not None and s.is_open:
                if orig != self.pane.remote_size:
                    await self._resize(*orig)
                s.size = None  # a reconnect re-imposes nothing: the seat keeps its own size
            return True

    async def _resize(self, cols: int, rows: int) -> None:
        """The resize frame, then a repaint: the snapshot (taken after the resize, the rail is
        ordered) rebuilds the mirror, now at the new size, over whatever old output lands first."""
        s = self.session
        assert s is not None
        self.pane.resize_remote(cols, rows)
        await s.resize(cols, rows)
        self.sessions.sizes[self.name] = (cols, rows)  # we set it: now it is known
        if not self._closing:  # a closing pane needs no fresh screen
            await s.repaint()

    async def close(self) -> None:
        """Hand the session back and wait (bounded) for it to finish; a fitted seat gets its
        own size back first (the rail is ordered, and frames before a ``close`` are delivered)."""
        if self._closing:
            return
        self._closing = True
        n = self.sessions.open_on.get(self.name, 0) - 1
        if n > 0:
            self.sessions.open_on[self.name] = n
        else:
            self.sessions.open_on.pop(self.name, None)
        self.pane.interactive = False
        self._tap("end")
        if self.fitted_from is not None or self._resizing.locked():
            try:
                await asyncio.wait_for(self.unfit(), CLOSE_WAIT_S)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - a pane's close is bounded and best effort [counted: COTAL_LOG]
                swallowed("cotal_tui.seats:PaneLink.close")
        self._end_skip()
        if self.session is not None:
            with swallowing("cotal_tui.seats:PaneLink.close"):
                await self.session.close()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), CLOSE_WAIT_S)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - a session that will not stop is cancelled [counted: COTAL_LOG]
                swallowed("cotal_tui.seats:PaneLink.close#2")
                self._task.cancel()
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(BaseException):
                await self._sender
