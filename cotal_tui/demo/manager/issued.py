"""The versioned rail ep.v1 (§13.15; C's region). This manager stands in for the issuing host's
check: a versioned request's generation must be one an issuer recorded in the space's
accepted-row store for exactly this caller triple (rows are write-once, so a row read once stays
known), and on a user-auth mesh the actor-ledger row it was issued against must still hold that
lifecycle uid. Unknown or dead: permission-denied."""

from __future__ import annotations

from attach.control.registry import kv_keys
from cotal_tui.demo.userauth.ledger import LedgerError, read_actor
from meshview.wire.endpoint import ParsedRequest
from meshview.wire.issued import IssuedRowError, accepted_bucket, parse_row

from cotal_tui.demo.manager.base import ManagerBase, fail


class IssuedFamily(ManagerBase):
    async def _check_issued(self, parsed: ParsedRequest) -> None:
        gen = parsed.generation
        if gen is None:
            return
        c = parsed.caller
        key = (c.owner, c.actor, c.uid, gen)
        if key not in self._issued_refs:
            await self._load_issued()
        if key not in self._issued_refs:
            raise fail("permission-denied", f"no issued evidence for generation {gen}; an unrecorded generation "
                       "authorizes nothing (SPEC 13.15)")
        if self.user_mesh:
            try:
                row = await read_actor(self.nc, self.space, c.owner, c.actor)
            except LedgerError:
                row = None
            if row is None or row.lifecycle_uid != c.uid:
                raise fail("permission-denied", f"generation {gen} depends on cotal_actors_{self.space}/actor."
                           f"{c.owner}.{c.actor}.{c.uid}, which is no longer live (SPEC 13.15)")

    async def _load_issued(self) -> None:
        """Read the accepted-row store's rows not read yet (a missing store holds none)."""
        known, seen = self._issued_refs, self._issued_keys
        try:
            js = self.nc.jetstream()
            kv = await js.key_value(accepted_bucket(self.space))
            keys = await kv_keys(js, accepted_bucket(self.space), "accepted.")  # never a racy kv.keys()
        except Exception:  # noqa: BLE001 - no store, or no keys: nothing issued
            return
        for k in keys:
            if k in seen:
                continue
            try:
                entry = await kv.get(k)
                ref = parse_row(entry.value or b"", space=self.space)
            except IssuedRowError:  # a malformed or foreign row authorizes nothing
                seen.add(k)
                continue
            except Exception:  # noqa: BLE001 - an unreadable row is tried again next time
                continue
            seen.add(k)
            known.add((ref.owner, ref.actor, ref.uid, ref.generation))
