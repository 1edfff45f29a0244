"""``cotal status --components [--json]``: one row per component of the mesh, each verdict with
its source and its age (attach.control.health decides; this prints).

    broker          ok                 nats-server 2.12.1, JetStream on, message schedules · broker-dial, 0ms
    manager 4k2x…   serving            answered a pinned describe in 12ms · responder-roundtrip, 0ms
    manager plane   bound              the responder graded itself bound · responder-roundtrip, 0ms
    delivery plane  unbound            nothing answers the delivery liveness probe · broker-no-responders, 0ms

Exit status, as the reference's (status.ts ``COMPONENT_EXIT``), the worst component deciding: 0
every component serving; 1 one is absent; 2 one is present but not serving; 3 one could not be
established (a probe refused or unanswered, or the mesh unreachable), so cron can branch on it. Everything a peer said is neutralised
before it reaches the terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

LABELS = {"broker": "broker", "manager": "manager", "manager-plane": "manager plane",
          "delivery-plane": "delivery plane", "auth-exchange": "auth exchange"}


def row_text(v: Any) -> str:
    """One verdict as one line (untrusted text made terminal-safe)."""
    from attach.control.health import age_text
    from meshview.wire.sanitize import inline as clean

    label = LABELS.get(v.component, v.component)
    if v.component == "manager":
        label = f"manager {v.name}"
    mark = "✓" if v.healthy else "?" if v.disposition == "refused" else "✗"
    reject = f" [{v.rejected}]" if v.rejected else ""
    return (f"{mark} {clean(label, 48):<40} {v.state:<18} {clean(v.detail, 300)}{reject}"
            f" · {v.source}, {age_text(v.age_ms)}")


def run_components(args: argparse.Namespace) -> int:
    async def main() -> int:
        import dataclasses

        from attach.control.health import components, exit_code
        from cotal_tui.cli.connection import target_from_args
        from meshview.link.connect import ConnectError, connect

        target = dataclasses.replace(target_from_args(args), role="control", name="cotal-status")
        try:
            nc, target = await connect(target)
        except ConnectError as e:
            if args.json:
                print(json.dumps({"healthy": False, "components": [], "error": str(e)}, separators=(",", ":")))
            print(f"cotal status: {e}", file=sys.stderr)
            return 3  # nothing could be asked: refused, as the reference grades an unread surface
        try:
            verdicts = await components(nc, target)
        finally:
            try:
                await asyncio.wait_for(nc.close(), 2.0)
            except Exception:  # noqa: BLE001 - the verdicts are in; a slow close changes nothing [counted: COTAL_LOG]
                from meshview.errors import swallowed

                swallowed("cotal_tui.cli.health:run_components")
        healthy = all(v.healthy for v in verdicts)
        code = exit_code(verdicts)
        if args.json:
            print(json.dumps({"healthy": healthy, "exit": code, "components": [v.as_json() for v in verdicts]},
                             separators=(",", ":")))
        else:
            for v in verdicts:
                print(row_text(v))
        return code

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 130
