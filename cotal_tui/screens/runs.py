"""Workflow runs in the console: the runs lens (``R``, ``:runs``), a run's journal (Enter), and
the answer composer (``r`` on a run, ``a`` in the journal, ``r`` on a run's NEEDS-YOU card).

The screens read the session's model (``runs_view()``), fed by :class:`RunsDesk`'s poller
(attach/control/runs_poll.py) on a live session, or by a recording on a replay; they never wait on the
mesh on the event loop. Sending an answer is ``run-answer {runId, stepKey, value}`` through
:mod:`attach.control.runs` in a worker: ``by`` comes from the credential, never from us, and an error
is the manager's sentence. An answered step can be amended; the composer says which answer it
supersedes.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from attach.control.runs_poll import SILENT
from cotal_tui.shell import ShellScreen
from meshview.model.runs_state import (
    AnswerInvalid, JournalRow, Pause, RunsSnapshot, RunView, answer_value, short_run, wants_json,
)
from meshview.model.snapshot import Snapshot
from meshview.timefmt import age
from widgets.runs import JournalView, RunsList, deadline_phrase
from widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from attach.control.runs_poll import RunsPoller
    from cotal_tui.session import ConsoleSession

# (target, run_id, step_key, value, amend, instance_id) -> the manager's reply data
Answerer = Callable[..., Awaitable[Any]]

RUNS_HINTS = "enter journal  r answer  F5 ask now  esc back  ? help"
JOURNAL_HINTS = "a answer / amend  jk move  esc back  ? help"


def runs_note(view: RunsSnapshot) -> str | None:
    """The status bar's word on runs: stale, or which managers did not answer (None: fine)."""
    silent = view.silent
    if silent:
        quiet = [m for m in silent if m.error in (None, SILENT)]
        n = len(quiet)
        if n:
            return f"runs: {n} manager{'s' if n != 1 else ''} did not answer"
        n = len(silent)
        return f"runs: {n} manager{'s' if n != 1 else ''} refused run-ps (R shows why)"
    stale = view.stale_ms()
    if stale is not None:
        return f"runs stale {age(stale)}"
    return None


class RunsDesk:
    """The App's runs: one poller per session that can reach its managers, and the answer call.

    ``answerer`` defaults to :func:`attach.control.runs.run_answer`; ``client_for`` to the poll's
    target client. A session with no target (a replay, fixed test data) is never polled."""

    def __init__(self) -> None:
        self.pollers: dict[int, RunsPoller] = {}
        self.answerer: Answerer | None = None
        self.client_for: Callable[[Any, str], Any] | None = None

    def poller(self, session: ConsoleSession) -> RunsPoller | None:
        return self.pollers.get(id(session))

    def ensure(self, session: ConsoleSession) -> RunsPoller | None:
        """Start polling ``session``'s managers (once); None when it has no mesh behind it."""
        p = self.pollers.get(id(session))
        if p is not None or session.target is None or session.kind == "replay":
            return p
        from attach.control.runs_poll import RunsPoller, target_client

        client = (self.client_for or target_client)(session.target, session.space)
        p = RunsPoller(client, session.model)
        self.pollers[id(session)] = p
        p.start()

        def closed() -> None:
            p.close()
            self.pollers.pop(id(session), None)

        session.on_stop.append(closed)
        return p

    async def answer(self, session: ConsoleSession, run: RunView, step_key: str, value: Any,
                     amend: bool) -> Any:
        if session.target is None:
            raise AnswerInvalid("this console has no mesh to answer on (a replay shows what was)")
        fn = self.answerer
        if fn is None:
            from attach.control.runs import run_answer

            fn = run_answer
        from attach.control.runs_poll import call_target

        from cotal_tui.actionlog import action_log

        target = call_target(session.target, session.space, run.instance_id)
        log = action_log()  # the step answered, never the value (it may be anything)
        aid = log.record("run-amend" if amend else "run-answer", f"{run.run_id} {step_key}", "requested",
                         mesh=session.space)
        try:
            data = await fn(target, run.run_id, step_key, value, amend=amend, on=run.instance_id)
        except Exception as e:
            log.settle(aid, "failed", detail=getattr(e, "code", None) or type(e).__name__)
            raise
        log.settle(aid, "done")
        p = self.poller(session)
        if p is not None:
            p.want_status(run.instance_id, run.run_id)
        return data


class _RunsBase(ShellScreen):
    """A runs screen over the console: it follows the console's drain (``update_snapshot``)."""

    def __init__(self, session: ConsoleSession, desk: RunsDesk) -> None:
        super().__init__()
        self.session = session
        self.desk = desk
        self.view: RunsSnapshot | None = None

    def update_snapshot(self, snap: Snapshot) -> None:
        self.view = view = self.session.model.runs_view()
        bar = self.query_one(StatusBar)
        bar.update_snapshot(snap, None)
        bar.set_runs(runs_note(view))
        self.follow(view)

    def follow(self, view: RunsSnapshot) -> None:  # pragma: no cover - subclasses
        pass

    def refresh_now(self) -> None:
        self.update_snapshot(self.session.model.snapshot())

    def action_help(self) -> None:
        from cotal_tui.screens.help import HelpScreen, describe_bindings

        panel, panel_rows, global_rows = describe_bindings(self)
        self.app.push_screen(HelpScreen(panel, panel_rows, global_rows))

    def action_close(self) -> None:
        self.dismiss()

    def open_answer(self, run: RunView, step_key: str | None) -> None:
        open_answer(self.app, self.session, self.desk, run, step_key)


