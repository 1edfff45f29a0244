"""Who may reach which seat: the body target resolved to a live seat and checked against the
request's form (``any`` is operator reach, ``owner`` the caller's own children), and on a
per-user-auth mesh the caller's current ledger row, read fresh per request as the reference
handler does: a target under the caller's own owner needs scope ``spawn``, under another owner
``admin``; ``input`` is operator reach (``admin``) whatever the owner."""

from __future__ import annotations

from typing import Any

from cotal_tui.demo.userauth.ledger import LedgerError, read_actor
from meshview.wire.endpoint import ParsedRequest

from cotal_tui.demo.manager.base import ManagerBase, fail
from cotal_tui.demo.manager.spec import Seat


class AuthzFamily(ManagerBase):
    USER_OWN_SCOPE = "spawn"
    USER_OTHER_SCOPE = "admin"
    USER_OPERATOR_SCOPE = "admin"

    async def _authorized_seat(self, parsed: ParsedRequest, env: dict[str, Any]) -> Seat:
        seat = self._target_seat(parsed, env)
        if self.user_mesh:
            await self._authorize_user(parsed, seat)
        return seat

    async def _authorize_user(self, parsed: ParsedRequest, seat: Seat) -> None:
        c = parsed.caller
        if parsed.target is None or parsed.target.mode != "owner":
            raise fail("permission-denied", f"a user-auth mesh admits {parsed.command} in owner mode only")
        try:
            row = await read_actor(self.nc, self.space, c.owner, c.actor)
        except LedgerError as e:
            raise fail("permission-denied", f"{e}") from None
        if row is None or row.lifecycle_uid != c.uid:
            raise fail("permission-denied", f"{c.owner}.{c.actor} holds no current ledger grant "
                       "(revoked or re-granted); re-exchange for a fresh bearer")
        if parsed.command == "input":
            need = self.USER_OPERATOR_SCOPE
            why = "input is operator reach"
        elif seat.owner == c.owner:
            need, why = self.USER_OWN_SCOPE, f"a seat under your own owner needs it for {parsed.command}"
        else:
            need, why = self.USER_OTHER_SCOPE, f"{seat.spec.name} is under another owner"
        if need not in row.scopes:
            raise fail("permission-denied", f"{c.owner}.{c.actor} lacks ledger scope {need!r} ({why})")

    async def _user_scopes(self, parsed: ParsedRequest) -> frozenset[str]:
        """The caller's current ledger scopes (empty without a current row)."""
        c = parsed.caller
        try:
            row = await read_actor(self.nc, self.space, c.owner, c.actor)
        except LedgerError:
            return frozenset()
        return row.scopes if row is not None and row.lifecycle_uid == c.uid else frozenset()

    async def _authorize_user_spawn(self, parsed: ParsedRequest) -> None:
        if self.USER_OWN_SCOPE not in await self._user_scopes(parsed):
            c = parsed.caller
            raise fail("permission-denied", f"{c.owner}.{c.actor} lacks ledger scope {self.USER_OWN_SCOPE!r} "
                       "(spawning a seat under your own owner needs it)")

    def _target_seat(self, parsed: ParsedRequest, env: dict[str, Any]) -> Seat:
        """The live seat the body target names, authorized for the request's form: ``any`` is
        operator reach, ``owner`` reaches only the caller's own children (on a user-auth mesh
        the ledger decides instead, :meth:`_authorize_user`)."""
        t = env["target"]
        seat = next((s for s in self.seats.values() if s.owner == t["owner"] and s.actor == t["actor"]
                     and s.lifecycle_uid == t["lifecycleUid"]), None)
        if seat is None:
            raise fail("expired", f"target {t['owner']}.{t['actor']} (lifecycle {t['lifecycleUid']}) is not a live "
                       "managed agent of this manager")
        if self.user_mesh:
            return seat
        if parsed.target is not None and parsed.target.mode == "owner" and seat.spawner != parsed.caller.principal:
            raise fail("permission-denied", f"{seat.spec.name} is not a seat this caller spawned; an owner-mode "
                       f"{parsed.command} reaches only the caller's own children")
        return seat
