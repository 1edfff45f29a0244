"""The status bar: space, channel, agents, msg/s with a 60 s sparkline, connection state,
``chat-only``, ``ev N`` (activity frames seen while the feed hides them), rejections, ``⚠ cut N``
(wire fields cut to their byte bounds; per field in help), ``● rec <size>`` while recording,
``⚠ N internal errors`` once a listener raised (the last one is the bar's tooltip), then a
notice or the context key hints."""

from __future__ import annotations

from rich.text import Text
from textual.timer import Timer
from textual.widget import Widget

from meshview.record.record import human_size
from meshview.model.snapshot import Snapshot
from widgets.presentation import Look, follow_theme, look_of, safe, sparkline

# the link's glyph, word and which of the theme's hues (a :class:`Look` field) it wears
CONNECTION_LOOK = {
    "connecting": ("◌", "connecting", "waiting"),
    "connected": ("●", "connected", "working"),
    "reconnecting": ("◌", "reconnecting", "waiting"),
    "stale": ("◌", "stale", "waiting"),
    "closed": ("⨯", "closed", "error"),
}


def link_look(conn: str, look: Look) -> tuple[str, str, str]:
    """(glyph, word, style) of a connection state in ``look``'s colours."""
    glyph, label, hue = CONNECTION_LOOK.get(conn, ("?", conn, "waiting"))
    return glyph, label, getattr(look, hue)


def internal_errors(count: int, last: str | None) -> str | None:
    """The internal-error count and the last one as one line (None: none); the bar's tooltip
    and the help screen say it in full."""
    if not count:
        return None
    return (f"⚠ {count} internal error{'s' if count != 1 else ''} (an observer listener raised);"
            f" last: {safe(last or 'unknown', 200)}")


def bounds_detail(snap: Snapshot) -> str | None:
    """What a lying or oversized peer cost, per kind, as one line (None: nothing): the wire
    fields cut to their byte bounds and the records refused. Help says it in full; the bar
    shows only the counts."""
    parts = []
    if snap.cuts:
        n = sum(c for _, c in snap.cuts)
        each = ", ".join(f"{safe(f, 40)} {c}" for f, c in sorted(snap.cuts, key=lambda x: -x[1]))
        parts.append(f"{n} wire field{'s' if n != 1 else ''} cut to their bounds ({each})")
    if snap.rejections:
        n = sum(c for _, c in snap.rejections)
        each = ", ".join(f"{safe(r, 60)} {c}"
                         for r, c in sorted(snap.rejections, key=lambda x: -x[1]))
        parts.append(f"{n} record{'s' if n != 1 else ''} refused ({each})")
    return "⚠ " + "; ".join(parts) if parts else None


def compact_count(n: int) -> str:
    """A count in at most four cells and a suffix: ``999``, ``1.2k``, ``12k``, ``3.4M``."""
    if n < 1000:
        return str(max(0, n))
    for unit, scale in (("k", 1000), ("M", 1_000_000), ("G", 1_000_000_000)):
        v = n / scale
        if v < 9.95:
            return f"{v:.1f}{unit}"
        if v < 999.5:
            return f"{v:.0f}{unit}"
    return f"{n / 1e12:.0f}T"


