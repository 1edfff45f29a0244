"""Resolve which mesh to talk to and open one NATS connection to it.

Shared by ``cotal watch``, ``cotal attach``, ``cotal ps`` and the console. Resolution mirrors
the reference CLI: explicit ``--server`` wins; otherwise ``$COTAL_HOME``/``~/.cotal``
``current-mesh`` names a space in the registry ``meshes/*.json``; a single registry entry is
used; otherwise ``nats://127.0.0.1:4222``. Connection options follow SPEC §10 (inbox prefix
``_INBOX_<connId>`` whenever the credential names a connection id) and the observer's needs:
pings every 10 s with 2 outstanding, unlimited reconnects with jittered exponential backoff,
a bounded first connect. Secrets (passwords, tokens, seeds) never appear in any string this
module returns: use :attr:`Target.display`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import secrets
import ssl
import stat
import sys
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

import nats
from nats.aio.client import Client as NATS

DEFAULT_SERVER = "nats://127.0.0.1:4222"
DEFAULT_SPACE = "main"
DEFAULT_TIMEOUT = 5.0
PING_INTERVAL = 10
MAX_OUTSTANDING_PINGS = 2
BACKOFF_BASE = 0.25
BACKOFF_CAP = 5.0


class LenientClient(NATS):
    """nats-py's client, except that a received subject with invalid UTF-8 is decoded with
    U+FFFD instead of raising inside the read loop. Stock nats-py decodes strictly there, so a
    single hostile publish (any agent may publish on its own chat subjects) would end the read
    loop and leave the observer connected but deaf until pings time out. The replaced subject
    then fails subject parsing and is counted as ``malformed-subject`` like any bad input."""

    def _build_message(self, sid, subject, reply, data, headers):  # noqa: D401 - override
        return self.msg_class(
            subject=subject.decode("utf-8", "replace"),
            reply=reply.decode("utf-8", "replace"),
            data=data,
            headers=headers,
            _client=self,
            _sid=sid,
        )


class ConnectError(RuntimeError):
    """The target could not be reached or accepted; the message is one sentence, no secrets."""


@dataclass(frozen=True)
class Target:
    """Where to connect. ``servers`` may embed credentials: never print them; use ``display``."""

    servers: tuple[str, ...]
    space: str = DEFAULT_SPACE
    creds: str | None = None
    nkey: str | None = None
    tls_ca: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    source: str = "default"  # flag | current-mesh | registry | default
    mode: str | None = None  # registry mode when known: open | auth | user
    name: str | None = None  # client connection name

    @property
    def display(self) -> str:
        return ",".join(redact_url(s) for s in self.servers)

    @property
    def has_credential(self) -> bool:
        if self.creds or self.nkey:
            return True
        return any(urlsplit(_with_scheme(s)).username for s in self.servers)


def _with_scheme(url: str) -> str:
    return url if "://" in url else "nats://" + url


def redact_url(url: str) -> str:
    """``nats://user:pass@host:4222`` -> ``nats://***@host:4222`` (token or user hidden)."""
    u = urlsplit(_with_scheme(url.strip()))
    host = u.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if u.port:
        host = f"{host}:{u.port}"
    if u.username or u.password:
        host = "***@" + host
    return urlunsplit((u.scheme, host, u.path, "", ""))


def split_servers(values: list[str] | str | None) -> list[str]:
    if not values:
        return []
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for v in values:
        out += [s.strip() for s in v.split(",") if s.strip()]
    return [_with_scheme(s) for s in out]


def cotal_home() -> Path:
    env = os.environ.get("COTAL_HOME")
    return Path(env) if env else Path.home() / ".cotal"


def load_registry(home: Path | None = None) -> list[dict[str, Any]]:
    """Registry entries (one JSON per mesh); unreadable files are skipped, never fatal."""
    d = (home or cotal_home()) / "meshes"
    out: dict[str, dict[str, Any]] = {}
    try:
        files = sorted(p for p in d.iterdir() if p.suffix == ".json")
    except OSError:
        return []
    for p in files:
        try:
            e = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(e, dict) and isinstance(e.get("space"), str) and e["space"]:
            out.setdefault(e["space"], e)
    return list(out.values())


def current_space(home: Path | None = None) -> str | None:
    try:
        s = ((home or cotal_home()) / "current-mesh").read_text().strip()
    except OSError:
        return None
    return s or None


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("connection")
    g.add_argument("--server", action="append", metavar="URL",
                   help="broker URL; a comma list or repeated for a cluster "
                        "(user:pass@ or token@ allowed; tls:// for TLS)")
    g.add_argument("--space", default=None, help=f"space to watch (default: {DEFAULT_SPACE})")
    g.add_argument("--creds", metavar="FILE", help="NATS credentials file (JWT + nkey seed)")
    g.add_argument("--nkey", metavar="FILE", help="NATS nkey seed file")
    g.add_argument("--tls-ca", metavar="FILE", help="CA bundle to verify the broker's TLS cert")
    g.add_argument("--connect-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SEC",
                   help=f"give up the first connect after this long (default {DEFAULT_TIMEOUT:g})")


