"""``cotal watch --plain`` / ``--json``: the observer model printed as lines.

Text mode: one line per event (receipt time, label, ``name/role``, status badge with shape,
target, text), colour only on a TTY with ``NO_COLOR`` unset or empty, every wire string
neutralized by :mod:`meshview.sanitize` and multi-line text indented under its event.
JSON mode: JSON Lines with the exact wire text (JSON escaping makes controls inert).
Data goes to stdout; diagnostics (header, warnings, rejections in text mode) to stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import zlib
from typing import Any, Iterable, TextIO

import msgspec

from meshview import sanitize
from meshview.connect import ConnectError, connect, resolve_target
from meshview.model import MeshModel
from meshview.snapshot import (
    FeedEntry,
    ModelEvent,
    Peer,
    PresenceEvent,
    Rejected,
    StateEvent,
)
from meshview.observer import Observer, ObserverOptions
from meshview.timefmt import age

NAME_COLOURS = (39, 208, 170, 78, 214, 111, 203, 150, 141, 180, 117, 222, 75, 209)
BADGE = {
    "working": ("●", "working · progress unknown", "32"),
    "waiting": ("◐", "waiting", "33"),
    "idle": ("○", "idle", "90"),
    "offline": ("⨯", "offline", "2"),
}
LABEL_STYLE = {"join": "32", "update": "2", "offline": "2", "msg": "", "history": "2",
               "manager": "35"}


def use_colour(stream: TextIO) -> bool:
    """ANSI only on a TTY and when ``NO_COLOR`` is unset or empty."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class TextRenderer:
    def __init__(self, colour: bool = False) -> None:
        self.colour = colour

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
        return self._c(code, s)

    def presence(self, ev: PresenceEvent) -> str:
        p = ev.peer
        label = {"join": "join", "update": "update", "offline": "offline",
                 "incarnation": "join"}[ev.event]
        line = (f"{self._c('2', self._time(ev.received))} "
                f"{self._c(LABEL_STYLE[label], label.ljust(7))} "
                f"{self._name(p.name, p.role)} {self.badge(p, ev.received)}")
        if ev.event == "incarnation":
            uid = sanitize.inline(p.lifecycle_uid or "", 32)
            line += self._c("35", f" · new incarnation {uid[:8]}")
        if p.activity and p.status != "offline":
            line += f" - {sanitize.inline(p.activity, 300)}"
        return line

    def message(self, e: FeedEntry) -> str | None:
        if e.kind == "lifecycle":
            if e.lifecycle not in ("manager-up", "manager-down"):
                return None  # joins/offlines are printed from presence events
            return (f"{self._c('2', self._time(e.received))} "
                    f"{self._c(LABEL_STYLE['manager'], 'manager')} {sanitize.inline(e.text)}")
        if e.kind == "channel":
            target = self._c("36", "#" + sanitize.inline(e.channel or ""))
            if e.event:
                target += self._c("2", " [event]")
        elif e.kind == "anycast":
            target = self._c("2", "@" + sanitize.inline(e.to_service or ""))
        else:
            names = ", ".join(self._name(n, None) for n in e.to_names)
            target = names + (self._c("2", f" ({e.count}×)") if e.count > 1 else "")
        label = "history" if e.historical else "msg"
        return (f"{self._c('2', self._time(e.received))} "
                f"{self._c(LABEL_STYLE[label], label.ljust(7))} "
                f"{self._name(e.from_name, e.from_role)} → {target}: "
                f"{sanitize.text(e.text, ' ' * 9)}")


def _parts(parts: Iterable[Any]) -> list[Any]:
    try:
        return msgspec.to_builtins(list(parts))
    except (TypeError, ValueError):
        return []


def json_message(e: FeedEntry) -> dict[str, Any]:
    o: dict[str, Any] = {"type": "message", "id": e.id, "ts": e.ts, "kind": e.kind,
                         "from": {"id": e.from_id, "name": e.from_name, "role": e.from_role}}
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
    return o


