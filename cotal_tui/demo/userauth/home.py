"""A ``COTAL_HOME`` for one user of a user-auth mesh: the registry entry (``mode: user``, the
public exchange URL, the sentinel creds, the user's IdP token file), made current. What
``cotal up`` plus ``cotal login`` leave behind for that user; files 0600 in 0700 directories."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from cotal_tui.demo.userauth.plane import write_secret


def write_user_home(home: Path, *, space: str, server: str, exchange: str, sentinel_text: str,
                    idp_token: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    auth = home / "auth"
    sentinel = write_secret(auth / f"{space}.sentinel.creds", sentinel_text)
    idp = write_secret(auth / "idp-token", idp_token + "\n")
    os.chmod(auth, 0o700)
    meshes = home / "meshes"
    meshes.mkdir(exist_ok=True)
    os.chmod(meshes, 0o700)
    entry = {"space": space, "server": server, "mode": "user", "origin": "up", "exchange": exchange,
             "sentinelCreds": str(sentinel), "idpTokenFile": str(idp),
             "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_secret(meshes / f"{space}.json", json.dumps(entry, indent=2))
    (home / "current-mesh").write_text(space + "\n")
    return home
