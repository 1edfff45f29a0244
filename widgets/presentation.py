"""How mesh facts look on screen: status shapes, name colours, ages, harness tags, safe text.

Shared by every console widget so the roster, feed, rail and cards agree. Wire strings only
ever reach a terminal through :func:`safe` / :func:`safe_body` (``meshview.wire.sanitize``), and
are put into :class:`rich.text.Text` as plain strings, never parsed as markup.
"""

from __future__ import annotations

import time
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from rich.text import Text
from textual.color import Color, ColorParseError
from textual.widget import Widget

from meshview.wire import sanitize
from meshview.timefmt import age  # noqa: F401 - one spelling of ages for stream and console

if TYPE_CHECKING:
    from textual.app import App
    from textual.dom import DOMNode
    from textual.theme import Theme

STATUS_GLYPH = {"working": "●", "waiting": "◐", "idle": "○", "offline": "⨯"}

# -- colours from the theme -------------------------------------------------------------------
# Every colour a console widget paints mesh facts with comes from the App's theme: a Cotal
# theme (cotal_tui/themes.py) names them in ``Theme.variables``; any other theme gets them from
# its own $success / $warning / $error and a name palette for its dark or light side (the App
# gives CSS the same values as ``$cotal-working``… under every theme: :func:`css_variables`).
# The shape carries the status without colour.
LOOK_VARIABLES = ("cotal-working", "cotal-waiting", "cotal-idle", "cotal-error", "cotal-info",
                  "cotal-service")

# The reference palette: 256-colour indices 39, 208, 170, 78, 214, 111, 203, 150, 141, 180, 117,
# 222, 75, 209 as the hex a terminal shows them (avoids the status hues).
DARK_NAMES = ("#00afff", "#ff8700", "#d75fd7", "#5fd787", "#ffaf00", "#87afff", "#ff5f5f",
              "#afd787", "#af87ff", "#d7af87", "#87d7ff", "#ffd787", "#5fafff", "#ff875f")
# The same hues, dark enough for 4.5:1 on a light background.
LIGHT_NAMES = ("#0069a8", "#b34700", "#9c2f9c", "#1d7a3e", "#8a5a00", "#3b5bc4", "#c0302f",
               "#4d7a1a", "#6f42c1", "#8b5a2b", "#1a6f8f", "#7a6300", "#2a62b8", "#b8431f")
NAME_VARIABLES = tuple(f"cotal-name-{i}" for i in range(len(DARK_NAMES)))


@dataclass(frozen=True)
class Look:
    """The theme's colours for mesh facts, as Rich style strings (``#rrggbb`` or an ANSI
    ``color(n)``): status hues, errors, channels (``info``), roles/anycast (``service``) and
    the per-name palette. Offline is ``dim`` with no hue in every theme."""

    working: str
    waiting: str
    idle: str
    error: str
    info: str
    service: str
    names: tuple[str, ...]

    def status(self, status: str) -> str:
        if status == "offline":
            return "dim"
        return {"working": self.working, "waiting": self.waiting, "idle": self.idle}.get(status, "")

    def name(self, name: str) -> str:
        """A stable per-name colour (crc32, not ``hash``: the same across runs)."""
        return self.names[_name_slot(name) % len(self.names)]


# cotal-dark: today's console exactly (the ANSI colours as Textual's dark ANSI theme shows them).
COTAL_DARK_LOOK = Look(working="#98e024", waiting="#fd971f", idle="#625e4c", error="#f4005f",
                       info="#58d1eb", service="#f4005f", names=DARK_NAMES)
COTAL_LIGHT_LOOK = Look(working="#1a7f37", waiting="#9a6700", idle="#6e7781", error="#cf222e",
                        info="#0a6e8a", service="#8250df", names=LIGHT_NAMES)


def look_variables(look: Look) -> dict[str, str]:
    """A Look as ``Theme.variables`` (what cotal_tui/themes.py registers)."""
    out = dict(zip(LOOK_VARIABLES, (look.working, look.waiting, look.idle, look.error,
                                    look.info, look.service)))
    out.update(zip(NAME_VARIABLES, look.names))
    return out


_ANSI = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")


def css_variables(look: Look) -> dict[str, str]:
    """:func:`look_variables` as Textual CSS values (``color(2)`` → ``ansi_green``)."""
    def css(v: str) -> str:
        if v.startswith("#"):
            return v
        if v.startswith("color("):
            n = int(v[6:-1])
            return "ansi_" + ("bright_" if n >= 8 else "") + _ANSI[n % 8]
        return "ansi_" + v
    return {k: css(v) for k, v in look_variables(look).items()}


def _rich(value: str | None, fallback: str) -> str:
    """A theme colour as a Rich style string; ``fallback`` when unset or unreadable."""
    if not value:
        return fallback
    try:
        c = Color.parse(value)
    except ColorParseError:
        return fallback
    if c.ansi is not None:
        return f"color({c.ansi})" if c.ansi >= 0 else fallback
    return c.hex6.lower()


