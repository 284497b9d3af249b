"""A minimal HTTP/1.1 server on the loopback interface, for the relay and the fake Messages API.

Both only ever talk to the Claude Code CLI on the same machine: one request per connection
(every response closes it), bodies with ``Content-Length``, responses whole or streamed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["HttpRequest", "HttpResponder", "LoopbackHttpServer"]

_REASONS: Final = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}
_MAX_HEADER_LINES: Final = 200


@dataclass(frozen=True)
class HttpRequest:
    """One request: method, path with query, lower-cased headers, and body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> dict[str, Any]:
        """The body as a JSON object, or ``{}`` when it is not one."""
        try:
            value = json.loads(self.body or b"{}")
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


class HttpResponder:
    """Writes the one response of a connection: whole with :meth:`send`, or streamed."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.started = False

    async def start(self, status: int, headers: Mapping[str, str]) -> None:
        self.started = True
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        lines += ["Connection: close", "", ""]
        self._writer.write("\r\n".join(lines).encode("latin-1"))
        await self._writer.drain()

    async def write(self, chunk: bytes) -> None:
        self._writer.write(chunk)
        await self._writer.drain()

    async def send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        await self.start(status, {"Content-Type": content_type, "Content-Length": str(len(body))})
        await self.write(body)

    async def send_json(self, status: int, value: object) -> None:
        await self.send(status, json.dumps(value).encode())


Handler = Callable[[HttpRequest, HttpResponder], Awaitable[None]]


class LoopbackHttpServer:
    """Serves ``handler`` on ``127.0.0.1`` at an ephemeral port."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            request = await _read_request(reader)
            if request is not None:
                await self._handle(request, HttpResponder(writer))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handle(self, request: HttpRequest, responder: HttpResponder) -> None:
        try:
            await self._handler(request, responder)
        except (ConnectionError, asyncio.CancelledError):
            raise
        except Exception as error:  # a handler bug answers 500 instead of a hung client
            if not responder.started:
                body = {"type": "error", "error": {"type": "api_error", "message": str(error)}}
                await responder.send_json(500, body)


async def _read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, path, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADER_LINES):
        header = await reader.readline()
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    body = await reader.readexactly(length) if length else b""
    return HttpRequest(method, path, headers, body)
