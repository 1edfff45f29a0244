"""``cotal chat``: a line-mode participant for ssh sessions and tmux splits.

The live plain stream (the same observer, model and renderer as ``cotal watch --plain``) prints
above a prompt-toolkit prompt; a half-typed line stays intact on the prompt while lines arrive.
Sends go through the console's :class:`~meshview.act.participant.Participant`, so the operator is
invisible until the first send, then a presence peer until leaving (Ctrl-D or ``/quit``
publishes its offline record). Its own messages are not echoed locally: the observer sees them
on the tap like anyone else's, so each shows exactly once. A send the broker did not acknowledge
puts its line back on the prompt for editing; sent again unchanged it re-sends the same envelope
(same ``Nats-Msg-Id``), so it is stored once. An ``--as`` identity that a live agent or another
console holds is refused at the start (exit 1) and by every send.

    #channel text     post to a channel         text            post to the current channel
    #channel          switch channel            /join #channel  switch channel
    /dm @agent text   a DM to an agent          /ask @role text anycast: one holder answers
    /ask --queue @role text                     queue it for a future holder of the role
    /reply text       answer the last DM or @mention addressed to you
    /who  /help  /quit                          //text          post text starting with /

Why not :mod:`meshview.lines.lineout` here: the terminal is both the reader of the stream and the
prompt, and prompt-toolkit must erase and redraw the prompt around every batch of lines. A
partial non-blocking write would land after the redraw and tear the prompt, so lines go
through prompt-toolkit's stdout proxy, which batches them (one redraw per batch) off the
event loop's back. Every wire string is neutralized by the stream renderer before it gets
there; only our own colour codes reach the terminal raw.

Size: over 500 lines because the line-mode participant is one prompt loop (parsing, completion,
the stream above the prompt, leaving cleanly); its parts are small and only this command uses
them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshview.act.send import Send
from meshview.errors import swallowed
from meshview.wire.outbound import is_mention_name
from meshview.wire.subjects import is_channel_name

DEFAULT_CHANNEL = "general"
LEAVE_BUDGET = 5.0  # seconds a queued send may still take after Ctrl-D / /quit
COMMANDS = ("/dm", "/ask", "/reply", "/join", "/who", "/help", "/quit")
HELP = (
    "#channel text     post to a channel (text alone posts to the current channel)",
    "#channel          switch the current channel (also /join #channel)",
    "/dm @agent text   a direct message to an agent",
    "/ask @role text   anycast: exactly one holder of the role takes it",
    "/ask --queue @role text   the same, queued for a future holder when none is live",
    "/reply text       answer the last DM or @mention addressed to you",
    "/who              the roster: name/role and status",
    "//text            post text that starts with /",
    "/quit or Ctrl-D   leave (the operator's presence goes offline); Tab completes",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    add_connection_arguments(parser)
    parser.add_argument("--as", metavar="NAME", dest="as_name",
                        help="the operator's name on the mesh once it sends "
                             "(default: the creds' principal, else <user>-console)")
    parser.add_argument("--read-only", action="store_true", dest="read_only",
                        help="refuse every send; never publish (also COTAL_READ_ONLY=1)")


# --------------------------------------------------------------------------- input lines

@dataclass(frozen=True)
class Action:
    """A typed line that sends nothing. ``kind``: join, who, help, quit, none, or error
    (``text`` is then the sentence to show)."""

    kind: str
    target: str | None = None  # the channel to join, without its ``#``
    text: str = ""


def channel_name(raw: str) -> str | None:
    """A concrete channel name from ``#name`` / ``name``, or None when it is not one."""
    ch = raw.strip().removeprefix("#")
    return ch if is_channel_name(ch) else None


