"""``cotal watch --plain`` / ``--json``: the observer model printed as lines.

Text mode: one line per event (receipt time, label, ``name/role``, status badge with shape,
target, text), colour as :func:`use_colour` decides (``FORCE_COLOR``, ``NO_COLOR``, a TTY), every wire string
neutralized by :mod:`meshview.wire.sanitize` and multi-line text indented under its event.
JSON mode: JSON Lines with the exact wire text (JSON escaping makes controls inert), plus the
frame ledger's ``run`` lines (a run of an agent started, finished or failed) and ``frame-order``
lines (its ordering notices); text mode prints those notices as one line each.
Data goes to ``out``; diagnostics (header, warnings, rejections in text mode) to ``err``. The
CLI (``cotal_tui.cli.watch_stream``) connects, owns stdout/stderr, the signals and the exit
code, and hands :func:`stream_space` a :class:`~meshview.lines.lineout.LineSink` on each, so a
consumer that stops reading never blocks the observer: its oldest pending lines are shed,
counted and reported where they went missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Mapping, Protocol

import msgspec
from nats.aio.client import Client as NATS

from meshview.errors import swallowed
from meshview.wire import sanitize
from meshview.link.connect import ConnectTarget
from meshview.model.labels import EMPTY as NO_LABELS
from meshview.model.labels import Labels
from meshview.lines.frame_line import first_line, frame_summary
from meshview.lines.lineout import LineSink
from meshview.model.frames import FrameLedger, Note, Transition
from meshview.model.mesh import MeshModel
from meshview.lines.notify import NotifySettings
from meshview.model.snapshot import (
    FeedEntry,
    ModelEvent,
    Peer,
    PresenceEvent,
    Rejected,
    StateEvent,
)
from meshview.observe.observer import Observer, ObserverOptions
from meshview.model.runs_state import RunEvent
from meshview.model.stalled import Stalled
from meshview.wire.messages import ExtensionPart
from meshview.wire.parts import AGUI_FRAME_KIND
from meshview.wire.sanitize import elide_id
from meshview.timefmt import age

ID_CELLS_PLAIN = 40  # an unknown recipient's id in a plain line (elided in the middle)
CONFLICT_MARK = "[reused id]"  # a row whose id another sender used first
AMBIGUOUS_MARK = "[re: ambiguous id]"  # a reply whose replyTo names several senders' messages

NAME_COLOURS = (39, 208, 170, 78, 214, 111, 203, 150, 141, 180, 117, 222, 75, 209)
BADGE = {
    "working": ("●", "working · progress unknown", "32"),
    "waiting": ("◐", "waiting", "33"),
    "idle": ("○", "idle", "90"),
    "offline": ("⨯", "offline", "2"),
}
LABEL_STYLE = {"join": "32", "update": "2", "offline": "2", "msg": "", "history": "2",
               "manager": "35", "event": "2", "notice": "33"}


class TextOut(Protocol):
    """A text file the writer prints to (a TTY, a test's StringIO, an embedding's proxy)."""

    def write(self, s: str, /) -> object: ...
    def flush(self) -> None: ...
    def isatty(self) -> bool: ...


def use_colour(stream: TextOut | LineSink, env: Mapping[str, str] | None = None) -> bool:
    """Whether our output on ``stream`` carries ANSI colour: the one rule every command prints by,
    the reference CLI's (``colorEnabled``, CLI 0.59). A set ``FORCE_COLOR`` decides first, as Node
    reads it: ``0`` or ``false`` is off, any other value (empty included) on, even into a pipe.
    Otherwise a non-empty ``NO_COLOR`` is off (no-color.org), and else colour follows whether
    ``stream`` is a terminal, so piped or redirected output is plain."""
    e = os.environ if env is None else env
    force = e.get("FORCE_COLOR")
    if force is not None:
        return force not in ("0", "false")
    if e.get("NO_COLOR"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


EVENT_MODES = ("full", "summary", "off")  # ``--events``: how --plain prints activity frames


class TextRenderer:
    """``events`` (:data:`EVENT_MODES`): an activity frame as one summary line, as its whole
    fold, or not at all."""

    def __init__(self, colour: bool = False, events: str = "summary") -> None:
        if events not in EVENT_MODES:
            raise ValueError(f"--events takes one of {', '.join(EVENT_MODES)}, not {events!r}")
        self.colour = colour
        self.events = events

    def _c(self, code: str, s: str) -> str:
        if not self.colour or not code:
            return s
        return f"\x1b[{code}m{s}\x1b[0m"

    def _name(self, name: str, role: str | None) -> str:
        n = sanitize.inline(name, 128)
        who = n + ("/" + sanitize.inline(role, 64) if role else "")
        if not self.colour:
            return who
        idx = NAME_COLOURS[zlib.crc32(name.encode("utf-8", "replace")) % len(NAME_COLOURS)]
        return f"\x1b[38;5;{idx}m{who}\x1b[0m"

    @staticmethod
    def _time(ms: float) -> str:
        return time.strftime("%H:%M:%S", time.localtime(ms / 1000.0))

    def badge(self, p: Peer, now: float) -> str:
        shape, word, code = BADGE.get(p.status, ("?", sanitize.inline(p.status), ""))
        s = f"{shape} {word}"
        if p.status == "waiting":
            c = p.condition
            if c is not None:
                s += f" ({sanitize.inline(c.code, 32)}"
                s += f" for {age(now - c.since)})" if c.since else ")"
        if p.status == "offline" and p.offline_reason in ("stale", "rebind"):
            s += " (heartbeat lapsed)"
        elif p.status == "offline" and p.offline_reason == "absent":
            s += " (gone before this watch started)"
        return self._c(code, s)

    def presence(self, ev: PresenceEvent, stalled: Stalled | None = None,
                 labels: Labels = NO_LABELS) -> str:
        p = ev.peer
        label = {"join": "join", "update": "update", "offline": "offline",
                 "incarnation": "join"}[ev.event]
        line = (f"{self._c('2', self._time(ev.received))} "
                f"{self._c(LABEL_STYLE[label], label.ljust(7))} "
                f"{self._name(labels.label(p.id) or p.name, p.role)} "
                f"{self.badge(p, ev.received)}")
        if stalled is not None:
            line += self._c("33", f" · {stalled.label()}")
        if ev.event == "incarnation":
            uid = sanitize.inline(p.lifecycle_uid or "", 32)
            line += self._c("35", f" · new incarnation {uid[:8]}")
        if p.activity and p.status != "offline":
            line += f" - {sanitize.inline(p.activity, 300)}"
        return line

    def message(self, e: FeedEntry, labels: Labels = NO_LABELS) -> str | None:
        """A message line; its sender as ``labels`` (the roster) knows the principal, with the
        envelope's differing name as a marked claim."""
        if e.kind == "lifecycle":
            if e.lifecycle not in ("manager-up", "manager-down"):
                return None  # joins/offlines are printed from presence events
            return (f"{self._c('2', self._time(e.received))} "
                    f"{self._c(LABEL_STYLE['manager'], 'manager')} {sanitize.inline(e.text)}")
        if e.event and self.events != "full":
            return None if self.events == "off" else self.frame(e, labels)
        if e.kind == "channel":
            target = self._c("36", "#" + sanitize.inline(e.channel or ""))
            if e.event:
                target += self._c("2", " [event]")
        elif e.kind == "anycast":
            target = self._c("2", "@" + sanitize.inline(e.to_service or ""))
        else:
            names = ", ".join(self._target(labels.label(i) or "", i) for i in e.to_ids)
            target = names + (self._c("2", f" ({e.count}×)") if e.count > 1 else "")
        # a backfilled row says when it was sent (the label marks it historical), a live one
        # when it arrived
        label = "history" if e.historical else "msg"
        stamp = self._history_time(e.ts, e.received) if e.historical else self._time(e.received)
        return (f"{self._c('2', stamp)} "
                f"{self._c(LABEL_STYLE[label], label.ljust(7))} "
                f"{self._sender(e, labels)} → {target}: "
                f"{self._marks(e)}{sanitize.text(e.text, ' ' * 9)}")

    def frame(self, e: FeedEntry, labels: Labels = NO_LABELS) -> str:
        """An activity frame as one line: the agent, its run (short), what the frame did
        (:func:`meshview.lines.frame_line.frame_summary`); a backfilled one says when it was
        sent, like a history message."""
        run, summary = frame_summary(e.parts)
        if summary is None:  # recorded without its parts: its text's first words
            summary = first_line(e.text)
        label = "history" if e.historical else "event"
        stamp = self._history_time(e.ts, e.received) if e.historical else self._time(e.received)
        where = self._c("2", " [event]") if e.historical else ""
        run_s = self._c("2", f" · run {run}") if run else ""
        return (f"{self._c('2', stamp)} "
                f"{self._c(LABEL_STYLE[label], label.ljust(7))} "
                f"{self._sender(e, labels)}{where}{run_s}: {self._marks(e)}{summary}")

    def notice(self, n: Note, now: float, labels: Labels = NO_LABELS) -> str:
        """A frame-ordering notice as one line: whose stream, what the dashboard would say of
        it, and the seqs (yellow for a gap, frames really missing)."""
        who = ""
        if n.agent is not None:
            who = self._name(labels.label(n.agent) or labels.name(n.agent) or n.agent, None) + ": "
        chain = ""
        if n.epoch is not None or n.thread_id is not None:
            chain = self._c("2", f" [epoch {sanitize.inline(n.epoch or '-', 40)} "
                                 f"thread {sanitize.inline(n.thread_id or '-', 40)}]")
        text = note_text(n)
        return (f"{self._c('2', self._time(now))} "
                f"{self._c(LABEL_STYLE['notice'], 'notice'.ljust(7))} "
                f"{who}{self._c('33', text) if n.type == 'gap' else text}{chain}")

    def _marks(self, e: FeedEntry) -> str:
        """What a row's text is prefixed with when its id is in question: ``[reused id]`` (an
        id another sender used first), ``[re: ambiguous id]`` (its replyTo names several
        senders' messages, none the one it answers)."""
        out = ""
        if e.conflict:
            out += self._c("33", CONFLICT_MARK) + " "
        if e.reply_ambiguous:
            out += self._c("33", AMBIGUOUS_MARK) + " "
        return out

    def _sender(self, e: FeedEntry, labels: Labels) -> str:
        label, role, claim, _ = labels.sender(e.from_id, e.from_name, e.from_role)
        who = self._name(label, role)
        if claim is not None:
            who += self._c("33", f' (claims "{sanitize.inline(claim, 128)}")')
        return who

    def _target(self, name: str, pid: str) -> str:
        """A DM recipient: its name, or its id elided in the middle when no name is known."""
        if not name or name == pid:
            return elide_id(pid, ID_CELLS_PLAIN)
        return self._name(name, None)

    @staticmethod
    def _history_time(ts: float, received: float) -> str:
        """The sender's time of a backfilled message, with its date when not the day it is
        printed (history may be days old)."""
        try:
            sent = time.localtime(ts / 1000.0)
        except (OverflowError, OSError, ValueError, TypeError):
            return "--:--:--"
        if time.strftime("%Y-%m-%d", sent) != time.strftime(
                "%Y-%m-%d", time.localtime(received / 1000.0)):
            return time.strftime("%Y-%m-%d %H:%M:%S", sent)
        return time.strftime("%H:%M:%S", sent)


