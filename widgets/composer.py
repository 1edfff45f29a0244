"""The operator's composer: a multi-line box above the status bar that sends on Enter.

Enter sends, Ctrl-J (or Alt/Shift-Enter where the terminal tells them apart) inserts a newline,
Esc (or Ctrl-C) puts the box away. Each target keeps its own draft, so switching tabs or
closing the box never loses typed text; a draft goes only when the screen reports its message
acknowledged (:meth:`Composer.delivered`). A send that failed leaves the draft as it was and
its reason (:meth:`Composer.failed`), shown above the text until the next attempt.
The widget knows nothing of the mesh: it posts ``Composer.Submitted`` with the target it was
opened for, and the screen decides what that means.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static, TextArea

from meshview.act.send import SendKind
from widgets.presentation import safe

NEWLINE_KEYS = ("ctrl+j", "alt+enter", "shift+enter")


@dataclass(frozen=True)
class SendTarget:
    """Where a composed message goes (a :class:`meshview.act.participant.Send` without its text,
    plus a label). ``kind``: channel, dm or ask; a reply is one of them with ``reply_to``."""

    kind: SendKind
    label: str  # shown to the operator: "#general", "@bram", "@reviewer (anycast)"
    channel: str | None = None
    to: str | None = None  # a principal id for DMs and DM replies
    role: str | None = None
    reply_to: str | None = None  # the id of the message answered
    context_id: str | None = None
    queue: bool = False  # an ask meant for a future holder of the role

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.channel or self.to or self.role}:{self.reply_to or ''}"


class _Box(TextArea):
    """A TextArea whose Enter sends and whose Esc leaves."""

    async def _on_key(self, event: events.Key) -> None:
        composer = self.parent
        if not isinstance(composer, Composer):
            await super()._on_key(event)
            return
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            composer.submit()
        elif event.key in NEWLINE_KEYS:
            event.stop()
            event.prevent_default()
            self.insert("\n")
        elif event.key == "escape":
            event.stop()
            event.prevent_default()
            composer.cancel()
        else:
            await super()._on_key(event)


class Composer(Vertical):
    DEFAULT_CSS = """
    Composer {
        display: none;
        height: auto;
        max-height: 10;
        border-top: hkey $accent;
        background: $panel;
    }
    Composer > #composer-head {
        height: 1;
        padding: 0 1;
        color: $text-muted;
    }
    Composer > #composer-note {
        display: none;
        height: auto;
        max-height: 2;
        padding: 0 1;
        color: $error;
    }
    Composer > _Box, Composer > _Box:focus {
        height: auto;
        min-height: 1;
        max-height: 8;
        border: none;
        padding: 0 1;
    }
    """

    class Submitted(Message):
        def __init__(self, target: SendTarget, text: str) -> None:
            super().__init__()
            self.target, self.text = target, text

    class Closed(Message):
        """The box was put away (Esc or Ctrl-C); the draft is kept."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.target: SendTarget | None = None
        self.drafts: dict[str, str] = {}
        self.notes: dict[str, str] = {}  # why a target's last send failed

    def compose(self) -> ComposeResult:
        yield Static("", id="composer-head")
        yield Static("", id="composer-note")
        yield _Box("", id="composer-text", soft_wrap=True, show_line_numbers=False,
                   tab_behavior="focus")

    @property
    def box(self) -> TextArea:
        return self.query_one(_Box)

    @property
    def is_open(self) -> bool:
        return bool(self.display)

    def open(self, target: SendTarget) -> None:
        """Show the box for ``target`` with that target's draft."""
        self._keep_draft()
        self.target = target
        self.query_one("#composer-head", Static).update(
            f"→ {safe(target.label)}   enter send · ctrl+j newline · esc close (draft kept)")
        self._show_note()
        box = self.box
        box.text = self.drafts.get(target.key, "")
        box.move_cursor(box.document.end)
        self.display = True
        box.focus()

    def submit(self) -> None:
        """Hand the text over for sending. It stays the target's draft until the screen says
        it was acknowledged, so a failure (or anything in between) never loses it."""
        target, text = self.target, self.box.text
        if target is None or not text.strip():
            return
        self.drafts[target.key] = text
        self.notes.pop(target.key, None)
        self.target = None  # the box is put away; reopening reads the kept draft
        self.box.text = ""
        self.display = False
        self.post_message(self.Submitted(target, text))

    def cancel(self) -> None:
        self._keep_draft()
        self.display = False
        self.post_message(self.Closed())

    def delivered(self, target: SendTarget, text: str) -> None:
        """``text`` reached the broker: the draft goes, unless it was edited since."""
        if self.drafts.get(target.key) == text:
            self.drafts.pop(target.key, None)
        self.notes.pop(target.key, None)

    def failed(self, target: SendTarget, text: str, why: str) -> None:
        """``text`` was not acknowledged: it stays the target's draft (a newer edit wins) and
        ``why`` is shown above it until the next attempt."""
        self.drafts.setdefault(target.key, text)
        self.notes[target.key] = why
        if self.is_open and self.target is not None and self.target.key == target.key:
            if not self.box.text:
                self.box.text = self.drafts[target.key]
            self._show_note()

    def _show_note(self) -> None:
        note = self.notes.get(self.target.key) if self.target is not None else None
        w = self.query_one("#composer-note", Static)
        w.update(f"not sent: {safe(note)}" if note else "")
        w.display = bool(note)

    def _keep_draft(self) -> None:
        if self.target is not None:
            text = self.box.text
            if text:
                self.drafts[self.target.key] = text
            else:
                self.drafts.pop(self.target.key, None)
