"""Recording from the console: ``cotal watch --record FILE`` and the palette's ``record``.

Both put a :class:`meshview.record.record.Recorder` on a session's model (``session.recorder``); the
recording ends when the session stops (an ``on_stop`` hook) or when ``record`` is chosen again. ``cotal replay FILE`` plays it back.

``--record-seats`` adds a :class:`SeatTap` on the session's seats: the terminals the operator
opens (attach, peek, tile) are written as they are shown, never what the operator types. A
recording that stops on an error (disk full, permission, the file removed) says so on the
status line, not only in ``Recorder.error``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Callable

from cotal_tui.config import recordings_dir
from cotal_tui.seats import PaneLink
from cotal_tui.session import ConsoleSession
from cotal_tui.shell import ConsoleShell
from meshview.errors import swallowed
from meshview.record.record import MAX_SIZE, Recorder, active_recorder


def default_path(space: str) -> str:
    """``$COTAL_HOME/recordings/<space>-<date>-<time>.jsonl.gz`` (the folder made private)."""
    d = recordings_dir()
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in space) or "space"
    return str(d / f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl.gz")


KEY_BYTES = 256 * 1024  # a seat's output between two snapshots (bounds a seek's re-feed)


class SeatTap:
    """``SeatSessions.tap`` while recording with seats: each pane's output as it is queued,
    stamped; a fresh screen (``open``/``reset``) and a resize with its size; a snapshot of the
    pane's own mirror every :data:`KEY_BYTES` of output and at the start of a rotated segment,
    so seeking back re-feeds little and either segment replays alone. One pane per seat name is
    recorded (the first opened); keystrokes never pass through here."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.links: dict[str, PaneLink] = {}  # seat name → the link recorded for it
        self._size: dict[str, tuple[int, int]] = {}
        self._since: dict[str, int] = {}  # output bytes since the last fresh screen or snapshot
        self._owed: set[str] = set()  # a snapshot is owed (a segment began mid-stream)
        rec.on_segment.append(self._segment)

    def __call__(self, link: PaneLink, ev: str, data: bytes = b"") -> None:
        if self.rec.closed:
            return
        try:
            self._on(link, ev, data)
        except Exception:  # noqa: BLE001 - recording never breaks a pane (the mirror stays live) [counted: COTAL_LOG]
            swallowed("cotal_tui.recording:SeatTap.__call__")

    def _on(self, link: PaneLink, ev: str, data: bytes) -> None:
        name = link.name
        held = self.links.get(name)
        if held is not None and held is not link:
            if held.state != "ended" and not held.closing:
                return  # another pane already records this seat
            held = None
        rec = self.rec
        cols, rows = link.pane.remote_size
        if ev == "end":
            if held is link:
                why = link.end_reason or ("detached" if link.closing else "ended")
                rec.seat(name, "end", text=str(why))
                self._forget(name)
            return
        if ev == "reset":
            rec.seat(name, "reset" if held is link else "open", cols=cols, rows=rows)
            self._fresh(name, link, (cols, rows))
            return
        if held is None:  # recording began with this pane already showing something
            self.links[name] = link
            self._size[name] = (cols, rows)
            self._since[name] = 1
            self._owed.add(name)
            rec.seat(name, "note", cols=cols, rows=rows, text="joined mid-stream")
        if (cols, rows) != self._size.get(name):
            self._size[name] = (cols, rows)
            rec.seat(name, "size", cols=cols, rows=rows)
        if (name in self._owed or self._since[name] >= KEY_BYTES) and link.pane.pending_bytes == 0:
            self._key(name, link)
        rec.seat(name, "out", data)
        self._since[name] += len(data)

    def _fresh(self, name: str, link: PaneLink, size: tuple[int, int]) -> None:
        self.links[name] = link
        self._size[name] = size
        self._since[name] = 0
        self._owed.discard(name)

    def _key(self, name: str, link: PaneLink) -> None:
        """A keyframe: the pane's screen as the recording stands (nothing queued unparsed)."""
        cols, rows = link.pane.remote_size
        if self._since[name] == 0:  # nothing since a fresh screen: that is the state
            self.rec.seat(name, "reset", cols=cols, rows=rows)
        else:
            self.rec.seat(name, "snap", link.pane.mirror.snapshot(), cols=cols, rows=rows)
        self._fresh(name, link, (cols, rows))

    def _segment(self) -> None:
        """A new segment: each recorded seat starts it with its screen, or says it cannot yet."""
        for name, link in list(self.links.items()):
            try:
                if self._since[name] == 0 or link.pane.pending_bytes == 0:
                    self._key(name, link)
                else:
                    cols, rows = link.pane.remote_size
                    self.rec.seat(name, "note", cols=cols, rows=rows, text="resumes mid-stream")
                    self._owed.add(name)
            except Exception:  # noqa: BLE001 - recording never breaks a pane (the mirror stays live) [counted: COTAL_LOG]
                swallowed("cotal_tui.recording:SeatTap._segment")
                self._forget(name)

    def _forget(self, name: str) -> None:
        self.links.pop(name, None)
        self._size.pop(name, None)
        self._since.pop(name, None)
        self._owed.discard(name)


