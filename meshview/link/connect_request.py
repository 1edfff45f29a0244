"""What a caller asks to connect to, as plain values, in a module that imports no NATS client.

The CLI fills a :class:`ConnectRequest` from its flags and the environment
(``cotal_tui.cli.connection``); :func:`meshview.link.connect.resolve_target` turns it into a target
with the registry. ``cotal <command> --help`` reads the defaults here without loading nats-py.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SPACE = "main"
DEFAULT_TIMEOUT = 5.0


@dataclass(frozen=True)
class ConnectRequest:
    """``servers``: the ``--server`` values as given (URLs, comma lists, ``cotal://`` links);
    ``space`` None: the registry's current mesh; ``bearer_file``/``sentinel_creds``: a
    per-user-auth mesh's material (paths, read at resolution); ``idp_token_file`` and
    ``exchange_url``: the IdP token and the auth service's exchange a user mesh's views are
    exchanged for (the registry entry's ``idpTokenFile``/``exchange`` when not given)."""

    servers: tuple[str, ...] = ()
    space: str | None = None
    creds: str | None = None
    nkey: str | None = None
    tls_ca: str | None = None
    bearer_file: str | None = None
    sentinel_creds: str | None = None
    idp_token_file: str | None = None
    exchange_url: str | None = None
    timeout: float = DEFAULT_TIMEOUT
