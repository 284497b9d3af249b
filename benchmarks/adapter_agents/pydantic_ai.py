"""The benchmark agent on Pydantic AI: a ``FunctionModel`` that sleeps, and one READ tool."""

from __future__ import annotations

import asyncio

from dex_agents import ToolEffect
from dex_agents_pydantic_ai import dex_tool_metadata, pydantic_ai_session_flow
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from adapter_agents import BenchmarkAgent, final_answer, lookup_order_result


async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return lookup_order_result(order_id)


def build_benchmark_agent(model_latency_seconds: float) -> BenchmarkAgent:
    """The benchmark agent as a ``pydantic_ai.Agent``; the durable Flow runs the same agent."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(model_latency_seconds)
        # This turn's results: those after the last user prompt (the session keeps earlier turns).
        last_prompt = max(
            index
            for index, message in enumerate(messages)
            if isinstance(message, ModelRequest)
            and any(isinstance(part, UserPromptPart) for part in message.parts)
        )
        results = [
            part
            for message in messages[last_prompt + 1 :]
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        if not results:
            return ModelResponse(parts=[ToolCallPart("lookup_order", {"order_id": "7"})])
        return ModelResponse(parts=[TextPart(final_answer(results[-1].model_response_str()))])

    agent: Agent[None, str] = Agent(
        FunctionModel(respond),
        name="benchmark-support",
        instructions="You answer questions about orders.",
        tools=[Tool(lookup_order, metadata=dex_tool_metadata(ToolEffect.READ))],
    )

    async def run_in_process(text: str) -> str:
        return (await agent.run(text)).output

    return BenchmarkAgent(
        # A FunctionModel without a stream function answers whole responses: no streaming.
        flow=pydantic_ai_session_flow(agent, "AdapterTurnsPydanticAI", stream=False),
        run_in_process=run_in_process,
    )
