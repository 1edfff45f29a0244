"""``?`` help, generated from the live bindings: the focused panel's keys, then the global
ones. Remapped keys (keymap file) show as remapped.

It reads like ``less``: ``j``/``k`` a line, Space/``b`` a page, ``d``/``u`` half a page,
``g``/``G`` the ends, ``/`` searches (``n``/``N`` walk the matches), ``q``/Esc close; any other
key does nothing, so a stray key never loses the page. The pager's keys are bindings with ids
(``help.*``) and so remappable in keymap.toml like every other screen's.
"""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.strip import Strip
from textual.widgets import Static

from cotal_tui.about import version_line
from widgets.line_list import Item, LineList


def describe_bindings(screen: Screen) -> tuple[str, list[tuple[str, str]], list[tuple[str, str]]]:
    """(panel name, panel keys, global keys) from ``screen.active_bindings``."""
    focused = screen.focused
    panel_name = type(focused).__name__ if focused is not None else "console"
    panel: dict[str, list[str]] = {}
    glob: dict[str, list[str]] = {}
    for active in screen.active_bindings.values():
        b = active.binding
        if b.system or not b.description or not b.id:
            continue
        display = screen.app.get_key_display(b) if b.key_display is None else b.key_display
        ident = b.description  # one row per meaning: 1…9 'jump to tab' share a row
        owner = panel if focused is not None and active.node is focused else glob
        owner.setdefault(ident, [])
        if display not in owner[ident]:
            owner[ident].append(display)
    def rows(d: dict) -> list[tuple[str, str]]:
        return [(" ".join(keys), desc) for desc, keys in d.items()]
    return panel_name, rows(panel), rows(glob)


PANEL_NAMES = {
    "FeedView": "feed", "Roster": "roster", "NeedsYouRail": "needs-you", "DmPeers": "dm peers",
    "DmThread": "dm thread", "TopologyLens": "topology", "SpaceList": "space list",
    "TilePane": "tile pane",
}


# the panes own every key while attached, so their keys are not bindings: listed here
TERMINAL_ROWS = [
    ("Ctrl-]", "detach; Esc goes to the program (COTAL_DETACH_KEY or [attach] detach_keys "
     "opt in to others: \"ctrl-], esc esc\", \"ctrl-b d\")"),
    ("Ctrl-] [", "copy mode in an attached pane (tmux's prefix [)"),
    ("Ctrl-] f", "fit the seat to the pane on attach, or not ([attach] fit; f in a peek)"),
    ("PgUp / wheel", "copy mode in a peek (the wheel on a shell when attached)"),
    ("copy mode", "j k PgUp PgDn g G move · / ? n N search · v ^v select · y yank to a file · "
                  "Y and the clipboard · q back"),
]


# what a roster row's activity line means (widgets/doing.py): listed with the roster's keys
ROSTER_ROWS = [
    ("⚙ Bash · 12s", "the last tool its open run started, 12s ago (last tool, not running: "
                     "nothing on the wire says a tool ended)"),
    ("▸ run open · 40s", "a run is open, no tool started in it yet"),
    ("✗ run failed 3m", "its last run ended in RUN_ERROR (said until the next run starts)"),
    ("waiting", "presence's activity and condition win over the frames"),
]

MIN_DESC = 24  # narrower than this beside the keys, a description goes under its key
_WORD = re.compile(r"\S+\s*|\s+")


def wrap(text: Text, width: int, indent: int = 0) -> list[Text]:
    """``text`` cut at word starts into lines of at most ``width`` cells, the ones after the
    first behind ``indent`` spaces (a word wider than a line is cut where it must be)."""
    width = max(1, width)
    indent = max(0, min(indent, width - 1))  # a continuation keeps a cell for its text
    plain = text.plain
    offsets: list[int] = []
    room, used = width, 0
    for m in _WORD.finditer(plain):
        word = m.group()
        w = cell_len(word.rstrip())
        if used and used + w > room:  # the word goes to the next line
            offsets.append(m.start())
            room, used = max(1, width - indent), 0
        start = m.start()
        while used + w > room:  # wider than a whole line: cut it
            cut, n = start, used
            while cut < m.end() and n + cell_len(plain[cut]) <= room:
                n += cell_len(plain[cut])
                cut += 1
            cut = max(cut, start + 1)
            offsets.append(cut)
            w -= cell_len(plain[start:cut])
            start, room, used = cut, max(1, width - indent), 0
        used += cell_len(plain[start:m.end()])
    parts = list(text.divide(offsets))
    for part in parts[1:]:
        part.pad_left(indent)
    return parts


