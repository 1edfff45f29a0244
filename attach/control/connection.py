"""The connections an attach or a control verb runs on, for every caller: ``cotal attach``,
``cotal ps``, the control verbs and the console's embedded panes.

They go through the shared connection layer (creds, nkey, TLS, clusters, inbox prefix, the
registry's mode and root) as the ``control`` role, with the client's own reconnect turned off:
a session owns its re-establishment, so a dropped link must end the session, not be silently
revived under it.

On a static-auth mesh the two halves of an attach hold different credentials, as the reference
CLI's do (attach.md §3.2): the control connection carries a one-shot caller instrument minted
from the mesh root's seed (it asks for the grant), and the session's rails ride a second
connection whose ``session-caller`` credential is minted for that one session from the same
seed, expiring with the grant. On an open mesh nothing is minted and one bare connection does
both.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from meshview.link.connect import ConnectError, ConnectTarget, target_of
from meshview.link.connect import connect as mesh_connect

CLIENT_NAME = "cotal-attach"


async def connect(target: ConnectTarget | str) -> Any:
    """One connection for one action or session (``target`` may be a bare URL: an open mesh)."""
    if isinstance(target, str):
        target = ConnectTarget((target,), name=CLIENT_NAME, timeout=2.0, role="control")
    nc, _ = await mesh_connect(target)
    nc.options["allow_reconnect"] = False
    return nc


def session_target(target: ConnectTarget) -> ConnectTarget:
    """Another client's target (the console's), reused for attach sessions and control: same
    servers, creds, nkey, TLS, mode and root, as a control client (a credential minted for the
    other role is dropped so that control mints its own)."""
    return dataclasses.replace(target, name=CLIENT_NAME, role="control", credential=None)


def _session_of(grant: dict) -> tuple[str, str, int]:
    try:
        return str(grant["endpoint"]), str(grant["sessionId"]), int(grant["serving"]["epoch"])
    except (KeyError, TypeError, ValueError):
        raise ConnectError("the session grant names no rails to mint for.") from None


async def session_connection(nc: Any, grant: dict) -> tuple[Any, bool]:
    """The connection for one session's rails, and whether it is a new one (the caller then
    owns it). Static mesh: a fresh connection on a ``session-caller`` credential minted from
    the seed of the root the mesh resolved to, for exactly this grant's rails and expiry. Any
    other mesh: the control connection itself."""
    t = target_of(nc)
    if t is None or t.mode != "auth" or t.credential is None or not t.root:
        if t is not None and t.user_mode:
            raise ConnectError("attach on a per-user-auth mesh redeems the grant through the auth "
                               "service's exchange: give --idp-token-file and --exchange-url (a "
                               "--bearer-file bearer is for watching only).")
        return nc, False
    from meshview.link import auth

    try:
        seed = auth.load_root_seed(t.root, t.space)
        cred = auth.mint_session_caller(seed, t.space, _session_of(grant), int(grant.get("exp") or 0))
    except auth.AuthError as e:
        raise ConnectError(f"{e}.") from None
    snc = await connect(dataclasses.replace(t, credential=cred, role="session", name=CLIENT_NAME))
    return snc, True


async def connect_like(nc: Any) -> Any | None:
    """A fresh connection with the same credential as ``nc`` (a session handing itself back
    after its link died); ``None`` when ``nc`` was not made here."""
    t = target_of(nc)
    if t is None:
        return None
    return await connect(t)