def note_text(n: Note) -> str:
    """One notice in the dashboard's words (events.md §4.3), with its own numbers."""
    if n.type == "gap":
        m = n.missing or 0
        return (f"{m} event frame{'' if m == 1 else 's'} missing "
                f"(expected seq {n.expected}, got {n.got})")
    if n.type == "boundary-hole":
        return (f"possible ordering race at start-up, unconfirmed "
                f"(expected seq {n.expected}, got {n.got})")
    if n.type == "prefix-incomplete":
        return f"stream joined after the start, earlier frames not retained (first seq {n.got})"
    return "history unavailable, so ordering is based on live frames only"


def json_run(t: Transition, labels: Labels = NO_LABELS) -> dict[str, Any]:
    """A ``run`` line (``source: frames``, told apart from a workflow run's): a run of ``agent``
    (the authenticated id) ``started``, ``finished`` or
    failed (``error``), with the tool names it started so far (the first 16; ``toolCount``
    counts all), who began it (``turnSource``, null when the frame did not say) and when the
    frame that said so arrived (``ts``, epoch ms)."""
    o: dict[str, Any] = {"type": "run", "source": "frames", "agent": t.agent,
                         "name": labels.name(t.agent),
                         "runId": t.run_id, "state": t.state, "tools": list(t.tools),
                         "toolCount": t.tool_count, "turnSource": t.turn_source, "ts": _ms(t.at)}
    if t.historical:
        o["historical"] = True
    return o


