"""The issuer's half of §13.15 on a static mesh: write an issued instrument's accepted row.

On a static-auth mesh the party holding the space's signer is the issuer of its own control
instruments (the reference issues its ``DEV_OWNER`` control instruments and static managed seats;
design doc "User-auth run start" §1, ``connect.ts``): it chooses the generation at mint
(:func:`meshview.link.auth.mint_control` with ``issued=True``), and before the instrument's material is
used it writes the create-only accepted row the instrument's connection reads back. It writes over
a one-shot ``issuer`` connection (:func:`meshview.link.auth.mint_issuer`), never over the instrument.

The accepted-row store is created if it is missing, with the reference's shape: Direct Get on
(per-key read grants are only expressible on ``DIRECT.GET``), one message per key with per-subject
discard-new (write-once at the broker), and no delete, purge or rollup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from meshview.errors import MeshviewError, swallowed
from meshview.wire.issued import IssuedRef, accepted_bucket, accepted_key, accepted_token, encode_row
from meshview.wire.names import space_token

if TYPE_CHECKING:
    from nats.aio.client import Client as NATS
    from nats.js import JetStreamContext
    from nats.js.api import StreamConfig

    from meshview.link.auth import Credential

ISSUE_TIMEOUT_S = 5.0
_WRITTEN: set[str] = set()  # instruments (by nkey) whose row this process wrote: a reconnect reuses it


class IssuanceError(MeshviewError, RuntimeError):
    """The accepted row could not be written; one sentence, no secret."""


def accepted_store_config(space: str) -> StreamConfig:
    from nats.js.api import DiscardPolicy, StorageType, StreamConfig

    b = accepted_bucket(space)
    return StreamConfig(name=f"KV_{b}", subjects=[f"$KV.{b}.>"], allow_direct=True, max_msgs_per_subject=1,
                        discard=DiscardPolicy.NEW, discard_new_per_subject=True, deny_delete=True,
                        deny_purge=True, allow_rollup_hdrs=False, storage=StorageType.FILE, max_msgs=-1,
                        max_bytes=-1, max_age=0)


async def ensure_accepted_store(js: JetStreamContext, space: str) -> None:
    """Create the accepted-row store if it is missing; an existing one of another shape is refused."""
    from nats.js.errors import NotFoundError

    cfg, name = accepted_store_config(space), f"KV_{accepted_bucket(space)}"
    try:
        info = await js.stream_info(name)
    except NotFoundError:
        try:
            await js.add_stream(cfg)
            return
        except Exception as e:  # noqa: BLE001 - a racing creator of the same shape is fine
            info = await js.stream_info(name)
            if info is None:
                raise IssuanceError(f"the accepted-row store {name} could not be created") from e
    c = info.config
    if not c.allow_direct or (c.max_msgs_per_subject or 0) != 1 or not c.deny_delete or not c.deny_purge:
        raise IssuanceError(f"the accepted-row store {name} has a drifted shape (not direct-read, "
                            "write-once per key, undeletable); reprovision it")


async def write_accepted_row(js: JetStreamContext, space: str, token: str, ref: IssuedRef) -> None:
    """Create-only: a token names one row, written once."""
    b = accepted_bucket(space)
    try:
        await js.publish(f"$KV.{b}.{accepted_key(token)}", encode_row(ref), stream=f"KV_{b}",
                         headers={"Nats-Expected-Last-Subject-Sequence": "0"}, timeout=ISSUE_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001
        raise IssuanceError(f"the accepted row for this instrument could not be written to {b} "
                            f"({type(e).__name__})") from None


async def issue_instrument(connect_issuer: Callable[[], Awaitable[NATS]], cred: Credential) -> None:
    """Write ``cred``'s accepted row (``cred.issued``, under the token of its own nkey) over a
    connection ``connect_issuer()`` opens with the issuer credential, then close that connection.
    A credential that is no issuance, or whose row this process already wrote (a second connect
    of the same instrument), needs nothing: the row is write-once."""
    ref = getattr(cred, "issued", None)
    if ref is None or cred.public in _WRITTEN:
        return
    space = space_token(ref.space)
    nc = await connect_issuer()
    try:
        js = nc.jetstream(timeout=ISSUE_TIMEOUT_S)
        try:
            await ensure_accepted_store(js, space)
        except IssuanceError:
            raise
        except Exception as e:  # noqa: BLE001
            raise IssuanceError(f"the accepted-row store of space {space} could not be read or created "
                                f"({type(e).__name__})") from None
        await write_accepted_row(js, space, accepted_token(cred.public), ref)
        _WRITTEN.add(cred.public)
    finally:
        try:
            await asyncio.wait_for(nc.close(), 2.0)
        except Exception:  # noqa: BLE001 - the row is written; a slow close changes nothing [counted: COTAL_LOG]
            swallowed("meshview.link.issuance:issue_instrument")
