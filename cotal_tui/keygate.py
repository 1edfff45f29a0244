"""Which keys the console takes, and when: never while it closes, later while a screen mounts.

A key that lands on a screen still composing (``n`` pushes the NEEDS-YOU overlay, the next ``j``
reaches it before its rail exists) or on a console being taken down (``q`` then ``n``) ran an
action against widgets that were not there: a ``NoMatches`` traceback on the operator's terminal.
The gate drops every key once the App is closing, holds keys while the screen on top is not
mounted yet (or a palette command is running) and hands them back in order once it is; the keys
typed ahead of a palette command that was refused are dropped, not run as hotkeys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from time import monotonic

HELD_MAX = 64  # keys held at most while a screen mounts (a paste's worth; the rest are dropped)
TYPEAHEAD_S = 0.4  # after a refused palette command, keys this soon are its type-ahead
PALETTE_WAIT_S = 2.0  # a palette Enter whose command never settles stops holding keys after this


class Verdict(Enum):
    TAKE = "take"  # dispatch the key now
    HOLD = "hold"  # keep it; :meth:`KeyGate.release` hands it back in order
    DROP = "drop"  # nobody may act on it


@dataclass
class KeyGate:
    """The gate's state; the App asks :meth:`admit` for every key and feeds it the facts."""

    closing: bool = False  # the App is exiting: every key from now on is dropped
    held: list[tuple[str, str | None]] = field(default_factory=list)  # (key, character), in order
    dropped: int = 0  # keys dropped (closing, type-ahead, over HELD_MAX): counted, never silent
    _palette_since: float | None = None  # an Enter went to the palette; its command not settled
    _errors_at_enter: int = 0
    _typeahead_until: float = 0.0

    def admit(self, key: str, character: str | None, *, screen_ready: bool,
              palette_on_top: bool, errors: int, opens_palette: bool = False,
              now: float | None = None) -> Verdict:
        """What to do with one key. ``screen_ready``: the screen on top is mounted;
        ``palette_on_top``: the ``:`` palette is that screen; ``errors``: error notices said so far;
        ``opens_palette``: the key is bound to open the palette (after a refusal it is the
        operator's next try, not type-ahead: it is taken, and ends the drop)."""
        now = monotonic() if now is None else now
        if not self.closing and opens_palette and now < self._typeahead_until:
            self._typeahead_until = 0.0
        if self.closing or now < self._typeahead_until:
            self.dropped += 1
            return Verdict.DROP
        if palette_on_top:
            if key == "enter":  # may run a command: what follows waits for its outcome
                self._palette_since, self._errors_at_enter = now, errors
            if not self.held:
                return Verdict.TAKE  # typed into the palette itself
        elif self._palette_since is not None and now - self._palette_since > PALETTE_WAIT_S:
            self._palette_since = None
        if self.held or not screen_ready or (self._palette_since is not None and not palette_on_top):
            if len(self.held) >= HELD_MAX:
                self.dropped += 1
                return Verdict.DROP
            self.held.append((key, character))
            return Verdict.HOLD
        return Verdict.TAKE

    def palette_settled(self, errors: int, now: float | None = None) -> None:
        """The palette closed and its command (if any) ran: a refusal drops the keys typed
        after its Enter, and those that follow within :data:`TYPEAHEAD_S`."""
        if self._palette_since is None:
            return
        self._palette_since = None
        if errors != self._errors_at_enter:
            self.dropped += len(self.held)
            self.held.clear()
            self._typeahead_until = (monotonic() if now is None else now) + TYPEAHEAD_S

    def waiting(self, *, screen_ready: bool) -> bool:
        """Held keys must wait longer (the screen is still mounting, a command still running)."""
        return bool(self.held) and (not screen_ready or self._palette_since is not None)

    def release(self) -> list[tuple[str, str | None]]:
        """The held keys, oldest first, to be dispatched again; the gate holds none after."""
        keys, self.held = self.held, []
        return keys

    def close(self) -> None:
        """The App is exiting: drop what is held and everything after."""
        self.closing = True
        self.dropped += len(self.held)
        self.held.clear()
