"""What an agent is doing, from its event frames (the model's frame ledger): the roster's
``⚙ Bash · 12s`` / ``✗ run failed 3m``, and the same facts on the agent card and the
NEEDS-YOU / triage cards.

"Last tool", never "running": since upstream 0.49 nothing on the wire says a tool ended, so
``⚙ Bash · 12s`` means "the last tool this agent started, 12 s ago, in the run still open".
A closed run says nothing about now; a failed one is said until the next run starts.
Presence wins while the agent is waiting: its ``activity`` and ``condition`` name what it is
blocked on, which the frames cannot.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

from textual.widget import Widget

from meshview.model.frames import Activity, FrameLedger
from meshview.model.mesh import MeshModel
from meshview.model.snapshot import Peer
from widgets.presentation import age, safe

TOOL_CELLS = 32  # of a tool name on a row


class Doing(NamedTuple):
    """The one fact a row shows: ``tool`` (the open run's last tool started: ``name``),
    ``run`` (a run open, no tool started in it yet) or ``failed`` (the last run ended in
    ``RUN_ERROR``); ``at`` is when (model clock, ms)."""

    kind: str
    name: str | None
    at: float


def doing_of(act: Activity | None) -> Doing | None:
    """What the ledger's facts ``act`` say the agent is doing, or None (no open run, no
    failure since the last run started)."""
    if act is None:
        return None
    if act.run_id is not None:
        started = act.run_started
        if act.tool is not None and act.tool_at is not None and (
                started is None or act.tool_at >= started):
            return Doing("tool", act.tool, act.tool_at)
        return Doing("run", None, started if started is not None else act.last_at)
    if act.error_at is not None:
        return Doing("failed", None, act.error_at)
    return None


def on_row(d: Doing | None, p: Peer) -> Doing | None:
    """``d`` as ``p``'s roster row shows it: nothing while presence says more (waiting with
    an activity or a condition) or the agent is offline; nor an open run's tool once presence
    went idle after it (the run's closing frame was lost, or is late: the row must not say
    ``⚙ Bash · 2h`` of an idle agent)."""
    if d is None or p.status == "offline":
        return None
    if p.status == "waiting" and (p.activity or p.condition is not None):
        return None
    if p.status == "idle" and d.kind != "failed" and (p.status_since or 0.0) >= d.at:
        return None
    return d


def doing_text(d: Doing, now: float, *, card: bool = False) -> str:
    """``⚙ Bash · 12s`` / ``▸ run open · 40s`` / ``✗ run failed 3m`` (a row);
    ``card``: ``last tool ⚙ Bash 12s ago`` / ``run open 40s`` / ``✗ last run failed 3m ago``."""
    ago = age(max(0.0, now - d.at))
    if d.kind == "tool":
        name = safe(d.name, TOOL_CELLS) or "(unnamed)"
        return f"last tool ⚙ {name} {ago} ago" if card else f"⚙ {name} · {ago}"
    if d.kind == "run":
        return f"run open {ago}" if card else f"▸ run open · {ago}"
    return f"✗ last run failed {ago} ago" if card else f"✗ run failed {ago}"


@runtime_checkable
class HoldsModel(Protocol):
    """A screen that holds the model (the console screen)."""

    @property
    def model(self) -> MeshModel: ...


@runtime_checkable
class OverConsole(Protocol):
    """An overlay over the console screen (the narrow terminal's NEEDS-YOU overlay)."""

    console: Any


def ledger_of(node: Widget) -> FrameLedger | None:
    """The frame ledger of the model under the screen ``node`` sits on (None: not mounted on
    one that holds a model)."""
    screen: object = node.screen if node.is_attached else None
    if isinstance(screen, OverConsole):
        screen = screen.console
    return screen.model.frames if isinstance(screen, HoldsModel) else None
