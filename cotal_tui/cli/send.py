"""``cotal send``: one message onto the mesh; exit 0 only once JetStream has acknowledged it.

    cotal send '#general' TEXT            a channel post (``@name`` mentions are carried)
    cotal send @bram TEXT                 a DM to an agent (an endpoint is refused)
    cotal send --ask reviewer TEXT        an anycast: exactly one holder of the role takes it
                                          (refused when no live agent holds the role, unless
                                          ``--queue``: it waits in the TASK stream for one)
    cotal send --reply-to ID [TARGET] TEXT
                                          a threaded reply (replyTo = ID, contextId = the
                                          original's thread); without TARGET it goes where
                                          the original came from (its channel, or its sender
                                          as a DM), looked up in the channel and DM history
    TEXT ``-`` reads the text from stdin (one trailing newline is dropped); ``--json`` prints
    the envelope exactly as published.

**One-shot, so no presence.** SPEC §6 obliges an instance to refresh its presence record every
2000 ms for as long as it is connected; a one-shot sender is connected for one publish, well
inside a single heartbeat, and the reference's ``cotal send`` likewise opens a transient
endpoint with ``registerPresence: false``. A presence record here would only flash a phantom
peer (and then an offline row) on every roster, so none is written, not even the final offline
record. Identity is the console participant's (``--as NAME``, else the credential's principal,
else ``local.<os user>_console``), so agents' replies land in the inbox the console shows; an
identity whose principal a live agent (or, for an ``--as`` name, any live peer) holds is refused
before anything is published. On a
static-auth mesh the credential is minted from the mesh root's seed with the reference's
``operator`` profile (what its ``cotal send`` mints): the principal is ``local.<its nkey>``.

**What is true at send time, never "delivered"** (as the reference's CLI 0.57): a DM or an ask
prints the JetStream stored sequence from the publish ack and the recipient's presence as read
just before publishing (``stored #1234 · bram working``; ``offline``; ``had no roster row at send``
for an id with no presence record, the reference's words), looked up by the principal the DM subject is addressed to, never by a
display name; ``--json`` adds one ``{"receipt": ...}`` line after the envelope.

Exit status: 0 after the ack; 1 when the message was not stored (one sentence on stderr,
never a traceback); 2 for bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys

from cotal_tui.errors import CotalError
from meshview.act.send import Send, SendKind
from meshview.errors import swallowed
from meshview.wire.subjects import is_concrete_channel

DEFAULT_SEND_TIMEOUT = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    parser.add_argument("words", nargs="*", metavar="[TARGET] TEXT",
                        help="'#channel' or @agent, then the text ('-' reads stdin)")
    parser.add_argument("--ask", metavar="ROLE", help="anycast to ROLE instead of a target")
    parser.add_argument("--queue", action="store_true",
                        help="with --ask: queue it in the TASK stream even when no live agent "
                             "holds ROLE (for a future holder)")
    parser.add_argument("--reply-to", metavar="ID", dest="reply_to",
                        help="reply in the thread of message ID")
    parser.add_argument("--as", metavar="NAME", dest="as_name",
                        help="send as NAME (owner.actor for an explicit principal)")
    parser.add_argument("--json", action="store_true",
                        help="print the envelope as published (one JSON line; a DM or ask adds a receipt line)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_SEND_TIMEOUT, metavar="SEC",
                        help=f"give up when unacknowledged after SEC (default {DEFAULT_SEND_TIMEOUT:g})")
    add_connection_arguments(parser)


class Usage(CotalError):
    """Bad usage: exit 2 with this one sentence."""


def _read_stdin() -> str:
    raw = sys.stdin.buffer.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Usage("stdin is not valid UTF-8 text.") from None
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text


def plan(args: argparse.Namespace) -> Send:
    """Turn the words and flags into what to send (no network); raises Usage. A reply's
    thread (``contextId``) is the original's, known once it has been looked up."""
    words = list(args.words or [])
    target: str | None = None
    mode: SendKind
    if args.ask is not None:
        role = args.ask.removeprefix("@").strip()
        if not role:
            raise Usage("--ask needs a role.")
        if words and words[0][:1] in ("#", "@") and len(words) > 1:
            raise Usage("--ask takes the role itself; give only TEXT after it.")
        mode, target = "ask", role
    elif words and words[0][:1] in ("#", "@"):
        mode = "channel" if words[0][0] == "#" else "dm"
        target = words.pop(0)[1:].strip()
        if not target:
            raise Usage(f"the target {'#channel' if mode == 'channel' else '@agent'} needs a name.")
        if mode == "channel" and not is_concrete_channel(target):
            raise Usage("a channel to post to must be concrete (no * or >).")
    elif args.reply_to:
        mode = "reply"
    else:
        raise Usage("give a target: '#channel', @agent, or --ask ROLE (see cotal send -h).")
    if words == ["-"]:
        text = _read_stdin()
    elif "-" in words:
        raise Usage("'-' (read stdin) must be the whole text.")
    else:
        text = " ".join(words)
    if not text.strip():
        raise Usage("nothing to send: the text is empty.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Usage("the text is not valid UTF-8.") from None
    if args.timeout is None or args.timeout <= 0:
        raise Usage("--timeout must be more than 0.")
    if args.reply_to is not None and not args.reply_to.strip():
        raise Usage("--reply-to needs a message id.")
    queue = bool(getattr(args, "queue", False))
    if queue and mode != "ask":
        raise Usage("--queue goes with --ask ROLE.")
    reply_to = args.reply_to.strip() if args.reply_to else None
    return Send(mode, target, text, reply_to=reply_to, queue=queue)


def run(args: argparse.Namespace) -> int:
    try:
        p = plan(args)
    except Usage as e:
        print(f"cotal send: {e}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_send(args, p))
    except KeyboardInterrupt:
        print("cotal send: interrupted; the message may not have been sent.", file=sys.stderr)
        return 1


def _one_line(s: str) -> str:
    return " ".join(str(s).split()) or "failed"


async def _send(args: argparse.Namespace, p: Send) -> int:
    from cotal_tui.cli.connection import target_from_args
    from cotal_tui.operator import participant_target
    from meshview.act.participant import Participant, ParticipantError, role_holders
    from meshview.act.receipt import receipt

    try:
        resolved = target_from_args(args)
        target = participant_target(resolved)  # static mesh: the operator profile
    except Exception as e:  # noqa: BLE001 - e.g. an unreadable registry, a missing seed
        print(f"cotal send: {_one_line(str(e))}", file=sys.stderr)
        return 1
    from meshview.link.connect import ConnectError
    from meshview.observe.spaces import require_space

    try:  # every verb's space check, before anything is published
        await require_space(resolved)
    except ConnectError as e:
        print(f"cotal send: {e}", file=sys.stderr)
        return 1
    part = Participant(target, name=args.as_name, presence=False, send_timeout=args.timeout)
    # the operator profile posts but reads no history: a --reply-to lookup on a static mesh goes
    # through the mesh's read view (what watch mints), on a connection of its own
    reader = resolved if target.credential is not None and target.credential is not resolved.credential else None
    from cotal_tui.actionlog import action_log, send_target

    try:
        sent = await _deliver(part, args, p, reader)
    except ParticipantError as e:
        action_log("send").record("send", send_target(p.kind, p.target), "failed",
                                  detail=_one_line(str(e)), mesh=target.space)
        print(f"cotal send: {_one_line(str(e))}", file=sys.stderr)
        return 1
    finally:
        try:
            await part.close()
        except Exception:  # noqa: BLE001 - the send is done; a slow close changes nothing [counted: COTAL_LOG]
            swallowed("cotal_tui.cli.send:_send")
    action_log("send").record("send", send_target(p.kind, p.target), "acknowledged",
                              message_id=sent.message.id, mesh=target.space)
    m = sent.message
    rows = list(part.roster()) if part.roster is not None else []
    got = receipt(sent.stream, sent.seq, sent.duplicate, m.to, m.toService, rows)
    if args.json:  # the envelope as published; a DM's or ask's receipt on a line of its own
        sys.stdout.write(sent.payload.decode("utf-8") + "\n")
        if got is not None:
            sys.stdout.write(json.dumps(got.as_json(), ensure_ascii=False) + "\n")
    else:
        where = f"#{m.channel}" if m.channel else f"@{m.to}" if m.to else f"role {m.toService}"
        if got is None:
            print(f"sent {m.id} -> {where}")
        elif m.toService is None:
            print(f"sent {m.id} -> {where} · {got.words()}")
        elif role_holders(rows, m.toService):
            print(f"sent {m.id} -> {where} · {got.words()} (in the TASK stream until one holder "
                  "takes it)")
        else:
            print(f"queued {m.id} -> {where} · stored #{sent.seq} (in the TASK stream for a "
                  "future holder: no live agent holds the role)")
    sys.stdout.flush()
    return 0


class _Reader:
    """Where a one-shot sender reads (the roster, a reply's original): its own connection, or on
    a static mesh a read-view connection (``target``: what watch mints), opened on first use,
    because the operator profile posts but reads no history and cannot end a roster watch."""

    def __init__(self, part, target=None) -> None:
        self.part, self.target, self.view = part, target, None

    async def get(self):
        if self.target is None:
            return self.part
        if self.view is None:
            from meshview.act.participant import Participant

            self.view = Participant(self.target, presence=False)
            await self.view.connect_only()
        return self.view

    async def close(self) -> None:
        if self.view is not None:
            await self.view.close()


async def _deliver(part, args: argparse.Namespace, p: Send, reader=None):
    rd = _Reader(part, reader)
    try:
        return await _deliver_with(part, args, p, rd)
    finally:
        await rd.close()


async def _deliver_with(part, args: argparse.Namespace, p: Send, rd: _Reader):
    from meshview.act.participant import ParticipantError

    await part.start()  # the connection only: a one-shot sender writes no presence
    copies = []
    if p.reply_to:
        copies = await (await rd.get()).find_copies(p.reply_to)
    needs_roster = p.kind in ("dm", "ask") or (p.kind == "reply"
                                               and any(d.kind != "channel" for d in copies))
    if needs_roster or args.as_name:
        rows = await (await rd.get()).read_roster()
        part.roster = lambda: rows
        if args.as_name:  # a look-alike of a live peer is refused before anything is sent
            holder = part.holder_among(rows)
            if holder is not None:
                from meshview.act.participant import IdentityTaken, taken_sentence

                raise IdentityTaken(taken_sentence(part.id, holder))
    original = _original(part, p, copies) if copies else None
    if p.kind == "reply":
        if original is None:
            raise ParticipantError(f"message {p.reply_to!r} was not found in the channel or DM "
                                   "history; give a target ('#channel' or @agent).")
        from meshview.act.send import Original

        return await part.send(p, Original.of(original))
    # an explicit target joins the original's thread; an original not found: the id's own
    from meshview.wire.outbound import reply_context

    ctx = reply_context(original.message) if original is not None else p.reply_to
    return await part.send(dataclasses.replace(p, context_id=ctx))


def _original(part, p: Send, copies: list):
    """The copy of ``p.reply_to`` this send answers (meshview/model/originals.py ``pick_reply``):
    an id several senders used is refused, naming them, unless the target or the operator's
    own DMs single one out."""
    from meshview.model.originals import Ref, delivery_ref, describe, pick_reply
    from meshview.act.participant import ParticipantError
    from meshview.wire.sanitize import inline

    target = None
    if p.kind == "channel":
        target = Ref("channel", "", (p.target or "").removeprefix("#"))
    elif p.kind == "ask":
        target = Ref("anycast", "", (p.target or "").removeprefix("@"))
    elif p.kind == "dm":
        target = Ref("dm", "", None, (part.resolve_agent(p.target or ""),))
    chosen, cands = pick_reply([(delivery_ref(d), d) for d in copies], part.id, target)
    if chosen is None:
        senders = len({r.sender for r in cands})
        how = ("the target does not single one out" if target is not None else
               "give a target ('#channel' or @agent) to say which")
        raise ParticipantError(
            f"message id {inline(p.reply_to, 64)!r} is ambiguous: {senders} senders used it "
            f"({describe(cands)}); {how}, and nothing was sent.")
    return chosen
