"""``cotal deliver pending NAME``: what the broker holds for one DM recipient right now.

    cotal deliver pending bram               its DM durable's counters, then the DMs stored past
                                             its ack floor (id, the subject's sender, ts)
    cotal deliver pending bram --durable D   a durable by its exact name (an old lifecycle's,
                                             once its card is gone from the roster)
    --limit N (default 20) candidates at most; --json one object

As the reference's ``cotal deliver pending`` (CLI 0.57): an inspection read, never a delivery
claim. The recipient is resolved on the presence bucket (an offline card still resolves: a dead
recipient is what this is for); its durable is ``dm_<owner>-<actor>-<lifecycleUid>`` on
``DM_<space>``. It reads with the space's read view (an admin view on a static mesh, the same
grant the reference rides); the reference says a per-user-auth mesh has no equivalent read
authority yet and refuses there, so this refuses there too, before anything is dialled. It never starts the
delivery daemon, acks nothing and creates no durable. Exit 0 when read, 1 when not found or unreadable
(one sentence on stderr), 2 for bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass
from typing import Any

DEFAULT_LIMIT = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cotal_tui.cli.connection import add_connection_arguments

    parser.add_argument("verb", choices=["pending"], help="pending: a recipient's held DMs")
    parser.add_argument("name", metavar="NAME", help="the recipient: a name or principal id")
    parser.add_argument("--durable", metavar="NAME",
                        help="read this DM durable by its exact name (no presence lookup)")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"candidates to list at most (default {DEFAULT_LIMIT})")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    add_connection_arguments(parser)


class Refused(Exception):
    """One sentence for stderr, exit 1."""


@dataclass(frozen=True, slots=True)
class _Row:
    id: str
    name: str
    status: str
    uid: str | None


def run(args: argparse.Namespace) -> int:
    from meshview.observe.pending import MAX_LIMIT

    if args.limit is None or not 0 < args.limit <= MAX_LIMIT:
        print(f"cotal deliver: --limit must be a whole number from 1 to {MAX_LIMIT}.",
              file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 130


async def _run(args: argparse.Namespace) -> int:
    import dataclasses

    from cotal_tui.cli.connection import target_from_args
    from meshview.link.connect import ConnectError, connect, explain_error

    try:
        target = dataclasses.replace(target_from_args(args), role="observer",
                                     name="cotal-deliver-pending")
    except Exception as e:  # noqa: BLE001 - e.g. an unreadable registry: one sentence
        print(f"cotal deliver: {_one_line(str(e))}", file=sys.stderr)
        return 1
    if target.user_mode:
        print("cotal deliver: a per-user-auth mesh has no read authority over another "
              "principal's DM durable (the reference refuses it too); nothing was read.",
              file=sys.stderr)
        return 1
    try:
        nc, target = await connect(target)
    except ConnectError as e:
        print(f"cotal deliver: {e}", file=sys.stderr)
        return 1
    try:
        out = await _pending(nc, target.space, args)
    except Refused as e:
        print(f"cotal deliver: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - a denial or a dead link: one sentence
        from meshview.observe.spaces import missing_space

        missing = await missing_space(nc, target.space, target.display)
        why = missing or explain_error(e) or f"the DM durable could not be read ({type(e).__name__})"
        print(f"cotal deliver: {_one_line(why)}", file=sys.stderr)
        return 1
    finally:
        try:
            await asyncio.wait_for(nc.close(), 2.0)
        except Exception:  # noqa: BLE001 - the answer is out; a slow close changes nothing [counted: COTAL_LOG]
            from meshview.errors import swallowed

            swallowed("cotal_tui.cli.deliver:_run")
    sys.stdout.write(out)
    sys.stdout.flush()
    return 0


def _one_line(s: str) -> str:
    return " ".join(str(s).split()) or "failed"


async def _pending(nc: Any, space: str, args: argparse.Namespace) -> str:
    from meshview.observe.pending import DurableNotFound, candidates, held
    from meshview.wire.names import dm_durable, parse_dm_durable
    from meshview.wire.sanitize import inline

    name = inline(args.name, 128)
    if args.durable:
        durable = args.durable
        parsed = parse_dm_durable(durable)
        recipient = f"{parsed[0]}.{parsed[1]}" if parsed else None
    else:
        row = await _resolve(nc, space, args.name)
        owner, _, actor = row.id.partition(".")
        got = dm_durable(owner, actor, row.uid or "")
        if got is None:
            raise Refused(f"not-found: no agent {name!r} and no DM durable for it in space "
                          f"{space} (its presence record names no lifecycle a durable is named by)")
        durable, recipient = got, row.id
    try:
        facts = await held(nc, space, durable)
    except DurableNotFound:
        if args.durable:
            raise Refused(f"not-found: no DM durable {inline(durable, 128)!r} in space {space}") from None
        raise Refused(f"not-found: no agent {name!r} and no DM durable for it in space {space}") from None
    rows = (await candidates(nc, space, recipient, facts.ack_floor, args.limit)
            if recipient is not None else None)
    if args.json:
        obj = facts.as_json()
        obj["candidates"] = None if rows is None else [
            {"seq": c.seq, "id": c.id, "from": c.sender, "ts": c.ts, "withheld": c.withheld}
            for c in rows]
        return json.dumps(obj, ensure_ascii=False) + "\n"
    lines = [durable, f"pending {facts.pending}", f"ack-pending {facts.ack_pending}",
             f"delivered {facts.delivered}", f"ack-floor {facts.ack_floor}",
             f"created {facts.created}", f"frontier {facts.frontier}",
             f"max_age {facts.max_age:g} max_msgs_per_subject {facts.max_msgs_per_subject} "
             f"discard {facts.discard}"]
    if rows is None:
        lines.append("recent candidate ids: not read (no resolved card)")
    else:
        lines.append("recent candidate ids (from the ack floor; not proof of a hole)")
        for c in rows:
            if c.id is None:
                lines.append(f"  #{c.seq}  withheld ({c.withheld})")
            else:
                lines.append(f"  {inline(c.id, 128)}  from={c.sender}  ts={c.ts}")
    return "\n".join(lines) + "\n"


async def _resolve(nc: Any, space: str, target: str) -> _Row:
    """The recipient's presence row by id or unique name (offline cards included); a name two
    principals carry is refused naming both, never picked."""
    import time

    from meshview.model.resolve import AmbiguousName, candidates_of, matches, resolve
    from meshview.observe import kvwatch
    from meshview.wire.names import bucket_names
    from meshview.wire.presence import decode_presence
    from meshview.wire.sanitize import inline

    try:
        values = await asyncio.wait_for(
            kvwatch.current_values(nc, bucket_names(space).presence), 5.0)
    except TimeoutError:
        raise Refused("the presence bucket could not be read within 5s.") from None
    now = int(time.time() * 1000)
    rows = []
    for key, value in values.items():
        d = decode_presence(key, "PUT", value, now)
        if d.action == "apply" and d.presence is not None and d.presence.card.kind == "agent":
            p = d.presence
            rows.append(_Row(p.card.id, p.card.name, d.derived_status or "offline", p.lifecycleUid))
    cands = matches(target, candidates_of(rows))
    if len(cands) > 1:
        try:
            resolve(target.strip().removeprefix("@"), cands, outcome="nothing was read")
        except AmbiguousName as e:
            raise Refused(str(e)) from None
    if not cands:
        raise Refused(f"not-found: no agent {inline(target, 128)!r} and no DM durable for it "
                      f"in space {space}")
    return cands[0].item
