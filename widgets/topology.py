"""The topology lens: ① sequence swimlane, ② heat matrix, ③ ring map, over a 2-minute fold.

Header: ``topology · ① sequence ② matrix ③ map · window 2m · N msgs · membership: <pill>``.
The pill is ``live`` / ``stale`` / ``traffic-only`` / ``unreadable (<reason>)``, unreadable
first. ``v`` cycles the views, ``1``–``3`` pick one; ``j``/``k`` (and ``h``/``l`` in the
matrix) move; Enter opens the agent or message under the cursor.

Size: over 500 lines because three views of one fold (sequence, matrix, ring map) share its
layout helpers and key handling.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.reactive import var
from textual.widget import Widget

from meshview.model.snapshot import FeedEntry, Snapshot
from widgets.presentation import age, clock, follow_theme, look_of, safe
from meshview.model.topology import Fold, fold, heat

VIEWS = ("sequence", "matrix", "map")
CIRCLED = ("①", "②", "③")
# the membership pill's hue: a field of the theme's Look
PILL_HUE = {"live": "working", "stale": "waiting", "traffic-only": "info", "unreadable": "error"}
LANE_MIN = 13
CELL = 7


class Canvas:
    """A character grid with one style per cell, turned into a Text at the end."""

    def __init__(self, width: int, height: int) -> None:
        self.w, self.h = width, height
        self.chars = [[" "] * width for _ in range(height)]
        self.styles: list[list[str]] = [[""] * width for _ in range(height)]

    def put(self, x: int, y: int, ch: str, style: str = "") -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            self.chars[y][x] = ch
            self.styles[y][x] = style

    def text(self, x: int, y: int, s: str, style: str = "") -> None:
        for i, ch in enumerate(s):
            self.put(x + i, y, ch, style)

    def to_text(self) -> Text:
        out = Text()
        for y in range(self.h):
            row, st = self.chars[y], self.styles[y]
            run, cur = "", st[0] if st else ""
            for ch, s in zip(row, st):
                if s != cur:
                    out.append(run, cur or None)
                    run, cur = "", s
                run += ch
            out.append(run, cur or None)
            if y < self.h - 1:
                out.append("\n")
        return out


def _line(x0: int, y0: int, x1: int, y1: int) -> list[tuple[int, int]]:
    """Bresenham's line, endpoints included."""
    pts = []
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    err = dx + dy
    while True:
        pts.append((x0, y0))
        if x0 == x1 and y0 == y1:
            break
        e2 = 2 * err
        if e2 >= dy:
            err += dy
            x0 += sx
        if e2 <= dx:
            err += dx
            y0 += sy
    return pts