def parse(line: str, channel: str) -> Action | Send:
    """Turn one typed line into the :class:`Send` it asks for, or an :class:`Action` (pure;
    ``channel`` is the current one)."""
    s = line.strip()
    if not s:
        return Action("none")
    if s.startswith("//"):
        return Send("channel", channel, s[1:])
    if s.startswith("/"):
        head, *rest = s.split(None, 1)
        cmd, arg = head.lower(), (rest[0].strip() if rest else "")
        if cmd in ("/quit", "/exit", "/q"):
            return Action("quit")
        if cmd in ("/help", "/?"):
            return Action("help")
        if cmd == "/who":
            return Action("who")
        if cmd == "/join":
            ch = channel_name(arg) if arg and len(arg.split()) == 1 else None
            if ch is None:
                return Action("error", text="/join needs one channel name: /join #general")
            return Action("join", ch)
        if cmd in ("/dm", "/ask"):
            queue = cmd == "/ask" and arg.split(None, 1)[:1] == ["--queue"]
            if queue:
                arg = arg.split(None, 1)[1] if len(arg.split(None, 1)) > 1 else ""
            who, *text = arg.split(None, 1) if arg else [""]
            who = who.removeprefix("@")
            if not who or not text or not text[0].strip():
                example = "/dm @bram hello" if cmd == "/dm" else "/ask @reviewer please look"
                what = "@agent" if cmd == "/dm" else "@role"
                return Action("error", text=f"{cmd} needs {what} and text: {example}")
            return Send("dm" if cmd == "/dm" else "ask", who, text[0].strip(), queue=queue)
        if cmd == "/reply":
            if not arg:
                return Action("error", text="/reply needs text: /reply on it")
            return Send("reply", None, arg)
        return Action("error", text=f"unknown command {head}; /help lists the commands")
    if s.startswith("#"):
        head, *text = s.split(None, 1)
        ch = channel_name(head)
        if ch is None:
            return Action("error", text=f"{head} is not a channel name (letters, digits, _ "
                                        "and -, dotted for a hierarchy)")
        return Send("channel", ch, text[0].strip()) if text else Action("join", ch)
    return Send("channel", channel, s)


def addressed_to(entry: Any, me_id: str, me_name: str) -> bool:
    """A live DM to the operator, or a channel message that @mentions the operator's name."""
    from meshview.wire.outbound import mentions_in

    if entry.historical or entry.from_id == me_id:
        return False
    if entry.kind == "dm":
        return me_id in entry.to_ids
    if entry.kind == "channel":
        return me_name.casefold() in (mentions_in(entry.text) or [])
    return False


# --------------------------------------------------------------------------- completion

def _completer_class() -> type:
    from prompt_toolkit.completion import Completer, Completion

    class ChatCompleter(Completer):
        """``/commands`` at the start; ``#channels``; ``@roles`` after /ask; ``@agents``
        after /dm and in text (mentions). Names come from the live model snapshot; a name
        that is not one typeable word (hostile or odd) is never offered."""

        def __init__(self, snapshot: Callable[[], Any]) -> None:
            self.snapshot = snapshot

        def get_completions(self, document, complete_event):  # prompt-toolkit's API
            before = document.text_before_cursor
            word = document.get_word_before_cursor(WORD=True)
            if not word:
                return
            first = before.lstrip()
            if first == word and word.startswith("/"):
                pool: Iterable[str] = COMMANDS
            elif word.startswith("#"):
                pool = ("#" + c for c in channels(self.snapshot()))
            elif word.startswith("@"):
                if first.lower().startswith("/ask ") and first.split()[1:2] == [word]:
                    pool = ("@" + r for r in roles(self.snapshot()))
                else:
                    pool = ("@" + n for n in agent_names(self.snapshot()))
            else:
                return
            for cand in sorted(set(pool)):
                if cand.startswith(word) and cand != word:
                    yield Completion(cand + " ", start_position=-len(word), display=cand)

    return ChatCompleter


def agent_names(snap: Any) -> list[str]:
    return sorted({p.name for p in snap.agents if is_mention_name(p.name or "")},
                  key=str.casefold)


def roles(snap: Any) -> list[str]:
    return sorted({p.role for p in snap.agents if p.role and is_mention_name(p.role)})


def channels(snap: Any) -> list[str]:
    from meshview.wire.subjects import is_event_channel

    names = {c.name for c in snap.channels if not is_event_channel(c.name)} | {DEFAULT_CHANNEL}
    return sorted(n for n in names if is_channel_name(n))


# --------------------------------------------------------------------------- the session

