"""Resolve which mesh to talk to and open one NATS connection to it.

Shared by ``cotal watch``, ``cotal attach``, ``cotal ps``, the control verbs and the console.
Resolution mirrors the reference CLI: explicit ``--server`` (a URL, a comma list, or a
``cotal://`` / ``cotals://`` connect link, SPEC §10) wins; otherwise ``$COTAL_HOME``/``~/.cotal``
``current-mesh`` names a space in the registry ``meshes/*.json``; a single registry entry is used;
several with none current are picked from (a numbered prompt on a terminal, one sentence
otherwise); with none, ``nats://127.0.0.1:4222``.

A registry entry's ``mode`` decides the credentials (wire.md §9): ``open`` connects bare;
``auth`` (static) mints from the seed at the entry's ``root`` — an admin read credential for
the observer, a one-shot caller instrument for control, the reference's one-shot ``purger`` /
``channel-purger`` for purge and channel delete, and its ``operator`` participant for sends
(:mod:`meshview.link.auth`) — and refuses by name when the seed is missing; ``user`` connects with the deny-all sentinel creds plus the
bearer as the token, named ``ibx<uuid>`` (fresh per connection) which is also the inbox prefix.
On a user mesh with an IdP token and the auth service's exchange (flags, environment, or the
entry's ``idpTokenFile``/``exchange``) each role's bearer is exchanged for its view
(:data:`ROLE_VIEWS`, :mod:`meshview.link.exchange`): ``manager-caller`` for control, ``session-caller``
for a session's rails, ``purger``/``channel-purger`` for the purges, the baseline bearer for the
observer and sends, whose standing connection re-exchanges before its bearer's ``exp``.

Connection options follow SPEC §10 (inbox prefix ``_INBOX_<connId>`` whenever the credential
names a connection id) and the observer's needs: pings every 10 s with 2 outstanding, unlimited
reconnects with jittered exponential backoff, a bounded first connect. The server's async
permission errors are kept per connection, so a denied publish is reported as denied rather
than waited out (:func:`publish_checked`). Secrets (passwords, tokens, seeds, JWTs) never appear
in any string this module returns: use :attr:`ConnectTarget.display`.

Size: over 500 lines because resolving a target (links, registry entries, the three auth modes)
and the connect options are one decision. What is asked for arrives as a plain
:class:`~meshview.link.connect_request.ConnectRequest`; the flags that fill it are the CLI's
(``cotal_tui.cli.connection``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import re
import secrets
import ssl
import stat
import sys
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

DEFAULT_SERVER = "nats://127.0.0.1:4222"
SCHEMES = ("nats", "tls", "ws", "wss")
from meshview.errors import MeshviewError, swallowed
from meshview.link.connect_request import DEFAULT_SPACE, DEFAULT_TIMEOUT, ConnectRequest  # noqa: E402
from meshview.link.home import cotal_home  # noqa: E402
from meshview.link.natsload import websocket_ready  # noqa: E402
from meshview.link.fastparse import YIELD_EVERY, DirectParser  # noqa: E402
from meshview import errors  # noqa: E402
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

    renews = False  # the credential re-signs itself on reconnect (a long-lived participant)

    def __init__(self) -> None:
        super().__init__()
        # a whole frame for a direct route goes to its feed without the stock parser's regex,
        # dict and coroutine per message; every other shape is the stock parser's (fastparse.py)
        self._ps = DirectParser(self)

    async def _process_err(self, err_msg: str) -> None:  # noqa: D401 - override
        """The broker ends a connection whose JWT expired (``User Authentication Expired``);
        stock nats-py then closes for good. A credential that re-signs itself reconnects
        instead, and the reconnect authenticates with the fresh JWT."""
        if self.renews and "authentication expired" in err_msg.lower():
            from nats import errors as nats_errors

            await self._process_op_err(nats_errors.Error("nats: user authentication expired"))
            return
        await super()._process_err(err_msg)

    _direct: dict[int, tuple[Callable[[str, str, bytes, Any], str | None], bool]] | None = None
    _direct_run = 0

    def direct(self, sub: Any, feed: Callable[[str, str, bytes, Any], str | None],
               headers: bool = True) -> None:
        """Hand ``sub``'s deliveries to ``feed(subject, reply, data, headers)`` as the parser
        reads them, skipping the message object, the subscription's queue and its task (a
        presence watch at 10k agents takes 5k deliveries a second, a channel flood far more).
        ``feed`` is synchronous, must not raise, and returns a subject to publish an empty
        reply to (flow control) or None. Headers are nats-py's parsed dict, or None; with
        ``headers=False`` they are not parsed at all (a reader that never looks at them)."""
        if self._direct is None:
            self._direct = {}
        self._direct[sub._id] = (feed, headers)

    @property
    def direct_routes(self) -> int:
        """How many subscriptions the parser hands to a feed directly (tests read it)."""
        return len(self._direct or ())

    def is_direct(self, sub: Any) -> bool:
        """Whether ``sub``'s deliveries go to a feed directly (see :meth:`direct`)."""
        return bool(self._direct) and sub._id in self._direct  # type: ignore[operator]

    def undirect(self, sub: Any) -> None:
        if self._direct:
            self._direct.pop(sub._id, None)

    async def _process_msg(  # noqa: D401 - override
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes
    ) -> None:
        route = self._direct.get(sid) if self._direct else None
        if route is None or sid not in self._subs:
            return await super()._process_msg(sid, subject, reply, data, headers)
        feed, parse = route
        self.stats["in_msgs"] += 1
        self.stats["in_bytes"] += len(data)
        hdr = await self._process_headers(headers) if headers and parse else None
        fc = feed(subject.decode("utf-8", "replace"), reply.decode("utf-8", "replace"), data, hdr)
        if fc:
            await self.publish(fc, b"")
        self._direct_run += 1
        if self._direct_run >= YIELD_EVERY:  # one socket read holds hundreds: let the loop run
            self._direct_run = 0
            await asyncio.sleep(0)

    def _build_message(  # noqa: D401 - override
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: dict[str, str] | None
    ) -> Msg:
        return self.msg_class(
            subject=subject.decode("utf-8", "replace"),
            reply=reply.decode("utf-8", "replace"),
            data=data,
            headers=headers,
            _client=self,
            _sid=sid,
        )


