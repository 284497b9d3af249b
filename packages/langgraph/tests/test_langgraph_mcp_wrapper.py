"""The MCP wrapper path: a schema-only ``StructuredTool`` (a JSON Schema ``args_schema``) whose
function reads the call's idempotency key with ``get_tool_call_idempotency_key(config)`` inside a
real tool Step, classified by MCP annotations in the tool's metadata."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from dex_agents import AgentSessionOptions, MessageRole
from dex_agents_langgraph import get_tool_call_idempotency_key, langgraph_session_flow
from langchain_core.messages import ToolCall
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.prebuilt import create_react_agent
from langgraph_test_support import (
    ScriptedToolChatModel,
    call_tools_then_answer,
    local_sessions,
    texts_of,
    wait_for_interrupt,
    wait_for_turns,
)


class RecordingServer:
    """Stands in for ``McpToolSource.call_tool``: records each call with its idempotency key."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []

    async def call_tool(self, name: str, arguments: dict[str, Any], *, idempotency_key: str) -> str:
        self.calls.append((name, arguments, idempotency_key))
        return f"{name} done"


def mcp_tool(
    server: RecordingServer, name: str, schema: dict[str, Any], annotations: dict[str, bool]
) -> StructuredTool:
    """The wrapper the README documents: one framework tool per listed MCP tool."""

    async def call(config: RunnableConfig, **arguments: Any) -> str:
        key = get_tool_call_idempotency_key(config)
        return await server.call_tool(name, arguments, idempotency_key=key)

    return StructuredTool(
        name=name,
        description=f"The MCP tool {name}.",
        args_schema=schema,
        coroutine=call,
        metadata={"annotations": annotations},
    )


ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}},
    "required": ["order_id"],
    "additionalProperties": False,
}


async def test_a_schema_only_tool_reads_the_idempotency_key_in_its_tool_step(
    tmp_path: Path,
) -> None:
    server = RecordingServer()
    tools = [
        mcp_tool(server, "tickets__close", ORDER_SCHEMA, {"idempotentHint": True}),
        mcp_tool(server, "payments__refund", ORDER_SCHEMA, {"destructiveHint": True}),
    ]
    model = ScriptedToolChatModel(
        respond=call_tools_then_answer(
            ToolCall(name="tickets__close", args={"order_id": "7"}, id="close_1"),
            ToolCall(name="payments__refund", args={"order_id": "7"}, id="refund_1"),
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = create_react_agent(model, tools)
    flow = langgraph_session_flow(graph, flow_type="Mcp", options=AgentSessionOptions())
    async with local_sessions(tmp_path, [flow]) as dex:
        sessions = dex["Mcp"]
        await sessions.start_session("mcp-1", "close the ticket and refund order 7")
        # No annotation says the refund is safe: it is unclassified and waits for a person.
        interrupt = await wait_for_interrupt(sessions, "mcp-1")
        assert interrupt.tool_name == "payments__refund"
        assert await sessions.resolve_interrupt("mcp-1", interrupt.interrupt_id, approved=True)
        snapshot = await wait_for_turns(sessions, "mcp-1")

    assert sorted(server.calls) == [
        ("payments__refund", {"order_id": "7"}, "mcp-1/turn-1/refund_1"),
        ("tickets__close", {"order_id": "7"}, "mcp-1/turn-1/close_1"),
    ]
    assert texts_of(snapshot, MessageRole.ASSISTANT) == [
        "done: tickets__close done; payments__refund done"
    ]
    history = snapshot.messages
    assert [m.role for m in history] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
    ]
