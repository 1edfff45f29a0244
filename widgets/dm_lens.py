"""The DM lens: a per-peer roll-up of direct-message conversations and a thread pane.

Only pairs that actually talked appear (never the n² list). Peers and conversations are
newest first, thread messages oldest first. Under chat-only credentials the tap cannot see
DMs, and the lens says so instead of showing an empty list that looks like silence. A long
message folds as a feed row does (widgets/fold.py); Enter opens its detail card.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Static

from meshview.model.snapshot import DmConversation, DmMessage, Snapshot
from widgets.feed import FeedView
from widgets.fold import DEFAULT_MAX_LINES, TailCounter, body_cap, fold_label
from widgets.line_list import Item, LineList
from widgets.notice import say_line
from widgets.presentation import (
    clock, look_of, safe, safe_body, set_title, status_glyph, wrap_offsets,
)


def roll_up(snap: Snapshot) -> list[tuple[str, list[DmConversation]]]:
    """Peer id -> its conversations (newest first); peers ordered by their newest one."""
    by_peer: dict[str, list[DmConversation]] = {}
    for c in snap.dms:  # already newest first
        by_peer.setdefault(c.a_id, []).append(c)
        by_peer.setdefault(c.b_id, []).append(c)
    return sorted(by_peer.items(), key=lambda kv: -kv[1][0].last_ts)


class DmPeers(LineList):
    empty_text = "no direct messages yet"

    def __init__(self, lens: "DmLens", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lens = lens

    def expanded(self) -> str | None:
        k = self.cursor_key
        if isinstance(k, tuple):
            return k[1]
        return None

    def build(self, width: int) -> list[Item]:
        snap = self.lens.snap
        if snap is None:
            return []
        status = {p.id: p.status for p in snap.peers}
        look = look_of(self)
        open_peer = self.expanded()
        items: list[Item] = []
        for pid, convs in roll_up(snap):
            glyph, style = status_glyph(status.get(pid, "offline"), look)
            name = snap.name_of(pid)
            t = Text("▾ " if pid == open_peer else "▸ ")
            t.append(glyph + " ", style=style)
            t.append(safe(name, 32), style=look.name(name))
            t.append(f"  {len(convs)}t", style="dim")
            t.truncate(width, overflow="ellipsis")
            items.append((("peer", pid), [t]))
            if pid == open_peer:
                for c in convs:
                    other = c.b_id if c.a_id == pid else c.a_id
                    oname = snap.name_of(other)
                    r = Text("   ↳ ")
                    r.append(safe(oname, 32), style=look.name(oname))
                    r.append(f"  {c.count}", style="dim")
                    r.truncate(width, overflow="ellipsis")
                    items.append((("conv", pid, other), [r]))
        return items

    def on_cursor_moved(self) -> None:
        before = [k for k, _ in self.items]
        self.rebuild()
        if [k for k, _ in self.items] != before:
            self.select_key(self.cursor_key)
        self.lens.show_thread()

    def selected_pair(self) -> tuple[str, str] | None:
        snap = self.lens.snap
        k = self.cursor_key
        if snap is None or not isinstance(k, tuple):
            return None
        if k[0] == "conv":
            return k[1], k[2]
        for pid, convs in roll_up(snap):
            if pid == k[1] and convs:
                c = convs[0]
                return pid, (c.b_id if c.a_id == pid else c.a_id)
        return None


class DmThread(LineList):
    empty_text = "pick a peer on the left"
    BINDINGS = [
        Binding("ctrl+d", "page(1)", "half page down", id="dm.half-down", show=False),
        Binding("ctrl+u", "page(-1)", "half page up", id="dm.half-up", show=False),
    ]

    def __init__(self, lens: "DmLens", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lens = lens
        self.pair: tuple[str, str] | None = None
        self._messages: dict[object, DmMessage] = {}
        self._tails = TailCounter()

    def _body(self, m: DmMessage, key: object, width: int) -> list[Text]:
        """A message's body lines, folded past the lens's ``max_lines`` (widgets/fold.py)."""
        w = max(8, width - 3)
        n = self.lens.max_lines
        cap = body_cap(n, w) if n > 0 else len(m.text)
        spans = [(line, s, e) for line in safe_body(m.text[:cap])
                 for s, e in wrap_offsets(line, w, w)]
        more = self._tails.rows(key, m.text, cap, w) if len(m.text) > cap else 0
        hidden = max(0, len(spans) - n) + more
        if n <= 0 or (hidden <= 1 and not more):
            return [Text("   " + line[s:e]) for line, s, e in spans]
        out = [Text("   " + line[s:e]) for line, s, e in spans[:n]]
        out.append(Text("   " + fold_label(hidden, more > 0, w), style="dim"))
        return out

    def build(self, width: int) -> list[Item]:
        snap = self.lens.snap
        if snap is None or self.pair is None:
            return []
        a, b = self.pair
        msgs = snap.dm_thread(a, b)
        set_title(self, f"{safe(snap.name_of(a), 24)} ↔ {safe(snap.name_of(b), 24)}"
                  f" · {len(msgs)} msg")
        items: list[Item] = []
        look = look_of(self)
        self._messages = {}
        for m in msgs:
            fn, tn = snap.name_of(m.from_id), snap.name_of(m.to_id)
            head = Text(clock(m.ts) + " ", style="dim")
            if m.historical:
                head.append("↺ ", style="dim")
            head.append(safe(fn, 24), style=look.name(fn))
            claim = snap.labels.sender(m.from_id, m.claimed_name or None).claim
            if claim is not None:  # the envelope said another name: shown, never believed
                head.append(f' (claims "{safe(claim, 24)}")', style="italic")
            head.append(" → ", style="dim")
            head.append(safe(tn, 24), style=look.name(tn))
            head.append(": ", style="dim")
            if m.conflict:  # an id another sender used first: both are shown
                head.append("⚠ reused id ", style="bold yellow")
            # keyed by (sender, id): two senders may use one id
            key = (m.from_id, m.id) if m.id else (m.ts, m.from_id)
            self._messages[key] = m
            items.append((key, [head, *self._body(m, key, width)]))
        return items

    def action_select(self) -> None:
        """Enter: the message's detail card (all of its text), as Enter on a feed row."""
        snap = self.lens.snap
        m = self._messages.get(self.cursor_key) if self.cursor_key is not None else None
        if m is None or snap is None:
            return
        row = snap.row_of(m)
        if row is None:
            say_line(self, "that message has left the feed: its card is no longer kept")
            return
        self.post_message(FeedView.Open(row))