class ConnectError(MeshviewError, RuntimeError):
    """The target could not be reached or accepted; the message is one sentence, no secrets.
    ``code``: ``unavailable``, or the auth service exchange's code when it refused a view."""

    code = "unavailable"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


ROLES = ("observer", "control", "session", "purger", "channel-purger", "operator")
_VIEWS = {"purger": "history purge", "channel-purger": "channel delete"}


@dataclass(frozen=True)
class ConnectTarget:
    """Where to connect, and as what. ``servers`` may embed credentials: never print them; use
    ``display``. ``role`` says what the connection is for (``observer`` reads the space,
    ``control`` calls the manager endpoint, ``session`` carries one attach session's rails,
    ``purger`` / ``channel-purger`` run one purge or channel delete, ``operator`` posts as the
    human participant), which decides what is minted on a static-auth mesh."""

    servers: tuple[str, ...]
    space: str = DEFAULT_SPACE
    creds: str | None = None
    nkey: str | None = None
    tls_ca: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    source: str = "default"  # flag | link | current-mesh | registry | picked | default
    mode: str | None = None  # registry mode when known: open | auth | user
    name: str | None = None  # client connection name
    root: str | None = None  # the mesh root whose .cotal/auth holds a static mesh's seed
    role: str = "observer"
    credential: Any = field(default=None, repr=False)  # a minted meshview.link.auth.Credential
    bearer: str | None = field(default=None, repr=False)  # user mode: the Cotal bearer
    sentinel: str | None = None  # user mode: the deny-all sentinel creds file
    exchange_url: str | None = None  # user mode: the auth service's exchange (public face)
    idp_token_file: str | None = None  # user mode: the IdP token the exchange takes
    manager_instance: str | None = None  # user mode, control: the manager-caller pin (``--on``)
    session_grant: dict | None = field(default=None, repr=False, compare=False)  # user mode, session
    exchanged: Any = field(default=None, repr=False, compare=False)  # the meshview.link.exchange.Bearer used
    channels: tuple[str, ...] = ()  # a connect link's ?channel= list
    problem: str | None = None  # resolution failed: connect() raises this sentence

    @property
    def display(self) -> str:
        return ",".join(redact_url(s) for s in self.servers)

    @property
    def has_credential(self) -> bool:
        if self.creds or self.nkey or self.credential is not None or self.bearer:
            return True
        if self.mode in ("auth", "user"):
            return True
        return any(urlsplit(_with_scheme(s)).username for s in self.servers)

    @property
    def user_mode(self) -> bool:
        return self.bearer is not None or self.mode == "user" or self.can_exchange

    @property
    def can_exchange(self) -> bool:
        """User mode with the material to exchange for a view (IdP token file + exchange URL); a
        mesh the registry records as open or static ignores that material (an environment set
        for another mesh)."""
        return bool(self.exchange_url and self.idp_token_file) and self.mode in (None, "user")


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


@dataclass(frozen=True)
class Link:
    """A parsed ``cotal://`` / ``cotals://`` connect link (SPEC §10)."""

    server: str  # nats:// or tls:// URL, credentials kept in its userinfo
    space: str | None
    channels: tuple[str, ...]
    tls: bool


def parse_link(url: str) -> Link | None:
    """``cotal://[token@]host[:port]/space[?channel=a,b]`` (``cotals://``: TLS; ``user:pass@``
    allowed; default port 4222; ``channel`` and ``channels`` alike). None if not a link."""
    u = urlsplit(url.strip())
    if u.scheme not in ("cotal", "cotals"):
        return None
    tls = u.scheme == "cotals"
    host = u.hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    try:
        port = u.port or 4222
    except ValueError:
        port = 4222
    netloc = f"{host}:{port}"
    if u.username is not None:
        cred = u.username if u.password is None else f"{u.username}:{u.password}"
        netloc = f"{cred}@{netloc}"
    q = parse_qs(u.query)
    chans = [c for v in q.get("channel", []) + q.get("channels", []) for c in v.split(",") if c]
    space = unquote(u.path.strip("/")) or None
    return Link(f"{'tls' if tls else 'nats'}://{netloc}", space, tuple(chans), tls)


def _is_link(s: str) -> bool:
    return s.startswith(("cotal://", "cotals://"))


