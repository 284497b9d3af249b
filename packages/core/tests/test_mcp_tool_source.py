"""McpToolSource against real MCP servers on the SDK: a stdio subprocess and Streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra (dex-agents[mcp]) is not installed")

from dex_agents import (
    AgentEvent,
    AgentEventWriter,
    AgentToolCall,
    AgentToolCallStatus,
    AgentTurnContext,
    ConfigurationError,
    DeferredToolExecution,
    ToolEffect,
    ToolExecutionError,
    ToolPolicy,
)
from dex_agents._deferred_tool_context import _deferred_tool_execution_scope
from dex_agents.mcp import (
    IDEMPOTENCY_KEY_META_KEY,
    INPUT_REQUEST_ERROR_PREFIX,
    MCP_GET_PROMPT_TOOL_NAME,
    MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
    MCP_READ_RESOURCE_TOOL_NAME,
    MCP_TOOL_PROGRESS_EVENT,
    McpStdioServerConfig,
    McpTool,
    McpToolCallInterruptedError,
    McpToolSource,
    agent_tool_name,
)
from dex_agents.stepwise import AgentDefinition, ScriptedModelClient, ScriptedModelReply
from dex_agents.testing import FileGate, InvocationLog, TurnContextBuilder
from mcp_test_support.servers import HttpMcpServer, stdio_config

KEY = "session-1/turn-1/call_1"


def _log(state_dir: Path) -> InvocationLog:
    return InvocationLog(state_dir / "invocations.jsonl")


@pytest.fixture
async def http_server(tmp_path: Path) -> AsyncIterator[HttpMcpServer]:
    async with HttpMcpServer(tmp_path / "http") as server:
        yield server


def _turn() -> AgentTurnContext:
    return TurnContextBuilder().context(
        tool_policies={"files__write": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False)}
    )


def test_tool_names_are_sanitised_and_shortened_with_a_hash() -> None:
    assert agent_tool_name("my files", "read.file") == "my_files__read_file"
    long_a, long_b = agent_tool_name("s", "x" * 80 + "a"), agent_tool_name("s", "x" * 80 + "b")
    assert len(long_a) == len(long_b) == 64
    assert long_a != long_b and long_a[:55] == long_b[:55]


def test_server_names_must_be_unique_and_configs_valid() -> None:
    config = McpStdioServerConfig(name="files", command="true")
    with pytest.raises(ConfigurationError, match="two MCP servers are named files"):
        McpToolSource([config, config])
    with pytest.raises(ConfigurationError, match="command must be non-blank"):
        McpStdioServerConfig(name="files", command=" ")
    with pytest.raises(ConfigurationError, match="connection_attempts"):
        McpStdioServerConfig(name="files", command="x", connection_attempts=0)


async def test_stdio_listing_names_effects_and_policies(tmp_path: Path) -> None:
    trusted = McpToolSource([stdio_config(tmp_path)])
    tools = {tool.name: tool for tool in await trusted.list_tools()}
    assert {"files__lookup", "files__upsert", "files__write", "files__broken"} <= set(tools)
    lookup = tools["files__lookup"]
    assert isinstance(lookup, McpTool)
    assert (lookup.server_name, lookup.mcp_tool_name) == ("files", "lookup")
    assert lookup.description == "Look an item up."
    assert lookup.input_schema["required"] == ["item"]
    # idempotentHint wins over destructiveHint; no hint keeps the session default.
    assert [tools[name].framework_effect for name in ("files__lookup", "files__upsert")] == [
        ToolEffect.READ,
        ToolEffect.IDEMPOTENT_WRITE,
    ]
    assert tools["files__write"].framework_effect is None
    assert trusted.tool_policies()["files__lookup"] == ToolPolicy(ToolEffect.READ)
    assert "files__write" not in trusted.tool_policies()

    untrusted = McpToolSource([stdio_config(tmp_path, trusts_tool_annotations=False)])
    assert all(tool.framework_effect is None for tool in await untrusted.list_tools())


async def test_deferred_calls_carry_policy_and_reference_and_an_unknown_name_needs_no_approval(
    tmp_path: Path,
) -> None:
    source = McpToolSource([stdio_config(tmp_path)])
    listed = {tool.name: tool for tool in await source.list_tools()}
    turn = _turn()
    read = source.deferred_tool_call(turn, "c1", "{}", listed["files__lookup"])
    assert (read.policy.effect, read.policy.requires_approval) == (ToolEffect.READ, False)
    assert json.loads(read.tool_source_reference or "") == {"server": "files", "tool": "lookup"}
    # A ToolPolicy wins over the annotations.
    write = source.deferred_tool_call(turn, "c2", "{}", tool_name="files__write")
    assert (write.policy.effect, write.policy.requires_approval) == (
        ToolEffect.NON_IDEMPOTENT_WRITE,
        False,
    )
    unknown = source.deferred_tool_call(turn, "c3", "{}", tool_name="files__gone")
    assert (unknown.policy.effect, unknown.policy.requires_approval) == (
        ToolEffect.UNCLASSIFIED,
        False,
    )
    assert unknown.tool_source_reference is None


async def test_call_tool_sends_the_idempotency_key_and_streams_progress(tmp_path: Path) -> None:
    source = McpToolSource([stdio_config(tmp_path)])
    events: list[AgentEvent] = []
    writer = AgentEventWriter(events.append, turn_id="turn-1", step_execution_id="s", attempt=1)

    assert await source.call_tool("files__upsert", {"item": "a"}, idempotency_key=KEY) == (
        f"upserted a with {KEY}"
    )
    assert _log(tmp_path).keys("upsert") == [KEY]
    output = await source.call_tool(
        "files__progress", {}, idempotency_key=KEY, events=writer, tool_call_id="call_1"
    )
    assert output == "progressed"
    progress = [json.loads(e.payload) for e in events if e.type == MCP_TOOL_PROGRESS_EVENT]
    assert progress == [
        {
            "message": "half way",
            "progress": 1.0,
            "tool_call_id": "call_1",
            "tool_name": "files__progress",
            "total": 2.0,
        },
        {
            "message": "done",
            "progress": 2.0,
            "tool_call_id": "call_1",
            "tool_name": "files__progress",
            "total": 2.0,
        },
    ]
    assert await source.call_tool("files__mixed", {}, idempotency_key=KEY) == "first\nsecond"


async def test_call_tool_in_a_tool_step_reports_progress_for_the_running_call(
    tmp_path: Path,
) -> None:
    source = McpToolSource([stdio_config(tmp_path)])
    events: list[AgentEvent] = []
    writer = AgentEventWriter(events.append, turn_id="turn-1", step_execution_id="s", attempt=1)
    record = AgentToolCall(
        tool_call_id="call_7",
        tool_name="progress",
        arguments="{}",
        effect=ToolEffect.READ,
        requires_approval=False,
        status=AgentToolCallStatus.APPROVED,
        turn_id="turn-1",
        deferral_order=0,
    )
    # What a tool Step sets around execute_deferred_tool_call, where a framework tool runs.
    with _deferred_tool_execution_scope(DeferredToolExecution("session-1", record, 1, writer)):
        assert await source.call_tool("files__progress", {}, idempotency_key=KEY) == "progressed"

    progress = [json.loads(e.payload) for e in events if e.type == MCP_TOOL_PROGRESS_EVENT]
    assert [(p["tool_call_id"], p["progress"]) for p in progress] == [
        ("call_7", 1.0),
        ("call_7", 2.0),
    ]
    assert IDEMPOTENCY_KEY_META_KEY == "io.superdurable.dex/idempotencyKey"


async def test_failure_table_on_stdio(tmp_path: Path) -> None:
    source = McpToolSource([stdio_config(tmp_path)])
    with pytest.raises(ToolExecutionError, match="the broken tool always fails"):
        await source.call_tool("files__broken", {}, idempotency_key=KEY)
    with pytest.raises(ToolExecutionError, match="unknown tool files__missing"):
        await source.call_tool("files__missing", {}, idempotency_key=KEY)
    # The server exits mid-call: the call was sent, its outcome is unknown.
    with pytest.raises(McpToolCallInterruptedError, match="was sent but no result came back"):
        await source.call_tool("files__write", {"text": "x", "gate": "!exit"}, idempotency_key=KEY)
    assert _log(tmp_path).count("write") == 1


async def test_an_unreachable_server_is_never_sent_the_call(tmp_path: Path) -> None:
    starts = tmp_path / "starts.txt"
    script = f"open({str(starts)!r}, 'a').write('.'); raise SystemExit(1)"
    down = McpStdioServerConfig(
        name="down",
        command=sys.executable,
        args=["-c", script],
        connection_attempts=2,
    )
    source = McpToolSource(
        [down, stdio_config(tmp_path)], listing_failure_backoff=timedelta(minutes=5)
    )
    names = {tool.name for tool in await source.list_tools()}
    assert "files__lookup" in names and not any(name.startswith("down__") for name in names)
    assert starts.read_text() == ".."  # both connection attempts of the first listing
    await source.list_tools()  # within the failure backoff: not tried again
    assert starts.read_text() == ".."

    turn = _turn()
    tool = McpTool("down__x", "", {}, server_name="down", mcp_tool_name="x")
    deferred = source.deferred_tool_call(turn, "c1", "{}", tool)
    assert json.loads(deferred.tool_source_reference or "")["server"] == "down"


async def test_resource_and_prompt_tools(tmp_path: Path) -> None:
    source = McpToolSource([stdio_config(tmp_path)], resource_and_prompt_tools_enabled=True)
    names = [tool.name for tool in await source.list_tools()]
    assert names[-3:] == [
        MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME,
        MCP_READ_RESOURCE_TOOL_NAME,
        MCP_GET_PROMPT_TOOL_NAME,
    ]
    listing = json.loads(
        await source.call_tool(
            MCP_LIST_RESOURCES_AND_PROMPTS_TOOL_NAME, {"server": "files"}, idempotency_key=KEY
        )
    )
    assert [resource["uri"] for resource in listing["resources"]] == ["notes://today"]
    assert [prompt["name"] for prompt in listing["prompts"]] == ["greet"]
    read = await source.call_tool(
        MCP_READ_RESOURCE_TOOL_NAME,
        {"server": "files", "uri": "notes://today"},
        idempotency_key=KEY,
    )
    assert json.loads(read)["contents"][0]["text"] == "buy milk"
    assert read == json.dumps(json.loads(read), sort_keys=True, separators=(",", ":"))
    prompt = json.loads(
        await source.call_tool(
            MCP_GET_PROMPT_TOOL_NAME,
            {"server": "files", "name": "greet", "arguments": {"name": "Ada"}},
            idempotency_key=KEY,
        )
    )
    assert prompt["messages"][0]["content"]["text"] == "Say hello to Ada."
    with pytest.raises(ToolExecutionError, match="MCP server nowhere is not configured"):
        await source.call_tool(
            MCP_READ_RESOURCE_TOOL_NAME, {"server": "nowhere", "uri": "x"}, idempotency_key=KEY
        )


async def test_a_stdio_task_is_polled_inside_the_call_until_task_wait_timeout(
    tmp_path: Path,
) -> None:
    source = McpToolSource([stdio_config(tmp_path, task_wait_timeout=timedelta(seconds=2))])
    await source.list_tools()
    # The task ends with the server process, so it is polled on the call's own connection.
    assert (
        await source.call_tool("files__slow_report", {"item": "q1"}, idempotency_key=KEY)
        == "report on q1 ready"
    )
    with pytest.raises(
        McpToolCallInterruptedError, match="did not finish within task_wait_timeout"
    ):
        await source.call_tool(
            "files__slow_report", {"item": "q2", "gate": "held-report"}, idempotency_key=KEY
        )
    assert _log(tmp_path).keys("slow_report") == ["q1", "q2"]


def test_poll_intervals_follow_the_server_or_double_up_to_a_minute() -> None:
    from dex_agents.mcp._tasks import first_poll_interval, next_poll_interval

    assert first_poll_interval(None) == 1 and first_poll_interval(1500) == 2
    assert [next_poll_interval(5000, previous) for previous in (None, 5, 10, 40, 60)] == [
        5,
        10,
        20,
        60,
        60,
    ]
    assert next_poll_interval(120_000, 60) == 120  # a longer server interval wins


def test_two_sources_with_the_resource_tools_are_refused() -> None:
    model = ScriptedModelClient(lambda request: ScriptedModelReply(text="hi"))
    config = McpStdioServerConfig(name="files", command="true")
    with pytest.raises(ValueError, match="two tool sources list a tool named mcp_"):
        AgentDefinition(
            name="agent",
            instructions="",
            model=model,
            tool_sources=[
                McpToolSource([config], resource_and_prompt_tools_enabled=True),
                McpToolSource(
                    [config], source_name="other", resource_and_prompt_tools_enabled=True
                ),
            ],
        )


async def test_http_call_task_polled_inline_and_input_request_fails(
    tmp_path: Path, http_server: HttpMcpServer
) -> None:
    source = McpToolSource([http_server.config()])
    names = {tool.name for tool in await source.list_tools()}
    assert {"tickets__lookup", "tickets__slow_report", "tickets__ask_account"} <= names
    assert (
        await source.call_tool("tickets__lookup", {"item": "a"}, idempotency_key=KEY)
        == "a is in stock"
    )
    # call_tool, the framework adapter path, polls every task inside the call.
    assert (
        await source.call_tool("tickets__slow_report", {"item": "q3"}, idempotency_key=KEY)
        == "report on q3 ready"
    )
    with pytest.raises(ToolExecutionError) as failure:
        await source.call_tool("tickets__two_questions", {}, idempotency_key=KEY)
    assert str(failure.value) == (
        f"{INPUT_REQUEST_ERROR_PREFIX} (an answer to 'Your city?', an answer to 'Your name?')"
    )
    log = _log(http_server.state_dir)
    assert log.count("tasks/cancel") == 1  # the waiting task is cancelled


async def test_a_header_mismatch_lists_on_the_connection_and_sends_again(
    http_server: HttpMcpServer,
) -> None:
    # A tool with an x-mcp-header argument: a new connection has not listed it, so a 2026-07-28
    # server refuses the first send; the source lists on that connection and sends once more.
    source = McpToolSource([http_server.config()])
    assert (
        await source.call_tool("tickets__regional", {"region": "eu"}, idempotency_key=KEY)
        == "served in eu"
    )


async def test_http_server_killed_mid_call_is_an_interruption(
    tmp_path: Path, http_server: HttpMcpServer
) -> None:
    source = McpToolSource([http_server.config(connection_attempts=1)])
    await source.list_tools()
    gate_dir = http_server.state_dir
    call = asyncio.create_task(
        source.call_tool("tickets__write", {"text": "t", "gate": "held"}, idempotency_key=KEY)
    )
    await FileGate(gate_dir, "held").wait_until_reached()
    http_server.kill()
    with pytest.raises(McpToolCallInterruptedError):
        await call
    # Now nothing listens: the next call is never sent.
    with pytest.raises(ToolExecutionError, match="was not sent"):
        await source.call_tool("tickets__write", {"text": "t"}, idempotency_key=KEY)
