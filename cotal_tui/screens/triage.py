"""Triage (``T``, ``:triage``, Enter on a NEEDS-YOU agent): every waiting agent and run step
as a card, and the answer sent from the card.

A card for a managed seat shows a live, read-only excerpt of the seat's terminal: a peek
session (:class:`~cotal_tui.seats.PaneLink` on an unmounted read-only
:class:`~widgets.terminal_pane.TerminalPane`, so the pane's parse budget and skip-ahead hold)
opened while the card is on screen and closed when it scrolls away, at most
:data:`MAX_PEEKS` at once. An answer (``y``/``n``/Enter/``1``–``9``/Esc or a typed line) goes
through the ``input`` control verb only after the exact bytes are shown and Enter confirms
(``!`` turns the question off for y/n, for this console session); ``r`` DMs an agent that waits
on the mesh; ``a``/``p``/``D`` attach, peek and stop as on the roster. A run card opens the
run answer composer. Every tick reads the model; nothing here grows without bound.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input, Static

from attach.control import verbs as control
from attach.control.managed import Binding as SeatBinding
from cotal_tui.seats import PaneLink, SeatSessions
from cotal_tui.screens.control import control_target, read_only_reason, refusal
from cotal_tui.shell import ShellScreen
from meshview.errors import swallowed, swallowing
from meshview.model.runs_state import RunNeed
from meshview.model.snapshot import NeedsYou, Snapshot
from widgets.doing import doing_of, doing_text
from widgets.presentation import safe
from widgets.status_bar import StatusBar
from widgets.terminal_pane import TerminalPane
from widgets.triage import EXCERPT_LINES, Action, AgentCard, RunCard, TriageList, TriageState, excerpt_of

MAX_PEEKS = 4  # terminal excerpts open at once
SETTLE_S = 20.0  # after an answer, this long still waiting: the card says so
TICK_S = 0.25
FEED_SCAN = 3000  # rows of the feed looked back through for "the last thing it said"
LINE_MAX = 512  # a typed line


def shown_bytes(data: bytes) -> str:
    """``b"y\\r"``: the bytes exactly, escaped."""
    return 'b"' + repr(data)[2:-1].replace('"', '\\"') + '"'


def key_label(data: bytes) -> str:
    """``y⏎``: what the bytes are, as keys."""
    return safe(data.decode("utf-8", "replace").replace("\r", "⏎").replace("\x1b", "⎋"), 80)


@dataclass
class _Answer:
    at: float  # time.time() of the send
    since: float | None  # the condition's ``since`` it answered (a new one: a new question)
    what: str


@dataclass
class _Pending:
    peer_id: str
    name: str
    text: str
    enter: bool
    yn: bool  # a y/n answer (the "don't ask again" toggle covers these)

    @property
    def data(self) -> bytes:
        return self.text.encode("utf-8", "replace") + (b"\r" if self.enter else b"")


class _Peek:
    """One card's excerpt session."""

    def __init__(self, sessions: SeatSessions, name: str, instance_id: str | None) -> None:
        cols, rows = sessions.size_for(name)
        self.pane = TerminalPane(cols, rows, interactive=False)
        self.link = PaneLink(sessions, name, self.pane, on_status=self._status, instance_id=instance_id)
        self.note = "opening peek…"
        self.stamp: object = None  # (mirror, bytes parsed, cursor) the excerpt was read at
        self.excerpt: list[str] = []
        self.mirror_id = 0

    def _status(self, text: str) -> None:
        self.note = text


