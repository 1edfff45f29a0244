"""The action log: what this console (and ``cotal send``/``chat``/the control verbs) did to the
mesh, appended to ``$COTAL_HOME/log/actions.jsonl``.

One JSON line per action - ``what`` (send, answer, input, spawn, stop, purge, delchan,
deregister, fit), ``target``, ``outcome``, the message id or goal id - written when it is done;
when its outcome settles later (sent -> acknowledged; spawn -> joined / failed / uncertain) a new
line with the same action ``id`` says so: the file is append-only and never rewritten. A reader
folds the lines by ``id`` (:func:`read_actions`), newest first.

What is never written: message text, the bytes of an ``input`` or of anything typed into an
attached terminal, credentials. ``detail`` is one short sentence passed through the secret scrub.
The file is 0600 in a 0700 folder. A log that cannot be written never stops the action: the
failure is counted (``errors``) and said once (``last_error``).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshview.errors import swallowed
from meshview.link.home import cotal_home

WHATS = frozenset({"send", "answer", "input", "spawn", "stop", "purge", "delchan", "deregister",
                   "fit", "despawn", "restart", "mkchan", "sub", "unsub", "persona"})
SETTLED = frozenset({"acknowledged", "joined", "failed", "uncertain", "refused", "done",
                     "succeeded", "stopped"})
DETAIL_CAP = 200
TARGET_CAP = 200
MESH_CAP = 64
READ_CAP = 5000  # lines folded by a reader (the newest)

def scrub(s: str) -> str:
    """``s`` with anything credential-shaped masked (the recorder's scrub: URL passwords, nkey
    seeds, JWTs), and the word after ``bearer``."""
    from meshview.record.record import scrub as masked

    words = masked(s).split(" ")
    for i in range(len(words) - 1):
        if words[i].lower().rstrip(":") == "bearer":
            words[i + 1] = "***"
    return " ".join(words)


LOG_ENV = "COTAL_ACTION_LOG"  # another file for the log, or ``off`` (``0``) for none


def actions_path(home: Path | None = None) -> Path:
    """``$COTAL_ACTION_LOG`` when it names a file, else ``$COTAL_HOME/log/actions.jsonl``."""
    env = os.environ.get(LOG_ENV, "").strip()
    if home is None and env and env.lower() not in _OFF:
        return Path(env).expanduser()
    return (home or cotal_home()) / "log" / "actions.jsonl"


_OFF = ("0", "off", "false", "no")


def log_off() -> bool:
    return os.environ.get(LOG_ENV, "").strip().lower() in _OFF


@dataclass
class Action:
    """One action as the log's lines fold it: the first line, with the last outcome."""

    id: str
    at: float  # ms, when it was done
    what: str
    target: str
    outcome: str
    message_id: str | None = None
    goal_id: str | None = None
    detail: str | None = None
    settled_at: float | None = None
    history: list[str] = field(default_factory=list)  # every outcome, oldest first
    mesh: str | None = None  # the space it was done on (None: a line from before meshes were logged)


