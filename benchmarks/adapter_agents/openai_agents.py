"""The benchmark agent as an OpenAI Agents SDK agent, durable and run by the SDK's ``Runner``.

Its model is a ``ReplyFunctionModel`` (the SDK ``Model`` interface, streamed through the SDK's own
scripted model) that sleeps ``model_latency_seconds`` per call; the tools are ``function_tool``s.
The in-process baseline is ``Runner.run`` of the same agent, keeping the conversation across turns
as the durable session does. ``build_agent`` gives the plain ``Agent`` too, so ``peers.py`` can
make the same agent durable with DBOS.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from agents import Agent, RunConfig, Runner, TResponseInputItem, function_tool
from agents.items import TResponseOutputItem
from dex_agents import AgentSessionFlow
from dex_agents_openai_agents import OpenAIAgentsRunner
from dex_agents_openai_agents.testing import (
    ModelCallInput,
    assistant_message,
    function_call,
    reference_agent,
)

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

ToolWrapper = Callable[[Callable[..., Any]], Callable[..., Any]]
RUN_CONFIG = RunConfig(tracing_disabled=True)


async def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return json.dumps(lookup_order_result(order_id), sort_keys=True)


async def add_order_note(order_id: str, note: str) -> str:
    """Add a note to an order."""
    return json.dumps(add_order_note_result(order_id, note), sort_keys=True)


def _unchanged(function: Callable[..., Any]) -> Callable[..., Any]:
    return function


def build_agent(
    model_latency_seconds: float,
    shape: TurnShape = TurnShape.READ,
    *,
    wrap_tool: ToolWrapper = _unchanged,
) -> Agent[Any]:
    """The benchmark agent; ``wrap_tool`` wraps each tool function (``peers.py``: DBOS steps)."""

    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        await asyncio.sleep(model_latency_seconds)
        action = next_model_action(shape, call.tool_outputs_since_user())
        if isinstance(action, str):
            return [assistant_message(action)]
        return [function_call(action.name, action.arguments, call_id=action.call_id)]

    tools = [function_tool(wrap_tool(lookup_order), name_override=LOOKUP_TOOL)]
    if shape is TurnShape.READ_WRITE:
        tools.append(function_tool(wrap_tool(add_order_note), name_override=NOTE_TOOL))
    return reference_agent(
        reply,
        tools,
        name="benchmark-support",
        instructions="You answer questions about orders.",
        model_name="benchmark-model",
    )


def build_benchmark_agent(
    model_latency_seconds: float, shape: TurnShape = TurnShape.READ
) -> BenchmarkAgent:
    """The benchmark agent with a model that sleeps ``model_latency_seconds`` per call."""
    agent = build_agent(model_latency_seconds, shape)
    history: list[TResponseInputItem] = []

    async def run_in_process(text: str) -> str:
        result = await Runner.run(
            agent, [*history, {"role": "user", "content": text}], run_config=RUN_CONFIG
        )
        history[:] = result.to_input_list()
        return str(result.final_output)

    flow = AgentSessionFlow(
        OpenAIAgentsRunner(agent, run_config=RUN_CONFIG),
        flow_type="AdapterTurnsOpenAIAgents",
        options=benchmark_session_options(shape),
    )
    return BenchmarkAgent(flow=flow, run_in_process=run_in_process)
