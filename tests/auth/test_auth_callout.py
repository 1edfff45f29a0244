"""Per-user auth on a real nats-server with ``auth_callout`` (decentralized: the AUTH account's
JWT delegates to a service user) and a small callout responder (``support.authmesh``).

The client connects the way the reference's ``standaloneConnectOpts`` does: the deny-all
sentinel creds land the connection in the AUTH account, the bearer rides as the token, and the
connect name is a fresh ``ibx<uuid>`` that is also the inbox prefix the callout scopes. The
bearer is never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid

import nats
import pytest
from cotal_tui.cli.connection import add_connection_arguments, target_from_args
from support.authmesh import start_callout_mesh
from support.watchproc import WatchProc

from meshview.link.auth import bearer_principal
from meshview.link.connect import (
    ConnectError,
    caller_of,
    connect,
)


@pytest.fixture(scope="module")
def cmesh():
    m = start_callout_mesh()
    yield m
    m.stop()


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_connection_arguments(p)
    return p.parse_args(list(argv))


def flags(m, *extra: str) -> list[str]:
    return ["--server", m.url, "--space", m.space, "--bearer-file", str(m.bearer_file),
            "--sentinel-creds", str(m.sentinel), *extra]


async def test_sentinel_plus_bearer_with_an_ibx_name(cmesh, tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    before = len(cmesh.responder.seen)
    t = target_from_args(parse(*flags(cmesh)))
    assert t.mode == "user" and t.user_mode and cmesh.bearer not in repr(t)
    nc, t = await connect(t)
    try:
        name = nc.options["name"]
        assert name.startswith("ibx") and len(name) == 35 and int(name[3:], 16) >= 0
        assert nc._inbox_prefix.decode() == f"_INBOX_{name}"
        # JetStream answers arrive on _INBOX_<nonce>: the callout scoped exactly that inbox
        info = await nc.jetstream().stream_info(f"CHAT_{cmesh.space}")
        assert info.config.name == f"CHAT_{cmesh.space}"
    finally:
        await nc.close()
    seen = cmesh.responder.seen[before:]
    assert seen and seen[-1] == {"name": name, "token_ok": True, "has_jwt": True}


async def test_a_fresh_nonce_per_connection_and_the_bearer_principal_for_control(cmesh, tmp_path, monkeypatch):
    import dataclasses

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    t = dataclasses.replace(target_from_args(parse(*flags(cmesh))), role="control")
    a, _ = await connect(t)
    b, _ = await connect(t)
    try:
        assert a.options["name"] != b.options["name"]
        assert caller_of(a) == bearer_principal(cmesh.bearer) == ("u_" + "a" * 26, "cli", "b" * 26)
    finally:
        await a.close()
        await b.close()


async def test_a_bearer_the_mesh_did_not_issue_is_refused_in_one_sentence(cmesh, tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    bad = tmp_path / "bad-bearer"
    bad.write_text("eyJub3QiOiJ0aGlzIn0.eyJzdWIiOiJ4In0.c2ln\n")
    t = target_from_args(parse("--server", cmesh.url, "--space", cmesh.space, "--bearer-file", str(bad),
                             "--sentinel-creds", str(cmesh.sentinel), "--connect-timeout", "3"))
    with pytest.raises(ConnectError) as ei:
        await connect(t)
    msg = str(ei.value)
    assert "refused" in msg and "\n" not in msg and "eyJ" not in msg


async def test_watch_over_auth_callout(cmesh, tmp_path):
    w = WatchProc.start("--json", *flags(cmesh), env={"COTAL_HOME": str(tmp_path)})
    try:
        await w.wait_for(lambda: w.objs("state"), 20, "a state line")
        assert w.objs("state")[0]["connection"] == "connected"
        mid = str(uuid.uuid4())
        infra = await nats.connect(cmesh.url, user_credentials=str(cmesh.infra))
        try:
            body = {"id": mid, "ts": int(time.time() * 1000), "space": cmesh.space, "channel": "general",
                    "from": {"id": "local.bot", "name": "bot"},
                    "parts": [{"kind": "text", "text": "through the callout"}]}

            async def seen() -> bool:
                await infra.publish(f"cotal.{cmesh.space}.chat.local.bot.general", json.dumps(body).encode())
                return any(o.get("id") == mid for o in w.objs("message"))

            import asyncio

            for _ in range(100):  # publish until the tap has it (the tap may still be binding)
                if await seen():
                    break
                await asyncio.sleep(0.2)
            assert any(o.get("id") == mid for o in w.objs("message"))
        finally:
            await infra.close()
    finally:
        assert w.stop() in (0, 1)
    assert cmesh.bearer not in w.stdout_text and cmesh.bearer not in w.stderr_text
    assert "Traceback" not in w.stderr_text


def test_a_registered_user_mesh_says_what_it_needs(cmesh, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "meshes").mkdir(parents=True)
    (home / "meshes" / "ua.json").write_text(json.dumps(
        {"space": cmesh.space, "server": cmesh.url, "root": str(tmp_path), "mode": "user"}))
    monkeypatch.setenv("COTAL_HOME", str(home))
    monkeypatch.delenv("COTAL_BEARER_FILE", raising=False)
    monkeypatch.delenv("COTAL_SENTINEL_CREDS", raising=False)
    t = target_from_args(parse())
    assert t.problem and "per-user-auth mesh" in t.problem and "--bearer-file" in t.problem
    monkeypatch.setenv("COTAL_BEARER_FILE", str(cmesh.bearer_file))
    t = target_from_args(parse())
    assert t.problem and "--sentinel-creds" in t.problem
    monkeypatch.setenv("COTAL_SENTINEL_CREDS", str(cmesh.sentinel))
    t = target_from_args(parse())
    assert t.problem is None and t.mode == "user" and t.servers == (cmesh.url,)
    assert os.environ["COTAL_BEARER_FILE"] and cmesh.bearer not in repr(t)
