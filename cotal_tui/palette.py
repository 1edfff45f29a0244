"""The ``:`` palette's write verbs and its Tab completion.

``msg [#ch] text`` posts (mentions extracted), ``dm @agent [text]`` DMs an agent (no text opens
the composer on that DM), ``call @agent`` sends "👋 ping" and opens the DM lens, ``ask @role text``
asks one holder of a role (anycast). Endpoints are refused before anything is sent; a read-only
console lists the verbs as unavailable with the reason. Tab completes the word under the
cursor: verbs, ``#channels``, ``@agents`` and ``@roles`` from the live snapshot.
"""

from __future__ import annotations

from typing import Any, Callable

from textual.binding import Binding
from textual.command import CommandInput, CommandPalette, Hit

from cotal_tui.screens.compose import ask_target, channel_target, dm_target

WRITE_VERBS = {
    "msg": "msg [#ch] text - post to a channel (the active tab, else #general)",
    "dm": "dm @agent [text] - direct message an agent (no text: open the composer)",
    "call": "call @agent - send 👋 ping and open the DM lens",
    "ask": "ask @role text - anycast: one holder of the role answers",
}
PING = "👋 ping"


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
    why = screen._refusal()
    if why is not None:
        return refuse(f"{verb}: unavailable - {why}")
    words = rest.split(" ") if rest else []
    snap = screen.snap
    peers = list(snap.peers) if snap is not None else []
    if verb == "msg":
        channel = None
        if words and words[0].startswith("#"):
            channel, words = words[0][1:], words[1:]
        channel = channel or screen.query_one("#tabs").active or "general"
        text = " ".join(words).strip()
        if not text:
            return refuse(f"msg: type the text to post to #{channel}")
        t = channel_target(channel)
        return Hit(1.0, q, lambda: screen.send_to(t, text), help=f"post to #{channel}")
    if verb in ("dm", "call"):
        if not words or not words[0]:
            return refuse(f"{verb}: name an agent: {verb} @name")
        name = words[0].removeprefix("@")
        matches = [p for p in peers if p.name == name or p.id == name]
        if not matches:
            return refuse(f"{verb}: no agent named {name}")
        peer = matches[0]
        if peer.kind != "agent":
            return refuse(f"{verb}: {peer.name} is an endpoint, not an agent: DMs go to agents only")
        t = dm_target(peer.id, peer.name)
        if verb == "call":
            def call() -> None:
                screen.send_to(t, PING)
                screen.action_lens("dms")
            return Hit(1.0, q, call, help=f"ping {peer.name} and open the DM lens")
        text = " ".join(words[1:]).strip()
        if not text:
            return Hit(1.0, q, lambda: screen.open_composer(t), help=f"compose a DM to {peer.name}")
        return Hit(1.0, q, lambda: screen.send_to(t, text), help=f"DM {peer.name}")
    # ask (``ask --queue @role text``: for a future holder when no live agent holds it)
    queue = bool(words) and words[0] == "--queue"
    words = words[1:] if queue else words
    if not words or not words[0]:
        return refuse("ask: name a role: ask @role text")
    role = words[0].removeprefix("@")
    text = " ".join(words[1:]).strip()
    if not text:
        return refuse(f"ask: type the question for @{role}")
    known = {p.role for p in peers if p.role}
    t = ask_target(role, queue=queue)
    hint = f"anycast to @{role}" + ("" if role in known else " (no agent holds it right now)"
                                    if queue else " - refused: no agent holds it (ask --queue)")
    return Hit(1.0, q, lambda: screen.send_to(t, text), help=hint)


def candidates(screen: Any, verbs: list[str]) -> list[str]:
    """Everything Tab can complete to: verbs, #channels, @agents, @roles (sorted, unique)."""
    out = set(verbs)
    snap = getattr(screen, "snap", None)
    if snap is not None:
        out.update("#" + c.name for c in snap.channels)
        for p in snap.peers:
            out.add("@" + p.name)
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

    def action_complete(self) -> None:
        box = self.query_one(CommandInput)
        console = getattr(self.app, "console_screen", lambda: None)()
        from cotal_tui.screens.control import CONTROL_VERBS

        verbs = list(WRITE_VERBS) + list(CONTROL_VERBS) + [
            "attach", "peek", "tile", "dms", "topo", "needs-you", "search", "lifecycle", "help",
            "quit", "spaces", "record", "notify"]
        new = complete(box.value, candidates(console, verbs))
        if new != box.value:
            box.value = new
            box.cursor_position = len(new)