def resolve_target(args: argparse.Namespace | None = None, *, home: Path | None = None) -> Target:
    """Turn parsed flags into a :class:`Target` (no network)."""
    servers = split_servers(getattr(args, "server", None))
    space = getattr(args, "space", None)
    common = dict(
        creds=getattr(args, "creds", None), nkey=getattr(args, "nkey", None),
        tls_ca=getattr(args, "tls_ca", None),
        timeout=float(getattr(args, "connect_timeout", None) or DEFAULT_TIMEOUT),
    )
    if servers:
        return Target(tuple(servers), space or DEFAULT_SPACE, source="flag", **common)
    reg = load_registry(home)
    want = space or current_space(home)
    entry = None
    source = "default"
    if want:
        entry = next((e for e in reg if e.get("space") == want), None)
        source = "registry" if space else "current-mesh"
    elif len(reg) == 1:
        entry, source = reg[0], "registry"
    if entry and isinstance(entry.get("server"), str):
        return Target(tuple(split_servers(entry["server"])), entry["space"], source=source,
                      mode=entry.get("mode"), **common)
    return Target((DEFAULT_SERVER,), want or DEFAULT_SPACE, source="default", **common)


def _creds_claims(path: str) -> dict[str, Any]:
    """The user JWT's claims from a creds file (not secret; never the seed), or {}."""
    try:
        raw = Path(path).read_text()
    except OSError:
        return {}
    lines = [ln.strip() for ln in raw.splitlines()]
    for i, ln in enumerate(lines):
        if "BEGIN NATS USER JWT" in ln and i + 1 < len(lines):
            try:
                body = lines[i + 1].split(".")[1]
                claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            except (IndexError, ValueError):
                return {}
            return claims if isinstance(claims, dict) else {}
    return {}


def _creds_public_key(path: str) -> str | None:
    """The user nkey public key (``sub`` of the user JWT) — the connId of a creds file."""
    sub = _creds_claims(path).get("sub")
    return sub if isinstance(sub, str) else None


def _creds_expiry(path: str | None) -> str | None:
    """When the creds' JWT expired, if it has: the broker's refusal does not say why."""
    if not path:
        return None
    exp = _creds_claims(path).get("exp")
    if isinstance(exp, (int, float)) and not isinstance(exp, bool) and exp < time.time():
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(exp))
    return None


def _seed_public_key(path: str) -> str | None:
    try:
        import nkeys

        seed = Path(path).read_bytes().strip().split()[0]
        return nkeys.from_seed(seed).public_key.decode()
    except Exception:
        return None


def check_secret_file(path: str, what: str) -> None:
    """Warn (stderr) when a secret file is readable by group or others."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise ConnectError(f"cannot read the {what} file {path}: {e.strerror}.") from None
    if mode & (stat.S_IRGRP | stat.S_IROTH | stat.S_IWGRP | stat.S_IWOTH):
        print(f"! warning: {what} file {path} is readable by other users "
              f"(mode {stat.S_IMODE(mode):04o}); run chmod 600 on it.", file=sys.stderr)


class ConnectionEvents:
    """Fan-out of the client's callbacks so several parts (observer, UI) can listen."""

    def __init__(self) -> None:
        self.on_error: list[Callable[[Exception], Awaitable[None] | None]] = []
        self.on_disconnect: list[Callable[[], Awaitable[None] | None]] = []
        self.on_reconnect: list[Callable[[], Awaitable[None] | None]] = []
        self.on_close: list[Callable[[], Awaitable[None] | None]] = []
        self.connecting = True
        self.last_error: Exception | None = None

    async def _fire(self, cbs: list, *a: Any) -> None:
        for cb in list(cbs):
            try:
                r = cb(*a)
                if asyncio.iscoroutine(r):
                    await r
            except Exception:
                pass  # a listener's failure must not break the client loop

    async def error(self, e: Exception) -> None:
        self.last_error = e
        if not self.connecting:
            await self._fire(self.on_error, e)

    async def disconnected(self) -> None:
        if not self.connecting:
            await self._fire(self.on_disconnect)

    async def reconnected(self) -> None:
        await self._fire(self.on_reconnect)

    async def closed(self) -> None:
        if not self.connecting:
            await self._fire(self.on_close)


_EVENTS: "weakref.WeakKeyDictionary[NATS, ConnectionEvents]" = weakref.WeakKeyDictionary()


def events_of(nc: NATS) -> ConnectionEvents:
    """The callback hub of a connection made by :func:`connect` (an empty one otherwise)."""
    ev = _EVENTS.get(nc)
    if ev is None:
        ev = _EVENTS[nc] = ConnectionEvents()
    return ev


