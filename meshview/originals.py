"""Which copy of a message id a reply answers: the one rule for excerpts, jumps and ``--reply-to``.

Message ids are chosen by senders, so two senders can use one id (a forger republishing a real
message's id on its own subject). Copies are keyed by (sender principal, id); a reference by id
alone picks, among the copies in stream order, the first whose kind, sender and conversation fit
the reply. When none fits and several senders used the id, the reference is ambiguous: callers
mark it or refuse it, never resolve it silently to whichever copy came first.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence, TypeVar

from meshview.sanitize import inline


class Ref(NamedTuple):
    """A message as the rule sees it: authenticated kind and sender (from the subject), the
    channel or service it went to, and a unicast's recipients."""

    kind: str  # channel | dm | anycast
    sender: str
    where: str | None = None  # the channel (channel) or the service (anycast)
    to: tuple[str, ...] = ()  # a DM's recipients


T = TypeVar("T")
DESCRIBE_CAP = 6  # candidates named in one sentence


def entry_ref(e: Any) -> Ref:
    """A feed row (meshview.snapshot.FeedEntry) as the rule sees it."""
    return Ref(e.kind, e.from_id, e.channel if e.kind == "channel" else e.to_service, e.to_ids)


def fits(reply: Ref, original: Ref) -> bool:
    """True when ``reply`` could answer ``original`` by the reply-routing rule
    (meshview/send.py ``reply_send``): a channel reply on the original's channel; a DM reply
    inside the original DM's conversation, or back to an anycast's asker; an ask on the same
    service."""
    if reply.kind == "channel":
        return original.kind == "channel" and original.where == reply.where
    if reply.kind == "dm":
        if original.kind == "dm":
            side = {original.sender, *original.to}
            return reply.sender in side and all(t in side for t in reply.to)
        return original.kind == "anycast" and original.sender in reply.to
    if reply.kind == "anycast":
        return original.kind == "anycast" and original.where == reply.where
    return False


def pick(reply: Ref | None, copies: Sequence[tuple[Ref, T]]) -> tuple[T | None, bool]:
    """The copy ``reply`` answers among ``copies`` (oldest first by stream order), and whether
    the reference is ambiguous. One sender: its first copy. Several: the first copy that fits
    ``reply`` (None: no reply to fit, as ``--reply-to`` without a target); when none fits,
    (None, True)."""
    if not copies:
        return None, False
    first_sender = copies[0][0].sender
    if all(r.sender == first_sender for r, _ in copies):
        return copies[0][1], False
    if reply is not None:
        for r, v in copies:
            if fits(reply, r):
                return v, False
    return None, True


def describe(refs: Sequence[Ref]) -> str:
    """The candidates of an ambiguous id, one phrase each: sender, kind and where."""
    out = []
    for r in refs[:DESCRIBE_CAP]:
        if r.kind == "channel":
            where = f"channel #{inline(r.where, 64)}"
        elif r.kind == "dm":
            where = "DM to " + ", ".join(inline(t, 64) for t in r.to[:4])
        else:
            where = f"ask to {inline(r.where, 64)}"
        out.append(f"{inline(r.sender, 64)} ({where})")
    if len(refs) > DESCRIBE_CAP:
        out.append(f"{len(refs) - DESCRIBE_CAP} more")
    return "; ".join(out)


def pick_reply(copies: Sequence[tuple[Ref, T]], me: str | None,
               target: Ref | None = None) -> tuple[T | None, list[Ref]]:
    """The copy an operator's ``--reply-to ID`` means, and the candidates when it cannot
    tell (then the first item is None). One sender: its first copy. Several: with a
    ``target`` (``where`` a channel or service, ``to`` a DM's recipient) the copies on that
    channel or service, or sent by (or, from ``me``, to) that recipient; without one, the DMs
    to or from ``me``. When those are not one sender's, nothing is picked: a reply is never
    sent to whichever copy a forger stored first."""
    if not copies:
        return None, []
    first_sender = copies[0][0].sender
    if all(r.sender == first_sender for r, _ in copies):
        return copies[0][1], []
    if target is None:
        fit = [(r, v) for r, v in copies
               if r.kind == "dm" and me is not None and (me in r.to or r.sender == me)]
    elif target.kind == "dm":
        fit = [(r, v) for r, v in copies if r.kind in ("dm", "anycast") and (
            r.sender in target.to or (r.sender == me and any(t in r.to for t in target.to)))]
    else:
        kind = "channel" if target.kind == "channel" else "anycast"
        fit = [(r, v) for r, v in copies if r.kind == kind and r.where == target.where]
    if fit and all(r.sender == fit[0][0].sender for r, _ in fit):
        return fit[0][1], []
    return None, [r for r, _ in copies]


def delivery_ref(d: Any) -> Ref:
    """A decoded delivery (meshview.wire.Delivery) as the rule sees it: kind, sender and
    target all from its subject."""
    return Ref(d.kind, d.sender, None if d.kind == "dm" else d.target,
               (d.target,) if d.kind == "dm" else ())
