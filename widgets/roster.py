"""The roster: agents by status then name (or, ``s``, by name, role or last activity),
endpoints dimmed below them. The cursor stays on its agent when the rows re-sort.

``/`` filters it (``waiting: rev``), ``o`` groups it by state, role or host under
``▾ waiting · 3`` header rows the cursor never rests on, ``*`` pins the agent at the cursor by
its principal id (widgets/roster_find.py holds the rules; the console saves group and pins).

Shape and colour for status; ``name/role`` in the name's stable colour; the harness tag from
``card.meta.connector``. On a wide panel each seat's facts (condition, ages) and activity wrap
onto indented rows; on a narrow one each seat is one line. A seat a manager hosts (the
console's ``ps`` fold) carries its marker (``managed pty``) on its head line; ``a`` attaches to
it, ``p`` peeks read-only, ``D`` asks to stop it (a confirmation the console owns).

Rows are ``full`` (the wrapped facts above) or ``dense`` (one line per agent in aligned
columns, widgets/roster_row.py); ``auto`` (the default) is dense whenever the full rows of the
roster would not fit the panel, decided again on a resize or a join, with a margin so it does
not flap. ``L`` cycles auto → dense → full; a narrow panel is always dense.

What an agent is doing comes from its event frames (the model's frame ledger,
widgets/doing.py): the open run's last tool started and its age (``⚙ Bash · 12s``), or
``✗ run failed 3m`` until the next run starts; presence wins while the agent is waiting.
"""

from __future__ import annotations

from itertools import compress
from operator import is_not
from typing import Any, Hashable, Mapping, NamedTuple

from rich.text import Text
from textual.binding import Binding
from textual.message import Message

from attach.control.managed import ManagedFold, bind_among
from meshview.model.frames import FrameLedger
from meshview.model.roster import ROSTER_LAYOUTS, ROSTER_SORTS, same_but_clocks, sort_peers
from meshview.model.snapshot import Peer, Snapshot
from meshview.model.stalled import Stalled
from widgets.doing import Doing, doing_of, doing_text, ledger_of, on_row
from widgets.lazy_list import LazyLineList
from widgets.notice import say_line
from widgets.roster_find import (
    GROUPS, MAX_PINS, NO_QUERY, Finder, GroupHeader, Query, is_header_key, parse_query,
)
from widgets.roster_row import NAME_MIN, code_of, columns, dense_row, name_cells
from widgets.presentation import (
    activity_line, harness_tag, join_wrapped, look_of, peer_facts, safe, set_title,
    status_glyph, who,
)
from attach.control.seat_text import marker


FULL_CELLS = 34  # the full roster's width (console.tcss): the auto decision measures at it
FULL_MARGIN = 2  # rows to spare before auto goes back from dense to full
NAME_SCAN = 2000  # rows read to size the name column


class _Row(NamedTuple):
    """A seat with what its frames say it is doing (a new object when either changes, so the
    lazy list measures that row again, and only that row)."""

    peer: Peer
    doing: Doing


def _peer(d: Peer | _Row) -> Peer:
    return d.peer if type(d) is _Row else d  # type: ignore[return-value]