def json_note(n: Note) -> dict[str, Any]:
    """A ``frame-order`` line: one ordering notice (events.md §4.3), null where it has no such
    field (``backfill-failed`` names no agent; ``prefix-incomplete`` names the first seq seen
    as ``got``)."""
    return {"type": "frame-order", "note": n.type, "agent": n.agent, "epoch": n.epoch,
            "threadId": n.thread_id, "expected": n.expected, "got": n.got, "missing": n.missing,
            "text": note_text(n)}


def _parts(parts: Iterable[Any]) -> list[Any]:
    try:
        return [json_frame(p) if type(p) is ExtensionPart and p.kind == AGUI_FRAME_KIND
                else msgspec.to_builtins(p) for p in parts]
    except (TypeError, ValueError):
        return []


def json_frame(p: ExtensionPart) -> dict[str, Any]:
    """An ``ag-ui.frame`` part whole: its envelope (null when the frame did not carry a field,
    or carried one of the wrong type) and its events as kept, unknown keys included;
    ``dropped`` when the reader did not keep them all."""
    o: dict[str, Any] = {"kind": p.kind, "protocol": p.protocol, "threadId": p.threadId,
                         "runId": p.runId, "epoch": p.epoch, "seq": p.seq,
                         "events": msgspec.to_builtins(p.events)}
    if p.dropped:
        o["dropped"] = p.dropped
    return o


