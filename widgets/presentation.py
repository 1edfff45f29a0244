"""How mesh facts look on screen: status shapes, name colours, ages, harness tags, safe text.

Shared by every console widget so the roster, feed, rail and cards agree. Wire strings only
ever reach a terminal through :func:`safe` / :func:`safe_body` (``meshview.sanitize``), and
are put into :class:`rich.text.Text` as plain strings, never parsed as markup.
"""

from __future__ import annotations

import time
import zlib
from functools import lru_cache
from typing import Iterable
from weakref import WeakKeyDictionary

from rich.text import Text
from textual.widget import Widget

from meshview import sanitize
from meshview.timefmt import age  # noqa: F401 - one spelling of ages for stream and console

STATUS_GLYPH = {"working": "●", "waiting": "◐", "idle": "○", "offline": "⨯"}
# Theme-independent ANSI names so shape *and* colour survive any palette.
STATUS_STYLE = {"working": "green", "waiting": "yellow", "idle": "bright_black", "offline": "dim"}

# 256-colour indices, the reference palette (avoids the status hues).
NAME_PALETTE = (39, 208, 170, 78, 214, 111, 203, 150, 141, 180, 117, 222, 75, 209)

HARNESS = {
    "claude": "cc", "claude-code": "cc", "cotal": "cc", "opencode": "oc", "hermes": "hm",
    "codex": "cx", "jcode": "jc", "pi": "pi",
}


def safe(s: object, limit: int | None = 200) -> str:
    """One-line untrusted text (names, roles, channels, activity): controls escaped."""
    return sanitize.inline(s, limit)


def safe_body(s: object) -> list[str]:
    """Untrusted message body as display lines: controls escaped visibly, newlines kept."""
    return sanitize.text(s, indent="").split("\n")


@lru_cache(maxsize=4096)
def name_style(name: str) -> str:
    """A stable per-name colour (crc32, not ``hash``: the same across runs)."""
    return f"color({NAME_PALETTE[zlib.crc32(name.encode('utf-8', 'replace')) % len(NAME_PALETTE)]})"


def status_glyph(status: str) -> tuple[str, str]:
    return STATUS_GLYPH.get(status, "?"), STATUS_STYLE.get(status, "")


def harness_tag(meta: Iterable[tuple[str, str]]) -> str | None:
    """``cc``/``oc``/``cx``… from ``card.meta.connector``; otherwise its first two letters."""
    conn = dict(meta).get("connector")
    if not conn:
        return None
    c = str(conn).strip().lower()
    if c in HARNESS:
        return HARNESS[c]
    for key, tag in HARNESS.items():
        if c.startswith(key + "-") or c.startswith(key + "_"):
            return tag
    return safe(c[:2], None) or None




