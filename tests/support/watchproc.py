"""Run ``cotal watch`` as a real subprocess and read what it prints, for fault tests.

The measured process is exactly what a user runs (``python -m cotal_tui.cli watch ...``);
stdout and stderr are drained on threads into byte-exact transcripts, JSON lines are parsed
on arrival, and ``wait_for`` polls a predicate with a deadline (never sleep-and-hope).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Line:
    at: float  # time.monotonic() when read
    raw: bytes
    obj: dict | None = None


@dataclass
class WatchProc:
    args: list[str]
    env: dict[str, str] | None = None
    proc: subprocess.Popen | None = None
    out: list[Line] = field(default_factory=list)
    err: list[Line] = field(default_factory=list)
    stdout_bytes: bytearray = field(default_factory=bytearray)
    stderr_bytes: bytearray = field(default_factory=bytearray)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls, *args: str, env: dict[str, str] | None = None) -> "WatchProc":
        w = cls(list(args), env)
        e = dict(os.environ)
        e.pop("NO_COLOR", None)
        e.pop("FORCE_COLOR", None)
        e["PYTHONUNBUFFERED"] = "1"
        e.update(env or {})
        w.proc = subprocess.Popen(
            [sys.executable, "-m", "cotal_tui.cli", "watch", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            cwd=str(ROOT), env=e, start_new_session=True,
        )
        for stream, lines, buf in ((w.proc.stdout, w.out, w.stdout_bytes),
                                   (w.proc.stderr, w.err, w.stderr_bytes)):
            threading.Thread(target=w._drain, args=(stream, lines, buf), daemon=True).start()
        return w

    def _drain(self, stream, lines: list[Line], buf: bytearray) -> None:
        for raw in stream:
            obj = None
            if raw[:1] == b"{":
                try:
                    obj = json.loads(raw)
                except ValueError:
                    obj = None
            with self._lock:
                buf.extend(raw)
                lines.append(Line(time.monotonic(), raw, obj))

    # -- reading -------------------------------------------------------------------------

    def objs(self, typ: str | None = None) -> list[dict]:
        with self._lock:
            items = [ln.obj for ln in self.out if ln.obj is not None]
        return [o for o in items if typ is None or o.get("type") == typ]

    def lines_after(self, t: float) -> list[Line]:
        with self._lock:
            return [ln for ln in self.out if ln.at >= t]

    def states(self) -> list[tuple[float, str]]:
        with self._lock:
            return [(ln.at, ln.obj["connection"]) for ln in self.out
                    if ln.obj is not None and ln.obj.get("type") == "state"]

    @property
    def stderr_text(self) -> str:
        with self._lock:
            return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def stdout_text(self) -> str:
        with self._lock:
            return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    async def wait_for(self, pred: Callable[[], Any], timeout: float, what: str = "") -> Any:
        """The suite's ``until`` (conftest), whose timeout also shows the process's output."""
        from conftest import until

        def seen() -> str:
            return (f"{what or pred}; "
                    f"alive={self.alive} rc={self.proc.poll() if self.proc else None}\n"
                    f"--- stderr tail ---\n{self.stderr_text[-2000:]}\n"
                    f"--- stdout tail ---\n{self.stdout_text[-2000:]}")

        return await until(pred, timeout, what=seen, interval=0.05)

    def wait_for_sync(self, pred: Callable[[], Any], timeout: float, what: str = "") -> Any:
        return asyncio.run(self.wait_for(pred, timeout, what))

    # -- process -------------------------------------------------------------------------

    def rss_kb(self) -> int:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def fds(self) -> int:
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self, timeout: float = 10.0) -> int:
        """SIGINT (what Ctrl-C sends), then SIGKILL if it does not exit. Returns the code."""
        p = self.proc
        assert p is not None
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGINT)
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
        time.sleep(0.05)  # let the drain threads reach EOF
        return p.returncode

    def wait_exit(self, timeout: float) -> int:
        assert self.proc is not None
        rc = self.proc.wait(timeout)
        time.sleep(0.05)
        return rc
