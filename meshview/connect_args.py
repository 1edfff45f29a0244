"""The connection flags every command shares, in a module that imports no NATS client.

``cotal <command> --help`` and argument errors then cost no broker-library import; the flags'
meaning lives in :mod:`meshview.connect`, which resolves them.
"""

from __future__ import annotations

import argparse

DEFAULT_SPACE = "main"
DEFAULT_TIMEOUT = 5.0


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
    g.add_argument("--connect-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SEC",
                   help=f"give up the first connect after this long (default {DEFAULT_TIMEOUT:g})")
