"""The benchmark agent as a ``strands.Agent`` whose model is a sleeping ``ScriptedModel``
(``reference_agent``).

``build_agent`` gives the plain agent too, so ``peers.py`` runs the same agent in process.
"""

from __future__ import annotations

import asyncio

from dex_agents_strands import strands_session_flow
from dex_agents_strands.testing import ModelCall, reference_agent, text_reply, tool_use_reply
from strands import Agent, tool
from strands.types.content import Message

from adapter_agents import (
    LOOKUP_TOOL,
    NOTE_TOOL,
    BenchmarkAgent,
    TurnShape,
    add_order_note_result,
    benchmark_session_options,
    lookup_order_result,
    next_model_action,
)


@tool(name=LOOKUP_TOOL)
def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID.

    Args:
        order_id: The order's ID.
    """
    return lookup_order_result(order_id)


@tool(name=NOTE_TOOL)
def add_order_note(order_id: str, note: str) -> dict[str, str]:
    """Add a note to an order.

    Args:
        order_id: The order's ID.
        note: The note.
    """
    return add_order_note_result(order_id, note)


def build_agent(model_latency_seconds: float, shape: TurnShape = TurnShape.READ) -> Agent:
    """The benchmark agent as a ``strands.Agent``."""

    async def reply(call: ModelCall) -> Message:
        await asyncio.sleep(model_latency_seconds)
        action = next_model_action(shape, call.tool_outputs())
        if isinstance(action, str):
            return text_reply(action)
        return tool_use_reply(action.call_id, action.name, action.arguments)

    tools = [lookup_order, add_order_note] if shape is TurnShape.READ_WRITE else [lookup_order]
    return reference_agent(
        reply, tools, system_prompt="You answer questions about orders.", model_id="benchmark"
    )


def build_benchmark_agent(
    model_latency_seconds: float, shape: TurnShape = TurnShape.READ
) -> BenchmarkAgent:
    """The benchmark agent; in process, Strands' own loop runs it and keeps the conversation."""
    agent = build_agent(model_latency_seconds, shape)

    async def run_in_process(text: str) -> str:
        result = await agent.invoke_async(text)
        return "".join(block.get("text", "") for block in result.message["content"])

    return BenchmarkAgent(
        flow=strands_session_flow(agent, "AdapterTurnsStrands", benchmark_session_options(shape)),
        run_in_process=run_in_process,
    )
