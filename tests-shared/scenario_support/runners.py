"""The registry of runners the shared scenarios run under.

Each entry maps a runner name to a factory that builds the Flow of a
``ScenarioAgentSpec``: the scenario tools with their effects, the scripted
model, and the approval deadline. Each adapter adds its own factory here; the
Worker child (``worker.py``) and the tests build their Flows from this one
registry, so both sides register the same Flow types.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from dex import Flow
from dex_agents.stepwise import (
    AgentDefinition,
    ModelOutputItem,
    ModelRequest,
    ModelUserText,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolCallContext,
    function_tool,
    stepwise_agent_session_flow,
)

from scenario_support.scenario_agent import (
    ScenarioAgentSpec,
    ScenarioTool,
    ScenarioToolError,
    run_scenario_tool,
    scenario_agent_specs,
    scripted_reply,
)

RunnerFactory = Callable[[ScenarioAgentSpec], Flow[Any]]


def build_stepwise_flow(spec: ScenarioAgentSpec) -> Flow[Any]:
    """The scenario agent as a Stepwise agent with a ScriptedModelClient."""

    async def respond(request: ModelRequest) -> ScriptedModelReply:
        turn_items = _items_after_last_user_text(request.input, ModelUserText)
        reply = await scripted_reply(
            spec,
            ScriptedModelClient.user_texts(request)[-1],
            model_call_index=1 + _count_runs(turn_items, ModelOutputItem),
            tool_outputs=[result.output for result in ScriptedModelClient.tool_results(request)],
        )
        return ScriptedModelReply(
            text=reply.text,
            tool_calls=[
                ScriptedToolCall(call.tool, dict(call.arguments)) for call in reply.tool_calls
            ],
        )

    agent = AgentDefinition(
        name="scenario",
        instructions=spec.instructions,
        model=ScriptedModelClient(respond),
        tools=[_stepwise_tool(spec, tool) for tool in spec.tools],
        interrupt_deadline=spec.interrupt_deadline,
    )
    return stepwise_agent_session_flow(agent, flow_type=spec.flow_type)


def _stepwise_tool(spec: ScenarioAgentSpec, tool: ScenarioTool) -> Any:
    async def run(gate: Annotated[str, "A gate name, or empty"], context: ToolCallContext) -> str:
        try:
            return await run_scenario_tool(spec, tool.name, gate, context.idempotency_key)
        except ScenarioToolError as failure:
            from dex_agents import ToolExecutionError

            raise ToolExecutionError(str(failure)) from failure

    return function_tool(
        effect=tool.effect,
        requires_approval=tool.requires_approval,
        name=tool.name,
        description=tool.description,
    )(run)


def _items_after_last_user_text(items: tuple[object, ...], user_text_type: type) -> list[object]:
    last = max(
        (index for index, item in enumerate(items) if isinstance(item, user_text_type)), default=-1
    )
    return list(items[last + 1 :])


def _count_runs(items: list[object], item_type: type) -> int:
    """How many model responses the turn already has: runs of consecutive output items."""
    runs = 0
    previous_matched = False
    for item in items:
        matched = isinstance(item, item_type)
        if matched and not previous_matched:
            runs += 1
        previous_matched = matched
    return runs


RUNNERS: dict[str, RunnerFactory] = {
    "stepwise": build_stepwise_flow,
}


def build_scenario_flows(runner: str, state_dir: Path) -> list[Flow[Any]]:
    """Every scenario agent's Flow under ``runner``, in a fixed order.

    Raises:
        KeyError: ``runner`` is not in ``RUNNERS``.
    """
    if runner not in RUNNERS:
        raise KeyError(f"unknown scenario runner {runner!r}; known: {sorted(RUNNERS)}")
    factory = RUNNERS[runner]
    return [factory(spec) for spec in scenario_agent_specs(state_dir)]