def run(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("cotal chat: needs a terminal (for scripts use cotal send, or cotal watch "
              "--plain to read).", file=sys.stderr)
        return 2
    from cotal_tui.cli.connection import target_from_args
    from cotal_tui.operator import participant_target, read_only_from_args  # the console's rules
    from meshview.act.participant import Participant, ParticipantError

    try:
        target = target_from_args(args)
    except Exception as e:  # noqa: BLE001 - e.g. an unreadable registry
        print(f"cotal chat: {_one_line(e)}", file=sys.stderr)
        return 1
    reason = read_only_from_args(args)
    try:  # the observer reads with the target's own view; sends ride the operator profile
        sender = participant_target(target)
    except Exception as e:  # noqa: BLE001 - e.g. a static mesh whose seed is missing
        print(f"cotal chat: {_one_line(e)}", file=sys.stderr)
        return 1
    part = Participant(sender, name=args.as_name, read_only=reason is not None,
                       read_only_reason=reason or "")
    try:
        part.identity  # noqa: B018 - a bad --as is usage, before any network
    except ParticipantError as e:
        print(f"cotal chat: {_one_line(e)}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(Chat(args, target, part).run())
    except KeyboardInterrupt:
        return 0


def _one_line(e: object) -> str:
    """One sentence for an error: a transport failure in words (connect.explain_error), else
    its own text; never a class name."""
    from meshview.link.connect import ConnectError, explain_error
    from meshview.act.participant import ParticipantError

    text = " ".join(str(e).split())
    if isinstance(e, (ConnectError, ParticipantError)) and text:
        return text  # already our own sentence
    said = explain_error(e) if isinstance(e, BaseException) else None
    return (said + ".") if said else (text or "it failed without saying why.")


class Chat:
    """One chat session: observer + model + stream writer + prompt + a send worker."""

    def __init__(self, args: argparse.Namespace, target: Any, part: Any) -> None:
        self.args = args
        self.target = target
        self.part = part
        self.channel = DEFAULT_CHANNEL
        self.last_for_me: Any = None  # the newest live feed row addressed to the operator
        self.sends: asyncio.Queue[tuple[Send, str]] = asyncio.Queue()
        self.unsent: dict[str, Any] = {}  # a failed line -> its envelope, for a same-id retry
        self.restore_line: str | None = None  # an unsent line for the next prompt
        self.model: Any = None
        self.obs: Any = None
        self.writer: Any = None
        self.session: Any = None

    # ---------------------------------------------------------------- lifecycle

    async def run(self) -> int:
        from meshview.link.connect import ConnectError, connect
        from meshview.model.mesh import MeshModel
        from meshview.observe.observer import Observer, ObserverOptions

        try:
            nc, target = await connect(self.target)
        except ConnectError as e:
            print(f"cotal chat: {_one_line(e)}", file=sys.stderr)
            return 1
        from meshview.observe.spaces import ensure_space

        try:  # every verb's space check: no prompt for a space that is not there
            await ensure_space(nc, target)
        except ConnectError as e:
            print(f"cotal chat: {_one_line(e)}", file=sys.stderr)
            await nc.close()
            return 1
        self.model = MeshModel(target.space, record_events=True, burst_ms=0,
                               server=target.display)
        self.part.roster = lambda: self.model.snapshot().peers
        self.obs = Observer(nc, target.space, self.model, has_credential=target.has_credential,
                            options=ObserverOptions(backfill=0, dm_backfill=0))
        try:
            return await self._session()
        finally:
            await self._leave(nc)

    async def _session(self) -> int:
        from contextlib import redirect_stderr, redirect_stdout

        from prompt_toolkit.patch_stdout import StdoutProxy

        from meshview.wire import sanitize
        from meshview.lines.stream import StreamWriter, use_colour

        colour = use_colour(sys.stdout)
        with StdoutProxy(raw=True, sleep_between_writes=0.05) as proxy, \
                redirect_stdout(proxy), redirect_stderr(proxy):
            self.writer = StreamWriter("plain", proxy, proxy, colour=colour)
            self.writer.labels_of = self.model.labels
            self.writer.err_colour = colour
            ident = self.part.identity
            self.writer.diag(
                f"chatting in space {sanitize.inline(self.model.space)} on "
                f"{self.target.display} as {sanitize.inline(ident.name)} ({ident.id}) - "
                "/help for commands, Ctrl-D to leave")
            if self.part.read_only:
                self.writer.diag(f"read-only ({self.part.read_only_reason}): every send is "
                                 "refused and nothing is published")
            self.obs.add_listener(self._drain)
            try:
                await self.obs.start()
            except Exception as e:  # noqa: BLE001 - one sentence, never a traceback
                self.writer.diag(f"could not start observing the space: {_one_line(e)}",
                                 warn=False)
                return 1
            holder = self.part.held_by(self.model.snapshot().peers)
            if holder is not None:  # our principal is a live peer's: never take it over
                from meshview.act.participant import taken_sentence

                self.writer.diag(taken_sentence(self.part.id, holder), warn=False)
                return 1
            if not self.obs.dm_visible:
                self.writer.diag("DMs are not visible with this credential (channels only); "
                                 "DMs you send are confirmed with a note")
            self._drain(self.model)
            worker = asyncio.create_task(self._send_worker(), name="chat:sends")
            try:
                await self._prompt_loop()
                try:
                    await asyncio.wait_for(self.sends.join(), LEAVE_BUDGET)
                except TimeoutError:
                    self.writer.diag(f"{self.sends.qsize() + 1} messages still unsent after "
                                     f"{LEAVE_BUDGET:g}s; leaving without them", warn=False)
            finally:
                worker.cancel()
                try:
                    await worker
                except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the worker was cancelled; its end is not news [counted: COTAL_LOG]
                    swallowed("cotal_tui.cli.chat:Chat._session")
        return 0

    async def _leave(self, nc: Any) -> None:
        """The offline record first (it is what others see), then the reads and the link."""
        for step in (self.part.close, self.obs.stop, nc.close):
            try:
                await asyncio.wait_for(step(), 3.0)
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - each leaving step is bounded and best effort [counted: COTAL_LOG]
                swallowed("cotal_tui.cli.chat:Chat._leave")

    # ---------------------------------------------------------------- the stream

    def _drain(self, model: Any) -> None:
        from meshview.model.snapshot import FeedEntry

        events = model.take_events()
        me = self.part.identity
        for ev in events:
            if isinstance(ev, FeedEntry) and addressed_to(ev, me.id, me.name):
                self.last_for_me = ev
        self.writer.write(events)

    def note(self, text: str) -> None:
        """A local line (help, roster, a refusal) above the prompt; never wire text raw."""
        self.writer.diag(text, warn=True)

    def lines(self, lines: list[str]) -> None:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()

    # ---------------------------------------------------------------- the prompt

    def _prompt(self) -> str:
        from meshview.wire import sanitize

        ro = "[read-only] " if self.part.read_only else ""
        return f"{ro}#{sanitize.inline(self.channel, 64)}> "

    def _make_session(self) -> Any:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.key_binding import KeyBindings
        from prompt_toolkit.shortcuts import CompleteStyle

        kb = KeyBindings()

        @kb.add("c-c")
        def _(event: Any) -> None:  # Ctrl-C clears a typed line; on an empty one it leaves
            buf = event.current_buffer
            if buf.text:
                buf.reset()
            else:
                event.app.exit(exception=EOFError)

        history: Any = InMemoryHistory()
        path = history_path()
        if path is not None:
            history = FileHistory(str(path))
        completer = _completer_class()(self.model.snapshot)
        return PromptSession(history=history, completer=completer, key_bindings=kb,
                             complete_while_typing=False,
                             complete_style=CompleteStyle.READLINE_LIKE)

    async def _prompt_loop(self) -> None:
        self.session = self._make_session()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
        while not stop.is_set():
            prompt = asyncio.ensure_future(self.session.prompt_async(self._prompt,
                                                                     pre_run=self._pre_run))
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({prompt, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not prompt.done():  # SIGTERM / SIGHUP: leave as Ctrl-D does
                app = self.session.app
                if app.is_running:
                    app.exit(exception=EOFError)
                try:
                    await prompt
                except (EOFError, Exception):  # noqa: BLE001 - the prompt ends however it ends [counted: COTAL_LOG]
                    swallowed("cotal_tui.cli.chat:Chat._prompt_loop")
                return
            try:
                line = prompt.result()
            except (EOFError, KeyboardInterrupt):
                return
            if not self.act(parse(line, self.channel), line):
                return

    def act(self, a: Action | Send, line: str = "") -> bool:
        """Apply one typed line; False to leave. Sends are queued (in order) so the prompt
        comes back at once while a slow broker is still acknowledging."""
        if isinstance(a, Send):
            self.sends.put_nowait((a, line))
        elif a.kind == "quit":
            return False
        elif a.kind == "error":
            self.note(a.text)
        elif a.kind == "help":
            self.lines(["commands:", *("  " + h for h in HELP)])
        elif a.kind == "who":
            self.who()
        elif a.kind == "join":
            self.channel = a.target or DEFAULT_CHANNEL
        return True

    def who(self) -> None:
        from meshview.wire import sanitize

        snap = self.model.snapshot()
        rows = [(sanitize.inline(p.name, 64) + ("/" + sanitize.inline(p.role, 32)
                                                 if p.role else ""), p) for p in snap.peers]
        if not rows:
            self.lines(["who: nobody is on the roster"])
            return
        width = max(len(label) for label, _ in rows)
        out = [f"who: {len(snap.agents)} agents, {len(snap.endpoints)} endpoints"]
        for label, p in rows:
            kind = "" if p.kind == "agent" else f" ({sanitize.inline(p.kind, 16)})"
            you = " (you)" if p.id == self.part.id else ""
            act = (f" - {sanitize.inline(p.activity, 120)}"
                   if p.activity and p.status != "offline" else "")
            out.append(f"  {label.ljust(width)}  {self.writer.text.badge(p, snap.now)}"
                       f"{kind}{you}{act}")
        self.lines(out)

    # ---------------------------------------------------------------- sending

    async def _send_worker(self) -> None:
        from meshview.act.participant import ParticipantError

        while True:
            a, line = await self.sends.get()
            try:
                await self.send(a, line)
            except ParticipantError as e:
                self.note(_one_line(e))
                self.put_back(line)
            except Exception as e:  # noqa: BLE001 - a send never ends the chat
                self.note(f"send failed: {_one_line(e)}")
                self.put_back(line)
            finally:
                self.sends.task_done()

    def put_back(self, line: str) -> None:
        """A line that was not sent goes back on the prompt for editing (prompt-toolkit's
        default buffer); when something else is being typed there, it waits in the history."""
        if not line.strip() or self.part.read_only:
            return
        if self.session is None:
            return
        app, buf = self.session.app, self.session.default_buffer
        live = app.is_running and not app.is_done  # a prompt is up (not the one just accepted)
        if live and not buf.text:
            self._restore(line)
        elif live and buf.text != line:
            self.session.history.append_string(line)
            self.note("the unsent line is in the history (Up) for editing")
        else:
            self.restore_line = line  # the next prompt starts with it

    def _restore(self, line: str) -> None:
        buf = self.session.default_buffer
        buf.text = line
        buf.cursor_position = len(line)
        self.session.app.invalidate()

    def _pre_run(self) -> None:
        line, self.restore_line = self.restore_line, None
        if line:
            self._restore(line)

    async def send(self, s: Send, line: str = "") -> None:
        from meshview.act.participant import ParticipantError
        from meshview.act.send import Original

        p = self.part
        prior = self.unsent.pop(line, None) if line else None
        if s.kind == "reply":
            p.check_writable()
            entry = self.last_for_me
            if entry is None:
                raise ParticipantError("nothing to reply to yet: no DM or @mention for you "
                                       "has arrived in this session.")
            sent = await p.send(s, Original.of_entry(entry))
            _log_send(s, sent.message, self.model.space)
            if sent.message.channel is not None:
                return
        else:
            # the same line again: the same envelope, the same Nats-Msg-Id
            msg = prior if prior is not None else p.prepare(s)
            try:
                sent = await p.send_message(msg)
            except ParticipantError as e:
                if line:
                    self.unsent[line] = msg
                from cotal_tui.actionlog import action_log, send_target

                action_log("chat").record("send", send_target(s.kind, s.target), "failed",
                                          message_id=msg.id, detail=str(e), mesh=self.model.space)
                raise
            _log_send(s, sent.message, self.model.space)
            if s.kind == "channel":
                return
        if not self.obs.dm_visible:  # the stream will not show it: say it went
            from meshview.wire import sanitize

            m = sent.message
            where = (f"@{sanitize.inline(self.model.name_of(m.to), 64)}" if m.to
                     else f"role {sanitize.inline(m.toService, 64)}")
            self.note(f"sent {m.id} -> {where}")


def history_path() -> Path | None:
    """``$COTAL_HOME/chat_history``, private to the user (it holds what was typed); None
    when it cannot be created (the history then lives in memory only)."""
    from cotal_tui.config import chat_history_path

    path = chat_history_path()
    d = path.parent
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    except OSError:
        return None
    return path


def _log_send(s: Send, m, mesh: str | None) -> None:
    """One acknowledged send in the action log (cotal_tui/actionlog.py): its id, never its text."""
    from cotal_tui.actionlog import action_log, send_target

    where = (f"#{m.channel}" if m.channel else f"@{m.to}" if m.to else
             send_target(s.kind, s.target))
    action_log("chat").record("send", where, "acknowledged", message_id=m.id, mesh=mesh)
