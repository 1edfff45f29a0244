"""Connectors and persona files of the demo manager, the way the reference keeps them.

A *connector* is what a seat runs (the reference's harness: ``claude``, ``jcode`` …); the demo has
four, measured once at boot: ``echo-line`` (the echo line program), ``dashboard`` (the full-screen
dashboard), ``bash`` (an interactive bash) and ``command`` (the argv its ``launchOptions.argv``
names). A *persona* is a manager-side file ``<root>/.cotal/agents/<name>.md``: frontmatter (name,
role, description, agent = the connector, model, channels, owner) and a Markdown body, the persona
text. ``list-personas`` / ``show-persona`` read these files, ``define-persona`` writes one, and
``spawn`` resolves one by its ``config`` reference or, as the reference does, by the seat ``name``.

The frontmatter is written one ``key: <JSON value>`` per line, which is valid YAML; the reader
takes that form and plain ``key: word`` / ``key: [a, b]`` lines, and reports anything else as the
entry's ``error`` rather than guessing.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from cotal_tui.errors import CotalError
from meshview.wire.endpoint import is_seat_name

PROGRAMS = Path(__file__).resolve().parent / "programs"
DEFAULT_CONNECTOR = "echo-line"  # the product default when neither the call nor the file pins one


# ---- connectors ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectorState:
    """One connector as measured at boot (the ``status.connectors[]`` row)."""

    agent: str
    available: bool
    binaries: dict[str, str]
    reason: str | None = None

    def row(self) -> dict:
        r: dict = {"agent": self.agent, "state": "available" if self.available else "unavailable",
                   "binaries": dict(self.binaries)}
        if self.reason:
            r["reason"] = self.reason
        return r


def _binary(name: str, path: str | None) -> tuple[dict[str, str], str | None]:
    if path and os.access(path, os.X_OK):
        return {name: path}, None
    return {}, f"{name} was not found on this host"


def measure_connectors() -> dict[str, ConnectorState]:
    """Each connector's binaries, looked up once (a connector whose binary is missing is
    ``unavailable`` with the reason)."""
    out: dict[str, ConnectorState] = {}
    py, why = _binary("python", sys.executable)
    for name in ("echo-line", "dashboard"):
        out[name] = ConnectorState(name, why is None, py, why)
    sh, why = _binary("bash", shutil.which("bash"))
    out["bash"] = ConnectorState("bash", why is None, sh, why)
    out["command"] = ConnectorState("command", True, {})  # runs the argv its launch options name
    return out


class LaunchRefused(CotalError):
    """A launch the connector cannot make, in one sentence."""


def connector_argv(agent: str, seat: str, launch_options: dict | None) -> list[str]:
    """What a connector runs for a seat. ``command`` takes ``launchOptions.argv`` (a non-empty list
    of strings); the others take no launch options and refuse any (fail loud, as the reference's
    connectors without an option surface do)."""
    opts = launch_options or {}
    if agent == "command":
        argv = opts.get("argv")
        if set(opts) - {"argv"} or not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise LaunchRefused("connector command needs launchOptions {argv: [program, args...]} and nothing else")
        return list(argv)
    if opts:
        raise LaunchRefused(f"connector {agent} takes no launch options")
    if agent == "echo-line":
        return [sys.executable, str(PROGRAMS / "echo_line.py"), seat]
    if agent == "dashboard":
        return [sys.executable, str(PROGRAMS / "dashboard.py")]
    if agent == "bash":
        return ["bash", "--noprofile", "--norc", "-i"]
    raise LaunchRefused(f"no connector named {agent!r}")


# ---- persona files ---------------------------------------------------------------------------

_FIELDS = ("name", "role", "description", "agent", "model", "variant", "subscribe", "allowSubscribe",
           "allowPublish", "launchOptions", "owner")


class PersonaError(CotalError):
    """A persona file that cannot be read or written, in one sentence."""


@dataclass
class PersonaFile:
    name: str
    path: Path
    role: str | None = None
    description: str | None = None
    agent: str | None = None
    model: str | None = None
    variant: str | None = None
    subscribe: list[str] | None = None
    allow_subscribe: list[str] | None = None
    allow_publish: list[str] | None = None
    launch_options: dict | None = None
    owner: str | None = None
    persona: str | None = None
    extra: dict = field(default_factory=dict)

    def catalog_row(self) -> dict:
        """The ``list-personas`` row: content only, absent fields omitted."""
        row: dict = {"name": self.name}
        for k, v in (("role", self.role), ("model", self.model), ("description", self.description),
                     ("owner", self.owner)):
            if v:
                row[k] = v
        return row

    def show(self) -> dict:
        row = self.catalog_row()
        if self.persona:
            row["persona"] = self.persona
        return row


def _value(raw: str, key: str, path: Path) -> object:
    raw = raw.strip()
    if raw == "":
        return None
    try:
        return json.loads(raw)
    except ValueError:
        pass
    if raw.startswith("[") and raw.endswith("]"):  # a bare YAML flow list of words
        inner = raw[1:-1].strip()
        return [w.strip().strip("'\"") for w in inner.split(",")] if inner else []
    if raw[0] in "[{\"'|>&*!%@`":
        raise PersonaError(f"persona file {path.name}: {key!r} is not a value this manager reads")
    return raw


def parse_persona(path: Path) -> PersonaFile:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PersonaError(f"persona file {path.name} cannot be read ({e.__class__.__name__})") from None
    if not text.startswith("---\n"):
        raise PersonaError(f"persona file {path.name} has no '---' frontmatter block")
    head, sep, body = text[4:].partition("\n---")
    if not sep:
        raise PersonaError(f"persona file {path.name} has an unterminated frontmatter block")
    fm: dict = {}
    for line in head.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, colon, rest = line.partition(":")
        if not colon or line[0].isspace():
            raise PersonaError(f"persona file {path.name}: the frontmatter line {line.strip()[:40]!r} is not key: value")
        fm[key.strip()] = _value(rest, key.strip(), path)
    name = fm.get("name")
    if not isinstance(name, str) or not name:
        raise PersonaError(f"persona file {path.name} names no persona")

    def s(k: str) -> str | None:
        v = fm.get(k)
        if v is None:
            return None
        if isinstance(v, (dict, list)):
            raise PersonaError(f"persona file {path.name}: {k!r} must be a scalar")
        return str(v)

    def lst(k: str) -> list[str] | None:
        v = fm.get(k)
        if v is None:
            return None
        return [str(x) for x in (v if isinstance(v, list) else [v])]

    lo = fm.get("launchOptions")
    if lo is not None and not isinstance(lo, dict):
        raise PersonaError(f"persona file {path.name}: launchOptions must be a mapping")
    return PersonaFile(name=name, path=path, role=s("role"), description=s("description"), agent=s("agent"),
                       model=s("model"), variant=s("variant"), subscribe=lst("subscribe"),
                       allow_subscribe=lst("allowSubscribe"), allow_publish=lst("allowPublish"),
                       launch_options=lo, owner=s("owner"), persona=body.lstrip("\n").strip() or None,
                       extra={k: v for k, v in fm.items() if k not in _FIELDS})


def render_persona(p: PersonaFile) -> str:
    fm = {"name": p.name, "role": p.role, "description": p.description, "agent": p.agent, "model": p.model,
          "variant": p.variant, "subscribe": p.subscribe if p.subscribe is not None else [],
          "allowSubscribe": p.allow_subscribe, "allowPublish": p.allow_publish,
          "launchOptions": p.launch_options, "owner": p.owner, **p.extra}
    lines = [f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in fm.items() if v is not None]
    return "---\n" + "\n".join(lines) + "\n---\n" + (p.persona or "") + "\n"


class PersonaStore:
    """The persona catalogue: one ``<name>.md`` per persona in one directory."""

    def __init__(self, directory: Path):
        self.dir = directory

    def path_for(self, name: str) -> Path:
        return self.dir / f"{name}.md"

    def names(self) -> list[str]:
        try:
            return sorted(p.stem for p in self.dir.glob("*.md") if p.is_file())
        except OSError:
            return []

    def load(self, name: str) -> PersonaFile | None:
        """The persona named ``name``, None when there is no such file (a broken file raises)."""
        if not is_seat_name(name):
            return None
        path = self.path_for(name)
        if not path.is_file():
            return None
        return parse_persona(path)

    def resolve(self, ref: str, root: Path) -> PersonaFile:
        """A ``config`` reference: a persona name of this catalogue, or a persona file path
        (absolute, or relative to the manager's root)."""
        p = self.load(ref) if is_seat_name(ref) else None
        if p is not None:
            return p
        path = Path(ref) if os.path.isabs(ref) else root / ref
        if not path.is_file():
            raise PersonaError(f"no persona or agent file {ref!r} on this manager "
                               f"(it knows {', '.join(self.names()) or 'none'})")
        return parse_persona(path)

    def catalog(self) -> list[dict]:
        rows = []
        for name in self.names():
            try:
                p = parse_persona(self.path_for(name))
                rows.append(p.catalog_row())
            except PersonaError as e:
                rows.append({"name": name, "error": str(e)})
        return rows

    def write(self, p: PersonaFile) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = p.path.with_suffix(".md.tmp")
        tmp.write_text(render_persona(p), encoding="utf-8")
        os.replace(tmp, p.path)
        return p.path

    def define(self, args: dict, caller: str) -> PersonaFile:
        """``define-persona``: a fresh name is created owned by the caller; an existing file may be
        redefined only by its owner, and then only its content (model + persona text) changes."""
        name = str(args.get("name", "")).strip()
        if not is_seat_name(name):
            raise PersonaError(f"{name!r} is not a persona name (a letter, then up to 31 letters, digits, '_' or '-')")
        text = str(args.get("persona", "")).strip()
        if not text:
            raise PersonaError("persona required")
        model = args.get("model") or None
        existing = self.path_for(name)
        if existing.is_file():
            p = parse_persona(existing)
            if p.owner != caller:
                who = f"owned by {p.owner}" if p.owner else "operator-owned (no agent owner)"
                raise PersonaError(f"persona {name} is {who}; only its owner may redefine it")
            p.persona, p.model = text, model or p.model
        else:
            p = PersonaFile(name=name, path=existing, role=args.get("role") or None, agent=args.get("agent") or None,
                            model=model, subscribe=list(args.get("subscribe") or []),
                            allow_subscribe=args.get("allowSubscribe"), allow_publish=args.get("allowPublish"),
                            owner=caller, persona=text)
        self.write(p)
        return p
