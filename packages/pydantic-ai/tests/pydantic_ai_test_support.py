"""Shared pieces of the Pydantic AI adapter's tests: turns, events, scripted ``FunctionModel``s."""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents import AgentEvent, AgentSessionFlow
from dex_agents.testing import (
    InProcessWorker,
)
from dex_agents_pydantic_ai.testing import turn_view
from pydantic_ai.messages import ModelMessage, ToolReturnPart


async def session_events(
    worker: InProcessWorker, flow: AgentSessionFlow, session_id: str
) -> list[AgentEvent]:
    """Every retained AgentEvent of the session, oldest first."""
    page = await worker.client.list_stream_messages(
        worker.scoped(session_id), flow.agent_events, 500
    )
    return [message.value for message in reversed(page.messages)]


def turn_tool_results(messages: Sequence[ModelMessage]) -> list[ToolReturnPart]:
    """The tool returns after the last user prompt: the current turn's results."""
    return list(turn_view(messages).tool_returns)
