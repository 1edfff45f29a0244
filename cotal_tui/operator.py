"""The console's hands: sends on the operator's behalf, through one lazily made participant.

Nothing here publishes until the operator sends (the participant starts on the first send);
``--read-only`` / ``COTAL_READ_ONLY=1`` refuses every send before anything touches the network,
and the first permission denial from the server turns the console read-only with its reason,
as does an ``--as`` identity that a live agent or another console holds (refused before
anything is published). Every failure is one sentence for the status line; nothing raises into
the UI. A composer draft's envelope is minted once and kept until the broker acknowledges it, so
a retry after a failure carries the same ``Nats-Msg-Id`` and is stored once.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from cotal_tui.actionlog import action_log, send_target
from cotal_tui.errors import CotalError
from meshview.errors import swallowed
from meshview.link.connect import ConnectError, ConnectTarget, prepare

if TYPE_CHECKING:
    from meshview.act.send import Send

TRUTHY = ("1", "true", "yes", "on")


def participant_target(target: ConnectTarget) -> ConnectTarget:
    """The target the operator's participant connects with: the ``operator`` role, minted now
    on a static mesh (the reference's ``cotal send`` profile: post, DM and anycast as
    ``local.<its nkey>``, its own presence key, roster and channel-registry reads), so the
    participant knows its principal before it connects. A credential minted for another role
    (the console's admin view) is dropped; ``--creds``, open and user-auth meshes pass as they
    are. Raises :class:`ConnectError` (one sentence) when nothing can be minted."""
    cred = target.credential
    keep = cred is not None and getattr(cred, "profile", None) == "operator"
    return prepare(dataclasses.replace(target, role="operator", credential=cred if keep else None))


def read_only_from_args(args: argparse.Namespace) -> str | None:
    """Why a command started with ``args`` may not send (``--read-only``, where the command
    has it, or ``COTAL_READ_ONLY``), or None."""
    if getattr(args, "read_only", False):
        return "started with --read-only"
    if os.environ.get("COTAL_READ_ONLY", "").strip().lower() in TRUTHY:
        return "COTAL_READ_ONLY is set"
    return None


@dataclass
class _Pending:
    """A draft's envelope, minted on its first attempt and kept until acknowledged."""

    message: Any
    texts: set[str] = field(default_factory=set)  # every text sent under this id
    in_flight: bool = False


class Operator:
    """Sends for one space's console. ``roster`` returns the live peers (for DM vetting)."""

    def __init__(self, target: ConnectTarget, space: str, *, name: str | None,
                 read_only: str | None, roster: Callable[[], Any]) -> None:
        self.target = dataclasses.replace(target, space=space)
        self.name = name
        self.read_only = read_only  # the reason, when sends are refused
        self.identity_taken: str | None = None  # our principal is a live peer's: the sentence
        self.roster = roster
        self._participant: Any = None
        self._pending: dict[str, _Pending] = {}
        self.log = action_log("console")  # every send, as cotal_tui/actionlog.py keeps them

    def refusal(self) -> str | None:
        """Why nothing can be sent now (read-only, or our principal held by a live peer on
        the roster), or None. Pure: nothing touches the network."""
        if self.read_only is not None:
            return f"read-only - {self.read_only}; nothing is sent"
        if self.identity_taken is None:
            try:
                p = self.participant
                holder = p.held_by(self.roster())
            except Exception:  # noqa: BLE001 - the send itself will say what is wrong [counted: COTAL_LOG]
                swallowed("cotal_tui.operator:Operator.refusal")
                return None
            if holder is not None:
                from meshview.act.participant import taken_sentence

                self.identity_taken = taken_sentence(p.id, holder)
        if self.identity_taken is not None:
            return f"read-only - {self.identity_taken}"
        return None

    @property
    def participant(self) -> Any:
        """Made on first use; on a static mesh this mints the operator's credential (raises
        :class:`ConnectError` when the mesh's seed cannot be read)."""
        if self._participant is None:
            from meshview.act.participant import Participant

            self._participant = Participant(
                participant_target(self.target), name=self.name, read_only=self.read_only is not None,
                read_only_reason=self.read_only or "", roster=self.roster)
        return self._participant

    @property
    def on_roster(self) -> bool:
        """The operator's presence peer is up (it appears on the roster)."""
        return self._participant is not None and self._participant.active

    def pending_id(self, draft: str) -> str | None:
        """The message id a draft's next attempt will carry (minted on its first attempt)."""
        pend = self._pending.get(draft)
        return pend.message.id if pend is not None else None

    async def send(self, send: Send, *, draft: str | None = None) -> str:
        """Send one message; returns a one-line receipt. Raises ``SendRefused`` (one
        sentence) on any failure.

        ``draft`` names the composer draft this text comes from: its envelope (and so its
        ``Nats-Msg-Id``) is minted on the first attempt and reused by every retry until the
        broker acknowledges it; an edited retry keeps the id too, so the broker never stores
        the draft twice."""
        import msgspec

        from meshview.errors import PermissionDenied
        from meshview.act.participant import IdentityTaken, ParticipantError

        if self.read_only is not None:
            raise SendRefused(f"read-only - {self.read_only}; nothing was sent.")
        if self.refusal() is not None and self.identity_taken is not None:
            raise SendRefused(self.identity_taken)
        try:
            p = self.participant
        except ConnectError as e:
            raise SendRefused(f"{e} Nothing was sent.".replace(". Nothing", "; nothing")) from None
        pend = self._pending.get(draft) if draft is not None else None
        if pend is not None and pend.in_flight:
            raise SendRefused("this draft is still being sent; wait for its receipt.")
        try:
            msg = p.prepare(send)
            receipt = self._receipt(send)
            if pend is not None and msgspec.structs.replace(pend.message, id=msg.id, ts=msg.ts) == msg:
                msg = pend.message  # an unchanged retry: the very same envelope
            elif pend is not None:
                msg = msgspec.structs.replace(msg, id=pend.message.id)  # edited: same id
            if draft is not None:
                pend = self._pending.setdefault(draft, _Pending(msg))
                pend.message = msg
                pend.texts.add(send.text)
                pend.in_flight = True
            aid = self.log.record("send", send_target(send.kind, send.target), "sent", mesh=self.target.space,
                                  message_id=msg.id)
            rows = list(self.roster())  # presence at send time, for the receipt
            try:
                sent = await p.send_message(msg)
            except BaseException as e:
                self.log.settle(aid, "failed", detail=str(e) or "the broker did not acknowledge it")
                raise
            finally:
                if pend is not None:
                    pend.in_flight = False
            self.log.settle(aid, "acknowledged", message_id=msg.id,
                            detail="a duplicate: the broker had it already" if sent.duplicate else None)
        except IdentityTaken as e:
            self.identity_taken = str(e)
            raise SendRefused(str(e)) from None
        except PermissionDenied as e:
            self.read_only = "these credentials cannot publish"
            p.read_only, p.read_only_reason = True, self.read_only
            raise SendRefused(str(e)) from None
        except ParticipantError as e:
            raise SendRefused(str(e)) from None
        except SendRefused:
            raise
        except Exception as e:  # noqa: BLE001 - a send never crashes the console
            raise SendRefused(f"send failed: {type(e).__name__}: {e}") from None
        if draft is not None:
            self._pending.pop(draft, None)
            if sent.duplicate and pend is not None and len(pend.texts) > 1:
                raise SendRefused(
                    "an earlier attempt of this draft had reached the broker after all, so "
                    "the edited text was not sent again; send it once more to post it as a "
                    "new message.")
        return self._truth(receipt, sent, rows)

    @staticmethod
    def _truth(said: str, sent: Any, rows: list[Any]) -> str:
        """A DM's or ask's receipt with what is true at send time (meshview/act/receipt.py):
        ``sent to @bram · stored #1234 · bram working``, never "delivered"."""
        from meshview.act.receipt import receipt as truth

        m = sent.message
        got = truth(sent.stream, sent.seq, sent.duplicate, m.to, m.toService, rows)
        if got is None:
            return said
        if m.toService is not None and not got.holders:
            return f"{said} · stored #{sent.seq}"
        head, paren, rest = said.partition(" (")
        return f"{head} · {got.words()}" + (f" ({rest}" if paren else "")

    def _receipt(self, send: Send) -> str:
        """What the status line says once ``send`` is acknowledged."""
        if send.kind == "channel":
            return f"sent to #{send.target}"
        if send.kind == "dm":
            return f"sent to @{_short(send.target)}"
        role = send.target or ""
        if _holders(self.roster(), role):
            return f"asked @{role} (anycast, in the TASK stream until one holder takes it)"
        return f"queued for @{role} in the TASK stream: no live agent holds the role yet"

    async def close(self) -> None:
        if self._participant is not None:
            await self._participant.close()


class SendRefused(CotalError):
    """One sentence for the status line."""


def _holders(rows: Any, role: str) -> list[Any]:
    from meshview.act.participant import role_holders

    return role_holders(rows, role.removeprefix("@"))


def _short(pid: str | None) -> str:
    return (pid or "?").rsplit(".", 1)[-1].lstrip("@")