def _chain(e: FeedEntry) -> list[Any] | None:
    """``[from_id, epoch, threadId]``, the writer chain of the row's first frame whose ``seq``
    is known (events.md §2.2), else None."""
    for p in e.parts:
        if type(p) is ExtensionPart and p.seq is not None:
            return [e.from_id, p.epoch, p.threadId]
    return None


def _ms(v: Any) -> int | None:
    """Epoch milliseconds as an integer (every ``ts`` in JSON Lines is one): the wire and the
    roster may hold floats (``1.7e12`` or ``…123.0``), which a consumer should never see."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        return int(v)
    except (OverflowError, ValueError):
        return None


def json_from(e: FeedEntry, labels: Labels) -> dict[str, Any]:
    """``from`` of a message line: ``name``/``role`` are the roster's for the authenticated
    sender (null when the roster does not know it); the envelope's differing name and role
    are ``claimedName``/``claimedRole`` (absent when they agree); ``label`` the disambiguated
    name when another peer shares it."""
    sender = labels.sender(e.from_id, e.from_name, e.from_role)
    name = labels.name(e.from_id)
    o: dict[str, Any] = {"id": e.from_id, "name": name, "role": sender.role}
    if sender.claim is not None:
        o["claimedName"] = sender.claim
    if e.from_role and e.from_role != sender.role:
        o["claimedRole"] = e.from_role
    if sender.known and sender.label != name:
        o["label"] = sender.label
    return o


def json_message(e: FeedEntry, labels: Labels = NO_LABELS) -> dict[str, Any]:
    o: dict[str, Any] = {"type": "message", "id": e.id, "ts": _ms(e.ts), "kind": e.kind,
                         "from": json_from(e, labels)}
    if e.kind == "channel":
        o["channel"] = e.channel
    elif e.kind == "dm":
        o["to"] = e.to_ids[0] if len(e.to_ids) == 1 else list(e.to_ids)
    else:
        o["toService"] = e.to_service
    o["text"] = e.text
    o["parts"] = _parts(e.parts)
    o["historical"] = e.historical
    if e.event:
        o["event"] = True
    chain = _chain(e) if e.parts else None
    if chain is not None:
        o["chain"] = chain
    # threading, as the envelope carries it (omitted when absent, like the wire)
    if e.reply_to is not None:
        o["replyTo"] = e.reply_to
    if e.wire_context_id is not None:
        o["contextId"] = e.wire_context_id
    if e.mentions:
        o["mentions"] = list(e.mentions)
    # (sender, id) keys: an id another sender used first, an ambiguous replyTo (else omitted)
    if e.conflict:
        o["conflict"] = True
    if e.reply_ambiguous:
        o["replyAmbiguous"] = True
    return o


def json_presence(ev: PresenceEvent, stalled: Stalled | None = None,
                  labels: Labels = NO_LABELS) -> dict[str, Any]:
    """A presence line; ``stalled`` (meshview/model/stalled.py) adds ``"stalled": {"for": s, "signals":
    [...]}`` to a ``working`` agent's line; ``label`` is there when another peer shares its name."""
    p = ev.peer
    c = p.condition
    label = labels.label(p.id)
    return {
        "type": "presence", "event": ev.event, "id": p.id, "name": p.name, "role": p.role,
        "status": p.status, "activity": p.activity,
        "condition": None if c is None else {k: v for k, v in (
            ("code", c.code), ("source", c.source), ("message", c.message),
            ("since", _ms(c.since))
        ) if v is not None},
        "lifecycleUid": p.lifecycle_uid, "ts": _ms(p.ts),
        **({"reason": ev.reason} if ev.reason else {}),
        **({"stalled": stalled.as_json()} if stalled is not None else {}),
        **({"label": label} if label is not None and label != p.name else {}),
    }


