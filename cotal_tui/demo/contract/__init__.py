"""The reference manager's service contract (cluster ``ai.cotal.manager``, revision 22) as the
demo manager serves it: loaded from the JSON transcription shipped beside this module (the same
bytes as ``tests/vectors/manager-contract-rev22.json``), digests recomputed here the way §13.7
computes them, and every command's closed input and output schema compiled once. Revision 21
(``manager-contract-rev21.json``, the bytes of ``tests/vectors/manager-contract.json``) ships too,
so a demo manager can stand in for a manager one release behind (``DemoManager(contract_revision=21)``).

The demo validates every request's ``args`` against the input schema (a miss is ``bad-request``,
worded as the reference words it) and every reply it is about to send against the output schema
(a miss is ``internal`` and is recorded in :data:`VIOLATIONS`, so a test can fail loud on it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from cotal_tui.errors import CotalError
from meshview.wire.canonical import closure_digest, digest

CONTRACT_FILE = Path(__file__).with_name("manager-contract.json")
CURRENT_REVISION = 22  # the revision the client follows and the demo serves by default
# every revision the demo can serve, by its shipped transcription
CONTRACT_FILES = {22: CONTRACT_FILE, 21: Path(__file__).with_name("manager-contract-rev21.json")}

# Every reply the demo refused to send because it failed its own output schema, in this process
# (command, message). A demo bug, never a caller's: tests assert this stays empty.
VIOLATIONS: list[tuple[str, str]] = []


class ContractInvalid(CotalError):
    """The shipped contract file disagrees with itself (a digest that does not recompute)."""


@dataclass(frozen=True)
class CommandContract:
    name: str
    capability: str
    targeted: bool
    modes: tuple[str, ...]
    input_schema: dict
    output_schema: dict
    input_digest: str
    output_digest: str
    input_validator: Any
    output_validator: Any

    def document_row(self) -> dict:
        """This command's row in the cluster document (``modes`` only where it declares them)."""
        row: dict = {"name": self.name, "class": "ephemeral", "targeted": self.targeted,
                     "capability": self.capability, "inputDigest": self.input_digest,
                     "outputDigest": self.output_digest}
        if self.modes:
            row["modes"] = list(self.modes)
        return row


# Ajv's words for the keywords our schemas use (the reference compiles with Ajv2020), so a
# refusal reads like the reference's: "args do not validate against the input schema: /name must
# be string".
_TYPE_WORD = {"object": "object", "string": "string", "null": "null", "boolean": "boolean",
              "integer": "integer", "array": "array", "number": "number"}


def _ajv_message(err) -> tuple[str, str]:
    """(instancePath, message[, extra]) of one jsonschema error, in Ajv's words."""
    path = "".join(f"/{p}" for p in err.absolute_path)
    kw, val = err.validator, err.validator_value
    if kw == "type":
        t = val if isinstance(val, str) else ",".join(val)
        msg = f"must be {_TYPE_WORD.get(t, t)}"
    elif kw == "required":
        missing = next((k for k in val if isinstance(err.instance, dict) and k not in err.instance), val[0])
        msg = f"must have required property '{missing}'"
    elif kw == "additionalProperties":
        allowed = set((err.schema or {}).get("properties") or {})
        extra = sorted(k for k in err.instance if k not in allowed) if isinstance(err.instance, dict) else []
        msg = "must NOT have additional properties" + (f": {json.dumps(extra[0])}" if extra else "")
    elif kw == "minLength":
        msg = f"must NOT have fewer than {val} characters"
    elif kw == "maxLength":
        msg = f"must NOT have more than {val} characters"
    elif kw == "minimum":
        msg = f"must be >= {val}"
    elif kw == "minItems":
        msg = f"must NOT have fewer than {val} items"
    elif kw == "maxItems":
        msg = f"must NOT have more than {val} items"
    elif kw == "enum":
        msg = "must be equal to one of the allowed values"
    elif kw == "const":
        msg = "must be equal to constant"
    elif kw == "pattern":
        msg = f'must match pattern "{val}"'
    else:
        msg = err.message
    return path or "/", msg


