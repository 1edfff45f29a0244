"""The topology lens: ① sequence swimlane, ② heat matrix, ③ ring map, over a 2-minute fold.

Header: ``topology · ① sequence ② matrix ③ map · window 2m · N msgs · membership: <pill>``.
The pill is ``live`` / ``stale`` / ``traffic-only`` / ``unreadable (<reason>)``, unreadable
first. ``v`` cycles the views, ``1``–``3`` pick one; ``j``/``k`` (and ``h``/``l`` in the
matrix) move; Enter opens the agent or message under the cursor.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.reactive import var
from textual.widget import Widget

from meshview.snapshot import Snapshot
from widgets.presentation import age, clock, name_style, safe
from widgets.topo_fold import Fold, fold, heat

VIEWS = ("sequence", "matrix", "map")
CIRCLED = ("①", "②", "③")
PILL_STYLE = {"live": "green", "stale": "yellow", "traffic-only": "cyan", "unreadable": "red"}
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
        def __init__(self, peer_id: str) -> None:
            super().__init__()
            self.peer_id = peer_id

    view: var[int] = var(0)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snap: Snapshot | None = None
        self.fold: Fold | None = None
        self.row = -1  # sequence: hop index from the newest (-1 = newest)
        self.cell = (0, 0)  # matrix: (row, col)
        self.spot = 0  # map: spotlighted node
        self._key: object = None

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
        t.append(label, style=PILL_STYLE.get(pill, ""))
        return t

    def label_of(self, pid: str) -> str:
        if self.snap is None:
            return pid[:8]
        if pid.startswith(("#", "@")):
            return pid
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
            c.text(x - len(nm) // 2, 0, nm, name_style(self.label_of(pid)) + " bold")
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
            colour = name_style(self.label_of(h.from_id))
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
                       ("cyan" if label.startswith("#") else "magenta") + f" {style}")
            if r == sel and self.has_focus:
                for x in range(0, 8):
                    c.styles[y][x] = "reverse"
        self._seq_rows = rows
        self._seq_sel = sel
        return c.to_text()

    def render_matrix(self, f: Fold, width: int, height: int) -> Text:
        rows = f.senders + [n for n in f.nodes if n not in f.senders]
        cols = f.columns()
        namew = min(14, max([len(self.label_of(r)) for r in rows] + [4]) + 1)
        n_cols = max(1, (width - namew) // CELL)
        r_sel, c_sel = self.cell
        r_sel = max(0, min(len(rows) - 1, r_sel))
        c_sel = max(0, min(len(cols) - 1, c_sel))
        self.cell = (r_sel, c_sel)
        c0 = max(0, c_sel - n_cols + 1)
        shown = cols[c0:c0 + n_cols]
        t = Text(" " * namew)
        for col in shown:
            t.append(safe(self.label_of(col), CELL - 1)[:CELL - 1].ljust(CELL),
                     "cyan" if col.startswith("#") else "magenta" if col.startswith("@")
                     else name_style(self.label_of(col)))
        if c0 + n_cols < len(cols):
            t.append(f"…+{len(cols) - c0 - n_cols}", style="dim")
        t.append("\n")
        body_rows = max(1, height - 5)
        r0 = max(0, r_sel - body_rows + 1)
        for ri, r in enumerate(rows[r0:r0 + body_rows], start=r0):
            t.append(safe(self.label_of(r), namew - 1)[:namew - 1].ljust(namew), name_style(self.label_of(r)))
            for ci, col in enumerate(shown, start=c0):
                e = f.edges.get((r, col))
                if e is not None:
                    cell = f"{heat(e.rate)}{e.count}".ljust(CELL)
                    style = "yellow" if e.rate >= 2 else ""
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
        # footer: the selected pair
        if rows and cols:
            r, col = rows[r_sel], cols[c_sel]
            e = f.edges.get((r, col))
            t.append(f"{safe(self.label_of(r), 24)} → {safe(self.label_of(col), 24)}: ", style="bold")
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
        if width < 60 or height < 14:
            return Text("terminal too small for the map - try ② matrix", style="yellow")
        nodes = f.nodes
        c = Canvas(width, height)
        hubs = f.hubs
        box_w = min(max([len(h) for h in hubs] + [8]) + 4, width // 3)
        box_h = min(len(hubs) + 2, max(3, height // 3))
        bx, by = (width - box_w) // 2, (height - box_h) // 2
        cx, cy = width / 2, height / 2
        rx, ry = width / 2 - 8, height / 2 - 1.5
        pos: dict[str, tuple[int, int]] = {}
        n = max(1, len(nodes))
        for i, pid in enumerate(nodes):
            a = -math.pi / 2 + 2 * math.pi * i / n
            pos[pid] = (int(cx + rx * math.cos(a)), int(cy + ry * math.sin(a)))
        hub_y = {h: by + 1 + i for i, h in enumerate(hubs[:box_h - 2])}
        spot = nodes[self.spot % len(nodes)] if nodes else None

        def target_xy(dst: str, sx: int, sy: int) -> tuple[int, int]:
            if dst in hub_y:
                return (bx if sx < cx else bx + box_w - 1), hub_y[dst]
            if dst in pos:
                return pos[dst]
            return int(cx), int(cy)

        # membership spokes first (dim), then traffic on top
        for (mid, hub), kind in f.members.items():
            if mid in pos and hub in hub_y and (mid, hub) not in f.edges:
                x0, y0 = pos[mid]
                x1, y1 = target_xy(hub, x0, y0)
                for k, (x, y) in enumerate(_line(x0, y0, x1, y1)[1:-1]):
                    if kind == "live" or k % 2 == 0:
                        c.put(x, y, "·", "dim")
        for (src, dst), e in f.edges.items():
            if src not in pos:
                continue
            x0, y0 = pos[src]
            x1, y1 = target_xy(dst, x0, y0)
            g = heat(e.rate)
            hot = e.rate >= 0.5
            style = name_style(self.label_of(src)) if hot else "dim"
            if spot is not None and spot in (src, dst):
                style += " bold"
            for k, (x, y) in enumerate(_line(x0, y0, x1, y1)[1:-1]):
                if hot or k % 2 == 0:
                    c.put(x, y, g if g != " " else "·", style)
        # hub box
        for x in range(bx, bx + box_w):
            c.put(x, by, "─", "dim")
            c.put(x, by + box_h - 1, "─", "dim")
        for y in range(by, by + box_h):
            c.put(bx, y, "│", "dim")
            c.put(bx + box_w - 1, y, "│", "dim")
        for x, y, ch in ((bx, by, "┌"), (bx + box_w - 1, by, "┐"), (bx, by + box_h - 1, "└"),
                         (bx + box_w - 1, by + box_h - 1, "┘")):
            c.put(x, y, ch, "dim")
        for x in range(bx + 1, bx + box_w - 1):
            for y in range(by + 1, by + box_h - 1):
                c.put(x, y, " ")
        for h, y in hub_y.items():
            c.text(bx + 2, y, h[:box_w - 4], "cyan" if h.startswith("#") else "magenta")
        if len(hubs) > len(hub_y):
            c.text(bx + 2, by + box_h - 1, f"…+{len(hubs) - len(hub_y)}", "dim")
        # nodes
        for pid, (x, y) in pos.items():
            nm = safe(self.label_of(pid), 14)
            status = next((p.status for p in self.snap.peers if p.id == pid), "offline") \
                if self.snap else "offline"
            glyph = {"working": "●", "waiting": "◐", "idle": "○"}.get(status, "⨯")
            label = f"{glyph}{nm}" + ("≫" if pid in f.wide else "")
            lx = max(0, min(width - len(label), x - len(label) // 2))
            style = name_style(self.label_of(pid)) + (" reverse" if pid == spot and self.has_focus
                                                  else "")
            c.text(lx, y, label, style)
        return c.to_text()

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
            n = len(getattr(self, "_seq_rows", []))
            sel = getattr(self, "_seq_sel", n - 1) + dy
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
        screen = self.screen
        if view == "sequence":
            rows = getattr(self, "_seq_rows", [])
            sel = getattr(self, "_seq_sel", -1)
            if 0 <= sel < len(rows):
                screen.open_agent(rows[sel].from_id)  # type: ignore[attr-defined]
        elif view == "matrix":
            rows = f.senders + [n for n in f.nodes if n not in f.senders]
            cols = f.columns()
            if rows and cols:
                r, c = self.cell
                e = self._latest_entry(rows[r], cols[c])
                if e is not None:
                    screen.open_entry(e)  # type: ignore[attr-defined]
                else:
                    screen.open_agent(rows[r])  # type: ignore[attr-defined]
        elif f.nodes:
            screen.open_agent(f.nodes[self.spot % len(f.nodes)])  # type: ignore[attr-defined]
