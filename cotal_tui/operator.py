"""The console's hands: sends on the operator's behalf, through one lazily made participant.

Nothing here publishes until the operator sends (the participant starts on the first send);
``--read-only`` / ``COTAL_READ_ONLY=1`` refuses every send before anything touches the network,
and the first permission denial from the server turns the console read-only with its reason.
Every failure is one sentence for the status line; nothing raises into the UI.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from meshview.connect import ConnectError, Target, prepare

TRUTHY = ("1", "true", "yes", "on")


def participant_target(target: Target) -> Target:
    """The target the operator's participant connects with: the ``operator`` role, minted now
    on a static mesh (the reference's ``cotal send`` profile: post, DM and anycast as
    ``local.<its nkey>``, its own presence key, roster and channel-registry reads), so the
    participant knows its principal before it connects. A credential minted for another role
    (the console's admin view) is dropped; ``--creds``, open and user-auth meshes pass as they
    are. Raises :class:`ConnectError` (one sentence) when nothing can be minted."""
    cred = target.credential
    keep = cred is not None and getattr(cred, "profile", None) == "operator"
    return prepare(dataclasses.replace(target, role="operator", credential=cred if keep else None))


def read_only_reason(args: Any) -> str | None:
    """Why this console may not send, or None."""
    if getattr(args, "read_only", False):
        return "started with --read-only"
    if os.environ.get("COTAL_READ_ONLY", "").strip().lower() in TRUTHY:
        return "COTAL_READ_ONLY is set"
    return None


class Operator:
    """Sends for one space's console. ``roster`` returns the live peers (for DM vetting)."""

    def __init__(self, target: Target, space: str, *, name: str | None,
                 read_only: str | None, roster: Callable[[], Any]) -> None:
        self.target = dataclasses.replace(target, space=space)
        self.name = name
        self.read_only = read_only  # the reason, when sends are refused
        self.roster = roster
        self._participant: Any = None

    @property
    def participant(self) -> Any:
        """Made on first use; on a static mesh this mints the operator's credential (raises
        :class:`ConnectError` when the mesh's seed cannot be read)."""
        if self._participant is None:
            from meshview.participant import Participant

            self._participant = Participant(
                participant_target(self.target), name=self.name, read_only=self.read_only is not None,
                read_only_reason=self.read_only or "", roster=self.roster)
        return self._participant

    @property
    def on_roster(self) -> bool:
        """The operator's presence peer is up (it appears on the roster)."""
        return self._participant is not None and self._participant.active

    async def send(self, kind: str, text: str, *, channel: str | None = None,
                   to: str | None = None, role: str | None = None,
                   reply_to: str | None = None, context_id: str | None = None) -> str:
        """Send one message; returns a one-line receipt. Raises ``SendRefused`` (one
        sentence) on any failure."""
        from meshview.participant import ParticipantError, PermissionDenied

        if self.read_only is not None:
            raise SendRefused(f"read-only - {self.read_only}; nothing was sent.")
        try:
            p = self.participant
        except ConnectError as e:
            raise SendRefused(f"{e} Nothing was sent.".replace(". Nothing", "; nothing")) from None
        try:
            if kind == "channel":
                await p.post(channel or "general", text, reply_to=reply_to, context_id=context_id)
                return f"sent to #{channel or 'general'}"
            if kind == "dm":
                await p.dm(to or "", text, reply_to=reply_to, context_id=context_id)
                return f"sent to @{_short(to)}"
            if kind == "ask":
                await p.ask(role or "", text, reply_to=reply_to, context_id=context_id)
                return f"asked @{role} (anycast)"
        except PermissionDenied as e:
            self.read_only = "these credentials cannot publish"
            p.read_only, p.read_only_reason = True, self.read_only
            raise SendRefused(str(e)) from None
        except ParticipantError as e:
            raise SendRefused(str(e)) from None
        except Exception as e:  # noqa: BLE001 - a send never crashes the console
            raise SendRefused(f"send failed: {type(e).__name__}: {e}") from None
        raise SendRefused(f"unknown send kind {kind!r}.")

    async def close(self) -> None:
        if self._participant is not None:
            await self._participant.close()


class SendRefused(Exception):
    """One sentence for the status line."""


def _short(pid: str | None) -> str:
    return (pid or "?").rsplit(".", 1)[-1].lstrip("@")