# Ajv stops at the first failing keyword, evaluating an object's own keywords before it descends
# into its properties; ``type`` first, then ``required``, then ``additionalProperties``.
_ORDER = {"type": 0, "required": 1, "additionalProperties": 2}


def first_error(validator, value: Any) -> str | None:
    """The first schema error as the reference renders it (``<path> <message>``), or None."""
    errors = list(validator.iter_errors(value))
    if not errors:
        return None
    e = min(errors, key=lambda x: (len(x.absolute_path), _ORDER.get(x.validator, 9)))
    path, msg = _ajv_message(e)
    return f"{path} {msg}"


class ManagerContract:
    """The contract as data plus compiled validators and the recomputed digests."""

    def __init__(self, raw: dict):
        try:
            # jsonschema ships no type stubs and types-jsonschema is not a dev dependency
            from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
        except ImportError as e:  # a runtime dependency (pyproject): say what is missing
            raise ContractInvalid("the demo manager validates every request and reply against the "
                                  "reference's closed schemas and needs the jsonschema package") from e
        self.raw = raw
        self.urn: str = raw["endpoint"]["clusterUrn"]
        self.revision: int = int(raw["source"]["revision"])
        self.commands: dict[str, CommandContract] = {}
        for c in raw["commands"]:
            ind, outd = closure_digest(c["inputSchema"]), closure_digest(c["outputSchema"])
            if (ind, outd) != (c["inputDigest"], c["outputDigest"]):
                raise ContractInvalid(f"command {c['name']}: the shipped digests do not recompute")
            self.commands[c["name"]] = CommandContract(
                c["name"], c["capability"], bool(c["targeted"]), tuple(c.get("modes") or ()),
                c["inputSchema"], c["outputSchema"], ind, outd,
                Draft202012Validator(c["inputSchema"]), Draft202012Validator(c["outputSchema"]))
        self.document: dict = {"urn": self.urn, "revision": self.revision, "attributes": [], "events": [],
                               "commands": [c.document_row() for c in self.commands.values()]}
        shipped = raw["clusterDocument"]
        if digest(self.document) != shipped["rootDigest"] or closure_digest(self.document) != shipped["closureDigest"]:
            raise ContractInvalid("the cluster document rebuilt from the commands does not hash to the shipped digest")
        self.cluster_digest: str = closure_digest(self.document)

    def schema_roots(self) -> list[dict]:
        """Every distinct schema root (each is published with its single-member manifest)."""
        seen: dict[str, dict] = {}
        for c in self.commands.values():
            for s in (c.input_schema, c.output_schema):
                seen.setdefault(digest(s), s)
        return list(seen.values())

    def args_error(self, command: str, args: Any) -> str | None:
        """Why ``args`` fail the input schema (absent args validate as null), in the reference's
        words, or None when they pass."""
        detail = first_error(self.commands[command].input_validator, args)
        return None if detail is None else f"args do not validate against the input schema: {detail}"

    def output_error(self, command: str, data: Any) -> str | None:
        detail = first_error(self.commands[command].output_validator, data)
        if detail is None:
            return None
        return ("output does not validate against the pinned output schema; an invalid reply is a "
                f"responder bug, never success (SPEC 13.7): {detail}")


@lru_cache(maxsize=len(CONTRACT_FILES))
def load_contract(revision: int = CURRENT_REVISION) -> ManagerContract:
    """The contract at ``revision`` (one the demo ships: :data:`CONTRACT_FILES`)."""
    path = CONTRACT_FILES.get(revision)
    if path is None:
        raise ContractInvalid(f"the demo ships manager contract revisions {sorted(CONTRACT_FILES)}, not {revision!r}")
    c = ManagerContract(json.loads(path.read_text(encoding="utf-8")))
    if c.revision != revision:
        raise ContractInvalid(f"{path.name} holds revision {c.revision}, not {revision}")
    return c