_JSON_MESSAGE = b'{"type": "message"'  # how every json_message line starts (json.dumps)


class StreamWriter:
    """Turns model events into lines on ``out`` (and diagnostics on ``err``).

    ``out``/``err`` are a :class:`LineSink` (the real stream: never blocks) or any text file
    (tests, embedding)."""

    def __init__(self, mode: str, out: TextOut | LineSink, err: TextOut | LineSink,
                 colour: bool | None = None, events: str = "summary") -> None:
        self.mode = mode
        self.out, self.err = out, err
        self.text = TextRenderer(use_colour(out) if colour is None else colour, events)
        self.err_colour = use_colour(err)
        self._last_state: tuple[str, bool, str] | None = None
        self._last_lag = False
        self._listener_errors = 0
        self._rej_last: dict[str, float] = {}
        self._rej_quiet: dict[str, int] = {}
        self.shed_messages = 0  # message lines among the lines the stdout sink shed
        # the stalled verdict of a peer at a time (the stream sets the model's read here)
        self.stalled_of: Callable[[str, float], Stalled | None] | None = None
        # who the roster says each principal is, now (the stream sets the model's read here)
        self.labels_of: Callable[[], Labels] | None = None
        # the frame ledger followed (:meth:`follow_frames`): transitions and notes written
        self._ledger: FrameLedger | None = None
        self._trans_seen = 0
        self._notes_seen = 0

    def count_shed(self, lines: list[bytes]) -> None:
        """The sink shed these lines: count the messages among them, so the gap line can tell
        a consumer that numbers messages exactly how many it missed (state lines shed too)."""
        self.shed_messages += sum(1 for b in lines if b.startswith(_JSON_MESSAGE))

    def diag(self, msg: str, warn: bool = True) -> None:
        line = f"! {msg}"
        if self.err_colour:
            line = f"\x1b[{'33' if warn else '31'}m{line}\x1b[0m"
        _emit(self.err, [line])

    def write(self, events: Iterable[ModelEvent]) -> None:
        lines: list[str] = []
        for ev in events:
            line = self.render(ev)
            if line is not None:
                lines.append(line)
        if lines:
            _emit(self.out, lines)

    def follow_frames(self, ledger: FrameLedger) -> None:
        """What the frame ledger made since the last call, as lines: JSON's ``run`` and
        ``frame-order`` lines; text's notices, one line each (none with ``--events off``).
        Two counters compared when nothing moved (a drain's cost)."""
        if ledger is not self._ledger:  # a new model (a replay's seek): from its start
            self._ledger, self._trans_seen, self._notes_seen = ledger, 0, 0
        trans, notes = ledger.transitions, ledger.notes_seen
        if trans == self._trans_seen and notes == self._notes_seen:
            return
        js = self.mode == "json"
        labels = self.labels_of() if self.labels_of is not None else NO_LABELS
        lines: list[str] = []
        if js:
            for t in ledger.transitions_since(self._trans_seen):
                lines.append(json.dumps(json_run(t, labels), ensure_ascii=False))
        if js or self.text.events != "off":
            now = time.time() * 1000
            for n in ledger.notes_since(self._notes_seen):
                lines.append(json.dumps(json_note(n), ensure_ascii=False) if js
                             else self.text.notice(n, now, labels))
        self._trans_seen, self._notes_seen = trans, notes
        if lines:
            _emit(self.out, lines)

    def output_gap(self, gap: int, total: int) -> str:
        """The line written where ``gap`` lines were shed because the reader of stdout fell
        behind (``total`` so far). JSON reuses the observer's lagging shape, told apart by
        ``source``."""
        if self.mode == "json":
            return json.dumps({"type": "state", "source": "output", "lagging": True,
                               "dropped": total, "messages": self.shed_messages})
        note = f"! {gap} lines dropped here: the reader of this output fell behind ({total} so far)"
        stamp = self.text._c("2", TextRenderer._time(time.time() * 1000))
        return f"{stamp} {self.text._c('33', note)}"

    def output_stalled(self) -> None:
        self.diag("stdout is not being read: shedding the oldest lines (counted)")

    def render(self, ev: ModelEvent) -> str | None:
        js = self.mode == "json"
        labels = self.labels_of() if self.labels_of is not None else NO_LABELS
        if isinstance(ev, FeedEntry):
            if js:
                if ev.kind == "lifecycle":
                    return None
                return json.dumps(json_message(ev, labels), ensure_ascii=False)
            return self.text.message(ev, labels)
        if isinstance(ev, PresenceEvent):
            stalled = (self.stalled_of(ev.peer.id, ev.received)
                       if self.stalled_of is not None and ev.peer.status == "working" else None)
            if js:
                return json.dumps(json_presence(ev, stalled, labels), ensure_ascii=False)
            return self.text.presence(ev, stalled, labels)
        if isinstance(ev, RunEvent):  # a run's state changed, a pause opened or settled
            if js:
                return json.dumps(ev.as_json(), ensure_ascii=False)
            return f"{self.text._c('2', TextRenderer._time(ev.ts))} {sanitize.inline(ev.plain(), 600)}"
        if isinstance(ev, Rejected):
            if js:
                return json.dumps({"type": "rejected", "reason": ev.reason,
                                   "subject": ev.subject}, ensure_ascii=False)
            self._reject_diag(ev)
            return None
        if isinstance(ev, StateEvent):
            if ev.listener_errors != self._listener_errors:
                self._listener_errors = ev.listener_errors
                return self._internal(ev)
            if ev.lagging != self._last_lag:
                self._last_lag = ev.lagging
                if js:
                    return json.dumps({"type": "state", "lagging": ev.lagging,
                                       "dropped": ev.dropped})
                self.diag(f"{'lagging behind the mesh' if ev.lagging else 'caught up'}: "
                          f"{ev.dropped} messages dropped so far")
                return None
            if ev.connection == "connecting":
                return None
            shown = (ev.connection, ev.dm_visible, ev.presence_view)
            if shown == self._last_state:
                return None
            first = self._last_state is None
            prev, self._last_state = self._last_state, shown
            if js:
                return json.dumps({"type": "state", "connection": ev.connection,
                                   "dmVisible": ev.dm_visible,
                                   "presenceView": ev.presence_view})
            if prev is not None and prev[0] != ev.connection:
                self.diag(f"connection {ev.connection}")
            elif first and ev.connection != "connected":
                self.diag(f"connection {ev.connection}")
            if prev is not None and prev[2] != ev.presence_view:
                self.diag("presence view stale: no presence traffic for a full TTL; rebinding"
                          if ev.presence_view == "stale" else "presence view live again")
            return None
        return None

    def _internal(self, ev: StateEvent) -> str | None:
        """Our own listeners raised (the count changed): a ``state`` line told apart by
        ``source``, or a stderr diagnostic in plain mode."""
        if self.mode == "json":
            return json.dumps({"type": "state", "source": "internal",
                               "listenerErrors": ev.listener_errors, "error": ev.listener_error},
                              ensure_ascii=False)
        self.diag(f"internal error ({ev.listener_errors} so far): "
                  f"{sanitize.inline(ev.listener_error or 'unknown', 200)}", warn=False)
        return None

    def _reject_diag(self, ev: Rejected) -> None:
        """At most one stderr line per reason per 5 s (no spam under hostile traffic)."""
        last = self._rej_last.get(ev.reason)
        if last is not None and ev.received - last < 5000:
            self._rej_quiet[ev.reason] = self._rej_quiet.get(ev.reason, 0) + 1
            return
        more = self._rej_quiet.pop(ev.reason, 0)
        self._rej_last[ev.reason] = ev.received
        extra = f" (+{more} more)" if more else ""
        self.diag(f"rejected {sanitize.inline(ev.reason)} on {sanitize.inline(ev.subject, 200)}{extra}")


