"""``dex-agents-web-chat``: the chat on the embedded local engine, with a Worker in this process.

It starts ``dex-local-engine`` on a database in ``--directory``, serves the support agent with a
pull Worker in this process, serves the page with uvicorn, and prints the login link (the page's
token). Stop it with Ctrl+C; the sessions stay in the database for the next start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Final

import uvicorn
from dex_agents.testing import EngineLogs, EngineProcess, in_process_worker
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dex_agents_web_chat._agent import DEFAULT_WORD_DELAY, build_web_chat_flow
from dex_agents_web_chat._app import create_web_chat_app
from dex_agents_web_chat._authorization import TokenAuthorization

__all__ = ["READY_LINE_PREFIX", "TOKEN_ENV", "main", "serve"]

TOKEN_ENV: Final = "DEX_WEB_CHAT_TOKEN"
"""Environment variable with the login token; a random one is made when it is unset."""
READY_LINE_PREFIX: Final = "dex-agents web chat ready on "
"""Start of the line printed once the page is served: the address, then the login link."""

_DEFAULT_DIRECTORY: Final = Path(".dex-agents") / "web-chat"
_STARTUP_POLL_SECONDS: Final = 0.05


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the options and serve until interrupted."""
    parser = argparse.ArgumentParser(
        prog="dex-agents-web-chat",
        description="A browser chat with a durable support agent on the embedded Dex engine.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (0: any free)")
    parser.add_argument(
        "--directory",
        type=Path,
        default=_DEFAULT_DIRECTORY,
        help="where the engine database, its logs and the blob cache live",
    )
    parser.add_argument(
        "--word-delay-ms",
        type=int,
        default=int(DEFAULT_WORD_DELAY.total_seconds() * 1000),
        help="pause between two streamed words of the scripted model",
    )
    options = parser.parse_args(argv)
    try:
        asyncio.run(
            serve(
                options.host,
                options.port,
                options.directory,
                token=os.environ.get(TOKEN_ENV) or None,
                word_delay=timedelta(milliseconds=options.word_delay_ms),
            )
        )
    except KeyboardInterrupt:
        # Ctrl+C: one line; the Worker drained and the engine stopped after it.
        print(f"dex-agents-web-chat stopped; the sessions stay in {options.directory}", flush=True)
        return 130
    except ValueError as problem:
        print(f"dex-agents-web-chat: {problem}", file=sys.stderr)
        return 2
    return 0


async def serve(
    host: str,
    port: int,
    directory: Path,
    *,
    token: str | None = None,
    word_delay: timedelta = DEFAULT_WORD_DELAY,
) -> None:
    """Run the engine, the Worker and the web server until cancelled.

    Raises:
        ValueError: When ``token`` is shorter than 16 characters.
        EngineStartError: When the engine does not start.
        OSError: When ``host:port`` cannot be bound.
    """
    authorization = TokenAuthorization(token)
    directory.mkdir(parents=True, exist_ok=True)
    listener = socket.create_server((host, port))
    engine = await EngineProcess.start_local(
        directory / "engine.db", EngineLogs.in_directory(directory)
    )
    try:
        # Refunds go to a ledger next to the database, and their outcome check looks there.
        flow = build_web_chat_flow(word_delay=word_delay, refund_ledger=directory / "refunds.json")
        async with in_process_worker(
            [flow], engine.server_address, directory / "blob-cache"
        ) as dex:
            app = create_web_chat_app(
                dex.client, flow, authorization.authorize, routes=[authorization.login_route()]
            )
            stopping = asyncio.Event()
            server = _Server(
                uvicorn.Config(
                    _EndResponsesOnStop(app, stopping),
                    log_level="warning",
                    timeout_graceful_shutdown=2,
                ),
                stopping,
            )
            serving = asyncio.create_task(server.serve(sockets=[listener]))
            while not server.started and not serving.done():
                await asyncio.sleep(_STARTUP_POLL_SECONDS)
            if server.started:
                bound_host, bound_port = listener.getsockname()[:2]
                address = f"http://{bound_host}:{bound_port}"
                print(
                    f"{READY_LINE_PREFIX}{address}/ (log in: {address}/login?token="
                    f"{authorization.token})",
                    flush=True,
                )
            await serving
    finally:
        listener.close()
        await engine.stop()


class _Server(uvicorn.Server):
    """uvicorn's server that also sets ``stopping`` when a signal asks it to exit."""

    def __init__(self, config: uvicorn.Config, stopping: asyncio.Event) -> None:
        super().__init__(config)
        self._stopping = stopping
        self._loop = asyncio.get_running_loop()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        # A signal handler runs between two bytecodes: wake the loop through its own pipe.
        self._loop.call_soon_threadsafe(self._stopping.set)


class _EndResponsesOnStop:
    """Ends every running response once ``stopping`` is set.

    An open page keeps its event stream running forever; uvicorn would cancel it after the
    graceful shutdown timeout and log the cancellation as an ASGI application error with a
    traceback. Ending the stream here instead is a normal end: the browser reconnects to the
    next server with ``Last-Event-ID``.
    """

    def __init__(self, app: ASGIApp, stopping: asyncio.Event) -> None:
        self._app = app
        self._stopping = stopping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = False

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        response = asyncio.ensure_future(self._app(scope, receive, tracked_send))
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({response, stop}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            response.cancel()
            raise
        finally:
            stop.cancel()
        if response.done():
            response.result()
            return
        response.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await response
        if not started:
            await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


if __name__ == "__main__":
    sys.exit(main())
