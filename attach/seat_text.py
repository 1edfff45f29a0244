"""How the console says what a manager reports about a seat: the roster tag and the agent
card's managed section, in ``cotal ps``'s words (``running 3.5h``, ``not in roster``).

Pure strings from :class:`attach.managed.ManagedSeat`, beside it; no Textual here, so the
wording can be tested on its own.
"""

from __future__ import annotations

import time
from typing import TextIO

from attach.managed import ManagedSeat
from meshview.sanitize import inline as clean  # rows are untrusted text
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


# --------------------------------------------------------------------------- the ps table

KIND_W, NAME_W, PROC_W, MESH_W = 11, 16, 18, 16


def describe_row(row: dict) -> tuple[str, str]:
    up = uptime(int(row.get("uptimeMs") or 0))
    process = f"running {up}" if row.get("status") == "running" else f"exited after {up}"
    mesh = row.get("mesh")
    if row.get("meshView", "current") != "current":
        m = "mesh unknown"
    elif mesh == "absent":
        m = "not in roster"
    elif mesh == "offline":
        m = "mesh offline"
    else:
        m = f"mesh {mesh}"
    return process, m


def manager_line(m, deadline_s: float) -> str:
    """What one manager that gave no rows says (refused or silent), for the operator."""
    if m.state == "refused":
        return f"manager {m.instance_id}: refused ps ({m.code}): {m.message}"
    if m.liveness == "gone":
        return (f"manager {m.instance_id}: registration is stale - nothing is subscribed on its rail; "
                "its host is gone and it never deregistered")
    if m.liveness == "probe-refused":
        return (f"manager {m.instance_id}: registered, no answer within the {deadline_s:g} s deadline "
                "(the broker refused the liveness probe)")
    return (f"manager {m.instance_id}: registered, no answer within the {deadline_s:g} s deadline "
            "(something holds its rail: alive but slow, or wedged)")


def render_ps(result, deadline_s: float, out: TextIO) -> None:
    """``cotal ps``'s table of a ``ps`` result (the console's ``:ps`` prints the same lines)."""

    answered = [m for m in result.managers if m.state == "answered"]
    rows = [(m, r) for m in answered for r in sorted(m.rows, key=lambda r: r.name)]
    if rows:
        print(f"{'NAME':<{NAME_W}} {'KIND':<{KIND_W}} {'PROCESS':<{PROC_W}} {'MESH':<{MESH_W}} MANAGER", file=out)
        for m, r in rows:
            process, mesh = describe_row(r.raw)
            print(f"{clean(r.name)[:NAME_W]:<{NAME_W}} {clean(r.agent)[:KIND_W]:<{KIND_W}} "
                  f"{process:<{PROC_W}} {clean(mesh)[:MESH_W]:<{MESH_W}} {m.instance_id}", file=out)
    else:
        print("(no managed agents)", file=out)
    if len(result.managers) > 1:
        for m in answered:
            if not m.rows:
                print(f"manager {m.instance_id}: no managed agents", file=out)
    for m in result.managers:
        if m.state != "answered":
            print(clean(manager_line(m, deadline_s)), file=out)