def server_items(values: list[str] | str | None) -> list[str]:
    """The servers and links named by ``--server`` values, links parsed before lists are split:
    a link's query may hold commas (``?channel=a,b``), so a comma piece with no ``scheme://``
    after a link with a query belongs to that link; anything else splits on every comma."""
    if not values:
        return []
    vals = [values] if isinstance(values, str) else values
    items: list[str] = []
    for v in vals:
        for piece in v.split(","):
            piece = piece.strip()
            if not piece:
                continue
            if items and "://" not in piece and _is_link(items[-1]) and "?" in items[-1]:
                items[-1] += "," + piece
            else:
                items.append(piece)
    return items


def split_servers(values: list[str] | str | None) -> list[str]:
    res = []
    for s in server_items(values):
        link = parse_link(s)
        res.append(link.server if link else _with_scheme(s))
    return res


def _links(values: list[str] | str | None) -> list[Link]:
    return [lk for s in server_items(values) if (lk := parse_link(s))]


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


def _user_material(req: ConnectRequest) -> tuple[str | None, str | None, str | None]:
    """(bearer, sentinel creds path, problem): the bearer is read from its file."""
    bf, sentinel = req.bearer_file, req.sentinel_creds
    bearer = None
    if bf:
        try:
            bearer = Path(bf).read_text().strip() or None
        except OSError as e:
            return None, sentinel, f"cannot read the bearer file {bf}: {e.strerror}."
        if bearer is None:
            return None, sentinel, f"the bearer file {bf} is empty."
    return bearer, sentinel, None


def _entry_target(entry: dict[str, Any], source: str, common: dict[str, Any]) -> ConnectTarget:
    """A registry entry's target: its server(s), space, ``mode`` and ``root`` (mesh-registry)."""
    mode = entry.get("mode") if entry.get("mode") in ("open", "auth", "user") else None
    root = entry.get("root") if isinstance(entry.get("root"), str) and entry.get("root") else None
    servers = tuple(split_servers(entry["server"]))
    t = ConnectTarget(servers, entry["space"], source=source, mode=mode, root=root, **common)
    if mode == "user":  # the user mesh's own material, unless a flag or variable named other
        def path(k: str) -> str | None:
            v = entry.get(k)
            return v if isinstance(v, str) and v else None

        t = _replace(t, sentinel=t.sentinel or path("sentinelCreds"),
                     exchange_url=t.exchange_url or path("exchange"),
                     idp_token_file=t.idp_token_file or path("idpTokenFile"))
    return t


PickMesh = Callable[[list[dict[str, Any]]], tuple[dict[str, Any] | None, str | None]]


def none_current(reg: list[dict[str, Any]]) -> tuple[None, str]:
    """Several meshes, none current, nobody to ask: the sentence that says how to choose."""
    names = sorted(str(e["space"]) for e in reg)
    return None, (f"{len(names)} meshes are registered ({', '.join(names)}) and none is current; "
                  "name one with --space, or make one current by writing its space to "
                  "$COTAL_HOME/current-mesh.")


def resolve_target(req: ConnectRequest | None = None, *, home: Path | None = None,
                   pick: PickMesh | None = None) -> ConnectTarget:
    """Turn what was asked for into a :class:`ConnectTarget` (no network). A resolution that cannot
    be made carries its sentence in ``problem`` and :func:`connect` raises it. Several
    registered meshes with none current go to ``pick`` (the CLI's prompt on a terminal), or
    without one to :func:`none_current`."""
    req = req or ConnectRequest()
    raw = list(req.servers)
    servers = split_servers(raw)
    links = _links(raw)
    space = req.space
    bearer, sentinel, problem = _user_material(req)
    common: dict[str, Any] = dict(
        creds=req.creds, nkey=req.nkey, tls_ca=req.tls_ca,
        timeout=float(req.timeout or DEFAULT_TIMEOUT),
        bearer=bearer, sentinel=sentinel, problem=problem,
        exchange_url=req.exchange_url, idp_token_file=req.idp_token_file,
    )
    reg = load_registry(home)
    if servers:
        if space is None and links and links[0].space:
            space = links[0].space
        t = ConnectTarget(tuple(servers), space or DEFAULT_SPACE, source="link" if links else "flag",
                   channels=links[0].channels if links else (), **common)
        entry = next((e for e in reg if e.get("space") == t.space), None) if space else None
        if entry is not None and not (t.creds or t.nkey or t.bearer):
            # a --server for a registered space keeps the entry's mode and root (an override)
            e = _entry_target(entry, t.source, {})
            t = _replace(t, mode=e.mode, root=e.root, sentinel=t.sentinel or e.sentinel,
                         exchange_url=t.exchange_url or e.exchange_url,
                         idp_token_file=t.idp_token_file or e.idp_token_file)
        return _user_checked(t)
    want = space or current_space(home)
    entry = None
    source = "default"
    if want:
        entry = next((e for e in reg if e.get("space") == want), None)
        source = "registry" if space else "current-mesh"
    elif len(reg) == 1:
        entry, source = reg[0], "registry"
    elif len(reg) > 1:
        entry, why = (pick or none_current)(reg)
        if entry is None:
            return ConnectTarget((DEFAULT_SERVER,), DEFAULT_SPACE, source="default",
                          **{**common, "problem": common["problem"] or why})
        source = "picked"
    if entry and isinstance(entry.get("server"), str):
        return _user_checked(_entry_target(entry, source, common))
    if space and reg and not common["problem"]:
        # a space the registry does not hold is not quietly looked for on the default server
        names = ", ".join(sorted(str(e["space"]) for e in reg))
        common["problem"] = (f"space {space!r} is not in the mesh registry in {home or cotal_home()} "
                             f"(registered: {names}); pick one with --space, or name its broker "
                             "with --server.")
    return _user_checked(ConnectTarget((DEFAULT_SERVER,), want or DEFAULT_SPACE, source="default", **common))


