"""The connection an attach session runs on, for every caller: ``cotal attach``, ``cotal ps``
and the console's embedded panes.

It goes through the shared connection layer (creds, nkey, TLS, clusters, inbox prefix) with the
client's own reconnect turned off: a session owns its re-establishment, so a dropped link must
end the session, not be silently revived under it.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from meshview.connect import Target, connect as mesh_connect, resolve_target

CLIENT_NAME = "cotal-attach"


async def connect(target: Target | str) -> Any:
    """One connection for one session (``target`` may be a bare URL: an open mesh)."""
    if isinstance(target, str):
        target = Target((target,), name=CLIENT_NAME, timeout=2.0)
    nc, _ = await mesh_connect(target)
    nc.options["allow_reconnect"] = False
    return nc


def resolve(args: argparse.Namespace) -> Target:
    """The command line's target (flags, ``COTAL_HOME`` registry), named as an attach client."""
    return dataclasses.replace(resolve_target(args), name=CLIENT_NAME)


def session_target(target: Target) -> Target:
    """Another client's target (the console's), reused for attach sessions: same servers,
    creds, nkey and TLS, under the attach client's name."""
    return dataclasses.replace(target, name=CLIENT_NAME)
