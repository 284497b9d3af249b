"""The web chat under test: a private engine, a Worker child, the app on uvicorn, and Chromium.

``chat_stack`` starts the engine and a Worker child (``web_chat_test_worker``) with
``AgentTestStack``, once per test module; ``serving_chat`` serves ``create_web_chat_app`` over it
with uvicorn on a free port in the test's event loop. ``launch_chromium`` starts Debian's Chromium through Playwright, headless, or skips
the test with the reason why it cannot.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import pytest
import uvicorn
from dex_agents import AgentSessionClient, AgentSessionFlow, AgentSnapshot
from dex_agents.testing import AgentTestStack, FileGate, WorkerProcess, wait_for_agent_snapshot
from dex_agents_web_chat import TokenAuthorization, build_web_chat_flow, create_web_chat_app
from starlette.requests import Request
from warm_workers import forked_from_a_warm_parent
from web_chat_test_worker import GATE_DIR_ENV

TESTS_DIR: Final = Path(__file__).resolve().parent
TOKEN: Final = "web-chat-test-token-0123456789"
BEARER: Final = {"Authorization": f"Bearer {TOKEN}"}

CHROMIUM_ENV: Final = "DEX_AGENTS_CHROMIUM"
"""Path of the Chromium binary; by default ``chromium`` on PATH."""
CHROMIUM_SKIP_REASON_ENV: Final = "DEX_AGENTS_CHROMIUM_SKIP_REASON"
"""Set by ``.ci/run`` when it could not install Chromium: the reason the browser tests skip."""
CHROMIUM_ARGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
PAGE_TIMEOUT_MS: Final = 30_000


@dataclass
class ChatStack:
    """An engine and Worker children serving the chat's Flow, shared by a module's tests."""

    stack: AgentTestStack
    flow: AgentSessionFlow
    tmp_path: Path

    @property
    def sessions(self) -> AgentSessionClient:
        return self.stack.sessions(self.flow)

    @property
    def workers(self) -> list[WorkerProcess]:
        return self.stack.workers

    async def start_worker(self) -> WorkerProcess:
        """Start one more Worker child."""
        return await self.stack.start_worker()

    def gate(self, name: str) -> FileGate:
        """The FileGate a ``slow:<name>`` message holds its model call at."""
        return FileGate(self.tmp_path / "gates", name)

    async def idle_snapshot(self, session_id: str, turns: int) -> AgentSnapshot:
        """Wait until ``session_id`` ran ``turns`` turns and waits for a message."""

        def probe(snapshot: AgentSnapshot) -> AgentSnapshot | None:
            state = snapshot.state
            done = state is not None and state.turn_count == turns and not state.active_turn_id
            return snapshot if done else None

        return await wait_for_agent_snapshot(
            self.sessions, session_id, probe, description=f"{turns} turn(s) to end"
        )


@dataclass
class RunningChat:
    """The chat app served over a :class:`ChatStack`."""

    chat_stack: ChatStack
    base_url: str
    event_stream_requests: list[dict[str, str]] = field(default_factory=list)
    """The headers of every authorized events request, oldest first."""
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """What to close before the server stops, such as the browser contexts of its pages."""


@asynccontextmanager
async def chat_stack(
    tmp_path: Path, *, stream_store_disabled: bool = False
) -> AsyncIterator[ChatStack]:
    """An engine and one Worker child (``web_chat_test_worker``) for the chat's Flow.

    ``stream_store_disabled`` runs the engine like a Dex Server without a Stream Store.
    """
    flow = build_web_chat_flow()
    stack = AgentTestStack(
        tmp_path / "stack",
        [flow],
        "web_chat_test_worker",
        worker_cwd=TESTS_DIR,
        worker_env={GATE_DIR_ENV: str(tmp_path / "gates")},
        stream_store_disabled=stream_store_disabled,
        # Every Worker, first and restarted, forks from one warm parent per test process.
        worker_preload_env={},
    )
    async with stack:
        worker = await stack.start_worker()
        assert forked_from_a_warm_parent(worker)  # web_chat_test_worker's preload_worker() works
        yield ChatStack(stack, flow, tmp_path)


@asynccontextmanager
async def serving_chat(
    stack: ChatStack,
    *,
    max_event_stream_duration: timedelta | None = None,
    allows_session: Callable[[str], bool] | None = None,
) -> AsyncIterator[RunningChat]:
    """The chat app over ``stack``, served by uvicorn on a free port in this event loop.

    Its hook accepts the test token; ``allows_session`` further limits the sessions it accepts.
    """
    authorization = TokenAuthorization(TOKEN)
    listener = socket.create_server(("127.0.0.1", 0))
    host, port = listener.getsockname()[:2]
    chat = RunningChat(stack, f"http://{host}:{port}")

    def authorize(request: Request, session_id: str | None) -> bool:
        allowed = authorization.authorize(request, session_id)
        if allowed and session_id is not None and allows_session is not None:
            allowed = allows_session(session_id)
        if allowed and request.url.path.endswith("/events"):
            chat.event_stream_requests.append(dict(request.headers))
        return allowed

    app = create_web_chat_app(
        stack.stack.client,
        stack.flow,
        authorize,
        routes=[authorization.login_route()],
        poll_timeout=timedelta(seconds=2),
        max_event_stream_duration=max_event_stream_duration,
    )
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    serving = asyncio.create_task(server.serve(sockets=[listener]))
    try:
        while not server.started:
            if serving.done():
                serving.result()
            await asyncio.sleep(0.02)
        yield chat
    finally:
        for close in reversed(chat.closers):
            await close()
        server.should_exit = True
        await serving
        listener.close()


def chromium_executable() -> str | None:
    """The Chromium binary to drive, or ``None`` when there is none."""
    configured = os.environ.get(CHROMIUM_ENV)
    if configured:
        return configured if Path(configured).exists() else None
    return shutil.which("chromium")


@asynccontextmanager
async def launch_chromium() -> AsyncIterator[Any]:
    """Headless Chromium through Playwright; skips the test when either is missing."""
    executable = chromium_executable()
    if executable is None:
        pytest.skip(
            os.environ.get(CHROMIUM_SKIP_REASON_ENV)
            or "Chromium is not installed: install Debian's chromium (apt-get install -y "
            f"chromium) or set {CHROMIUM_ENV} to a Chromium binary"
        )
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.skip("Playwright is not installed: run uv sync --all-packages")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=executable, args=list(CHROMIUM_ARGS)
        )
        try:
            yield browser
        finally:
            await browser.close()
