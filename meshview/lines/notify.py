"""Notifications when an agent starts waiting for someone (NEEDS-YOU), and, opted into, when
one looks stalled (``--notify-stalled``), when its run fails (``--notify-run-failed``) or when a
run closed and it went idle (``--notify-finished``; the last two from its event frames: the
model's frame ledger).

:class:`WaitingEpisodes` turns the model's NEEDS-YOU list into alerts: one per *waiting
episode*, and never a storm. An episode begins when an agent enters waiting; an agent that
leaves waiting and is back within ``settle_s`` is still in the same episode (a flapping harness
rings once). Across agents a token bucket (``burst`` alerts, one more every ``refill_s``) holds
the rest back; what it held back is counted and said in the next alert. The operator's own peer
never alerts.

Delivery: :func:`terminal_escape` is the bell plus a desktop-notification escape (OSC 9, or
OSC 777 ``notify``), wrapped for tmux's passthrough when inside tmux; :class:`CommandRunner`
runs ``--notify-cmd`` with the agent in its environment (``COTAL_AGENT``...), never in its
command line, so no mesh text reaches a shell parser. :class:`Notifier` ties them to a model.

No Textual or Rich import: the console hands :class:`Notifier` a ``write`` that goes through its
driver; the line stream hands it one that writes to the terminal on stderr.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from dataclasses import dataclass, field
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Iterable

from meshview.errors import swallowed
from meshview.model.stalled import DEFAULT_STALL_MINUTES

if TYPE_CHECKING:  # annotations only: `cotal watch --help` reads STYLES without the model
    from meshview.model.frames import FrameLedger
    from meshview.model.snapshot import NeedsYou

SETTLE_S = 5.0
BURST = 3
REFILL_S = 20.0
CMD_TIMEOUT_S = 30.0
CMD_MAX_RUNNING = 4
STYLES = ("osc9", "osc777", "both", "bell")
FINISHED_QUIET_MS = 5_000.0  # an agent with no presence: "idle" once no run opened this long
FINISHED_PENDING_CAP = 1024  # agents whose run closed, waiting to be seen idle

_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean(s: str | None, n: int = 200) -> str:
    """One line of text safe inside an escape sequence or an environment variable."""
    s = _CONTROLS.sub(" ", s or "").strip()
    return s if len(s) <= n else s[: n - 1] + "…"


@dataclass(frozen=True, slots=True)
class Alert:
    agent_id: str
    name: str
    role: str | None
    condition: str | None  # condition code (input, approval, ...) when the agent said
    message: str | None
    space: str
    server: str
    more: int = 0  # alerts held back by the rate limit since the last one delivered
    # or "stalled" (``--notify-stalled``: meshview/model/stalled.py), "run-failed"
    # (``--notify-run-failed``), "finished" (``--notify-finished``)
    event: str = "waiting"
    run_id: str | None = None  # the run a run-failed / finished alert is about

    def text(self) -> str:
        """``ada needs you: approval - wants approval to run migrations``; a stalled one:
        ``ada may be stalled - stalled? 14m (no output, no messages)``; ``ada: run failed
        (rate_limit)``; ``ada finished a run and is idle``."""
        more = f" (+{self.more} more held back)" if self.more else ""
        if self.event == "stalled":
            s = f"{clean(self.name, 64)} may be stalled - {clean(self.message, 160)}"
            return s + more
        if self.event == "run-failed":
            s = f"{clean(self.name, 64)}: {clean(self.message, 120) or 'run failed'}"
            return s + (f" ({clean(self.condition, 32)})" if self.condition else "") + more
        if self.event == "finished":
            return f"{clean(self.name, 64)} finished a run and is idle" + more
        s = f"{clean(self.name, 64)} needs you"
        if self.condition:
            s += f": {clean(self.condition, 32)}"
        if self.message:
            s += f" - {clean(self.message, 160)}"
        if self.more:
            s += f" (+{self.more} more held back)"
        return s

    def env(self) -> dict[str, str]:
        """What ``--notify-cmd`` receives (added to the console's environment)."""
        return {
            "COTAL_EVENT": self.event,
            "COTAL_AGENT": clean(self.name, 128),
            "COTAL_AGENT_ID": clean(self.agent_id, 256),
            "COTAL_ROLE": clean(self.role, 64),
            "COTAL_CONDITION": clean(self.condition, 64),
            "COTAL_MESSAGE": clean(self.message, 1024),
            "COTAL_SPACE": clean(self.space, 128),
            "COTAL_SERVER": clean(self.server, 256),
            "COTAL_RUN_ID": clean(self.run_id, 128),
            "COTAL_TEXT": self.text(),
        }

    def title(self) -> str:
        """A desktop notification's title (OSC 777)."""
        if self.event == "run-failed":
            return f"cotal: {clean(self.name, 64)}'s run failed"
        if self.event == "finished":
            return f"cotal: {clean(self.name, 64)} is done"
        return f"cotal: {clean(self.name, 64)} needs you"


class WaitingEpisodes:
    """NEEDS-YOU snapshots in, alerts out: one per waiting episode, rate-limited."""

    def __init__(self, space: str, server: str = "", *, settle_s: float = SETTLE_S,
                 burst: int = BURST, refill_s: float = REFILL_S,
                 ignore: Callable[[], Iterable[str]] = lambda: (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.space, self.server = space, server
        self.settle_s, self.burst, self.refill_s = settle_s, max(1, burst), refill_s
        self.ignore = ignore
        self.clock = clock
        self._waiting: set[str] = set()
        self._left: dict[str, float] = {}  # agent id -> when it last left waiting
        self._tokens = float(self.burst)
        self._refilled = clock()
        self.held = 0  # held back since the last delivered alert
        self.held_total = 0
        self.episodes = 0

    def update(self, needs: Iterable[NeedsYou], event: str = "waiting") -> list[Alert]:
        now = self.clock()
        current = {n.id: n for n in needs}
        for pid in self._waiting - current.keys():
            self._left[pid] = now
        for pid, t in list(self._left.items()):
            if now - t >= self.settle_s and pid not in current:
                del self._left[pid]
        fresh = []
        for pid, n in current.items():
            if pid in self._waiting:
                continue
            left = self._left.pop(pid, None)
            if left is not None and now - left < self.settle_s:
                continue  # back within the settle time: the same episode
            fresh.append(n)
        self._waiting = set(current)
        if not fresh:
            return []
        mine = set(self.ignore() or ())
        out = []
        for n in sorted(fresh, key=lambda n: (n.name.lower(), n.id)):
            if n.id in mine:
                continue  # the operator's own peer
            self.episodes += 1
            if not self._take(now):
                self.held += 1
                self.held_total += 1
                continue
            # the label: two agents named ada raise two alerts that say which is which
            out.append(Alert(n.id, n.label or n.name, n.role, n.condition_code, n.condition_message,
                             self.space, self.server, more=self.held, event=event))
            self.held = 0
        return out

    def admit(self) -> int | None:
        """One alert that is not a waiting episode's (a run failed, a run finished) through the
        same bucket: the count held back to report with it when a token is free (and that count
        starts again), else None (it is held back and counted)."""
        if not self._take(self.clock()):
            self.held += 1
            self.held_total += 1
            return None
        more, self.held = self.held, 0
        return more

    def _take(self, now: float) -> bool:
        self._tokens = min(float(self.burst),
                           self._tokens + (now - self._refilled) / self.refill_s)
        self._refilled = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


def terminal_escape(alert: Alert, style: str = "osc9", tmux: bool | None = None) -> str:
    """The bell and a desktop notification for ``alert``. Inside tmux (``$TMUX``) the OSC is
    wrapped in tmux's passthrough (shown when ``allow-passthrough`` is on, dropped otherwise;
    tmux handles the bell itself)."""
    if tmux is None:
        tmux = bool(os.environ.get("TMUX"))
    body = clean("cotal: " + alert.text(), 240)
    oscs = []
    if style in ("osc9", "both"):
        oscs.append(f"\x1b]9;{body}\x07")
    if style in ("osc777", "both"):
        title = clean(alert.title(), 80).replace(";", ",")
        oscs.append(f"\x1b]777;notify;{title};{clean(alert.text(), 200)}\x07")
    if tmux:
        oscs = [f"\x1bPtmux;{o.replace(chr(27), chr(27) * 2)}\x1b\\" for o in oscs]
    return "\x07" + "".join(oscs)


class CommandRunner:
    """Runs ``command`` through ``/bin/sh`` once per alert with the alert in the environment.

    Fire and forget, bounded: at most ``max_running`` at a time (more are skipped and counted),
    each killed after ``timeout_s``; its output goes nowhere (it must not draw on the console)."""

    def __init__(self, command: str, *, timeout_s: float = CMD_TIMEOUT_S,
                 max_running: int = CMD_MAX_RUNNING) -> None:
        self.command = command
        self.timeout_s = timeout_s
        self.max_running = max_running
        self.running: set[asyncio.Task] = set()
        self.started = 0
        self.skipped = 0
        self.failed = 0
        self.last_error: str | None = None

    def run(self, alert: Alert) -> None:
        if len(self.running) >= self.max_running:
            self.skipped += 1
            return
        try:
            t = asyncio.get_running_loop().create_task(self._run(alert), name="notify-cmd")
        except RuntimeError:
            self.skipped += 1  # no loop: nothing to run it on
            return
        self.started += 1
        self.running.add(t)
        t.add_done_callback(self.running.discard)

    async def _run(self, alert: Alert) -> None:
        env = {**os.environ, **alert.env()}
        try:
            p = await asyncio.create_subprocess_shell(
                self.command, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True)
        except OSError as e:
            self.failed += 1
            self.last_error = f"--notify-cmd could not start: {e.strerror or e}"
            return
        try:
            rc = await asyncio.wait_for(p.wait(), self.timeout_s)
            if rc != 0:
                self.failed += 1
                self.last_error = f"--notify-cmd exited with status {rc}"
        except asyncio.TimeoutError:
            self.failed += 1
            self.last_error = f"--notify-cmd killed after {self.timeout_s:g}s"
            try:
                p.kill()
                await p.wait()
            except ProcessLookupError:
                pass
        except asyncio.CancelledError:
            try:
                p.kill()
            except ProcessLookupError:
                pass
            raise

    async def wait(self, timeout: float = 5.0) -> None:
        """Let running commands finish (shutdown)."""
        if self.running:
            await asyncio.wait(list(self.running), timeout=timeout)


@dataclass
class NotifySettings:
    """``terminal``: ring and send the escape; ``command``: ``--notify-cmd``; ``style``: which
    escape; ``warning``: one sentence when the config file was unreadable; ``sources``: where
    each setting came from. Plain values: the CLI's loader (``cotal_tui.config``) fills them."""

    terminal: bool = False
    command: str | None = None
    style: str = "osc9"
    settle_s: float = SETTLE_S
    stalled: bool = False  # also alert when an agent looks stalled (--notify-stalled)
    stalled_minutes: float = DEFAULT_STALL_MINUTES  # the verdict's quiet time (meshview/model/stalled.py)
    stalled_sources: dict[str, str] = field(default_factory=dict)  # where those two came from
    run_failed: bool = False  # also alert when an agent's run fails (--notify-run-failed)
    finished: bool = False  # ... and when a run closed and it went idle (--notify-finished)
    run_sources: dict[str, str] = field(default_factory=dict)  # where those two came from
    warning: str | None = None
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return self.terminal or bool(self.command)


def stalled_needs(model: Any, now: float) -> list[NeedsYou]:
    """The model's stalled agents as NEEDS-YOU rows (condition ``stalled``, the verdict's label
    as the message), for their own episodes."""
    from meshview.model.snapshot import NeedsYou

    out = []
    for pid, v in model.stalled(now=now).items():
        p = model.peer(pid)
        if p is None:
            continue
        out.append(NeedsYou(id=pid, name=p.name, role=p.role, condition_code="stalled",
                            condition_message=v.label(), condition_age_ms=v.for_ms,
                            status_age_ms=None, heartbeat_age_ms=max(0.0, now - p.ts),
                            activity=p.activity, label=model.labels().label(pid) or p.name))
    return out


class RunAlerts:
    """The frame ledger's run transitions in, run alerts out: ``run-failed`` when a run ends in
    ``RUN_ERROR``; ``finished`` when a run closed and the agent then reads idle (its presence
    says idle with no run open; an agent with no presence, once no run opened for
    :data:`FINISHED_QUIET_MS`). Frames from a history read never alert; nor does the operator's
    own peer. Follows the ledger by its counters: a new ledger (a restore) starts afresh."""

    def __init__(self, *, failed: bool = False, finished: bool = False,
                 ignore: Callable[[], Iterable[str]] = lambda: ()) -> None:
        self.failed, self.finished = failed, finished
        self.ignore = ignore
        self._ledger: FrameLedger | None = None
        self._seen = 0
        # agent id -> (run id, when it closed): waiting to be seen idle (bounded)
        self._pending: OrderedDict[str, tuple[str, float]] = OrderedDict()

    @property
    def pending(self) -> int:
        """Agents whose run closed, not yet seen idle (tests and diagnostics read it)."""
        return len(self._pending)

    def update(self, model: Any, now: float) -> list[tuple[str, str, str | None]]:
        """``(event, agent id, run id)`` of each alert due, from ``model``'s frame ledger
        (``model.frames``) and roster (``model.peer``), at ``now`` (model clock, ms)."""
        led = model.frames
        if led is not self._ledger:
            self._ledger, self._seen, self._pending = led, led.transitions, OrderedDict()
        out: list[tuple[str, str, str | None]] = []
        if led.transitions != self._seen:
            for t in led.transitions_since(self._seen):
                if t.historical:
                    continue
                if t.state == "started":
                    self._pending.pop(t.agent, None)
                elif t.state == "error":
                    self._pending.pop(t.agent, None)
                    if self.failed:
                        out.append(("run-failed", t.agent, t.run_id))
                elif self.finished:
                    self._pending[t.agent] = (t.run_id, t.at)
                    self._pending.move_to_end(t.agent)
                    while len(self._pending) > FINISHED_PENDING_CAP:
                        self._pending.popitem(last=False)
            self._seen = led.transitions
        for pid, (run_id, at) in list(self._pending.items()):
            act = led.agent(pid)
            if act is None or act.run_id is not None:
                del self._pending[pid]  # forgotten, or a run opened since: not idle
                continue
            p = model.peer(pid)
            if p is None:
                if now - at < FINISHED_QUIET_MS:
                    continue
            elif p.status != "idle":
                if p.status == "offline":
                    del self._pending[pid]
                continue
            del self._pending[pid]
            out.append(("finished", pid, run_id))
        mine = set(self.ignore() or ())
        return [o for o in out if o[1] not in mine]


class Notifier:
    """One model's NEEDS-YOU turned into deliveries: ``write`` gets the terminal escape (when
    given), ``command`` runs per alert (when given), ``on_alert`` hears each alert (a console
    line). ``enabled`` can be switched at run time; episodes are tracked either way, so
    switching on does not replay the agents already waiting."""

    def __init__(self, space: str, server: str = "", *, write: Callable[[str], Any] | None = None,
                 terminal: bool = True, command: str | None = None, style: str = "osc9",
                 on_alert: Callable[[Alert], Any] | None = None, enabled: bool = True,
                 ignore: Callable[[], Iterable[str]] = lambda: (), settle_s: float = SETTLE_S,
                 episodes: WaitingEpisodes | None = None, stalled: bool = False,
                 run_failed: bool = False, finished: bool = False) -> None:
        self.episodes = episodes or WaitingEpisodes(space, server, ignore=ignore,
                                                    settle_s=settle_s)
        self.space, self.server = space, server
        # runs from the event frames (``--notify-run-failed`` / ``--notify-finished``), through
        # the waiting episodes' bucket
        self.runs = RunAlerts(failed=run_failed, finished=finished, ignore=ignore)
        # stalled agents (``--notify-stalled``): episodes of their own, looked at once a second
        self.stalled = stalled
        self.stall_episodes = WaitingEpisodes(space, server, ignore=ignore, settle_s=settle_s)
        self._stall_looked = float("-inf")
        self.write = write
        self.terminal = terminal  # the bell and escape (else only the command and on_alert)
        self.runner = CommandRunner(command) if command else None
        self.style = style if style in STYLES else "osc9"
        self.on_alert = on_alert
        self.enabled = enabled
        self.delivered = 0
        self.last_error: str | None = None

    def on_model(self, model: Any) -> None:
        """An observer listener: look at NEEDS-YOU after each batch (and, with ``stalled``,
        at the model's stalled verdicts once a second of its clock)."""
        self.update(model.snapshot().signals.needs_you)
        if self.runs.failed or self.runs.finished:
            self.update_runs(model)
        if self.stalled:
            now = model.clock()
            if now - self._stall_looked >= 1000.0:
                self._stall_looked = now
                self.update_stalled(stalled_needs(model, now))

    def update_stalled(self, needs: Iterable[NeedsYou]) -> list[Alert]:
        alerts = self.stall_episodes.update(needs, "stalled")
        if not self.enabled:
            return []
        for a in alerts:
            self.deliver(a)
        return alerts

    def update_runs(self, model: Any) -> list[Alert]:
        """The run alerts due from ``model``'s frame ledger, delivered (when enabled) through
        the waiting alerts' rate limit."""
        due = self.runs.update(model, model.clock())
        if not due or not self.enabled:
            return []
        labels = model.labels()
        out = []
        for event, pid, run_id in due:
            more = self.episodes.admit()
            if more is None:
                continue
            p = model.peer(pid)
            act = model.frames.agent(pid)
            name = labels.label(pid) or (p.name if p is not None else pid)
            cond = p.condition.code if p is not None and p.condition is not None else None
            msg = (act.error if act is not None and act.error else "run failed") \
                if event == "run-failed" else None
            a = Alert(pid, name, p.role if p is not None else None, cond, msg, self.space,
                      self.server, more=more, event=event, run_id=run_id)
            self.deliver(a)
            out.append(a)
        return out

    def update(self, needs: Iterable[NeedsYou]) -> list[Alert]:
        alerts = self.episodes.update(needs)
        if not self.enabled:
            return []
        for a in alerts:
            self.deliver(a)
        return alerts

    def deliver(self, alert: Alert) -> None:
        self.delivered += 1
        if self.write is not None and self.terminal:
            try:
                self.write(terminal_escape(alert, self.style) if self.style != "bell" else "\x07")
            except Exception as e:  # noqa: BLE001 - a notification never breaks the watcher
                self.last_error = f"notification escape not written: {e}"
        if self.runner is not None:
            self.runner.run(alert)
        if self.on_alert is not None:
            try:
                self.on_alert(alert)
            except Exception:  # noqa: BLE001 - a listener never breaks the watcher [counted: COTAL_LOG]
                swallowed("meshview.lines.notify:Notifier.deliver")

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.wait()
