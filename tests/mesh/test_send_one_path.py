"""One way to send: the composer, the palette, ``cotal chat`` and ``cotal send`` only parse their
input into a :class:`~meshview.act.participant.Send`, and the same input gives the same Send and
the same envelope; the reply-routing rule lives once, in meshview (pure, no broker)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from types import SimpleNamespace

import msgspec
import pytest

from cotal_tui.cli.chat import parse as chat_parse
from cotal_tui.cli.send import plan
from cotal_tui.palette import PING, parse_write
from cotal_tui.screens.compose import ask_target, channel_target, dm_target, reply_target, send_of
from meshview.link import connect
from meshview import errors
from meshview.act import participant
from meshview.link.connect import ConnectTarget
from meshview.act.participant import Participant, RosterEntry
from meshview.act.send import Original, Send, reply_send
from meshview.model.snapshot import FeedEntry
from meshview.wire.messages import CotalMessage, EndpointRef

ROOT = Path(__file__).resolve().parents[2]
ROWS = [RosterEntry("local.bram", "bram", "agent", role="reviewer"),
        RosterEntry("local.dash", "dash", "endpoint")]
PEERS = [SimpleNamespace(id=r.id, name=r.name, kind=r.kind, role=r.role) for r in ROWS]


def _participant() -> Participant:
    return Participant(ConnectTarget(("nats://127.0.0.1:9",), "demo"), user="op", roster=lambda: ROWS)


def _cli(*words: str, ask: str | None = None, queue: bool = False,
         reply_to: str | None = None) -> Send:
    return plan(argparse.Namespace(words=list(words), ask=ask, queue=queue, reply_to=reply_to,
                                   timeout=30.0, as_name=None, json=False))


def _palette(q: str, tab: str | None = "general") -> Send:
    verb, _, rest = q.partition(" ")
    w = parse_write(verb, rest, PEERS, tab)
    assert not isinstance(w, str), w
    return send_of(w.target, w.text)


def _envelope(send: Send) -> CotalMessage:
    """The envelope minus what is minted fresh each time (id, ts)."""
    return msgspec.structs.replace(_participant().prepare(send), id="x", ts=0)


CASES = {
    "a post": (send_of(channel_target("ops"), "deploy @bram"), _palette("msg #ops deploy @bram"),
               chat_parse("#ops deploy @bram", "general"), _cli("#ops", "deploy", "@bram")),
    "a post to the current channel": (send_of(channel_target("general"), "hi"), _palette("msg hi"),
                                      chat_parse("hi", "general"), _cli("#general", "hi")),
    "a DM": (send_of(dm_target("local.bram", "bram"), "hello there"),
             _palette("dm @bram hello there"), chat_parse("/dm @bram hello there", "general"),
             _cli("@bram", "hello", "there")),
    "an ask": (send_of(ask_target("reviewer"), "look at PR 42"),
               _palette("ask @reviewer look at PR 42"),
               chat_parse("/ask @reviewer look at PR 42", "general"),
               _cli("look", "at", "PR", "42", ask="reviewer")),
    "a queued ask": (send_of(ask_target("nobody", queue=True), "anyone?"),
                     _palette("ask --queue @nobody anyone?"),
                     chat_parse("/ask --queue @nobody anyone?", "general"),
                     _cli("anyone?", ask="nobody", queue=True)),
}


@pytest.mark.parametrize("what", list(CASES))
def test_every_front_end_builds_the_same_envelope(what):
    sends = CASES[what]
    assert all(isinstance(s, Send) for s in sends), sends
    assert len({(s.kind, s.text, s.reply_to, s.context_id, s.queue) for s in sends}) == 1, sends
    envelopes = [_envelope(s) for s in sends]
    assert all(e == envelopes[0] for e in envelopes), envelopes


def test_the_same_send_where_names_need_no_roster():
    # a DM's name is resolved by the participant (the roster); everything else is literal
    for what in ("a post", "a post to the current channel", "an ask", "a queued ask"):
        assert len(set(CASES[what])) == 1, CASES[what]


def test_palette_call_pings_and_refusals_are_sentences():
    assert _palette("call @bram") == Send("dm", "local.bram", PING)
    assert parse_write("dm", "@dash hi", PEERS, None) == (
        "dm: dash is an endpoint, not an agent: DMs go to agents only")
    assert parse_write("msg", "", PEERS, "ops") == "msg: type the text to post to #ops"


# -- the reply rule, once --------------------------------------------------------------------

def _entry(**kw) -> FeedEntry:
    base = dict(index=0, id="m1", ts=1.0, received=1.0, kind="dm", from_id="local.bram",
                from_name="bram", from_role=None, text="hi", to_ids=("local.op_console",),
                to_names=("op-console",), context_id="ctx-9")
    base.update(kw)
    return FeedEntry(**base)


def _message(**kw) -> CotalMessage:
    base = dict(id="m1", ts=1, space="demo", from_=EndpointRef(id="local.bram", name="bram"),
                contextId="ctx-9")
    base.update(kw)
    return CotalMessage(**base)


ME = "local.op_console"


@pytest.mark.parametrize("entry,message,want", [
    (_entry(kind="channel", channel="ops", to_ids=(), to_names=()),
     _message(channel="ops"), Send("channel", "ops", "ok", reply_to="m1", context_id="ctx-9")),
    (_entry(), _message(to=ME), Send("dm", "local.bram", "ok", reply_to="m1", context_id="ctx-9")),
    (_entry(from_id=ME, from_name="op-console", to_ids=("local.bram",), to_names=("bram",)),
     _message(from_=EndpointRef(id=ME, name="op-console"), to="local.bram"),
     Send("dm", "local.bram", "ok", reply_to="m1", context_id="ctx-9")),
    (_entry(kind="anycast", to_ids=(), to_names=(), to_service="reviewer"),
     _message(toService="reviewer"),
     Send("dm", "local.bram", "ok", reply_to="m1", context_id="ctx-9")),
])
def test_reply_goes_where_the_original_came_from(entry, message, want):
    assert reply_send(Original.of_entry(entry), "ok", ME) == want
    assert reply_send(Original.of(message), "ok", ME) == want
    target = reply_target(entry, ME)
    assert send_of(target, "ok") == want


def test_a_thread_starts_at_the_original_and_lifecycle_rows_cannot_be_answered():
    fresh = Original.of(_message(contextId=None, channel="ops"))
    assert reply_send(fresh, "ok", ME).context_id == "m1"
    assert reply_send(Original.of_entry(_entry(kind="lifecycle")), "ok", ME) is None
    assert reply_target(_entry(kind="lifecycle"), ME) is None


def test_the_reply_rule_lives_once_in_meshview():
    """No front-end routes a reply or computes its thread itself: they import the rule."""
    fronts = ["cotal_tui/screens/compose.py", "cotal_tui/cli/send.py", "cotal_tui/cli/chat.py",
              "cotal_tui/operator.py", "cotal_tui/palette.py"]
    thread = re.compile(r"contextId\s+or\b|context_id\s+or\b")
    for path in sorted((ROOT / "cotal_tui").rglob("*.py")):
        src = path.read_text()
        rel = path.relative_to(ROOT).as_posix()
        assert not thread.search(src), f"{rel} computes a reply's thread itself"
        assert "def reply_context" not in src and "def reply_send" not in src, rel
    compose = (ROOT / fronts[0]).read_text()
    assert "from meshview.act.send import Original, Send, reply_send" in compose
    assert "reply_context" in (ROOT / fronts[1]).read_text()  # cli/send.py uses wire's


def test_one_permission_denied_root():
    assert issubclass(connect.SubjectDenied, errors.PermissionDenied)
    assert issubclass(participant.PublishDenied, errors.PermissionDenied)
    assert issubclass(participant.PublishDenied, participant.ParticipantError)
    named = [p for pkg in ("meshview", "attach", "widgets", "cotal_tui") for p in (ROOT / pkg).rglob("*.py")
             if "class PermissionDenied" in p.read_text()]
    assert [p.relative_to(ROOT).as_posix() for p in named] == ["meshview/errors.py"]