def _emit(dest: TextOut | LineSink, lines: list[str]) -> None:
    if isinstance(dest, LineSink):
        dest.write_lines(lines)
    else:
        dest.write("\n".join(lines) + "\n")
        dest.flush()


STOP_BUDGET = 0.4  # seconds for the last lines after the stop (the exit must take < 1 s)


class Beside(Protocol):
    """What runs beside the printing and is closed when the stream ends."""

    async def close(self) -> None: ...


@dataclass(frozen=True)
class StreamOptions:
    """What the line stream is asked for, as plain values (the CLI reads them from its flags):
    ``mode`` ``plain`` or ``json``; ``backfill`` messages per channel first; ``dms`` off for
    channels only; ``notify`` (its stalled minutes are the verdict's default quiet time)."""

    mode: str = "plain"
    backfill: int = 0
    dms: bool = True
    notify: NotifySettings = field(default_factory=NotifySettings)
    stall_ms: float | None = None  # the stalled verdict's quiet time (None: notify's minutes)
    events: str = "summary"  # --plain: activity frames as one line, ``full`` folds, ``off`` none


async def stream_space(nc: NATS, target: ConnectTarget, options: StreamOptions,
                       out: TextOut | LineSink, err: TextOut | LineSink, stop: asyncio.Event, *,
                       runs_poll: Callable[[MeshModel], Callable[[], Awaitable[None]]] | None = None,
                       beside: Callable[[MeshModel, Observer, Callable[[str], None]], Beside] | None = None,
                       ) -> int:
    """Observe ``target.space`` on the open connection ``nc`` and write it as lines on ``out``
    (diagnostics on ``err``) until ``stop`` is set or the reader of ``out`` goes away; then the
    last lines within :data:`STOP_BUDGET`, and ``nc`` is closed. A :class:`LineSink` ``out``
    gets its gap, stall and shed reports from the writer and is drained and closed here (so is
    a sink ``err``). ``beside(model, observer, diag)`` starts what runs beside the printing
    (the CLI's recorder and notifier), closed at the end. Returns 0."""
    loop = asyncio.get_running_loop()
    model = MeshModel(target.space, record_events=True,
                      burst_ms=0 if options.mode == "json" else 400, server=target.display,
                      stall_ms=options.stall_ms if options.stall_ms is not None
                      else options.notify.stalled_minutes * 60_000.0)
    obs = Observer(nc, target.space, model, has_credential=target.has_credential,
                   options=ObserverOptions(dms=options.dms, backfill=options.backfill,
                                           dm_backfill=min(options.backfill, 1000)))
    broken = asyncio.Event()
    writer = StreamWriter(options.mode, out, err, events=options.events)
    writer.stalled_of = lambda pid, now: model.stalled(pid, now).get(pid)
    writer.labels_of = model.labels
    out_sink = out if isinstance(out, LineSink) else None
    sinks = [s for s in (out, err) if isinstance(s, LineSink)]
    if out_sink is not None:
        out_sink.on_broken = broken.set
        out_sink.gap_line, out_sink.on_stall = writer.output_gap, writer.output_stalled
        out_sink.on_shed = writer.count_shed

    def drain(m: MeshModel) -> None:
        try:
            writer.write(m.take_events())
            writer.follow_frames(m.frames)
        except (BrokenPipeError, ValueError):
            broken.set()

    obs.add_listener(drain)
    stop_runs = runs_poll(model) if runs_poll is not None else None  # run lines (cli/watch_stream.py)
    running = beside(model, obs, writer.diag) if beside is not None else None
    if options.mode != "json":
        writer.diag(f"watching space {sanitize.inline(target.space)} on {target.display}"
                    " - Ctrl-C to stop", warn=True)
    try:
        waiters = [asyncio.create_task(stop.wait()), asyncio.create_task(broken.wait())]
        starting = asyncio.create_task(obs.start())
        done, _ = await asyncio.wait([starting, *waiters], return_when=asyncio.FIRST_COMPLETED)
        if starting in done:
            starting.result()
            if not obs.dm_visible and options.dms:
                writer.diag("DMs and anycast are not visible with this credential (channels only)")
            drain(model)
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        else:
            starting.cancel()
        for w in waiters:
            w.cancel()
    finally:
        deadline = loop.time() + STOP_BUDGET
        try:
            await asyncio.wait_for(obs.stop(), STOP_BUDGET / 2)
        except (Exception, asyncio.CancelledError):  # noqa: BLE001 - the stream is ending; a stuck stop must not hold the exit [counted: COTAL_LOG]
            swallowed("meshview.lines.stream:stream_space")
        if not broken.is_set():
            try:
                drain(model)
            except Exception:  # noqa: BLE001 - the last drain on the way out is best effort [counted: COTAL_LOG]
                swallowed("meshview.lines.stream:stream_space#2")
        if running is not None:
            await running.close()
        if stop_runs is not None:
            try:
                await asyncio.wait_for(stop_runs(), STOP_BUDGET / 4)
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - the stream is ending; a stuck stop must not hold the exit [counted: COTAL_LOG]
                swallowed("meshview.lines.stream:stream_space#3")
        closing = asyncio.create_task(nc.close())
        await _finish(writer, out_sink, sinks, deadline, loop)
        try:
            await asyncio.wait_for(closing, max(0.05, deadline - loop.time()))
        except (Exception, asyncio.CancelledError):  # noqa: BLE001 - a slow close must not hold the exit [counted: COTAL_LOG]
            swallowed("meshview.lines.stream:stream_space#4")
    return 0


async def _finish(writer: StreamWriter, out_sink: LineSink | None, sinks: list[LineSink],
                  deadline: float, loop: asyncio.AbstractEventLoop) -> None:
    """The last lines within the stop budget, never blocking: what a stalled reader has not
    taken by then is abandoned and said so on stderr (a reader that left is not told)."""
    if out_sink is not None and not out_sink.broken:
        await out_sink.drain(max(0.0, deadline - loop.time() - 0.1))
        out_sink.close()
        if out_sink.unreported:
            writer.diag(f"{out_sink.unreported} lines not delivered: stdout was not being read")
    for s in sinks:
        if not s.closed:
            await s.drain(max(0.0, deadline - loop.time()))
            s.close()
