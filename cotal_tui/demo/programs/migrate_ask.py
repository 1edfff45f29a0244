"""A seat that really asks: it prepares a migration, asks ``Proceed with the migration? [y/N]``
and waits for the answer on its terminal, then acts on it and asks again a little later.

While it waits it says so the way a harness hook would: it writes its condition
(``{"code": "approval", "message": ..., "since": ms}``) to the file named by
``COTAL_SEAT_CONDITION`` and removes it once it has read the answer; the demo manager turns that
file into the seat's presence (``waiting`` on ``approval``). Without the variable it only asks.
Usage: ``migrate_ask.py NAME [QUESTION] [PAUSE_S]``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

QUESTION = "Proceed with the migration? [y/N] "


def _condition(path: str | None, question: str) -> None:
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"code": "approval", "message": question.strip(), "since": int(time.time() * 1000)}, f)
    os.replace(tmp, path)


def _clear(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def main() -> int:
    signal.signal(signal.SIGINT, lambda *_: (sys.stdout.write("^C\r\n"), sys.stdout.flush()))
    name = sys.argv[1] if len(sys.argv) > 1 else "seat"
    question = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else QUESTION
    pause = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
    path = os.environ.get("COTAL_SEAT_CONDITION") or None
    out = sys.stdout
    out.write(f"{name}: migration 0042_add_index ready (3 tables, ~2 min)\n")
    while True:
        _condition(path, question)
        out.write(question if question.endswith(" ") else question + " ")
        out.flush()
        line = sys.stdin.readline()
        _clear(path)
        if not line:
            return 0
        answer = line.strip()
        out.write(f"read: {answer!r}\n")
        if answer.lower() in ("y", "yes"):
            for step in ("users", "orders", "events"):
                out.write(f"migrating {step}… ok\n")
            out.write("migration applied\n")
        else:
            out.write("migration aborted\n")
        out.flush()
        time.sleep(pause)
        out.write(f"{name}: next migration ready\n")


if __name__ == "__main__":
    sys.exit(main())
