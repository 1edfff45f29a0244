"""The caller side of an attach: locate the seat, establish, stream, reconnect, hand back.

:class:`AttachSession` is UI-neutral: bytes come out through ``on_output`` (awaited, so credit
flows back only once the consumer has taken them), status lines through ``on_notice``, and
keystrokes go in with :meth:`AttachSession.send_keys`. The CLI passthrough and the console's
embedded pane both drive it; neither needs a tty.

With ``consumer_credit`` the consumer returns from ``on_output`` at once and calls
:meth:`AttachSession.release` as it gets through the bytes; credit follows that, not delivery,
so a slow consumer still sees a ``drop`` notice the moment it lands.

Size: over 500 lines because locating, establishing, streaming, reconnecting and handing back
are one session's life and share its link state.

A link is left when the manager ends it, a rail faults, the connection drops or the manager
falls silent past ``liveness_s`` (idle credits, not output, prove it alive). Unless the manager
let go first, every abandoned session is handed back: ``close`` on its ``in`` rail, flushed.

On a per-user-auth mesh (user-auth digest §4) the control connection carries a ``manager-caller``
view pinned to one manager instance: the seat is inspected there (no scatter, no lease read) and
``attach`` is asked in ``owner`` mode; the grant is redeemed at the auth service's exchange for a
``session-caller`` bearer, and the rails ride a connection of their own on it. A redemption the
auth plane refuses ends the attach with its sentence; a re-establishment (a manager restart)
asks for a fresh grant and redeems that one.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections import deque
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from meshview.connect import ConnectError, caller_of
from meshview.resolve import AmbiguousName, Candidate, resolve
from meshview.sanitize import inline
from meshview.wire import frames as tf
from meshview.wire.endpoint import MANAGER, Caller, eps_subject, is_id_token, is_lifecycle_token
from meshview.wire.envelope import EndpointError, refused_before_effect
from meshview.wire.names import bucket_names, space_token

from .broker import server_version, too_old
from .endpoint import EndpointClient, Reply
from .rail import PEER_SILENT, Rail, RailError, check_window, open_rail
from .registry import RegistryUnreadable, read_leases

BACKOFF_S = (1, 2, 5, 10, 30)
MAX_REBIND = 16
CALL_DEADLINE_MS = 10_000
LOCATE_DEADLINE_MS = 3_000
KEYS_CREDIT_WAIT_S = 2.0
# A live manager re-advertises credit every second on an idle session; this many seconds of
# nothing means it is gone (a crash, a partition, a rail it tore down). Output is not needed.
LIVENESS_S = 10.0
HAND_BACK_S = 2.0  # per step (connect, flush) of handing an abandoned session back


class AttachError(Exception):
    """An attach that could not be made; ``code`` is the §13.3 code that decides what to do.

    ``message`` is for a terminal: a manager's words in it are neutralised (a manager is an
    ordinary endpoint anyone may run); ``raw`` keeps them exact, for JSON."""

    def __init__(self, code: str, message: str):
        super().__init__(inline(message))
        self.code = code
        self.raw = message
        self.message = inline(message)


@dataclass
class Notice:
    """A status line for the user.

    ``kind``: reconnecting | reconnected | drop | refused | end | held (a session we abandoned
    could not be handed back; the manager releases it when it notices the silence).
    """

    kind: str
    text: str
    reason: str | None = None
    bytes: int = 0


def end_text(reason: str, name: str) -> str:
    """The exact CLI wording for a session end."""
    if reason == "detached":
        return "[cotal: detached]"
    if reason == "process-exit":
        return f"[cotal: the program on seat {name} exited]"
    if reason in ("target-despawn", "not-found"):
        return f"[cotal: seat {name} is gone]"
    if reason == "manager-restart":
        return "[cotal: manager restarted; re-attach]"
    if reason == "expired":
        return "[cotal: the session expired; re-attach]"
    if reason == PEER_SILENT:
        return "[cotal: the manager stopped answering; session lost]"
    return f"[cotal: session ended ({reason})]"


def reconnect_text(reason: str) -> str:
    if reason == PEER_SILENT:
        return "[cotal: the manager stopped answering, reconnecting]"
    return "[cotal: connection lost, reconnecting]"


def drop_text(n: int) -> str:
    return f"[cotal: {n} bytes dropped - backpressure]"


async def live_instances(nc, space: str) -> set[str]:
    """Manager instances holding a live lease in ``cotal_manager_<space>``: none when there is
    no lease bucket; a lease read that fails is ``unavailable`` (never "no manager")."""
    try:
        return await read_leases(nc.jetstream(), space)
    except RegistryUnreadable as e:
        if e.absent:
            return set()
        raise EndpointError("unavailable", f"could not read the manager leases of space {space} ({e})",
                            outcome="not-executed") from None


@dataclass
class Located:
    row: dict
    instance_id: str
    epoch: int


async def locate(ep: EndpointClient, name: str, *, instance_id: str | None = None) -> Located:
    """Find the seat by ``inspect`` across managers (or on the pinned instance)."""
    if instance_id:
        r = await ep.call("inspect", {"name": name}, instance_id=instance_id, deadline_ms=CALL_DEADLINE_MS)
        return Located(r.unwrap(), r.instance_id, r.epoch)
    expected = await live_instances(ep.nc, ep.space)
    if not expected:
        raise EndpointError("unavailable", f"no manager is serving space {ep.space}", outcome="not-executed")
    replies = await ep.scatter("inspect", {"name": name}, deadline_ms=LOCATE_DEADLINE_MS, expected=expected)
    found = [r for r in replies if r.ok]
    if len(found) == 1:
        return Located(found[0].data, found[0].instance_id, found[0].epoch)
    if len(found) > 1:  # two managers each serve a seat of that name: never the first reply
        _refuse_ambiguous(name, [(r, r.data) for r in found])
    errors = [r.error for r in replies if r.error is not None]
    for e in errors:
        if e.code != "not-found":
            raise e
    if errors:
        by_id = await _locate_by_id(ep, name, expected)
        if by_id is not None:
            return by_id
        raise EndpointError("not-found", f"no seat named {name!r}", outcome="not-executed")
    raise EndpointError("unavailable", f"no manager answered in space {ep.space}", outcome="unknown")


def _refuse_ambiguous(name: str, hits: list[tuple[Reply, object]]) -> None:
    """Two seats answer to ``name``: a refusal naming each (id and manager instance)."""
    cands = [Candidate(_principal(row.get("id")) if isinstance(row, dict) else "?",
                       str(row.get("name", name)) if isinstance(row, dict) else name,
                       where=f"manager {r.instance_id}") for r, row in hits]
    try:
        resolve(name, cands, what="seat")
    except AmbiguousName as e:
        raise EndpointError("failed-precondition", f"{e} (--on INSTANCE picks the manager)",
                            outcome="not-executed") from None
    raise EndpointError("failed-precondition", f"seat {name!r} answers on {len(hits)} managers; "
                        "--on INSTANCE picks one", outcome="not-executed")


def _principal(rid: object) -> str:
    """A row id as a principal (a bare actor is the open/static owner's)."""
    rid = rid if isinstance(rid, str) and rid else "?"
    return rid if "." in rid else f"local.{rid}"


async def _locate_by_id(ep: EndpointClient, seat_id: str, expected: set[str]) -> Located | None:
    """A seat addressed by its row id (as ``cotal ps --json`` prints it), not its name."""
    replies = await ep.scatter("ps", None, deadline_ms=LOCATE_DEADLINE_MS, expected=expected)
    hits = [(r, row) for r in replies if r.ok and isinstance(r.data, list)
            for row in r.data if isinstance(row, dict) and seat_id in (row.get("id"), _principal(row.get("id")))]
    if len(hits) > 1:
        _refuse_ambiguous(seat_id, hits)
    if not hits:
        return None
    r, row = hits[0]
    return Located(row, r.instance_id, r.epoch)


def target_for(row: object, caller: Caller) -> dict:
    """The §13.3 target of a seat's row: ``id`` (``owner.actor``, or the actor under the caller's
    owner) and its ``lifecycleUid``, both required row fields; anything else is refused here."""
    if not isinstance(row, dict):
        raise AttachError("contract-invalid", "the manager answered inspect without a seat row")
    rid = row.get("id")
    if not isinstance(rid, str) or not rid:
        raise AttachError("contract-invalid", "the seat row carries no id")
    owner, dot, actor = rid.partition(".")
    if not dot:
        owner, actor = caller.owner, rid
    uid = row.get("lifecycleUid")
    if not is_lifecycle_token(uid):
        raise AttachError("contract-invalid", "the seat row carries no lifecycleUid")
    return {"owner": owner, "actor": actor, "lifecycleUid": uid}


def check_grant(grant: object, space: str, reply: Reply) -> dict:
    """The grant must name the answering instance and epoch, and its own exact rails."""
    if not isinstance(grant, dict) or grant.get("v") != 1:
        raise AttachError("contract-invalid", "the attach reply carries no v1 grant")
    sid = grant.get("sessionId")
    serving = grant.get("serving")
    if not isinstance(serving, dict):
        raise AttachError("contract-invalid", "the grant names no serving instance")
    if not is_id_token(sid) or grant.get("endpoint") != MANAGER or grant.get("space") != space_token(space):
        raise AttachError("contract-invalid", "the grant names another session space or endpoint")
    if serving.get("instanceId") != reply.instance_id or serving.get("epoch") != reply.epoch:
        raise AttachError("contract-invalid", "the grant's serving instance is not the one that answered")
    want = {d: eps_subject(space, MANAGER, sid, reply.epoch, d) for d in ("in", "out")}
    if grant.get("subjects") != want:
        raise AttachError("contract-invalid", "the grant's session subjects are not its own rails")
    try:
        check_window(grant.get("window", 64))
    except ValueError:
        raise AttachError("contract-invalid", "the grant's window is not an integer in range") from None
    return grant


class _Link:
    """One established session: its grant, rails and how it ended."""

    def __init__(self, grant: dict, nc, owns_nc: bool):
        self.grant = grant
        self.nc = nc
        self.owns_nc = owns_nc
        self.rail: Rail | None = None
        self.ended: asyncio.Future = asyncio.get_running_loop().create_future()
        self.end_reason: str | None = None
        self.unreleased: deque[list[int]] = deque()  # consumer credit: [seq, bytes not yet released]

    def finish(self, reason: str) -> None:
        if not self.ended.done():
            self.ended.set_result(reason)


Output = Callable[[bytes], Any]
NoticeFn = Callable[[Notice], Any]


class AttachSession:
    def __init__(
        self,
        space: str,
        name: str,
        *,
        nc=None,
        connect: Callable[[], Awaitable[Any]] | None = None,
        on_output: Output | None = None,
        on_notice: NoticeFn | None = None,
        reconnect: bool = True,
        backoff: tuple[float, ...] = BACKOFF_S,
        size: tuple[int, int] | None = None,
        instance_id: str | None = None,
        caller: Caller | None = None,
        liveness_s: float = LIVENESS_S,
        consumer_credit: bool = False,
    ):
        if nc is None and connect is None:
            raise ValueError("AttachSession needs a connection or a connect factory")
        self.space = space_token(space)
        self.name = name
        self._nc = nc
        self._connect = connect
        self.on_output = on_output
        self.on_notice = on_notice
        self.reconnect = reconnect
        self.backoff = backoff
        self.size = size
        self.pin = instance_id
        self.caller = caller or Caller.fresh()
        self.liveness_s = liveness_s  # 0 disables the silent-peer check
        self.consumer_credit = consumer_credit
        self.link: _Link | None = None
        self.final_reason: str | None = None
        self.keys_dropped = 0
        self.bytes_dropped = 0
        self._closing = False
        self._wakeup = asyncio.Event()
        self._relayed: set[str] = set()

    # ---- public API -------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self.link is not None and self.link.rail is not None and self.link.rail.alive

    async def open(self) -> None:
        """First establishment; raises :class:`AttachError` when it cannot be made."""
        await self._establish()

    async def run(self) -> str:
        """Stream until a final end; reconnects on transient ones. Returns the final reason."""
        attempt = 0
        while True:
            link = self.link
            if link is not None:
                reason = await link.ended
                await self._drop_link(link)
                if self._closing or reason == "detached":
                    return self._final("detached")
                if reason in tf.FINAL_REASONS:
                    return self._final(reason)
                if not self.reconnect:
                    return self._final(reason)
                await self._notice(Notice("reconnecting", reconnect_text(reason), reason))
                attempt = 0
            # backoff ladder; 30 s repeats
            delay = self.backoff[min(attempt, len(self.backoff) - 1)]
            attempt += 1
            if await self._sleep(delay):
                return self._final("detached")
            try:
                await self._establish()
            except AttachError as e:
                if self._closing:
                    return self._final("detached")
                if e.code == "not-found":
                    return self._final("not-found")
                if e.code in ("permission-denied", "contract-invalid"):
                    await self._notice(Notice("refused", f"[cotal: {e.message}]", e.code))
                    return self._final(e.code)
                if e.code not in self._relayed and e.code not in ("unreachable", "deadline-exceeded"):
                    self._relayed.add(e.code)
                    await self._notice(Notice("refused", f"[cotal: {e.message}]", e.code))
                continue
            await self._notice(Notice("reconnected", "[cotal: reconnected]"))

    async def send_keys(self, data: bytes) -> bool:
        """Deliver keystrokes; with no session open they are dropped (and counted)."""
        link = self.link
        if not data:
            return True
        if link is None or link.rail is None or not link.rail.alive:
            self.keys_dropped += len(data)
            return False
        return await self._send(link, tf.Data(data))

    def release(self, nbytes: int) -> None:
        """Consumer credit: the consumer got through ``nbytes`` more output bytes (in order)."""
        link = self.link
        if link is None or link.rail is None:
            return
        q = link.unreleased
        through = 0
        while q and nbytes >= q[0][1]:
            nbytes -= q[0][1]
            through = q.popleft()[0]
        if q and nbytes:
            q[0][1] -= nbytes
        if through:
            link.rail.release(through)

    def release_all(self) -> None:
        """Consumer credit: everything received is consumed (or moot); credit goes out now."""
        link = self.link
        if link is not None and link.rail is not None:
            link.unreleased.clear()
            link.rail.release_all()

    @property
    def peer_window_full(self) -> bool:
        """Consumer credit: the manager has sent all it may without more credit."""
        link = self.link
        return link is not None and link.rail is not None and link.rail.peer_window_full

    async def resize(self, cols: int, rows: int) -> None:
        if cols < 1 or rows < 1:
            return
        self.size = (cols, rows)
        link = self.link
        if link is not None and link.rail is not None and link.rail.alive:
            await self._send(link, tf.Resize(cols, rows))

    async def repaint(self) -> None:
        """Ask for a fresh snapshot (a repeated ``ready``)."""
        link = self.link
        if link is not None and link.rail is not None and link.rail.alive:
            await self._send(link, tf.Ready())

    async def close(self) -> None:
        """Detach: send the advisory ``close`` on our rail and flush it, once."""
        self._closing = True
        self._wakeup.set()
        link = self.link
        if link is not None:
            if link.rail is not None and link.rail.alive:
                await link.rail.close()
                try:
                    await link.nc.flush(timeout=2)
                except Exception:
                    pass
            link.finish("detached")

    # ---- internals --------------------------------------------------------------------------

    def _final(self, reason: str) -> str:
        self.final_reason = reason
        return reason

    async def _sleep(self, delay: float) -> bool:
        """Backoff sleep that a detach interrupts; True when interrupted."""
        if self._closing:
            return True
        self._wakeup.clear()
        try:
            await asyncio.wait_for(self._wakeup.wait(), delay)
        except asyncio.TimeoutError:
            pass
        return self._closing

    async def _notice(self, n: Notice) -> None:
        if self.on_notice is not None:
            r = self.on_notice(n)
            if inspect.isawaitable(r):
                await r

    async def _emit(self, data: bytes) -> None:
        if self.on_output is not None:
            r = self.on_output(data)
            if inspect.isawaitable(r):
                await r

    async def _send(self, link: _Link, frame: tf.TerminalFrame) -> bool:
        rail = link.rail
        assert rail is not None
        while True:
            try:
                await rail.send(tf.encode(frame))
                return True
            except RailError as e:
                if e.code != "resource-exhausted" or not await rail.wait_credit(KEYS_CREDIT_WAIT_S):
                    self.keys_dropped += len(frame.payload) if isinstance(frame, tf.Data) else 0
                    return False

    async def _get_nc(self) -> tuple[Any, bool]:
        if self._connect is not None:
            try:
                nc = await self._connect()
            except Exception as e:
                raise AttachError("unreachable", f"cannot reach the broker: {e}") from None
            old = too_old(server_version(nc))
            if old is not None:
                await _close_nc(nc)
                raise AttachError("failed-precondition", old)
            return nc, True
        return self._nc, False

    async def _establish(self) -> None:
        nc, owns = await self._get_nc()
        try:
            grant, reply = await self._call_attach(nc)
        except BaseException:
            if owns:
                await _close_nc(nc)
            raise
        try:
            # static auth: the rails ride their own connection on the session's own credential
            rails_nc, fresh = await _session_connection(nc, grant)
        except Exception as e:
            if owns:
                await _close_nc(nc)
            code = "permission-denied" if isinstance(e, ConnectError) else "unreachable"
            raise AttachError(code, f"cannot open the session: {e}") from None
        if fresh:
            if owns:
                await _close_nc(nc)
            nc, owns = rails_nc, True
        if self._closing:  # abandoned while in flight: hand the session back
            await _hand_back(nc, grant)
            if owns:
                await _close_nc(nc)
            raise AttachError("cancelled", "detached while attaching")
        link = _Link(grant, nc, owns)
        try:
            link.rail = await open_rail(
                nc, egress=grant["subjects"]["in"], ingress=grant["subjects"]["out"],
                window=grant.get("window", 64),
                peer_silence_ms=int(self.liveness_s * 1000),
                consumer_credit=self.consumer_credit,
                on_data=lambda data, seq: self._on_frame(link, data, seq),
                on_close=lambda: link.finish("peer-closed"),
                on_fault=lambda reason, detail: link.finish(reason),
            )
        except Exception as e:
            await _hand_back(nc, grant)
            if owns:
                await _close_nc(nc)
            raise AttachError("unavailable", f"could not open the session rails: {e}") from None
        if owns:
            self._watch_connection(link)
        self.link = link
        if self.size:
            await self._send(link, tf.Resize(*self.size))
        await self._send(link, tf.Ready())

    def _watch_connection(self, link: _Link) -> None:
        async def watch() -> None:
            while not link.ended.done():
                if link.nc.is_closed or not link.nc.is_connected:
                    link.finish("connection-closed")
                    return
                await asyncio.sleep(0.2)

        asyncio.get_running_loop().create_task(watch())

    async def _call_attach(self, nc) -> tuple[dict, Reply]:
        bound = caller_of(nc)
        if bound is not None:  # a minted instrument is pinned to its own caller triple
            self.caller = Caller(*bound)
        ep = EndpointClient(nc, self.space, caller=self.caller)
        last: EndpointError | None = None
        pinned = user_pin(nc)
        pin = pinned or self.pin
        mode = "owner" if pinned else "any"  # a user bearer never holds any-mode reach
        for _ in range(MAX_REBIND):
            try:
                loc = await locate(ep, self.name, instance_id=pin)
                target = target_for(loc.row, self.caller)
                r = await ep.call("attach", None, instance_id=loc.instance_id, target=target, mode=mode,
                                  bind={"instanceId": loc.instance_id, "epoch": loc.epoch},
                                  deadline_ms=CALL_DEADLINE_MS)
            except EndpointError as e:
                raise AttachError(e.code, e.message) from None
            if r.ok:  # {grant, resumedFrom?}: a resumed seat's origin is not needed to attach
                data = r.data if isinstance(r.data, dict) else {}
                grant = check_grant(data.get("grant"), self.space, r)
                return grant, r
            e = r.error
            assert e is not None
            # the manager restarted in between (a coherent bind refusal; an incoherent one was
            # already refused as `internal` by the call), or the seat's incarnation moved on:
            # nothing ran, so locate again
            rebind = refused_before_effect(e) or (e.code == "expired" and e.effective_outcome == "not-executed")
            if not rebind:
                raise AttachError(e.code, e.message)
            last = e
            ep = EndpointClient(nc, self.space, caller=self.caller)  # re-describe
        raise AttachError(last.code if last else "unavailable", last.message if last else "could not bind")

    async def _on_frame(self, link: _Link, data: object, seq: int = 0) -> None:
        # a malformed serving frame breaks the rail (`handler`); a newer manager's extra
        # fields and frame kinds are ignored (None), never a broken session
        frame = tf.decode(data, lenient=True)
        if self.consumer_credit:
            q = link.unreleased
            q.append([seq, len(frame.payload) if isinstance(frame, tf.Data) else 0])
            while len(q) > 1 and not q[0][1]:  # nothing to consume ahead of the head: released
                q.popleft()
        if isinstance(frame, tf.Data):
            await self._emit(frame.payload)
        elif isinstance(frame, tf.Drop):
            self.bytes_dropped += frame.bytes
            text = drop_text(frame.bytes)
            await self._notice(Notice("drop", text, bytes=frame.bytes))
        elif isinstance(frame, tf.End):
            link.end_reason = frame.reason
            link.finish(frame.reason)
        # ready / resize from the serving side mean nothing to a caller: ignored

    async def _drop_link(self, link: _Link) -> None:
        """Leave a link for good. Unless the manager let go first, hand its session back."""
        if self.link is link:
            self.link = None
        rail = link.rail
        held = False
        if rail is not None:
            if rail.peer_closed or link.end_reason is not None:
                rail.stop()  # the manager ended it (its `close` follows an `end`)
            else:
                held = not await self._hand_back_link(link)
        if link.owns_nc:
            await _close_nc(link.nc)
        if held:
            await self._notice(Notice(
                "held", f"[cotal: the manager still holds a session on seat {self.name}; "
                        "it lets go once it notices the silence]"))

    async def _hand_back_link(self, link: _Link) -> bool:
        """``close`` on the link's ``in`` rail, confirmed by a flush; over a fresh connection
        when the link's own is gone. Best effort, bounded; True once the close is delivered."""
        rail = link.rail
        assert rail is not None
        await rail.close()  # once: a rail that faulted already sent it
        if rail.close_sent and _usable(link.nc):
            try:
                await link.nc.flush(timeout=HAND_BACK_S)
                return True
            except Exception:
                pass
        factory = self._connect
        if factory is None:
            return False
        if _is_session_connection(link.nc):  # only this session's credential may speak for it
            def factory():
                return _connect_like(link.nc)
        try:
            nc = await asyncio.wait_for(factory(), HAND_BACK_S)
        except Exception:
            return False
        if nc is None:
            return False
        try:
            return await _hand_back(nc, link.grant)
        finally:
            await _close_nc(nc)


def user_pin(nc) -> str | None:
    """The manager instance a user-mode control connection's view is pinned to (None elsewhere):
    on a user mesh every lookup goes there, never to a scatter."""
    from meshview.connect import target_of

    t = target_of(nc)
    if t is None or not t.user_mode or not t.can_exchange or t.creds or t.nkey:
        return None
    return t.manager_instance


async def _session_connection(nc, grant: dict):
    from meshview.connect import target_of

    t = target_of(nc)
    if t is not None and t.user_mode and t.can_exchange and not (t.creds or t.nkey):
        return await _redeemed_connection(t, grant), True
    from .connection import session_connection

    return await session_connection(nc, grant)


async def _redeemed_connection(t, grant: dict):
    """A user mesh's session rails: the grant redeemed at the exchange for a ``session-caller``
    bearer (never cached: each grant once), then a connection on that bearer and the sentinel
    creds, with a fresh connect name. The auth plane's refusal is a :class:`ConnectError`."""
    import dataclasses

    from .connection import CLIENT_NAME as SESSION_NAME, connect

    st = dataclasses.replace(t, role="session", name=SESSION_NAME, bearer=None, exchanged=None,
                             credential=None, session_grant=grant)
    return await connect(st)


def _is_session_connection(nc) -> bool:
    from meshview.connect import target_of

    t = target_of(nc)
    return t is not None and t.role == "session"


async def _connect_like(nc):
    from .connection import connect_like

    return await connect_like(nc)


async def _hand_back(nc, grant: dict) -> bool:
    """Release a session we will not use: ``close`` on its ``in`` rail, confirmed by a flush."""
    try:
        await nc.publish(grant["subjects"]["in"], json.dumps({"t": "close"}).encode())
        await nc.flush(timeout=HAND_BACK_S)
        return True
    except Exception:
        return False


def _usable(nc) -> bool:
    return not nc.is_closed and nc.is_connected


async def _close_nc(nc) -> None:
    try:
        await nc.close()
    except Exception:
        pass
