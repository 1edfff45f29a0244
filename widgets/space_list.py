"""The space picker's list: ``space   N agents · N ch · N msgs`` and ``⨯ N stranded`` when
seats run with no presence."""

from __future__ import annotations

from rich.text import Text

from meshview.observe.spaces import SpaceInfo
from widgets.line_list import Item, LineList
from widgets.presentation import look_of, safe


class SpaceList(LineList):
    empty_text = "no spaces found on this broker (r refreshes)"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.spaces: list[SpaceInfo] = []

    def set_spaces(self, spaces: list[SpaceInfo]) -> None:
        self.spaces = list(spaces)
        self.rebuild()

    def build(self, width: int) -> list[Item]:
        namew = max([len(s.space) for s in self.spaces] + [8]) + 3
        items: list[Item] = []
        look = look_of(self)
        for s in self.spaces:
            t = Text(" ")
            t.append(safe(s.space, 60).ljust(namew), style="bold")
            t.append(f"{s.agents} agents", style=look.working if s.agents else "dim")
            t.append(" · ", style="dim")
            t.append(f"{s.channels} ch")
            t.append(" · ", style="dim")
            t.append(f"{s.messages} msgs", style="dim")
            if s.stranded:  # seats running with no presence: stuck agents (``cotal ps`` says which)
                t.append(" · ", style="dim")
                t.append(f"⨯ {s.stranded} stranded", style=look.error)
            t.truncate(width, overflow="ellipsis")
            items.append((s.space, [t]))
        return items
