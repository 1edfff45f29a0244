"""Control verbs in the console: stop (roster ``D``), spawn, status, input, ps, purge, delchan.

Every verb is one call through :mod:`attach.control.verbs` on a connection of its own, made from the
console's own target (same servers, creds, nkey, TLS): the observer's connection never carries
control. A verb runs in a worker and answers on the status line - progress, the outcome, or the
refusal in one sentence; nothing raises into the UI.

Destruction is never one keystroke away from a reflex: ``D`` opens a red overlay where ``y``
stops gracefully, ``f`` force-kills and ``n``/Esc cancel - Enter does nothing there. ``purge``
and ``delchan`` are armed only by typing the exact space or channel name; a near miss does
nothing. A read-only console lists the mutating verbs as unavailable with the reason (the
reads, ``status`` and ``ps``, stay available).
"""

from __future__ import annotations

import asyncio
import dataclasses
from functools import partial
from typing import Any, Callable

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import Hit
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from rich.text import Text

from attach.control import verbs as control
from attach.control.managed import ManagedSeat
from meshview.model.resolve import AmbiguousName, Candidate, UnknownName, resolve
from cotal_tui.session import ConsoleSession
from cotal_tui.shell import ConsoleShell, shell_of
from meshview.link.connect import ConnectTarget
from widgets.channel_tabs import ChannelTabs
from widgets.line_list import Item, LineList

SEEN_ON_ROSTER_S = 10.0  # after a spawn joined, how long to wait for it to show on the roster

# verb -> (usage, what it does, mutates)
CONTROL_VERBS: dict[str, tuple[str, str, bool]] = {
    "spawn": ("spawn persona [name]", "start a managed seat (echo, dashboard, bash); waits for it to join", True),
    "stop": ("stop agent", "stop a managed seat: y graceful, f force (like D on the roster)", True),
    "status": ("status agent", "one managed seat's row, from the manager hosting it", False),
    "input": ("input agent text", "type text into a managed seat's terminal, then Enter", True),
    "ps": ("ps", "every manager's seats; silent and refusing managers are named (d: deregister a gone one)", False),
    "managers": ("managers", "the managers themselves: connectors, classSpawn, reconciliation failures", False),
    "deregister-instance": ("deregister-instance INSTANCE",
                            "remove a gone manager's stale registration (type its id to confirm)", True),
    "purge": ("purge", "clear the space's chat history (type the space name to confirm)", True),
    "delchan": ("delchan #channel", "delete a channel's history and registry entry (type its name)", True),
}


# ---- what the console can do --------------------------------------------------------------


def _session(app: ConsoleShell) -> ConsoleSession | None:
    screen = app.console_screen()
    return screen.session if screen is not None else None


def control_target(session: ConsoleSession) -> ConnectTarget | None:
    """The console's own target, aimed at the space it watches (None: no control path)."""
    target = session.target
    if target is None:
        return None
    from attach.control.connection import session_target  # the control role: it mints its own instrument

    return dataclasses.replace(session_target(target), space=session.space or target.space)


def read_only_reason(session: ConsoleSession) -> str | None:
    op = session.operator
    return op.read_only if op is not None else None


def refusal(session: ConsoleSession | None, verb: str) -> str | None:
    """Why ``verb`` cannot run in this console, or None."""
    if session is None:
        return "open a space first"
    if control_target(session) is None:
        return "no control path - this console has no mesh target to call managers through"
    ro = read_only_reason(session)
    if ro is not None and CONTROL_VERBS[verb][2]:
        return f"read-only - {ro}"
    return None


def _poke(session: ConsoleSession) -> None:
    poller = session.managed
    if poller is not None:
        poller.poke()  # the roster's managed markers follow at once, not at the next period


# ---- the overlays ---------------------------------------------------------------------------


