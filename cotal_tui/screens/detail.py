"""A full-screen detail card (message or agent). Any key closes it; arrows scroll; a card may
name a few keys of its own (an agent's managed seat: ``a`` attach, ``p`` peek) that close it
and then act, and keys that change how it is drawn and keep it open (a message's ``m``:
Markdown rendered or as sent). The card is live: the console hands it every drained snapshot
and it rebuilds (at most ``LIVE_HZ`` times a second, keeping its scroll), so an agent's
status, activity, ages and traffic move while it is open."""

from __future__ import annotations

from time import monotonic

from textual import events
from textual.app import ComposeResult
from textual.screen import ModalScreen

from widgets.detail_card import DetailCard

SCROLL_KEYS = {"up", "down", "j", "k", "pageup", "pagedown", "home", "end", "g", "G"}
LIVE_HZ = 4


class DetailScreen(ModalScreen[None]):
    CSS_PATH = "detail.tcss"

    def __init__(self, title: str, builder, keys: dict | None = None,
                 modes: dict | None = None) -> None:
        super().__init__()
        self._title = title
        self._builder = builder
        self._keys = dict(keys or {})  # key → callable, run after the card closes
        self._modes = dict(modes or {})  # key → callable, run with the card kept open
        self._next_live = 0.0

    def compose(self) -> ComposeResult:
        card = DetailCard(self._builder, id="detail-card")
        card.border_title = self._title
        card.border_subtitle = ("a attach · p peek · any other key closes"
                                if {"a", "p"} <= set(self._keys) else "any key closes")
        yield card

    def on_mount(self) -> None:
        self.query_one(DetailCard).focus()

    def update_snapshot(self, snap) -> None:  # noqa: ARG002 - the builder reads the newest
        """A new snapshot was drained: rebuild the card from it (bounded rate)."""
        now = monotonic()
        if now < self._next_live or not self.is_mounted:
            return
        self._next_live = now + 1 / LIVE_HZ
        self.query_one(DetailCard).rebuild()

    def on_key(self, event: events.Key) -> None:
        if not self.is_active:  # dismissed by the key before this one (both queued here)
            event.stop()
            event.prevent_default()
            return
        if event.key in SCROLL_KEYS:
            card = self.query_one(DetailCard)
            step = {"up": -1, "k": -1, "down": 1, "j": 1}.get(event.key)
            if step is not None:
                card.scroll_to(y=card.scroll_y + step, animate=False)
            elif event.key in ("pageup", "pagedown"):
                card.scroll_to(y=card.scroll_y + (card.size.height - 1) *
                               (1 if event.key == "pagedown" else -1), animate=False)
            elif event.key in ("home", "g"):
                card.scroll_to(y=0, animate=False)
            else:
                card.scroll_to(y=card.max_scroll_y, animate=False)
        elif event.key in self._modes:
            self._modes[event.key]()
            self.query_one(DetailCard).rebuild()
        elif event.key in self._keys:
            act = self._keys[event.key]
            self.dismiss()
            self.app.call_later(act)
        elif event.key not in ("ctrl+c", "ctrl+q"):
            self.dismiss()
        event.stop()
        event.prevent_default()