def _replace(t: ConnectTarget, **kw: Any) -> ConnectTarget:
    import dataclasses

    return dataclasses.replace(t, **kw)


def _user_checked(t: ConnectTarget) -> ConnectTarget:
    """A user-auth mesh needs the bearer and the sentinel creds; say which is missing."""
    if t.problem or not t.user_mode or t.creds or t.nkey:
        return t
    if t.bearer is None and not t.can_exchange:
        missing = "--exchange-url (or COTAL_EXCHANGE_URL)" if t.idp_token_file else \
            "--idp-token-file (or COTAL_IDP_TOKEN_FILE)"
        return _replace(t, problem=(
            f"space {t.space} is a per-user-auth mesh: sign in (`cotal login`) and pass your IdP token "
            f"and the auth service's exchange ({missing} is missing), or a bearer with --bearer-file "
            "(or COTAL_BEARER_FILE), with --sentinel-creds."))
    if not t.sentinel:
        return _replace(t, problem=(
            f"space {t.space} is a per-user-auth mesh: the bearer needs the deny-all sentinel creds "
            "too (--sentinel-creds or COTAL_SENTINEL_CREDS)."))
    return _replace(t, mode="user")


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
    except Exception:  # noqa: BLE001 - an unreadable or malformed seed file names no key [counted: COTAL_LOG]
        swallowed("meshview.link.connect:_seed_public_key")
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
        self.denials: deque[tuple[int, str, str]] = deque(maxlen=256)  # (seq, kind, subject)
        self.denial_seq = 0

    async def _fire(self, cbs: list, *a: Any) -> None:
        for cb in list(cbs):
            try:
                r = cb(*a)
                if asyncio.iscoroutine(r):
                    await r
            except Exception:  # noqa: BLE001 - a listener's failure must not break the client loop [counted: COTAL_LOG]
                swallowed("meshview.link.connect:ConnectionEvents._fire")  # a listener's failure must not break the client loop

    async def error(self, e: Exception) -> None:
        self.last_error = e
        m = _DENIAL.search(str(e))
        if m:
            self.denial_seq += 1
            kind = "publish" if m.group(1).lower() == "publish" else "subscribe"
            self.denials.append((self.denial_seq, kind, m.group(2)))
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


    def denied_since(self, mark: int, kind: str, subject: str | None = None) -> str | None:
        """The first subject of ``kind`` the server denied after ``mark`` (``subject``: that one;
        nats-py lowercases the server's error text, so subjects compare without case)."""
        want = subject.lower() if subject is not None else None
        for seq, k, subj in self.denials:
            if seq > mark and k == kind and (want is None or subj.lower() == want):
                return subject or subj
        return None


_DENIAL = re.compile(r'Permissions Violation for (Publish|Subscription) to "([^"]+)"', re.IGNORECASE)
_EVENTS: "weakref.WeakKeyDictionary[NATS, ConnectionEvents]" = weakref.WeakKeyDictionary()
_CALLERS: "weakref.WeakKeyDictionary[NATS, tuple[str, str, str]]" = weakref.WeakKeyDictionary()
_TARGETS: "weakref.WeakKeyDictionary[NATS, ConnectTarget]" = weakref.WeakKeyDictionary()


class SubjectDenied(errors.PermissionDenied):
    """The server refused a publish or subscribe this connection made."""

    def __init__(self, kind: str, subject: str):
        super().__init__(f"the broker denied this credential {kind} on {subject}")
        self.kind = kind
        self.subject = subject


async def publish_checked(nc: NATS, subject: str, payload: bytes, *, timeout: float = 5.0,
                          reply: str = "") -> None:
    """Publish and confirm the server accepted it: a flush round trip, after which a
    permission violation for this subject has been reported (the server answers ``-ERR``
    before the ``PONG``). Raises :class:`SubjectDenied` instead of leaving a caller to
    wait out a deadline for an answer that was never allowed to be asked for."""
    ev = events_of(nc)
    mark = ev.denial_seq
    await nc.publish(subject, payload, reply=reply)
    # nats-py writes a flush's PING straight to the socket while the PUB may still wait in its
    # pending buffer: push the buffer out first, or the PONG can come back before the -ERR
    force = getattr(nc, "_flush_pending", None)
    if force is not None:
        await force(force_flush=True)
    # nats-py annotates flush's timeout as int, but hands it to asyncio.wait_for: a float is fine
    await nc.flush(timeout)  # type: ignore[arg-type]
    if ev.denied_since(mark, "publish", subject):
        raise SubjectDenied("publish", subject)


