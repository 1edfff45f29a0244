"""A static-auth mesh end to end, on a real operator-mode nats-server (``DemoMesh(auth="static")``:
operator + system + data account, the seed at ``<root>/.cotal/auth``, a current registry entry).

Every command mints its own credential from the seed of the root the registry names: ``watch``
an admin read credential, ``ps``/``attach``/control a one-shot caller instrument bound to a fresh
caller, and each attach session a ``session-caller`` credential for exactly its grant's rails.
A plain ``--creds`` file is refused for control with the reference's sentence; a denied publish
is ``permission-denied`` at once. No seed, JWT or token is ever printed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cotal_tui.cli.connection import add_connection_arguments, target_from_args
from support.jwt import observer_permissions, write_creds

from attach.session.client import AttachSession
from attach.control.connection import connect as attach_connect
from attach.control.connection import session_target
from attach.control.endpoint import EndpointClient
from attach.control.managed import PsPoller
from meshview.link.connect import (
    CONTROL_CREDS_REFUSAL,
    ConnectError,
    SubjectDenied,
    ConnectTarget,
    caller_of,
    publish_checked,
    target_of,
)
from meshview.wire.envelope import EndpointError
from meshview.link.connect import (
    connect as mesh_connect,
)
from conftest import until

SPACE = "sec"
ROOT = Path(__file__).resolve().parents[2]
SECRET_RE = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}|S[UAO][A-Z2-7]{40,}")


@pytest.fixture(scope="module")
def mesh():
    from cotal_tui.demo.mesh import DemoMesh

    m = DemoMesh(space=SPACE, agents=3, auth="static").start()
    yield m
    m.stop()


def cli(mesh, *argv: str, timeout: float = 30.0, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, COTAL_HOME=mesh.home, **(env or {}))
    return subprocess.run([sys.executable, "-m", "cotal_tui.cli", *argv], env=e, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def violations(mesh) -> list[str]:
    return [ln for ln in Path(mesh.broker.log_path or "").read_text(errors="replace").splitlines()
            if "Violation" in ln]


def assert_no_secret(mesh, *texts: str) -> None:
    t = mesh.trust
    seeds = [k.seed.decode() for k in (t.operator, t.system, t.account, t.signing)]
    for text in texts:
        assert not SECRET_RE.search(text), text
        for s in seeds:
            assert s not in text


def args(mesh, *argv: str):
    import argparse

    p = argparse.ArgumentParser()
    add_connection_arguments(p)
    os.environ["COTAL_HOME"] = mesh.home
    return p.parse_args(list(argv))


def test_the_demo_records_a_static_mesh(mesh):
    entry = json.loads((Path(mesh.home) / "meshes" / f"{SPACE}.json").read_text())
    assert entry["mode"] == "auth" and entry["root"] == mesh.root and entry["server"] == mesh.url
    auth = Path(mesh.root) / ".cotal" / "auth"
    assert (auth / "auth.json").stat().st_mode & 0o077 == 0 and auth.stat().st_mode & 0o077 == 0
    assert (Path(mesh.home) / "current-mesh").read_text().strip() == SPACE


def test_ps_mints_its_instrument_from_the_root(mesh):
    before = len(violations(mesh))
    r = cli(mesh, "ps")
    assert r.returncode == 0, r.stderr
    names = {ln.split()[0] for ln in r.stdout.splitlines()[1:] if ln.strip()}
    assert {a.name for a in mesh.team.members} <= names
    assert_no_secret(mesh, r.stdout, r.stderr)
    assert violations(mesh)[before:] == []  # the instrument carries exactly what ps needs


def test_control_verbs_ride_the_minted_instrument(mesh):
    seat = mesh.team.members[0].name
    r = cli(mesh, "status", seat, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["name"] == seat
    r = cli(mesh, "input", seat, "typed-through-static-auth")
    assert r.returncode == 0, r.stderr
    assert_no_secret(mesh, r.stdout, r.stderr)


def test_a_plain_creds_file_is_refused_for_control(mesh, tmp_path):
    obs = mesh.trust.root_seed.mint("observer", None)
    creds = write_creds(tmp_path / "obs.creds", obs.jwt, obs.key.seed)
    t0 = time.monotonic()
    r = cli(mesh, "ps", "--server", mesh.url, "--space", SPACE, "--creds", str(creds))
    assert r.returncode != 0
    assert CONTROL_CREDS_REFUSAL in r.stderr.replace("\n", " ")
    assert time.monotonic() - t0 < 10
    assert_no_secret(mesh, r.stdout, r.stderr)


def test_a_missing_seed_is_refused_by_name(mesh, tmp_path):
    home = tmp_path / "home"
    (home / "meshes").mkdir(parents=True)
    (home / "meshes" / "x.json").write_text(json.dumps(
        {"space": SPACE, "server": mesh.url, "root": str(tmp_path / "gone"), "mode": "auth"}))
    e = dict(os.environ, COTAL_HOME=str(home))
    for argv in (["ps"], ["watch", "--json"]):
        r = subprocess.run([sys.executable, "-m", "cotal_tui.cli", *argv], env=e, cwd=ROOT,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0
        assert "holds no seed" in r.stderr and "refusing to connect without credentials" in r.stderr


async def test_watch_mints_an_admin_view_from_the_root(mesh):
    nc, t = await mesh_connect(target_from_args(args(mesh)))
    try:
        assert t.credential is not None and t.credential.profile == "admin"
        assert nc._inbox_prefix.decode() == f"_INBOX_{t.credential.public}"
        seen: list[str] = []

        async def cb(msg):
            seen.append(msg.subject)

        await nc.subscribe(f"cotal.{SPACE}.inst.>", cb=cb)  # admin: DMs are visible
        await nc.flush()
        await until(lambda: seen, 30, "a live DM")
        with pytest.raises(SubjectDenied):  # still read-only
            await publish_checked(nc, f"cotal.{SPACE}.chat.local.x.general", b"{}")
    finally:
        await nc.close()
    assert "Credential(admin" in repr(t) or "credential" not in repr(t)  # never the JWT
    assert_no_secret(mesh, repr(t), t.display)


async def test_attach_mints_a_session_caller_for_the_rails(mesh):
    target = session_target(target_from_args(args(mesh)))
    seat = mesh.team.members[0].name
    out = bytearray()
    s = AttachSession(SPACE, seat, connect=lambda: attach_connect(target), reconnect=False,
                      on_output=lambda b: out.extend(b))
    await asyncio.wait_for(s.open(), 20)
    try:
        link = s.link
        assert link is not None
        st = target_of(link.nc)
        assert st is not None and st.role == "session" and st.credential.profile == "session-caller"
        grant = link.grant
        assert st.credential.expires_at <= grant["exp"] // 1000
        assert s.caller.actor.startswith("U") and s.caller.owner == "local"  # the instrument's own nkey
        assert grant["holder"]["id"] == f"local.{s.caller.actor}"
        await until(lambda: len(out) > 0, 20, "the seat's screen")
        await s.send_keys(b"hello-static\r")
        await until(lambda: b"hello-static" in bytes(out), 20, "the echo")
        # the instrument that asked for the grant cannot speak on the rails: only this session's
        # own credential reaches them (the manager serves them on a session-serving credential)
        cnc = await attach_connect(target)
        try:
            with pytest.raises(SubjectDenied):
                await publish_checked(cnc, grant["subjects"]["in"], b'{"t":"close"}')
        finally:
            await cnc.close()
    finally:
        await s.close()
    assert mesh.mgr is not None
    await until(lambda: mesh.mgr.live_sessions == 0, 10, "the session handed back")


async def test_a_denied_call_is_permission_denied_not_a_deadline(mesh):
    nc = await attach_connect(session_target(target_from_args(args(mesh))))
    try:
        assert caller_of(nc) is not None
        ep = EndpointClient(nc, SPACE, endpoint="auth")  # no row for another endpoint
        t0 = time.monotonic()
        with pytest.raises(EndpointError) as ei:
            await ep.describe(deadline_ms=10_000)
        assert ei.value.code == "permission-denied" and ei.value.outcome == "not-executed"
        assert time.monotonic() - t0 < 3
    finally:
        await nc.close()


async def test_observer_creds_ps_poller_says_so_once_and_stops(mesh, tmp_path):
    key = mesh.trust.root_seed.mint("x", None).key
    obs = mesh.trust.root_seed.mint("observer", observer_permissions(SPACE, key.public), key=key)
    creds = write_creds(tmp_path / "observer.creds", obs.jwt, obs.key.seed)
    nc, _ = await mesh_connect(ConnectTarget((mesh.url,), SPACE, creds=str(creds)))
    try:
        before = len(violations(mesh))
        updates = []
        p = PsPoller(nc, SPACE, period=0.2, on_update=updates.append)
        p.start()
        await until(lambda: p.unreadable, 30, "the poller to give up")
        await until(lambda: p.loop_ended, 5, "the poll loop to end")
        assert p.fold.notice and "cannot read the manager registry" in p.fold.notice
        n = len(violations(mesh))
        await asyncio.sleep(1.0)  # five periods: nothing more is asked
        assert len(violations(mesh)) == n and n - before <= 4
        assert len(updates) == 1
        await p.stop()
    finally:
        await nc.close()


async def test_a_target_with_a_problem_raises_it():
    with pytest.raises(ConnectError, match="several"):
        await mesh_connect(ConnectTarget(("nats://127.0.0.1:1",), problem="several meshes"))


async def test_a_denied_bucket_watch_ends_instead_of_retrying(mesh, tmp_path):
    """The observer's manager-lease watch under admin creds: refused once, then left alone."""
    from meshview.observe.kvwatch import KvWatch
    from meshview.wire.names import bucket_names

    nc, t = await mesh_connect(target_from_args(args(mesh)))  # the minted admin view
    try:
        before = len([v for v in violations(mesh) if "KV_cotal_manager" in v])
        errors: list[str] = []
        w = KvWatch(nc, nc.jetstream(), bucket_names(SPACE).manager, lambda e, i: None, lambda k: None,
                    lambda r, e: errors.append(r))
        w.start()
        await until(lambda: w.task is not None and w.task.done(), 30, "the denied watch to end")
        assert w.denied and errors == ["denied"]
        await asyncio.sleep(1.0)
        after = len([v for v in violations(mesh) if "KV_cotal_manager" in v])
        assert after - before == 1
    finally:
        await nc.close()


async def test_a_lost_link_is_handed_back_on_the_sessions_own_credential(mesh):
    """The session's connection dies without a close: the client hands the session back over a
    fresh connection on that session's own session-caller credential (no other can reach the
    rail), so the manager frees the slot at once instead of after the caller-silence reap."""
    target = session_target(target_from_args(args(mesh)))
    seat = mesh.team.members[1].name
    out = bytearray()
    s = AttachSession(SPACE, seat, connect=lambda: attach_connect(target), reconnect=False,
                      on_output=lambda b: out.extend(b))
    await asyncio.wait_for(s.open(), 20)
    run = asyncio.ensure_future(s.run())
    try:
        await until(lambda: len(out) > 0, 20, "the seat's screen")
        assert mesh.mgr.live_sessions >= 1
        link = s.link
        assert link is not None and link.rail is not None
        link.rail.stop()  # the rail goes silent: no close frame will be sent from it
        await link.nc.close()  # ... and its connection is gone
        reason = await asyncio.wait_for(run, 20)
        assert reason == "connection-closed"
        await until(lambda: mesh.mgr.live_sessions == 0, 10, "the manager to free the slot")
    finally:
        if not run.done():
            await s.close()
            await asyncio.wait_for(run, 10)