class StatusBar(Widget):
    """One row: the facts on the left, a notice / error / key hints on the right.

    The link state (glyph *and* word) is never cut: when the row is short the key hints go
    first, then the left's optional facts one by one (sparkline, channel, agents, rate), never
    the link, the space or a lag warning. Screens with no model (the spaces overview) show
    the link they have with :meth:`set_link`.

    It repaints only when what it shows changes: msg/s and the sparkline, which move with the
    clock, are read at the first snapshot of each model second; the agents, the link and the
    counts every snapshot."""

    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text; }
    """
    NOTICE_SECONDS = 3.0
    HINT_FLOOR = 8  # cells kept for "? help" before the left gives up optional facts

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snap: Snapshot | None = None
        self.channel: str | None = None
        self.hints: str = ""
        self.notice: str | None = None
        self.notice_error = False
        self._notice_timer: Timer | None = None
        self._key: object = None
        self.link: tuple[str, str, str] | None = None  # (connection, where, extra) sans model
        self.recording: int | None = None  # bytes recorded so far, while a recording runs
        self.runs: str | None = None  # runs stale, or a manager did not answer (screens/runs.py)
        self.events: int = 0  # activity frames seen while the feed hides them (0: none, or shown)
        self.health: tuple[str, bool] | None = None  # plane health (opt-in only): (text, healthy)
        # the flow figures (msg/s, the sparkline) as of the first snapshot of a model second:
        # they move with the clock, and drawn every frame they repainted the bar every frame
        self._flow_sec: int | None = None
        self._flow: tuple[str, str] = ("", "")  # (rate text, sparkline)
        self.renders = 0  # times the bar was drawn (tests count the frames that repaint it)

    def on_mount(self) -> None:
        follow_theme(self)  # the link, errors and notices wear the theme's hues

    def update_snapshot(self, snap: Snapshot, channel: str | None, *, hold: bool = True) -> None:
        """Follow ``snap``; ``hold`` False: read msg/s and the sparkline now, whatever the second."""
        self.snap, self.channel = snap, channel
        sec = int(snap.now // 1000)
        if not hold or sec != self._flow_sec:  # a new model second: msg/s and the sparkline read again
            self._flow_sec = sec
            self._flow = (f"{snap.rates.msgs_per_sec:.1f} msg/s", sparkline(snap.rates.buckets, 15))
        key = (self._left_key(snap), self._flow, channel)
        if key != self._key:
            self._key = key
            self._set_error_tooltip(snap)
            self.refresh()

    def _set_error_tooltip(self, snap: Snapshot) -> None:
        """The last internal error, in full, where hovering the bar shows it."""
        line = internal_errors(snap.status.listener_errors, snap.status.listener_error)
        tip = None if line is None else Text(line)
        if tip != self.tooltip:
            self.tooltip = tip

    def set_recording(self, size: int | None) -> None:
        """A recording is running (``size``: bytes on disk so far) or not (``None``)."""
        shown = None if size is None else human_size(size)
        if shown != (None if self.recording is None else human_size(self.recording)):
            self.recording = size
            self.refresh()
        else:
            self.recording = size

    def set_runs(self, note: str | None) -> None:
        """The runs view is stale or a manager did not answer ``run-ps`` (None: all answered)."""
        if note != self.runs:
            self.runs = note
            self.refresh()

    def set_health(self, note: tuple[str, bool] | None) -> None:
        """The plane-health segment (``(text, healthy)``), shown only when the operator opted in
        (None: not opted in, nothing shown)."""
        if note != self.health:
            self.health = note
            self.refresh()

    def set_events(self, hidden: int) -> None:
        """``hidden`` activity frames exist that the feed does not show (0: none, or shown):
        ``ev N`` says so, compact (``ev 1.2k``)."""
        if compact_count(hidden) != compact_count(self.events):
            self.events = hidden
            self.refresh()
        else:
            self.events = hidden

    def set_link(self, connection: str, where: str = "", extra: str = "") -> None:
        """The link state of a screen without a model (``connected``, ``reconnecting``…)."""
        link = (connection, where, extra)
        if link != self.link:
            self.link = link
            self.refresh()

    @staticmethod
    def _left_key(snap: Snapshot) -> tuple:
        st = snap.status
        return (st.space, st.connection, st.presence_view, st.dm_visible, st.error, st.warning,
                len(snap.agents), sum(n for _, n in snap.rejections), sum(n for _, n in snap.cuts),
                st.lagging, st.dropped,
                st.listener_errors, st.listener_error)

    def set_hints(self, hints: str) -> None:
        if hints != self.hints:
            self.hints = hints
            self.refresh()

    def show_notice(self, text: str, *, error: bool = False, seconds: float | None = None,
                    sticky: bool = False) -> None:
        """Show ``text`` for ``seconds`` (default 3 s), or until cleared when ``sticky``."""
        self.notice, self.notice_error = text, error
        if self._notice_timer is not None:
            self._notice_timer.stop()
        self._notice_timer = None if sticky else self.set_timer(
            seconds or self.NOTICE_SECONDS, self._clear_notice)
        self.refresh()

    def clear_notice(self) -> None:
        if self._notice_timer is not None:
            self._notice_timer.stop()
        self._clear_notice()

    def _clear_notice(self) -> None:
        self.notice = None
        self._notice_timer = None
        self.refresh()

    # optional facts, in the order they give way when the row is short
    DROP_ORDER = ("health", "spark", "events", "channel", "agents", "rate", "cut", "rejected", "internal")

    def _pieces(self, compact: bool) -> list[tuple[str | None, list[tuple[str, str]]]]:
        """The left as (drop key or None for kept, [(text, style)]) pieces, in order."""
        snap = self.snap
        look = look_of(self)
        if snap is None:
            conn, where, extra = self.link or ("connecting", "", "")
            glyph, label, colour = link_look(conn, look)
            out: list[tuple[str | None, list[tuple[str, str]]]] = [
                (None, [(f"{glyph} {label}" + ("…" if conn == "connecting" else ""), colour)])]
            if where:
                out.append(("channel", [(" · ", "dim"), (safe(where, 60), "")]))
            if extra:
                out.append(("agents", [(" · ", "dim"), (extra, "")]))
            return out
        st = snap.status
        conn = "stale" if st.connection == "connected" and st.presence_view == "stale" \
            else st.connection
        glyph, label, colour = link_look(conn, look)
        rate, spark = self._flow
        out = [
            (None, [(glyph + " ", colour), (safe(st.space, 32), "bold")]),
            ("channel", [(" · ", "dim"), ("#" + safe(self.channel, 32) if self.channel
                                          else "all", "")]),
            ("agents", [(" · ", "dim"), (f"{len(snap.agents)} agents", "")]),
            ("rate", [(" · ", "dim"), (rate, "")]),
            ("spark", [(" ", ""), (spark, look.info), (" 60s", "dim")]),
            (None, [(" · ", "dim"), (label, colour)]),
        ]
        if not st.dm_visible:
            out.append((None, [(" · ", "dim"), ("chat-only", look.service)]))
        if self.events > 0:  # frames exist, hidden from the feed (E shows them)
            out.append(("events", [(" · ", "dim"), ("ev " + compact_count(self.events), "dim")]))
        rejected = sum(n for _, n in snap.rejections)
        if rejected:
            out.append(("rejected", [(" · ", "dim"), (f"! {rejected} rej" if compact
                                                     else f"! {rejected} rejected", look.error)]))
        cut = sum(n for _, n in snap.cuts)
        if cut:  # a peer sent fields past the wire's byte bounds: kept cut (per field in help)
            out.append(("cut", [(" · ", "dim"), ("⚠ cut " + compact_count(cut), look.waiting)]))
        if st.listener_errors:  # a bug of ours (stream, notifier, chat), counted, not swallowed
            n = st.listener_errors
            said = f"⚠ {n} internal" if compact else f"⚠ {n} internal error{'s' if n != 1 else ''}"
            out.append(("internal", [(" · ", "dim"), (said, "bold " + look.error)]))
        if self.health is not None:  # opted in: unhealthy is never dropped, healthy gives way
            text, ok = self.health
            out.append(("health" if ok else None, [(" · ", "dim"),
                                                   (safe(text, 60), look.working if ok else "bold " + look.error)]))
        if self.runs:  # runs shown are not what the managers say now: never dropped
            out.append((None, [(" · ", "dim"), ("⚠ " + self.runs, look.waiting)]))
        if self.recording is not None:  # never dropped: the operator must know it runs
            out.append((None, [(" · ", "dim"), ("● rec " + human_size(self.recording), "bold " + look.error)]))
        if st.lagging or st.dropped:  # the mesh outran us: say so, with what was shed
            lag = "⚠ lagging" + (f" · {st.dropped} dropped" if st.dropped else "")
            out.append((None, [(" · ", "dim"), (lag if st.lagging else f"{st.dropped} dropped",
                                               look.waiting)]))
        return out

    def left(self, compact: bool = False, budget: int | None = None) -> Text:
        """The facts; with ``budget`` (cells), optional facts give way until they fit."""
        pieces = self._pieces(compact)
        drop: set[str] = set()

        def build() -> Text:
            t = Text(" ")
            for key, parts in pieces:
                if key in drop:
                    continue
                for text, style in parts:
                    t.append(text, style=style or None)
            return t

        t = build()
        if budget is not None:
            for key in self.DROP_ORDER:
                if t.cell_len <= budget:
                    break
                drop.add(key)
                t = build()
        return t

    def render(self) -> Text:
        self.renders += 1
        width = self.size.width or 80
        compact = width < 100
        snap = self.snap
        look = look_of(self)
        if self.notice:
            right = Text(self.notice, style="bold " + (look.error if self.notice_error
                                                        else look.info))
            # a notice outranks the optional facts, never the link state
            t = self.left(compact, budget=max(10, width - right.cell_len - 2))
        else:
            t = self.left(compact, budget=width - self.HINT_FLOOR)
            if snap is not None and snap.status.error:
                right = Text("! " + safe(snap.status.error, 120), style="bold " + look.error)
            else:
                right = Text(self.hints, style="dim")
        room = width - t.cell_len - 2
        if room < 20 and not self.notice and not (snap is not None and snap.status.error):
            right = Text("? help", style="dim")
        if room > 5:
            right.truncate(room, overflow="ellipsis")
            t.append(" " * max(2, room - right.cell_len + 1))
            t.append_text(right)
        t.truncate(width)
        return t
