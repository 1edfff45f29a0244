"""``spawn``, as the reference's ``start`` op reads it: the persona ref or an explicit agent file,
the connector, the seat name (pinned, or the persona's auto-numbered), launched on a pty and
answered at once with the action acceptance; the goal settles later (goals.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from pathlib import Path
from typing import Any

from cotal_tui.demo.personas import DEFAULT_CONNECTOR, LaunchRefused, PersonaError, PersonaFile, connector_argv
from meshview.wire.endpoint import ParsedRequest, is_seat_name

from cotal_tui.demo.manager.base import fail
from cotal_tui.demo.manager.seats import SeatFamily
from cotal_tui.demo.manager.spec import Goal, SeatSpec

MAX_AGENTS = 50


class SpawnFamily(SeatFamily):
    async def _cmd_spawn(self, parsed: ParsedRequest, env: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        # As the reference's ``start`` op reads spawn (manager.ts StartAgentOpts): ``name`` is the
        # persona REF (``.cotal/agents/<name>.md``, which must exist), ``config`` an explicit agent
        # file loaded instead, ``identity`` the seat-name override (the CLI's ``--name``); without
        # it the seat presents under the persona file's own name, auto-numbered on collision.
        ref = args["name"].strip()
        if self.user_mesh:
            await self._authorize_user_spawn(parsed)
        try:
            if args.get("config"):
                persona: PersonaFile | None = self.persona_store.resolve(args["config"], Path(self.root))
            else:
                persona = self.persona_store.load(ref)
        except PersonaError as e:
            raise fail("failed-precondition", str(e)) from None
        if persona is None:
            raise fail("failed-precondition", f"no agent file .cotal/agents/{ref}.md on this manager "
                       f"(it knows {', '.join(self.persona_store.names()) or 'none'})")
        pinned = bool(args.get("identity"))
        name = args["identity"].strip() if pinned else persona.name
        if not is_seat_name(name):
            raise fail("failed-precondition", f"unsafe name {json.dumps(name)} (allowed: a letter, then up to 31 "
                       "letters, digits, _ -)")
        for key in ("resume", "resumeClaim", "resumeAgent"):
            if args.get(key):
                raise fail("failed-precondition", f"{key}: the demo's connectors keep no harness sessions to resume")
        if "supervise" in args:
            raise fail("failed-precondition", "supervise: this manager does not restart seats in place")
        agent = args.get("agent") or persona.agent or args.get("defaultAgent") or DEFAULT_CONNECTOR
        conn = self.connectors.get(agent)
        if conn is None:
            raise fail("failed-precondition", f"no connector named {agent!r} (this manager has "
                       f"{', '.join(self.connectors)})")
        if not conn.available:
            raise fail("failed-precondition", f"connector {agent} is unavailable on this host: {conn.reason}")
        cwd = None
        if args.get("cwd"):
            p = Path(args["cwd"])
            p = p if p.is_absolute() else Path(self.root) / p
            if not p.is_dir():
                raise fail("failed-precondition", f"cwd {args['cwd']} is not a directory on this manager's host")
            cwd = str(p.resolve())
        # a seat named by its persona auto-numbers (reviewer, reviewer_2); an --name is pinned
        if name in self.seats:
            if pinned:
                raise fail("failed-precondition", f'agent "{name}" already running')
            base, n = name, 1
            while name in self.seats:
                n += 1
                name = f"{base}_{n}"
        launch = args["launchOptions"] if "launchOptions" in args else persona.launch_options
        try:
            argv = connector_argv(agent, name, launch)
        except LaunchRefused as e:
            raise fail("failed-precondition", str(e)) from None
        if len(self.seats) >= MAX_AGENTS:
            raise fail("resource-exhausted", f"this manager already runs {MAX_AGENTS} seats")
        actor = secrets.token_hex(12)  # a fresh principal per incarnation, like an nkey on open meshes
        owner = parsed.caller.owner if self.user_mesh else "local"  # a user mesh: under the caller's owner
        spec = SeatSpec(name=name, principal_id=f"{owner}.{actor}", argv=argv, presence=True, agent=agent,
                        role=args.get("role") or persona.role, persona=persona.name,
                        model=args.get("model") or persona.model,
                        variant=args.get("variant") or persona.variant,
                        cwd=cwd, prompt=args.get("prompt") or None, description=persona.description)
        goal = Goal(env["id"], parsed.caller, name)
        seat = self._spawn(spec)
        seat.spawner = parsed.caller.principal
        seat.goal = goal
        loop = asyncio.get_running_loop()
        goal.timer = loop.call_later(self.readiness_ms / 1000, self._settle, seat, "uncertain",
                                     {"name": name, "readinessDeadlineMs": self.readiness_ms})
        return {"name": name, "owner": seat.owner, "actor": seat.actor, "uid": seat.lifecycle_uid,
                "goalId": goal.goal_id, "fingerprint": self._fingerprint(args, name),
                "readinessDeadlineMs": self.readiness_ms,
                "executor": {"lifecycleUid": self.uid, "epoch": self.epoch}}

    @staticmethod
    def _fingerprint(args: dict[str, Any], name: str) -> str:
        """What was asked for, hashed: the args as sent and the seat name they were given (any
        JSON, floats included, so not the integers-only canonical form)."""
        raw = json.dumps({"args": args, "name": name}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()
