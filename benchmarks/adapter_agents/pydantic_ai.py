"""The benchmark agent on Pydantic AI: a ``FunctionModel`` that sleeps, and its tools.

``build_agent`` gives the plain ``pydantic_ai.Agent`` too, so ``peers.py`` can make the same agent
durable with DBOS or Restate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from dex_agents import ToolEffect
from dex_agents_pydantic_ai import dex_tool_metadata, pydantic_ai_session_flow
from dex_agents_pydantic_ai.testing import reference_agent
from pydantic_ai import Agent, Tool
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo

from adapter_agents import (
    BenchmarkAgent,
    TurnShape,
    add_order_note_result,
    lookup_order_result,
    next_model_action,
)

ToolWrapper = Callable[[Callable[..., Any]], Callable[..., Any]]


async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return lookup_order_result(order_id)


async def add_order_note(order_id: str, note: str) -> dict[str, str]:
    """Add a note to an order."""
    return add_order_note_result(order_id, note)


def _this_turns_outputs(messages: Sequence[ModelMessage]) -> list[str]:
    """Tool outputs after the last user prompt (the conversation keeps earlier turns)."""
    last_prompt = max(
        index
        for index, message in enumerate(messages)
        if isinstance(message, ModelRequest)
        and any(isinstance(part, UserPromptPart) for part in message.parts)
    )
    return [
        part.model_response_str()
        for message in messages[last_prompt + 1 :]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def _unchanged(function: Callable[..., Any]) -> Callable[..., Any]:
    return function


def build_agent(
    model_latency_seconds: float,
    shape: TurnShape = TurnShape.READ,
    *,
    name: str = "benchmark-support",
    wrap_tool: ToolWrapper = _unchanged,
    capabilities: Sequence[AbstractCapability[None]] = (),
) -> Agent[None, str]:
    """The benchmark agent as a ``pydantic_ai.Agent``.

    ``wrap_tool`` wraps each tool function (``peers.py`` makes them DBOS steps); ``capabilities``
    are the agent's (``DBOSDurability``).
    """

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(model_latency_seconds)
        action = next_model_action(shape, _this_turns_outputs(messages))
        if isinstance(action, str):
            return ModelResponse(parts=[TextPart(action)])
        return ModelResponse(
            parts=[ToolCallPart(action.name, action.arguments, tool_call_id=action.call_id)]
        )

    tools = [Tool(wrap_tool(lookup_order), metadata=dex_tool_metadata(ToolEffect.READ))]
    if shape is TurnShape.READ_WRITE:
        metadata = dex_tool_metadata(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
        tools.append(Tool(wrap_tool(add_order_note), metadata=metadata))
    # The adapter's reference agent; its model answers whole responses (no stream_function).
    return reference_agent(
        respond,
        tools,
        name=name,
        instructions="You answer questions about orders.",
        stream=False,
        capabilities=capabilities,
    )


def build_benchmark_agent(
    model_latency_seconds: float, shape: TurnShape = TurnShape.READ
) -> BenchmarkAgent:
    """The benchmark agent as a ``pydantic_ai.Agent``; the durable Flow runs the same agent."""
    agent = build_agent(model_latency_seconds, shape)
    # The durable session keeps the conversation, so the in-process run keeps it too.
    history: list[ModelMessage] = []

    async def run_in_process(text: str) -> str:
        result = await agent.run(text, message_history=history)
        history[:] = result.all_messages()
        return result.output

    return BenchmarkAgent(
        # A FunctionModel without a stream function answers whole responses: no streaming.
        flow=pydantic_ai_session_flow(agent, "AdapterTurnsPydanticAI", stream=False),
        run_in_process=run_in_process,
    )
