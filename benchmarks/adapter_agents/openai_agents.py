"""The benchmark agent as an OpenAI Agents SDK agent, durable and run by the SDK's ``Runner``.

Its model is a ``ReplyFunctionModel`` (the SDK ``Model`` interface, streamed through the SDK's own
scripted model) that sleeps ``model_latency_seconds`` per call; ``lookup_order`` is a
``function_tool``. The in-process baseline is ``Runner.run`` of the same agent, keeping the
conversation across turns as the durable session does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from agents import Agent, RunConfig, Runner, TResponseInputItem, function_tool
from agents.items import TResponseOutputItem
from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents_openai_agents import OpenAIAgentsRunner
from dex_agents_openai_agents.testing import (
    ModelCallInput,
    ReplyFunctionModel,
    assistant_message,
    function_call,
)

from adapter_agents import BenchmarkAgent, final_answer, lookup_order_result


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its ID."""
    return json.dumps(lookup_order_result(order_id), sort_keys=True)


def build_benchmark_agent(model_latency_seconds: float) -> BenchmarkAgent:
    """The benchmark agent with a model that sleeps ``model_latency_seconds`` per call."""

    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        await asyncio.sleep(model_latency_seconds)
        results = call.tool_outputs_since_user()
        if not results:
            return [function_call("lookup_order", {"order_id": "7"}, call_id="call_lookup")]
        return [assistant_message(final_answer(results[-1]))]

    agent: Agent[Any] = Agent(
        name="benchmark-support",
        instructions="You answer questions about orders.",
        model=ReplyFunctionModel(reply, model="benchmark-model"),
        tools=[lookup_order],
    )
    run_config = RunConfig(tracing_disabled=True)
    history: list[TResponseInputItem] = []

    async def run_in_process(text: str) -> str:
        result = await Runner.run(
            agent, [*history, {"role": "user", "content": text}], run_config=run_config
        )
        history[:] = result.to_input_list()
        return str(result.final_output)

    flow = AgentSessionFlow(
        OpenAIAgentsRunner(agent, run_config=run_config),
        flow_type="AdapterTurnsOpenAIAgents",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
    return BenchmarkAgent(flow=flow, run_in_process=run_in_process)
