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

from adapter_agents import (
    BenchmarkAgent,
    TurnShape,
    add_order_note_result,
    lookup_order_result,
    next_model_action,
)


@function_tool(effect=ToolEffect.READ)
async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order by its ID."""
    return lookup_order_result(order_id)


@function_tool(effect=ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
async def add_order_note(order_id: str, note: str) -> dict[str, str]:
    """Add a note to an order."""
    return add_order_note_result(order_id, note)


def build_benchmark_agent(
    model_latency_seconds: float, shape: TurnShape = TurnShape.READ
) -> BenchmarkAgent:
    """The benchmark agent as a Stepwise agent with a ScriptedModelClient."""

    async def respond(request: ModelRequest) -> ScriptedModelReply:
        await asyncio.sleep(model_latency_seconds)
        outputs = [result.output for result in ScriptedModelClient.tool_results(request)]
        action = next_model_action(shape, outputs)
        if isinstance(action, str):
            return ScriptedModelReply(text=action)
        return ScriptedModelReply(tool_calls=[ScriptedToolCall(action.name, action.arguments)])

    tools = [lookup_order] if shape is TurnShape.READ else [lookup_order, add_order_note]
    definition = AgentDefinition(
        name="benchmark-support",
        instructions="You answer questions about orders.",
        model=ScriptedModelClient(respond, max_recorded_requests=0),
        tools=tools,
    )
    session = InProcessSession(StepwiseAgentRunner(definition))
    return BenchmarkAgent(
        flow=stepwise_agent_session_flow(definition, flow_type="AdapterTurnsStepwise"),
        run_in_process=session.run_turn,
    )