class TriageScreen(ShellScreen):
    CSS_PATH = str(Path(__file__).with_name("triage.tcss"))
    BINDINGS = [
        Binding("escape", "escape", "back / cancel", id="triage.back"),
        Binding("q", "back", "back", id="triage.quit", show=False),
        Binding("tab", "action_step(1)", "next action", id="triage.next-action"),
        Binding("shift+tab", "action_step(-1)", "previous action", id="triage.prev-action", show=False),
        Binding("enter", "enter", "selected action / send", id="triage.enter"),
        Binding("y", "answer('y')", "y⏎", id="triage.yes"),
        Binding("n", "answer('n')", "n⏎", id="triage.no"),
        *[Binding(str(d), f"answer('{d}')", str(d), id=f"triage.digit-{d}", show=False) for d in range(1, 10)],
        Binding("i", "type_line", "type a line", id="triage.type"),
        Binding("exclamation_mark", "toggle_ask", "don't ask again for y/n", id="triage.no-ask", show=False),
        Binding("r", "reply", "DM reply", id="triage.reply"),
        Binding("a", "attach", "attach", id="triage.attach"),
        Binding("p", "peek", "peek", id="triage.peek"),
        Binding("D", "stop", "stop", id="triage.stop"),
        Binding("A", "activity", "activity lens of the agent", id="triage.activity"),
    ]

    def __init__(self, *, focus_id: str | None = None) -> None:
        super().__init__()
        self.focus_id = focus_id
        self.peeks: dict[str, _Peek] = {}  # seat name → its excerpt session
        self.peeks_opened = 0  # ever (the bench and tests)
        self.answers: dict[str, _Answer] = {}
        self.pending: _Pending | None = None
        self.ask_yn = True  # False: y/n go without the question (this screen's console session)
        self.action_index = 0
        self.cards: list[AgentCard | RunCard] = []
        self._said: dict[str, tuple[str, float]] = {}
        self._said_at = -1
        self._typing_for: str | None = None
        self.viewers: dict[str, str] = {}  # seat name -> "2 viewers: you, alice" (someone else there)
        self._shown_with_viewers: dict[str, AgentCard] = {}  # cards that named other viewers
        self._closing = False

    # -- layout ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(" triage · who is waiting, and why", id="triage-title", markup=False)
        yield TriageList(id="triage-list")
        yield Static("", id="triage-confirm", markup=False)
        yield Input(placeholder="a line to type into the seat (Enter: review the bytes, Esc: cancel)",
                    id="triage-input", max_length=LINE_MAX)
        yield StatusBar(id="triage-status")

    def on_mount(self) -> None:
        ask = self._session_prefs()
        if ask is not None:
            self.ask_yn = ask
        self.query_one("#triage-input", Input).display = False
        self.query_one(TriageList).focus()
        self.refresh_cards()
        if self.focus_id is not None:
            self.query_one(TriageList).select_key(("agent", self.focus_id))
        self.set_interval(TICK_S, self.refresh_cards, name="triage-tick")
        self._watch_viewers()

    VIEWERS_S = 3.0  # how often the session ledger is read for who else is on the open seats

    @work(exclusive=True, group="triage-viewers", exit_on_error=False)
    async def _watch_viewers(self) -> None:
        """Who else is on the seats whose excerpt is open, from the session ledger, every
        :attr:`VIEWERS_S` on one connection of the screen's own (so two operators do not answer
        the same prompt unknowingly). Nothing readable: the cards say nothing about viewers."""
        from attach.control.viewers import read_viewers, viewers_label

        console = self.shell.console_screen()
        sessions = console.session.seat_sessions if console is not None else None
        if sessions is None:
            return
        try:
            nc = await sessions.connect()
        except Exception:  # noqa: BLE001 - no viewers shown; the cards are unaffected [counted: COTAL_LOG]
            swallowed("cotal_tui.screens.triage:TriageScreen._watch_viewers")
            return
        try:
            while not self._closing:
                seen: dict[str, str] = {}
                for name, peek in list(self.peeks.items()):
                    s = peek.link.session
                    if s is None or not s.is_open:
                        continue
                    vs = await read_viewers(nc, sessions.space, name, mine=[s.caller.principal])
                    if any(not v.you for v in vs):
                        seen[name] = viewers_label(vs)
                self.viewers = seen
                await asyncio.sleep(self.VIEWERS_S)
        finally:
            with swallowing("cotal_tui.screens.triage:TriageScreen._watch_viewers"):
                await nc.close()

    def focus_on(self, peer_id: str) -> None:
        """Put the cursor on ``peer_id``'s card (when it is waiting)."""
        self.refresh_cards()
        self.query_one(TriageList).select_key(("agent", peer_id))

    def _session_prefs(self) -> bool | None:
        console = self.shell.console_screen()
        if console is None:
            return None
        return TRIAGE_PREFS.get(id(console.session))

    # -- data -----------------------------------------------------------------------------

    def refresh_cards(self) -> None:
        if self.app.screen is not self and not self.app.screen.is_modal:
            self._sync_peeks({})  # under a full screen (attach, peek, a journal): no excerpt open
            return
        console = self.shell.console_screen()
        snap = console.snap if console is not None else None
        lst = self.query_one(TriageList)
        if console is None or snap is None:
            lst.show(TriageState())
            return
        runs = console.session.model.runs_view()
        needs: list[RunNeed] = sorted(
            runs.needs, key=lambda r: (r.deadline_in_ms is None, r.deadline_in_ms or 0.0))
        waiting = sorted(snap.signals.needs_you, key=lambda n: -(n.status_age_ms or n.condition_age_ms or 0.0))
        said = self._last_said(snap, {n.id for n in waiting})
        visible = lst.visible_keys() or {("agent", n.id) for n in waiting[:MAX_PEEKS]}
        cards: list[AgentCard | RunCard] = [RunCard(r) for r in needs]
        want: dict[str, str | None] = {}
        now = time.time()
        for n in waiting:
            seat = self._binding(n.id).seat  # by principal + lifecycle uid, never by name
            card = self._agent_card(n, snap, said.get(n.id), seat is not None)
            if seat is not None and ("agent", n.id) in visible and len(want) < MAX_PEEKS:
                want[n.name] = seat.instance_id
            self._answer_note(card, n, now, snap.now)
            card.viewers = self.viewers.get(n.name, "")
            cards.append(card)
        self._sync_peeks(want)
        for c in cards:
            if isinstance(c, AgentCard):
                if c.managed:
                    self._excerpt(c)
                else:
                    c.excerpt_note = "none - not a managed seat; it waits on the mesh (r: a DM reply)"
        live = {n.id for n in waiting}
        for card in self._shown_with_viewers.values():
            if card.peer_id not in live and card.peer_id not in self.answers:
                # it left waiting while someone else was on its seat, and not on our answer
                self.say(f"{safe(card.name, 40)} stopped waiting - answered elsewhere "
                         f"({safe(card.viewers, 80)} were on the seat)")
        self._shown_with_viewers = {c.peer_id: c for c in cards if isinstance(c, AgentCard) and c.viewers}
        for pid in [p for p in self.answers if p not in live]:
            del self.answers[pid]  # it left waiting: the card has gone with it
        self.cards = cards
        # the selection among the cards about to be shown (on the first refresh the list still
        # holds none, and its cursor lands on the first card): the actions are drawn at once
        key = lst.cursor_key
        sel = next((c for c in cards if c.key == key), cards[0] if cards and key is None else None)
        acts = self.actions_for(sel)
        self.action_index = min(self.action_index, max(0, len(acts) - 1))
        lst.show(TriageState(cards, acts, self.action_index))
        if self.pending is not None and self.pending.peer_id not in live:
            self._cancel("the agent left waiting before the answer was sent")
        self.query_one(StatusBar).update_snapshot(snap, None)
        n_agents, n_runs = len(waiting), len(needs)
        self.query_one("#triage-title", Static).update(
            f" triage · {n_agents} agent{'s' if n_agents != 1 else ''} and {n_runs} run step"
            f"{'s' if n_runs != 1 else ''} waiting · {len(self.peeks)} terminal"
            f"{'s' if len(self.peeks) != 1 else ''} open · j/k cards · Tab actions · Esc back")

    def _binding(self, peer_id: str) -> SeatBinding:
        """The seat a waiting peer is, through its principal and lifecycle uid (the peer's own
        roster row) as a manager's ``ps`` reports them: a namesake binds to nothing."""
        fold = self.shell.managed_fold()
        console = self.shell.console_screen()
        snap = console.snap if console is not None else None
        peer = next((q for q in snap.peers if q.id == peer_id), None) if snap is not None else None
        if fold is None or peer is None:
            return SeatBinding(None)
        return fold.bind(peer.id, peer.lifecycle_uid)

    def _agent_card(self, n: NeedsYou, snap: Snapshot, said: tuple[str, float] | None,
                    managed: bool) -> AgentCard:
        console = self.shell.console_screen()
        act = console.model.frames.agent(n.id) if console is not None else None
        d = doing_of(act)  # what its frames said last: the last tool, a failed run
        return AgentCard(n.id, n.name, n.role, n.condition_code, n.condition_message, n.condition_age_ms,
                         n.status_age_ms, said=said[0] if said else None,
                         said_age_ms=max(0.0, snap.now - said[1]) if said else None, managed=managed,
                         label=n.label, doing=doing_text(d, snap.now, card=True) if d else "",
                         doing_failed=d is not None and d.kind == "failed")

    def _last_said(self, snap: Snapshot, ids: set[str]) -> dict[str, tuple[str, float]]:
        """The newest row each waiting agent sent, over the last :data:`FEED_SCAN` rows; kept
        from one scan to the next, and scanned again only when the feed moved."""
        if snap.feed_end != self._said_at:
            feed = snap.feed
            start = max(0, len(feed) - FEED_SCAN) if self._said_at < 0 else max(
                0, len(feed) - (snap.feed_end - self._said_at), len(feed) - FEED_SCAN)
            for k in range(start, len(feed)):
                e = feed[k]
                if e.kind != "lifecycle" and not e.event and e.from_id:  # frames are not said
                    self._said[e.from_id] = (e.text, e.ts)
            self._said_at = snap.feed_end
            if len(self._said) > 4 * FEED_SCAN:  # senders that came and went
                self._said = {k: v for k, v in self._said.items() if k in ids}
        return {i: self._said[i] for i in ids if i in self._said}

    def _answer_note(self, card: AgentCard, n: NeedsYou, now: float, snap_now: float) -> None:
        a = self.answers.get(n.id)
        if a is None:
            return
        age = n.condition_age_ms
        if a.since is not None and age is not None and (snap_now - age) > a.since + 500:
            del self.answers[n.id]  # waiting on a new question since: a fresh card
            return
        ago = now - a.at
        if ago >= SETTLE_S:
            card.answer_note = (f"answered {int(ago)}s ago by you ({a.what}) — still waiting after "
                                f"{int(SETTLE_S)}s: the answer may not have been what it asked for")
        else:
            card.answer_note = f"answered {int(ago)}s ago by you — waiting for the agent to leave waiting"

    # -- excerpts -------------------------------------------------------------------------

    def _sync_peeks(self, want: dict[str, str | None]) -> None:
        for name in [n for n in self.peeks if n not in want]:
            self._close_peek(name)
        sessions = self.shell.reach_seats()
        if sessions is None:
            return
        for name, iid in want.items():
            if name not in self.peeks and len(self.peeks) < MAX_PEEKS:
                peek = self.peeks[name] = _Peek(sessions, name, iid)
                peek.link.start()
                self.peeks_opened += 1

    def _close_peek(self, name: str) -> None:
        peek = self.peeks.pop(name, None)
        if peek is not None:
            self.run_worker(peek.link.close(), group="triage-peek-close", exit_on_error=False)

    def _excerpt(self, card: AgentCard) -> None:
        peek = self.peeks.get(card.name)
        if peek is None:
            card.excerpt_note = "scroll to it to see its terminal"
            return
        pane = peek.pane
        mirror = pane.mirror
        stamp = (id(mirror), pane.bytes_fed, mirror.cursor)
        if stamp != peek.stamp:  # read the rows again only when the pane parsed something
            peek.stamp = stamp
            _x, y, _shown = mirror.cursor
            top = max(0, y + 1 - 2 * EXCERPT_LINES)  # the rows above the cursor, blank ones too
            rows = ["".join(t for t, _ in mirror.runs(r)).rstrip() for r in range(top, min(y + 1, mirror.rows))]
            fresh = [safe(line, 400) for line in excerpt_of(rows, None)]
            if fresh or id(mirror) == peek.mirror_id:  # a fresh mirror, still blank: keep the last
                peek.excerpt = fresh
            peek.mirror_id = id(mirror)
        card.excerpt = peek.excerpt
        card.excerpt_note = safe(peek.note, 120) if peek.note else "live, read-only"

    # -- actions --------------------------------------------------------------------------

    def _console_session(self):
        console = self.shell.console_screen()
        return console.session if console is not None else None

    def actions_for(self, card: AgentCard | RunCard | None) -> list[Action]:
        if card is None:
            return []
        session = self._console_session()
        if isinstance(card, RunCard):
            ro = read_only_reason(session) if session is not None else "open a space first"
            return [Action("⏎", "answer the run's checkpoint", f"read-only - {ro}" if ro else None)]
        inp = refusal(session, "input")
        bound = None if card.managed else self._binding(card.peer_id)
        if bound is not None and bound.ambiguous:
            unbound = f"{len(bound.candidates)} managers claim this seat (pick one with cotal ps and --on)"
        else:
            unbound = "not a managed seat"
        if not card.managed:
            inp = inp or (f"{unbound}: no terminal to type into" if bound is None or not bound.ambiguous
                          else unbound)
        stop = refusal(session, "stop") or (None if card.managed else unbound)
        op = session.operator if session is not None else None
        dm = "sending is not available in this console" if op is None else op.refusal()
        seat = None if card.managed else "not a managed seat"
        return [Action("y", "y⏎", inp), Action("n", "n⏎", inp), Action("⏎", "Enter", inp),
                Action("⎋", "Esc", inp), Action("1-9", "a digit", inp), Action("i", "type a line", inp),
                Action("r", "DM reply", dm), Action("a", "attach", seat), Action("p", "peek", seat),
                Action("D", "stop", stop)]

    def _selected(self) -> AgentCard | RunCard | None:
        return self.query_one(TriageList).selected()

    def action_action_step(self, delta: int) -> None:
        acts = self.actions_for(self._selected())
        if acts:
            self.action_index = (self.action_index + delta) % len(acts)
            self.refresh_cards()

    def action_enter(self) -> None:
        if self.pending is not None:
            self._send(self.pending)
            return
        card = self._selected()
        if isinstance(card, RunCard):
            self._answer_run(card)
            return
        acts = self.actions_for(card)
        if not acts:
            return
        act = acts[min(self.action_index, len(acts) - 1)]
        {"y": lambda: self.action_answer("y"), "n": lambda: self.action_answer("n"),
         "⏎": lambda: self._ask(card, "\r", False, False), "⎋": lambda: self._ask(card, "\x1b", False, False),
         "1-9": lambda: self.say("press the digit to send it"), "i": self.action_type_line,
         "r": self.action_reply, "a": self.action_attach, "p": self.action_peek,
         "D": self.action_stop}[act.key]()

    def action_answer(self, key: str) -> None:
        card = self._selected()
        if isinstance(card, RunCard):
            self._answer_run(card)
            return
        if key in ("y", "n"):
            self._ask(card, key, True, True)
        else:
            self._ask(card, key, False, False)

    def _ask(self, card: AgentCard | RunCard | None, text: str, enter: bool, yn: bool) -> None:
        if not isinstance(card, AgentCard):
            self.say("nobody waiting under the cursor")
            return
        why = self.actions_for(card)[0].why
        if why is not None:
            self.say(f"answer: unavailable - {why}", True)
            return
        p = _Pending(card.peer_id, card.name, text, enter, yn)
        if yn and not self.ask_yn:
            self._send(p)
            return
        self.pending = p
        self.query_one("#triage-confirm", Static).update(
            f" send to {safe(card.name, 48)}: {key_label(p.data)}  = {shown_bytes(p.data)}  ·  Enter send"
            f"  ·  Esc cancel{'  ·  ! send, and do not ask again for y/n' if yn else ''}")

    def action_toggle_ask(self) -> None:
        p = self.pending
        if p is not None and p.yn:
            self.ask_yn = False
            self._remember_prefs()
            self._send(p)
        elif not self.ask_yn:
            self.ask_yn = True
            self._remember_prefs()
            self.say("y/n answers ask again before they are sent")

    def _remember_prefs(self) -> None:
        console = self.shell.console_screen()
        if console is not None:
            key = id(console.session)
            if key not in TRIAGE_PREFS:  # forgotten with the session (an id is reused after it)
                weakref.finalize(console.session, TRIAGE_PREFS.pop, key, None)
            TRIAGE_PREFS[key] = self.ask_yn

    def _cancel(self, why: str = "not sent") -> None:
        self.pending = None
        self.query_one("#triage-confirm", Static).update("")
        self.say(why)

    def _send(self, p: _Pending) -> None:
        self.pending = None
        self.query_one("#triage-confirm", Static).update("")
        session = self._console_session()
        why = refusal(session, "input")
        target = control_target(session) if session is not None else None
        if why is not None or target is None or session is None:
            self.say(f"answer: unavailable - {why}", True)
            return
        bound = self._binding(p.peer_id)
        seat = bound.seat
        if seat is None:  # the answer goes to the bound seat's manager and seat, or nowhere
            self.say(bound.refusal("answer", safe(p.name, 40)) or "answer: no seat", True)
            return
        console = self.shell.console_screen()
        snap = console.snap if console is not None else None
        n = next((x for x in snap.signals.needs_you if x.id == p.peer_id), None) if snap else None
        # the condition's own stamp, on the snapshot's clock (not ours: a snapshot is up to a
        # drain or a second old, which the age alone does not say)
        since = (snap.now - n.condition_age_ms
                 if snap is not None and n is not None and n.condition_age_ms is not None else None)

        async def work() -> None:
            from cotal_tui.actionlog import action_log

            log = action_log()  # what was answered, never the bytes typed (they may be secret)
            aid = log.record("answer", p.name, "requested", detail=f"{len(p.data)} bytes from triage",
                             mesh=target.space)
            try:
                r = await control.input_text(target, seat.name, p.text, enter=p.enter,
                                             on=seat.instance_id, expect=(seat.id, seat.lifecycle_uid),
                                             read_only=read_only_reason(session))
            except control.ControlError as e:
                log.settle(aid, "failed", detail=e.code)
                self.say(f"answer to {p.name}: {e.message}", True)
                return
            except Exception as e:  # noqa: BLE001 - an answer never takes the console down
                log.settle(aid, "failed", detail=type(e).__name__)
                self.say(f"answer to {p.name}: {type(e).__name__}: {safe(str(e), 200)}", True)
                return
            log.settle(aid, "done")
            self.answers[p.peer_id] = _Answer(time.time(), since, key_label(p.data))
            self.say(f"sent {key_label(p.data)} ({r.bytes} bytes) to {p.name}")
            self.refresh_cards()

        self.say(f"sending {key_label(p.data)} to {p.name}…")
        self.run_worker(work(), group="triage-answer", exit_on_error=False)

    def action_type_line(self) -> None:
        card = self._selected()
        if not isinstance(card, AgentCard):
            return
        why = self.actions_for(card)[0].why
        if why is not None:
            self.say(f"type: unavailable - {why}", True)
            return
        self._typing_for = card.peer_id
        box = self.query_one("#triage-input", Input)
        box.value = ""
        box.display = True
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        box = self.query_one("#triage-input", Input)
        box.display = False
        self.query_one(TriageList).focus()
        card = next((c for c in self.cards if isinstance(c, AgentCard) and c.peer_id == self._typing_for), None)
        self._typing_for = None
        if not event.value:
            self.say("nothing typed, nothing sent")
            return
        self._ask(card, event.value, True, False)

    def action_reply(self) -> None:
        card = self._selected()
        console = self.shell.console_screen()
        if not isinstance(card, AgentCard) or console is None:
            return
        why = self.actions_for(card)[6].why
        if why is not None:
            self.say(f"reply: unavailable - {why}", True)
            return
        from cotal_tui.screens.compose import dm_target

        self.app.pop_screen()
        console.open_composer(dm_target(card.peer_id, card.name))

    def _seat_action(self, verb: str) -> AgentCard | None:
        card = self._selected()
        if not isinstance(card, AgentCard):
            self.say(f"{verb}: nobody waiting under the cursor")
            return None
        if not card.managed:
            why = self._binding(card.peer_id).refusal(verb, safe(card.name, 40))
            self.say(why or f"{verb}: {card.name} is not a managed seat", True)
            return None
        return card

    def action_activity(self) -> None:
        """``A``: the activity lens of the agent under the cursor."""
        card = self._selected()
        session = self._console_session()
        if not isinstance(card, AgentCard) or session is None:
            self.say("activity: nobody waiting under the cursor")
            return
        from cotal_tui.screens.activity import open_activity

        open_activity(self.app, session, card.peer_id)

    def action_attach(self) -> None:
        card = self._seat_action("attach")
        seat = self._binding(card.peer_id).seat if card is not None else None
        if seat is not None:  # the bound seat on its own manager
            self.shell.open_seat(seat.name, instance_id=seat.instance_id)

    def action_peek(self) -> None:
        card = self._seat_action("peek")
        seat = self._binding(card.peer_id).seat if card is not None else None
        if seat is not None:
            self.shell.open_seat(seat.name, peek=True, instance_id=seat.instance_id)

    def action_stop(self) -> None:
        card = self._seat_action("stop")
        if card is None:
            return
        bound = self._binding(card.peer_id)
        if bound.seat is None:
            self.say(bound.refusal("stop", safe(card.name, 40)) or "stop: no seat", True)
            return
        self.shell.controls.ask_stop(bound.seat.name, bound.seat)

    def _answer_run(self, card: RunCard) -> None:
        from cotal_tui.screens.runs import open_answer

        session = self._console_session()
        ro = read_only_reason(session) if session is not None else "open a space first"
        if ro is not None or session is None:
            self.say(f"answer: unavailable - read-only - {ro}", True)
            return
        view = session.model.runs_view()
        run = next((r for r in view.runs if r.key == (card.need.instance_id, card.need.run_id)), None)
        if run is None:
            self.say("that run is no longer reported by its manager")
            return
        open_answer(self.app, session, self.shell.runs, run, card.need.pause.step_key)

    def action_escape(self) -> None:
        box = self.query_one("#triage-input", Input)
        if box.display:
            box.display = False
            self._typing_for = None
            self.query_one(TriageList).focus()
            self.say("not typed")
            return
        if self.pending is not None:
            self._cancel("cancelled - nothing sent")
            return
        self.action_back()

    def action_back(self) -> None:
        if self.app.screen is self:
            self.app.pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.query_one("#triage-input", Input).has_focus and action not in ("escape",):
            return False  # the typed line keeps its keys
        if self.pending is not None and action not in ("enter", "escape", "toggle_ask", "back"):
            return False  # one question at a time: Enter sends, Esc cancels
        return True

    def say(self, text: str, error: bool = False) -> None:
        self.shell.notify_line(text, error)

    async def on_unmount(self) -> None:
        self._closing = True
        for name in list(self.peeks):
            peek = self.peeks.pop(name)
            await peek.link.close()


# console session → ask before y/n (the "don't ask again" toggle lives as long as the session)
TRIAGE_PREFS: dict[int, bool] = {}
