"""How the console says what a manager reports about a seat: the roster tag and the agent
card's managed section, in ``cotal ps``'s words (``running 3.5h``, ``not in roster``).

Pure strings from :class:`attach.control.managed.ManagedSeat`, beside it; no Textual here, so the
wording can be tested on its own.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, TextIO

from attach.control.managed import ManagedSeat
from meshview.wire.sanitize import inline as clean  # rows are untrusted text
from meshview.timefmt import age, uptime

if TYPE_CHECKING:
    from attach.control.verbs import ManagerReport, PsResult


def process_text(s: ManagedSeat) -> str:
    """``running 3.5h`` / ``exited after 4m``, as ``cotal ps`` says it."""
    up = uptime(s.uptime_ms)
    return f"running {up}" if s.process == "running" else f"exited after {up}"


def mesh_text(s: ManagedSeat) -> str:
    if s.mesh_view != "current":
        return "mesh unknown"
    if s.mesh == "absent":
        return "not in roster"
    return f"mesh {clean(s.mesh, 32)}"


def marker(s: ManagedSeat, now: float | None = None) -> str:
    """The roster tag: ``managed pty``, ``managed pty · exited``, ``managed pty · manager silent 40s``."""
    t = f"managed {clean(s.runtime, 16)}"
    if s.process != "running":
        t += f" · {clean(s.process, 16)}"
    if s.silent_since is not None:
        now = time.time() if now is None else now
        t += f" · manager silent {age((now - s.silent_since) * 1000)}"
    return t


def detail_lines(s: ManagedSeat, presence_status: str | None, now: float | None = None) -> list[tuple[str, str]]:
    """Label/value pairs for the agent card: runtime, pid, uptime, process vs mesh."""
    now = time.time() if now is None else now
    out = [("runtime", f"{clean(s.runtime, 16)} on manager {clean(s.instance_id[:8])}"
                       + (f" ({clean(s.host, 64)})" if s.host else ""))]
    if s.pid is not None:
        out.append(("pid", str(s.pid)))
    out.append(("process", process_text(s)))
    mesh = mesh_text(s)
    if presence_status is not None and s.mesh_view == "current" and s.mesh not in ("absent", presence_status):
        mesh += f" (roster says {clean(presence_status)})"
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
    ms = row.get("uptimeMs")
    up = uptime(ms if isinstance(ms, int) and not isinstance(ms, bool) and ms >= 0 else 0)
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


def manager_line(m: ManagerReport, deadline_s: float) -> str:
    """What one manager that gave no rows says (refused, churned or silent), for the operator;
    terminal-safe (the refusal's code and message are the manager's)."""
    iid = clean(m.instance_id)
    if m.state == "refused":
        return f"manager {iid}: refused ps ({clean(m.code, 40)}): {clean(m.message, 400)}"
    if m.state == "churn":
        return (f"manager {iid}: restarted or re-registered while ps ran (its answer was not from the "
                "registration asked); ask again")
    if m.liveness == "gone":
        return (f"manager {iid}: registration is stale - nothing is subscribed on its rail; "
                f"its host is gone and it never deregistered; remove the record: cotal deregister-instance {iid}")
    if m.liveness == "probe-refused":
        return (f"manager {iid}: registered, no answer within the {deadline_s:g} s deadline "
                "(its liveness could not be probed: the broker refused this command's probe)")
    if m.liveness == "not-probed":
        return (f"manager {iid}: registered, no answer within the {deadline_s:g} s deadline "
                "(its liveness was not probed)")
    return (f"manager {iid}: registered, no answer within the {deadline_s:g} s deadline "
            "(something holds its rail: alive but slow, or wedged)")


STRAY_TEXT = {
    "unexpected": "answered but is not a live registration (not counted)",
    "duplicate": "answered more than once (the first answer is the one shown)",
    "late": "answered after the deadline (not counted)",
    "churn": "answered from another incarnation than the one registered (not counted)",
}


def stray_lines(result: PsResult) -> list[str]:
    """The replies that were no slot's answer, and the escalated managers nobody asked."""
    out = [f"manager {clean(x.reply.instance_id)} (epoch {x.reply.epoch}): {STRAY_TEXT.get(x.kind, x.kind)}"
           for x in result.strays]
    out += [f"manager {clean(r.instance_id)}: escalated (its supervisor spent the restart budget); not asked"
            for r in result.skipped]
    return out


