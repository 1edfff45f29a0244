"""``:tile``: the live terminals of several seats at once, each read-only until promoted.

Every pane has its own session (a peek: ``ready`` and nothing else). Enter or ``a`` promotes the
focused pane to interactive in place; its detach keys (Ctrl-] alone unless ``COTAL_DETACH_KEY``
or ``[attach] detach_keys`` say otherwise) demote it again. Esc on the grid, or the detach keys
on a read-only pane, close the tile and hand every session back.

A pane smaller than its seat's screen crops it and says so in its border. ``f`` fits the focused
seat to its pane (its pty is resized through the attach ``resize`` frame, and follows the pane
while the tile reflows); ``f`` again, Esc, or the console quitting puts the seat back to the size
it had. ``F`` fits (or restores) every seat, the way tmux sizes a window to the client showing it.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, NamedTuple

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static

from cotal_tui.screens.help import HelpScreen, describe_bindings
from attach.terminal.detach import DetachKeys
from cotal_tui.seats import PaneLink, SeatSessions, console_detach_keys
from meshview.model.labels import Labels
from meshview.model.snapshot import Peer
from widgets.notice import say_line
from widgets.terminal_pane import TerminalPane
from widgets.tile_grid import TileGrid, TilePane

if TYPE_CHECKING:
    from attach.control.managed import ManagedFold, ManagedSeat

MAX_PANES = 16
REFIT_S = 0.2  # a fitted pane follows its new size once the terminal stops resizing this long


def tile_names(peers: Iterable[Peer], managed_names: Iterable[str] | None = None,
               chosen: Iterable[str] | None = None) -> list[str]:
    """The seats to tile: the chosen names, else every working agent (that a manager hosts)."""
    if chosen:
        return list(dict.fromkeys(chosen))[:MAX_PANES]
    hosted = set(managed_names) if managed_names is not None else None
    out = [p.name for p in peers
           if p.kind == "agent" and p.status == "working"
           and (hosted is None or p.name in hosted)]
    return out[:MAX_PANES]


class TileTarget(NamedTuple):
    """One pane's seat: the name its manager knows it by, the label the roster shows for its
    principal (suffixed when another peer shares the name: ``ada·3f2ac1``), and the hosting
    manager when the seat is bound by id (the session then asks that manager only)."""

    name: str
    label: str
    instance_id: str | None = None


def _seat_target(s: ManagedSeat, labels: Labels) -> TileTarget:
    return TileTarget(s.name, labels.label(s.principal) or s.name, s.instance_id)


_STATUS_ORDER = {"waiting": 0, "working": 1, "idle": 2}


def every_seat(peers: Iterable[Peer], fold: ManagedFold | None, labels: Labels,
               cap: int = MAX_PANES) -> tuple[list[TileTarget], int]:
    """``:tile`` without words: every managed seat once a manager's ``ps`` answered (before
    that, every working agent), up to ``cap``; and how many were left out past it. A seat is
    labelled by the roster peer bound to it by principal and lifecycle uid (never by name);
    waiting seats come first, then working, idle, and seats no peer is bound to."""
    known = fold is not None and fold.rounds > 0
    if fold is None or not known:
        out = list(dict.fromkeys(TileTarget(p.name, labels.label(p.id) or p.name) for p in peers
                                 if p.kind == "agent" and p.status == "working"))
        return out[:cap], max(0, len(out) - cap)
    index = fold.index()
    rank: dict[tuple[str, str], int] = {}
    for p in peers:
        if p.kind == "agent" and (b := fold.bind(p.id, p.lifecycle_uid, index)).seat is not None:
            key = (b.seat.instance_id, b.seat.id)
            rank[key] = min(rank.get(key, 9), _STATUS_ORDER.get(p.status, 3))
    seats = sorted(fold.seats(), key=lambda s: (rank.get((s.instance_id, s.id), 4), s.name, s.id))
    out = list(dict.fromkeys(_seat_target(s, labels) for s in seats))
    return out[:cap], max(0, len(out) - cap)


def tile_targets(peers: Iterable[Peer], fold: ManagedFold | None, labels: Labels,
                 chosen: Iterable[str] | None = None) -> tuple[list[TileTarget], str | None]:
    """The panes to tile and, when one cannot be chosen, the sentence that says why.

    Without words: :func:`every_seat` (every managed seat, up to :data:`MAX_PANES`). With words:
    each is a seat name or a principal; a name two seats share is refused with their ids, the
    way ``attach`` refuses it (an id always works)."""
    known = fold is not None and fold.rounds > 0
    seats = fold.seats() if fold is not None and known else []
    if not chosen:
        return every_seat(peers, fold, labels)[0], None
    out: list[TileTarget] = []
    for word in dict.fromkeys(chosen):
        if not known:
            agents = [p for p in peers if p.kind == "agent" and word in (p.name, p.id)]
            if len({p.id for p in agents}) > 1:
                ids = ", ".join(sorted({p.id for p in agents})[:4])
                return [], f"tile: {len(agents)} agents are named {word} ({ids}); tile by id"
            out.append(TileTarget(agents[0].name, labels.label(agents[0].id) or word) if agents
                       else TileTarget(word, word))
            continue
        by_id = [s for s in seats if word in (s.principal, s.id)]
        hits = by_id or [s for s in seats if s.name == word]
        where = {(s.instance_id, s.principal) for s in hits}
        if len(where) > 1:
            ids = ", ".join(f"{i} ({pid})" for i, pid in sorted(where)[:4])
            return [], (f"tile: {len(where)} seats are named {word} ({ids}); "
                        "nothing was tiled - tile by id")
        out.append(_seat_target(hits[0], labels) if hits else TileTarget(word, word))
    return out[:MAX_PANES], None


class TileScreen(Screen[None]):
    CSS_PATH = str(Path(__file__).with_name("tile.tcss"))
    BINDINGS = [
        Binding("escape", "leave", "close the tile", id="tile.back"),
        Binding("enter,a", "promote", "attach to the focused pane", id="tile.promote"),
        Binding("right,l,tab", "step(1)", "next pane", id="tile.next"),
        Binding("left,h,shift+tab", "step(-1)", "previous pane", id="tile.prev"),
        Binding("down,j", "step_row(1)", "pane below", id="tile.down", show=False),
        Binding("up,k", "step_row(-1)", "pane above", id="tile.up", show=False),
        Binding("f", "fit", "fit the focused seat to its pane (again: restore)", id="tile.fit"),
        Binding("F", "fit_all", "fit every seat to its pane (again: restore)", id="tile.fit_all"),
        Binding("question_mark", "help", "help", id="tile.help"),
    ]

    def __init__(self, sessions: SeatSessions, names: Iterable[str | TileTarget], *,
                 detach: DetachKeys | None = None,
                 hold_escape: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.hold_escape = hold_escape  # runs as it closes (the console's ``hold_escape``)
        self.sessions = sessions
        self.targets = [t if isinstance(t, TileTarget) else TileTarget(t, t)
                        for t in list(names)[:MAX_PANES]]
        self.names = [t.name for t in self.targets]
        self.detach = console_detach_keys() if detach is None else detach
        self.panes: list[TilePane] = []
        self.links: dict[TilePane, PaneLink] = {}
        for i, (name, label, instance_id) in enumerate(self.targets):
            cols, rows = sessions.sizes.get(name) or sessions.default_size
            pane = TilePane(name, cols, rows, detach=self.detach, id=f"tile-{i}",
                            label=label)
            pane.size_known = False  # no crop mark until the session opens at the seat's size
            self.panes.append(pane)
            self.links[pane] = PaneLink(sessions, name, pane, on_status=partial(self._status, pane),
                                        instance_id=instance_id)
        self._leaving = False
        self._refit: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(f" tile · {len(self.names)} seats · enter attach · ←→ move · f fit · F fit all"
                     " · ? keys · esc close", id="tile-title", markup=False)
        with TileGrid(id="tile-grid"):
            yield from self.panes

    def _status(self, pane: TilePane, text: str) -> None:
        pane.set_status(text)
        if not pane.size_known and self.links[pane].state in ("open", "reconnecting"):
            pane.size_known = True  # from the seat's row (without one, the default it draws at)
            pane.update_mark()

    def on_mount(self) -> None:
        if self.panes:
            self.panes[0].focus()
        self.start_sessions()

    def start_sessions(self) -> None:
        for link in self.links.values():
            link.start()

    # -- panes ------------------------------------------------------------------------

    def _focused_index(self) -> int:
        f = self.focused
        return self.panes.index(f) if f in self.panes else 0

    def action_step(self, delta: int) -> None:
        if self.panes:
            self.panes[(self._focused_index() + delta) % len(self.panes)].focus()

    def action_step_row(self, delta: int) -> None:
        grid = self.query_one(TileGrid)
        cols = grid.styles.grid_size_columns or 1
        i = self._focused_index() + delta * cols
        if 0 <= i < len(self.panes):
            self.panes[i].focus()

    def action_promote(self) -> None:
        if not self.panes:
            return
        pane = self.panes[self._focused_index()]
        link = self.links[pane]
        if link.state in ("open", "reconnecting") and not pane.interactive:
            for other in self.panes:  # one interactive pane at a time
                if other.interactive:
                    self._demote(other)
            pane.interactive = True
            pane.set_status(link.status)
            pane.focus()

    # -- fit-to-pane ------------------------------------------------------------------

    def action_fit(self) -> None:
        """Fit the focused seat to its pane, or put a fitted one back."""
        if self.panes:
            pane = self.panes[self._focused_index()]
            self._toggle_fit([pane], fit=pane.fitted_from is None)

    def action_fit_all(self) -> None:
        """Fit every seat (restore every one when all are fitted already)."""
        live = [p for p in self.panes if self.links[p].can_resize or p.fitted_from is not None]
        self._toggle_fit(live, fit=any(p.fitted_from is None for p in live))

    def _toggle_fit(self, panes: list[TilePane], *, fit: bool) -> None:
        """Decide now — so a quick second press undoes the first — and resize in a worker (the
        link orders the frames): no key waits on the network."""
        if self._leaving:
            return
        if fit:
            panes = [p for p in panes if p.fitted_from is None]
            dead = [p.seat for p in panes if not self.links[p].can_resize]
            if dead:
                self._say(f"fit: {', '.join(dead)} {'is' if len(dead) == 1 else 'are'} "
                          "not connected - nothing to resize")
            panes = [p for p in panes if self.links[p].can_resize]
            for p in panes:
                p.fitted_from = p.remote_size
                p.update_mark()
            work = [self._fit(p) for p in panes]
        else:
            panes = [p for p in panes if p.fitted_from is not None]
            for p in panes:
                p.fitted_from = None
                p.update_mark()
            work = [self._unfit(p) for p in panes]
        if work:
            self.run_worker(asyncio.gather(*work), name="tile-fit", group="tile-fit",
                            exit_on_error=False)

    async def _fit(self, pane: TilePane) -> None:
        from cotal_tui.actionlog import action_log

        cols, rows = pane.size
        aid = action_log().record("fit", pane.seat, "requested", detail=f"{cols}x{rows}",
                                  mesh=getattr(self.sessions, "space", None))
        if not await self.links[pane].fit(*pane.size):
            pane.fitted_from = None  # the session went away meanwhile
            action_log().settle(aid, "failed", detail="the session went away")
        else:
            action_log().settle(aid, "done")
        pane.update_mark()

    async def _unfit(self, pane: TilePane) -> None:
        from cotal_tui.actionlog import action_log

        aid = action_log().record("unfit", pane.seat, "requested", mesh=getattr(self.sessions, "space", None))
        await self.links[pane].unfit()
        action_log().settle(aid, "done")
        pane.update_mark()

    @on(TilePane.Reshaped)
    def _on_pane_reshaped(self, event: TilePane.Reshaped) -> None:
        """A fitted pane changed size: the seat follows once the resizing settles."""
        event.stop()
        if any(p.fitted_from is not None for p in self.panes) and not self._leaving:
            if self._refit is not None:
                self._refit.stop()
            self._refit = self.set_timer(REFIT_S, self._follow_panes)

    def _follow_panes(self) -> None:
        self._refit = None
        if self._leaving:
            return
        work = [self.links[p].fit(*p.size) for p in self.panes
                if p.fitted_from is not None and p.size != p.remote_size]
        if work:
            self.run_worker(asyncio.gather(*work), name="tile-refit", group="tile-fit",
                            exit_on_error=False)

    def _say(self, text: str) -> None:
        say_line(self, text)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(*describe_bindings(self)))

    def _demote(self, pane: TilePane) -> None:
        pane.interactive = False
        pane.set_status(self.links[pane].status)

    @on(TerminalPane.Detach)
    async def _on_pane_detach(self, event: TerminalPane.Detach) -> None:
        """An attached pane goes back to read-only; on a read-only one the detach keys leave
        the tile, as they leave a peek."""
        event.stop()
        if isinstance(event.pane, TilePane):
            if event.pane.interactive:
                self._demote(event.pane)
            else:
                await self.action_leave()

    async def action_leave(self) -> None:
        if self._leaving:
            return
        self._leaving = True
        if self._refit is not None:
            self._refit.stop()
        await self.close_all()
        if self.app.screen is self:
            if self.hold_escape is not None:
                self.hold_escape()  # after the hand-back: Escs queued meanwhile land in the window
            self.app.pop_screen()

    async def close_all(self) -> None:
        """Hand every session back (a fitted seat gets its size back first: ``PaneLink.close``)."""
        await asyncio.gather(*(link.close() for link in self.links.values()), return_exceptions=True)

    async def on_unmount(self) -> None:
        await self.close_all()
