"""The console's send keys: ``c`` compose and ``r`` reply, aimed by what has focus.

``c``: on the feed, a post to the active channel tab (``#general`` on ``all``); on a roster row,
a DM to that agent. ``r``: on a feed row, a channel reply in its thread (``replyTo`` +
``contextId``) or, for a DM / anycast row, a DM back to its sender; on a NEEDS-YOU (or roster)
row, a DM answering that agent. The composer keeps a draft per target until the broker has
acknowledged it; a send that fails leaves the exact text as the draft and says why in one
sentence, on the status line until the next key and above the draft until the next attempt.
A retry re-sends the draft's envelope (same ``Nats-Msg-Id``), so it is stored once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work

from cotal_tui.session import ConsoleSession
from cotal_tui.shell import ShellScreen
from meshview.send import Original, Send, reply_send
from meshview.snapshot import FeedEntry, Peer, Snapshot
from widgets.channel_tabs import ChannelTabs
from widgets.composer import Composer, SendTarget

if TYPE_CHECKING:
    from cotal_tui.operator import Operator
    from meshview.replay import ReplayOperator


def channel_target(channel: str, *, reply_to: FeedEntry | None = None,
                   snap: Snapshot | None = None) -> SendTarget:
    ch = channel.removeprefix("#")
    if reply_to is None:
        return SendTarget("channel", f"#{ch}", channel=ch)
    who = snap.sender(reply_to).text() if snap is not None else reply_to.from_name
    return SendTarget("channel", f"#{ch} · reply to {who}", channel=ch,
                      reply_to=reply_to.id, context_id=reply_to.context_id)


def dm_target(pid: str, name: str, *, reply_to: FeedEntry | None = None) -> SendTarget:
    if reply_to is None:
        return SendTarget("dm", f"@{name} (DM)", to=pid)
    return SendTarget("dm", f"@{name} (DM) · reply", to=pid, reply_to=reply_to.id,
                      context_id=reply_to.context_id)


def ask_target(role: str, *, queue: bool = False) -> SendTarget:
    r = role.removeprefix("@")
    how = "queued for a future holder" if queue else "one holder of the role"
    return SendTarget("ask", f"@{r} (anycast: {how})", role=r, queue=queue)


def reply_target(e: FeedEntry, me: str | None, snap: Snapshot | None = None) -> SendTarget | None:
    """Where ``r`` on feed row ``e`` replies, by :func:`meshview.participant.reply_send` (the
    one rule), labelled for the composer. None for rows that cannot be answered."""
    route = reply_send(Original.of_entry(e), "", me)
    if route is None or not route.target:
        return None
    if route.kind == "channel":
        return channel_target(route.target, reply_to=e, snap=snap)
    if snap is not None:  # the roster's label for the peer answered, never the envelope's name
        name = snap.sender(e).text() if route.target == e.from_id else snap.name_of(route.target)
    else:
        name = e.from_name if route.target == e.from_id else (e.to_names[0] if e.to_names
                                                                else route.target)
    return dm_target(route.target, name, reply_to=e)


def send_of(target: SendTarget, text: str) -> Send:
    """What the composer sends for ``text`` typed at ``target``."""
    return Send(target.kind, target.channel or target.to or target.role, text,
                reply_to=target.reply_to, context_id=target.context_id, queue=target.queue)


class ComposeKeys(ShellScreen):
    """The send keys of the console screen (which has ``session``, ``snap`` and the composer)."""

    session: ConsoleSession
    snap: Snapshot | None

    @property
    def operator(self) -> Operator | ReplayOperator | None:
        return self.session.operator

    def refusal(self) -> str | None:
        op = self.operator
        if op is None:
            return "sending is not available in this console"
        return op.refusal()

    def open_composer(self, target: SendTarget) -> None:
        if self._refused():
            return
        self.query_one(Composer).open(target)

    def _focused_peer(self) -> Peer | None:
        from widgets.needs_you import NeedsYouRail
        from widgets.roster import Roster

        focused = self.focused
        snap = self.snap
        if snap is None or not isinstance(focused, (Roster, NeedsYouRail)):
            return None
        return next((p for p in snap.peers if p.id == focused.cursor_key), None)

    def _refused(self) -> bool:
        why = self.refusal()
        if why is not None:
            self.shell.notify_line(why, True)
        return why is not None

    def action_compose(self) -> None:
        if self._refused():
            return
        peer = self._focused_peer()
        if peer is not None:
            self._compose_dm(peer)
            return
        tab = self.query_one("#tabs", ChannelTabs).active
        self.open_composer(channel_target(tab or "general"))

    def _compose_dm(self, peer: Peer, *, reply_to: FeedEntry | None = None) -> None:
        if peer.kind != "agent":
            self.shell.notify_line(
                f"{peer.name} is an endpoint, not an agent: DMs go to agents only", True)
            return
        shown = self.snap.name_of(peer.id) if self.snap is not None else peer.name
        self.open_composer(dm_target(peer.id, shown, reply_to=reply_to))

    def action_reply(self) -> None:
        from widgets.feed import FeedView

        if self._refused():
            return
        peer = self._focused_peer()
        if peer is not None:  # a NEEDS-YOU (or roster) row: answer that agent
            self._compose_dm(peer)
            return
        focused = self.focused
        if not isinstance(focused, FeedView):
            self.shell.notify_line("r replies to a feed row or a waiting agent: focus one first")
            return
        entry = focused.selected_entry()
        op = self.operator
        me = op.participant.id if op is not None and op.refusal() is None else None
        target = reply_target(entry, me, self.snap) if entry is not None else None
        if target is None:
            self.shell.notify_line("nothing to reply to on this row")
            return
        self.open_composer(target)

    # named handlers (``on_<widget>_<message>``)
    def on_composer_submitted(self, event: Composer.Submitted) -> None:
        self.send_to(event.target, event.text)

    def on_composer_closed(self, event: Composer.Closed) -> None:
        self.focus_back()

    def focus_back(self) -> None:
        """Focus the panel the composer was opened from (the console screen overrides it)."""
        self.query_one("#feed").focus()

    @work(group="send", exit_on_error=False)
    async def send_to(self, target: SendTarget, text: str) -> None:
        """Send in the background; the receipt or the one-sentence refusal lands on the
        status line. A failed send's text becomes the target's draft again."""
        from cotal_tui.operator import SendRefused

        self.focus_back()
        op = self.operator
        if op is None:
            self.shell.notify_line("sending is not available in this console", True)
            return
        self.shell.notify_line(f"sending to {target.label}…")
        composer = self.query_one(Composer)
        try:
            receipt = await op.send(send_of(target, text), draft=target.key)
        except SendRefused as e:
            composer.failed(target, text, str(e))
            self.shell.notify_line(
                f"not sent to {target.label}: {str(e).rstrip('.')}; the draft is kept for "
                "a retry.", True,
                sticky=True)
            return
        composer.delivered(target, text)
        self.shell.notify_line(receipt)