async def request_checked(nc: NATS, subject: str, payload: bytes, *, timeout: float = 5.0) -> Any:
    """A request whose publish the broker may refuse: the refusal is :class:`SubjectDenied`
    within one round trip (as in :func:`publish_checked`), not a wait for the timeout. The
    answer comes back on a reply inbox of the connection's own prefix; ``asyncio.TimeoutError``
    when none arrives within ``timeout``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, max_msgs=1)
    try:
        await publish_checked(nc, subject, payload, timeout=timeout, reply=inbox)
        try:
            return await sub.next_msg(timeout=max(0.001, end - loop.time()))
        except Exception as e:  # nats-py's own TimeoutError
            if "timeout" in type(e).__name__.lower():
                raise asyncio.TimeoutError() from None
            raise
    finally:
        try:
            await sub.unsubscribe()
        except Exception:  # noqa: BLE001 - already gone with max_msgs [counted: COTAL_LOG]
            swallowed("meshview.link.connect:request_checked")


def denial_mark(nc: NATS) -> int:
    return events_of(nc).denial_seq


def check_denied(nc: NATS, mark: int, kind: str = "subscribe") -> None:
    """Raise :class:`SubjectDenied` for a denial of ``kind`` reported after ``mark``."""
    subj = events_of(nc).denied_since(mark, kind)
    if subj:
        raise SubjectDenied(kind, subj)


def caller_of(nc: NATS) -> tuple[str, str, str] | None:
    """The ep caller triple a connection's credential is pinned to (a minted control
    instrument, or a user bearer's principal); ``None`` where any triple is fine (open)."""
    return _CALLERS.get(nc)


def target_of(nc: NATS) -> "ConnectTarget | None":
    """The prepared target a connection was made with (its credential included)."""
    return _TARGETS.get(nc)


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


CONTROL_CREDS_REFUSAL = (
    "this --creds file predates the v0.4 control surface (no endpoint-serve rows); re-mint it with a "
    "current cotal, or drive the manager from its project folder which mints the instrument for you")


def prepare(target: ConnectTarget) -> ConnectTarget:
    """Mint what the target's mode and role call for (no network; raises :class:`ConnectError`).

    Static mesh (``mode == "auth"``): the observer gets an admin read credential and control a
    one-shot caller instrument, both from the seed at the entry's root; a missing seed is
    refused by name. A raw ``--creds``/``--nkey`` serves the observer but not control (the
    reference CLI's refusal). A ``session`` target must arrive with its credential minted. The
    purge, channel-delete and participant roles get the reference's ``purger``,
    ``channel-purger`` and ``operator`` profiles; on a user-auth mesh the two purges need a view
    from the auth service's exchange and are refused by name."""
    if target.problem:
        raise ConnectError(target.problem)
    if target.credential is not None or target.user_mode:
        view = getattr(target.exchanged, "view", None)
        if target.user_mode and target.role == "session" and target.credential is None \
                and view != "session-caller":
            raise ConnectError("attach on a per-user-auth mesh redeems the grant through the auth "
                               "service's exchange: give your IdP token (--idp-token-file) and the "
                               "exchange (--exchange-url), or record them in the mesh's registry entry.")
        if target.user_mode and target.role in _VIEWS and target.credential is None and view != target.role:
            raise ConnectError(f"a {_VIEWS[target.role]} on a per-user-auth mesh needs a {target.role!r} view "
                               "from the auth service's exchange: give your IdP token (--idp-token-file) "
                               "and the exchange (--exchange-url); nothing was changed.")
        return target
    if target.role == "control" and (target.creds or target.nkey):
        raise ConnectError(CONTROL_CREDS_REFUSAL + ".")
    if target.mode != "auth" or target.creds or target.nkey:
        return target
    from meshview.link import auth

    if not target.root:
        raise ConnectError(f"space {target.space} is a static-auth mesh but its registry entry names "
                           "no root to mint from; pass --creds, or re-record it from its project folder.")
    if target.role == "session" or target.role not in ROLES:
        raise ConnectError("a session connection needs the session's own credential.")
    if target.root is None:
        raise ConnectError(f"space {target.space}'s control instrument is issued here, but no mesh root "
                           "names the signer to issue it with.")
    try:
        seed = auth.load_root_seed(target.root, target.space)
        if target.role == "control":
            cred = auth.mint_control(seed, target.space, issued=True)  # §13.15: this process issues it
        elif target.role == "purger":
            cred = auth.mint_purger(seed, target.space)
        elif target.role == "channel-purger":
            cred = auth.mint_channel_purger(seed, target.space)
        elif target.role == "operator":  # a participant may stay connected: it re-signs its nkey
            cred = auth.mint_operator(seed, target.space, renew=True)
        else:
            cred = auth.mint_view(seed, target.space, "admin")
    except auth.AuthError as e:
        raise ConnectError(f"{e}.") from None
    return _replace(target, credential=cred)


def connect_options(target: ConnectTarget) -> dict[str, Any]:
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
    if target.credential is not None:
        opts.update(target.credential.nats_options())
        conn_id = target.credential.public
    elif target.creds:
        check_secret_file(target.creds, "credentials")
        opts["user_credentials"] = target.creds
        conn_id = _creds_public_key(target.creds)
    elif target.nkey:
        check_secret_file(target.nkey, "nkey seed")
        opts["nkeys_seed"] = target.nkey
        conn_id = _seed_public_key(target.nkey)
    elif target.bearer is not None and target.sentinel:
        # user mode (the reference's standaloneConnectOpts): the sentinel lands the connection
        # in the callout account, the bearer rides as the token, and the client-chosen nonce is
        # both the connection name and the inbox the callout scopes
        from meshview.link.auth import user_nonce

        check_secret_file(target.sentinel, "sentinel credentials")
        opts["user_credentials"] = target.sentinel
        opts["token"] = target.bearer
        conn_id = user_nonce()
        opts["name"] = conn_id
    else:
        u = urlsplit(target.servers[0]) if target.servers else None
        if u is not None and u.username and not u.password:
            # token auth (user mode bearer): the connection names itself with a nonce
            conn_id = secrets.token_hex(16)
            opts["name"] = conn_id
    if conn_id:
        opts["inbox_prefix"] = f"_INBOX_{conn_id}"
    if any(s.startswith(("ws://", "wss://")) for s in target.servers):
        websocket_ready()
    if target.tls_ca or any(s.startswith(("tls://", "wss://")) for s in target.servers):
        ctx = ssl.create_default_context(cafile=target.tls_ca) if target.tls_ca else \
            ssl.create_default_context()
        opts["tls"] = ctx
    return opts