class DmLens(Horizontal):
    DEFAULT_CSS = """
    DmLens { height: 1fr; }
    DmLens #dm-peers { width: 32; border-top: hkey $panel-lighten-1; border-right: vkey $panel-lighten-1; }
    DmLens #dm-thread { width: 1fr; border-top: hkey $panel-lighten-1; }
    DmLens #dm-peers, DmLens #dm-thread { border-title-color: $text-disabled; }
    DmLens #dm-peers:focus, DmLens #dm-thread:focus {
        border-top: heavy $accent; border-title-color: $text; border-title-style: bold;
        border-title-background: $accent 30%;
    }
    DmLens #dm-hidden { width: 1fr; height: 1fr; content-align: center middle; color: $warning; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.snap: Snapshot | None = None
        self._key: object = None

    @property
    def max_lines(self) -> int:
        """Body lines a thread message shows before it folds: the feed's on this screen
        (``[feed] max_lines``), read when the thread is drawn."""
        feed = next(iter(self.screen.query(FeedView)), None) if self.is_attached else None
        return feed.max_lines if feed is not None else DEFAULT_MAX_LINES

    def compose(self) -> ComposeResult:
        yield DmPeers(self, id="dm-peers")
        yield DmThread(self, id="dm-thread")
        yield Static("DMs hidden (chat-only creds)\n\nthis credential taps channels only; "
                     "direct messages are not visible to it", id="dm-hidden")

    def panes(self) -> list:
        if self.snap is not None and not self.snap.status.dm_visible:
            return []
        return [self.query_one(DmPeers), self.query_one(DmThread)]

    def focus_peers(self) -> None:
        if self.panes():
            self.query_one(DmPeers).focus()

    def back(self) -> bool:
        """Esc inside the lens: from the thread back to the peers (one level); False when
        there is no inner level left, so the console leaves the lens."""
        thread = self.query_one(DmThread)
        if thread.has_focus and self.panes():
            self.query_one(DmPeers).focus()
            return True
        return False

    def update_snapshot(self, snap: Snapshot) -> None:
        self.snap = snap
        visible = snap.status.dm_visible
        peers, thread = self.query_one(DmPeers), self.query_one(DmThread)
        peers.display = thread.display = visible
        self.query_one("#dm-hidden").display = not visible
        set_title(peers, f"direct messages · {len(roll_up(snap))} peers")
        key = (snap.dms, len(snap.dm_log), snap.dm_log[-1:] if snap.dm_log else (), snap.labels)
        if key != self._key:
            self._key = key
            peers.rebuild()
            self.show_thread(force=True)

    def show_thread(self, force: bool = False) -> None:
        peers, thread = self.query_one(DmPeers), self.query_one(DmThread)
        pair = peers.selected_pair()
        if pair != thread.pair or force:
            follow = thread.pair != pair or thread.cursor_index >= len(thread.items) - 1
            thread.pair = pair
            thread.rebuild()
            if follow:
                thread.action_edge(1)
