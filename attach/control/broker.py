"""Is the broker new enough for the control plane? Message schedules arrived in nats-server 2.12,
and the manager's goal and lease machinery leans on them (and on 2.12's atomic CAS), so a client
names an older broker in one sentence instead of failing later in a way that reads as a manager
fault. The version is the server INFO's ``version`` the connection already holds."""

from __future__ import annotations

import re
from typing import Any

from meshview.errors import swallowed

MIN_VERSION = (2, 12, 0)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: object) -> tuple[int, int, int] | None:
    """``2.12.1`` / ``v2.12.0-RC.3`` → (2, 12, 1); anything else → None."""
    m = _VERSION.match(text) if isinstance(text, str) else None
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def too_old(version: object) -> str | None:
    """The one sentence for a broker the control plane cannot use, or None when it can (an
    unreadable version is not refused: the calls themselves will say what fails)."""
    v = parse_version(version)
    if v is None or v >= MIN_VERSION:
        return None
    have = ".".join(map(str, v))
    want = ".".join(map(str, MIN_VERSION[:2]))
    return (f"the broker is nats-server {have}, and the manager control plane needs {want} or newer "
            "(message schedules); upgrade the broker")


def server_version(nc: Any) -> str | None:
    """The connected server's INFO version, if the client holds one (nats-py's public
    ``connected_server_version``, whose text is the INFO ``version``)."""
    try:
        v = nc.connected_server_version
        text = f"{v.major}.{v.minor}.{v.patch}"
    except Exception:  # noqa: BLE001 - no version known (or unparseable): not refused [counted: COTAL_LOG]
        swallowed("attach.control.broker:server_version")
        return None
    return None if text == "0.0.0" else text