def is_transient(e: BaseException) -> bool:
    """A JetStream read that may answer if asked again soon: a timeout, or JetStream
    unavailable or without responders, or any JetStream answer of 5xx (a cluster electing
    leaders after a node died, a node still catching up). A refusal, a missing stream or a
    bug is not."""
    from nats import errors as ne
    from nats.js import errors as je

    if isinstance(e, je.APIError) and (e.code or 0) >= 500:
        return True  # the server's own trouble (a stream without a leader yet, offline)
    return isinstance(e, (ne.TimeoutError, asyncio.TimeoutError, TimeoutError,
                          je.ServiceUnavailableError, ne.NoRespondersError))


def explain_error(e: BaseException) -> str | None:
    """What a transport failure means, as a clause for a user's sentence: the one place that
    turns socket errnos, resolver failures, timeouts and nats-py's error classes into words
    (never a class name, an errno or a repr). ``None`` for anything that is not a known
    transport failure (a bug): the caller then says so."""
    import socket

    from nats import errors as ne
    from nats.js import errors as je

    if isinstance(e, (ConnectError, SubjectDenied)):
        return str(e).rstrip(".")
    if isinstance(e, je.NoStreamResponseError):
        return "no JetStream stream stored it (is the space provisioned? see --space)"
    if isinstance(e, ne.NoRespondersError):
        return "nothing on the mesh answered (no responders; is the space provisioned?)"
    if isinstance(e, (je.NotFoundError, je.BucketNotFoundError, je.KeyNotFoundError)):
        return "the broker holds no such stream, bucket or key (is the space provisioned?)"
    if isinstance(e, je.ServiceUnavailableError):
        return "the broker's JetStream is unavailable"
    if isinstance(e, je.APIError):
        what = e.description if e.description and e.description != "None" else "a request"
        return f"the broker's JetStream refused it: {what}"
    if isinstance(e, ne.AuthorizationError):
        return "the broker refused the credentials (wrong, revoked or not permitted)"
    if isinstance(e, (ne.ConnectionClosedError, ne.StaleConnectionError, ne.NoServersError,
                      ne.UnexpectedEOF, ne.ConnectionReconnectingError, ne.ConnectionDrainingError)):
        return "the connection to the broker was lost"
    if isinstance(e, (ne.TimeoutError, ne.FlushTimeoutError, asyncio.TimeoutError, TimeoutError)):
        return "the broker did not answer in time"
    if isinstance(e, (ne.SecureConnFailedError, ne.SecureConnRequiredError,
                      ne.SecureConnWantedError, ssl.SSLError)):
        return "the TLS handshake failed (tls:// in --server, --tls-ca for a private CA)"
    if isinstance(e, ne.MaxPayloadError):
        return "the message is larger than the broker accepts"
    if isinstance(e, socket.gaierror):
        return "the broker's host name could not be resolved"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(e, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return "the broker hung up"
    if isinstance(e, OSError) and (e.strerror or e.errno is not None):
        return (e.strerror or os.strerror(e.errno or 0)).rstrip(".").lower()
    if isinstance(e, ne.Error):
        text = " ".join(str(e).split()).removeprefix("nats: ")
        return text if text and not re.search(r"\w+Error\b|\(b'", text) else "the broker refused it"
    return None


def short_error(e: BaseException) -> str:
    """One line of an error for a warning or status bar: its first line, at most 200 chars."""
    s = str(e).strip() or type(e).__name__
    return s.splitlines()[0][:200]


def _reason(e: BaseException | None, target: ConnectTarget) -> str:
    if e is None:
        return "no answer"
    name = type(e).__name__
    s = str(e) or name
    refused = "Authorization" in name or "authorization" in s.lower()
    if not target.has_credential and (refused or isinstance(e, ConnectionResetError)
                                      or "reset by peer" in s):
        # a bare login: the broker answers -ERR, or hangs up before the -ERR is read
        return _needs_credentials(target)
    if refused:
        expired = _creds_expiry(target.creds)
        if expired:
            return f"the credentials expired at {expired}"
        return "the broker refused the credentials (wrong, revoked or not permitted)"
    if target.user_mode and (isinstance(e, ConnectionResetError) or "reset by peer" in s):
        # the callout's refusal: the broker answers the CONNECT and hangs up
        return "the broker refused the login (the auth service did not accept the bearer, or it expired)"
    if target.creds and (isinstance(e, ConnectionResetError) or "reset by peer" in s):
        # a broker that refuses a login may hang up before its -ERR is read (a loaded machine)
        expired = _creds_expiry(target.creds)
        if expired:
            return f"the credentials expired at {expired}"
        return ("the broker hung up on the login (credentials refused, revoked or not "
                "permitted, or the broker is shutting down)")
    if isinstance(e, ssl.SSLError) or "SSL" in name or "certificate" in s.lower():
        return "the TLS handshake failed"
    if isinstance(e, (ConnectionRefusedError,)) or "Connect call failed" in s or "refused" in s:
        return "connection refused"
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return "timed out"
    said = explain_error(e)
    if said is None:  # not a transport failure we know: its text, never its class or a repr
        said = " ".join(s.split())
        if re.search(r"\w+Error\b|\[Errno|\(b'", said):
            said = "the connection failed for a reason the client did not name"
    for secret in _secrets_of(target):
        said = said.replace(secret, "***")
    return said.rstrip(".")


def _needs_credentials(target: ConnectTarget) -> str:
    """The bare login a secured broker refused: say so, and how to give credentials (and,
    when a registry is there, that it holds no entry for this space to mint from)."""
    home = cotal_home()
    reg = sorted(str(e["space"]) for e in load_registry(home))
    if reg and target.space not in reg:
        return (f"the broker requires credentials and none were given: the mesh registry in "
                f"{home} has no space {target.space!r} to mint them for (registered: "
                f"{', '.join(reg)}); pick one with --space, or pass --creds FILE or --nkey FILE")
    return ("the broker requires credentials and none were given; pass --creds FILE or "
            "--nkey FILE (or user:pass@ or token@ in --server; --bearer-file and "
            "--sentinel-creds on a per-user-auth mesh), or set COTAL_HOME to the home whose "
            "mesh registry records this mesh")


def _secrets_of(target: ConnectTarget) -> list[str]:
    out = []
    for srv in target.servers:
        u = urlsplit(srv)
        out += [x for x in (u.username, u.password) if x]
    return out


async def connect(target: ConnectTarget) -> tuple[NATS, ConnectTarget]:
    """Open the connection; raises :class:`ConnectError` (one sentence) within the timeout."""
    if target.problem:
        raise ConnectError(target.problem)
    if target.credential is None and not (target.creds or target.nkey) and target.can_exchange:
        target = await exchanged_target(target)
    target = prepare(target)
    bad = next((u for u in target.servers if urlsplit(u).scheme.lower() not in SCHEMES), None)
    if bad is not None:
        scheme = urlsplit(bad).scheme
        raise ConnectError(
            f"{redact_url(bad)} is not a broker URL: a Cotal mesh speaks NATS, not {scheme}; "
            f"give --server nats://HOST:4222 (or tls://, ws://, wss://).")
    if getattr(target.credential, "issued", None) is not None:
        await _issue(target)
    opts = connect_options(target)
    renewer = _BearerRenewer(target) if _standing_user(target) else None
    if renewer is not None:
        opts["token"] = renewer.current  # read on every (re)connect: the freshest bearer
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
            f"could not reach {_where(target)} within {target.timeout:g}s "
            f"({_reason(err, target)}){_hint(target)}."
        ) from None
    except Exception as e:  # noqa: BLE001 - every failure becomes one sentence
        if "NoServers" in type(e).__name__ and ev.last_error is not None:
            e = ev.last_error
        await _abandon(nc)
        raise ConnectError(
            f"could not connect to {_where(target)}: {_reason(e, target)}{_hint(target)}."
        ) from None
    nc.options["max_reconnect_attempts"] = -1
    nc.renews = bool(getattr(target.credential, "renews", False)) or renewer is not None
    if renewer is not None:
        renewer.start(nc)
    ev.connecting = False
    _TARGETS[nc] = target
    caller = _caller_for(target)
    if caller is not None:
        _CALLERS[nc] = caller
    return nc, target


