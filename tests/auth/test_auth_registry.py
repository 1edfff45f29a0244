"""Where a command connects and as what: ``cotal://`` / ``cotals://`` connect links (SPEC §10),
the registry entry's ``mode`` and ``root`` (mesh-registry), and the mesh picker when several
meshes are registered and none is current."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from cotal_tui.cli.connection import add_connection_arguments, pick_mesh, target_from_args
from meshview.link.connect import (
    ConnectTarget,
    connect,
    connect_options,
    parse_link,
    prepare,
)


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_connection_arguments(p)
    return p.parse_args(list(argv))


def register(home, space: str, **entry) -> None:
    (home / "meshes").mkdir(parents=True, exist_ok=True)
    (home / "meshes" / f"{space}.json").write_text(json.dumps({"space": space, **entry}))


def test_connect_links():
    lk = parse_link("cotal://s3cr3t@mesh.example:4333/team?channel=a,b")
    assert (lk.server, lk.space, lk.channels, lk.tls) == ("nats://s3cr3t@mesh.example:4333", "team", ("a", "b"), False)
    lk = parse_link("cotals://mesh.example/prod?channels=x")
    assert (lk.server, lk.space, lk.channels, lk.tls) == ("tls://mesh.example:4222", "prod", ("x",), True)
    lk = parse_link("cotal://alice:pw@10.0.0.2/s")
    assert lk.server == "nats://alice:pw@10.0.0.2:4222" and lk.space == "s" and lk.channels == ()
    assert parse_link("cotal://[::1]:5000/v6").server == "nats://[::1]:5000"
    assert parse_link("nats://host:4222") is None


def test_a_link_names_server_space_and_token(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    t = target_from_args(parse("--server", "cotal://s3cr3t@127.0.0.1:5000/linked?channel=general"))
    assert t.servers == ("nats://s3cr3t@127.0.0.1:5000",) and t.space == "linked"
    assert t.source == "link" and t.channels == ("general",)
    assert "s3cr3t" not in t.display and "s3cr3t" not in repr(t.display)
    opts = connect_options(t)
    assert opts["name"] == opts["inbox_prefix"][len("_INBOX_"):]  # a token gets a nonce inbox
    assert target_from_args(parse("--server", "cotal://h/linked", "--space", "other")).space == "other"
    tls = target_from_args(parse("--server", "cotals://127.0.0.1:5001/x"))
    assert tls.servers == ("tls://127.0.0.1:5001",) and "tls" in connect_options(tls)


async def test_a_link_connects_to_a_real_broker(broker, tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    port = broker.url.rsplit(":", 1)[1]
    nc, t = await connect(target_from_args(parse("--server", f"cotal://127.0.0.1:{port}/main",
                                                    "--connect-timeout", "3")))
    try:
        assert nc.is_connected and t.space == "main"
    finally:
        await nc.close()


def test_registry_mode_and_root(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    register(tmp_path, "sec", server="cotal://127.0.0.1:4999/sec", root=str(tmp_path / "proj"), mode="auth")
    (tmp_path / "current-mesh").write_text("sec\n")
    t = target_from_args(parse())
    assert (t.space, t.mode, t.root, t.source) == ("sec", "auth", str(tmp_path / "proj"), "current-mesh")
    assert t.servers == ("nats://127.0.0.1:4999",) and t.has_credential
    # an explicit --server for a registered space is an override: mode and root still hold
    t = target_from_args(parse("--server", "nats://127.0.0.1:4998", "--space", "sec"))
    assert (t.mode, t.root) == ("auth", str(tmp_path / "proj"))
    # ... unless the command brings its own credential
    t = target_from_args(parse("--server", "nats://127.0.0.1:4998", "--space", "sec", "--creds", "/x.creds"))
    assert t.mode is None
    # a static entry with no seed at its root is refused by name, never connected bare
    from meshview.link.connect import ConnectError

    with pytest.raises(ConnectError, match="holds no seed"):
        prepare(target_from_args(parse()))
    register(tmp_path, "rootless", server="nats://127.0.0.1:4997", mode="auth")
    with pytest.raises(ConnectError, match="names no root"):
        prepare(target_from_args(parse("--space", "rootless")))


def test_static_entry_mints_per_role(tmp_path, monkeypatch):
    import dataclasses

    from cotal_tui.demo.trust import SpaceTrust
    from support.jwt import decode_jwt

    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    trust = SpaceTrust("sec")
    trust.save(tmp_path / "proj")
    register(tmp_path, "sec", server="nats://127.0.0.1:4999", root=str(tmp_path / "proj"), mode="auth")
    obs = prepare(target_from_args(parse("--space", "sec")))
    claims = decode_jwt(obs.credential.jwt)
    assert claims["iss"] == trust.signing.public and claims["nats"]["issuer_account"] == trust.account.public
    assert "cotal.sec.inst.>" in claims["nats"]["sub"]["allow"] and "exp" not in claims
    ctl = prepare(dataclasses.replace(target_from_args(parse("--space", "sec")), role="control"))
    c = decode_jwt(ctl.credential.jwt)
    owner, actor, uid = ctl.credential.caller
    assert owner == "local" and actor == c["sub"] and 26 <= len(uid) <= 32
    assert c["exp"] - c["iat"] <= 300
    # an issued instrument (§13.15): its replies on the versioned rail, pinned to its generation
    gen = ctl.credential.issued.generation
    assert f"cotal.sec.ep.v1.reply.*.*.*.local.{actor}.{uid}.{gen}.*" in c["nats"]["sub"]["allow"]
    assert not any(p.startswith("cotal.sec.ep.reply.") for p in c["nats"]["sub"]["allow"])
    assert not any(p.startswith("cotal.sec.chat") for p in c["nats"]["pub"]["allow"])
    with pytest.raises(Exception):
        prepare(dataclasses.replace(target_from_args(parse("--space", "sec")), role="session"))


def test_several_meshes_none_current_without_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    for s, port in (("beta", 2), ("alpha", 1)):
        register(tmp_path, s, server=f"nats://127.0.0.1:{port}", root="/x", mode="open")
    t = target_from_args(parse())
    assert t.problem == ("2 meshes are registered (alpha, beta) and none is current; name one with --space, "
                         "or make one current by writing its space to $COTAL_HOME/current-mesh.")


def test_the_numbered_prompt_on_a_terminal(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COTAL_HOME", str(tmp_path))
    for s, port in (("beta", 2), ("alpha", 1), ("gamma", 3)):
        register(tmp_path, s, server=f"nats://u:pw@127.0.0.1:{port}", root="/x", mode="open")

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Tty("9\n2\n"))
    monkeypatch.setattr("sys.stderr", Tty())
    t = target_from_args(parse())
    assert (t.space, t.source, t.servers) == ("beta", "picked", ("nats://u:pw@127.0.0.1:2",))
    import sys

    shown = sys.stderr.getvalue()
    assert "1. alpha" in shown and "2. beta" in shown and "3. gamma" in shown and "pw" not in shown
    monkeypatch.setattr("sys.stdin", Tty(""))
    entry, why = pick_mesh([{"space": "a", "server": "x"}, {"space": "b", "server": "y"}])
    assert entry is None and "no mesh picked" in why


async def test_a_problem_is_the_connect_error():
    from meshview.link.connect import ConnectError

    with pytest.raises(ConnectError, match="none is current"):
        await connect(ConnectTarget(("nats://127.0.0.1:1",), problem="2 meshes are registered and none is current."))
