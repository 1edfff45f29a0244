"""``cotal status --line [--format F]``: one short line of presence counts, for tmux's status-right.

    cotal status --line                  main ● 12 ◐ 2 ○ 5 ⨯ 1
    cotal status --line --format '{waiting} waiting'

It reads the space's presence bucket once (one connection as the space's reader, one watch of
the current state, then it stops) and never imports the console: a status bar calls it every
few seconds. Each record is judged by :func:`meshview.wire.presence.decode_presence` (stale is
offline), so a lying peer counts as one agent in one state, whatever it writes.
"""

from __future__ import annotations

import argparse
import asyncio
import string
import sys
from typing import Any

#: the names ``--format`` may use, in the order the default line shows them
FIELDS = ("space", "working", "waiting", "idle", "offline")
DEFAULT_FORMAT = "{space} ● {working} ◐ {waiting} ○ {idle} ⨯ {offline}"
READ_TIMEOUT_S = 5.0


class FormatError(ValueError):
    """A ``--format`` that names an unknown field or is not a format string."""


def check_format(fmt: str) -> str:
    """``fmt`` when every field it names is one of :data:`FIELDS`; else one sentence."""
    known = " ".join("{%s}" % f for f in FIELDS)
    try:
        parts = list(string.Formatter().parse(fmt))
    except ValueError as e:
        raise FormatError(f"--format is not a format string ({e}); the fields are {known}") from None
    for _, name, spec, conv in parts:
        if name is None:
            continue
        if name not in FIELDS:
            shown = name if name else "{}"
            raise FormatError(f"--format names an unknown field {shown!r}; the fields are {known}")
        if conv or spec:
            raise FormatError(f"--format field {{{name}}} takes no conversion or spec; the fields are {known}")
    return fmt


def status_line(fmt: str, space: str, counts: dict[str, int]) -> str:
    """The line itself: ``fmt`` filled in (a name from the wire is made terminal-safe)."""
    from meshview.wire.sanitize import inline as clean

    return fmt.format(space=clean(space, 64), **{k: counts.get(k, 0) for k in FIELDS[1:]})


def count_statuses(values: dict[str, bytes], now_ms: int) -> dict[str, int]:
    """Each agent's one state, as the roster would derive it (endpoints such as a manager are not
    agents, as the console's counts leave them out); bad records are not counted."""
    from meshview.wire.presence import decode_presence

    counts = dict.fromkeys(FIELDS[1:], 0)
    for key, value in values.items():
        d = decode_presence(key, "PUT", value, now_ms)
        if (d.action == "apply" and d.presence is not None and d.presence.card.kind == "agent"
                and d.derived_status in counts):
            counts[d.derived_status] += 1
    return counts


async def read_presence(nc: Any, space: str, timeout: float = READ_TIMEOUT_S) -> dict[str, bytes]:
    """The presence bucket's current values by key: one watch of its initial state, then stop."""
    from meshview.observe import kvwatch
    from meshview.wire.names import bucket_names

    return await asyncio.wait_for(kvwatch.current_values(nc, bucket_names(space).presence), timeout)


def run_line(args: argparse.Namespace) -> int:
    """Print the one line; 2 for a bad ``--format`` (before any connection), 1 when unread."""
    try:
        fmt = check_format(args.format if args.format is not None else DEFAULT_FORMAT)
    except FormatError as e:
        print(f"cotal status: {e}.", file=sys.stderr)
        return 2

    async def main() -> int:
        import dataclasses
        import time

        from cotal_tui.cli.connection import target_from_args
        from meshview.link.connect import ConnectError, connect, explain_error
        from meshview.observe.spaces import missing_space

        reader = dataclasses.replace(target_from_args(args), role="observer", name="cotal-status")
        try:
            nc, reader = await connect(reader)
        except ConnectError as e:
            print(f"cotal status: {e}", file=sys.stderr)
            return 1
        try:
            try:
                values = await read_presence(nc, reader.space)
            except Exception as e:  # noqa: BLE001 - said as one sentence, never a traceback
                missing = await missing_space(nc, reader.space, reader.display)
                why = missing or explain_error(e) or "the presence bucket could not be read"
                print(f"cotal status: {why}", file=sys.stderr)
                return 1
            print(status_line(fmt, reader.space, count_statuses(values, int(time.time() * 1000))))
            return 0
        finally:
            try:
                await asyncio.wait_for(nc.close(), 2.0)
            except Exception:  # noqa: BLE001 - the line is out; a slow close changes nothing [counted: COTAL_LOG]
                from meshview.errors import swallowed

                swallowed("cotal_tui.cli.status:run_line")

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 130
