"""The benchmark agent under Stepwise: the runner's own calls, in process, for the baseline."""

from __future__ import annotations

import asyncio

from dex_agents import ToolEffect
from dex_agents.stepwise import (
    AgentDefinition,
    ModelRequest,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    StepwiseAgentRunner,
    function_tool,
    stepwise_agent_session_flow,
)
from session_turns import InProcessSession

from adapter_agents import BenchmarkAgent, final_answer, lookup_order_result


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return lookup_order_result(order_id)


def build_benchmark_agent(model_latency_seconds: float) -> BenchmarkAgent:
    """The benchmark agent as a Stepwise agent with a ScriptedModelClient."""

    async def respond(request: ModelRequest) -> ScriptedModelReply:
        await asyncio.sleep(model_latency_seconds)
        results = ScriptedModelClient.tool_results(request)
        if not results:
            return ScriptedModelReply(
                tool_calls=[ScriptedToolCall("lookup_order", {"order_id": "7"})]
            )
        return ScriptedModelReply(text=final_answer(results[-1].output))

    definition = AgentDefinition(
        name="benchmark-support",
        instructions="You answer questions about orders.",
        model=ScriptedModelClient(respond, max_recorded_requests=0),
        tools=[lookup_order],
    )
    session = InProcessSession(StepwiseAgentRunner(definition))
    return BenchmarkAgent(
        flow=stepwise_agent_session_flow(definition, flow_type="AdapterTurnsStepwise"),
        run_in_process=session.run_turn,
    )
