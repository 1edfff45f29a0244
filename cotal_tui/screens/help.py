"""``?`` help, generated from the live bindings: the focused panel's keys, then the global
ones. Any key closes it. Remapped keys (keymap file) show as remapped."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.screen import ModalScreen, Screen

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


class HelpBody(LineList):
    show_cursor = False

    def __init__(self, panel: str, panel_rows, global_rows, problem: str | None = None) -> None:
        super().__init__(id="help-body")
        self.panel, self.panel_rows, self.global_rows = panel, panel_rows, global_rows
        self.problem = problem

    def build(self, width: int) -> list[Item]:
        lines: list[Text] = [Text(f"context: {self.panel} panel", style="bold"), Text("")]
        if self.problem:  # what the status bar's ⚠ markers count, said in full (a line each)
            lines[:0] = [*(Text(p, style="bold red") for p in self.problem.split("\n")), Text("")]
        keyw = max([len(k) for k, _ in self.panel_rows + self.global_rows] + [6]) + 2
        def section(title: str, rows) -> None:
            lines.append(Text(title, style="bold underline"))
            if not rows:
                lines.append(Text("  (none)", style="dim"))
            for k, desc in rows:
                t = Text("  ")
                t.append(k.ljust(keyw), style="bold cyan")
                t.append(desc)
                lines.append(t)
            lines.append(Text(""))
        section(f"{self.panel} keys", self.panel_rows)
        if self.panel == "roster":
            section("roster rows (from each agent's event frames)", ROSTER_ROWS)
        section("global keys", self.global_rows)
        section("terminal panes (attach, peek, tile)", TERMINAL_ROWS)
        lines.append(Text("keys are remappable: keymap.toml in $COTAL_HOME or ~/.cotal "
                          "(binding id = \"key\")", style="dim italic"))
        lines.append(Text(version_line(), style="dim"))  # which cotal this is (`cotal --version`)
        return [("help", lines)]

    def on_mount(self) -> None:
        self.rebuild()


class HelpScreen(ModalScreen[None]):
    """``problem``: a line said above the keys (the internal errors, when there are any)."""

    CSS_PATH = "help.tcss"

    def __init__(self, panel: str, panel_rows, global_rows, problem: str | None = None) -> None:
        super().__init__()
        self._args = (PANEL_NAMES.get(panel, panel), panel_rows, global_rows, problem)

    def compose(self) -> ComposeResult:
        body = HelpBody(*self._args)
        body.border_title = "cotal console - help"
        body.border_subtitle = "any key closes"
        yield body

    def on_key(self, event: events.Key) -> None:
        if event.key not in ("ctrl+c", "ctrl+q"):
            if self.is_active:  # not the second of two keys queued here: one dismiss
                self.dismiss()
            event.stop()
            event.prevent_default()
