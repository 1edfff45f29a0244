"""How the console says what a manager reports about a seat: the roster tag and the agent
card's managed section, in ``cotal ps``'s words (``running 3.5h``, ``not in roster``).

Pure strings from :class:`attach.managed.ManagedSeat`, beside it; no Textual here, so the
wording can be tested on its own.
"""

from __future__ import annotations

import time

from attach.managed import ManagedSeat
from meshview.timefmt import age, uptime


def process_text(s: ManagedSeat) -> str:
    """``running 3.5h`` / ``exited after 4m``, as ``cotal ps`` says it."""
    up = uptime(s.uptime_ms)
    return f"running {up}" if s.process == "running" else f"exited after {up}"


def mesh_text(s: ManagedSeat) -> str:
    if s.mesh_view != "current":
        return "mesh unknown"
    if s.mesh == "absent":
        return "not in roster"
    return f"mesh {s.mesh}"


def marker(s: ManagedSeat, now: float | None = None) -> str:
    """The roster tag: ``managed pty``, ``managed pty · exited``, ``managed pty · manager silent 40s``."""
    t = f"managed {s.runtime}"
    if s.process != "running":
        t += f" · {s.process}"
    if s.silent_since is not None:
        now = time.time() if now is None else now
        t += f" · manager silent {age((now - s.silent_since) * 1000)}"
    return t


def detail_lines(s: ManagedSeat, presence_status: str | None, now: float | None = None) -> list[tuple[str, str]]:
    """Label/value pairs for the agent card: runtime, pid, uptime, process vs mesh."""
    now = time.time() if now is None else now
    out = [("runtime", f"{s.runtime} on manager {s.instance_id[:8]}" + (f" ({s.host})" if s.host else ""))]
    if s.pid is not None:
        out.append(("pid", str(s.pid)))
    out.append(("process", process_text(s)))
    mesh = mesh_text(s)
    if presence_status is not None and s.mesh_view == "current" and s.mesh not in ("absent", presence_status):
        mesh += f" (roster says {presence_status})"
    out.append(("manager's view", mesh))
    if s.cols and s.rows:
        out.append(("terminal", f"{s.cols}×{s.rows}"))
    if s.silent_since is not None:
        out.append(("as of", f"{age((now - s.answered_at) * 1000)} ago · manager silent since "
                             f"{age((now - s.silent_since) * 1000)} ago"))
    return out
