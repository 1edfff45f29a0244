"""The connection flags every command shares, and their reading into a connect target.

This module imports no NATS client, so ``cotal <command> --help`` and argument errors cost no
broker-library import; :mod:`meshview.link.connect` is loaded only when a target is resolved.
Flags win over their environment variables (``COTAL_BEARER_FILE``, ``COTAL_SENTINEL_CREDS``,
``COTAL_IDP_TOKEN_FILE``, ``COTAL_EXCHANGE_URL``), which win over a user mesh's registry entry.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from meshview.link.connect_request import DEFAULT_SPACE, DEFAULT_TIMEOUT, ConnectRequest

if TYPE_CHECKING:
    from meshview.link.connect import ConnectTarget


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("connection")
    g.add_argument("--server", action="append", metavar="URL",
                   help="broker URL; a comma list or repeated for a cluster "
                        "(user:pass@ or token@ allowed; tls:// for TLS), or a "
                        "cotal://[token@]host[:port]/space link (cotals:// for TLS)")
    g.add_argument("--space", default=None, help=f"space to watch (default: {DEFAULT_SPACE})")
    g.add_argument("--creds", metavar="FILE", help="NATS credentials file (JWT + nkey seed)")
    g.add_argument("--nkey", metavar="FILE", help="NATS nkey seed file")
    g.add_argument("--tls-ca", metavar="FILE", help="CA bundle to verify the broker's TLS cert")
    g.add_argument("--bearer-file", metavar="FILE",
                   help="user-auth mesh: a file holding your Cotal bearer (also COTAL_BEARER_FILE)")
    g.add_argument("--sentinel-creds", metavar="FILE",
                   help="user-auth mesh: the deny-all sentinel creds (also COTAL_SENTINEL_CREDS)")
    g.add_argument("--idp-token-file", metavar="FILE",
                   help="user-auth mesh: a file holding your IdP token, exchanged for each verb's "
                        "bearer (also COTAL_IDP_TOKEN_FILE; default: the registry entry's)")
    g.add_argument("--exchange-url", metavar="URL",
                   help="user-auth mesh: the auth service's exchange, http://HOST:PORT "
                        "(also COTAL_EXCHANGE_URL; default: the registry entry's)")
    g.add_argument("--connect-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SEC",
                   help=f"give up the first connect after this long (default {DEFAULT_TIMEOUT:g})")


def connect_request(args: argparse.Namespace) -> ConnectRequest:
    """The connection flags (and their environment variables) as a plain request."""
    env = os.environ
    return ConnectRequest(
        servers=tuple(getattr(args, "server", None) or ()),
        space=getattr(args, "space", None),
        creds=getattr(args, "creds", None),
        nkey=getattr(args, "nkey", None),
        tls_ca=getattr(args, "tls_ca", None),
        bearer_file=getattr(args, "bearer_file", None) or env.get("COTAL_BEARER_FILE"),
        sentinel_creds=getattr(args, "sentinel_creds", None) or env.get("COTAL_SENTINEL_CREDS"),
        idp_token_file=getattr(args, "idp_token_file", None) or env.get("COTAL_IDP_TOKEN_FILE"),
        exchange_url=getattr(args, "exchange_url", None) or env.get("COTAL_EXCHANGE_URL"),
        timeout=float(getattr(args, "connect_timeout", None) or DEFAULT_TIMEOUT),
    )


def target_from_args(args: argparse.Namespace) -> ConnectTarget:
    """The command line's connect target: flags, then the ``$COTAL_HOME`` registry; several
    registered meshes with none current are picked from on a terminal."""
    from meshview.link.connect import resolve_target

    return resolve_target(connect_request(args), pick=pick_mesh)


def pick_mesh(reg: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None]:
    """Several meshes, none current: a numbered prompt on a terminal, else the sentence."""
    from meshview.link.connect import none_current, redact_url

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return none_current(reg)
    names = sorted(str(e["space"]) for e in reg)
    listing = ", ".join(names)
    by_name = {str(e["space"]): e for e in reg}
    print("Several meshes are registered and none is current:", file=sys.stderr)
    for i, n in enumerate(names, 1):
        e = by_name[n]
        print(f"  {i}. {n}  {redact_url(str(e.get('server', '')))}  ({e.get('mode', '?')})", file=sys.stderr)
    for _ in range(3):
        print(f"Pick one [1-{len(names)}]: ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line:
            break
        line = line.strip()
        if line.isdigit() and 1 <= int(line) <= len(names):
            return by_name[names[int(line) - 1]], None
        if line in by_name:
            return by_name[line], None
    return None, f"no mesh picked (registered: {listing}); name one with --space."
