"""Attach on a per-user-auth mesh, end to end on the operator-mode broker and its auth callout:
``attach`` in owner mode on the pinned ``manager-caller`` connection, the grant redeemed at the
exchange for a ``session-caller`` bearer, the session rail on a connection of its own (repaint,
resize, detach), the auth plane's refusal of someone else's grant, and a re-attach through a
fresh grant after the manager restarts."""

from __future__ import annotations

import asyncio

import pytest

from attach.session.client import AttachError, AttachSession
from attach.control.connection import connect as attach_connect, session_target
from cotal_tui.demo.manager import DemoManager, SeatSpec
from meshview.link.connect import ConnectRequest, exchanged_of, resolve_target, target_of
from meshview.link.exchange import ExchangeError, exchange
from support.userplane import user_plane  # noqa: F401

from conftest import until


def user_target(p, user):
    t = resolve_target(ConnectRequest(space=p.space), home=p.home_for(user))
    assert t.problem is None and t.can_exchange, t.problem
    return session_target(t)


def users(p):
    got = p.plane.users
    ada = got.get("ada") or p.add_user("ada", ["spawn"])
    bob = got.get("bob") or p.add_user("bob", ["spawn"])
    return ada, bob


async def start_manager(p, seats, instance_id=None):
    nc = await p.service_nc()
    mgr = DemoManager(nc, p.space, seats, instance_id=instance_id)
    mgr.user_mesh = True
    await mgr.start()
    p.plane.local_manager = mgr.instance_id
    return mgr, nc


async def stop_manager(mgr, nc):
    await mgr.stop()
    await nc.close()


def seat(user, name):
    return SeatSpec(name=name, principal_id=f"{user.owner}.{name}", kind="line")


async def test_attach_redeems_the_grant_and_runs_the_session_rail(user_plane):  # noqa: F811
    p = user_plane
    ada, bob = users(p)
    mgr, nc = await start_manager(p, [seat(ada, "adatty")])
    try:
        t = user_target(p, ada)
        out = bytearray()
        s = AttachSession(p.space, "adatty", connect=lambda: attach_connect(t), reconnect=False,
                          on_output=lambda b: out.extend(b))
        await asyncio.wait_for(s.open(), 20)
        try:
            link = s.link
            st = target_of(link.nc)
            assert st is not None and st.role == "session"
            b = exchanged_of(link.nc)
            assert b.view == "session-caller" and b.owner == ada.owner
            assert b.session["sessionId"] == link.grant["sessionId"]
            assert link.grant["holder"]["id"] == f"{ada.owner}.cli"
            assert s.caller.owner == ada.owner and s.caller.actor == "cli"
            await until(lambda: len(out) > 0, 20, "the seat's screen")
            await s.send_keys(b"hello-user\r")
            await until(lambda: b"hello-user" in bytes(out), 20, "the echo")
            n = len(out)
            await s.repaint()
            await until(lambda: len(out) > n, 20, "a repaint")
            await s.resize(100, 30)
            pty = mgr.seats["adatty"].pty
            await until(lambda: (pty.cols, pty.rows) == (100, 30), 10, "the resize")
            # someone else cannot redeem this grant: the auth plane's own sentence
            with pytest.raises(ExchangeError) as ei:
                await exchange(p.exchange_url, p.idp_token(bob), view="session-caller", session_grant=link.grant)
            assert "was issued to" in str(ei.value) and "attach again" in str(ei.value)
            assert p.idp_token(bob) not in str(ei.value)
        finally:
            await s.close()
        await until(lambda: mgr.live_sessions == 0, 10, "the session handed back")
    finally:
        await stop_manager(mgr, nc)


async def test_another_owners_seat_is_refused(user_plane):  # noqa: F811
    p = user_plane
    ada, bob = users(p)
    mgr, nc = await start_manager(p, [seat(ada, "adaonly")])
    try:
        s = AttachSession(p.space, "adaonly", connect=lambda: attach_connect(user_target(p, bob)),
                          reconnect=False)
        with pytest.raises(AttachError) as ei:
            await asyncio.wait_for(s.open(), 20)
        assert ei.value.code == "permission-denied" and "lacks ledger scope 'admin'" in ei.value.message
        assert mgr.live_sessions == 0
    finally:
        await stop_manager(mgr, nc)


async def test_a_manager_restart_reattaches_through_a_fresh_grant(user_plane):  # noqa: F811
    """A manager restart ends the session (``manager-restart``, final, as on every mesh); the old
    grant is then refused by the auth plane (its session row is closed and its epoch gone), and a
    re-attach gets a fresh grant from the new incarnation and redeems that one."""
    p = user_plane
    ada, _ = users(p)
    mgr, nc = await start_manager(p, [seat(ada, "adare")])
    iid = mgr.instance_id
    t = user_target(p, ada)
    out = bytearray()
    s = AttachSession(p.space, "adare", connect=lambda: attach_connect(t), reconnect=True,
                      backoff=(0.2, 0.5, 1.0), on_output=lambda b: out.extend(b))
    await asyncio.wait_for(s.open(), 20)
    runner = asyncio.ensure_future(s.run())
    try:
        old = s.link.grant
        await s.send_keys(b"before\r")
        await until(lambda: b"before" in bytes(out), 20, "the first echo")
        await stop_manager(mgr, nc)
        assert await asyncio.wait_for(runner, 20) == "manager-restart"
        mgr, nc = await start_manager(p, [seat(ada, "adare")], instance_id=iid)
        with pytest.raises(ExchangeError) as ei:  # the old grant: the auth plane's sentence
            await exchange(p.exchange_url, p.idp_token(ada), view="session-caller", session_grant=old)
        assert "session redemption refused" in str(ei.value)
        again = bytearray()
        s2 = AttachSession(p.space, "adare", connect=lambda: attach_connect(t), reconnect=False,
                           on_output=lambda b: again.extend(b))
        await asyncio.wait_for(s2.open(), 20)
        try:
            assert s2.link.grant["sessionId"] != old["sessionId"]
            assert s2.link.grant["serving"] == {"instanceId": iid, "epoch": mgr.epoch} and mgr.epoch > old["serving"]["epoch"]
            assert exchanged_of(s2.link.nc).view == "session-caller"
            await s2.send_keys(b"after\r")
            await until(lambda: b"after" in bytes(again), 20, "the echo on the new session")
        finally:
            await s2.close()
    finally:
        await s.close()
        runner.cancel()
        await stop_manager(mgr, nc)
