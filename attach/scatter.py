"""A scatter on the ``all`` rail against a frozen expected set, every reply classified.

The caller freezes the expected set from the registry (:func:`attach.registry.freeze`), publishes
once and gathers. A reply is attributed by its subject (instance and epoch), never by its body:

- ``answered``: the first reply of a frozen instance at its frozen epoch;
- ``churn``: a frozen instance answering at another epoch (it restarted since the freeze), or a
  silent slot whose registration moved during the gather (re-read after it);
- ``unexpected``: an instance that is not in the frozen set;
- ``duplicate``: a second reply from an instance already heard (reported, never dropped);
- ``late``: a reply for a silent slot that landed after the deadline, while the registry was
  re-read (reported, not used as the answer);
- ``missing``: a frozen instance that gave none of these.

``waiting`` may shrink while the gather runs (a liveness probe found nothing on a slot's rail);
the gather ends when every slot still waited for answered, or at the deadline.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from meshview.connect import SubjectDenied, check_denied, denial_mark, publish_checked
from meshview.wire.endpoint import new_nonce, parse_reply, reply_filter, request_subject
from meshview.wire.envelope import EndpointError, build_request, parse_reply_body

from .endpoint import EndpointClient, Reply
from .registry import Slot

POLL_S = 0.05


@dataclass
class Stray:
    """A reply that is not a slot's answer: ``kind`` is churn | unexpected | duplicate | late."""

    kind: str
    reply: Reply


@dataclass
class Gathered:
    answers: dict[str, Reply] = field(default_factory=dict)  # frozen iid -> its in-epoch reply
    strays: list[Stray] = field(default_factory=list)
    churned: set[str] = field(default_factory=set)  # frozen slots that moved (epoch or registration)

    def missing(self, frozen: dict[str, Slot]) -> list[str]:
        return sorted(i for i in frozen if i not in self.answers and i not in self.churned)


async def scatter(ep: EndpointClient, command: str, args: Any, frozen: dict[str, Slot], *,
                  deadline_ms: int, waiting: set[str] | None = None,
                  reconcile: Callable[[], Awaitable[dict[str, Slot]]] | None = None) -> Gathered:
    """Publish ``command`` once on the ``all`` rail and gather until every slot of ``waiting``
    (default: all of ``frozen``) answered, or ``deadline_ms`` passed. ``reconcile`` re-reads the
    registry after a gather that left slots silent; a slot whose registration moved is churn."""
    nc = ep.nc
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_ms / 1000
    resolved = await ep.resolve(deadline_ms=max(1, deadline_ms))
    cmd = resolved.commands.get(command)
    if cmd is None:
        raise EndpointError("unimplemented", f"{ep.endpoint} does not describe a {command!r} command")
    waiting = set(frozen) if waiting is None else waiting
    nonce = new_nonce()
    env = build_request(endpoint=ep.endpoint, command=command, caller=ep.caller,
                        input_digest=cmd.input_digest, output_digest=cmd.output_digest, args=args,
                        deadline_ms=max(1, int((end - loop.time()) * 1000)), name=ep.name)
    got = Gathered()
    heard: set[str] = set()
    closed = False

    def take(msg: Any) -> None:
        parsed = parse_reply(msg.subject)
        if parsed is None or parsed.endpoint != ep.endpoint or parsed.nonce != nonce or parsed.caller != ep.caller:
            return
        try:
            body = parse_reply_body(msg.data)
        except (ValueError, UnicodeDecodeError):
            return
        if body["id"] != env["id"]:
            return
        if body["ok"]:
            r = Reply(True, body.get("data"), None, parsed.instance_id, parsed.epoch)
        else:
            e = body["error"]
            r = Reply(False, None, EndpointError(e["code"], e["message"], details=e.get("details"),
                                                 outcome=e.get("outcome")), parsed.instance_id, parsed.epoch)
        iid = r.instance_id
        if iid in heard:
            got.strays.append(Stray("duplicate", r))
            return
        heard.add(iid)
        slot = frozen.get(iid)
        if slot is None:
            got.strays.append(Stray("unexpected", r))
        elif closed:
            got.strays.append(Stray("late", r))
        elif r.epoch != slot.epoch:
            got.strays.append(Stray("churn", r))
            got.churned.add(iid)
        else:
            got.answers[iid] = r

    async def cb(msg: Any) -> None:
        take(msg)

    mark = denial_mark(nc)
    sub = await nc.subscribe(reply_filter(ep.space, ep.endpoint, ep.caller, nonce), cb=cb)
    try:
        await nc.flush()
        subject = request_subject(ep.space, ep.endpoint, command, ep.caller, nonce, route="all")
        try:
            await publish_checked(nc, subject, json.dumps(env, separators=(",", ":")).encode())
            check_denied(nc, mark, "subscribe")
        except SubjectDenied as e:
            raise EndpointError("permission-denied", f"{e} (the credential does not carry this call)",
                                outcome="not-executed") from None
        while loop.time() < end:
            if waiting <= (set(got.answers) | got.churned):
                break
            await asyncio.sleep(min(POLL_S, max(0.0, end - loop.time())))
        closed = True
        silent = [i for i in frozen if i not in got.answers and i not in got.churned]
        if silent and reconcile is not None:
            try:
                now = await reconcile()
            except Exception:  # noqa: BLE001 - a failed re-read leaves the slots missing
                now = dict(frozen)
            for iid in silent:
                cur = now.get(iid)
                if cur is None or cur != frozen[iid]:
                    got.churned.add(iid)
    finally:
        try:
            await sub.unsubscribe()
        except Exception:  # noqa: BLE001
            pass
    return got
