"""A scatter on the ``all`` rail against a frozen expected set, every reply classified.

The caller freezes the expected set from the registry (:func:`attach.control.registry.freeze`), publishes
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
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from meshview.errors import swallowed
from meshview.wire.endpoint import new_nonce, request_subject
from meshview.wire.envelope import EndpointError, build_request

from attach.control.endpoint import EndpointClient, Reply
from attach.control.registry import Slot

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

    def take(r: Reply, closed: bool) -> None:
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

    def drain(closed: bool) -> None:
        while not q.empty():
            take(q.get_nowait(), closed)

    q: asyncio.Queue = asyncio.Queue()
    subject = request_subject(ep.space, ep.endpoint, command, ep.caller, nonce, route="all")
    sub = await ep.open_call(subject, env, nonce, q)
    try:
        while not waiting <= (set(got.answers) | got.churned):
            left = end - loop.time()
            if left <= 0:
                break
            try:
                take(await asyncio.wait_for(q.get(), min(POLL_S, left)), False)
            except asyncio.TimeoutError:
                pass  # ``waiting`` may have shrunk meanwhile: look again
            drain(False)
        silent = [i for i in frozen if i not in got.answers and i not in got.churned]
        if silent and reconcile is not None:
            try:
                now = await reconcile()
            except Exception:  # noqa: BLE001 - a failed re-read leaves the slots missing [counted: COTAL_LOG]
                swallowed("attach.control.scatter:scatter")
                now = dict(frozen)
            for iid in silent:
                cur = now.get(iid)
                if cur is None or cur != frozen[iid]:
                    got.churned.add(iid)
        drain(True)  # what landed after the deadline, while the registry was re-read
    finally:
        try:
            await sub.unsubscribe()
        except Exception:  # noqa: BLE001 - teardown of a subscription that is ending anyway [counted: COTAL_LOG]
            swallowed("attach.control.scatter:scatter#2")
    return got
