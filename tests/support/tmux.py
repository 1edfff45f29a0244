"""A real terminal for end-to-end tests: a private tmux server per test.

Keys go in with ``send-keys``; what a user would see comes back with ``capture-pane``. Every
wait polls the screen with a deadline and shows the last screen when it runs out.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Callable

import pytest

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
COTAL = str(Path(sys.executable).with_name("cotal"))  # the installed entry point, as users run it


def console_env(home: Path | str, **extra: str) -> dict[str, str]:
    """What a user's terminal gives the console: its own COTAL_HOME, a 256-colour TERM, UTF-8."""
    return {"COTAL_HOME": str(home), "TERM": "xterm-256color", "LANG": "C.UTF-8",
            "PATH": os.environ.get("PATH", ""), **extra}


class Tmux:
    def __init__(self, name: str = "t") -> None:
        self.sock = f"cotal-test-{uuid.uuid4().hex[:8]}"
        self.name = name

    async def run(self, *args: str) -> str:
        p = await asyncio.create_subprocess_exec(
            "tmux", "-L", self.sock, *args, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        out, err = await p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {err.decode().strip()}")
        return out.decode("utf-8", "replace")

    async def start(self, command: str, env: dict[str, str] | None = None, *, cols: int = 120,
                    rows: int = 40, clipboard: bool = False) -> None:
        """Run ``command`` in a detached session of ``cols``×``rows``. ``clipboard`` lets
        OSC 52 and retitles through, so a test can prove the program never sends them."""
        env_args = [a for k, v in (env or {}).items() for a in ("-e", f"{k}={v}")]
        await self.run("-f", "/dev/null", "new-session", "-d", "-s", self.name, "-x", str(cols),
                       "-y", str(rows), *env_args, command)
        if clipboard:
            await self.run("set-option", "-g", "set-clipboard", "on")
            await self.run("set-option", "-g", "allow-rename", "on")

    async def watch(self, url: str, space: str, home: Path | str, flags: str = "", *,
                    env: dict[str, str] | None = None, cols: int = 120, rows: int = 40,
                    clipboard: bool = False) -> None:
        """``cotal watch`` on ``url``/``space`` sized by tmux (not COLUMNS/LINES); its exit code
        stays on screen (``console-exit=N``) for a test that quits it."""
        await self.start(f"env -u COLUMNS -u LINES {COTAL} watch --server {url} --space {space}"
                         f"{' ' + flags if flags else ''}; echo console-exit=$?; sleep 60",
                         env or console_env(home), cols=cols, rows=rows, clipboard=clipboard)

    async def screen(self, escapes: bool = False) -> str:
        return await self.run("capture-pane", "-p", *(["-e"] if escapes else []), "-t", self.name)

    async def keys(self, *keys: str) -> None:
        await self.run("send-keys", "-t", self.name, *keys)

    async def title(self) -> str:
        return (await self.run("display-message", "-p", "-t", self.name, "#{pane_title}")).strip()

    async def window_name(self) -> str:
        return (await self.run("display-message", "-p", "-t", self.name, "#{window_name}")).strip()

    async def buffers(self) -> str:
        return await self.run("list-buffers")

    async def until(self, cond: Callable[[str], object], timeout: float = 20.0,
                    what: str = "screen") -> str:
        """The suite's ``until`` (conftest) on the pane's text; a timeout shows the screen."""
        from conftest import until

        text = ""

        async def shows() -> str | None:
            nonlocal text
            text = await self.screen()
            return text if cond(text) else None

        return await until(shows, timeout, what=lambda: f"{what}; screen was:\n{text}",
                           interval=0.1)

    async def kill(self) -> None:
        try:
            await self.run("kill-server")
        except RuntimeError:
            pass