ERROR_SECONDS = 30.0  # a recording's stopping error stays on the status line this long

App = Callable[[], "ConsoleShell | None"]  # the console's App once it is made (None before)


def tell_errors(rec: Recorder, app: App | None) -> None:
    """Show ``rec``'s stopping error on the console's status line when it happens (and an
    error it already has now), once the App runs (``app()`` may be ``None`` for a while)."""
    if app is None:
        return

    def say(msg: str, tries: int = 0) -> None:
        try:
            a = app()
        except NameError:  # the console's App is not made yet
            a = None
        if a is not None and a.is_running:
            try:
                a.notify_line(msg, True, seconds=ERROR_SECONDS)  # held longer than a notice
                return
            except Exception:  # noqa: BLE001 - not mounted yet: try again shortly [counted: COTAL_LOG]
                swallowed("cotal_tui.recording:tell_errors.say")
        if tries < 120:
            try:
                asyncio.get_running_loop().call_later(0.25, say, msg, tries + 1)
            except RuntimeError:
                pass

    def on_error(msg: str) -> None:
        try:  # not inside the model's reducer (this runs from a recorder write)
            asyncio.get_running_loop().call_soon(say, msg)
        except RuntimeError:
            say(msg)

    rec.on_error = on_error
    if rec.error:
        on_error(rec.error)


def start_recording(session: ConsoleSession, path: str | None = None, *,
                    max_size: int = MAX_SIZE, seats: bool = False,
                    app: App | None = None) -> Recorder:
    """Record ``session``'s model until the session stops. Check ``.error`` (one sentence);
    with ``app``, a recording that stops on an error also says so on the console.

    ``seats``: the terminals opened through ``session.seat_sessions`` are recorded too."""
    model = session.model
    path = path or default_path(model.space)
    Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
    rec = Recorder(model, str(Path(path).expanduser()), max_size=max_size, seats=seats)
    session.recorder = rec
    tell_errors(rec, app)
    if seats and not rec.closed and session.seat_sessions is not None:
        session.seat_sessions.tap = SeatTap(rec)

    from cotal_tui.actionlog import LISTENERS

    def action(what: str, target: str) -> None:  # an operator action: a marker in the recording
        rec.mark(f"{what} {target}", kind="action")

    LISTENERS.append(action)

    def end() -> None:  # the session stopped: this recording ends with it
        rec.close()
        _untap(session)
        if action in LISTENERS:
            LISTENERS.remove(action)

    session.on_stop.append(end)
    return rec


def toggle_recording(app: ConsoleShell, path: str | None = None, *, seats: bool = False) -> str:
    """The palette's ``record`` (``record seats``: with the terminals opened from now on): start
    recording the open console's space (to ``path``, else a new file under
    ``$COTAL_HOME/recordings``), or stop the recording in progress. Returns the sentence it also
    shows on the status line."""
    screen = app.console_screen()
    session = screen.session if screen is not None else None
    if session is None:
        msg, err = "record: open a space first", True
    elif session.kind == "replay":
        msg, err = "record: this is already a recording", True
    elif (rec := active_recorder(session.model)) is not None:
        rec.close()
        _untap(session)
        msg, err = f"recording stopped: {rec.summary()}", False
    else:
        try:
            rec = start_recording(session, path, seats=seats, app=lambda: app)
        except OSError as e:
            rec, msg, err = None, f"record: cannot write there: {e.strerror or e}", True
        if rec is not None:
            msg, err = ((rec.error, True) if rec.error else
                        (f"recording {'with seat terminals ' if seats else ''}to {rec.path} "
                         "(record again to stop)", False))
    app.notify_line(msg, err)
    return msg


def _untap(session: ConsoleSession) -> None:
    seats = session.seat_sessions
    if seats is not None and isinstance(seats.tap, SeatTap):
        seats.tap = None
