"""Sends on a per-user-auth mesh (issue 35, item 8): the operator's participant (``cotal send``,
``cotal chat`` and the composer all send through it) publishes as the signed-in user's
principal (``u_….cli``, the exchange's baseline ``agent`` view), not ``local.<os user>_console``
which the broker refuses; a user mesh with no way to a bearer is refused before publishing.
Real auth-callout broker, real exchange stand-in."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from cotal_tui.cli.connection import add_connection_arguments, target_from_args
from meshview.act.participant import Participant, StartRefused
from meshview.act.send import Send
from support.userplane import user_plane  # noqa: F401
from conftest import until


def _target(monkeypatch, home):
    monkeypatch.setenv("COTAL_HOME", str(home))
    p = argparse.ArgumentParser()
    add_connection_arguments(p)
    return target_from_args(p.parse_args([]))


@pytest.mark.parametrize("presence", [False, True], ids=["cotal-send", "console-composer"])
async def test_a_send_goes_out_as_the_signed_in_users_principal(user_plane, monkeypatch,  # noqa: F811
                                                                 presence):
    """``presence=False`` is ``cotal send``; the console's composer and ``cotal chat`` keep a
    presence record too (an endpoint on the roster, with the bearer's lifecycle uid)."""
    u = user_plane.add_user("vik" if not presence else "uma", ["spawn"])
    target = _target(monkeypatch, user_plane.home_for(u))
    svc = await user_plane.service_nc()
    got: list = []

    async def on(m) -> None:
        got.append(m)

    sub = await svc.subscribe(f"cotal.{user_plane.space}.chat.>", cb=on)
    part = Participant(target, presence=presence)
    try:
        sent = await part.send(Send("channel", "general", "hello from a user mesh"))
        assert part.id.startswith("u_") and part.id.endswith(".cli"), part.id
        await until(lambda: got, 10, "the user's message on the service connection")
        m = got[0]
        owner, actor = part.id.split(".")
        assert m.subject == f"cotal.{user_plane.space}.chat.{owner}.{actor}.general"
        body = json.loads(m.data)
        assert body["from"]["id"] == part.id and "hello from a user mesh" in m.data.decode()
        assert sent is not None
    finally:
        await part.close()
        await sub.unsubscribe()
        await svc.close()


async def test_a_user_mesh_without_a_bearer_is_refused_before_publishing(user_plane, monkeypatch):  # noqa: F811
    u = user_plane.add_user("ida", ["spawn"])
    target = _target(monkeypatch, user_plane.home_for(u))
    bare = dataclasses.replace(target, exchange_url=None, idp_token_file=None, bearer=None)
    part = Participant(bare, presence=False)
    with pytest.raises(StartRefused, match="bearer"):
        await part.send(Send("channel", "general", "never published"))
    assert part.nc is None  # nothing touched the network
    await part.close()