def _lcp(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def abbreviate(labels: list[str], width: int) -> dict[str, str]:
    """A unique short form (at most ``width`` cells) for every label: a label that fits is
    itself; a longer one keeps its head and ends in ``…`` (``#general`` -> ``#gene…``); when
    two would read the same (``#team.backend``/``#team.frontend``) they show where they
    differ instead (``#t…bac``/``#t…fro``); a numbered form is the last resort. Labels are
    one-line safe text already."""
    width = max(3, width)
    out = {lab: lab for lab in labels if len(lab) <= width}
    used = set(out.values())
    longs = [lab for lab in labels if len(lab) > width]
    heads = {lab: lab[:width - 1] + "…" for lab in longs}
    clash = {h for h in heads.values() if list(heads.values()).count(h) > 1 or h in used}
    for lab in longs:
        cand = heads[lab]
        if cand in clash or cand in used:
            others = [o for o in labels if o != lab]
            lcp = max((_lcp(lab, o) for o in others), default=0)
            k = 2 if lab[:1] in "#@" else 1
            cand = lab[:k] + "…" + lab[lcp:][:width - 1 - k]
            n = 1
            while cand in used:
                tail = "…" + str(n)
                cand = lab[:max(1, width - len(tail))] + tail
                n += 1
        used.add(cand)
        out[lab] = cand
    return out


def legend(short: dict[str, str], width: int, rows: int) -> list[str]:
    """``short = full`` pairs for every abbreviated label, packed into ``rows`` lines."""
    pairs = [f"{a} = {full}" for full, a in short.items() if a != full]
    lines: list[str] = []
    cur = ""
    for k, pair in enumerate(pairs):
        cand = pair if not cur else cur + " · " + pair
        if len(cand) <= width:
            cur = cand
            continue
        lines.append(cur)
        cur = pair
        if len(lines) == rows:
            lines[-1] = lines[-1][:max(0, width - 10)] + f" · …+{len(pairs) - k}"
            return lines
    if cur:
        lines.append(cur[:width])
    return lines[:rows]


def _arrow(dx: int, dy: int) -> str:
    """The arrowhead for a line's last step."""
    sx, sy = (dx > 0) - (dx < 0), (dy > 0) - (dy < 0)
    return {(1, 0): "▶", (-1, 0): "◀", (0, 1): "▼", (0, -1): "▲", (1, 1): "↘", (1, -1): "↗",
            (-1, 1): "↙", (-1, -1): "↖"}.get((sx, sy), "•")


class TopologyLens(Widget, can_focus=True):
    DEFAULT_CSS = """
    TopologyLens { height: 1fr; background: $surface; padding: 0 1; border-top: hkey $accent; }
    """
    BINDINGS = [
        Binding("v", "cycle", "cycle view", id="topo.cycle"),
        Binding("1", "view(0)", "① sequence", id="topo.sequence"),
        Binding("2", "view(1)", "② matrix", id="topo.matrix"),
        Binding("3", "view(2)", "③ ring map", id="topo.map"),
        Binding("j,down", "move(0, 1)", "down", id="topo.down", show=False),
        Binding("k,up", "move(0, -1)", "up", id="topo.up", show=False),
        Binding("h", "move(-1, 0)", "left (matrix)", id="topo.left", show=False),
        Binding("l", "move(1, 0)", "right (matrix)", id="topo.right", show=False),
        Binding("g", "edge(0)", "first", id="topo.first", show=False),
        Binding("G", "edge(1)", "last", id="topo.last", show=False),
        Binding("enter", "open", "open agent / message", id="topo.open"),
    ]

    class OpenAgent(Message):
        """Enter on a node or a sender: the screen opens that agent's card."""

        def __init__(self, peer_id: str) -> None:
            super().__init__()
            self.peer_id = peer_id

    class OpenEntry(Message):
        """Enter on a matrix cell with traffic: the screen opens its newest message."""

        def __init__(self, entry: FeedEntry) -> None:
            super().__init__()
            self.entry = entry

    view: var[int] = var(0)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snap: Snapshot | None = None
        self.fold: Fold | None = None
        self.row = -1  # sequence: hop index from the newest (-1 = newest)
        self.cell = (0, 0)  # matrix: (row, col)
        self.spot = 0  # map: spotlighted node
        self._key: object = None
        self._seq_rows: list = []  # the sequence view as last drawn, and its selected row
        self._seq_sel = -1

    def on_mount(self) -> None:
        follow_theme(self)  # names, channels and the pill wear the theme's hues

    def update_snapshot(self, snap: Snapshot) -> None:
        self.snap = snap
        key = (snap.topology.recent[-1:] if snap.topology.recent else (), len(snap.topology.recent),
               snap.membership, int(snap.now // 1000))
        if key != self._key:
            self._key = key
            self.fold = fold(snap)
            self.refresh()

    # -- header --------------------------------------------------------------------------

    def header(self) -> Text:
        t = Text("topology · ", style="bold")
        for i, name in enumerate(VIEWS):
            t.append(f"{CIRCLED[i]} {name}", style="reverse bold" if i == self.view else "dim")
            t.append(" ")
        f = self.fold
        t.append("· window 2m · ", style="dim")
        t.append(f"{f.total if f else 0} msgs", style="bold")
        t.append(" · membership: ", style="dim")
        pill = f.pill if f else "traffic-only"
        label = pill + (f" ({safe(f.reason, 60)})" if f and pill == "unreadable" and f.reason else "")
        t.append(label, style=getattr(look_of(self), PILL_HUE[pill]) if pill in PILL_HUE else "")
        return t

    def _name_hue(self, label: str) -> str:
        """A node's name colour in the theme now."""
        return look_of(self).name(label)

    def _where(self, label: str) -> str:
        """A ``#channel`` (info hue) or an ``@role`` (service hue) node's colour."""
        look = look_of(self)
        return look.info if label.startswith("#") else look.service

    def label_of(self, pid: str) -> str:
        if self.snap is None:
            return pid[:8]
        if pid.startswith(("#", "@")):
            return pid
        label = self.snap.labels.label(pid)  # the roster's name, suffixed when shared
        if label is not None:
            return label
        if pid in self.snap.names:
            return self.snap.names[pid]
        return pid.rsplit(".", 1)[-1]

    # -- views ---------------------------------------------------------------------------

    def render(self) -> Text:
        width, height = self.content_size.width or 80, self.content_size.height or 20
        out = self.header()
        out.append("\n")
        body_h = max(1, height - 1)
        f = self.fold
        if f is None or (not f.edges and not f.members):
            out.append("no traffic in the last 2 minutes", style="dim italic")
            return out
        view = VIEWS[self.view]
        if view == "sequence":
            out.append_text(self.render_sequence(f, width, body_h))
        elif view == "matrix":
            out.append_text(self.render_matrix(f, width, body_h))
        else:
            out.append_text(self.render_map(f, width, body_h))
        return out

    def _row_style(self, ts: float) -> str:
        a = (self.fold.now if self.fold else 0) - ts
        return "bold" if a < 10_000 else ("dim" if a > 45_000 else "")

    def render_sequence(self, f: Fold, width: int, height: int) -> Text:
        lanes_all = f.senders + [n for n in f.nodes if n not in f.senders and not any(
            (n, h) in f.members for h in f.hubs)]
        # receivers of DMs are lanes too
        for h in f.hops:
            if not h.to.startswith(("#", "@")) and h.to not in lanes_all:
                lanes_all.append(h.to)
        left = 9
        room = max(LANE_MIN, width - left - 12)
        n_fit = max(1, room // LANE_MIN)
        lanes = lanes_all[:n_fit]
        extra = len(lanes_all) - len(lanes)
        lane_w = max(LANE_MIN, room // max(1, len(lanes)))
        cx = {pid: left + i * lane_w + lane_w // 2 for i, pid in enumerate(lanes)}
        c = Canvas(width, height)
        for pid, x in cx.items():
            nm = safe(self.label_of(pid), lane_w - 1)
            c.text(x - len(nm) // 2, 0, nm, self._name_hue(self.label_of(pid)) + " bold")
        if extra:
            c.text(width - 6, 0, f"…+{extra}", "dim")
        rows = f.hops[-(height - 1):]
        sel = len(rows) + self.row if self.row < 0 else self.row
        sel = max(0, min(len(rows) - 1, sel)) if rows else -1
        for r, h in enumerate(rows):
            y = r + 1
            style = self._row_style(h.ts)
            for x in cx.values():
                c.put(x, y, "│", "dim")
            c.text(0, y, clock(h.ts)[:8], "dim")
            if h.from_id not in cx:
                continue
            x0 = cx[h.from_id]
            colour = self._name_hue(self.label_of(h.from_id))
            if h.to in cx:
                x1 = cx[h.to]
                step = 1 if x1 > x0 else -1
                c.put(x0, y, "├" if step > 0 else "┤", colour)
                for x in range(x0 + step, x1, step):
                    c.put(x, y, "─", f"{colour} {style}")
                c.put(x1 - step, y, "▶" if step > 0 else "◀", f"{colour} {style}")
            else:
                label = h.to if h.to.startswith(("#", "@")) else self.label_of(h.to)
                end = width - len(label) - 2
                c.put(x0, y, "├", colour)
                for x in range(x0 + 1, max(x0 + 2, end)):
                    if c.chars[y][x] == " " or c.chars[y][x] == "│":
                        c.put(x, y, "─" if h.kind == "channel" else "┄", f"{colour} {style}")
                c.text(max(x0 + 2, end) + 1, y, label,
                       self._where(label) + f" {style}")
            if r == sel and self.has_focus:
                for x in range(0, 8):
                    c.styles[y][x] = "reverse"
        self._seq_rows = rows
        self._seq_sel = sel
        return c.to_text()

    def render_matrix(self, f: Fold, width: int, height: int) -> Text:
        rows = f.senders + [n for n in f.nodes if n not in f.senders]
        cols = f.columns()
        row_names = {r: safe(self.label_of(r), 64) for r in rows}
        col_names = {c: safe(self.label_of(c), 64) for c in cols}
        namew = min(14, max([len(n) for n in row_names.values()] + [4]) + 1)
        short = abbreviate(sorted(set(row_names.values())), namew - 1)
        short.update(abbreviate(sorted(set(col_names.values())), CELL - 1))
        keys = legend({v: short[v] for v in {**row_names, **col_names}.values()},
                      width, 2)
        n_cols = max(1, (width - namew) // CELL)
        r_sel, c_sel = self.cell
        r_sel = max(0, min(len(rows) - 1, r_sel))
        c_sel = max(0, min(len(cols) - 1, c_sel))
        self.cell = (r_sel, c_sel)
        c0 = max(0, c_sel - n_cols + 1)
        shown = cols[c0:c0 + n_cols]
        t = Text(" " * namew)
        for col in shown:
            t.append(short[col_names[col]].ljust(CELL),
                     self._where(col) if col.startswith(("#", "@"))
                     else self._name_hue(self.label_of(col)))
        if c0 + n_cols < len(cols):
            t.append(f"…+{len(cols) - c0 - n_cols}", style="dim")
        t.append("\n")
        body_rows = max(1, height - 5 - len(keys))
        r0 = max(0, r_sel - body_rows + 1)
        for ri, r in enumerate(rows[r0:r0 + body_rows], start=r0):
            t.append(short[row_names[r]].ljust(namew), self._name_hue(self.label_of(r)))
            for ci, col in enumerate(shown, start=c0):
                e = f.edges.get((r, col))
                if e is not None:
                    cell = f"{heat(e.rate)}{e.count}".ljust(CELL)
                    style = look_of(self).waiting if e.rate >= 2 else ""
                elif (r, col) in f.members:
                    cell, style = ("∘" if f.members[(r, col)] == "live" else "◌").ljust(CELL), "dim"
                elif r in f.wide and col.startswith("#"):
                    cell, style = "≫".ljust(CELL), "dim"
                else:
                    cell, style = "·".ljust(CELL), "dim"
                if ri == r_sel and ci == c_sel and self.has_focus:
                    style = "reverse"
                t.append(cell, style or None)
            t.append("\n")
        # footer: the selected pair, by full name
        if rows and cols:
            r, col = rows[r_sel], cols[c_sel]
            e = f.edges.get((r, col))
            t.append(f"{safe(self.label_of(r), 24)} → {safe(self.label_of(col), 40)}: ",
                     style="bold")
            if e:
                t.append(f"{e.count} msgs · last {age(f.now - e.last_ts)} ago · rate {e.rate:.2f}")
                for line in self._recent_texts(r, col, 2):
                    t.append("\n  " + line, style="dim")
            elif (r, col) in f.members:
                t.append(f"{f.members[(r, col)]} member, no traffic", style="dim")
            else:
                t.append("no traffic", style="dim")
        t.append("\n" + "heat ░▒▓█ by decayed rate · ∘ live member · ◌ durable · ≫ reads all",
                 style="dim italic")
        for line in keys:  # the abbreviated headers, spelled out
            t.append("\n" + line, style="dim")
        return t

    def _recent_texts(self, src: str, dst: str, n: int) -> list[str]:
        snap = self.snap
        if snap is None:
            return []
        out = []
        for e in reversed(snap.feed):
            if e.from_id != src:
                continue
            if (dst.startswith("#") and e.channel == dst[1:]) or (
                    dst.startswith("@") and e.to_service == dst[1:]) or dst in e.to_ids:
                out.append(f"{clock(e.ts)} {safe(e.text.split(chr(10), 1)[0], 100)}")
                if len(out) >= n:
                    break
        return out

    def _latest_entry(self, src: str, dst: str):
        snap = self.snap
        if snap is None:
            return None
        for e in reversed(snap.feed):
            if e.from_id == src and ((dst.startswith("#") and e.channel == dst[1:]) or (
                    dst.startswith("@") and e.to_service == dst[1:]) or dst in e.to_ids):
                return e
        return None

    def render_map(self, f: Fold, width: int, height: int) -> Text:
        """Agents on an outer ring, each channel or role on an inner ring next to the agents
        that use it (never one box every edge runs into). An edge is a line from its sender
        to its own target, ending in an arrowhead that points the way the traffic went, with
        ``×N`` on it when it carried more than one message; membership spokes are dim dots.
        The spotlighted node (``j``/``k``) is bold and its edges are spelled out underneath,
        so what the drawing cannot make plain the footer says in words."""
        if width < 60 or height < 14:
            return Text("terminal too small for the map - try ② matrix", style=look_of(self).waiting)
        nodes, hubs = f.nodes, f.hubs
        body_h = height - 2
        c = Canvas(width, body_h)
        cx, cy = width / 2, body_h / 2
        rx, ry = width / 2 - 9, body_h / 2 - 1
        angle = {pid: -math.pi / 2 + 2 * math.pi * i / max(1, len(nodes))
                 for i, pid in enumerate(nodes)}
        pos = {pid: (int(cx + rx * math.cos(a)), int(cy + ry * math.sin(a)))
               for pid, a in angle.items()}
        # each hub sits inside the ring, towards the agents that use it
        users: dict[str, list[float]] = {h: [] for h in hubs}
        for (src, dst) in list(f.edges) + list(f.members):
            if dst in users and src in angle:
                users[dst].append(angle[src])
        want = {h: math.atan2(sum(map(math.sin, a)), sum(map(math.cos, a))) if a else 0.0
                for h, a in users.items()}
        order = sorted(hubs, key=lambda h: want[h])
        base = want[order[0]] if order else 0.0
        for i, h in enumerate(order):
            a = base + 2 * math.pi * i / len(order)
            pos[h] = (int(cx + rx * 0.42 * math.cos(a)), int(cy + ry * 0.42 * math.sin(a)))
        spot = nodes[self.spot % len(nodes)] if nodes else None

        labels: dict[str, tuple[int, int, str]] = {}  # id -> (x, y, text)
        for pid in nodes:
            status = next((p.status for p in self.snap.peers if p.id == pid), "offline") \
                if self.snap else "offline"
            glyph = {"working": "●", "waiting": "◐", "idle": "○"}.get(status, "⨯")
            text = f"{glyph}{safe(self.label_of(pid), 14)}" + ("≫" if pid in f.wide else "")
            x, y = pos[pid]
            labels[pid] = (max(0, min(width - len(text), x - len(text) // 2)), y, text)
        for h in hubs:
            text = safe(h, 20)
            x, y = pos[h]
            labels[h] = (max(0, min(width - len(text), x - len(text) // 2)), y, text)

        def inside(pid: str, x: int, y: int) -> bool:
            lx, ly, text = labels[pid]
            return y == ly and lx - 1 <= x <= lx + len(text)

        def path(src: str, dst: str) -> list[tuple[int, int]]:
            pts = _line(*pos[src], *pos[dst])
            return [(x, y) for x, y in pts if not inside(src, x, y) and not inside(dst, x, y)]

        for (mid, hub), kind in f.members.items():  # membership spokes first, dim
            if mid in pos and hub in pos and (mid, hub) not in f.edges:
                for k, (x, y) in enumerate(path(mid, hub)):
                    if kind == "live" or k % 2 == 0:
                        c.put(x, y, "·", "dim")
        for (src, dst), e in sorted(f.edges.items(), key=lambda kv: kv[1].rate):
            if src not in pos or dst not in pos:
                continue
            pts = path(src, dst)
            if not pts:
                continue
            hot = e.rate >= 0.5
            g = heat(e.rate) if hot else "·"
            style = self._name_hue(self.label_of(src)) if hot else "dim"
            if spot is not None and spot in (src, dst):
                style = self._name_hue(self.label_of(src)) + " bold"
            for x, y in pts[:-1]:
                c.put(x, y, g, style)
            (xa, ya), (xb, yb) = (pts[-2] if len(pts) > 1 else pos[src]), pts[-1]
            c.put(xb, yb, _arrow(xb - xa, yb - ya), style)
            if e.count > 1 and len(pts) > 6:
                mx, my = pts[len(pts) // 2]
                c.text(mx + 1, my, f"×{e.count}", style)
        for pid, (x, y, text) in labels.items():
            if pid.startswith(("#", "@")):
                style = self._where(pid)
            else:
                style = self._name_hue(self.label_of(pid))
            if pid == spot:
                style += " reverse" if self.has_focus else " bold"
            c.text(x, y, text, style)
        out = c.to_text()
        out.append("\n")
        out.append_text(self._spot_line(f, spot, width))
        out.append("\n" + "jk spotlight · enter opens · heat ░▒▓█ (· cool) · arrows point "
                   "the way messages went · dotted spokes: membership", style="dim italic")
        return out

    def _spot_line(self, f: Fold, spot: str | None, width: int) -> Text:
        """The spotlighted node's edges in words (the map's footer)."""
        t = Text()
        if spot is None:
            return t
        t.append(safe(self.label_of(spot), 24), style=self._name_hue(self.label_of(spot)) + " bold")
        parts: list[str] = []
        for (src, dst), e in sorted(f.edges.items(), key=lambda kv: -kv[1].count):
            if src == spot:
                parts.append(f"→ {safe(self.label_of(dst), 30)} ×{e.count} "
                              f"({age(f.now - e.last_ts)} ago)")
            elif dst == spot:
                parts.append(f"← {safe(self.label_of(src), 24)} ×{e.count}")
        for (mid, hub), kind in f.members.items():
            if mid == spot and (mid, hub) not in f.edges:
                parts.append(f"{'∘' if kind == 'live' else '◌'} {safe(hub, 30)}")
        t.append("  " + (" · ".join(parts) if parts else "no traffic in the window"))
        t.truncate(width, overflow="ellipsis")
        return t

    # -- actions -------------------------------------------------------------------------

    def watch_view(self) -> None:
        self.refresh()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def action_cycle(self) -> None:
        self.view = (self.view + 1) % len(VIEWS)

    def action_view(self, i: int) -> None:
        self.view = i

    def action_move(self, dx: int, dy: int) -> None:
        view = VIEWS[self.view]
        if view == "sequence":
            n = len(self._seq_rows)
            sel = self._seq_sel + dy
            sel = max(0, min(n - 1, sel))
            self.row = sel - n if sel < n - 1 else -1
        elif view == "matrix":
            r, c = self.cell
            self.cell = (max(0, r + dy), max(0, c + dx))
        else:
            self.spot = max(0, self.spot + (dy or dx))
        self.refresh()

    def action_edge(self, last: int) -> None:
        if VIEWS[self.view] == "sequence":
            self.row = -1 if last else 0
        elif VIEWS[self.view] == "matrix":
            self.cell = (10**6 if last else 0, self.cell[1])
        else:
            self.spot = (len(self.fold.nodes) - 1) if (last and self.fold) else 0
        self.refresh()

    def action_open(self) -> None:
        f = self.fold
        if f is None:
            return
        view = VIEWS[self.view]
        if view == "sequence":
            rows, sel = self._seq_rows, self._seq_sel
            if 0 <= sel < len(rows):
                self.post_message(self.OpenAgent(rows[sel].from_id))
        elif view == "matrix":
            rows = f.senders + [n for n in f.nodes if n not in f.senders]
            cols = f.columns()
            if rows and cols:
                r, c = self.cell  # may point past a grid that shrank since the last paint
                r, c = min(r, len(rows) - 1), min(c, len(cols) - 1)
                e = self._latest_entry(rows[r], cols[c])
                if e is not None:
                    self.post_message(self.OpenEntry(e))
                else:
                    self.post_message(self.OpenAgent(rows[r]))
        elif f.nodes:
            self.post_message(self.OpenAgent(f.nodes[self.spot % len(f.nodes)]))