def render_ps(result: PsResult, deadline_s: float, out: TextIO) -> None:
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
            print(manager_line(m, deadline_s), file=out)
    for line in stray_lines(result):
        print(line, file=out)


def stranded_line(seats: list[ManagedSeat]) -> str:
    """``cotal ps``'s count of stuck agents (``attach.control.managed.stranded``): the roster shows
    each as ``⨯ name · seat running, no presence`` and the spaces overview counts them."""
    n = len(seats)
    names = ", ".join(clean(s.name, 32) for s in seats[:8]) + (", …" if n > 8 else "")
    return (f"{n} seat{'s' if n != 1 else ''} running with no presence (stranded): {names}")


# --------------------------------------------------------------------------- manager status


def status_lines(report: ManagerReport) -> list[str]:
    """One manager's status record as lines (the console's managers view prints the same)."""
    d = report.data if isinstance(report.data, dict) else {}
    iid = clean(report.instance_id)

    def s(k: str, lim: int = 40) -> str:
        return clean(d.get(k), lim) if d.get(k) is not None else "?"

    up = d.get("uptimeMs")
    up_s = uptime(up) if isinstance(up, int) and not isinstance(up, bool) and up >= 0 else "?"
    cs = d.get("classSpawn")  # a boolean; anything else (a list would not even hash) is unknown
    spawn = ("takes unpinned spawns" if cs is True else
             "takes no unpinned spawn (every connector unavailable)" if cs is False else "classSpawn ?")
    out = [f"manager {iid} · {s('runtime')} · custody {s('custody')} · {s('agentCount')} agent(s) · "
           f"up {up_s} · {spawn}"]
    for c in d.get("connectors") or []:
        if not isinstance(c, dict):
            continue
        bins = c.get("binaries")
        if not isinstance(bins, dict):
            bins = {}
        b = ", ".join(f"{clean(k, 32)} {clean(v, 64)}" for k, v in list(bins.items())[:8])
        line = f"  connector {clean(c.get('agent'), 32)}: {clean(c.get('state'), 16)}"
        if b:
            line += f" ({b})"
        if isinstance(c.get("reason"), str):
            line += f" - {clean(c['reason'], 300)}"
        out.append(line)
    rec = d.get("staticReconciliation") if isinstance(d.get("staticReconciliation"), dict) else {}
    if rec:
        line = f"  static reconciliation: {clean(rec.get('state'), 16)}"
        sweep = rec.get("lastSweep") if isinstance(rec.get("lastSweep"), dict) else None
        if sweep:
            line += (f" (last {clean(sweep.get('kind'), 16)} sweep: {clean(sweep.get('succeeded'))} of "
                     f"{clean(sweep.get('attempted'))} succeeded, {clean(sweep.get('failed'))} failed)")
        out.append(line)
        for f in rec.get("failures") or []:
            if not isinstance(f, dict):
                continue
            line = (f"    {clean(f.get('alias'), 64)}: {clean(f.get('disposition'), 24)} in "
                    f"{clean(f.get('phase'), 16)} after {clean(f.get('attempts'))}/{clean(f.get('maxAttempts'))} "
                    "attempt(s)")
            if isinstance(f.get("lastError"), str):
                line += f" - {clean(f['lastError'], 300)}"
            out.append(line)
            if isinstance(f.get("remedy"), str):
                out.append(f"      remedy: {clean(f['remedy'], 300)}")
    return out
