"""``cotal watch --web [HOST:PORT]``: the same console in a browser, through textual-serve.

textual-serve starts one process per browser session (so one observer per session) and relays
its terminal over a websocket. The process is ``python -m cotal_tui.cli.watch_web``: it reads
the watch flags from ``COTAL_WEB_ARGV`` in its environment (never from its command line, where
``ps`` would show a ``--server user:pass@`` URL) and runs the console on textual-serve's web
driver.

Binding: loopback by default; any other address needs a token given by the operator. Every
request, page, static file and websocket alike, must carry the token (``?token=`` once, then an
HttpOnly cookie), even on loopback: other local users and any page in the browser can reach a
loopback port. With no token given one is generated and printed once, in the URL to open (as
Jupyter does). The token is read from ``--web-token``, ``--web-token-file`` or
``COTAL_WEB_TOKEN`` (the command line is visible in ``ps``: prefer the other two).

Host and Origin: a name an attacker controls can resolve to loopback (DNS rebinding), so a
request is answered only when its ``Host`` is the bound address (plus ``localhost`` on a
loopback bind, any address literal on a wildcard bind) or a name given with ``--web-host``, and
an ``Origin``, when sent, names one of those too. Anything else gets 403. The served page loads
nothing from outside this server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import shlex
import sys
from typing import Any, Iterable
from urllib.parse import urlsplit

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
ARGV_ENV = "COTAL_WEB_ARGV"
TOKEN_ENV = "COTAL_WEB_TOKEN"
COOKIE = "cotal_web_token"
# flags the browser sessions do not get: the server's own, the line-stream modes, and --record
# (every session would write the same file)
NOT_FOR_SESSIONS = {"help", "web", "web_token", "web_token_file", "web_host", "plain", "json",
                    "record", "max_size"}
_TOKEN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-")
_WILDCARD = {"0.0.0.0", "::", ""}


class WebError(ValueError):
    """A bad ``--web`` setting (one sentence)."""


def parse_bind(value: str | None) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT``, ``PORT``, ``HOST`` or ``[v6]:PORT``."""
    v = (value or "").strip()
    if not v:
        return DEFAULT_HOST, DEFAULT_PORT
    if v.isdigit():
        host, port = DEFAULT_HOST, v
    elif v.startswith("["):
        host, _, rest = v[1:].partition("]")
        port = rest.lstrip(":") or str(DEFAULT_PORT)
    elif v.count(":") == 1:
        host, port = v.split(":")
        host = host or DEFAULT_HOST
    elif ":" in v:
        host, port = v, str(DEFAULT_PORT)  # a bare IPv6 address
    else:
        host, port = v, str(DEFAULT_PORT)
    try:
        p = int(port)
    except ValueError:
        raise WebError(f"--web {value}: the port must be a number") from None
    if not 0 < p < 65536:
        raise WebError(f"--web {value}: the port must be 1-65535")
    return host, p


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def session_argv(args: argparse.Namespace) -> list[str]:
    """The watch flags a browser session runs with: what was given, minus the web server's."""
    from cotal_tui.cli import build_parser

    parser = build_parser("watch")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    watch = sub.choices["watch"]
    out: list[str] = []
    for action in watch._actions:
        dest = action.dest
        if dest in NOT_FOR_SESSIONS or not action.option_strings or not hasattr(args, dest):
            continue
        value = getattr(args, dest)
        if value is None or value == action.default or value is False:
            continue
        flag = action.option_strings[-1] if action.option_strings[-1].startswith("--") \
            else action.option_strings[0]
        if isinstance(action, argparse._StoreTrueAction):
            out.append(flag)
        elif isinstance(action, argparse._AppendAction):
            for v in value:
                out += [flag, str(v)]
        else:
            out += [flag, str(value)]
    return out


def _template() -> Any:
    """textual-serve's page without its web-font link: nothing is fetched from elsewhere."""
    import jinja2
    from textual_serve import server as ts

    path = os.path.join(os.path.dirname(ts.__file__), "templates", "app_index.html")
    with open(path, encoding="utf-8") as f:
        html = f.read()
    html = re.sub(r"<link[^>]*fonts\.googleapis[^>]*>", "", html, flags=re.S)
    return jinja2.DictLoader({"app_index.html": html})


def read_token(args: argparse.Namespace) -> tuple[str | None, str]:
    """The token the operator gave (``--web-token``, else ``--web-token-file``, else
    ``COTAL_WEB_TOKEN``) and where it came from; (None, "") when none was given."""
    given = getattr(args, "web_token", None)
    where = "--web-token"
    if not given and getattr(args, "web_token_file", None):
        path = args.web_token_file
        where = f"--web-token-file {path}"
        try:
            with open(os.path.expanduser(path), encoding="utf-8") as f:
                given = f.readline().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise WebError(f"cannot read {where}: {getattr(e, 'strerror', None) or e}") from None
        if not given:
            raise WebError(f"{where} is empty: put the token on its first line")
    if not given and os.environ.get(TOKEN_ENV):
        given, where = os.environ[TOKEN_ENV], TOKEN_ENV
    if not given:
        return None, ""
    if len(given) > 512 or not set(given) <= _TOKEN_CHARS:  # it goes in a URL and a cookie
        raise WebError(f"the token from {where} may hold only letters, digits and . _ ~ - "
                       "(it goes in a URL), at most 512 of them")
    return given, where