# the exchange view each role's connection rides on a user mesh (None: the baseline agent bearer)
ROLE_VIEWS = {"control": "manager-caller", "session": "session-caller", "purger": "purger",
              "channel-purger": "channel-purger", "observer": None, "operator": None}


async def exchanged_target(target: ConnectTarget) -> ConnectTarget:
    """``target`` with the bearer its role needs, from the auth service's exchange (a held
    bearer while fresh, :class:`meshview.link.exchange.BearerCache`). ``control`` is a
    ``manager-caller`` view pinned to ``target.manager_instance`` (or to the instance the exchange
    picks), ``session`` a ``session-caller`` view redeeming ``target.session_grant``; an observer
    with a ``--bearer-file`` bearer keeps it. Raises :class:`ConnectError` with the exchange's
    sentence."""
    from meshview.link.exchange import ExchangeError, cache_for

    view = ROLE_VIEWS.get(target.role)
    if view is None and target.bearer is not None and target.exchanged is None:
        return target  # the bearer given by file (watch)
    if view == "session-caller" and not target.session_grant:
        raise ConnectError("a session connection on a per-user-auth mesh needs the session grant to redeem.")
    assert target.exchange_url and target.idp_token_file
    cache = cache_for(target.exchange_url, target.idp_token_file)
    try:
        b = await cache.get(view, manager_instance_id=target.manager_instance if view == "manager-caller" else None,
                            session_grant=target.session_grant if view == "session-caller" else None)
    except ExchangeError as e:
        raise ConnectError(str(e), e.code) from None
    return _replace(target, bearer=b.token, exchanged=b, mode="user",
                    manager_instance=b.manager_instance_id if view == "manager-caller" else target.manager_instance)