def open_answer(app: App[Any], session: ConsoleSession, desk: RunsDesk, run: RunView,
                step_key: str | None) -> bool:
    """The composer for ``step_key`` of ``run`` (its first open pause when None): an open pause
    is answered, a step settled by an answer is amended; anything else is said, not opened."""
    from cotal_tui.shell import shell_of

    pauses = run.pauses if run.state == "running" else ()
    if step_key is None:
        if not pauses:
            shell_of(app).notify_line(f"run {short_run(run.run_id)} has no open checkpoint "
                                      f"({run.state})")
            return False
        step_key = pauses[0].step_key
    pause = next((p for p in pauses if p.step_key == step_key), None)
    row = next((r for r in run.journal or () if r.kind == "step" and r.step_key == step_key), None)
    if pause is None and (row is None or row.answer_id is None):
        shell_of(app).notify_line(f"{step_key} is not waiting for an answer and has none to amend")
        return False
    app.push_screen(AnswerScreen(session, desk, run, step_key, pause, row))
    return True


class RunsScreen(_RunsBase):
    """``R``: every run the managers report (state, holder, epoch, journal height, age, fork)."""

    CSS_PATH = "runs.tcss"
    BINDINGS = [
        Binding("escape,R,q", "close", "close the runs lens", id="runs.close"),
        Binding("question_mark", "help", "help", id="runs.help"),
    ]

    def compose(self) -> ComposeResult:
        yield RunsList(id="runs-list", classes="panel")
        yield StatusBar(id="runs-status")

    def on_mount(self) -> None:
        self.query_one(StatusBar).set_hints(RUNS_HINTS)
        self.query_one(RunsList).focus()
        self.refresh_now()

    def follow(self, view: RunsSnapshot) -> None:
        self.query_one(RunsList).update_runs(view)

    @on(RunsList.Selected)
    def _journal(self, event: RunsList.Selected) -> None:
        key = event.key
        if isinstance(key, tuple):
            iid, rid = key
            self.app.push_screen(JournalScreen(self.session, self.desk, rid, iid))

    @on(RunsList.Answer)
    def _answer(self, event: RunsList.Answer) -> None:
        run = self.view.run(event.run_id) if self.view is not None else None
        if run is not None:
            self.open_answer(run, None)

    @on(RunsList.Refresh)
    def _refresh(self) -> None:
        p = self.desk.poller(self.session)
        if p is None:
            self.shell.notify_line("runs: nothing to ask (no mesh behind this console)")
        else:
            p.poke()


class JournalScreen(_RunsBase):
    """Enter on a run: its journal (``run-status``), refreshed while the poll runs."""

    CSS_PATH = "runs.tcss"
    BINDINGS = [
        Binding("escape,q", "close", "back to the runs", id="journal.close"),
        Binding("question_mark", "help", "help", id="journal.help"),
    ]

    def __init__(self, session: ConsoleSession, desk: RunsDesk, run_id: str, instance_id: str) -> None:
        super().__init__(session, desk)
        self.run_id, self.instance_id = run_id, instance_id

    def compose(self) -> ComposeResult:
        yield JournalView(self.run_id, self.instance_id, id="journal", )
        yield StatusBar(id="runs-status")

    def on_mount(self) -> None:
        self.query_one(StatusBar).set_hints(JOURNAL_HINTS)
        self.query_one(JournalView).focus()
        p = self.desk.poller(self.session)
        if p is not None:
            p.want_status(self.instance_id, self.run_id)
        self.refresh_now()

    def follow(self, view: RunsSnapshot) -> None:
        self.query_one(JournalView).update_runs(view)

    @on(JournalView.Answer)
    def _answer(self, event: JournalView.Answer) -> None:
        run = self.query_one(JournalView).run
        if run is None:
            self.shell.notify_line("this run is no longer reported by its manager")
            return
        self.open_answer(run, event.step_key)