class ActionLog:
    """Appends to one file (default ``$COTAL_HOME/log/actions.jsonl``); the path is resolved at
    each write, so a test or a user changing ``COTAL_HOME`` moves it."""

    def __init__(self, path: Path | None = None, *, source: str = "console") -> None:
        self._path = path
        self.source = source
        self.errors = 0
        self.last_error: str | None = None

    @property
    def path(self) -> Path:
        return self._path or actions_path()

    def _write(self, row: dict[str, Any]) -> None:
        if self._path is None and log_off():
            return
        path = self.path
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                if os.fstat(fd).st_mode & 0o077:
                    os.fchmod(fd, 0o600)
                os.write(fd, (json.dumps(row, ensure_ascii=False) + "\n").encode())
            finally:
                os.close(fd)
        except OSError as e:
            self.errors += 1
            self.last_error = f"the action log {path} cannot be written ({e.strerror or 'error'})"

    def record(self, what: str, target: str, outcome: str, *, message_id: str | None = None,
               goal_id: str | None = None, detail: str | None = None, mesh: str | None = None) -> str:
        """Append one action; returns its id (for :meth:`settle`). ``mesh``: the space it was
        done on, so ``:log`` can tell the meshes of one home apart."""
        aid = secrets.token_hex(8)
        row: dict[str, Any] = {"v": 1, "id": aid, "at": int(time.time() * 1000), "what": what,
                               "target": scrub(str(target))[:TARGET_CAP], "outcome": outcome,
                               "source": self.source}
        if mesh:
            row["mesh"] = scrub(str(mesh))[:MESH_CAP]
        self._ids(row, message_id, goal_id, detail)
        self._write(row)
        for fn in list(LISTENERS):  # a recording's markers (cotal_tui/recording.py)
            try:
                fn(what, row["target"])
            except Exception:  # noqa: BLE001 - a listener never stops the action [counted: COTAL_LOG]
                swallowed("cotal_tui.actionlog:ActionLog.record")
        return aid

    def settle(self, action_id: str, outcome: str, *, message_id: str | None = None,
               goal_id: str | None = None, detail: str | None = None) -> None:
        """Append the outcome of an action recorded earlier (a new line, same ``id``)."""
        row: dict[str, Any] = {"v": 1, "id": action_id, "at": int(time.time() * 1000),
                               "outcome": outcome}
        self._ids(row, message_id, goal_id, detail)
        self._write(row)

    @staticmethod
    def _ids(row: dict[str, Any], message_id: str | None, goal_id: str | None,
             detail: str | None) -> None:
        if message_id:
            row["messageId"] = str(message_id)[:200]
        if goal_id:
            row["goalId"] = str(goal_id)[:200]
        if detail:
            row["detail"] = scrub(" ".join(str(detail).split()))[:DETAIL_CAP]


def read_actions(path: Path | None = None, limit: int = READ_CAP) -> list[Action]:
    """The log folded by action id, newest first; unreadable lines are skipped (counted by
    nobody: the file is ours, a torn last line is the only expected damage)."""
    p = path or actions_path()
    try:
        lines = p.read_text(encoding="utf-8", errors="replace").splitlines()[-limit:]
    except OSError:
        return []
    acts: dict[str, Action] = {}
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            continue
        a = acts.get(row["id"])
        if a is None:
            if not isinstance(row.get("what"), str):
                continue  # an update whose action fell outside the window read
            a = acts[row["id"]] = Action(
                id=row["id"], at=float(row.get("at") or 0), what=row["what"],
                target=str(row.get("target", "")), outcome=str(row.get("outcome", "")),
                message_id=row.get("messageId"), goal_id=row.get("goalId"),
                detail=row.get("detail"), history=[str(row.get("outcome", ""))],
                mesh=row["mesh"] if isinstance(row.get("mesh"), str) else None)
            continue
        a.outcome = str(row.get("outcome", a.outcome))
        a.history.append(a.outcome)
        a.settled_at = float(row.get("at") or 0)
        a.message_id = row.get("messageId") or a.message_id
        a.goal_id = row.get("goalId") or a.goal_id
        a.detail = row.get("detail") or a.detail
    # newest first; actions of the same millisecond by file order, the later one first
    return sorted(reversed(list(acts.values())), key=lambda a: a.at, reverse=True)


_DEFAULT: ActionLog | None = None
LISTENERS: list = []  # (what, target) callbacks for every action recorded in this process


def action_log(source: str | None = None) -> ActionLog:
    """The process's log (one per process; ``source`` names the first user: console, send...)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = ActionLog(source=source or "console")
    return _DEFAULT


def send_target(kind: str, target: str | None) -> str:
    """How a send's target reads in the log: ``#channel``, ``@agent``, ``role NAME``, ``reply``."""
    if kind == "channel":
        return f"#{target or ''}"
    if kind == "dm":
        return f"@{(target or '').lstrip('@')}"
    if kind == "ask":
        return f"role {(target or '').lstrip('@')}"
    return kind if target is None else f"{kind} {target}"