def look_from_theme(theme: Theme) -> Look:
    """The Look of any Textual theme: its ``cotal-*`` variables, else its own meaning colours."""
    v = {**theme.to_color_system().generate(), **theme.variables}
    try:
        fg, bg = Color.parse(v.get("foreground", "")), Color.parse(v.get("background", ""))
        # an ANSI theme's default colours have no value to blend: the terminal's own grey
        idle = "bright_black" if fg.ansi is not None or bg.ansi is not None \
            else bg.blend(fg, 0.55).hex6.lower()
    except ColorParseError:
        idle = "bright_black"
    base = DARK_NAMES if theme.dark else LIGHT_NAMES
    return Look(
        working=_rich(v.get("cotal-working") or v.get("success"), "green"),
        waiting=_rich(v.get("cotal-waiting") or v.get("warning"), "yellow"),
        idle=_rich(v.get("cotal-idle"), idle),
        error=_rich(v.get("cotal-error") or v.get("error"), "red"),
        info=_rich(v.get("cotal-info"), "cyan"),
        service=_rich(v.get("cotal-service"), "magenta"),
        names=tuple(_rich(v.get(var), d) for var, d in zip(NAME_VARIABLES, base)),
    )


_LOOKS: WeakKeyDictionary[App, tuple[str, Look]] = WeakKeyDictionary()


def look_of(node: DOMNode) -> Look:
    """The Look of the theme ``node``'s App shows now (cotal-dark's outside an App)."""
    try:
        app = node.app
    except RuntimeError:  # Textual's NoActiveAppError: a render outside any App
        return COTAL_DARK_LOOK
    name = app.theme
    hit = _LOOKS.get(app)
    if hit is not None and hit[0] == name:
        return hit[1]
    look = look_from_theme(app.current_theme)
    _LOOKS[app] = (name, look)
    return look


_DRAWING: ContextVar[Look] = ContextVar("cotal_look", default=COTAL_DARK_LOOK)


@contextmanager
def drawing_with(look: Look) -> Iterator[None]:
    """Builders that are handed no widget (the detail cards) draw with ``look`` inside."""
    token = _DRAWING.set(look)
    try:
        yield
    finally:
        _DRAWING.reset(token)


def drawing_look() -> Look:
    """The Look of the enclosing :func:`drawing_with` (cotal-dark's outside one)."""
    return _DRAWING.get()


def follow_theme(widget: Widget, changed: Callable[[], object] | None = None) -> None:
    """Call ``changed`` (default: repaint) whenever the App's theme changes: what a widget
    drew with :func:`look_of` may differ even where none of its CSS values did."""
    widget.app.theme_changed_signal.subscribe(
        widget, lambda _theme: (changed or widget.refresh)())


def forget_look(app: App) -> None:
    """Drop the cached Look (a theme re-registered under the same name)."""
    _LOOKS.pop(app, None)


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
def _name_slot(name: str) -> int:
    return zlib.crc32(name.encode("utf-8", "replace"))


def name_style(name: str, look: Look = COTAL_DARK_LOOK) -> str:
    """A stable per-name colour from ``look``'s palette."""
    return look.name(name)


def status_glyph(status: str, look: Look = COTAL_DARK_LOOK) -> tuple[str, str]:
    """The status shape and its colour: the shape alone must tell them apart."""
    return STATUS_GLYPH.get(status, "?"), look.status(status)


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


def who(name: str, role: str | None, look: Look = COTAL_DARK_LOOK) -> Text:
    """``name/role`` with the name's stable colour and a dim role."""
    t = Text(safe(name, 48), style=look.name(name))
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
    ``first`` cells, the others ``rest``. Long words are cut. Linear in the line (each
    character's cells are counted once), so a megabyte line costs what its length does:
    cheap enough to run for every feed row (heights are computed without rendering)."""
    from rich.cells import cell_len

    n = len(line)
    first = max(1, first)
    rest = max(1, rest)
    if line.isascii():
        if n <= first:
            return [(0, n)]
        pre = None
    else:
        # cells before each index: pre[i] = cells of line[:i]
        pre = [0, *accumulate(map(cell_len, line))]
        if pre[n] <= first:
            return [(0, n)]
    spans: list[tuple[int, int]] = []
    start = 0
    limit = first
    while start < n:
        if pre is None:
            if n - start <= limit:
                spans.append((start, n))
                break
            end = start + limit  # furthest end that fits
        else:
            if pre[n] - pre[start] <= limit:
                spans.append((start, n))
                break
            end = max(bisect_right(pre, pre[start] + limit, start, n + 1) - 1, start + 1)
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
    "seat-no-presence": "seat running, no presence",
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
