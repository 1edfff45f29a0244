"""ConnectTarget resolution, redaction, inbox prefix and secret-file checks (plus one real connect)."""

from __future__ import annotations

import argparse
import json
import os

import pytest

from cotal_tui.cli.connection import add_connection_arguments, target_from_args
from meshview.link.connect import (
    ConnectTarget,
    connect,
    connect_options,
    redact_url,
)


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_connection_arguments(p)
    return p.parse_args(list(argv))


def test_server_lists_and_default(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    t = target_from_args(parse("--server", "a:4222,nats://b:4222", "--server", "tls://c:4443"))
    assert t.servers == ("nats://a:4222", "nats://b:4222", "tls://c:4443")
    assert t.space == "main" and t.source == "flag"
    d = target_from_args(parse())
    assert d.servers == ("nats://127.0.0.1:4222",) and d.source == "default"


def test_registry_and_current_mesh(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    (tmp_path / "meshes").mkdir()
    for space, port in (("alpha", 1111), ("beta", 2222)):
        (tmp_path / "meshes" / f"space.{space}.json").write_text(json.dumps(
            {"space": space, "server": f"nats://127.0.0.1:{port}", "root": "/x", "mode": "open"}))
    (tmp_path / "meshes" / "broken.json").write_text("{nope")
    assert target_from_args(parse()).source == "default"  # two entries, no current: ambiguous
    (tmp_path / "current-mesh").write_text("beta\n")
    t = target_from_args(parse())
    assert (t.space, t.servers, t.source) == ("beta", ("nats://127.0.0.1:2222",), "current-mesh")
    t = target_from_args(parse("--space", "alpha"))
    assert t.servers == ("nats://127.0.0.1:1111",) and t.mode == "open"


def test_redaction_and_token_inbox():
    assert redact_url("nats://user:pw@host:4222") == "nats://***@host:4222"
    assert redact_url("tls://s3cr3t@host") == "tls://***@host"
    t = ConnectTarget(("nats://s3cr3t@127.0.0.1:4222",))
    assert "s3cr3t" not in t.display and t.has_credential
    opts = connect_options(t)
    assert opts["inbox_prefix"].startswith("_INBOX_") and opts["name"] == opts["inbox_prefix"][7:]
    assert opts["ping_interval"] == 10 and opts["max_outstanding_pings"] == 2
    assert "inbox_prefix" not in connect_options(ConnectTarget(("nats://127.0.0.1:4222",)))


def test_creds_inbox_and_mode_warning(tmp_path, capsys):
    nkeys = pytest.importorskip("nkeys")
    import base64

    seed = b"SUAMLK2ZNL35WSMW37E7UD4VZ7ELPKW7DHC3BWBSD2GCZ7IUQQXZIORRBU"
    pub = nkeys.from_seed(bytearray(seed)).public_key.decode()
    claims = base64.urlsafe_b64encode(json.dumps({"sub": pub}).encode()).decode().rstrip("=")
    creds = tmp_path / "obs.creds"
    creds.write_text(f"-----BEGIN NATS USER JWT-----\neyJhbGciOiJlZDI1NTE5In0.{claims}.sig\n"
                     "------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n"
                     f"{seed.decode()}\n------END USER NKEY SEED------\n")
    os.chmod(creds, 0o644)
    opts = connect_options(ConnectTarget(("nats://127.0.0.1:4222",), creds=str(creds)))
    assert opts["inbox_prefix"] == f"_INBOX_{pub}"
    err = capsys.readouterr().err
    assert "readable by other users" in err and seed.decode() not in err
    os.chmod(creds, 0o600)
    connect_options(ConnectTarget(("nats://127.0.0.1:4222",), creds=str(creds)))
    assert capsys.readouterr().err == ""


async def test_real_connect_cluster_list(broker):
    nc, t = await connect(target_from_args(parse("--server", f"nats://127.0.0.1:1,{broker.url}",
                                                 "--connect-timeout", "3")))
    try:
        assert nc.is_connected and nc.options["max_reconnect_attempts"] == -1
    finally:
        await nc.close()


def test_nats_loads_without_aiohttp_until_a_websocket_needs_it():
    """aiohttp (~450 ms of CPU) is deferred for every command; in a fresh interpreter the
    CLI's path to nats-py leaves it unloaded, and a ws:// target loads it."""
    import subprocess
    import sys

    code = ("from cotal_tui.cli.process import prepare_process\n"
            "prepare_process()  # what the cotal entry point does first\n"
            "import sys, meshview.link.connect as c, nats.aio.transport as t\n"
            "print(t.aiohttp is None, 'aiohttp' in sys.modules)\n"
            "c.connect_options(c.ConnectTarget(('ws://127.0.0.1:1',), 's'))\n"
            "print(t.aiohttp is not None, 'aiohttp' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False", "True", "True"]


@pytest.mark.filterwarnings("ignore:parameter 'timeout' of type 'float' is deprecated:DeprecationWarning")  # nats-py's call into aiohttp
async def test_real_connect_over_websocket():
    """`--server ws://…` reaches a real nats-server's websocket listener."""
    from cotal_tui.demo.broker import Broker, free_port

    port = free_port()
    b = Broker(name="cotal-ws", extra_config=f"websocket {{\n  port: {port}\n  no_tls: true\n}}").start()
    try:
        nc, t = await connect(target_from_args(parse("--server", f"ws://127.0.0.1:{port}",
                                                         "--connect-timeout", "5")))
        try:
            assert nc.is_connected
            sub = await nc.subscribe("ws.check")
            await nc.publish("ws.check", b"over a websocket")
            msg = await sub.next_msg(timeout=5)
            assert msg.data == b"over a websocket"
        finally:
            await nc.close()
    finally:
        b.stop()


def test_a_link_with_two_channels_is_parsed_before_the_server_list_is_split(tmp_path, monkeypatch):
    """``?channel=a,b`` is the link's query, not a second server ``b``."""
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    t = target_from_args(parse("--server", "cotal://tok@mesh/main?channel=a,b"))
    assert t.servers == ("nats://tok@mesh:4222",)
    assert t.channels == ("a", "b") and t.space == "main" and t.source == "link"
    t = target_from_args(parse("--server", "cotal://tok@mesh/main?channel=a,b,c,nats://other:4222"))
    assert t.servers == ("nats://tok@mesh:4222", "nats://other:4222") and t.channels == ("a", "b", "c")


def test_plain_server_lists_still_split_on_every_comma(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    t = target_from_args(parse("--server", "a:4222,b:4222", "--server", "cotal://h/main,c:4222"))
    assert t.servers == ("nats://a:4222", "nats://b:4222", "nats://h:4222", "nats://c:4222")
    t = target_from_args(parse("--server", "cotal://x/main,cotal://y/main?channels=p,q"))
    assert t.servers == ("nats://x:4222", "nats://y:4222") and t.space == "main"
