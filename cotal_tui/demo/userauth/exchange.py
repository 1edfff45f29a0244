"""``POST /exchange`` over a tiny stdlib HTTP/1.1 server: the loopback/operator face (the
per-start capability in ``Authorization: Bearer <cap>``) and the public face (no capability; only
:data:`~cotal_tui.demo.userauth.bearer.PUBLIC_EXCHANGE_VIEWS`). Both share one handler, as the
reference's ``handleExchange`` does (``implementations/auth/src/service.ts``): ``GET /health``,
``GET /jwks``, ``POST /exchange``; everything else 404. A request carrying ``Origin`` is refused,
the body must be ``application/json`` and at most 64 KiB, answers are JSON and never carry CORS
headers. Not modelled: the refused-exchange rate limits (429) and the discovery bundle.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable

MAX_BODY = 64 * 1024
MAX_HEAD = 16 * 1024
READ_DEADLINE_S = 10.0
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 411: "Length Required", 413: "Payload Too Large",
            415: "Unsupported Media Type", 500: "Internal Server Error", 503: "Service Unavailable"}
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Handler = Callable[[Request], Awaitable[tuple[int, object, dict[str, str]]]]


class HttpFace:
    """One listener on 127.0.0.1; ``handler`` answers ``(status, json body, extra headers)``."""

    def __init__(self, handler: Handler, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.handler, self.host, self.port = handler, host, port
        self._server: asyncio.base_events.Server | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> "HttpFace":
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, body, extra = await asyncio.wait_for(self._one(reader), READ_DEADLINE_S)
        except asyncio.TimeoutError:
            status, body, extra = 400, {"error": "request deadline exceeded"}, {}
        except Exception:  # noqa: BLE001 - a handler bug answers 500, never a dropped socket
            log.exception("exchange handler failed")
            status, body, extra = 500, {"error": "the exchange failed - see the auth plane's log"}, {}
        data = json.dumps(body).encode()
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", "Content-Type: application/json",
                f"Content-Length: {len(data)}", "Connection: close", *(f"{k}: {v}" for k, v in extra.items())]
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader) -> tuple[int, object, dict[str, str]]:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return 400, {"error": "request head too large"}, {}
        except asyncio.IncompleteReadError:
            return 400, {"error": "incomplete request"}, {}
        if len(raw) > MAX_HEAD:
            return 400, {"error": "request head too large"}, {}
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return 400, {"error": "not an HTTP/1.1 request"}, {}
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            k, sep, v = line.partition(":")
            if not sep:
                return 400, {"error": "malformed header line"}, {}
            headers[k.strip().lower()] = v.strip()
        body = b""
        if "transfer-encoding" in headers:
            return 411, {"error": "a Content-Length body is required"}, {}
        if "content-length" in headers:
            try:
                n = int(headers["content-length"])
            except ValueError:
                return 400, {"error": "malformed Content-Length"}, {}
            if n < 0:
                return 400, {"error": "malformed Content-Length"}, {}
            if n > MAX_BODY:
                return 413, {"error": f"request body too large (maximum {MAX_BODY} bytes)"}, {}
            body = await reader.readexactly(n)
        return await self.handler(Request(parts[0], parts[1], headers, body))
