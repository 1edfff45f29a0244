"""``cotal replay``'s App: the console on one recording (no broker, no picker, nothing sent).

Beside the App, not among the screens: screens never import the App.
"""

from __future__ import annotations

from typing import Iterable

from textual import events

from cotal_tui.app import CotalApp
from cotal_tui.screens.replay import ReplayScreen, ReplaySeatScreen
from meshview.replay import ReplaySession


class ReplayApp(CotalApp):
    """The console App on one :class:`~meshview.replay.ReplaySession`."""

    TITLE = "cotal replay"

    def __init__(self, *, session: ReplaySession, keymap: dict[str, str] | None = None,
                 notice: str | None = None) -> None:
        super().__init__(session=session, keymap=keymap, notice=notice)
        self.replay_session = session

    def on_mount(self, event: events.Mount) -> None:
        event.prevent_default()  # not CotalApp's: it would push a live console on top
        if self._user_keymap:
            self.set_keymap(self._user_keymap)
        self.push_screen(ReplayScreen(self.replay_session, can_go_back=False))
        if self._first_notice:
            self.call_after_refresh(self.notify_line, self._first_notice, True)

    def open_seat(self, name: str, *, peek: bool = False, instance_id: str | None = None) -> bool:
        """Roster ``a``/``p``, ``:attach``/``:peek``: the seat's recorded terminal, if any."""
        replay = self.replay_session.replay
        stream = replay.seat_stream(name)
        if stream is None:
            verb = "peek" if peek else "attach"
            how = ("" if replay.rec.header.get("seats")
                   else " (cotal watch --record FILE --record-seats records them)")
            self.notify_line(f"{verb}: no terminal of {name} in this recording{how}", True)
            return False
        self.push_screen(ReplaySeatScreen(self.replay_session, name, stream))
        return True

    def open_tile(self, names: list[str] | None = None,
                  managed_names: Iterable[str] | None = None) -> bool:
        self.notify_line("tile: a replay shows one recorded terminal at a time (a on a roster row)",
                         True)
        return False
