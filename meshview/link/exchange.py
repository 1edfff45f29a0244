"""The auth service's exchange on a per-user-auth mesh: an IdP token in, a Cotal bearer out.

A user mesh issues nothing locally (no seed): every connection that needs more than the baseline
``agent`` profile asks the exchange for a *view* (user-auth digest §2). The request is
``POST <exchange>/exchange`` with ``{idpToken, actor, view?, managerInstanceId?, sessionGrant?}``;
the answer is 200 ``{token, managerInstanceId?, ...}`` or a non-200 ``{error}``. The CLI's ledger
actor is ``cli``. A bearer lives at most 900 s, so :class:`BearerCache` hands out one per view and
re-exchanges once 80% of its lifetime has passed.

The HTTP call is stdlib ``urllib`` run in a worker thread with a bounded timeout, so an event loop
never blocks on it. Every failure is one :class:`ExchangeError` sentence naming what is missing and
the flag or command that fixes it; no token (IdP or bearer) ever appears in one.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from meshview.errors import MeshviewError
from meshview.wire.sanitize import inline as _clean

CLI_ACTOR = "cli"
EXCHANGE_TIMEOUT_S = 8.0
RENEW_AT = 0.8  # re-exchange once this share of a bearer's lifetime has passed
MAX_BODY = 64 * 1024
ERROR_MAX = 240
# the ledger scope each view needs (the reference's VIEW_REQUIRED_SCOPE); views absent here need none
VIEW_SCOPE = {"admin": "admin", "purger": "admin", "channel-purger": "admin", "channel-writer": "admin",
              "deployer": "spawn", "manager-service": "supervise", "transfer-writer": "admin"}
PUBLIC_VIEWS = ("channel-writer", "channel-purger", "manager-caller", "session-caller", "transfer-writer")
VIEWS = ("admin", "purger", "channel-purger", "channel-writer", "deployer", "manager-service",
         "manager-caller", "session-caller", "transfer-writer")


class ExchangeError(MeshviewError, RuntimeError):
    """The exchange did not issue a bearer; ``code`` is the §13.3-style code (``unavailable``,
    ``unauthenticated``, ``permission-denied``, ``bad-request``), the message one sentence."""

    def __init__(self, code: str, message: str, *, status: int | None = None, said: str | None = None):
        message = " ".join(message.split())
        super().__init__(message if message.endswith(".") else message + ".")
        self.code = code
        self.status = status
        self.said = said  # the auth service's own sentence, neutralised, when it gave one


def _b64url_json(part: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def token_claims(token: str) -> dict:
    """A compact JWT's claims, unverified (client side: the exchange and the callout verify);
    {} when it is not one."""
    try:
        c = _b64url_json(token.split(".")[1])
    except (IndexError, ValueError):
        return {}
    return c if isinstance(c, dict) else {}


@dataclass(frozen=True, repr=False)
class Bearer:
    """One exchanged bearer: the token (secret: never printed; ``repr`` hides it), its lifetime,
    the principal it is bound to and what the exchange said about it."""

    token: str
    view: str | None
    owner: str
    actor: str
    lifecycle_uid: str
    scope: tuple[str, ...]
    issued_at: float
    expires_at: float
    manager_instance_id: str | None = None
    session: dict | None = None

    @property
    def caller(self) -> tuple[str, str, str]:
        return self.owner, self.actor, self.lifecycle_uid

    def fresh(self, now: float | None = None) -> bool:
        """Still inside the first 80% of its lifetime."""
        now = time.time() if now is None else now
        life = max(1.0, self.expires_at - self.issued_at)
        return now < self.issued_at + RENEW_AT * life

    def __repr__(self) -> str:
        return f"Bearer({self.view or 'agent'}, {self.owner}.{self.actor}, exp {int(self.expires_at)})"


def bearer_of(token: str, *, view: str | None, answer: dict, now: float | None = None) -> Bearer:
    """A :class:`Bearer` from the exchange's token and answer; a token that names no principal
    is refused (the callout would refuse it too)."""
    c = token_claims(token)
    act = c.get("act")
    if not isinstance(act, dict):
        act = {}
    owner, actor, uid = c.get("sub"), act.get("actor"), act.get("lifecycleUid")
    if not (isinstance(owner, str) and isinstance(actor, str) and isinstance(uid, str)
            and owner and actor and uid):
        raise ExchangeError("internal", "the exchange answered with a bearer that names no principal "
                            "(sub, act.actor, act.lifecycleUid); the auth service may be too old")
    now = time.time() if now is None else now
    exp, iat = c.get("exp"), c.get("iat")
    exp = float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else now + 60.0
    iat = float(iat) if isinstance(iat, (int, float)) and not isinstance(iat, bool) else now
    scope = act.get("scope")
    if not isinstance(scope, list):
        scope = []
    iid = answer.get("managerInstanceId") or act.get("managerInstanceId")
    return Bearer(token, view, owner, actor, uid, tuple(s for s in scope if isinstance(s, str)),
                  min(iat, now), exp, iid if isinstance(iid, str) and iid else None,
                  act.get("session") if isinstance(act.get("session"), dict) else None)


# ---- the IdP token ------------------------------------------------------------------------------


def read_idp_token(path: str) -> str:
    """The IdP token in ``path`` (stripped), checked for expiry before anything is sent."""
    try:
        tok = Path(path).read_text().strip()
    except OSError as e:
        raise ExchangeError("unauthenticated", f"cannot read the IdP token file {path}: "
                            f"{(e.strerror or 'unreadable').lower()}; sign in again, or point "
                            "--idp-token-file (COTAL_IDP_TOKEN_FILE) at your token") from None
    if not tok:
        raise ExchangeError("unauthenticated", f"the IdP token file {path} is empty; sign in again "
                            "and write the token there (--idp-token-file)")
    exp = token_claims(tok).get("exp")
    if isinstance(exp, (int, float)) and not isinstance(exp, bool) and exp <= time.time():
        when = time.strftime("%H:%M:%S UTC", time.gmtime(exp))
        raise ExchangeError("unauthenticated", f"your IdP token in {path} expired at {when}; sign in "
                            "again and write the new token there (--idp-token-file)")
    return tok


# ---- one exchange ---------------------------------------------------------------------------------


def _refusal(status: int, said: str, view: str | None, url: str, token_file: str | None) -> ExchangeError:
    """The sentence for a non-200 answer: what is missing, and what fixes it."""
    low = said.lower()
    what = f"the {view!r} view" if view else "a bearer"
    where = f"the auth service at {url}"
    tf = f" in {token_file}" if token_file else ""
    quoted = f" ({said})" if said else ""
    if "was issued to" in low or "redemption" in low:
        return ExchangeError("permission-denied", f"{where} refused to redeem the session{quoted}; "
                             "attach again to get a grant of your own", status=status, said=said)
    if "expired" in low and status in (400, 401):
        return ExchangeError("unauthenticated", f"{where} says your IdP token{tf} has expired{quoted}; "
                             "sign in again and write the new token there (--idp-token-file)",
                             status=status, said=said)
    if "scope" in low or "not granted" in low:
        need = VIEW_SCOPE.get(view or "")
        if need:
            return ExchangeError("permission-denied", f"{what} needs ledger scope {need!r}, which your "
                                 f"actor grant does not hold{quoted}; ask an admin to grant it "
                                 f"(cotal actor grant {CLI_ACTOR} --scope {need})", status=status, said=said)
        return ExchangeError("permission-denied", f"{where} refused {what}{quoted}", status=status, said=said)
    if status == 401 and "manager candidate" in low:
        return ExchangeError("unavailable", f"{where} found no manager to issue {what} for{quoted}; "
                             "start one, or pin one with --on INSTANCE", status=status, said=said)
    if status == 401:
        return ExchangeError("unauthenticated", f"{where} refused your IdP token{tf}{quoted}; sign in "
                             "again, or point --idp-token-file (COTAL_IDP_TOKEN_FILE) at a current token",
                             status=status, said=said)
    if view and view not in PUBLIC_VIEWS and (status == 404 or (status == 403 and "loopback" in low)):
        return ExchangeError("permission-denied", f"{where} issues {what} only on its loopback "
                             f"(operator) face, not the public one{quoted}; an operator runs this on the "
                             "auth service's host; nothing was changed", status=status, said=said)
    if status == 403:
        return ExchangeError("permission-denied", f"{where} refused {what}{quoted}", status=status, said=said)
    if status >= 500:
        return ExchangeError("unavailable", f"{where} failed (HTTP {status}){quoted}; try again",
                             status=status, said=said)
    return ExchangeError("bad-request" if status == 400 else "permission-denied",
                         f"{where} refused {what} (HTTP {status}){quoted}", status=status, said=said)


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "***")
    return _clean(" ".join(text.split()), limit=ERROR_MAX).rstrip(".")


def exchange_sync(url: str, idp_token: str, *, view: str | None = None, manager_instance_id: str | None = None,
                  session_grant: dict | None = None, actor: str = CLI_ACTOR, cap: str | None = None,
                  timeout: float = EXCHANGE_TIMEOUT_S, token_file: str | None = None) -> Bearer:
    """One exchange (blocking: call :func:`exchange` from an event loop)."""
    if view is not None and view not in VIEWS:
        raise ExchangeError("bad-request", f"{view!r} is not an exchange view")
    base = url.rstrip("/")
    u = urlsplit(base)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ExchangeError("bad-request", f"{url!r} is not an exchange URL; give --exchange-url "
                            "http://HOST:PORT (or COTAL_EXCHANGE_URL)")
    body: dict = {"idpToken": idp_token, "actor": actor}
    if view is not None:
        body["view"] = view
    if manager_instance_id is not None:
        body["managerInstanceId"] = manager_instance_id
    if session_grant is not None:
        body["sessionGrant"] = session_grant
    headers = {"content-type": "application/json", "accept": "application/json"}
    if cap:
        headers["authorization"] = f"Bearer {cap}"
    req = urllib.request.Request(base + "/exchange", data=json.dumps(body).encode(), headers=headers,
                                 method="POST")
    secrets = (idp_token, cap or "")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - http(s) checked above
            status, raw = resp.status, resp.read(MAX_BODY + 1)
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read(MAX_BODY + 1) if e.fp is not None else b""
    except (TimeoutError, OSError, urllib.error.URLError) as e:
        why = getattr(e, "reason", e)
        why = "timed out" if isinstance(why, TimeoutError) or "timed out" in str(why) else \
            (getattr(why, "strerror", None) or str(why) or "unreachable").lower()
        raise ExchangeError("unavailable", f"the auth service's exchange at {base} could not be reached "
                            f"({_scrub(str(why), secrets)}); check --exchange-url (COTAL_EXCHANGE_URL) "
                            "and that the auth service is running") from None
    try:
        answer = json.loads(raw[:MAX_BODY]) if raw else {}
    except ValueError:
        answer = {}
    answer = answer if isinstance(answer, dict) else {}
    if status != 200:
        said = answer.get("error")
        said = _scrub(said, secrets) if isinstance(said, str) else ""
        raise _refusal(status, said, view, base, token_file)
    token = answer.get("token")
    if not isinstance(token, str) or not token:
        raise ExchangeError("internal", f"the auth service at {base} answered without a bearer")
    b = bearer_of(token, view=view, answer=answer)
    if manager_instance_id is not None and b.manager_instance_id not in (None, manager_instance_id):
        raise ExchangeError("internal", f"the auth service at {base} pinned another manager instance "
                            "than the one asked for")
    return b


async def exchange(url: str, idp_token: str, *, timeout: float = EXCHANGE_TIMEOUT_S, **kw: Any) -> Bearer:
    """:func:`exchange_sync` in a worker thread, bounded by ``timeout`` (plus a second of slack)."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(exchange_sync, url, idp_token, timeout=timeout, **kw),
                                      timeout + 1.0)
    except asyncio.TimeoutError:
        raise ExchangeError("unavailable", f"the auth service's exchange at {url.rstrip('/')} did not "
                            f"answer within {timeout:g} s; try again") from None


