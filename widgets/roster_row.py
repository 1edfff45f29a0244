"""The dense roster row: one line per agent, in columns aligned like k9s.

``● name/role  status age  doing  code  seen 3s``: fixed widths computed once per width (and
per longest shown name), so a hostile name (controls, bidi, zero-width, 10k characters) is
neutralised by ``safe``/``who`` and then cut to its cell, never pushing the next column.
Narrower panels drop the last-seen column first, then the code context, then shrink what the
agent is doing; a row never wraps (one line: ``measure`` is 1, no wrap computation).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rich.cells import cell_len
from rich.text import Text

from meshview.model.snapshot import Peer
from widgets.doing import Doing, doing_text
from widgets.presentation import (
    COTAL_DARK_LOOK, Look, age, harness_tag, safe, status_glyph, who,
)

GLYPH = 2  # "● "
GAP = 2  # between columns
NAME_MIN, NAME_CAP = 8, 24  # the name/role column: sized to the longest shown name, capped
# ``stalled? 14m`` / ``offline 59m`` / ``waiting 12s``: a waiting agent's condition goes to the
# doing column, so the status column stays narrow and the doing keeps ``⚙ TodoWrite · 12s`` whole
STATUS_CELLS, STATUS_MIN = 12, 9
DOING_MIN, DOING_WANT = 12, 20  # DOING_MIN: ``⚙ Bash · 12s`` whole  # the doing column keeps DOING_WANT before code or seen are added
CODE_CELLS = 18
SEEN_CELLS = 8  # "seen 12m"
CODE_KEYS = ("repo", "branch")  # card.meta reserved keys (issue 39 sets them in the demo)


class Columns(NamedTuple):
    """Cells per column at one width (0: the column is dropped)."""

    width: int
    name: int
    status: int
    doing: int
    code: int
    seen: int
    gap: int = GAP


def columns(width: int, name_cells: int, *, code: bool = False) -> Columns:
    """The columns for a panel ``width`` cells wide whose longest shown ``name/role`` is
    ``name_cells``; ``code``: some shown agent carries ``meta.branch``/``repo``."""
    name = max(NAME_MIN, min(NAME_CAP, name_cells))
    status = STATUS_CELLS
    rest = width - GLYPH - name - GAP - status - GAP  # what the doing column (and extras) get
    code_w = seen_w = 0
    if code and rest - GAP - CODE_CELLS >= DOING_WANT:
        code_w = CODE_CELLS
        rest -= GAP + CODE_CELLS
    # dropped first: never shown where the code column (when there is one) is not
    if (code_w or not code) and rest - GAP - SEEN_CELLS >= DOING_WANT:
        seen_w = SEEN_CELLS
        rest -= GAP + SEEN_CELLS
    gap = GAP
    if rest < DOING_MIN:  # too narrow: the name, the status, then the gaps give to the doing
        give = min(DOING_MIN - rest, name - NAME_MIN)
        name, rest = name - give, rest + give
        give = min(DOING_MIN - rest, status - STATUS_MIN)
        status, rest = status - give, rest + give
        if rest < DOING_MIN:
            gap, rest = 1, rest + 2 * (GAP - 1)
    return Columns(width, name, status, max(0, rest), code_w, seen_w, gap)


def name_cells(label: str, role: str | None, tag: str | None = None) -> int:
    """The cells ``label/role cc`` takes as the row shows it (capped, so a 10k name is cheap)."""
    n = cell_len(safe(label, NAME_CAP + 1))
    return n + (1 + cell_len(safe(role, NAME_CAP)) if role else 0) + (1 + len(tag) if tag else 0)


def code_of(meta: Any) -> str | None:
    """``repo@branch`` (or either alone) from the card's ``meta``; None when it has neither."""
    got = {k: v for k, v in meta if k in CODE_KEYS and v}
    if not got:
        return None
    repo, branch = got.get("repo"), got.get("branch")
    if repo and branch:
        return f"{safe(str(repo).rstrip('/').rsplit('/', 1)[-1], 40)}@{safe(branch, 60)}"
    return safe(repo or branch, 60)


def status_cell(p: Peer, now: float, stall: str | None = None) -> str:
    """``working 3m`` / ``waiting 12s`` / ``offline 5m`` / ``stalled? 14m``: the status and
    how long it has held (a waiting agent's condition, with its own age, when it has one;
    the condition's code heads the doing column: :func:`dense_row`)."""
    if stall is not None:
        return stall.removeprefix("working · ").split(" (", 1)[0]
    if p.status == "waiting" and p.condition is not None and p.condition.since:
        return f"waiting {age(now - p.condition.since)}"
    if p.status == "offline":
        return "offline" + (f" {age(now - p.offline_since)}" if p.offline_since else "")
    return p.status + (f" {age(now - p.status_since)}" if p.status_since else "")


def _cell(t: Text, cells: int) -> Text:
    """``t`` cut (with ``…``) or padded to exactly ``cells`` cells."""
    t.truncate(cells, overflow="ellipsis", pad=True)
    return t


def dense_row(p: Peer, label: str, cols: Columns, now: float, *, doing: Doing | None = None,
              stall: str | None = None, marker: Text | None = None, marker_whole: bool = False,
              look: Look = COTAL_DARK_LOOK) -> Text:
    """One roster line for ``p`` (shown as ``label``), in ``cols``: every column exactly its
    width, the whole row at most ``cols.width`` cells. ``marker``: a managed seat's
    (``▸ managed pty``), whole when ``marker_whole`` (its seat exited, its manager silent)."""
    dim = p.kind != "agent" or p.status == "offline"
    glyph, gstyle = status_glyph(p.status, look)
    row = Text("⚙ " if p.kind != "agent" else glyph + " ", style="dim" if dim else gstyle)
    name = who(label, p.role, look)
    tag = harness_tag(p.meta)
    if tag:
        name.append(f" {tag}", style="dim italic")
    row.append_text(_cell(name, cols.name))
    row.append(" " * cols.gap)
    st = Text(status_cell(p, now, stall), style="bold yellow" if stall else "")
    row.append_text(_cell(st, cols.status))
    if cols.doing:
        row.append(" " * cols.gap)
        what = Text()
        if doing is not None:
            what.append(doing_text(doing, now), style=f"bold {look.error}"
                        if doing.kind == "failed" else look.info)
        elif p.activity:
            what.append(safe(p.activity, 200), style="italic dim")
        if p.status == "waiting" and p.condition is not None:  # what it waits for comes first
            what = Text(safe(p.condition.code, 24), style="bold yellow") + (
                Text(" · ") + what if what else Text())
        if marker is not None:  # a managed seat: its marker whole when it says more than
            # "managed, running" (exited, manager silent) or there is nothing else to say
            if marker_whole or not what:
                what = marker.copy() + (Text(" · ") + what if what else Text())
            else:
                what = Text("▸ ", style=marker.style) + what
        row.append_text(_cell(what, cols.doing))
    if cols.code:
        row.append(" " * cols.gap)
        row.append_text(_cell(Text(code_of(p.meta) or "", style="dim"), cols.code))
    if cols.seen:
        row.append(" " * cols.gap)
        row.append_text(Text(f"seen {age(now - p.ts)}".rjust(cols.seen)[:cols.seen], style="dim"))
    if dim:
        row.stylize("dim")
    row.truncate(cols.width, overflow="ellipsis")
    return row