def _jittered_backoff(servers: list, _info: dict) -> tuple[Any, float]:
    """Round-robin with exponential backoff, full jitter in [50%, 100%] of the step."""
    s = min(servers, key=lambda x: (x.reconnects, random.random()))
    step = min(BACKOFF_CAP, BACKOFF_BASE * (2 ** min(s.reconnects, 8)))
    return s, step * random.uniform(0.5, 1.0)


def connect_options(target: Target) -> dict[str, Any]:
    """nats-py keyword options for ``target`` (secrets stay inside this dict)."""
    opts: dict[str, Any] = dict(
        servers=list(target.servers),
        ping_interval=PING_INTERVAL,
        max_outstanding_pings=MAX_OUTSTANDING_PINGS,
        connect_timeout=max(0.5, target.timeout),
        allow_reconnect=True,
        reconnect_time_wait=0.2,
        max_reconnect_attempts=1,  # the first connect; lifted to unlimited once connected
        reconnect_to_server_handler=_jittered_backoff,
        name=target.name or "cotal-watch",
        pending_size=64 * 1024 * 1024,
    )
    conn_id = None
    if target.creds:
        check_secret_file(target.creds, "credentials")
        opts["user_credentials"] = target.creds
        conn_id = _creds_public_key(target.creds)
    elif target.nkey:
        check_secret_file(target.nkey, "nkey seed")
        opts["nkeys_seed"] = target.nkey
        conn_id = _seed_public_key(target.nkey)
    else:
        u = urlsplit(target.servers[0]) if target.servers else None
        if u is not None and u.username and not u.password:
            # token auth (user mode bearer): the connection names itself with a nonce
            conn_id = secrets.token_hex(16)
            opts["name"] = conn_id
    if conn_id:
        opts["inbox_prefix"] = f"_INBOX_{conn_id}"
    if target.tls_ca or any(s.startswith(("tls://", "wss://")) for s in target.servers):
        ctx = ssl.create_default_context(cafile=target.tls_ca) if target.tls_ca else \
            ssl.create_default_context()
        opts["tls"] = ctx
    return opts


def short_error(e: BaseException) -> str:
    """One line of an error for a warning or status bar: its first line, at most 200 chars."""
    s = str(e).strip() or type(e).__name__
    return s.splitlines()[0][:200]


def _reason(e: BaseException | None, target: Target) -> str:
    if e is None:
        return "no answer"
    name = type(e).__name__
    s = str(e) or name
    if "Authorization" in name or "authorization" in s.lower():
        expired = _creds_expiry(target.creds)
        if expired:
            return f"the credentials expired at {expired}"
        return "the broker refused the credentials (wrong, revoked or not permitted)"
    if isinstance(e, ssl.SSLError) or "SSL" in name or "certificate" in s.lower():
        return "the TLS handshake failed"
    if isinstance(e, (ConnectionRefusedError,)) or "Connect call failed" in s or "refused" in s:
        return "connection refused"
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return "timed out"
    for secret in _secrets_of(target):
        s = s.replace(secret, "***")
    return s.rstrip(".")


def _secrets_of(target: Target) -> list[str]:
    out = []
    for srv in target.servers:
        u = urlsplit(srv)
        out += [x for x in (u.username, u.password) if x]
    return out


async def connect(
    args_or_target: argparse.Namespace | Target | None = None,
) -> tuple[NATS, Target]:
    """Open the connection; raises :class:`ConnectError` (one sentence) within the timeout."""
    target = args_or_target if isinstance(args_or_target, Target) else resolve_target(args_or_target)
    opts = connect_options(target)
    nc = LenientClient()
    ev = events_of(nc)
    opts.update(error_cb=ev.error, disconnected_cb=ev.disconnected,
                reconnected_cb=ev.reconnected, closed_cb=ev.closed)
    try:
        await asyncio.wait_for(nc.connect(**opts), timeout=target.timeout + 0.5)
    except (asyncio.TimeoutError, TimeoutError):
        err = ev.last_error
        await _abandon(nc)
        raise ConnectError(
            f"could not reach {target.display} within {target.timeout:g}s ({_reason(err, target)})."
        ) from None
    except Exception as e:  # noqa: BLE001 - every failure becomes one sentence
        if "NoServers" in type(e).__name__ and ev.last_error is not None:
            e = ev.last_error
        await _abandon(nc)
        raise ConnectError(f"could not connect to {target.display}: {_reason(e, target)}.") from None
    nc.options["max_reconnect_attempts"] = -1
    ev.connecting = False
    return nc, target


async def _abandon(nc: NATS) -> None:
    try:
        await asyncio.wait_for(nc.close(), 1.0)
    except Exception:
        pass
