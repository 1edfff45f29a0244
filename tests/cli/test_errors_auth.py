"""Errors a user can act on on a static-auth mesh: a bare login the broker refuses
is said as "the broker requires credentials" with the ways to give them (it was ``[Errno 104]
Connection reset by peer``), and a ``--space`` the registry does not hold names the spaces it
does hold (it was "no mesh registered" while ``main`` was). The real CLI, a real operator-mode
nats-server (``DemoMesh(auth="static")``)."""

from __future__ import annotations

import pytest
from test_errors_space import cotal, one_sentence

VERBS = [("ps", ()), ("watch", ("--plain",)), ("send", ("#general", "hi")), ("status", ("alpha",))]


@pytest.fixture(scope="module")
def mesh():
    from cotal_tui.demo.mesh import DemoMesh

    m = DemoMesh(space="main", agents=0, auth="static").start()
    yield m
    m.stop()


async def test_a_bare_login_says_the_broker_requires_credentials(mesh, tmp_path):
    """No COTAL_HOME registry (so no seed to mint from): every verb names the problem and the
    flags and environment that solve it."""
    for verb, rest in VERBS:
        code, out, err = await cotal(verb, "--server", mesh.url, "--connect-timeout", "3", *rest,
                                     env={"COTAL_HOME": str(tmp_path)})
        assert code == 1 and out == "", (verb, err)
        assert one_sentence(err, verb) == (
            f"could not connect to {mesh.url}: the broker requires credentials and none were "
            "given; pass --creds FILE or --nkey FILE (or user:pass@ or token@ in --server; "
            "--bearer-file and --sentinel-creds on a per-user-auth mesh), or set COTAL_HOME to "
            "the home whose mesh registry records this mesh."), (verb, err)


async def test_a_space_the_registry_does_not_hold_names_the_ones_it_does(mesh):
    env = {"COTAL_HOME": mesh.home}
    for verb, rest in VERBS:
        code, out, err = await cotal(verb, "--space", "nosuch", "--connect-timeout", "3", *rest,
                                     env=env)
        assert code == 1 and out == "", (verb, err)
        assert one_sentence(err, verb) == (
            f"space 'nosuch' is not in the mesh registry in {mesh.home} (registered: main); "
            "pick one with --space, or name its broker with --server."), (verb, err)
    # the broker named, the space not registered: nothing to mint, and the registry is named
    code, out, err = await cotal("watch", "--plain", "--server", mesh.url, "--space", "nosuch",
                                 "--connect-timeout", "3", env=env)
    assert code == 1 and out == ""
    assert one_sentence(err, "watch") == (
        f"could not connect to {mesh.url}: the broker requires credentials and none were given: "
        f"the mesh registry in {mesh.home} has no space 'nosuch' to mint them for (registered: "
        "main); pick one with --space, or pass --creds FILE or --nkey FILE."), err
