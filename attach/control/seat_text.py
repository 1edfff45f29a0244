"""How the console says what a manager reports about a seat: the roster tag and the agent
card's managed section, in ``cotal ps``'s words (``running 3.5h``, ``not in roster``).

Pure strings from :class:`attach.control.managed.ManagedSeat`, beside it; no Textual here, so the
wording can be tested on its own.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, TextIO

from attach.control.managed import ManagedSeat
from attach.control.row_facts import CODE_CHARS, RowFacts, RowRejected, check_row, row_facts
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
    """Label/value pairs for the agent card: runtime, pid, uptime, process vs mesh, then every
    fact the row carries (``cotal ps --wide``'s, same words), or why the row was rejected."""
    now = time.time() if now is None else now
    out = [("runtime", f"{clean(s.runtime, 16)} on manager {clean(s.instance_id[:8])}"
                       + (f" ({clean(s.host, 64)})" if s.host else ""))]
    if s.pid is not None:
        out.append(("pid", str(s.pid)))
    out.append(("process", process_text(s)))
    if s.rejected is not None:
        out.append(("row", f"rejected ({clean(s.rejected, 300)})"))
    mesh = mesh_words(s.mesh, s.facts, now * 1000) if s.rejected is None else mesh_text(s)
    if presence_status is not None and s.mesh_view == "current" and s.mesh not in ("absent", presence_status):
        mesh += f" (roster says {clean(presence_status)})"
    out.append(("manager's view", mesh))
    out += [(k, v) for k, v in fact_pairs(s.facts) if k not in ("pid", "host")]
    if s.cols and s.rows:
        out.append(("terminal", f"{s.cols}×{s.rows}"))
    if s.silent_since is not None:
        out.append(("as of", f"{age((now - s.answered_at) * 1000)} ago · manager silent since "
                             f"{age((now - s.silent_since) * 1000)} ago"))
    return out


# --------------------------------------------------------------------------- the ps table

KIND_W, NAME_W, PROC_W, MESH_W = 11, 16, 18, 16
MESH_MAX = 64  # the MESH column grows to its longest cell (a condition), up to this


AGE_MAX_MS = 100 * 365 * 86400_000.0  # a century: past it an age is a lie, not a duration


def ref_age(ms: float) -> str:
    """The reference's compact age (presence-ages.ts ``formatAge``): ``12s``, ``47m``, ``3h``,
    ``2d``, floored to the largest whole unit; a stamp ahead of this clock is 0, and one from
    before the epoch (a peer's ``-1e300``) says ``?`` rather than a 300-digit count."""
    if not 0 <= ms < AGE_MAX_MS:
        return "0s" if ms < 0 else "?"
    s = int(ms // 1000)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


UNKNOWN_WHY = {"stale": "its presence view is stale; last known {mesh}",
               "unpopulated": "its presence view has not loaded yet"}


def mesh_words(mesh: object, f: RowFacts, now_ms: float) -> str:
    """The MESH column, in the reference CLI's words: ``mesh unknown (<why>)`` when the manager's
    presence view is not current; ``not in roster``; ``mesh offline for 3.5h`` (from
    ``offlineSince``); else the status with its condition and the last work event:
    ``mesh waiting (rate_limit for 40m) · active 40m ago``."""
    m = clean(mesh, 32) if isinstance(mesh, str) and mesh else "absent"
    if f.mesh_view != "current":
        return f"mesh unknown ({UNKNOWN_WHY.get(f.mesh_view, f.mesh_view).format(mesh=m)})"
    if m == "absent":
        return "not in roster"
    if m == "offline":
        if f.offline_since is not None:
            gone = now_ms - f.offline_since
            return f"mesh offline for {uptime(int(max(0.0, gone)))}" if gone < AGE_MAX_MS else "mesh offline"
        return "mesh offline"
    out = f"mesh {m}"
    if f.condition_code:
        out += f" ({clean(f.condition_code, CODE_CHARS)}"
        if f.condition_since is not None:
            out += f" for {ref_age(now_ms - f.condition_since)}"
        out += ")"
    if f.active_at is not None:
        out += f" · active {ref_age(now_ms - f.active_at)} ago"
    return out


def describe_row(row: dict, now_ms: float | None = None) -> tuple[str, str]:
    """A row's PROCESS and MESH columns (two facts, printed as two facts, as the reference)."""
    ms = row.get("uptimeMs")
    up = uptime(ms if isinstance(ms, int) and not isinstance(ms, bool) and ms >= 0 else 0)
    process = f"running {up}" if row.get("status") == "running" else f"exited after {up}"
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    return process, mesh_words(row.get("mesh"), row_facts(row), now_ms)


def fact_pairs(f: RowFacts) -> list[tuple[str, str]]:
    """Every recorded fact of a row as (label, value), terminal-safe and bounded: what
    ``cotal ps --wide`` prints under a seat and the agent card's seat section shows. An absent
    fact is not recorded and is not shown (never as zero or empty)."""
    out: list[tuple[str, str]] = []
    if f.model:
        out.append(("model", clean(f.model, 80) + (f" / {clean(f.variant, 40)}" if f.variant else "")))
    elif f.variant:
        out.append(("variant", clean(f.variant, 40)))
    if f.provider:
        out.append(("provider", clean(f.provider, 80)))
    if f.cwd:
        out.append(("cwd", clean(f.cwd, 200)))
    if f.pid is not None:
        out.append(("pid", str(f.pid)))
    if f.spawner:
        out.append(("spawner", clean(f.spawner, 120)))
    if f.host:
        out.append(("host", clean(f.host, 64)))
    if f.lifecycle_uid:
        out.append(("uid", clean(f.lifecycle_uid, 40)))
    if f.condition_message:
        out.append(("condition", clean(f.condition_message, 200)))
    if f.auth_health:
        out.append(("auth", clean(f.auth_health, 40) + (f": {clean(f.auth_reason, 200)}" if f.auth_reason else "")))
    r = f.resume
    if r is not None:
        t = f"forked from {clean(r.source, 80)}"
        if r.title:
            t += f' "{clean(r.title, 80)}"'
        if r.sha256:
            t += f" sha256 {clean(r.sha256, 64)[:12]}"
        if r.host or r.transferred_at:
            t += " (carried" + (f" from {clean(r.host, 64)}" if r.host else "") + (
                f" at {clean(r.transferred_at, 40)}" if r.transferred_at else "") + ")"
        out.append(("resume", t))
    return out


def facts_line(f: RowFacts) -> str:
    """``--wide``'s one facts line under a seat: ``model opus / high · cwd /w · pid 4242 · …``."""
    return " · ".join(v if k == "resume" else f"{k} {v}" for k, v in fact_pairs(f))


def rejected_line(m_iid: str, name: object, e: RowRejected) -> str:
    """A row refused for a changed field type: named, with the manager that sent it."""
    return (f'manager {clean(m_iid)}: row "{clean(name, 64)}" rejected ({e.code}): {clean(str(e), 200)}; '
            "the other rows are shown")


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


def render_ps(result: PsResult, deadline_s: float, out: TextIO, *, wide: bool = False,
              now_ms: float | None = None) -> int:
    """``cotal ps``'s table of a ``ps`` result (the console's ``:ps`` prints the same lines);
    ``wide``: each seat's facts line under it. Returns how many rows were rejected (a known field
    with another type), each named after the table."""
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    answered = [m for m in result.managers if m.state == "answered"]
    rows, rejected = [], []
    for m in answered:
        for r in sorted(m.rows, key=lambda r: r.name):
            try:
                check_row(r.raw)
            except RowRejected as e:
                rejected.append(rejected_line(m.instance_id, r.name, e))
                continue
            process, mesh = describe_row(r.raw, now_ms)
            rows.append((m, r, process, mesh))
    if rows:
        mesh_w = min(MESH_MAX, max([MESH_W] + [len(x[3]) for x in rows]))
        print(f"{'NAME':<{NAME_W}} {'KIND':<{KIND_W}} {'PROCESS':<{PROC_W}} {'MESH':<{mesh_w}} MANAGER", file=out)
        for m, r, process, mesh in rows:
            print(f"{clean(r.name)[:NAME_W]:<{NAME_W}} {clean(r.agent)[:KIND_W]:<{KIND_W}} "
                  f"{process:<{PROC_W}} {mesh[:mesh_w]:<{mesh_w}} {m.instance_id}", file=out)
            f = row_facts(r.raw)
            if f.auth_health:  # the reference prints a failing bearer refresh under its seat, always
                print(f"    auth {clean(f.auth_health, 40)}"
                      + (f": {clean(f.auth_reason, 300)}" if f.auth_reason else ""), file=out)
            if wide:
                line = facts_line(f)
                print(f"    {line}" if line else "    (no facts recorded)", file=out)
    elif not rejected:
        print("(no managed agents)", file=out)
    if len(result.managers) > 1:
        for m in answered:
            if not m.rows:
                print(f"manager {m.instance_id}: no managed agents", file=out)
    for line in rejected:
        print(line, file=out)
    for m in result.managers:
        if m.state != "answered":
            print(manager_line(m, deadline_s), file=out)
    for line in stray_lines(result):
        print(line, file=out)
    return len(rejected)


def partial(result: PsResult) -> list[str]:
    """The frozen slots that gave no rows (refused, churned or silent): a scatter with any is
    partial, and ``cotal ps`` exits non-zero after printing what it has."""
    return [m.instance_id for m in result.managers if m.state != "answered"]


SLOT_PHASES = ("provisioning", "active", "terminalizing", "retired")


def slot_lines(result: PsResult) -> list[str]:
    """``cotal ps --slots``: each answering manager's durable static-slot rows (SlotRow: the slot,
    its phase and revision, the head it names, live or not), then the managers that gave none."""
    out: list[str] = []
    for m in result.managers:
        if m.state != "answered":
            continue
        data = m.data if isinstance(m.data, list) else None
        if data is None:
            out.append(f"manager {clean(m.instance_id)}: refused slots (contract-invalid): "
                       "its answer is not a list of slot rows")
            continue
        if not data:
            out.append(f"manager {clean(m.instance_id)}: no static slots")
            continue
        for row in data[:1000]:
            out.append(_slot_line(m.instance_id, row))
        if len(data) > 1000:
            out.append(f"manager {clean(m.instance_id)}: {len(data) - 1000} more slot rows not shown")
    return out


def _slot_line(iid: str, row: object) -> str:
    if not isinstance(row, dict) or not isinstance(row.get("name"), str):
        return f"manager {clean(iid)}: a slot row without a name (not shown)"

    def s(k: str, lim: int = 40) -> str:
        v = row.get(k)
        return clean(v, lim) if isinstance(v, (str, int)) and not isinstance(v, bool) else "?"

    phase = row.get("slotPhase") if row.get("slotPhase") in SLOT_PHASES else "?"
    t = (f"{clean(row['name'], 64)}  {s('owner', 64)}.{s('actor', 64)}  slot {phase} rev {s('slotRevision')} "
         f"uid {s('slotLifecycleUid')}")
    if isinstance(row.get("headState"), str):
        t += f"  head {clean(row['headState'], 16)}"
        if isinstance(row.get("headLifecycleUid"), str):
            t += f" uid {clean(row['headLifecycleUid'], 40)}"
        if isinstance(row.get("headRevision"), int) and not isinstance(row.get("headRevision"), bool):
            t += f" rev {row['headRevision']}"
    op = row.get("headOp")
    if isinstance(op, dict) and isinstance(op.get("opId"), str):
        t += f"  {clean(op.get('kind'), 16)} {clean(op['opId'], 40)}"
    if row.get("cleanupComplete") is True:
        t += "  cleanup complete"
    live = row.get("live")
    t += "  live" if live is True else "  not live" if live is False else "  live ?"
    t += f"  manager {s('managerInstanceId', 64)}"
    return t


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