def new_token() -> str:
    return secrets.token_urlsafe(24)


def _host_port(netloc: str, default_port: int) -> tuple[str, int] | None:
    """(lower-case host without brackets, port) of a Host value, or None when malformed."""
    if not netloc or any(c in netloc for c in "/?#@\\ ") or not netloc.isascii():
        return None
    try:
        u = urlsplit("//" + netloc)
        host, port = u.hostname, u.port
    except ValueError:
        return None
    if not host:
        return None
    return host.rstrip("."), default_port if port is None else port


class HostRule:
    """Which ``Host`` (and ``Origin``) values the server answers to. An address literal cannot
    be rebound, a name can: names are accepted only when the operator gave them."""

    def __init__(self, bind: str, port: int, names: Iterable[str] = ()):
        self.port = port
        self.any_address = bind in _WILDCARD
        self.hosts = {bind.lower().strip("[]")}
        if is_loopback(bind):
            self.hosts |= {"localhost", "127.0.0.1", "::1"}
        if self.any_address:
            self.hosts.add("localhost")
        self.names: set[tuple[str, int | None]] = set()
        for n in names:
            hp = _host_port(n.strip(), -1)
            if hp is None:
                raise WebError(f"--web-host {n!r} is not a host name (NAME or NAME:PORT)")
            self.names.add((hp[0], None if hp[1] == -1 else hp[1]))

    def allows(self, host: str, port: int) -> bool:
        if (host, port) in self.names or (host, None) in self.names:
            return True
        if port != self.port:
            return False
        if host in self.hosts:
            return True
        if self.any_address:
            try:
                ipaddress.ip_address(host)
                return True
            except ValueError:
                return False
        return False

    def host_ok(self, value: str | None) -> bool:
        hp = _host_port(value or "", 80)
        return hp is not None and self.allows(*hp)

    def origin_ok(self, origin: str) -> bool:
        try:
            u = urlsplit(origin)
        except ValueError:
            return False
        if u.scheme not in ("http", "https") or u.path or u.query:
            return False
        hp = _host_port(u.netloc, 443 if u.scheme == "https" else 80)
        return hp is not None and self.allows(*hp)


def make_server(host: str, port: int, token: str, title: str, *, rule: HostRule | None = None,
                generated: bool = False) -> Any:
    import aiohttp_jinja2
    from aiohttp import web
    from textual_serve.server import Server

    command = f"{shlex.quote(sys.executable)} -m cotal_tui.cli.watch_web"
    rule = rule or HostRule(host, port)
    cookie = f"{COOKIE}_{port}"  # cookies ignore the port: two consoles on one host keep apart

    def refuse(why: str) -> web.Response:
        return web.Response(status=403, text=f"cotal: {why}\n")

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        if not rule.host_ok(request.headers.get("Host")):
            return refuse("this console does not answer to that Host name (the operator "
                          "can add one with --web-host NAME)")
        origin = request.headers.get("Origin")
        if origin is not None and not rule.origin_ok(origin):
            return refuse("a request from another origin")
        given = request.query.get("token") or request.cookies.get(cookie) or ""
        if not hmac.compare_digest(given.encode(), token.encode()):
            return refuse("this console needs its token (open the URL with ?token=...)")
        resp = await handler(request)
        if request.query.get("token") and not isinstance(resp, web.WebSocketResponse):
            resp.set_cookie(cookie, token, httponly=True, samesite="Strict")
        return resp

    class ConsoleServer(Server):
        async def _make_app(self) -> web.Application:
            app = web.Application(middlewares=[guard])
            aiohttp_jinja2.setup(app, loader=_template())
            app.add_routes([
                web.get("/", self.handle_index, name="index"),
                web.get("/ws", self.handle_websocket, name="websocket"),
                web.get("/download/{key}", self.handle_download, name="download"),
                web.static("/static", self.statics_path, show_index=False, name="static"),
            ])
            app.on_shutdown.append(self.on_shutdown)
            return app

        async def handle_index(self, request: web.Request) -> Any:
            # the page's websocket URL follows the address the browser used (0.0.0.0 binds)
            self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        def announce(self, *_: object) -> None:
            """Once the port listens (aiohttp's run_app calls it then): a generated token is
            printed once, in the URL to open; a given one never."""
            shown = f"[{host}]" if ":" in host else host
            print(f"cotal: serving the console on http://{shown}:{port}/?token="
                  + (token if generated else "<your token>")
                  + " - one observer per browser session; Ctrl-C stops", file=sys.stderr,
                  flush=True)

        def serve(self, debug: bool = False) -> None:
            """textual-serve's serve, announcing only once the port listens (it silences
            run_app's own announcement)."""
            import signal

            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.request_exit)
            web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False,
                        loop=loop, print=self.announce)

        def initialize_logging(self) -> None:
            import logging

            logging.basicConfig(level=logging.WARNING, format="cotal web: %(message)s")
            logging.getLogger("aiohttp.server").addFilter(_one_line)

    _close_sessions_on_stop()
    return ConsoleServer(command, host=host, port=port, title=title)