def _standing_user(target: ConnectTarget) -> bool:
    """A connection that stays up on an exchanged baseline bearer (the console's observer, a
    participant): it renews its bearer instead of dying at the bearer's ``exp``."""
    return target.exchanged is not None and target.role in ("observer", "operator")


class _BearerRenewer:
    """Keeps a standing user-mode connection's bearer fresh: re-exchanged once 80% of its
    lifetime has passed (the cache's rule), so a reconnect (and the broker's end of a connection
    at expiry, which a renewing client turns into one) authenticates with a bearer still valid.
    The connection keeps its connect name: the baseline view is never issued on ``ep.v1``, so no
    accepted row is tied to it."""

    def __init__(self, target: ConnectTarget) -> None:
        self.target = target
        self.bearer = target.exchanged
        self.renewals = 0
        self.last_error: str | None = None
        self._task: asyncio.Task | None = None

    def current(self) -> str:
        return self.bearer.token

    def start(self, nc: NATS) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(nc), name="bearer-renew")
        _RENEWERS[nc] = self
        events_of(nc).on_close.append(self.stop)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _run(self, nc: NATS) -> None:
        from meshview.link.exchange import ExchangeError, RENEW_AT, cache_for

        cache = cache_for(self.target.exchange_url or "", self.target.idp_token_file or "")
        while not nc.is_closed:
            b = self.bearer
            due = b.issued_at + RENEW_AT * max(1.0, b.expires_at - b.issued_at)
            await asyncio.sleep(max(0.5, due - time.time()))
            try:
                fresh = await cache.get(None)
            except ExchangeError as e:
                self.last_error = str(e)
                await asyncio.sleep(5.0)
                continue
            if fresh.token != b.token:
                self.bearer = fresh
                self.renewals += 1


_RENEWERS: "weakref.WeakKeyDictionary[NATS, _BearerRenewer]" = weakref.WeakKeyDictionary()


def bearer_renewals(nc: NATS) -> int:
    """How many times a standing user-mode connection's bearer was re-exchanged (0 elsewhere)."""
    r = _RENEWERS.get(nc)
    return r.renewals if r is not None else 0


def exchanged_of(nc: NATS) -> Any:
    """The exchanged bearer a connection was made with (``meshview.link.exchange.Bearer``), or None."""
    t = _TARGETS.get(nc)
    return t.exchanged if t is not None else None


async def _issue(target: ConnectTarget) -> None:
    """§13.15 on a static mesh: this process holds the signer, so it is the issuer of the control
    instrument it minted, and writes the instrument's accepted row (over a one-shot ``issuer``
    connection) before the instrument connects and reads it back."""
    import nats

    from meshview.link import auth
    from meshview.link.issuance import IssuanceError, issue_instrument

    if target.root is None:
        raise ConnectError(f"space {target.space}'s control instrument is issued here, but no mesh root "
                           "names the signer to issue it with.")
    try:
        seed = auth.load_root_seed(target.root, target.space)
    except auth.AuthError as e:
        raise ConnectError(f"{e}.") from None
    issuer = _replace(target, credential=auth.mint_issuer(seed, target.space), name="cotal-issuer")

    async def open_issuer() -> NATS:
        opts = connect_options(issuer)
        opts.update(allow_reconnect=False, max_reconnect_attempts=0)
        return await asyncio.wait_for(nats.connect(**opts), timeout=target.timeout + 0.5)

    try:
        await issue_instrument(open_issuer, target.credential)
    except IssuanceError as e:
        raise ConnectError(f"{e}.") from None
    except Exception as e:  # noqa: BLE001 - every failure becomes one sentence
        raise ConnectError(f"the control instrument's accepted row could not be written at {_where(target)}: "
                           f"{_reason(e, target)}.") from None


def _caller_for(target: ConnectTarget) -> tuple[str, str, str] | None:
    cred = target.credential
    if cred is not None and getattr(cred, "caller", None):
        return cred.caller
    if target.bearer is not None and target.role == "control":
        from meshview.link.auth import AuthError, bearer_principal

        try:
            return bearer_principal(target.bearer)
        except AuthError:
            return None
    return None


def _where(target: ConnectTarget) -> str:
    """The server, and where it came from when the user did not name it."""
    if target.source == "default":
        reg = sorted(str(e["space"]) for e in load_registry())
        if reg:  # current-mesh names a space the registry does not hold
            return (f"{target.display}, the default server (no --server given, and space "
                    f"{target.space!r} is not in the mesh registry in {cotal_home()}; "
                    f"registered: {', '.join(reg)})")
        return (f"{target.display}, the default server (no --server given and no mesh "
                f"registered in {cotal_home()})")
    if target.source in ("registry", "current-mesh"):
        return f"{target.display} (space {target.space} in the mesh registry)"
    return target.display


def _hint(target: ConnectTarget) -> str:
    return "; pass --server URL to name the broker" if target.source == "default" else ""


async def _abandon(nc: NATS) -> None:
    try:
        await asyncio.wait_for(nc.close(), 1.0)
    except Exception:  # noqa: BLE001 - an abandoned connection's close is best effort [counted: COTAL_LOG]
        swallowed("meshview.link.connect:_abandon")
