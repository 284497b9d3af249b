"""McpToolSource against ``@modelcontextprotocol/server-everything`` from npm, a server of the
2025-11-25 specification nobody here wrote (``.ci/run`` installs the pinned version and sets
``DEX_AGENTS_SERVER_EVERYTHING``; without it these tests skip and say why)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra (dex-agents[mcp]) is not installed")

from dex_agents import (
    AgentSessionClient,
    AgentSnapshot,
    AgentToolCallStatus,
    InterruptKind,
    MessageRole,
    ToolExecutionError,
)
from dex_agents.mcp import (
    INPUT_REQUEST_ERROR_PREFIX,
    McpStdioServerConfig,
    McpStreamableHttpServerConfig,
    McpToolSource,
)
from dex_agents.mcp._connection import _connect_mode, close_connections
from dex_agents.mcp._handshake_tasks import HandshakeTask, _post
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    WorkerProcess,
    pending_interrupt,
    wait_for_agent_snapshot,
)
from mcp_test_support.agent import (
    EVERYTHING_URL_ENV,
    RESEARCH_TOOL,
    STATE_DIR_ENV,
    build_mcp_flow,
    command,
)
from mcp_test_support.servers import stdio_config

TESTS_DIR = Path(__file__).resolve().parent
SERVER_EVERYTHING_ENV = "DEX_AGENTS_SERVER_EVERYTHING"
"""The ``mcp-server-everything`` executable (``.ci/run`` installs it with npm)."""

_EXECUTABLE = os.environ.get(SERVER_EVERYTHING_ENV) or shutil.which("mcp-server-everything")

_needs_server_everything = pytest.mark.skipif(
    _EXECUTABLE is None or not Path(_EXECUTABLE).exists(),
    reason=f"mcp-server-everything is not installed: set {SERVER_EVERYTHING_ENV} "
    "(.ci/run installs @modelcontextprotocol/server-everything with npm)",
)


def _config() -> McpStdioServerConfig:
    assert _EXECUTABLE is not None
    return McpStdioServerConfig(name="everything", command=_EXECUTABLE, args=["stdio"])


@_needs_server_everything
async def test_a_2025_11_25_server_over_stdio_is_probed_once_then_spoken_to_directly() -> None:
    """The first connection probes ``server/discover`` and falls back to the handshake; the
    Worker process then remembers the server, so every later connection (a new process per
    request on stdio) starts with the handshake: one round trip fewer and no failed probe."""
    source = McpToolSource([_config()])
    tools = {tool.name: tool for tool in await source.list_tools()}
    assert "everything__echo" in tools
    assert _connect_mode(_config()) == "legacy"
    first = await source.call_tool(
        "everything__echo", {"message": "hello"}, idempotency_key="s/turn-1/c1"
    )
    second = await source.call_tool(
        "everything__echo", {"message": "again"}, idempotency_key="s/turn-1/c2"
    )
    assert "hello" in first and "again" in second


async def test_a_server_that_answers_the_probe_keeps_being_probed(tmp_path: Path) -> None:
    """The test server speaks the newest protocol: it answers ``server/discover``, so nothing is
    remembered and its connections keep the probe."""
    config = stdio_config(tmp_path)
    assert await McpToolSource([config]).list_tools()
    assert _connect_mode(config) == "auto"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def server_everything_over_http(port: int | None = None) -> AsyncIterator[str]:
    """server-everything's Streamable HTTP transport on loopback (a free port unless given);
    yields its URL."""
    assert _EXECUTABLE is not None
    port = port or _free_port()
    process = await asyncio.create_subprocess_exec(
        _EXECUTABLE,
        "streamableHttp",
        env={**os.environ, "PORT": str(port)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stderr is not None
        while b"listening on port" not in await asyncio.wait_for(process.stderr.readline(), 60):
            pass
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        await process.wait()


@_needs_server_everything
async def test_a_2025_11_25_server_over_streamable_http() -> None:
    """The same server over Streamable HTTP: listed, called twice, and remembered as a server of
    the handshake after the first connection."""
    async with server_everything_over_http() as url:
        config = McpStreamableHttpServerConfig(name="everything", url=url)
        source = McpToolSource([config])
        assert "everything__echo" in {tool.name for tool in await source.list_tools()}
        assert _connect_mode(config) == "legacy"
        for text in ("over http", "and again"):
            output = await source.call_tool(
                "everything__echo", {"message": text}, idempotency_key=f"s/turn-1/{text}"
            )
            assert text in output
        await close_connections()


async def _traced_spans(*target: str) -> list[dict[str, object]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mcp_test_support.traced_calls",
        *target,
        cwd=TESTS_DIR,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()
    return [json.loads(line) for line in stdout.decode().splitlines()]


@_needs_server_everything
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_protocol_fallback_is_no_error_span_and_one_session_serves_every_call(
    transport: str,
) -> None:
    """A fresh process lists and calls the 2025-11-25 server twice inside one traced span: the
    refused ``server/discover`` probe is not an ERROR span (not recorded at all), and the three
    requests go over one session: one ``tools/list`` and two ``tools/call``, no handshake per
    call."""
    assert _EXECUTABLE is not None
    if transport == "stdio":
        spans = await _traced_spans("stdio", _EXECUTABLE, "stdio")
    else:
        async with server_everything_over_http() as url:
            spans = await _traced_spans("http", url)
    names = [span["name"] for span in spans]
    assert [span for span in spans if span["status"] == "ERROR"] == []
    assert names.count("MCP send tools/call echo") == 2
    assert names.count("MCP send tools/list") == 1
    assert "MCP send initialize" not in names
    (turn,) = [span for span in spans if span["name"] == "turn"]
    assert all(span["parent"] is not None for span in spans if span is not turn)


@_needs_server_everything
async def test_a_task_required_tool_over_stdio_is_polled_inside_the_call() -> None:
    """``simulate-research-query`` has ``execution.taskSupport: required``: the call is sent with
    ``task`` augmentation, and the task polled with ``tasks/get`` and read with ``tasks/result``
    in the same session (a stdio task lives in the server process)."""
    source = McpToolSource([_config()])
    tools = {tool.name: tool for tool in await source.list_tools()}
    assert tools[RESEARCH_TOOL].task_support == "required"
    assert tools["everything__echo"].task_support is None
    output = await source.call_tool(RESEARCH_TOOL, {"topic": "tides"}, idempotency_key="s/t/c")
    assert "# Research Report: tides" in output
    assert "Stage 4: Generating report" in output
    await close_connections()


@dataclass
class _Durable:
    """A real engine, a Worker child process and server-everything over Streamable HTTP."""

    stack: AgentTestStack
    sessions: AgentSessionClient
    worker: WorkerProcess
    url: str

    async def executed(self, session_id: str) -> list[str]:
        history = await self.stack.read_step_history(session_id)
        return [e.step_type for e in history if e.event_type == EXECUTE_COMPLETED_EVENT]

    async def reply(self, session_id: str) -> str:
        def replied(snapshot: AgentSnapshot) -> str | None:
            texts = [m.text for m in snapshot.messages if m.role == MessageRole.ASSISTANT]
            return texts[-1] if texts and texts[-1] else None

        return await wait_for_agent_snapshot(
            self.sessions, session_id, replied, "the turn's reply", timeout=120
        )


@asynccontextmanager
async def _durable(tmp_path: Path) -> AsyncIterator[_Durable]:
    async with server_everything_over_http() as url:
        flow = build_mcp_flow(tmp_path / "stdio", None, url)
        async with AgentTestStack(
            tmp_path / "stack",
            [flow],
            "mcp_test_support.worker",
            worker_cwd=TESTS_DIR,
            worker_env={STATE_DIR_ENV: str(tmp_path / "stdio"), EVERYTHING_URL_ENV: url},
        ) as stack:
            yield _Durable(stack, stack.sessions(flow), await stack.start_worker(), url)


@_needs_server_everything
async def test_a_2025_11_25_task_is_polled_across_a_worker_sigkill(tmp_path: Path) -> None:
    """A durable session calls the task-required tool over Streamable HTTP: the tool Step stores
    the task handle (the task and the MCP session holding it) and ends; the Worker is SIGKILLed
    while the task runs, and the next Worker polls the same task in the same server session
    until its report comes back. The tool was called once (one ``CallSingleAttemptTool``)."""
    async with _durable(tmp_path) as durable:
        await durable.sessions.start_session(
            "research", command((RESEARCH_TOOL, {"topic": "tides"}))
        )

        def waiting(snapshot: AgentSnapshot) -> AgentSnapshot | None:
            waits = any(
                call.status == AgentToolCallStatus.WAITING_FOR_TASK and call.task_id
                for call in snapshot.tool_calls
            )
            return snapshot if waits else None

        started = await wait_for_agent_snapshot(
            durable.sessions, "research", waiting, "the call to wait for its task", timeout=90
        )
        (call,) = started.tool_calls
        assert call.task_id is not None and "session_id" in call.task_id
        durable.worker.kill()
        durable.worker = await durable.stack.start_worker()

        reply = await durable.reply("research")
        assert reply.startswith("done: # Research Report: tides")
        executed = await durable.executed("research")
        assert executed.count("CallSingleAttemptTool") == 1
        assert executed.count("PollToolTask") >= 1


@_needs_server_everything
async def test_a_2025_11_25_task_elicitation_becomes_the_sessions_question(tmp_path: Path) -> None:
    """An ambiguous research query: the task goes ``input_required`` and queues an
    ``elicitation/create`` with one titled-enum field; a poll reads it from ``tasks/result`` and
    it becomes the session's question with the enum's consts as choices; the answer goes back to
    the server's request in the task's session and the report uses it."""
    async with _durable(tmp_path) as durable:
        await durable.sessions.start_session(
            "ask", command((RESEARCH_TOOL, {"topic": "python", "ambiguous": True}))
        )
        interrupt = await wait_for_agent_snapshot(
            durable.sessions,
            "ask",
            pending_interrupt,
            "the task's question",
            timeout=90,
        )
        assert interrupt.kind == InterruptKind.QUESTION
        assert interrupt.question is not None and "multiple interpretations" in interrupt.question
        assert interrupt.choices == ("programming", "snake", "comedy")
        assert not await durable.sessions.answer_question("ask", interrupt.interrupt_id, "opera")
        assert await durable.sessions.answer_question("ask", interrupt.interrupt_id, "snake")

        reply = await durable.reply("ask")
        assert reply.startswith("done: # Research Report: python (snake)"), reply[:200]


@_needs_server_everything
async def test_elicitation_and_sampling_outside_a_task_get_the_refusal() -> None:
    """The source declares elicitation and sampling, so server-everything offers its tools that
    ask; a request the session cannot turn into a question (during a plain ``tools/call``, or a
    stdio task's) is refused with the seeds' text, which the server reports back."""
    source = McpToolSource([_config()])
    names = {tool.name for tool in await source.list_tools()}
    assert {"everything__trigger-sampling-request", "everything__trigger-elicitation-request"} <= (
        names
    )
    for tool, arguments, asked in (
        ("everything__trigger-sampling-request", {"prompt": "hi"}, "a model completion"),
        ("everything__trigger-elicitation-request", {}, "an answer to 'Please provide inputs"),
    ):
        with pytest.raises(ToolExecutionError) as failure:
            await source.call_tool(tool, arguments, idempotency_key=f"s/t/{tool}")
        assert INPUT_REQUEST_ERROR_PREFIX in str(failure.value)
        assert asked in str(failure.value)
    report = await source.call_tool(
        RESEARCH_TOOL, {"topic": "python", "ambiguous": True}, idempotency_key="s/t/research"
    )
    assert "# Research Report: python (technical (default - elicitation unavailable))" in report
    await close_connections()


@_needs_server_everything
async def test_cancel_turn_sends_tasks_cancel_to_the_tasks_session(tmp_path: Path) -> None:
    """``cancel_turn`` while the 2025-11-25 task waits for the answer to its question (so it
    cannot finish first): ``CancelToolTask`` sends ``tasks/cancel`` to the session that holds the
    task, and the server then reports it cancelled."""
    async with _durable(tmp_path) as durable:
        await durable.sessions.start_session(
            "cancel", command((RESEARCH_TOOL, {"topic": "glaciers", "ambiguous": True}))
        )
        await wait_for_agent_snapshot(
            durable.sessions,
            "cancel",
            pending_interrupt,
            "the task's question",
            timeout=90,
        )
        snapshot = await durable.sessions.get_agent_snapshot("cancel")
        assert snapshot.state is not None and snapshot.state.active_turn_id is not None
        (call,) = snapshot.tool_calls
        task = HandshakeTask.from_text(call.task_id)
        assert task is not None
        assert await durable.sessions.cancel_turn("cancel", snapshot.state.active_turn_id)
        for _ in range(180):
            if "CancelToolTask" in await durable.executed("cancel"):
                break
            await asyncio.sleep(0.5)
        else:
            pytest.fail("CancelToolTask never ran")
        server = McpStreamableHttpServerConfig(name="everything", url=durable.url)
        state = await _post(server, task, "tasks/get")
        assert state["status"] == "cancelled"


@_needs_server_everything
async def test_a_restarted_http_server_gets_a_new_session_from_the_worker() -> None:
    """The Worker's MCP session dies with the server process. After a restart on the same port,
    the server rejects the old session (HTTP 400) without running the request: a call is sent
    once more on a new session, and a listing is read again on one."""
    port = _free_port()
    source = McpToolSource(
        [McpStreamableHttpServerConfig(name="everything", url=f"http://127.0.0.1:{port}/mcp")]
    )
    async with server_everything_over_http(port):
        await source.list_tools()
        assert "first" in await source.call_tool(
            "everything__echo", {"message": "first"}, idempotency_key="s/t/1"
        )
    async with server_everything_over_http(port):
        assert "second" in await source.call_tool(
            "everything__echo", {"message": "second"}, idempotency_key="s/t/2"
        )
    async with server_everything_over_http(port):
        tools = await source.list_tools(refresh=True)
        assert "everything__echo" in {tool.name for tool in tools}
    await close_connections()
