"""The ``:`` palette's write verbs and its Tab completion.

``msg [#ch] text`` posts (mentions extracted), ``dm @agent [text]`` DMs an agent (no text opens
the composer on that DM), ``call @agent`` sends "👋 ping" and opens the DM lens, ``ask @role text``
asks one holder of a role (anycast). Endpoints are refused before anything is sent; a read-only
console lists the verbs as unavailable with the reason. Tab completes the word under the
cursor: verbs, ``#channels``, ``@agents`` and ``@roles`` from the live snapshot.

``theme`` opens Textual's theme list; ``theme <name>`` lists the matching themes (the console's
own two first) and Enter applies one; Tab completes theme names after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from textual import on, work
from textual.binding import Binding
from textual.command import CommandInput, CommandList, CommandPalette, Hit
from textual.css.query import NoMatches
from textual.widgets import Input

from cotal_tui.screens.compose import ask_target, channel_target, dm_target
from cotal_tui.shell import shell_of
from cotal_tui.themes import theme_names
from meshview.model.resolve import ResolveError, candidates_of, resolve
from meshview.model.snapshot import Peer
from widgets.composer import SendTarget

if TYPE_CHECKING:
    from cotal_tui.screens.console import ConsoleScreen

WRITE_VERBS = {
    "msg": "msg [#ch] text - post to a channel (the active tab, else #general)",
    "dm": "dm @agent [text] - direct message an agent (no text: open the composer)",
    "call": "call @agent - send 👋 ping and open the DM lens",
    "ask": "ask @role text - anycast: one holder of the role answers",
}
PING = "👋 ping"
THEME_HELP = "pick the console's colours (theme <name> applies one; --theme / [ui] theme at start)"


@dataclass(frozen=True)
class Write:
    """A write verb parsed: ``text`` for ``target`` (empty: open the composer on it)."""

    target: SendTarget
    text: str
    help: str


def parse_write(verb: str, rest: str, peers: Sequence[Peer], tab: str | None) -> Write | str:
    """What a typed write verb sends (pure), or the one sentence saying why it cannot: DM
    names are looked up on ``peers`` (endpoints refused), ``msg`` without ``#ch`` posts to the
    active ``tab`` (else #general)."""
    words = rest.split(" ") if rest else []
    if verb == "msg":
        channel = None
        if words and words[0].startswith("#"):
            channel, words = words[0][1:], words[1:]
        channel = channel or tab or "general"
        text = " ".join(words).strip()
        if not text:
            return f"msg: type the text to post to #{channel}"
        return Write(channel_target(channel), text, f"post to #{channel}")
    if verb in ("dm", "call"):
        if not words or not words[0]:
            return f"{verb}: name an agent: {verb} @name"
        try:  # one principal or a refusal naming the candidates, never the first look-alike
            peer = resolve(words[0], candidates_of(peers), what="peer",
                           outcome="nothing was sent").item
        except ResolveError as e:
            return f"{verb}: {e}"
        if peer.kind != "agent":
            return f"{verb}: {peer.name} is an endpoint, not an agent: DMs go to agents only"
        t = dm_target(peer.id, peer.name)
        if verb == "call":
            return Write(t, PING, f"ping {peer.name} and open the DM lens")
        text = " ".join(words[1:]).strip()
        return Write(t, text, f"DM {peer.name}" if text else f"compose a DM to {peer.name}")
    # ask (``ask --queue @role text``: for a future holder when no live agent holds it)
    queue = bool(words) and words[0] == "--queue"
    words = words[1:] if queue else words
    if not words or not words[0]:
        return "ask: name a role: ask @role text"
    role = words[0].removeprefix("@")
    text = " ".join(words[1:]).strip()
    if not text:
        return f"ask: type the question for @{role}"
    known = {p.role for p in peers if p.role}
    hint = f"anycast to @{role}" + ("" if role in known else " (no agent holds it right now)"
                                    if queue else " - refused: no agent holds it (ask --queue)")
    return Write(ask_target(role, queue=queue), text, hint)


def write_hit(screen: Any, q: str, notify: Callable[[str, bool], None]) -> Hit | None:
    """One hit for a write verb typed out (``dm @bram hi``), or None when ``q`` is not one.
    The hit sends on selection or says, in one sentence, why it cannot."""
    verb, _, rest = q.partition(" ")
    if verb not in WRITE_VERBS:
        return None

    def refuse(why: str) -> Hit:
        return Hit(0.9, q, lambda: notify(why, True), help=why)

    if screen is None:
        return refuse(f"{verb}: open a space first")
    why = screen.refusal()
    if why is not None:
        return refuse(f"{verb}: unavailable - {why}")
    snap = screen.snap
    peers = list(snap.peers) if snap is not None else []
    tab = screen.query_one("#tabs").active if verb == "msg" else None
    w = parse_write(verb, rest, peers, tab)
    if isinstance(w, str):
        return refuse(w)
    if verb == "call":
        def call() -> None:
            screen.send_to(w.target, w.text)
            screen.action_lens("dms")
        return Hit(1.0, q, call, help=w.help)
    if not w.text:
        return Hit(1.0, q, lambda: screen.open_composer(w.target), help=w.help)
    return Hit(1.0, q, lambda: screen.send_to(w.target, w.text), help=w.help)


def activity_hit(screen: ConsoleScreen | None, q: str, notify: Callable[[str, bool], None]) -> Hit:
    """``activity @agent``: one hit opening that agent's activity lens (resolved by id; a name
    two peers share is refused, naming their ids), or one saying why it cannot."""
    from cotal_tui.screens.activity import activity_target

    def refuse(why: str) -> Hit:
        return Hit(0.9, q, lambda: notify(why, True), help=why)

    if screen is None:
        return refuse("activity: open a space first")
    snap = screen.snap
    target = activity_target(q.partition(" ")[2], list(snap.peers) if snap is not None else [])
    if isinstance(target, Exception):
        return refuse(f"activity: {target}")
    if target is None:
        return Hit(1.0, q, lambda: screen.open_activity(None), help="every agent's activity")
    name = snap.labels.shown(target) if snap is not None else target
    return Hit(1.0, q, lambda: screen.open_activity(target), help=f"{name}'s runs, from its frames")


def theme_hits(app: Any, rest: str, matcher: Callable[[str], Any]) -> list[Hit]:
    """``theme <rest>``: a hit per theme whose name matches (Enter applies it), or one hit
    saying which themes there are when none does."""
    rest = " ".join(rest.split())
    names = theme_names()

    def apply(name: str) -> Callable[[], None]:
        def go() -> None:
            app.theme = name
        return go

    if not rest:
        return [Hit(1.0 - i / 1000, f"theme {n}", apply(n),
                    help="the theme now" if n == app.theme else "apply this theme")
                for i, n in enumerate(names)]
    m = matcher(rest)
    hits = []
    for i, n in enumerate(names):
        score = 1.0 if n == rest else m.match(n)
        if score > 0:
            hits.append(Hit(score - i / 1000, f"theme {n}", apply(n),
                            help="the theme now" if n == app.theme else "apply this theme"))
    if hits:
        return hits
    why = f"theme: no theme named {rest!r}; available: " + ", ".join(names)
    return [Hit(0.5, f"theme {rest}", lambda: shell_of(app).notify_line(why, True), help=why)]


def candidates(screen: ConsoleScreen | None, verbs: list[str]) -> list[str]:
    """Everything Tab can complete to: verbs, #channels, @agents, @roles (sorted, unique).
    A name two peers share also completes to each one's id (``@local.ada-2``): the name alone
    is refused by every verb, the id always works."""
    out = set(verbs)
    snap = screen.snap if screen is not None else None
    if snap is not None:
        out.update("#" + c.name for c in snap.channels)
        labels = snap.labels
        for p in snap.peers:
            out.add("@" + p.name)
            if labels.ambiguous(p.id):
                out.add("@" + p.id)
            if p.role:
                out.add("@" + p.role)
    return sorted(out)


def complete(value: str, words: list[str]) -> str:
    """Complete the last word of ``value`` to the longest common prefix of the candidates
    that start with it (a unique match gets a trailing space)."""
    head, _, last = value.rpartition(" ")
    if not last:
        return value
    hits = [w for w in words if w.startswith(last)]
    if not hits:
        return value
    if len(hits) == 1:
        done = hits[0] + " "
    else:
        done = hits[0]
        for w in hits[1:]:
            while not w.startswith(done):
                done = done[:-1]
    return (head + " " if head else "") + done if len(done) >= len(last) else value


class MeshPalette(CommandPalette):
    """Textual's palette plus Tab completion of the word being typed."""

    BINDINGS = [Binding("tab", "complete", "complete", show=False, priority=True)]

    @work(exclusive=True, group=CommandPalette._GATHER_COMMANDS_GROUP, exit_on_error=False)
    async def _gather_commands(self, search_value: str) -> None:
        """Textual's search, as a worker whose failure is not the App's: a search that starts
        as the palette is taken down finds no list (``NoMatches``) and ends there, counted,
        instead of exiting the console with a traceback."""
        if not self.query(CommandList):
            self.gathers_dropped += 1
            return
        try:
            await CommandPalette._gather_commands.__wrapped__(self, search_value)  # type: ignore[attr-defined]  # Textual's undecorated search
        except NoMatches:  # the list went while it searched: the palette is leaving
            self.gathers_dropped += 1

    gathers_dropped = 0

    @on(Input.Changed)
    def _closing_input(self, event: Input.Changed) -> None:
        """A key typed just after Enter or Esc changes the box of a palette already leaving:
        Textual's search would then look for its list after it was taken down (``NoMatches``).
        Such a change searches nothing (``prevent_default`` stops the base class's handler)."""
        if not self.is_active or not self.query(CommandList):
            event.stop()
            event.prevent_default()

    def action_complete(self) -> None:
        box = self.query_one(CommandInput)
        console = shell_of(self.app).console_screen()
        from cotal_tui.screens.control import CONTROL_VERBS

        verbs = list(WRITE_VERBS) + list(CONTROL_VERBS) + [
            "attach", "peek", "tile", "dms", "topo", "needs-you", "search", "lifecycle", "help",
            "quit", "spaces", "record", "notify", "theme", "activity"]
        words = theme_names() if box.value.startswith("theme ") else candidates(console, verbs)
        new = complete(box.value, words)
        if new != box.value:
            box.value = new
            box.cursor_position = len(new)
