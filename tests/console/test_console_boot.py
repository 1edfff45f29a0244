"""The console's first frame comes before the broker answers (issue 40, start-up).

``cotal watch`` paints its shell - the panels and ``connecting to <server> … Ns`` - as soon as
Textual is in, and connects behind it. On a real terminal (tmux) against a real broker:
- a broker that never answers: the shell is on screen, counting, and Ctrl-C quits at once;
- a broker slowed by a relay: keys typed while the shell waits are held and reach the
  console once it is in (type-ahead, like a shell's), in order, none lost and none run early.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket

from support.tmux import needs_tmux

pytestmark = needs_tmux


@contextlib.contextmanager
def silent_broker():
    """A socket that accepts and never speaks: nats-py waits for an INFO that never comes."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    try:
        yield f"nats://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        srv.close()


class SlowRelay:
    """A TCP relay to a real broker that holds the broker's first bytes (its INFO) until
    :meth:`release`: the console sits on its shell, connecting, as long as the test wants."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit("//", 1)[1].rsplit(":", 1)
        self.up = (host, int(port))
        self.released = asyncio.Event()
        self.clients = 0
        self.server: asyncio.AbstractServer | None = None
        self.tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"nats://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for t in self.tasks:
            t.cancel()

    def release(self) -> None:
        self.released.set()

    async def _client(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.clients += 1
        ur, uw = await asyncio.open_connection(*self.up)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, hold: bool) -> None:
            if hold:
                await self.released.wait()
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        for t in (pipe(ur, w, True), pipe(r, uw, False)):
            task = asyncio.create_task(t)
            self.tasks.add(task)


SHELL = re.compile(r"connecting to nats://127\.0\.0\.1:\d+ … (\d+)s")


async def test_the_shell_is_drawn_before_the_broker_answers_and_ctrl_c_quits_it(tmux, tmp_path):
    with silent_broker() as url:
        await tmux.watch(url, "demo", tmp_path, "--connect-timeout 30")
        screen = await tmux.until(lambda s: (m := SHELL.search(s)) and int(m.group(1)) >= 1,
                                  what="the shell counting while it connects")
        assert "roster" in screen and "feed" in screen  # the console's panels, empty
        assert "ctrl+c quit" in screen
        await tmux.keys("C-c")
        # it quits now, not when the 30 s connect timeout gives up
        screen = await tmux.until(lambda s: "console-exit=" in s, timeout=5,
                                  what="Ctrl-C quitting the shell")
        assert "console-exit=0" in screen and "Traceback" not in screen


async def test_keys_typed_while_it_connects_reach_the_console(broker, space, tmux, tmp_path):
    relay = SlowRelay(broker.url)
    async with relay as url:
        await tmux.watch(url, space, tmp_path)
        await tmux.until(lambda s: SHELL.search(s), what="the shell, waiting on the relay")
        await tmux.keys("?")  # the console's help, typed before there is a console
        await tmux.until(lambda s: (m := SHELL.search(s)) and int(m.group(1)) >= 1,
                         what="the shell still waiting after the key")
        screen = await tmux.screen()
        assert "cotal console - help" not in screen  # held, not run on the shell
        relay.release()
        screen = await tmux.until(lambda s: "cotal console - help" in s and "context:" in s,
                                  what="the held key opening the console's help")
        assert not SHELL.search(screen)  # the shell is gone, wholly replaced
        assert "context: feed panel" in screen, screen
        await tmux.keys("q")
        await tmux.until(lambda s: "cotal console - help" not in s and "roster ·" in s,
                         what="the help closed, the console under it")
        await tmux.keys("q")
        screen = await tmux.until(lambda s: "console-exit=" in s, what="quitting")
        assert "console-exit=0" in screen and "Traceback" not in screen


async def test_ctrl_q_quits_the_shell_too(tmux, tmp_path):
    with silent_broker() as url:
        await tmux.watch(url, "demo", tmp_path, "--connect-timeout 30")
        await tmux.until(lambda s: SHELL.search(s), what="the shell")
        await tmux.keys("C-q")
        screen = await tmux.until(lambda s: "console-exit=" in s, timeout=5, what="quitting")
        assert "console-exit=0" in screen