class AnswerScreen(ModalScreen[None]):
    """The answer composer for one step: the step key and prompt shown, free text (sent as a
    JSON string) or JSON (when the prompt's schema asks, or ``ctrl+t``), checked before it is
    sent. Enter sends, Esc cancels; the manager's refusal is shown here in its words."""

    CSS_PATH = "runs.tcss"
    BINDINGS = [
        Binding("escape", "cancel", "cancel", id="answer.cancel"),
        Binding("ctrl+t", "toggle_json", "text / JSON", id="answer.json"),
    ]

    def __init__(self, session: ConsoleSession, desk: RunsDesk, run: RunView, step_key: str,
                 pause: Pause | None, row: JournalRow | None) -> None:
        super().__init__()
        self.session, self.desk, self.run = session, desk, run
        self.step_key = step_key
        self.pause = pause
        self.amend = pause is None  # a settled, answered step: an amendment
        self.supersedes = row.answer_id if row is not None and self.amend else None
        self.schema = pause.schema if pause is not None else None
        self.as_json = wants_json(self.schema)
        self.sending = False
        self.result: Any = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="answer-box"):
            yield Static(self._facts(), id="answer-facts")
            yield Input(placeholder=self._placeholder(), id="answer-input")
            yield Static("", id="answer-error")
            yield Static(self._hint(), id="answer-hint")

    def on_mount(self) -> None:
        box = self.query_one("#answer-box")
        box.border_title = ("amend" if self.amend else "answer") + f" · run {short_run(self.run.run_id)}"
        self.query_one(Input).focus()

    def _facts(self) -> Text:
        from widgets.presentation import safe

        t = Text()
        t.append("step   ", style="dim")
        t.append(safe(self.step_key, 300) + "\n", style="bold")
        t.append("run    ", style="dim")
        t.append(safe(self.run.run_id, 80) + "\n")
        if self.pause is not None:
            t.append("asks   ", style="dim")
            t.append('"' + safe(self.pause.prompt, 400) + '"\n')
            if self.pause.addressee:
                t.append("to     ", style="dim")
                t.append(safe(self.pause.addressee, 60) + "\n")
            dl = deadline_phrase(self.pause, self.session.model.clock())
            if dl or self.pause.on_expiry:
                t.append("when   ", style="dim")
                t.append(" · ".join(x for x in (dl, f"on expiry {safe(self.pause.on_expiry, 24)}"
                                                if self.pause.on_expiry else None) if x) + "\n")
        if self.supersedes:
            t.append("amends ", style="dim")
            t.append(f"answer {safe(self.supersedes, 43)} (it is superseded, not erased)\n")
        return t

    def _placeholder(self) -> str:
        return ("a JSON value, e.g. {\"ok\": true}" if self.as_json
                else "your answer (sent as a JSON string)")

    def _hint(self) -> str:
        mode = "JSON" if self.as_json else "text"
        why = " (the prompt's schema asks for it)" if wants_json(self.schema) and self.as_json else ""
        return f"enter send · esc cancel · ctrl+t text/JSON · mode: {mode}{why}"

    def action_toggle_json(self) -> None:
        self.as_json = not self.as_json
        self.query_one(Input).placeholder = self._placeholder()
        self.query_one("#answer-hint", Static).update(self._hint())

    def action_cancel(self) -> None:
        self.dismiss()

    def _say(self, text: str) -> None:
        self.error = text
        self.query_one("#answer-error", Static).update(Text(text, style="bold red"))

    @on(Input.Submitted, "#answer-input")
    def _submit(self, event: Input.Submitted) -> None:
        if self.sending:
            return
        try:
            value = answer_value(event.value, as_json=self.as_json, schema=self.schema)
        except AnswerInvalid as e:
            self._say(str(e))
            return
        self.sending = True
        self._say("")
        self.query_one("#answer-error", Static).update(Text("sending…", style="dim"))
        self._send(value)

    @work(exclusive=True, group="run-answer", exit_on_error=False)
    async def _send(self, value: Any) -> None:
        from cotal_tui.shell import shell_of

        try:
            self.result = await self.desk.answer(self.session, self.run, self.step_key, value, self.amend)
        except Exception as e:  # noqa: BLE001 - the manager's sentence, here, never a traceback
            self.sending = False
            self._say(answer_error(e))
            return
        self.sending = False
        verb = "amended" if self.amend else "answered"
        shell_of(self.app).notify_line(f"{verb} {self.step_key} of run {short_run(self.run.run_id)}"
                                       f" with {_shown(value)}")
        self.dismiss()


def answer_error(e: BaseException) -> str:
    """The manager's sentence for a refused answer, with the §13.15 unbound-caller detail named
    (who the manager took the caller to be) when it gave one."""
    from attach.control.endpoint import UNBOUND_CALLER
    from attach.control.runs import RunsError
    from widgets.presentation import safe

    text = str(e) or "the answer was not sent"
    if isinstance(e, RunsError):
        for d in e.details:
            if isinstance(d, dict) and d.get("kind") == UNBOUND_CALLER:
                who = "/".join(safe(d.get(k), 60) for k in ("owner", "actor", "uid") if d.get(k))
                text += f" (unbound caller{': ' + who if who else ''}: no issued authority on this rail)"
        text = f"{e.code}: {text}"
    return text


def _shown(value: Any) -> str:
    s = json.dumps(value, ensure_ascii=False)
    return s if len(s) <= 60 else s[:59] + "…"