class StopConfirm(ModalScreen[str | None]):
    """Red overlay for one seat: ``y`` graceful, ``f`` force, ``n``/Esc cancel. Enter is bound
    to nothing but a reminder, so a reflex Enter never kills."""

    CSS_PATH = "control.tcss"
    BINDINGS = [
        Binding("y", "choose('graceful')", "graceful stop", id="stop.graceful"),
        Binding("f", "choose('force')", "force kill", id="stop.force"),
        Binding("n,escape", "choose('')", "cancel", id="stop.cancel"),
        Binding("enter", "enter", "does nothing", show=False, id="stop.enter"),
    ]

    def __init__(self, name: str, where: str = "") -> None:
        super().__init__()
        self.seat = name
        self.where = where

    def compose(self) -> ComposeResult:
        with Vertical(id="stop-box"):
            yield Static(f"stop {self.seat}?", id="stop-title")
            if self.where:
                yield Static(self.where, id="stop-where")
            yield Static("y  graceful: SIGHUP + SIGTERM, SIGKILL after the manager's grace\n"
                         "f  force: SIGKILL now\n"
                         "n  or Esc: cancel", id="stop-keys")
            yield Static("", id="stop-hint")

    def action_choose(self, how: str) -> None:
        self.dismiss(how or None)

    def action_enter(self) -> None:
        self.query_one("#stop-hint", Static).update("Enter does not stop a seat: y, f, or n")