def _one_line(record: Any) -> bool:
    """A malformed request (anyone who can reach the port can send one) is one escaped line on
    the operator's terminal, not aiohttp's traceback."""
    if record.exc_info:
        from meshview.sanitize import inline

        e = record.exc_info[1]
        record.msg, record.args = f"{record.getMessage()}: {inline(str(e), 200)}", ()
        record.exc_info = record.exc_text = None
    return True


def _close_sessions_on_stop() -> None:
    """textual-serve's session stop reads the console process to its end but never reaps it or
    closes its pipes, so the transport is closed by the garbage collector - after the loop has
    gone when the server exits, which prints an "Event loop is closed" traceback on the
    operator's terminal. The sessions here end by waiting for the process (killing it after
    5 s) and closing its transport while the loop still runs."""
    from textual_serve import app_service, server

    if getattr(server.AppService, "cotal_reaps", False):
        return

    class ReapingAppService(app_service.AppService):
        cotal_reaps = True

        async def stop(self) -> None:
            await super().stop()
            process, self._process = self._process, None
            if process is None:
                return
            if process.returncode is None:
                try:
                    await asyncio.wait_for(process.wait(), 5.0)
                except asyncio.TimeoutError:
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    await process.wait()
            transport = getattr(process, "_transport", None)  # asyncio keeps it private
            if transport is not None:
                transport.close()

    server.AppService = ReapingAppService  # the name textual-serve's websocket handler builds


def serve(args: argparse.Namespace) -> int:
    """Run the web server until Ctrl-C / SIGTERM."""
    try:
        host, port = parse_bind(args.web)
    except WebError as e:
        print(f"cotal: {e}", file=sys.stderr)
        return 2
    try:
        token, _ = read_token(args)
        rule = HostRule(host, port, getattr(args, "web_host", None) or ())
    except WebError as e:
        print(f"cotal: {e}.", file=sys.stderr)
        return 2
    if not is_loopback(host) and not token:
        print(f"cotal: --web {host}:{port} is reachable from other machines: give it a token "
              f"(--web-token-file PATH or {TOKEN_ENV}), or bind to 127.0.0.1.", file=sys.stderr)
        return 2
    try:
        import textual_serve.server  # noqa: F401
    except ImportError:
        print("cotal: --web needs the textual-serve package (pip install textual-serve).",
              file=sys.stderr)
        return 1
    from cotal_tui.cli.connection import target_from_args
    from meshview.connect import ConnectError, connect

    target = target_from_args(args)

    async def reachable() -> None:  # once, up front: not a dead page per browser session
        nc, _ = await connect(target)
        await nc.close()

    try:
        asyncio.run(reachable())
    except ConnectError as e:
        print(f"cotal: {e}", file=sys.stderr)
        return 1
    os.environ[ARGV_ENV] = json.dumps(session_argv(args))
    os.environ.pop(TOKEN_ENV, None)  # the sessions never see the token
    generated = token is None
    server = make_server(host, port, token or new_token(),
                         f"cotal · {target.space} on {target.display}", rule=rule,
                         generated=generated)
    try:
        server.serve()
    except OSError as e:
        print(f"cotal: cannot serve on {host}:{port}: {e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


def session_main() -> int:
    """One browser session: the console on textual-serve's driver, with the server's flags.
    Its own process, so it is set up like ``cotal``'s (the aiohttp deferral, quiet libraries,
    ``COTAL_LOG``)."""
    from cotal_tui.cli.process import prepare_process, quiet_library_logs, start_log_file

    prepare_process()
    from cotal_tui.cli import build_parser
    from cotal_tui.cli.watch_console import run_console

    try:
        argv = json.loads(os.environ.get(ARGV_ENV, "[]"))
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise ValueError
    except ValueError:
        print(f"cotal: {ARGV_ENV} is not a list of flags", file=sys.stderr)
        return 2
    args = build_parser("watch").parse_args(["watch", *argv])
    quiet_library_logs()
    start_log_file("watch-web")
    return int(run_console(args) or 0)


if __name__ == "__main__":
    sys.exit(session_main())