def json_presence(ev: PresenceEvent) -> dict[str, Any]:
    p = ev.peer
    c = p.condition
    return {
        "type": "presence", "event": ev.event, "id": p.id, "name": p.name, "role": p.role,
        "status": p.status, "activity": p.activity,
        "condition": None if c is None else {k: v for k, v in (
            ("code", c.code), ("source", c.source), ("message", c.message), ("since", c.since)
        ) if v is not None},
        "lifecycleUid": p.lifecycle_uid, "ts": p.ts,
        **({"reason": ev.reason} if ev.reason else {}),
    }


class StreamWriter:
    """Turns model events into lines on ``out`` (and diagnostics on ``err``)."""

    def __init__(self, mode: str, out: TextIO, err: TextIO, colour: bool | None = None) -> None:
        self.mode = mode
        self.out, self.err = out, err
        self.text = TextRenderer(use_colour(out) if colour is None else colour)
        self.err_colour = use_colour(err)
        self._last_state: tuple[str, bool, str] | None = None
        self._last_lag = False
        self._rej_last: dict[str, float] = {}
        self._rej_quiet: dict[str, int] = {}

    def diag(self, msg: str, warn: bool = True) -> None:
        line = f"! {msg}"
        if self.err_colour:
            line = f"\x1b[{'33' if warn else '31'}m{line}\x1b[0m"
        self.err.write(line + "\n")
        self.err.flush()

    def write(self, events: Iterable[ModelEvent]) -> None:
        lines: list[str] = []
        for ev in events:
            line = self.render(ev)
            if line is not None:
                lines.append(line)
        if lines:
            self.out.write("\n".join(lines) + "\n")
            self.out.flush()

    def render(self, ev: ModelEvent) -> str | None:
        js = self.mode == "json"
        if isinstance(ev, FeedEntry):
            if js:
                if ev.kind == "lifecycle":
                    return None
                return json.dumps(json_message(ev), ensure_ascii=False)
            return self.text.message(ev)
        if isinstance(ev, PresenceEvent):
            if js:
                return json.dumps(json_presence(ev), ensure_ascii=False)
            return self.text.presence(ev)
        if isinstance(ev, Rejected):
            if js:
                return json.dumps({"type": "rejected", "reason": ev.reason,
                                   "subject": ev.subject}, ensure_ascii=False)
            self._reject_diag(ev)
            return None
        if isinstance(ev, StateEvent):
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


async def run_stream(args: Any, mode: str, out: TextIO | None = None,
                     err: TextIO | None = None) -> int:
    """Connect, observe, print until SIGINT/SIGTERM. Returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        target = resolve_target(args)
        nc, target = await connect(target)
    except ConnectError as e:
        err.write(f"cotal: {e}\n")
        err.flush()
        return 1
    backfill = int(getattr(args, "backfill", 0) or 0)
    model = MeshModel(target.space, record_events=True, burst_ms=0 if mode == "json" else 400,
                      server=target.display)
    obs = Observer(nc, target.space, model, has_credential=target.has_credential,
                   options=ObserverOptions(dms=not getattr(args, "no_dms", False),
                                           backfill=backfill, dm_backfill=min(backfill, 1000)))
    writer = StreamWriter(mode, out, err)
    broken = asyncio.Event()

    def drain(m: MeshModel) -> None:
        try:
            writer.write(m.take_events())
        except (BrokenPipeError, ValueError):
            broken.set()

    obs.add_listener(drain)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    if mode != "json":
        writer.diag(f"watching space {sanitize.inline(target.space)} on {target.display}"
                    " - Ctrl-C to stop", warn=True)
    try:
        await obs.start()
        if not obs.dm_visible and getattr(args, "no_dms", False) is False:
            writer.diag("DMs and anycast are not visible with this credential (channels only)")
        drain(model)
        waiters = [asyncio.create_task(stop.wait()), asyncio.create_task(broken.wait())]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()
    finally:
        try:
            await obs.stop()
            drain(model)
        except Exception:
            pass
        try:
            await asyncio.wait_for(nc.close(), 2.0)
        except Exception:
            pass
    return 0