def clock(ts_ms: float) -> str:
    """``HH:MM:SS`` local time of an epoch-ms stamp (memoized per second: feeds ask a lot)."""
    try:
        return _clock_s(int(ts_ms // 1000))
    except (OverflowError, OSError, ValueError, TypeError):
        return "--:--:--"


@lru_cache(maxsize=4096)
def _clock_s(sec: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(sec))


def who(name: str, role: str | None) -> Text:
    """``name/role`` with the name's stable colour and a dim role."""
    t = Text(safe(name, 48), style=name_style(name))
    if role:
        t.append("/" + safe(role, 32), style="dim")
    return t


def status_phrase(status: str) -> str:
    """Every rendering of ``working`` says the wire cannot see progress."""
    return "working · progress unknown" if status == "working" else status


SPARK = " ▁▂▃▄▅▆▇█"


def sparkline(values: Iterable[float], width: int = 15) -> str:
    """Bars scaled to the series' own maximum; NaN and negatives count as 0; left-padded."""
    vals = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            f = 0.0
        vals.append(f if f == f and f > 0 else 0.0)
    vals = vals[-width:]
    top = max(vals) if vals else 0.0
    out = []
    for v in vals:
        if top <= 0 or v <= 0:
            out.append("▁")
        else:
            out.append(SPARK[max(1, min(8, round(v / top * 8)))])
    return "▁" * (width - len(out)) + "".join(out)


def wrap_offsets(line: str, first: int, rest: int) -> list[tuple[int, int]]:
    """Greedy word wrap of one display line into ``(start, end)`` spans: the first span fits
    ``first`` cells, the others ``rest``. Long words are cut. Cheap enough to run for every
    feed row (heights are computed without rendering)."""
    from rich.cells import cell_len

    n = len(line)
    ascii_ = line.isascii()
    width_of = len if ascii_ else cell_len
    first = max(1, first)
    rest = max(1, rest)
    if width_of(line) <= first:
        return [(0, n)]
    spans: list[tuple[int, int]] = []
    start = 0
    limit = first
    while start < n:
        if width_of(line[start:]) <= limit:
            spans.append((start, n))
            break
        # furthest end that fits
        if ascii_:
            end = start + limit
        else:
            end = start
            w = 0
            while end < n:
                cw = cell_len(line[end])
                if w + cw > limit:
                    break
                w += cw
                end += 1
            end = max(end, start + 1)
        cut = line.rfind(" ", start + 1, end + 1)
        if cut > start:
            spans.append((start, cut))
            start = cut + 1
        else:
            spans.append((start, end))
            start = end
        limit = rest
    return spans or [(0, 0)]


OFFLINE_REASON = {
    "stale": "heartbeat lapsed", "rebind": "heartbeat lapsed", "offline-record": "left",
    "kv-delete": "removed", "kv-purge": "removed", "absent": "gone earlier",
}


def peer_facts(p, now: float) -> list[str]:
    """Honest facts of a roster seat, in order: status (with condition and how long it has
    held), time in status, last work event, heartbeat age. Only what the wire says."""
    facts: list[str] = []
    if p.status == "waiting" and p.condition is not None:
        c = p.condition
        held = f" for {age(now - c.since)}" if c.since else ""
        facts.append(f"waiting ({safe(c.code, 24)}{held})")
    elif p.status == "offline":
        why = OFFLINE_REASON.get(p.offline_reason or "", "")
        since = f" {age(now - p.offline_since)} ago" if p.offline_since else ""
        facts.append("offline" + (f" · {why}" if why else "") + since)
        if p.offline_reason == "absent" and p.ts:
            facts.append(f"last message {age(now - p.ts)} ago")
    else:
        facts.append(status_phrase(p.status))
    if p.status != "offline":
        if p.status_since:
            facts.append(f"unchanged for {age(now - p.status_since)}")
        if p.active_at:
            facts.append(f"active {age(now - p.active_at)} ago")
        facts.append(f"seen {age(now - p.ts)} ago")
    return facts


def activity_line(p, now: float) -> str | None:
    if not p.activity:
        return None
    since = f" (set {age(now - p.activity_since)} ago)" if p.activity_since else ""
    return safe(p.activity, 200) + since


def join_wrapped(facts: list[str], width: int, sep: str = " · ") -> list[str]:
    """Pack facts into lines of at most ``width`` cells, never splitting one fact."""
    lines: list[str] = []
    cur = ""
    for f in facts:
        cand = f if not cur else cur + sep + f
        if cur and len(cand) > width:
            lines.append(cur)
            cur = f
        else:
            cur = cand
    if cur:
        lines.append(cur)
    return lines


_TITLES: WeakKeyDictionary[Widget, str] = WeakKeyDictionary()  # the title each widget was given


def set_title(widget: Widget, title: str) -> None:
    """Set a border title only when it changed: every set repaints the whole widget. Compared
    with the title given, not ``border_title``: the console adds its focus mark to that."""
    if _TITLES.get(widget) != title:
        _TITLES[widget] = title
        widget.border_title = title
