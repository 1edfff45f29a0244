"""A second manager stand-in, minimal and deliberately strict, written from the contract digest
(``shared/spec/manager-contract.md``) and the contract file alone - never from the demo
manager's code - so that where it and the demo both accept what our client sends, the client is
right by the contract and not by a mistake the two share.

It serves ``describe``, ``status``, ``ps``, ``inspect``, ``spawn``, ``despawn``, ``input``,
``list-personas``, ``show-persona`` and ``goal-result`` of revision 21 on the class, scatter and
instance rails of an open mesh; every other command of the contract answers ``unimplemented``.
Strict means: the envelope is checked field by field (§13.3, and the op digests must be the
contract's closure digests), ``args`` must pass the command's closed input schema (else
``bad-request``, ``not-executed``), the persona ref and ``config`` must name files that exist,
an unknown connector is refused, a colliding pinned seat name is refused, and every reply is validated
against the output schema before it leaves (a failure is kept in :attr:`StrictManager.own_failures`
and answered ``internal``: a test asserts the list is empty).

Records are the reference's: ``svc.manager.<iid>.spec`` then ``.status`` with ``state: ready``,
``observedSpecRevision`` and ``epoch``; a lease; every schema root, its manifest, the cluster
document and its manifest in ``EPC_<space>``. A clean :meth:`stop` deregisters (status first,
then spec, each revision-pinned). No pty: ``input`` counts the bytes it would write and keeps
the text; ``spawn`` registers a seat row and a presence record and settles its goal at once.

``hostile`` makes it an untrusted endpoint: ``"strings"`` puts control, C1 and bidi bytes into
every descriptive string it answers (the identifying ones - names it was asked for, ids, uids -
stay usable, or no verb could address a seat), plus a seat whose very name is hostile;
``"errors"`` refuses the commands in ``refuse`` (default: all but ``describe``) with a message and
details carrying them.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshview.wire.canonical import canonical_bytes, digest, manifest_for
from meshview.wire.endpoint import (
    MANAGER,
    ParsedRequest,
    epc_subject,
    goal_progress_subject,
    is_id_token,
    is_lifecycle_token,
    parse_request,
    reply_subject,
    serve_filter,
)
from meshview.wire.envelope import BIND_REFUSED, ERROR_CODES
from meshview.wire.names import bucket_names, epc_stream, space_token
from meshview.wire.outbound import mint_lifecycle_uid
from support.contract import Contract, contract

HOSTILE = "\x1b]0;t\x07\x1b[2J\x9b\u202e"  # OSC title, clear screen, C1 CSI, RLO
HOSTILE_PARTS = ("\x1b]0;t\x07", "\x1b[2J", "\x9b", "\u202e")
CONNECTOR = "strict-line"
READINESS_MS = 30_000
SERVED = ("describe", "status", "ps", "inspect", "spawn", "despawn", "input", "list-personas",
          "show-persona", "goal-result", "models")


@dataclass(frozen=True)
class StrictPersona:
    """A persona file as the reference keeps them: ``<root>/.cotal/agents/<ref>.md``, front matter
    naming the seat (``name:``), its ``role:`` and connector (``agent:``), then the text."""

    ref: str
    name: str
    role: str
    description: str
    agent: str = CONNECTOR

    def text(self, extra: str = "") -> str:
        return (f"---\nname: {self.name}\nrole: {self.role}{extra}\nagent: {self.agent}\n"
                f"description: {self.description}{extra}\n---\n\nYou are {self.name}. {self.description}{extra}\n")


PERSONAS = (
    StrictPersona("echo", "echo", "echo", "echoes each line it is given"),
    StrictPersona("reviewer", "reviewer", "reviewer", "reads a change and says what is wrong with it"),
)


def _front_matter(text: str) -> dict[str, str]:
    """``key: value`` lines between the leading ``---`` fences (enough for our own files)."""
    lines = text.splitlines()
    out: dict[str, str] = {}
    if not lines or lines[0].strip() != "---":
        return out
    for ln in lines[1:]:
        if ln.strip() == "---":
            break
        k, sep, v = ln.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


class Refusal(Exception):
    def __init__(self, code: str, message: str, *, details: list | None = None, outcome: str = "not-executed"):
        assert code in ERROR_CODES, code
        super().__init__(message)
        self.code, self.message, self.details, self.outcome = code, message, details, outcome

    def body(self) -> dict:
        e: dict = {"code": self.code, "message": self.message, "outcome": self.outcome}
        if self.details:
            e["details"] = self.details
        return e


@dataclass
class StrictSeat:
    name: str
    actor: str
    uid: str
    agent: str
    role: str | None
    started: float
    spawner: str | None = None
    model: str | None = None
    typed: list[str] = field(default_factory=list)  # every input text, in order
    bytes_in: int = 0
    presence: bool = False


def _wire_int(v: object, minimum: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and minimum <= v <= 2**53 - 1


class StrictManager:
    def __init__(self, nc, space: str, *, root: str, seats: tuple[str, ...] = (),
                 instance_id: str | None = None, hostile: frozenset[str] | set[str] = frozenset(),
                 refuse: frozenset[str] | set[str] | None = None, the_contract: Contract | None = None) -> None:
        self.nc = nc
        self.space = space_token(space)
        self.contract = the_contract or contract()
        self.instance_id = instance_id or mint_lifecycle_uid()
        self.root = root  # its workspace: persona files live under <root>/.cotal/agents
        self.uid = mint_lifecycle_uid()  # this incarnation's lifecycle (the spawn executor)
        self.actor = secrets.token_hex(16)
        self.epoch = 0
        self.hostile = frozenset(hostile)
        # "errors": these commands refuse with hostile text (default: all it serves but describe)
        self.refuse = frozenset(refuse if refuse is not None else (c for c in SERVED if c != "describe"))
        self.seats: dict[str, StrictSeat] = {}
        self.own_failures: list[str] = []  # replies this manager refused to send (a test bug)
        self.refused: list[tuple[str, str, str]] = []  # (command, code, message) it answered
        self.requests: list[tuple[str, Any]] = []  # (command, args) of every request it served
        self.goals: dict[str, dict] = {}
        self._initial = seats
        self._subs: list = []
        self._tasks: set[asyncio.Task] = set()
        self._kv: dict[str, Any] = {}
        self._spec_rev = 0
        self._started = 0.0
        self._stopped = False

    # ---- registration ---------------------------------------------------------------------

    async def _publish_artifact(self, doc: object) -> str:
        d = digest(doc)
        await self.nc.jetstream().publish(epc_subject(self.space, d), canonical_bytes(doc),
                                          stream=epc_stream(self.space))
        return d

    async def start(self) -> StrictManager:
        js = self.nc.jetstream()
        b = bucket_names(self.space)
        for k in ("records", "manager", "presence"):
            self._kv[k] = await js.key_value(getattr(b, k))
        try:
            prev = json.loads((await self._kv["records"].get(self._status_key)).value)
            self.epoch = int(prev["epoch"]) + 1
        except Exception:
            self.epoch = 1
        self._started = time.time()
        seen: set[str] = set()
        for c in self.contract.commands.values():
            for schema in (c.input_schema, c.output_schema):
                root = digest(schema)
                if root not in seen:
                    seen.add(root)
                    await self._publish_artifact(schema)
                    await self._publish_artifact(manifest_for(root))
        root = await self._publish_artifact(self.contract.cluster_document)
        closure = await self._publish_artifact(manifest_for(root))
        assert closure == self.contract.cluster_digest, "the contract's cluster digest is not reproducible"
        agents = self.personas_dir
        agents.mkdir(parents=True, exist_ok=True)
        for p in PERSONAS:
            f = agents / f"{p.ref}.md"
            if not f.exists():
                f.write_text(p.text(HOSTILE if "strings" in self.hostile else ""))
        for name in self._initial:
            self._add_seat(name, None, None, None)
        if "strings" in self.hostile:
            self._add_seat("evil" + HOSTILE, None, "h" + HOSTILE, None)
        cb = self._on_request
        self._subs.append(await self.nc.subscribe(serve_filter(self.space, "one", MANAGER), queue="manager", cb=cb))
        self._subs.append(await self.nc.subscribe(serve_filter(self.space, "all", MANAGER), cb=cb))
        self._subs.append(await self.nc.subscribe(serve_filter(self.space, "inst", MANAGER, self.instance_id), cb=cb))
        await self.nc.flush()
        records = self._kv["records"]
        self._spec_rev = await records.put(self._spec_key, json.dumps({
            "endpoint": MANAGER, "owner": "local", "clusterDigests": [closure], "protocol": {"v": 1},
        }).encode())
        await records.put(self._status_key, json.dumps({
            "epoch": self.epoch, "state": "ready", "observedSpecRevision": self._spec_rev,
        }).encode())
        await self._kv["manager"].put(f"lease.{self.instance_id}", json.dumps({
            "holder": f"local.{self.actor}", "runtime": "pty", "root": self.root, "pid": os.getpid(),
            "since": int(self._started * 1000),
        }).encode())
        return self

    @property
    def personas_dir(self) -> Path:
        return Path(self.root) / ".cotal" / "agents"

    def _persona_file(self, ref: str) -> Path | None:
        if "/" in ref or ref.startswith("."):
            return None
        f = self.personas_dir / f"{ref}.md"
        return f if f.is_file() else None

    @property
    def _spec_key(self) -> str:
        return f"svc.manager.{self.instance_id}.spec"

    @property
    def _status_key(self) -> str:
        return f"svc.manager.{self.instance_id}.status"

    async def stop(self, *, deregister: bool = True) -> None:
        """A clean stop: stop serving, then delete status first and spec second, each pinned to
        the revision this instance wrote (a moved key is someone else's: left alone)."""
        if self._stopped:
            return
        self._stopped = True
        for s in self._subs:
            try:
                await s.unsubscribe()
            except Exception:
                pass
        for t in list(self._tasks):
            t.cancel()
        for seat in self.seats.values():
            await self._seat_presence(seat, "offline")
        if not deregister:
            return
        records = self._kv["records"]
        try:
            st = await records.get(self._status_key)
            await records.delete(self._status_key, last=st.revision)
            sp = await records.get(self._spec_key)
            if sp.revision == self._spec_rev:
                await records.delete(self._spec_key, last=sp.revision)
        except Exception as e:
            self.own_failures.append(f"deregistration failed: {type(e).__name__}: {e}")
        try:
            await self._kv["manager"].delete(f"lease.{self.instance_id}")
            await self.nc.flush()
        except Exception:
            pass

    # ---- seats ----------------------------------------------------------------------------

    def _add_seat(self, name: str, spawner: str | None, role: str | None, model: str | None,
                  agent: str = CONNECTOR) -> StrictSeat:
        seat = StrictSeat(name, secrets.token_hex(16), mint_lifecycle_uid(), agent, role, time.time(),
                          spawner=spawner, model=model)
        self.seats[name] = seat
        return seat

    async def _seat_presence(self, seat: StrictSeat, status: str) -> None:
        if not seat.presence:
            return
        card = {"id": f"local.{seat.actor}", "name": seat.name, "kind": "agent", "owner": "local",
                "actor": seat.actor, "role": seat.role or "agent", "protocolVersion": "0.4"}
        rec = {"card": card, "status": status, "ts": int(time.time() * 1000), "lifecycleUid": seat.uid}
        try:
            await self._kv["presence"].put(f"local.{seat.actor}", json.dumps(rec).encode())
        except Exception:
            pass

    async def _mesh(self, seat: StrictSeat) -> str:
        try:
            rec = json.loads((await self._kv["presence"].get(f"local.{seat.actor}")).value)
        except Exception:
            return "absent"
        if time.time() * 1000 - rec.get("ts", 0) > 6000:
            return "offline"
        status = rec.get("status")
        return status if isinstance(status, str) else "absent"

    def _h(self, s: str) -> str:
        """A descriptive string as this manager answers it (hostile: with the bytes appended)."""
        return s + HOSTILE if "strings" in self.hostile else s

    async def _row(self, seat: StrictSeat) -> dict:
        row: dict = {
            "name": seat.name, "id": seat.actor, "agent": self._h(seat.agent), "space": self.space,
            "mode": self._h("pty"), "status": self._h("running"),
            "uptimeMs": int((time.time() - seat.started) * 1000),
            "mesh": self._h(await self._mesh(seat)),
            "lifecycleUid": seat.uid, "instanceId": self.instance_id, "cwd": self._h(self.root),
        }
        if seat.role is not None:
            row["role"] = seat.role if HOSTILE in seat.role else self._h(seat.role)
        if seat.spawner is not None:
            row["spawner"] = self._h(seat.spawner)
        if seat.model is not None:
            row["model"] = self._h(seat.model)
        if "strings" in self.hostile:
            row["host"] = "host" + HOSTILE
            row["condition"] = {"code": "c" + HOSTILE, "message": "condition" + HOSTILE}
        return row

    # ---- the envelope ---------------------------------------------------------------------

    def _check_envelope(self, parsed: ParsedRequest, raw: bytes) -> dict:
        """§13.3, field by field, in the order the digest lists the refusals."""
        try:
            env = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise Refusal("bad-request", "the request is not UTF-8 JSON") from None
        if not isinstance(env, dict):
            raise Refusal("bad-request", "the request is not a JSON object")
        if env.get("v") != 1:
            raise Refusal("unsupported-version", "envelope v must be 1")
        if not is_id_token(env.get("id")):
            raise Refusal("bad-request", "id must match [A-Za-z0-9_-]{1,64}")
        op = env.get("op")
        if not isinstance(op, dict) or not all(isinstance(op.get(k), str) for k in ("endpoint", "command")):
            raise Refusal("bad-request", "op must be {endpoint, command, ...}")
        if op["endpoint"] != MANAGER or op["command"] != parsed.command:
            raise Refusal("op-mismatch", "op disagrees with the request subject")
        cmd = parsed.command
        if cmd == "describe":
            if "inputDigest" in op or "outputDigest" in op:
                raise Refusal("bad-request", "describe pins no contract digests")
        else:
            spec = self.contract.command(cmd)
            for k in ("inputDigest", "outputDigest"):
                if k not in op:
                    raise Refusal("contract-mismatch", f"op.{k} is required on {cmd}")
                if not isinstance(op[k], str) or not op[k].startswith("sha256:") or len(op[k]) != 71:
                    raise Refusal("bad-request", f"op.{k} is not a sha256 digest")
            if spec is not None and (op["inputDigest"], op["outputDigest"]) != (spec.input_digest, spec.output_digest):
                raise Refusal("contract-mismatch", f"{cmd} digests differ from the served contract (revision "
                              f"{self.contract.revision})")
        if env.get("class") not in ("ephemeral", "journal"):
            raise Refusal("bad-request", "class must be ephemeral or journal")
        if not isinstance(env.get("replyExpected"), bool):
            raise Refusal("bad-request", "replyExpected must be a boolean")
        if "deadlineMs" in env:
            if not _wire_int(env["deadlineMs"], 1):
                raise Refusal("bad-request", "deadlineMs must be a positive integer")
        elif env["replyExpected"] or parsed.route == "all":
            raise Refusal("bad-request", "deadlineMs is required for a call")
        frm = env.get("from")
        if not isinstance(frm, dict) or not isinstance(frm.get("id"), str):
            raise Refusal("bad-request", "from must be {id, name?}")
        if frm["id"] != parsed.caller.principal:
            raise Refusal("sender-mismatch", "from.id is not the subject's caller")
        if "bind" in env:
            b = env["bind"]
            if cmd == "describe" or parsed.route == "all":
                raise Refusal("bad-request", "bind is not allowed on describe or on a scatter")
            if not isinstance(b, dict) or not is_lifecycle_token(b.get("instanceId")) or not _wire_int(b.get("epoch")):
                raise Refusal("bad-request", "bind must be {instanceId, epoch}")
        return env

    def _check_target(self, parsed: ParsedRequest, env: dict) -> None:
        spec = self.contract.command(parsed.command)
        mode = parsed.target.mode if parsed.target is not None else None
        if spec is None or parsed.command == "describe":
            if mode is not None:
                raise Refusal("target-mismatch", "describe is untargeted")
            return
        if spec.cls != env["class"]:
            raise Refusal("class-mismatch", f"{parsed.command} is {spec.cls}")
        if not spec.targeted:
            if mode is not None or "target" in env:
                raise Refusal("target-mismatch", f"{parsed.command} is untargeted")
            return
        if mode not in spec.modes:
            raise Refusal("permission-denied", f"{parsed.command} admits the modes {', '.join(spec.modes)}")
        if "self" in spec.modes:
            return
        t = env.get("target")
        if (not isinstance(t, dict) or not isinstance(t.get("owner"), str) or not isinstance(t.get("actor"), str)
                or not is_lifecycle_token(t.get("lifecycleUid"))):
            raise Refusal("bad-request", "target must be {owner, actor, lifecycleUid}")
        if t["owner"] != parsed.target.owner:  # type: ignore[union-attr]
            raise Refusal("target-mismatch", "target.owner is not the subject's target owner")

    def _check_bind(self, env: dict) -> None:
        b = env.get("bind")
        if b is None or (b["instanceId"], b["epoch"]) == (self.instance_id, self.epoch):
            return
        same = b["instanceId"] == self.instance_id
        raise Refusal("expired" if same else "failed-precondition",
                      "bound to another epoch of this instance" if same else "bound to another instance",
                      details=[{"kind": BIND_REFUSED, "instanceId": self.instance_id, "epoch": self.epoch}])

    # ---- requests -------------------------------------------------------------------------

    async def _on_request(self, msg) -> None:
        t = asyncio.get_running_loop().create_task(self._handle(msg))
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _handle(self, msg) -> None:
        parsed = parse_request(msg.subject)
        if parsed is None or parsed.endpoint != MANAGER:
            return
        if parsed.route == "inst" and parsed.instance_id != self.instance_id:
            return
        try:
            to = reply_subject(self.space, MANAGER, self.instance_id, self.epoch, parsed.caller, parsed.nonce)
        except ValueError:
            return
        req_id = None
        try:
            env = self._check_envelope(parsed, msg.data)
            req_id = env["id"]
            self._check_target(parsed, env)
            body = {"v": 1, "id": req_id, "ok": True}
            data = await self._serve(parsed, env)
            failures = self.contract.validate_result(parsed.command, data)
            if failures:
                self.own_failures += failures
                raise Refusal("internal", "the manager's own reply failed its output schema", outcome="unknown")
            if data is not None:
                body["data"] = data
        except Refusal as r:
            if req_id is None:
                try:
                    i = json.loads(msg.data).get("id")
                    req_id = i if is_id_token(i) else "unknown"
                except Exception:
                    req_id = "unknown"
            self.refused.append((parsed.command, r.code, r.message))
            body = {"v": 1, "id": req_id, "ok": False, "error": r.body()}
        except Exception as e:  # a bug here answers internal, never silence
            self.own_failures.append(f"{parsed.command} raised {type(e).__name__}: {e}")
            body = {"v": 1, "id": req_id or "unknown", "ok": False,
                    "error": {"code": "internal", "message": "the strict manager failed", "outcome": "unknown"}}
        try:
            await self.nc.publish(to, json.dumps(body, separators=(",", ":")).encode())
        except Exception:
            pass

    def _hostile_refusal(self, command: str) -> Refusal:
        return Refusal("failed-precondition", f"{command} refused{HOSTILE} by a hostile manager{HOSTILE}",
                       details=[{"kind": "ai.cotal.test.hostile", "message": "detail" + HOSTILE}])

    async def _serve(self, parsed: ParsedRequest, env: dict) -> Any:
        cmd = parsed.command
        args = env.get("args")
        if cmd == "describe":
            if args is not None:
                raise Refusal("bad-request", "describe takes no args")
            return self._describe()
        self._check_bind(env)
        if cmd not in self.contract.commands:
            raise Refusal("unimplemented", f"{cmd} is not a command of this contract")
        failures = self.contract.validate_args(cmd, args)
        if failures:
            raise Refusal("bad-request", "; ".join(failures))
        self.requests.append((cmd, args))
        if cmd not in SERVED:
            raise Refusal("unimplemented", f"this stand-in does not serve {cmd}")
        if "errors" in self.hostile and cmd in self.refuse:
            raise self._hostile_refusal(cmd)
        if cmd == "status":
            return self._status()
        if cmd == "ps":
            return [await self._row(s) for s in list(self.seats.values())]
        if cmd == "inspect":
            seat = self.seats.get(args["name"])
            if seat is None:
                raise Refusal("not-found", f'no agent "{args["name"]}"')
            return await self._row(seat)
        if cmd == "list-personas":
            rows = []
            for f in sorted(self.personas_dir.glob("*.md")):
                fm = _front_matter(f.read_text())
                row = {"name": f.stem}
                for k in ("role", "model", "description"):
                    if k in fm:
                        row[k] = fm[k]
                rows.append(row)
            return {"personas": rows}
        if cmd == "show-persona":
            f = self._persona_file(args["name"])
            if f is None:
                raise Refusal("not-found", f'no persona "{args["name"]}"')
            text = f.read_text()
            out = {"name": args["name"], "persona": text}
            fm = _front_matter(text)
            for k in ("role", "model", "description"):
                if k in fm:
                    out[k] = fm[k]
            return out
        if cmd == "models":
            if args.get("agent", CONNECTOR) != CONNECTOR:
                raise Refusal("not-found", f'no connector "{args["agent"]}"')
            return {"catalogs": [{"agent": CONNECTOR, "supported": True,
                                  "models": [{"id": self._h("strict-1"), "label": self._h("Strict One")}]}]}
        if cmd == "goal-result":
            out: dict = {"goalId": args["goalId"]}
            if args["goalId"] in self.goals:
                out["result"] = self.goals[args["goalId"]]
            return out
        if cmd == "spawn":
            return await self._spawn(parsed, env, args)
        seat = self._target(parsed, env)
        if cmd == "despawn":
            del self.seats[seat.name]
            await self._seat_presence(seat, "offline")
            return {"name": seat.name, "stopped": True, "graceful": bool(args.get("graceful", True))}
        # input: no pty - count the bytes it would write (the text's UTF-8, then \r unless enter is false)
        n = len(args["text"].encode("utf-8")) + (1 if args.get("enter", True) else 0)
        seat.typed.append(args["text"])
        seat.bytes_in += n
        return {"name": seat.name, "bytes": n}

    def _describe(self) -> dict:
        descriptor: dict = {"endpoint": MANAGER, "owner": "local", "protocol": {"v": 1},
                            "clusters": [{"digest": self.contract.cluster_digest,
                                          "commands": [c["name"] for c in self.contract.cluster_document["commands"]]}]}
        if "strings" in self.hostile:
            descriptor["endpointType"] = "manager" + HOSTILE
        data = {"public": True, "descriptor": descriptor}
        return data

    def _status(self) -> dict:
        conn: dict = {"agent": CONNECTOR, "state": "available", "binaries": {"python": self._h(sys.executable)}}
        out = {"instanceId": self.instance_id, "runtime": "pty", "custody": "legacy", "agentCount": len(self.seats),
               "uptimeMs": int((time.time() - self._started) * 1000), "connectors": [conn], "classSpawn": True,
               "staticReconciliation": {"state": "idle", "failures": []}}
        if "strings" in self.hostile:
            out["connectors"].append({"agent": "gone" + HOSTILE, "state": "unavailable", "binaries": {},
                                      "reason": "missing" + HOSTILE})
            out["staticReconciliation"] = {"state": "failed", "failures": [{
                "alias": "slot" + HOSTILE, "actor": "a" + HOSTILE, "lifecycleUid": mint_lifecycle_uid(),
                "phase": "active", "attempts": 3, "maxAttempts": 3, "disposition": "retry-exhausted",
                "lastError": "boom" + HOSTILE, "remedy": "fix it" + HOSTILE}]}
        return out

    def _target(self, parsed: ParsedRequest, env: dict) -> StrictSeat:
        t = env["target"]
        for seat in self.seats.values():
            if t["owner"] == "local" and seat.actor == t["actor"]:
                if seat.uid != t["lifecycleUid"]:
                    raise Refusal("expired", "no current lifecycle mapping for that target")
                mode = parsed.target.mode if parsed.target is not None else None
                if mode == "owner" and seat.spawner != parsed.caller.principal:
                    raise Refusal("permission-denied", "the target is not the caller's child")
                return seat
        raise Refusal("expired", "no current lifecycle mapping for that target")

    async def _spawn(self, parsed: ParsedRequest, env: dict, args: dict) -> dict:
        """The reference's reading of the rev-21 keys (manager.ts ``StartAgentOpts``): ``name`` is
        the persona ref (``.cotal/agents/<name>.md``, which must exist), ``config`` an explicit
        agent-file path loaded instead (must exist), ``identity`` the seat-name override of the
        file's own ``name:``; a pinned identity that collides is refused, the file's name is
        auto-numbered. ``agent`` overrides the file's ``agent:``; an unknown connector is refused."""
        if "config" in args:
            p = Path(args["config"])
            f = p if p.is_absolute() else Path(args.get("cwd") or self.root) / p
            if not f.is_file():
                raise Refusal("failed-precondition", f"agent file {args['config']!r} does not exist")
        else:
            f = self._persona_file(args["name"])
            if f is None:
                raise Refusal("not-found", f'no persona "{args["name"]}" in .cotal/agents')
        fm = _front_matter(f.read_text())
        if "identity" in args:
            name = args["identity"]
            if name in self.seats:
                raise Refusal("already-exists", f'a seat named "{name}" already runs here')
        else:
            base = fm.get("name") or args["name"]
            name, n = base, 1
            while name in self.seats:
                n += 1
                name = f"{base}_{n}"
        agent = args.get("agent") or fm.get("agent") or args.get("defaultAgent") or CONNECTOR
        if agent != CONNECTOR:
            raise Refusal("failed-precondition", f'no connector "{agent}" (this manager has {CONNECTOR})')
        seat = self._add_seat(name, parsed.caller.principal, args.get("role") or fm.get("role"),
                              args.get("model") or fm.get("model"), agent)
        seat.presence = True
        goal_id = env["id"]
        acceptance = {"name": name, "owner": "local", "actor": seat.actor, "uid": seat.uid, "goalId": goal_id,
                      "fingerprint": digest(args), "readinessDeadlineMs": READINESS_MS,
                      "executor": {"lifecycleUid": self.uid, "epoch": self.epoch}}
        if "strings" in self.hostile:
            acceptance["fingerprint"] = "fp" + HOSTILE
        t = asyncio.get_running_loop().create_task(self._settle(parsed, seat, goal_id))
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)
        return acceptance

    async def _settle(self, parsed: ParsedRequest, seat: StrictSeat, goal_id: str) -> None:
        """The seat joins at once (its presence record), then the goal's terminal fact."""
        await asyncio.sleep(0.05)  # after the acceptance left
        await self._seat_presence(seat, "idle")
        subj = goal_progress_subject(self.space, MANAGER, self.instance_id, self.epoch, parsed.caller, goal_id)
        data: dict = {"name": seat.name, "agent": self._h(seat.agent), "id": seat.actor, "mode": self._h("pty"),
                      "lifecycleUid": seat.uid}
        if seat.role is not None:
            data["role"] = self._h(seat.role)
        terminal = {"v": 1, "goalId": goal_id, "phase": "terminal", "state": "succeeded", "data": data}
        self.goals[goal_id] = terminal
        for body in ({"v": 1, "goalId": goal_id, "phase": "presence"}, terminal):
            await self.nc.publish(subj, json.dumps(body, separators=(",", ":")).encode())
