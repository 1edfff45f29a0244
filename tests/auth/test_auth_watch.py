"""``cotal watch --creds`` against an operator-mode broker, per credential profile.

The watch runs as a real subprocess (what a user runs); the traffic is published by the
space's infra user. Checks: the observer profile is channels-only and says so, admin sees
DMs and anycast, no seed or JWT is ever printed, a loose creds file is warned about, and an
expired or revoked credential is one clear sentence and exit 1.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid

import pytest

from support.authmesh import auth_mesh  # noqa: F401  (fixture)
from support.watchproc import WatchProc

SEED_RE = re.compile(rb"\bS[UAOCN][A-Z2-7]{40,}")
JWT_RE = re.compile(rb"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}")


def _env(space: str, sender: str, **route) -> dict:
    return {"id": str(uuid.uuid4()), "ts": int(time.time() * 1000), "space": space,
            "from": {"id": sender, "name": sender.split(".")[1]},
            "parts": [{"kind": "text", "text": f"probe {route}"}], **route}


def _presence(pid: str, name: str) -> bytes:
    return json.dumps({"card": {"id": pid, "name": name, "kind": "agent",
                                "protocolVersion": "0.4"},
                       "status": "working", "activity": "auth probe",
                       "ts": int(time.time() * 1000), "lifecycleUid": "b" * 26}).encode()


async def _traffic(mesh, tag: str) -> dict[str, str]:
    """One channel message, one DM, one anycast and a presence heartbeat; returns ids."""
    s = mesh.space
    nc = await mesh.connect("infra")
    try:
        js = nc.jetstream()
        ids = {}
        for kind, subj, route in (
            ("channel", f"cotal.{s}.chat.local.ada.general", {"channel": "general"}),
            ("dm", f"cotal.{s}.inst.local.bob.local.ada", {"to": "local.bob"}),
            ("anycast", f"cotal.{s}.svc.reviewer.local.ada", {"toService": "reviewer"}),
        ):
            m = _env(s, "local.ada", **route)
            m["parts"][0]["text"] = f"{tag} {kind}"
            await js.publish(subj, json.dumps(m).encode(), headers={"Nats-Msg-Id": m["id"]})
            ids[kind] = m["id"]
        kv = await js.key_value(f"cotal_presence_{s}")
        await kv.put(f"local.{tag}", _presence(f"local.{tag}", tag))
        return ids
    finally:
        await nc.close()


def _watch(mesh, who: str, *extra: str) -> WatchProc:
    return WatchProc.start("--json", "--server", mesh.url, "--space", mesh.space,
                           "--creds", str(mesh.creds(who)), *extra)


def _assert_no_secrets(mesh, w: WatchProc) -> None:
    blob = bytes(w.stdout_bytes) + bytes(w.stderr_bytes)
    for name, u in mesh.users.items():
        assert u.key.seed not in blob, f"{name} seed printed"
        assert u.jwt.encode() not in blob, f"{name} JWT printed"
        assert u.jwt.split(".")[1].encode()[:40] not in blob, f"{name} JWT claims printed"
    for secret in (mesh.auth.operator.seed, mesh.auth.account.seed, mesh.auth.signing.seed):
        assert secret not in blob
    assert not SEED_RE.search(blob), SEED_RE.search(blob)
    assert not JWT_RE.search(blob), JWT_RE.search(blob)


async def _started(w: WatchProc) -> None:
    await w.wait_for(lambda: w.objs("state"), 20, "the first state line")


async def test_observer_creds_are_channels_only(auth_mesh):
    w = _watch(auth_mesh, "observer")
    try:
        await _started(w)
        st = w.objs("state")[0]
        assert st["connection"] == "connected"
        assert st["dmVisible"] is False
        ids = await _traffic(auth_mesh, "obs1")
        await w.wait_for(lambda: any(o.get("id") == ids["channel"] for o in w.objs("message")),
                         15, "the channel message")
        # DMs and anycast were published before the channel message was seen on a second
        # connection ordering-independent: give them the same window, then assert absence
        seen = {o.get("id") for o in w.objs("message")}
        assert ids["dm"] not in seen and ids["anycast"] not in seen
        assert w.alive
    finally:
        rc = w.stop()
    assert rc == 0
    _assert_no_secrets(auth_mesh, w)
    assert "Traceback" not in w.stderr_text


async def test_observer_creds_plain_mode_says_channels_only(auth_mesh):
    w = WatchProc.start("--plain", "--server", auth_mesh.url, "--space", auth_mesh.space,
                        "--creds", str(auth_mesh.creds("observer")))
    try:
        await w.wait_for(lambda: "channels only" in w.stderr_text, 20,
                         "a channels-only notice on stderr")
    finally:
        w.stop()
    _assert_no_secrets(auth_mesh, w)


@pytest.mark.parametrize("who", ["observer", "admin"])
async def test_scoped_creds_see_presence(auth_mesh, who):
    w = _watch(auth_mesh, who)
    try:
        await _started(w)
        tag = f"pres_{who}"
        await _traffic(auth_mesh, tag)
        await w.wait_for(lambda: any(o.get("id") == f"local.{tag}"
                                     for o in w.objs("presence")), 12,
                         "the presence join of the probe peer")
    finally:
        w.stop()


async def test_admin_creds_see_dms_and_anycast(auth_mesh):
    w = _watch(auth_mesh, "admin")
    try:
        await _started(w)
        assert w.objs("state")[0]["dmVisible"] is True
        ids = await _traffic(auth_mesh, "adm1")
        for kind in ("channel", "dm", "anycast"):
            await w.wait_for(lambda k=kind: any(o.get("id") == ids[k] and o.get("kind") == k
                                                for o in w.objs("message")),
                             15, f"the {kind} message")
        # it never fell back to a denied whole-space tap or lost a tap to a denial
        assert "Permissions Violation" not in w.stderr_text
    finally:
        rc = w.stop()
    assert rc == 0
    _assert_no_secrets(auth_mesh, w)


async def test_loose_creds_file_is_warned_about(auth_mesh):
    w = _watch(auth_mesh, "loose")
    try:
        await _started(w)
        await w.wait_for(lambda: "0644" in w.stderr_text, 5, "a 0644 warning")
        assert str(auth_mesh.creds("loose")) in w.stderr_text  # names the file
    finally:
        w.stop()
    _assert_no_secrets(auth_mesh, w)


@pytest.mark.parametrize("who", ["expired", "revoked"])
async def test_refused_creds_are_one_sentence_and_exit_1(auth_mesh, who):
    w = _watch(auth_mesh, who, "--connect-timeout", "3")
    rc = await asyncio.to_thread(w.wait_exit, 20)
    assert rc == 1
    err = w.stderr_text.strip()
    assert err.count("\n") == 0, err  # exactly one line
    assert err.startswith("cotal: ") and err.endswith(".")
    assert "Traceback" not in err
    assert re.search(r"refused|expired|revoked", err), err
    assert w.stdout_text == ""
    _assert_no_secrets(auth_mesh, w)


async def test_expired_creds_name_the_expiry(auth_mesh):
    """The broker says 'Authorization Violation' for expired and revoked alike; the JWT's
    ``exp`` is readable locally, so the sentence can say *why*."""
    w = _watch(auth_mesh, "expired", "--connect-timeout", "3")
    rc = await asyncio.to_thread(w.wait_exit, 20)
    assert rc == 1
    assert "expire" in w.stderr_text.lower(), w.stderr_text


async def test_watch_leaves_no_consumers_and_no_presence_behind(auth_mesh):
    """The console is invisible: no presence key of its own, and after it exits no consumer
    it made (history reads, KV watches) is left on any stream."""
    s = auth_mesh.space
    await _traffic(auth_mesh, "ghost")
    nc = await auth_mesh.connect("infra")
    try:
        js = nc.jetstream()
        async def presence_keys() -> set[str]:  # no kv.keys(): it makes a consumer itself
            info = await js.stream_info(f"KV_cotal_presence_{s}", subjects_filter=">")
            pre = f"$KV.cotal_presence_{s}."
            return {k[len(pre):] for k in (info.state.subjects or {})}

        keys_before = await presence_keys()
        w = _watch(auth_mesh, "admin", "--backfill", "10")
        try:
            await _started(w)
            await w.wait_for(lambda: any(o.get("historical") for o in w.objs("message")), 15,
                             "backfilled rows")
            assert await presence_keys() <= keys_before | {"local.ghost"}
        finally:
            assert w.stop() == 0

        async def leftovers() -> list[str]:
            out = []
            for st in await js.streams_info():
                for ci in await js._jsm.consumers_info(st.config.name):
                    out.append(f"{st.config.name}/{ci.name}")
            return out

        deadline = time.monotonic() + 10
        left = await leftovers()
        while left and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            left = await leftovers()
        assert left == [], left
    finally:
        await nc.close()
