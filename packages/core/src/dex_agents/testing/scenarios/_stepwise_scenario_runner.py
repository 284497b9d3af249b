"""The Stepwise runner of the shared scenario suite: the scenario agent as a Stepwise agent.

The core's entry point ``stepwise`` in the group ``dex_agents.scenario_runners`` points here. The
scripted model answers through a ``ScriptedModelClient``, the scenario tools are function tools,
and ``report`` comes from a tool source, so every scenario feature runs under Stepwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Annotated, Any

from dex import Flow

from dex_agents import (
    AgentTurnContext,
    BuiltInTool,
    DeferredToolCall,
    DeferredToolExecution,
    ToolEffect,
    ToolInputRequested,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.exceptions import ToolExecutionError
from dex_agents.stepwise import (
    AgentDefinition,
    ListedTool,
    ModelOutputItem,
    ModelRequest,
    ModelUserText,
    ScriptedModelClient,
    ScriptedModelReply,
    ScriptedToolCall,
    ToolCallContext,
    function_tool,
    stepwise_agent_session_flow,
    stepwise_agent_session_options,
)
from dex_agents.testing._context_window_scenario import build_stepwise_context_window_flow
from dex_agents.testing.scenarios._scenario_agent import (
    ScenarioAgentSpec,
    ScenarioModelInput,
    ScenarioTool,
    ScenarioToolError,
    run_scenario_tool,
    scripted_reply,
)
from dex_agents.testing.scenarios._scenario_mcp_server import (
    SCENARIO_MCP_TOOL_POLICIES,
    mcp_extra_installed,
    scenario_mcp_tool_source,
)
from dex_agents.testing.scenarios._scenario_outcome_checks import scenario_outcome_check
from dex_agents.testing.scenarios._scenario_questions import (
    CONFIRM_TOOL,
    REPORT_TOOL,
    ScenarioQuestion,
    poll_report_task,
    run_confirm_tool,
    scenario_input_requested,
    start_report_task,
)
from dex_agents.testing.scenarios._scenario_runner import ScenarioFeature, ScenarioRunner

__all__ = ["STEPWISE_SCENARIO_RUNNER", "build_stepwise_flow"]


def build_stepwise_flow(spec: ScenarioAgentSpec) -> Flow[Any]:
    """The scenario agent as a Stepwise agent with a ScriptedModelClient."""

    def model_for(settings: Mapping[str, object]) -> ScriptedModelClient:
        async def respond(request: ModelRequest) -> ScriptedModelReply:
            turn_items = _items_after_last_user_text(request.input, ModelUserText)
            call = ScenarioModelInput(
                ScriptedModelClient.user_texts(request),
                model_call_index=1 + _count_runs(turn_items, ModelOutputItem),
                tool_outputs=[
                    result.output for result in ScriptedModelClient.tool_results(request)
                ],
            )
            reply = await scripted_reply(spec, call, settings)
            return ScriptedModelReply(
                text=reply.text,
                tool_calls=[
                    ScriptedToolCall(call.tool, dict(call.arguments)) for call in reply.tool_calls
                ],
            )

        return ScriptedModelClient(respond)

    agent = AgentDefinition(
        name="scenario",
        instructions=spec.instructions,
        model=model_for({}),
        # The turn's session settings reach the scripted model, as a real resolve_model would.
        resolve_model=model_for,
        tools=[*(_stepwise_tool(spec, tool) for tool in spec.tools), _stepwise_confirm_tool(spec)],
        tool_sources=[
            ScenarioReportSource(spec),
            # Only the MCP agent lists the MCP server (it needs the mcp extra), so the other
            # scenarios never wait for a stdio server to start.
            *([scenario_mcp_tool_source(spec)] if spec.mcp_tools else []),
        ],
        tool_policies=SCENARIO_MCP_TOOL_POLICIES,
        # Starting the stdio MCP server can take seconds on a loaded machine; the scenarios need
        # its tools in the first model call.
        tool_source_listing_timeout=timedelta(seconds=60),
        interrupt_deadline=spec.interrupt_deadline,
        built_in_tools=frozenset(BuiltInTool(name) for name in spec.built_in_tools),
        plan_mode_enabled=spec.plan_mode_enabled,
    )
    options = replace(
        stepwise_agent_session_options(agent), model_spend_limit=spec.model_spend_limit
    )
    return stepwise_agent_session_flow(agent, flow_type=spec.flow_type, options=options)


def _stepwise_tool(spec: ScenarioAgentSpec, tool: ScenarioTool) -> Any:
    async def run(gate: Annotated[str, "A gate name, or empty"], context: ToolCallContext) -> str:
        try:
            return await run_scenario_tool(spec, tool.name, gate, context.idempotency_key)
        except ScenarioToolError as failure:
            raise ToolExecutionError(str(failure)) from failure

    return function_tool(
        effect=tool.effect,
        requires_approval=tool.requires_approval,
        name=tool.name,
        description=tool.description,
        outcome_check=scenario_outcome_check(spec, tool),
    )(run)


def _stepwise_confirm_tool(spec: ScenarioAgentSpec) -> Any:
    async def confirm(
        gate: Annotated[str, "Unused; every scenario tool takes it"], context: ToolCallContext
    ) -> str | ToolInputRequested:
        answers = [answer.answer for answer in context.input_answers]
        result = run_confirm_tool(spec, answers, context.idempotency_key)
        if isinstance(result, ScenarioQuestion):
            return scenario_input_requested(result)
        return result

    return function_tool(
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=False,
        name=CONFIRM_TOOL,
        description="Ask before shipping, then ship once.",
    )(confirm)


class ScenarioReportSource:
    """A Stepwise tool source offering ``report``, whose job the session polls as a task."""

    source_name = "scenario-report"

    def __init__(self, spec: ScenarioAgentSpec) -> None:
        self._spec = spec

    async def list_tools(self) -> list[ListedTool]:
        return [
            ListedTool(
                REPORT_TOOL,
                "Start a report job.",
                {
                    "type": "object",
                    "properties": {"gate": {"type": "string"}},
                    "additionalProperties": False,
                },
                framework_effect=ToolEffect.READ,
            )
        ]

    def deferred_tool_call(
        self, turn: AgentTurnContext, tool_call_id: str, arguments: str, listed_tool: ListedTool
    ) -> DeferredToolCall:
        policy = turn.resolve_tool_policy(listed_tool.name, listed_tool.framework_effect)
        return DeferredToolCall(tool_call_id, listed_tool.name, arguments, policy)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolTaskStarted:
        arguments = json.loads(call.tool_call.arguments or "{}")
        return await start_report_task(self._spec, call, str(arguments.get("gate") or ""))

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return poll_report_task(self._spec, poll)


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


STEPWISE_SCENARIO_RUNNER = ScenarioRunner(
    "stepwise",
    build_flow=build_stepwise_flow,
    features=frozenset(ScenarioFeature)
    if mcp_extra_installed()
    else frozenset(ScenarioFeature) - {ScenarioFeature.MCP_TOOLS},
    build_context_window_flow=build_stepwise_context_window_flow,
)
"""Stepwise under the shared suite: every optional feature (MCP tools with the mcp extra), and the
context window scenario."""
