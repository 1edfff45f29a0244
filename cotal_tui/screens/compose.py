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

from typing import Any

from textual import work

from meshview.snapshot import FeedEntry, Peer
from widgets.composer import Composer, Target


def channel_target(channel: str, *, reply_to: FeedEntry | None = None) -> Target:
    ch = channel.removeprefix("#")
    if reply_to is None:
        return Target("channel", f"#{ch}", channel=ch)
    return Target("channel", f"#{ch} · reply to {reply_to.from_name}", channel=ch,
                  reply_to=reply_to.id, context_id=reply_to.context_id)


def dm_target(pid: str, name: str, *, reply_to: FeedEntry | None = None) -> Target:
    if reply_to is None:
        return Target("dm", f"@{name} (DM)", to=pid)
    return Target("dm", f"@{name} (DM) · reply", to=pid, reply_to=reply_to.id,
                  context_id=reply_to.context_id)


def ask_target(role: str, *, queue: bool = False) -> Target:
    r = role.removeprefix("@")
    how = "queued for a future holder" if queue else "one holder of the role"
    return Target("ask", f"@{r} (anycast: {how})", role=r, queue=queue)


def reply_target(e: FeedEntry, me: str | None) -> Target | None:
    """Where ``r`` on feed row ``e`` replies: its channel thread, else a DM to its sender (or,
    for the operator's own DM, to its recipient). None for rows that cannot be answered."""
    if e.kind == "channel" and e.channel:
        return channel_target(e.channel, reply_to=e)
    if e.kind in ("dm", "anycast"):
        if me is not None and e.from_id == me and e.to_ids:
            return dm_target(e.to_ids[0], e.to_names[0] if e.to_names else e.to_ids[0],
                             reply_to=e)
        return dm_target(e.from_id, e.from_name, reply_to=e)
    return None


class ComposeKeys:
    """Mixed into the console screen (which has ``session``, ``snap``, ``query_one``)."""

    session: Any

    @property
    def operator(self) -> Any:
        return getattr(self.session, "operator", None)

    def _refusal(self) -> str | None:
        op = self.operator
        if op is None:
            return "sending is not available in this console"
        return op.refusal()

    def open_composer(self, target: Target) -> None:
        if self._refused():
            return
        self.query_one(Composer).open(target)  # type: ignore[attr-defined]

    def _focused_peer(self) -> Peer | None:
        from widgets.needs_you import NeedsYouRail
        from widgets.roster import Roster

        focused = self.focused  # type: ignore[attr-defined]
        snap = self.snap  # type: ignore[attr-defined]
        if snap is None or not isinstance(focused, (Roster, NeedsYouRail)):
            return None
        return next((p for p in snap.peers if p.id == focused.cursor_key), None)

    def _refused(self) -> bool:
        why = self._refusal()
        if why is not None:
            self.app.notify_line(why, True)  # type: ignore[attr-defined]
        return why is not None

    def action_compose(self) -> None:
        if self._refused():
            return
        peer = self._focused_peer()
        if peer is not None:
            self._compose_dm(peer)
            return
        tab = self.query_one("#tabs").active  # type: ignore[attr-defined]
        self.open_composer(channel_target(tab or "general"))

    def _compose_dm(self, peer: Peer, *, reply_to: FeedEntry | None = None) -> None:
        if peer.kind != "agent":
            self.app.notify_line(  # type: ignore[attr-defined]
                f"{peer.name} is an endpoint, not an agent: DMs go to agents only", True)
            return
        self.open_composer(dm_target(peer.id, peer.name, reply_to=reply_to))

    def action_reply(self) -> None:
        from widgets.feed import FeedView

        if self._refused():
            return
        peer = self._focused_peer()
        if peer is not None:  # a NEEDS-YOU (or roster) row: answer that agent
            self._compose_dm(peer)
            return
        focused = self.focused  # type: ignore[attr-defined]
        if not isinstance(focused, FeedView):
            self.app.notify_line("r replies to a feed row or a waiting agent: focus one first")  # type: ignore[attr-defined]
            return
        entry = focused.selected_entry()
        op = self.operator
        me = op.participant.id if op is not None and op.refusal() is None else None
        target = reply_target(entry, me) if entry is not None else None
        if target is None:
            self.app.notify_line("nothing to reply to on this row")  # type: ignore[attr-defined]
            return
        self.open_composer(target)

    # named handlers (``on_<widget>_<message>``): ``@on`` is not collected from a mixin
    def on_composer_submitted(self, event: Composer.Submitted) -> None:
        self.send_to(event.target, event.text)

    def on_composer_closed(self, event: Composer.Closed) -> None:
        self.focus_back()

    def focus_back(self) -> None:
        """Focus the panel the composer was opened from (the console screen overrides it)."""
        self.query_one("#feed").focus()  # type: ignore[attr-defined]

    @work(group="send", exit_on_error=False)
    async def send_to(self, target: Target, text: str) -> None:
        """Send in the background; the receipt or the one-sentence refusal lands on the
        status line. A failed send's text becomes the target's draft again."""
        from cotal_tui.operator import SendRefused

        self.focus_back()
        op = self.operator
        if op is None:
            self.app.notify_line("sending is not available in this console", True)  # type: ignore[attr-defined]
            return
        self.app.notify_line(f"sending to {target.label}…")  # type: ignore[attr-defined]
        composer = self.query_one(Composer)  # type: ignore[attr-defined]
        try:
            receipt = await op.send(target.kind, text, channel=target.channel, to=target.to,
                                    role=target.role, reply_to=target.reply_to,
                                    context_id=target.context_id, queue=target.queue,
                                    draft=target.key)
        except SendRefused as e:
            composer.failed(target, text, str(e))
            self.app.notify_line(  # type: ignore[attr-defined]
                f"not sent to {target.label}: {str(e).rstrip('.')}; the draft is kept for "
                "a retry.", True,
                sticky=True)
            return
        composer.delivered(target, text)
        self.app.notify_line(receipt)  # type: ignore[attr-defined]
