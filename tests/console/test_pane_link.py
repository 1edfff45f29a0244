"""One typed link between a terminal pane and its session, both ways: every pane host binds its
pane to the link that serves it, keys and parsed-byte credit reach that link with no screen in
between."""

from __future__ import annotations

from conftest import until
from textual.app import App, ComposeResult
from textual.widget import Widget

from cotal_tui.screens.attach import AttachScreen
from cotal_tui.screens.tile import TileScreen
from cotal_tui.seats import SeatSessions
from widgets.terminal_pane import TerminalPane


def _no_mesh():
    raise AssertionError("these panes never connect")


SESSIONS = SeatSessions("demo", _no_mesh, default_size=(80, 24))


def test_every_host_binds_its_pane_to_its_link():
    attach = AttachScreen(SESSIONS, "alice", size=(80, 24))
    assert attach.pane.link is attach.link
    peek = AttachScreen(SESSIONS, "alice", peek=True)
    assert peek.pane.link is peek.link and not peek.pane.interactive
    tile = TileScreen(SESSIONS, ["alice", "bob"])
    assert [p.link for p in tile.panes] == [tile.links[p] for p in tile.panes]
    assert len({id(link) for link in tile.links.values()}) == 2
    assert TerminalPane(20, 4).link is None  # a replay's pane: input goes nowhere


class Recorder:
    """A link that keeps what the pane hands it."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.credit = 0

    def send(self, data: bytes) -> None:
        self.sent.append(data)

    def parsed(self, nbytes: int) -> None:
        self.credit += nbytes


class Boxed(Widget):
    """A container between the pane and the screen (as the tile grid is): nothing forwards."""

    def __init__(self, pane: TerminalPane) -> None:
        super().__init__()
        self.pane = pane

    def compose(self) -> ComposeResult:
        yield self.pane


class BoxApp(App):
    def __init__(self, pane: TerminalPane) -> None:
        super().__init__()
        self.pane = pane

    def compose(self) -> ComposeResult:
        yield Boxed(self.pane)

    def on_mount(self) -> None:
        self.pane.focus()


async def test_keys_and_credit_travel_through_the_link_in_order():
    pane = TerminalPane(20, 4, interactive=True)
    link = Recorder()
    pane.bind_link(link)
    async with BoxApp(pane).run_test(size=(20, 6)) as pilot:
        await pilot.press("a", "b", "enter", "up")
        await until(pilot, lambda: len(link.sent) == 4)
        assert link.sent == [b"a", b"b", b"\r", b"\x1b[A"]
        pane.queue(b"hello\r\n" * 1000)
        await until(pilot, lambda: pane.pending_bytes == 0)
        assert link.credit == 7000  # every queued byte parsed is credited, once