def _folds(query: str) -> bool:
    """Smart case, as less -i: a search in lower case matches either case."""
    return query == query.lower()


class HelpBody(LineList, can_focus=False):
    """The help text, wrapped to the width, and what the pager's search marks in it."""

    show_cursor = False

    def __init__(self, panel: str, panel_rows, global_rows, problem: str | None = None) -> None:
        super().__init__(id="help-body")
        self.panel, self.panel_rows, self.global_rows = panel, panel_rows, global_rows
        self.problem = problem
        self._query = ""
        self._hits: list[int] = []  # rows with a match, top to bottom
        self._current = -1  # the row of the match n/N last went to

    def build(self, width: int) -> list[Item]:
        lines: list[Text] = [Text(f"context: {self.panel} panel", style="bold"), Text("")]
        if self.problem:  # what the status bar's ⚠ markers count, said in full (a line each)
            lines[:0] = [*(t for p in self.problem.split("\n")
                           for t in wrap(Text(p, style="bold red"), width, 2)), Text("")]
        extra = ROSTER_ROWS if self.panel == "roster" else []
        keyw = max([cell_len(k) for k, _ in self.panel_rows + self.global_rows + extra
                    + TERMINAL_ROWS] + [6]) + 2
        beside = width - 2 - keyw >= MIN_DESC
        def section(title: str, rows) -> None:
            lines.append(Text(title, style="bold underline"))
            if not rows:
                lines.append(Text("  (none)", style="dim"))
            for k, desc in rows:
                t = Text("  ")
                t.append(k + " " * max(0, keyw - cell_len(k)), style="bold cyan")
                if beside:
                    t.append(desc)
                    lines.extend(wrap(t, width, 2 + keyw))
                else:
                    lines.append(t)
                    lines.extend(wrap(Text("    " + desc), width, 4))
            lines.append(Text(""))
        section(f"{self.panel} keys", self.panel_rows)
        if extra:
            section("roster rows (from each agent's event frames)", extra)
        section("global keys", self.global_rows)
        section("terminal panes (attach, peek, tile)", TERMINAL_ROWS)
        lines.extend(wrap(Text("keys are remappable: keymap.toml in $COTAL_HOME or ~/.cotal "
                               "(binding id = \"key\"; this pager's ids are help.*)",
                               style="dim italic"), width))
        # which cotal this is (`cotal --version`), kept one line where it fits
        lines.extend(wrap(Text(version_line(), style="dim"), width))
        return [("help", lines)]

    def on_mount(self) -> None:
        super().on_mount()
        if self.size.width:  # else the first resize builds it, at the width it will have
            self.rebuild()

    def rebuild(self) -> None:
        super().rebuild()
        if self._query:  # the rows moved with the width: find the matches again
            self._hits = self._rows_matching(self._query)
            self._current = -1

    # -- what is on screen (tests and the footer read these) -----------------------------

    @property
    def top(self) -> int:
        """The first row shown."""
        return round(self.scroll_offset.y)

    @property
    def page_height(self) -> int:
        return max(1, self.scrollable_content_region.height)

    @property
    def line_count(self) -> int:
        return int(self.virtual_size.height)

    @property
    def at_end(self) -> bool:
        return self.top + self.page_height >= self.line_count

    def visible_lines(self) -> list[str]:
        """The plain text of the rows on screen now."""
        return self.line_texts()[self.top:self.top + self.page_height]

    # -- moving ----------------------------------------------------------------------------

    def go(self, row: int) -> None:
        """Put ``row`` at the top (clamped: the last page ends on the last row)."""
        self.scroll_to(y=max(0, min(row, self.max_scroll_y)), animate=False, force=True)

    def by(self, rows: int) -> None:
        self.go(self.top + rows)

    # -- search ----------------------------------------------------------------------------

    @property
    def search_text(self) -> str:
        """The search kept (or being typed)."""
        return self._query

    @property
    def match_rows(self) -> list[int]:
        return list(self._hits)

    @property
    def current_match(self) -> int | None:
        """The row of the match the search or n/N last went to (marked bold), or None."""
        return self._current if self._current >= 0 else None

    def _rows_matching(self, query: str) -> list[int]:
        fold = _folds(query)
        q = query.lower() if fold else query
        return [i for i, s in enumerate(self.line_texts()) if q in (s.lower() if fold else s)]

    def set_query(self, query: str, from_row: int) -> bool:
        """Mark ``query`` everywhere and go to its first match at or below ``from_row``; False
        when nothing matches there (the page stays at ``from_row``)."""
        self._query = query
        self._hits = self._rows_matching(query) if query else []
        self._current = -1
        self._cache.clear()
        self.refresh()
        below = [r for r in self._hits if r >= from_row]
        if not below:
            self.go(from_row)
            return not query
        self._current = below[0]
        self.go(below[0])
        return True

    def find(self, delta: int) -> bool:
        """Go to the next (1) or previous (-1) match after the last one gone to (or the top row
        shown); False when there is none that way (as less: no wrap)."""
        shown = self.top <= self._current < self.top + self.page_height
        here = self._current if shown else self.top - 1 if delta > 0 else \
            self.top + self.page_height
        way = [r for r in self._hits if (r > here if delta > 0 else r < here)]
        if not way:
            return False
        self._current = way[0] if delta > 0 else way[-1]
        self._cache.clear()
        self.refresh()
        if not (self.top <= self._current < self.top + self.page_height):
            self.go(self._current)
        return True

    def render_line(self, y: int) -> Strip:
        row = self.top + y
        if not self._query or row not in self._hits or row >= len(self._lines):
            return super().render_line(y)
        text = self._lines[row][0].copy()
        fold = _folds(self._query)
        plain = text.plain.lower() if fold else text.plain
        look = Style(reverse=True, bold=row == self._current, underline=row != self._current)
        for m in re.finditer(re.escape(self._query.lower() if fold else self._query), plain):
            text.stylize(look, m.start(), m.end())
        return self._strip(text, None, self.size.width, self._paint_base or self.rich_style)