class Roster(LazyLineList):
    BINDINGS = [
        Binding("a", "attach", "attach", id="roster.attach"),
        Binding("p", "peek", "peek", id="roster.peek"),
        Binding("D", "stop_seat", "stop (managed seat)", id="roster.stop"),
        Binding("s", "cycle_sort", "sort: status / name / role / last activity",
                id="roster.sort"),
        Binding("slash", "find", "filter: name, role, activity; working: waiting: idle: "
                "offline:", id="roster.find", key_display="/"),
        Binding("o", "cycle_group", "group: none / state / role / host", id="roster.group"),
        Binding("asterisk", "toggle_pin", "pin / unpin the agent (pinned go first)",
                id="roster.pin", key_display="*"),
        Binding("L", "cycle_layout", "rows: auto / dense (one line each) / full",
                id="roster.layout"),
    ]
    empty_text = "no agents present yet"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.snap: Snapshot | None = None
        self.wide = True
        self._key: object = None
        self._sec = -1
        self._now = 0.0  # the instant a second's ages are computed at (one per second)
        self.managed: ManagedFold | None = None  # when the session polls managers
        self._seat_index: dict[str, Any] | None = None
        self.sort_by = "status"
        self._sorted: tuple[str, ...] = ()  # the keys in ``sort_by`` order (one object while equal)
        self._sorted_from: object = None
        self.stalled: Mapping[str, Stalled] = {}  # agent id -> verdict (meshview/model/stalled.py)
        self._stalled_key: tuple = ()
        # moves when a shown principal's label changed (a second ``ada`` joined, a rename):
        # every row is drawn again; a join alone is a new row, measured as one
        self._labels: Any = None
        self._label_gen = 0
        # what each agent is doing, from the frame ledger (widgets/doing.py): followed by its
        # version, so a drain reads only the agents whose frames moved
        self.frames: FrameLedger | None = None  # a ledger handed in (a bench); else the model's under the screen
        self._ledger: FrameLedger | None = None
        self._ledger_v = -1
        self._doing: dict[str, Doing] = {}
        self._rows: dict[str, _Row] = {}
        self._doing_gen = 0
        # find, group, pin (widgets/roster_find.py): the rows arranged in one pass over the
        # sorted keys, again only when one of its inputs is another object
        self.find_query: Query = NO_QUERY
        self.group = "none"
        self._pins: tuple[str, ...] = ()  # principal ids, in the order pinned
        self._pin_set: frozenset[str] = frozenset()
        self._finder = Finder()
        self._arranged_from: tuple = ()
        self._by_id: dict[str, Peer] = {}
        self._by_id_from: object = None
        self._arranged_peers: tuple[Peer, ...] = ()  # the records the arrangement read
        # the arranged rows, and what they were built from: (keys, order, doing gen, peers)
        self._data_from: tuple | None = None
        self._data_rows: tuple[Peer | _Row | GroupHeader, ...] = ()
        self._data_pos: dict[Hashable, int] = {}  # key -> its row
        self._arranged: tuple[Hashable, ...] = ()
        self._headers: Mapping[Hashable, GroupHeader] = {}
        self._shown_total: tuple[int, int] = (0, 0)
        self._find_gen = 0
        # the cursor's agent as a filter began (or as picked under it): the cursor goes back
        # to it whenever the query shows it again, and when the query is cleared
        self._want: Hashable | None = None
        self._placed: Hashable | None = None
        # rows: ``row_layout`` as set (auto | dense | full); in auto, whether the full rows
        # overflowed at the last decision, and what that decision was made for
        self.row_layout = "auto"
        self._auto_dense = False
        self._decided: object = None
        self._names: object = None  # what the name column was sized for
        self._name_cells = NAME_MIN
        self._has_code = False

    def doing(self, peer_id: str) -> Doing | None:
        """What the frames say ``peer_id`` is doing, as its row shows it (tests read it)."""
        snap = self.snap
        p = next((x for x in snap.peers if x.id == peer_id), None) if snap is not None else None
        return on_row(self._doing.get(peer_id), p) if p is not None else None

    def _follow_frames(self) -> None:
        """The ledger's news since the last drain: one lookup per agent whose frames moved
        (all of them when the ledger is new or the news too old)."""
        led = self.frames if self.frames is not None else ledger_of(self)
        if led is None:
            return
        if led is self._ledger and led.version == self._ledger_v:
            return
        changed = led.changed_since(self._ledger_v) if led is self._ledger else None
        if changed is None or len(self._doing) > led.max_agents:
            changed = None
            fresh = {a.agent: d for a in led.agents() if (d := doing_of(a)) is not None}
            moved = fresh != self._doing
            self._doing = fresh
        else:
            moved = False
            for pid in changed:
                d = doing_of(led.agent(pid))
                if d != self._doing.get(pid):
                    moved = True
                    if d is None:
                        del self._doing[pid]
                    else:
                        self._doing[pid] = d
        self._ledger, self._ledger_v = led, led.version
        if moved:
            self._doing_gen += 1

    def _with_doing(self, peers: tuple[Peer, ...]) -> tuple[Peer | _Row, ...]:
        """``peers`` with each one the frames say is doing something as a :class:`_Row` (the
        same object while neither changed)."""
        doing = self._doing
        if not doing:
            self._rows.clear()
            return peers
        rows, kept = self._rows, {}
        out: list[Peer | _Row] = []
        for p in peers:
            d = doing.get(p.id)
            if d is None:
                out.append(p)
                continue
            r = rows.get(p.id)
            if r is None or r.peer is not p or r.doing != d:
                r = _Row(p, d)
            kept[p.id] = r
            out.append(r)
        self._rows = kept
        return tuple(out)

    def set_stalled(self, verdicts: Mapping[str, Stalled]) -> None:
        """The model's stalled verdicts (``MeshModel.stalled()``, once a second): a flagged row
        gets ``working · stalled? 14m (no output, no messages)``; rebuilt only on a change."""
        key = tuple(sorted((k, v.label()) for k, v in verdicts.items()))
        if key == self._stalled_key:
            return
        self.stalled, self._stalled_key = dict(verdicts), key
        if self.snap is not None:
            self._key = None
            self.update_snapshot(self.snap)

    def _stall_line(self, p: Peer) -> str | None:
        v = self.stalled.get(p.id) if p.status == "working" else None
        return f"working · {v.label()}" if v is not None else None

    def update_snapshot(self, snap: Snapshot, *, ages: bool = True, hold: bool = False) -> None:
        """Show ``snap``; ``ages`` False keeps the ages at the second they were last read (the
        console's drains while keys come: a row is painted again for what changed in it, not
        for its clock, and the frame a key waits behind stays small). ``hold``: a row whose
        record changed only in its clocks (a heartbeat: ``seen 0s``) shows them when the ages
        next move, at the model's second, not in a frame of its own (``hold_clocks``)."""
        self.snap = snap
        self.hold_clocks = hold
        prev = self._labels
        if prev is not None and snap.labels is not prev:
            if any(prev.label(pid) is not None for pid in snap.labels.diff(prev)):
                self._label_gen += 1
        self._labels = snap.labels
        sec = int(snap.now // 1000) if ages or self._sec is None else self._sec
        if sec != self._sec:
            self._sec, self._now = sec, snap.now  # ages are computed as of this instant
        self._follow_frames()
        self._size_names(snap)
        if self._decide():
            self._key = None
            self.set_class(self.dense and self.wide, "-dense")
        key = (snap.agents, snap.endpoints, sec, self._managed_version, self._label_gen,
               self._doing_gen, self._find_gen)
        if key != self._key:
            self._key = key
            self.rebuild()
        self._set_title(snap)

    def _set_title(self, snap: Snapshot) -> None:
        """``roster · 40 agents``; while a filter is on ``roster · 7/40 · /waiting:``."""
        n_ep = len(snap.endpoints)
        if self.find_query.active or self.find_query.raw:
            shown, total = self._shown_total if self._arranging() else (
                len(snap.agents), len(snap.agents))
            head = f"roster · {shown}/{total} · /{safe(self.find_query.raw, 30)}"
            if self.find_query.problem:
                head += f" ({self.find_query.problem})"
        else:
            head = f"roster · {len(snap.agents)} agents" + (
                f" · {n_ep} endpoint{'s' if n_ep != 1 else ''}" if n_ep else "")
        set_title(self, head
                  + ("" if self.sort_by == "status" else f" · by {self.sort_by}")
                  + ("" if self.group == "none" else f" · ▾ {self.group}"))

    # -- find, group, pin ------------------------------------------------------------------

    @property
    def filter_text(self) -> str:
        """The query as typed ("" when no filter is on)."""
        return self.find_query.raw

    @property
    def pins(self) -> tuple[str, ...]:
        """The pinned principal ids, in the order pinned."""
        return self._pins

    def shown_counts(self) -> tuple[int, int]:
        """(agents shown, agents in all) as the title says them."""
        snap = self.snap
        if snap is None:
            return 0, 0
        self.order()
        return self._shown_total if self._arranging() else (len(snap.agents), len(snap.agents))

    def header_rows(self) -> list[str]:
        """The group header rows shown, in order (``▾ waiting · 3``): tests read them."""
        return [self._headers[k].text for k in self.order() or () if k in self._headers]

    def _refind(self) -> None:
        self._find_gen += 1
        if self.snap is not None:
            self.update_snapshot(self.snap)
        self._off_header(1)
        self.scroll_to_cursor()

    def set_filter(self, raw: str) -> None:
        """Show only the agents ``raw`` matches (widgets/roster_find.py; "" shows all). The
        cursor stays on its agent while it is shown, and comes back to it when the filter
        is cleared."""
        q = parse_query(raw) if raw else NO_QUERY
        if q == self.find_query:
            return
        cur = self.cursor_key  # the agent the filter is typed from, or the one picked since
        if cur is not None and not is_header_key(cur) and (
                self._want is None or cur != self._placed):
            self._want = cur
        self.find_query = q
        self._refind()
        want = self._want
        i = self._index.get(want) if want is not None else None
        if i is not None and want != self.cursor_key:
            self._move_to(i)
        self._placed = self.cursor_key
        if not q.raw:
            self._want = None

    def set_group(self, group: str) -> None:
        """Group the rows by ``group`` (one of ``GROUPS``); the cursor keeps its agent."""
        if group not in GROUPS or group == self.group:
            return
        self.group = group
        self._refind()

    def set_pins(self, pins: tuple[str, ...] | list[str]) -> None:
        """Pin these principal ids (the first ``MAX_PINS``; config's ``[roster] pins``)."""
        kept = tuple(dict.fromkeys(p for p in pins if isinstance(p, str) and p))[:MAX_PINS]
        if kept == self._pins:
            return
        self._pins, self._pin_set = kept, frozenset(kept)
        self._refind()

    class GroupChanged(Message):
        """``o``: the roster's grouping changed (the console persists it)."""

        def __init__(self, group: str) -> None:
            super().__init__()
            self.group = group

    class PinsChanged(Message):
        """``*``: the pinned ids changed (the console persists them)."""

        def __init__(self, pins: tuple[str, ...]) -> None:
            super().__init__()
            self.pins = pins

    async def action_find(self) -> None:
        """``/``: the screen's search box, on the roster's filter (the screen's action, run
        by name: a widget imports no screen)."""
        await self.run_action("screen.search")

    def action_cycle_group(self) -> None:
        i = GROUPS.index(self.group) if self.group in GROUPS else -1
        self.set_group(GROUPS[(i + 1) % len(GROUPS)])
        self.post_message(self.GroupChanged(self.group))
        say_line(self, f"roster grouped by {self.group} (o cycles)" if self.group != "none"
                 else "roster not grouped (o cycles)")

    def action_toggle_pin(self) -> None:
        p = self.peer_at_cursor()
        if p is None or p.kind != "agent":
            say_line(self, "pin: no agent under the cursor")
            return
        name = safe(self.snap.name_of(p.id) if self.snap is not None else p.name, 40)
        if p.id in self._pin_set:
            self.set_pins(tuple(x for x in self._pins if x != p.id))
            say_line(self, f"unpinned {name}")
        elif len(self._pins) >= MAX_PINS:
            say_line(self, f"pin: {MAX_PINS} agents are pinned already (unpin one first)")
            return
        else:
            self.set_pins(self._pins + (p.id,))
            say_line(self, f"pinned {name} (* unpins)")
        self.post_message(self.PinsChanged(self._pins))

    def _arranging(self) -> bool:
        return self.find_query.active or self.group != "none" or bool(self._pin_set)

    def _arrange(self, base: tuple[str, ...]) -> tuple[Hashable, ...]:
        """``base`` (the sorted keys) filtered, pinned and grouped; the same tuple object while
        neither the inputs nor the result changed."""
        snap = self.snap
        assert snap is not None
        # what of the rows the result reads, each an object the snapshot keeps while it holds:
        # statuses move ``order`` (the model's status order), names and roles move ``labels``;
        # activity text and meta.host have no such token: every new ``peers`` (a heartbeat)
        q, group = self.find_query, self.group
        by_rows = bool(q.text) or group == "host"
        deps = (base, snap.order if (q.state or group == "state" or by_rows) else None,
                snap.labels if group == "role" else None)
        src = (deps, q, group, self._pin_set, self._doing_gen if q.text else None)
        prev = self._arranged_from
        if (prev and all(a is b for a, b in zip(deps, prev[0])) and src[1:] == prev[1:]
                and (not by_rows or self._rows_read_the_same(snap.peers))):
            return self._arranged
        self._arranged_peers = snap.peers
        by_id = self._peer_map()
        doing: dict[str, str] = {}
        if self.find_query.text:
            for pid, d in self._doing.items():
                p = by_id.get(pid)
                if p is not None and on_row(d, p) is not None:
                    doing[pid] = {"tool": d.name or "", "run": "run open"}.get(d.kind, "run failed")
        got = self._finder.arrange(base, by_id, self.find_query, self.group, self._pin_set, doing)
        self._arranged_from = src
        self._arranged, self._headers = got.keys, got.headers
        self._shown_total = (got.shown, got.total)
        return got.keys

    def _rows_read_the_same(self, peers: tuple[Peer, ...]) -> bool:
        """Activity text and meta.host have no token in the snapshot: of the rows whose record
        is another object since the last arrangement (a heartbeat's, found at C speed; the
        same ``order`` keeps them aligned), none changed what a query or a host reads."""
        old = self._arranged_peers
        if old is peers:
            return True
        if len(old) != len(peers):
            return False
        for i in compress(range(len(peers)), map(is_not, peers, old)):
            a, b = old[i], peers[i]
            if (a.id != b.id or a.name != b.name or a.role != b.role or a.activity != b.activity
                    or a.status != b.status or a.meta != b.meta or a.kind != b.kind):
                return False
        self._arranged_peers = peers
        return True

    def _peer_map(self) -> dict[str, Peer]:
        """The snapshot's peers by id, built once per ``peers`` object."""
        snap = self.snap
        peers = snap.peers if snap is not None else ()
        if peers is not self._by_id_from:
            order = snap.order if snap is not None else ()
            # ``order`` is ``peers``' ids in order: zipped at C speed
            self._by_id = (dict(zip(order, peers)) if len(order) == len(peers)
                           else {p.id: p for p in peers})
            self._by_id_from = peers
        return self._by_id

    @property
    def _managed_version(self) -> int:
        return self.managed.version if self.managed is not None else -1

    def set_managed(self, fold: ManagedFold) -> None:
        """A ``ps`` round finished: one rebuild for every marker at once."""
        self.managed = fold
        if self.snap is not None:
            self.update_snapshot(self.snap)

    def set_sort(self, sort_by: str) -> None:
        """Order the rows by ``sort_by`` (one of ``ROSTER_SORTS``); the cursor keeps its agent."""
        if sort_by not in ROSTER_SORTS or sort_by == self.sort_by:
            return
        self.sort_by = sort_by
        self._sorted_from = None
        self._key = None
        if self.snap is not None:
            self.update_snapshot(self.snap)
        self.scroll_to_cursor()

    class SortChanged(Message):
        """``s``: the roster's order changed (the console persists the choice)."""

        def __init__(self, sort_by: str) -> None:
            super().__init__()
            self.sort_by = sort_by

    def action_cycle_sort(self) -> None:
        i = ROSTER_SORTS.index(self.sort_by) if self.sort_by in ROSTER_SORTS else -1
        self.set_sort(ROSTER_SORTS[(i + 1) % len(ROSTER_SORTS)])
        self.post_message(self.SortChanged(self.sort_by))
        say_line(self, f"roster sorted by {'last activity' if self.sort_by == 'activity' else self.sort_by}"
            " (s cycles)")

    def _sorted_peers(self) -> tuple[Peer, ...]:
        snap = self.snap
        if snap is None:
            return ()
        return sort_peers(snap.peers, self.sort_by)

    def set_wide(self, wide: bool) -> None:
        if wide != self.wide:
            self.wide = wide
            self._decided = None
            self._decide()
            self._show_layout()

    # -- layout: full or dense rows ------------------------------------------------------

    @property
    def dense(self) -> bool:
        """Whether the rows are one line each now (a narrow panel always is)."""
        if not self.wide or self.row_layout == "dense":
            return True
        return self.row_layout == "auto" and self._auto_dense

    def set_layout(self, layout: str) -> None:
        """Rows ``auto`` | ``dense`` | ``full``; the cursor keeps its agent."""
        if layout not in ROSTER_LAYOUTS or layout == self.row_layout:
            return
        self.row_layout = layout
        self._decided = None
        self._decide()
        self._show_layout()

    def _show_layout(self) -> None:
        """Draw the rows as :attr:`dense` says (the console widens a dense roster: ``-dense``)."""
        self.set_class(self.dense and self.wide, "-dense")
        if self.snap is not None:
            self._key = None
            self.update_snapshot(self.snap)
        else:
            self.rebuild()
        if self.is_mounted:
            self.call_after_refresh(self.scroll_to_cursor)

    class LayoutChanged(Message):
        """``L``: the rows' layout changed (the console persists the choice)."""

        def __init__(self, layout: str) -> None:
            super().__init__()
            self.row_layout = layout

    def action_cycle_layout(self) -> None:
        i = ROSTER_LAYOUTS.index(self.row_layout) if self.row_layout in ROSTER_LAYOUTS else -1
        self.set_layout(ROSTER_LAYOUTS[(i + 1) % len(ROSTER_LAYOUTS)])
        self.post_message(self.LayoutChanged(self.row_layout))
        now = "dense" if self.dense else "full"
        say_line(self, f"roster rows: {self.row_layout}"
                 + (f" (now {now}: dense whenever the full rows would not fit)"
                    if self.row_layout == "auto" else "") + " · L cycles auto / dense / full")

    def on_resize(self) -> None:
        if self._decide():
            self._show_layout()
        super().on_resize()

    def _decide(self) -> bool:
        """In ``auto``: are the full rows more than the panel holds? Decided again when the
        panel's height or the number of rows changed (a join, a leave), not as statuses come
        and go; back to full only with FULL_MARGIN rows to spare, so it does not flap. True
        when the rows' layout changed."""
        if self.row_layout != "auto" or not self.wide or self.snap is None or not self.is_mounted:
            return False
        height = self.scrollable_content_region.height
        if height <= 0:
            return False
        peers = self.snap.peers
        key = (len(peers), height)
        if key == self._decided:
            return False
        self._decided = key
        if 2 * len(peers) > height:  # a full row is two lines at least: no need to measure
            over = True
        else:
            self.prepare()
            width = min(self.content_width, FULL_CELLS)
            total = sum(self._measure_full(r, width) for r in self._with_doing(peers))
            over = total > height - (FULL_MARGIN if self._auto_dense else 0)
        if over == self._auto_dense:
            return False
        self._auto_dense = over
        return True

    def _size_names(self, snap: Snapshot) -> None:
        """The name column's width (the longest shown ``name/role``, capped) and whether any
        agent says what code it is on (``meta.repo``/``branch``): again only when a label
        changed or the rows came or went. Past NAME_SCAN rows only the first are read (a
        long name is cut with ``…`` either way)."""
        key = (snap.labels, len(snap.peers))
        if key == self._names:
            return
        self._names = key
        cells, code = NAME_MIN, False
        for p in snap.peers[:NAME_SCAN]:
            cells = max(cells, name_cells(snap.name_of(p.id), p.role, harness_tag(p.meta)))
            if not code and p.meta and code_of(p.meta) is not None:
                code = True
        self._name_cells, self._has_code = cells, code

    def _marker(self, seat: Any) -> Text:
        style = "dim" if seat.silent or seat.process != "running" else look_of(self).info
        return Text(f"▸ {marker(seat)}", style=style)

    def _head(self, p: Peer) -> Text:
        look = look_of(self)
        glyph, style = status_glyph(p.status, look)
        t = Text()
        if p.kind != "agent":
            t.append("⚙ ", style="dim")
        t.append(glyph + " ", style=style)
        snap = self.snap  # the label: the name, with a principal suffix when shared
        t.append_text(who(snap.name_of(p.id) if snap is not None else p.name, p.role, look))
        tag = harness_tag(p.meta)
        if tag:
            t.append(f" {tag}", style="dim italic")
        if p.kind != "agent":
            t.stylize("dim")
        return t

    # -- items: measured for every seat, built for the ones on screen --------------------

    def source(self) -> list[tuple[Hashable, Peer | _Row | GroupHeader]]:
        snap = self.snap
        if snap is None:
            return []
        if self._arranging():
            return list(zip(self.order() or (), self.data()))
        peers = snap.peers if self.sort_by == "status" else self._sorted_peers()
        return [(_peer(d).id, d) for d in self._with_doing(peers)]

    def prepare(self) -> None:
        """The fold's seats by principal, once per rebuild rather than a scan of every seat per
        roster row; a row is marked managed only through its id and lifecycle uid."""
        fold = self.managed
        self._seat_index = fold.index() if fold is not None else None

    def order(self) -> tuple[Hashable, ...] | None:
        base = self._base_order()
        if base is None or not self._arranging():
            return base
        return self._arrange(base)

    def _base_order(self) -> tuple[str, ...] | None:
        snap = self.snap
        if snap is None or not snap.order:
            return None
        if self.sort_by == "status":
            return snap.order
        # the same tuple object while the order holds, so unchanged rows are not re-measured
        src = (snap.peers if self.sort_by == "activity" else snap.order, self.sort_by)
        if src[0] is not self._sorted_from:
            keys = tuple(p.id for p in self._sorted_peers())
            if keys != self._sorted:
                self._sorted = keys
            self._sorted_from = src[0]
        return self._sorted

    def data(self) -> tuple[Peer | _Row | GroupHeader, ...]:
        snap = self.snap
        if snap is None:
            return ()
        if self._arranging():
            return self._arranged_data(snap)
        if self.sort_by == "status":
            return self._with_doing(snap.peers)
        by_id = {p.id: p for p in snap.peers}
        return self._with_doing(tuple(by_id[k] for k in self._base_order() or ()))

    def _arranged_data(self, snap: Snapshot) -> tuple[Peer | _Row | GroupHeader, ...]:
        """The rows for the arranged keys. Same keys, same ``order`` and doings: only the
        records that are other objects (a heartbeat's, found at C speed) are put in, where
        the key's row is; else built whole."""
        keys = self.order() or ()
        peers = snap.peers
        c = self._data_from
        if (c is not None and c[0] is keys and c[1] is snap.order and c[2] == self._doing_gen
                and len(c[3]) == len(peers)):
            old = c[3]
            changed = list(compress(range(len(peers)), map(is_not, peers, old)))
            if not changed:
                return self._data_rows
            out = list(self._data_rows)
            pos, doing, rows = self._data_pos, self._doing, self._rows
            for i in changed:
                p = peers[i]
                j = pos.get(p.id)
                if j is None:
                    continue
                d = doing.get(p.id)
                if d is None:
                    out[j] = p
                else:
                    r = rows.get(p.id)
                    if r is None or r.peer is not p or r.doing != d:
                        r = rows[p.id] = _Row(p, d)
                    out[j] = r
        else:
            by_id = self._peer_map()
            rows_by: Mapping[Any, Peer | _Row] = by_id
            if self._doing:
                self._with_doing(peers)  # the rows with a doing, as _Row objects
                rows_by = {**by_id, **self._rows}
            out = list(map({**rows_by, **self._headers}.__getitem__, keys))
            self._data_pos = dict(zip(keys, range(len(keys))))
        self._data_from = (keys, snap.order, self._doing_gen, peers)
        self._data_rows = tuple(out)
        return self._data_rows

    def epoch(self) -> object:
        return (self.wide, self._managed_version, self._stalled_key, self._label_gen,
                self.dense, self._name_cells, self._has_code)

    def ages(self) -> object:
        return self._now

    def clocks_only(self, old: Any, new: Any) -> bool:
        if type(old) is GroupHeader or type(new) is GroupHeader:
            return False
        if type(old) is _Row or type(new) is _Row:
            return (type(old) is type(new) and old.doing == new.doing
                    and same_but_clocks(old.peer, new.peer))
        return same_but_clocks(old, new)

    def _seat(self, p: Peer) -> Any:
        index = self._seat_index
        if index is None:
            return None
        seats = index.get(p.id)
        return bind_among(seats, p.lifecycle_uid).seat if seats else None

    def measure(self, row: Peer | _Row, width: int) -> int:
        """``len(lines_of(row, width))`` without building any ``Text``."""
        if type(row) is GroupHeader:
            return 1
        if self.dense:
            return 1
        return self._measure_full(row, width)

    def _measure_full(self, row: Peer | _Row, width: int) -> int:
        p = _peer(row)
        seat = self._seat(p)
        n = 1 + len(join_wrapped(peer_facts(p, self._now), max(8, width - 4)))
        if p.activity:
            n += 1
        if type(row) is _Row and on_row(row.doing, p) is not None:
            n += 1
        if self.stalled and self._stall_line(p) is not None:
            n += 1
        if seat is not None:
            head = self._head(p)
            if head.cell_len + 1 + self._marker(seat).cell_len > width:
                n += 1  # the marker takes a row of its own
        return n

    def lines_of(self, row: Peer | _Row, width: int) -> list[Text]:
        if type(row) is GroupHeader:
            t = Text(row.text, style="bold " + look_of(self).info)
            t.truncate(width, overflow="ellipsis")
            return [t]
        now = self._now
        p = _peer(row)
        d = on_row(row.doing, p) if type(row) is _Row else None
        if self.dense:
            snap, seat = self.snap, self._seat(p)
            cols = columns(width, self._name_cells, code=self._has_code)
            return [dense_row(p, snap.name_of(p.id) if snap is not None else p.name, cols, now,
                              doing=d, stall=self._stall_line(p) if self.stalled else None,
                              marker=self._marker(seat) if seat is not None else None,
                              marker_whole=seat is not None and (
                                  seat.silent or seat.process != "running"),
                              look=look_of(self))]
        doing = None
        if d is not None:
            look = look_of(self)
            doing = Text(doing_text(d, now), style=f"bold {look.error}" if d.kind == "failed"
                         else look.info)
        head = self._head(p)
        seat = self._seat(p)
        mark = self._marker(seat) if seat is not None else None
        facts = peer_facts(p, now)
        act = activity_line(p, now)
        dim = p.kind != "agent" or p.status == "offline"
        lines = [head]
        if mark is not None:  # on the head line when it fits whole, else its own row
            if head.cell_len + 1 + mark.cell_len <= width:
                head.append(" ")
                head.append_text(mark)
            else:
                lines.append(Text("   ").append_text(mark))
        for f in join_wrapped(facts, max(8, width - 4)):
            lines.append(Text("   " + f, style="dim" if dim else ""))
        stall = self._stall_line(p) if self.stalled else None
        if stall:
            lines.append(Text("   " + stall, style="bold yellow"))
        if doing is not None:
            lines.append(Text("   ").append_text(doing))
        if act:
            lines.append(Text("   " + act, style="italic dim"))
        for t in lines:
            t.truncate(width, overflow="ellipsis")
        return lines

    # -- the cursor never rests on a header row ---------------------------------------------

    def rebuild(self) -> None:
        super().rebuild()
        self._off_header(1)

    def _off_header(self, step: int) -> None:
        """Off a header row the cursor landed on (a rebuild clamped it there): to the next
        agent row ``step``'s way, else the other way."""
        keys = self._keys
        i = self._cursor
        if not keys or not (0 <= i < len(keys)) or not is_header_key(keys[i]):
            return
        j = self._agent_row(i, step)
        if j is not None:
            self._cursor, self.cursor_key = j, keys[j]
            self._cache.clear()
            self.refresh()

    def _agent_row(self, i: int, step: int) -> int | None:
        keys, n = self._keys, len(self._keys)
        for d in (step or 1, -(step or 1)):
            j = i
            while 0 <= j < n:
                if not is_header_key(keys[j]):
                    return j
                j += d
        return None

    def _move_to(self, index: int) -> None:
        keys = self._keys
        index = max(0, min(len(keys) - 1, index))
        if keys and is_header_key(keys[index]):
            j = self._agent_row(index, 1 if index >= self._cursor else -1)
            if j is None:
                return
            index = j
        super()._move_to(index)

    def action_select(self) -> None:
        if self.cursor_key is not None and not is_header_key(self.cursor_key):
            super().action_select()

    def peer_at_cursor(self) -> Peer | None:
        if self.snap is None or self.cursor_key is None:
            return None
        return next((p for p in self.snap.peers if p.id == self.cursor_key), None)

    class OpenSeat(Message):
        """``a``/``p`` on a row: the console opens that seat's terminal (``peek``: read-only).

        A message rather than a call, so widgets never import the screens above them."""

        def __init__(self, name: str, peek: bool, peer_id: str | None = None) -> None:
            super().__init__()
            self.name = name
            self.peek = peek
            self.peer_id = peer_id  # the row's principal: the seat is bound by it, not the name

    def action_attach(self) -> None:
        self._open(peek=False)

    def action_peek(self) -> None:
        self._open(peek=True)

    def _open(self, *, peek: bool) -> None:
        p = self.peer_at_cursor()
        if p is None:
            say_line(self, f"{'peek' if peek else 'attach'}: no agent under the cursor")
            return
        self.post_message(self.OpenSeat(p.name, peek, p.id))

    class StopSeat(Message):
        """``D`` on a row: the console asks whether (and how) to stop that managed seat."""

        def __init__(self, peer_id: str, name: str) -> None:
            super().__init__()
            self.peer_id = peer_id
            self.name = name

    def action_stop_seat(self) -> None:
        p = self.peer_at_cursor()
        if p is None:
            say_line(self, "stop: no agent under the cursor")
            return
        self.post_message(self.StopSeat(p.id, p.name))