class TypedConfirm(ModalScreen[bool]):
    """Armed only by the exact name typed out; a near miss leaves it open and does nothing."""

    CSS_PATH = "control.tcss"
    BINDINGS = [Binding("escape", "cancel", "cancel", id="confirm.cancel")]

    def __init__(self, title: str, detail: str, expect: str, *, also: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.title_text = title
        self.detail = detail
        self.expect = expect
        self.accepted = {expect, *also}
        self.misses = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(self.title_text, id="confirm-title")
            yield Static(self.detail, id="confirm-detail")
            yield Input(placeholder=f"type {self.expect} to confirm, Esc to cancel", id="confirm-input")
            yield Static("", id="confirm-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if event.value in self.accepted:
            self.dismiss(True)
            return
        self.misses += 1  # a near miss is not a yes: nothing happens
        self.query_one("#confirm-hint", Static).update(f"that is not {self.expect}: nothing was deleted")

    def action_cancel(self) -> None:
        self.dismiss(False)


class PsBody(LineList):
    """The ``cotal ps`` table, one row a line (j/k, paging), no cursor highlight."""

    show_cursor = False

    def __init__(self, lines: list[str]) -> None:
        super().__init__(id="ps-body")
        self.rows = lines

    def build(self, width: int) -> list[Item]:
        out: list[Item] = []
        for i, line in enumerate(self.rows):
            t = Text(line, style="bold" if i == 0 and line.startswith("NAME") else
                     ("yellow" if line.startswith("manager ") else ""))
            t.truncate(width, overflow="ellipsis")
            out.append((i, [t]))
        return out

    def on_mount(self) -> None:
        self.rebuild()


class PsScreen(ModalScreen[None]):
    """``:ps`` as the table ``cotal ps`` prints (NAME KIND PROCESS MESH MANAGER), then each
    manager that refused or stayed silent, named (``:managers``: each manager's own status). Esc
    or q closes it; ``d`` offers to deregister a slot whose probe said ``gone``, behind a typed
    confirmation."""

    CSS_PATH = "control.tcss"
    BINDINGS = [Binding("escape,q", "close", "close", id="ps.close"),
                Binding("d", "deregister", "deregister a gone manager", id="ps.deregister")]

    def __init__(self, lines: list[str], title: str, gone: list[str] | None = None,
                 deregister: Callable[[str], Any] | None = None) -> None:
        super().__init__()
        self.lines, self.title_text = lines, title
        self.gone = list(gone or [])
        self.deregister_cb = deregister

    def compose(self) -> ComposeResult:
        body = PsBody(self.lines)
        body.border_title = self.title_text
        body.border_subtitle = "d deregister gone · esc close" if self.gone else "esc close"
        yield body

    def action_deregister(self) -> None:
        if not self.gone or self.deregister_cb is None:
            shell_of(self.app).notify_line("deregister: no manager here is gone (only a slot the broker "
                                           "reports empty can be deregistered)", True)
            return
        self.deregister_cb(self.gone[0])

    def on_mount(self) -> None:
        self.query_one(PsBody).focus()

    def table(self) -> list[str]:
        return list(self.lines)

    def action_close(self) -> None:
        self.dismiss()


def gone_slots(result: Any) -> list[str]:
    """The silent slots whose probe said ``gone``: the only ones deregistration is offered for."""
    return [m.instance_id for m in result.managers if m.state == "silent" and m.liveness == "gone"]


def managers_table(result: Any) -> list[str]:
    """``cotal status``'s lines for every manager (status records, silent slots, strays)."""
    from attach.control.seat_text import manager_line, status_lines, stray_lines

    out: list[str] = []
    for m in result.managers:
        if m.state == "answered":
            out += status_lines(m)
        else:
            out.append(manager_line(m, control.PS_DEADLINE_MS / 1000).replace(": refused ps (", ": refused status ("))
    return out + stray_lines(result)


def ps_table(result: Any) -> list[str]:
    """``cotal ps --wide``'s own rendering of a ``ps`` result, as lines (one source of the columns
    and of the facts line under each seat)."""
    import io

    from attach.control.seat_text import render_ps

    out = io.StringIO()
    render_ps(result, control.PS_DEADLINE_MS / 1000, out, wide=True)
    return out.getvalue().splitlines()


# ---- the verbs --------------------------------------------------------------------------------


class Controls:
    """The control verbs of one app (``CotalApp.controls``); everything reports through the
    shell's ``notify_line``."""

    def __init__(self, app: App) -> None:
        self.app = app

    @property
    def shell(self) -> ConsoleShell:
        return shell_of(self.app)

    def say(self, text: str, error: bool = False) -> None:
        self.shell.notify_line(text, error)

    def _ready(self, verb: str) -> tuple[ConsoleSession, ConnectTarget] | None:
        session = _session(self.shell)
        why = refusal(session, verb)
        target = control_target(session) if session is not None else None
        if why is not None or session is None or target is None:
            self.say(f"{verb}: unavailable - {why}", True)
            return None
        return session, target

    def _run(self, verb: str, work: Callable[[], Any], *, logged: str | None = None) -> None:
        """Run ``work`` as the verb's worker; ``logged``: the target the action log names (the
        verb changes something: cotal_tui/actionlog.py), and ``work`` may return its outcome."""
        from cotal_tui.actionlog import action_log

        log = action_log("console")
        what = {"deregister-instance": "deregister"}.get(verb, verb)
        session = _session(self.shell)
        mesh = session.space if session is not None else None
        aid = log.record(what, logged, "requested", mesh=mesh) if logged is not None else None

        def settle(outcome: str, detail: str | None = None) -> None:
            if aid is not None:
                log.settle(aid, outcome, detail=detail)

        async def guarded() -> None:
            try:
                got = await work()
                settle(got if isinstance(got, str) else "done")
            except control.ControlError as e:
                settle("refused" if e.code in ("read-only", "bad-request", "permission-denied")
                       else "failed", e.message)
                self.say(f"{verb}: {e.message}", True)
            except Exception as e:  # noqa: BLE001 - a verb never takes the console down
                from meshview.wire.sanitize import inline as clean

                settle("failed", str(e))
                self.say(f"{verb}: {type(e).__name__}: {clean(str(e), 300)}", True)
            except BaseException:
                settle("uncertain", "the console stopped before the answer")
                raise

        self.app.run_worker(guarded(), group=f"control-{verb}", exit_on_error=False)

    # -- stop (roster D, :stop) --

    def ask_stop(self, name: str, seat: ManagedSeat | None = None) -> None:
        """Open the red overlay for ``name`` (``seat``: its ``ManagedSeat``, if the fold knows it)."""
        if self._ready("stop") is None:
            return
        where = ""
        if seat is not None:
            where = f"{seat.runtime} seat on manager {seat.instance_id}"

        def chosen(how: str | None) -> None:
            if how:  # a known seat is bound by its id: another one under its name is refused
                self.stop(name, force=how == "force", on=seat.instance_id if seat is not None else None,
                          expect=(seat.id, seat.lifecycle_uid) if seat is not None else None)
            else:
                self.say(f"stop {name}: cancelled")

        self.app.push_screen(StopConfirm(name, where), chosen)

    def stop(self, name: str, *, force: bool = False, on: str | None = None,
             expect: tuple[str, str | None] | None = None) -> None:
        ready = self._ready("stop")
        if ready is None:
            return
        session, target = ready

        async def work() -> None:
            self.say(f"{'force-killing' if force else 'stopping'} {name}…")
            r = await control.stop(target, name, force=force, on=on, read_only=read_only_reason(session),
                                   expect=expect)
            _poke(session)
            if r.force:
                self.say(f"force-killed {name}")
            elif r.graceful:
                self.say(f"stopped {name}")
            else:
                self.say(f"stopped {name} (it outlived the grace and was killed)")

        self._run("stop", work, logged=name)

    # -- spawn, status, input, ps --

    def spawn(self, persona: str, name: str | None = None) -> None:
        ready = self._ready("spawn")
        if ready is None:
            return
        session, target = ready

        async def work() -> str:
            self.say(f"spawning {persona}… (the manager answers on join, exit, or its readiness deadline)")
            r = await control.spawn(target, persona, name=name, read_only=read_only_reason(session),
                                    progress=lambda line: self.say(line))
            if not r.joined:
                if r.outcome == "exited":
                    code = r.data.get("exitCode")
                    why = f" (exit status {code})" if isinstance(code, int) else ""
                    self.say(f"spawn: {r.name} exited before it joined the mesh{why}", True)
                elif r.outcome == "cancelled":
                    self.say(f"spawn: {r.name} was stopped before it joined the mesh", True)
                else:
                    self.say(f"spawn: {r.name} did not join within {r.readiness_ms / 1000:g} s; "
                             "it may still come up - see ps", True)
                    return "uncertain"
                return "failed"
            _poke(session)
            model = session.model
            loop = asyncio.get_running_loop()
            end = loop.time() + SEEN_ON_ROSTER_S
            while loop.time() < end:
                if any(p.id == r.principal and p.status != "offline" for p in model.snapshot().agents):
                    self.say(f"spawned {r.name}")
                    return "joined"
                await asyncio.sleep(0.1)
            self.say(f"spawned {r.name} (joined the mesh; not on this roster yet)")
            return "joined"

        self._run("spawn", work, logged=name or persona)

    def status(self, name: str) -> None:
        ready = self._ready("status")
        if ready is None:
            return
        _, target = ready

        async def work() -> None:
            from meshview.wire.sanitize import inline as clean

            row = await control.status(target, name)
            self.say(clean(control.status_line(row)))  # the row is the manager's

        self._run("status", work)

    def input(self, name: str, text: str) -> None:
        ready = self._ready("input")
        if ready is None:
            return
        session, target = ready

        async def work() -> None:
            r = await control.input_text(target, name, text, read_only=read_only_reason(session))
            self.say(f"typed {r.bytes} bytes into {r.name}")  # the name the user typed

        self._run("input", work, logged=name)  # the log names the seat, never the text

    def ps(self) -> None:
        ready = self._ready("ps")
        if ready is None:
            return
        session, target = ready

        async def work() -> None:
            r = await control.ps(target)
            _poke(session)
            if not r.managers:
                self.say("ps: no manager is registered in this space", True)
                return
            issues = [f"{m.instance_id}: refused ({m.code})" for m in r.refused]
            silent = r.silent
            if silent:
                stale = [m.instance_id for m in silent if m.stale]
                quiet = [m.instance_id for m in silent if not m.stale]
                if stale:
                    issues.append(f"{len(stale)} stale registration(s): {', '.join(stale)}")
                if quiet:
                    issues.append(f"{len(quiet)} manager(s) gave no answer: {', '.join(quiet)}")
            from meshview.wire.sanitize import inline as clean

            rows = r.rows
            head = ("agents: " + ", ".join(clean(x.name, 64) for x in rows)) if rows else "no managed agents"
            self.say(head + (f" ({'; '.join(issues)})" if issues else ""), bool(issues))
            n = len(r.managers)
            title = (f"ps · {len(rows)} seat{'s' if len(rows) != 1 else ''} · "
                     f"{n} manager{'s' if n != 1 else ''}")
            self.app.push_screen(PsScreen(ps_table(r), title, gone_slots(r), self.ask_deregister))

        self._run("ps", work)

    def managers(self) -> None:
        ready = self._ready("managers")
        if ready is None:
            return
        _, target = ready

        async def work() -> None:
            from attach.control.instances import manager_status

            r = await manager_status(target)
            n = len(r.managers)
            gone = gone_slots(r)
            self.say(f"{n} manager{'s' if n != 1 else ''}" + (f" ({len(gone)} gone)" if gone else ""), bool(gone))
            self.app.push_screen(PsScreen(managers_table(r), f"managers · {n}", gone, self.ask_deregister))

        self._run("managers", work)

    def ask_deregister(self, instance_id: str) -> None:
        """The typed confirmation for one gone slot: its id's first 8 characters, the whole id,
        or ``yes``; then the guarded deregistration (which still refuses a live instance)."""
        ready = self._ready("deregister-instance")
        if ready is None:
            return
        session, target = ready
        try:
            control.check_instance(instance_id)
        except control.ControlError as e:
            self.say(f"deregister-instance: {e.message}", True)
            return
        prefix = instance_id[:8]

        def chosen(ok: bool | None) -> None:
            if not ok:
                self.say(f"deregister-instance {prefix}: cancelled - nothing was removed")
                return

            async def work() -> None:
                from attach.control.instances import deregister_instance

                rep = await deregister_instance(target, instance_id, read_only=read_only_reason(session))
                _poke(session)
                self.say(f"deregistered manager {instance_id} (spec revision {rep.removed_spec_revision})")

            self._run("deregister-instance", work, logged=instance_id)

        self.app.push_screen(TypedConfirm(
            f"deregister manager {instance_id}?",
            "the broker reports nothing subscribed on its rail; its registration is removed (it re-registers "
            "on its next start). A live instance is still refused.",
            prefix, also=("yes", instance_id)), chosen)

    # -- purge, delchan: typed confirmations --

    def leave_tabs(self, channels: list[str]) -> None:
        """The deleted channels leave the channel list; a tab showing one goes back to all."""
        screen = self.shell.console_screen()
        if screen is None:
            return
        screen.session.model.forget_channels(channels)
        tabs = screen.query_one("#tabs", ChannelTabs)
        if tabs.active in channels:
            tabs.select(None)

    def ask_purge(self) -> None:
        ready = self._ready("purge")
        if ready is None:
            return
        session, target = ready
        space = target.space

        def chosen(ok: bool | None) -> None:
            if not ok:
                self.say("purge: cancelled - nothing was deleted")
                return

            async def work() -> None:
                n = await control.purge(target, read_only=read_only_reason(session))
                self.leave_tabs([c.name for c in session.model.snapshot().channels])
                self.say(f"purged {space} · {n} messages")

            self._run("purge", work, logged=space)

        self.app.push_screen(TypedConfirm(
            f"purge the chat history of space {space}?",
            "every retained message of every channel goes; channel settings stay",
            space), chosen)

    def ask_delchan(self, channel: str) -> None:
        ready = self._ready("delchan")
        if ready is None:
            return
        session, target = ready
        try:
            ch = control.check_channel(channel)
        except control.ControlError as e:
            self.say(f"delchan: {e.message}", True)
            return

        def chosen(ok: bool | None) -> None:
            if not ok:
                self.say(f"delchan #{ch}: cancelled - nothing was deleted")
                return

            async def work() -> None:
                n = await control.delchan(target, ch, read_only=read_only_reason(session))
                self.leave_tabs([ch])
                self.say(f"deleted #{ch} · {n} messages purged")

            self._run("delchan", work, logged=f"#{ch}")

        self.app.push_screen(TypedConfirm(
            f"delete #{ch}?", f"its retained messages and its registry entry in {target.space}",
            ch, also=(f"#{ch}",)), chosen)


# ---- the palette: typed verbs and their rows ---------------------------------------------------


def control_hit(app: ConsoleShell, q: str) -> Hit | None:
    """One hit for a control verb typed out (``spawn echo w3``, ``delchan #doomed``), or None
    when ``q`` is not one. The hit runs it on selection or says, in one sentence, why not."""
    verb, _, rest = q.strip().partition(" ")
    if verb not in CONTROL_VERBS:
        return None
    c = app.controls
    words = rest.split()
    why = refusal(_session(app), verb)

    def refuse(text: str) -> Hit:
        return Hit(0.9, q, lambda: c.say(text, True), help=text)

    if why is not None:
        return refuse(f"{verb}: unavailable - {why}")
    usage = CONTROL_VERBS[verb][0]
    if verb == "ps":
        return Hit(1.0, q, c.ps, help=CONTROL_VERBS[verb][1])
    if verb == "managers":
        return Hit(1.0, q, c.managers, help=CONTROL_VERBS[verb][1])
    if verb == "purge":
        return Hit(1.0, q, c.ask_purge, help="asks for the space name first")
    if not words:
        return refuse(f"usage: {usage}")
    if verb == "spawn":
        if len(words) > 2:
            return refuse(f"usage: {usage}")
        persona, name = words[0], (words[1] if len(words) > 1 else None)
        return Hit(1.0, q, lambda: c.spawn(persona, name),
                   help=f"spawn {persona}" + (f" as {name}" if name else ""))
    if verb == "delchan":
        return Hit(1.0, q, lambda: c.ask_delchan(words[0]), help="asks for the channel name first")
    if verb == "deregister-instance":
        return Hit(1.0, q, lambda: c.ask_deregister(words[0]), help="asks for the instance id first")
    name = words[0].removeprefix("@")
    if verb == "status":
        return Hit(1.0, q, lambda: c.status(name), help=f"{name}'s row from its manager")
    if verb == "stop":
        try:
            seat = _seat(app, name)
        except AmbiguousName as e:
            return refuse(f"stop: {e}")
        return Hit(1.0, q, lambda: c.ask_stop(seat.name if seat else name, seat), help="y graceful, f force, n cancel")
    text = rest.strip()[len(words[0]):].strip()
    if not text:
        return refuse(f"usage: {usage}")
    return Hit(1.0, q, lambda: c.input(name, text), help=f"type into {name}, then Enter")


def control_rows(app: ConsoleShell) -> list[tuple[str, str, Callable[[], Any]]]:
    """The control verbs as palette rows; an unavailable one says why instead of hiding."""
    c = app.controls
    session = _session(app)
    rows: list[tuple[str, str, Callable[[], Any]]] = []
    for verb, (usage, what, _) in CONTROL_VERBS.items():
        why = refusal(session, verb)
        if why is not None:
            rows.append((verb, f"unavailable - {why}", partial(c.say, f"{verb}: unavailable - {why}", True)))
        elif verb == "ps":
            rows.append((verb, what, c.ps))
        elif verb == "managers":
            rows.append((verb, what, c.managers))
        elif verb == "purge":
            rows.append((verb, what, c.ask_purge))
        else:
            rows.append((verb, f"{usage} - {what}", partial(c.say, f"type it out: {usage}")))
    return rows


def _seat(app: ConsoleShell, name: str) -> ManagedSeat | None:
    """The one seat ``name`` (or a seat id) means in the console's ``ps`` fold; None when the
    fold does not know it (the verb then locates it itself). Two seats is a refusal."""
    fold = app.managed_fold()
    if fold is None:
        return None
    cands = [Candidate(s.principal, s.name, s.process, f"manager {s.instance_id}", s) for s in fold.seats()]
    try:
        return resolve(name, cands, what="seat").item
    except UnknownName:
        return None


def stop_from_roster(app: ConsoleShell, peer_id: str, name: str) -> None:
    """Roster ``D``: the overlay for a managed row; any other row is refused with a notice."""
    fold = app.managed_fold()
    console = app.console_screen()
    snap = console.snap if console is not None else None
    peer = next((p for p in snap.peers if p.id == peer_id), None) if snap is not None else None
    bound = fold.bind(peer_id, peer.lifecycle_uid if peer is not None else None) if fold is not None else None
    seat = bound.seat if bound is not None else None
    if seat is None:
        if bound is not None and bound.ambiguous:
            app.notify_line(bound.refusal("stop", name) or "stop: ambiguous", True)
            return
        why = "no manager's ps has answered yet" if fold is None or not fold.rounds else "no manager hosts it"
        app.notify_line(f"stop: {name} is not a managed seat ({why})", True)
        return
    app.controls.ask_stop(seat.name, seat)