class HelpScreen(ModalScreen[None]):
    """``problem``: a line said above the keys (the internal errors, when there are any).

    The search prompt is the footer line, as in less, and nothing ever takes focus: every key
    reaches this screen in the order typed, so the letters typed right behind ``/`` are the
    search's (Textual forwards a key to what had focus when it arrived; a prompt widget that
    took focus would see some of them after the Enter that followed)."""

    CSS_PATH = "help.tcss"
    AUTO_FOCUS = ""  # nothing focused, ever (above)
    BINDINGS = [
        Binding("j,down", "line(1)", "a line down", id="help.down", show=False),
        Binding("k,up", "line(-1)", "a line up", id="help.up", show=False),
        Binding("space,pagedown,f", "page(1)", "a page down", id="help.page-down", show=False),
        Binding("b,pageup", "page(-1)", "a page up", id="help.page-up", show=False),
        Binding("d", "half(1)", "half a page down", id="help.half-down", show=False),
        Binding("u", "half(-1)", "half a page up", id="help.half-up", show=False),
        Binding("g,home", "edge(0)", "the top", id="help.top", show=False),
        Binding("G,end", "edge(1)", "the end", id="help.end", show=False),
        Binding("slash", "search", "search", id="help.search", show=False),
        Binding("n", "find(1)", "next match", id="help.next", show=False),
        Binding("N", "find(-1)", "previous match", id="help.prev", show=False),
        Binding("q,escape", "close", "close (Esc: the search prompt first)", id="help.close",
                show=False),
    ]
    PROMPT_MAX = 200  # characters of a search; more are not taken

    def __init__(self, panel: str, panel_rows, global_rows, problem: str | None = None) -> None:
        super().__init__()
        self._args = (PANEL_NAMES.get(panel, panel), panel_rows, global_rows, problem)
        self._said: str | None = None  # a message in the footer until the next move
        self._typing: str | None = None  # the search being typed (None: no prompt)
        self._before: tuple[str, int] = ("", 0)  # the kept search and top row, for Esc
        self._hints = "/ search · q close"
        self._actions: dict[str, str] = {}  # key -> action of the help.* bindings (keymap'd)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-frame") as frame:
            frame.border_title = "cotal console - help"
            yield HelpBody(*self._args)
            yield Static("", id="help-footer", markup=False)

    def on_mount(self) -> None:
        self._actions = {k: a.binding.action for k, a in self.active_bindings.items()
                         if a.node is self and (a.binding.id or "").startswith("help.")}
        self._hints = f"{self._key_of('help.search', '/')} search · " \
                      f"{self._key_of('help.close', 'q')} close"
        self.watch(self.body, "scroll_y", lambda: self._footer(), init=False)
        self.watch(self.body, "virtual_size", lambda: self._footer(), init=False)
        self._footer()

    def on_resize(self) -> None:
        self.call_after_refresh(self._footer)  # a taller page moves "lines a-b" with no scroll

    def _key_of(self, binding_id: str, default: str) -> str:
        """The key a binding has after the keymap (its shortest), as the footer names it."""
        keys = [self.app.get_key_display(a.binding) for a in self.active_bindings.values()
                if a.binding.id == binding_id]
        return min(keys, key=len) if keys else default

    @property
    def body(self) -> HelpBody:
        return self.query_one(HelpBody)

    @property
    def prompt(self) -> str | None:
        """The search being typed at the prompt, or None when no prompt is open."""
        return self._typing

    @property
    def footer_text(self) -> str:
        """The footer line as shown (tests read it)."""
        return str(self.query_one("#help-footer", Static).render())

    def _footer(self) -> None:
        foot = self.query_one("#help-footer", Static)
        if self._typing is not None:
            foot.update(Text(f"/{self._typing}█" if self._typing else
                             "/█  search: enter keeps, esc cancels", style="bold"))
            return
        body = self.body
        n = body.line_count
        first, last = (min(n, body.top + 1), min(n, body.top + body.page_height))
        where = "END" if body.at_end else f"{last * 100 // max(1, n)}%"
        line = f"help · lines {first}-{last}/{n} · {where} · {self._hints}"
        if self._said:
            line = f"{self._said} · {line}"
        foot.update(Text(line, style="bold reverse" if self._said else "dim"))

    def _move(self) -> None:
        self._said = None
        self._footer()

    # -- keys ------------------------------------------------------------------------------

    def action_line(self, delta: int) -> None:
        self.body.by(delta)
        self._move()

    def action_page(self, direction: int) -> None:
        self.body.by(direction * self.body.page_height)
        self._move()

    def action_half(self, direction: int) -> None:
        self.body.by(direction * max(1, self.body.page_height // 2))
        self._move()

    def action_edge(self, end: int) -> None:
        self.body.go(self.body.line_count if end else 0)
        self._move()

    async def on_key(self, event: events.Key) -> None:
        """At the prompt every key is the search's (Enter keeps, Esc cancels, Backspace
        deletes, the rest do nothing). The pager's own bindings run here too, as each key
        arrives: a binding run after the key bubbled up to the App would come after the search
        typed behind it (``g/copy⏎`` would search, then go to the top)."""
        if self._typing is not None:
            event.stop()
            event.prevent_default()
            if event.key == "enter":
                self._keep()
            elif event.key == "escape":
                self._cancel()
            elif event.key in ("backspace", "ctrl+h"):
                self._type(self._typing[:-1])
            elif event.is_printable and event.character:
                self._type(self._typing + event.character)
        elif event.key in self._actions:
            event.stop()
            event.prevent_default()
            await self.run_action(self._actions[event.key])

    def on_paste(self, event: events.Paste) -> None:
        if self._typing is not None:
            event.stop()
            self._type(self._typing + " ".join(event.text.split()))

    def _type(self, text: str) -> None:
        self._typing = text[:self.PROMPT_MAX]
        self.body.set_query(self._typing, self._before[1])  # marked and gone to as typed
        self._footer()

    def action_search(self) -> None:
        self._before = (self.body.search_text, self.body.top)
        self._said = None
        self._typing = ""
        self._footer()

    def _keep(self) -> None:
        text, self._typing = self._typing or "", None
        if not text:  # an empty search keeps the one before (as less's / Enter)
            self.body.set_query(self._before[0], self.body.top)
            self._move()
            return
        found = self.body.set_query(text, self._before[1])
        self._said = None if found else f"Pattern not found: {text[:40]}"
        self._footer()

    def _cancel(self) -> None:
        """Esc at the prompt: the search being typed goes, the kept one and the page come back."""
        self._typing = None
        query, top = self._before
        self.body.set_query(query, top)
        self.body.go(top)
        self._move()

    def action_find(self, delta: int) -> None:
        if not self.body.search_text:
            self._said = "no search pattern: / searches"
        elif not self.body.find(delta):
            self._said = f"Pattern not found {'below' if delta > 0 else 'above'}: " \
                         f"{self.body.search_text[:40]}"
        else:
            self._said = None
        self._footer()

    def action_close(self) -> None:
        if self._typing is not None:  # the prompt's own Esc comes first (on_key)
            self._cancel()
            return
        if self.is_active:  # not the second of two keys queued here: one dismiss
            self.dismiss()