# ---- the per-view cache ---------------------------------------------------------------------------


@dataclass(repr=False)
class BearerCache:
    """One bearer per (view, manager instance) for one user: handed out while fresh, exchanged
    again once 80% of its lifetime has passed (a session bearer is never cached: each grant is
    redeemed once; nor is an unpinned ``manager-caller``, the exchange's pick of a live manager). The IdP token is read from its file on every exchange, so a refreshed file
    takes effect at the next one."""

    url: str
    idp_token_file: str
    cap: str | None = None
    timeout: float = EXCHANGE_TIMEOUT_S
    exchanges: int = 0  # how many exchanges were made (tests and the status line read it)
    _held: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __repr__(self) -> str:
        return f"BearerCache({self.url}, {len(self._held)} held)"

    async def get(self, view: str | None = None, *, manager_instance_id: str | None = None,
                  session_grant: dict | None = None) -> Bearer:
        key = (view, manager_instance_id)
        # a session grant is redeemed once; an unpinned manager-caller is the exchange's pick of a
        # live manager, made again each time (a held pick would outlive a replaced manager)
        pick = view == "manager-caller" and manager_instance_id is None
        if session_grant is None and not pick:
            with self._lock:
                held = self._held.get(key)
            if held is not None and held.fresh():
                return held
        tok = read_idp_token(self.idp_token_file)
        b = await exchange(self.url, tok, view=view, manager_instance_id=manager_instance_id,
                           session_grant=session_grant, cap=self.cap, timeout=self.timeout,
                           token_file=self.idp_token_file)
        with self._lock:
            self.exchanges += 1
            if session_grant is None and not pick:
                self._held[key] = b
        return b

    def forget(self, view: str | None = None, manager_instance_id: str | None = None) -> None:
        """Drop a held bearer (the broker refused it): the next :meth:`get` exchanges again."""
        with self._lock:
            self._held.pop((view, manager_instance_id), None)


_CACHES: dict[tuple[str, str], BearerCache] = {}
_CACHES_LOCK = threading.Lock()


def cache_for(url: str, idp_token_file: str) -> BearerCache:
    """The process's one cache for this exchange and token file (the console's panels share it)."""
    key = (url.rstrip("/"), str(idp_token_file))
    with _CACHES_LOCK:
        c = _CACHES.get(key)
        if c is None:
            c = _CACHES[key] = BearerCache(key[0], key[1])
        return c
