"""The request boundary, in the reference's order: the subject's grammar, the issued generation,
the command, its digest pins, the bind fence, the authorization form, the args against the closed
input schema; then the family's ``_cmd_<command>`` handler; then the reply against the output
schema before anything is published. A handler bug answers ``internal``, never silence; a cast is
never answered."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

from nats.aio.msg import Msg

from cotal_tui.demo.contract import VIOLATIONS
from cotal_tui.demo.runs import RUN_COMMANDS
from meshview.errors import swallowed
from meshview.wire.endpoint import MANAGER, ParsedRequest, parse_request, reply_subject
from meshview.wire.envelope import BIND_REFUSED, EndpointError, reply_body, validate_request

from cotal_tui.demo.manager.base import fail
from cotal_tui.demo.manager.issued import IssuedFamily

SERVED = ("status", "ps", "inspect", "slots", "models", "spawn", "despawn", "attach", "input",
          "goal-result", "list-personas", "show-persona", "define-persona", "purge")
ACTION_COMMANDS = ("spawn", "launch")  # left to a sibling when no connector is available (classSpawn)

Handler = Callable[[ParsedRequest, dict[str, Any], dict[str, Any]], Awaitable[object]]


class DispatchFamily(IssuedFamily):
    async def _on_request(self, msg: Msg) -> None:
        self._later(self._handle(msg))

    async def _handle(self, msg: Msg) -> None:
        parsed = parse_request(msg.subject)
        if parsed is None or parsed.endpoint != MANAGER:
            return  # not a subject of our grammar: no sender, MUST NOT be handled
        if parsed.route == "inst" and parsed.instance_id != self.instance_id:
            return
        try:
            reply_to = reply_subject(self.space, MANAGER, self.instance_id, self.epoch, parsed.caller, parsed.nonce,
                                     generation=parsed.generation)  # the rail it arrived on (§13.2)
        except ValueError:
            return
        env: dict[str, Any] | None = None
        try:
            env = validate_request(parsed, msg.data)
            await self._check_issued(parsed)
            data = await self._dispatch(parsed, env)
            if not env["replyExpected"]:
                return  # a cast is never answered (§13.5)
            body = reply_body(env["id"], data=data)
        except EndpointError as e:
            if env is not None and not env["replyExpected"]:
                return  # a failed cast stays silent too
            if e.code == "bad-request":
                self.bad_requests += 1
            body = reply_body(env["id"] if env is not None else "invalid", error=e)
        except Exception as e:  # noqa: BLE001 - a handler bug answers `internal` (SPEC §13 outcome unknown), never silence
            if env is not None and not env["replyExpected"]:
                return
            body = reply_body(env["id"] if env is not None else "invalid",
                              error=EndpointError("internal", f"{type(e).__name__}: {e}", outcome="unknown"))
        try:
            await self.nc.publish(reply_to, body)
        except Exception:  # noqa: BLE001 - the caller left or the link dropped: no one to answer [counted: COTAL_LOG]
            swallowed("demo.manager.reply")

    async def _dispatch(self, parsed: ParsedRequest, env: dict[str, Any]) -> object:
        """The boundary checks in the reference's order, then the handler, then the reply's own
        schema (a miss is ``internal`` and is recorded, loud under tests)."""
        cmd = parsed.command
        if cmd == "describe":
            return self._describe()
        c = self.contract.commands.get(cmd)
        if c is None:
            raise fail("unimplemented", f"the manager does not serve {cmd!r}: it is not a command of cluster "
                       f"{self.contract.urn} revision {self.contract.revision}")
        op = env["op"]
        if (op["inputDigest"], op["outputDigest"]) != (c.input_digest, c.output_digest):
            raise fail("contract-mismatch", f"pinned digests {op['inputDigest']}/{op['outputDigest']} do not match "
                       f"the served contract {c.input_digest}/{c.output_digest}; a member that cannot honor "
                       "a pinned digest rejects, never coerces (SPEC 13.7)")
        self._check_bind(env, cmd)
        mode = parsed.target.mode if parsed.target is not None else None
        if c.targeted and mode not in c.modes:
            raise fail("target-mismatch",
                       f"{cmd} admits the {'/'.join(c.modes)} form{'s' if len(c.modes) > 1 else ''} only")
        if not c.targeted and mode is not None:
            raise fail("target-mismatch", f"{cmd} is untargeted")
        args = env.get("args")
        why = self.contract.args_error(cmd, args)
        if why is not None:
            raise fail("bad-request", why)
        if self._stopping:
            raise fail("unavailable", "the manager is stopping")
        if cmd not in SERVED and cmd not in RUN_COMMANDS:
            raise fail("unimplemented", f"the demo manager does not serve {cmd}: a contract command this "
                       "stand-in leaves unimplemented")
        # every served command is a ``_cmd_<name>`` of one family (the name is checked above)
        handler: Handler = getattr(self, "_cmd_" + cmd.replace("-", "_"))
        data = await handler(parsed, env, args or {})
        why = self.contract.output_error(cmd, data)
        if why is not None:
            self.contract_violations.append((cmd, why))
            VIOLATIONS.append((cmd, why))
            raise EndpointError("internal", why)
        return data

    def _describe(self) -> dict[str, Any]:
        return {"public": True, "descriptor": {
            "endpoint": MANAGER, "owner": "local", "protocol": {"v": 1},
            "clusters": [{"digest": self._cluster_digest, "commands": list(self.contract.commands)}]}}

    def _check_bind(self, env: dict[str, Any], command: str) -> None:
        """The responder fence: a request bound to another incarnation is refused before the args
        are looked at, saying what it was bound to and who refused (``ai.cotal.ep.bind-refused``)."""
        b = env.get("bind")
        if b is None or (b["instanceId"], b["epoch"]) == (self.instance_id, self.epoch):
            return
        same = b["instanceId"] == self.instance_id
        raise EndpointError(
            "expired" if same else "failed-precondition",
            f"bound to epoch {b['epoch']} of this instance, which serves epoch {self.epoch}" if same
            else f"bound to manager instance {b['instanceId']}, not this one",
            details=[{"kind": BIND_REFUSED, "endpoint": MANAGER, "command": command,
                      "boundTo": {"instanceId": b["instanceId"], "epoch": b["epoch"]},
                      "servedBy": {"instanceId": self.instance_id, "epoch": self.epoch}}],
            outcome="not-executed",
        )
