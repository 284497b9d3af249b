"""The OpenAI Agents SDK runner of the shared scenario suite (entry point ``openai-agents``).

The scenario agent is an ``agents.Agent`` whose tools are ``function_tool`` functions; every model
call is answered by ``scripted_reply`` through the SDK's ``Model`` interface
(``ReplyFunctionModel``), chosen per turn by a ``RunConfig`` built from the turn's session
settings, so the SDK's real run loop runs every scenario. The MCP agent lists the scenario MCP
server when it is built and offers its tools as ``mcp_function_tool``s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agents import Agent, FunctionTool, RunConfig, function_tool
from agents.items import TResponseOutputItem
from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentSessionFlow,
    AgentSessionOptions,
    BuiltInTool,
    ToolEffect,
    ToolExecutionError,
    ToolInputRequested,
    ToolPolicy,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
)
from dex_agents.testing import ContextWindowModel
from dex_agents.testing.scenarios import (
    CONFIRM_TOOL,
    REPORT_TOOL,
    ScenarioAgentSpec,
    ScenarioFeature,
    ScenarioQuestion,
    ScenarioRunner,
    ScenarioTool,
    ScenarioToolError,
    list_scenario_mcp_tools,
    mcp_extra_installed,
    poll_report_task,
    run_confirm_tool,
    run_scenario_tool,
    scenario_input_requested,
    scenario_tool_policies,
    scripted_reply,
    start_report_task,
)

from dex_agents_openai_agents._deferred_tool_execution import get_current_deferred_tool_execution
from dex_agents_openai_agents._mcp_tools import mcp_function_tool
from dex_agents_openai_agents._runner import OpenAIAgentsRunner
from dex_agents_openai_agents.testing import (
    ModelCallInput,
    ReplyFunctionModel,
    assistant_message,
    function_call,
)

__all__ = ["SCENARIO_RUNNER", "build_context_window_flow", "build_scenario_flow"]

_CONTEXT_WINDOW_FLOW_TYPE = "ContextWindowAgent"
_CONTEXT_WINDOW_TOOL = "lookup_note"


def build_scenario_flow(spec: ScenarioAgentSpec) -> AgentSessionFlow:
    """The scenario agent as an OpenAI Agents SDK agent."""

    def run_config_for(settings: Mapping[str, object]) -> RunConfig:
        return RunConfig(model=_scenario_model(spec, settings), tracing_disabled=True)

    policies = scenario_tool_policies(spec)
    policies[CONFIRM_TOOL] = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
    policies[REPORT_TOOL] = ToolPolicy(ToolEffect.READ)
    mcp_tools: list[FunctionTool] = []
    if spec.mcp_tools:
        listed = list_scenario_mcp_tools(spec)
        mcp_tools = [mcp_function_tool(listed.source, tool) for tool in listed.tools]
        policies.update(listed.tool_policies)
    agent: Agent[Any] = Agent(
        name="scenario",
        instructions=spec.instructions,
        tools=[
            *(_scenario_tool(spec, tool) for tool in spec.tools),
            _confirm_tool(spec),
            _report_tool(spec),
            *mcp_tools,
        ],
    )
    runner = OpenAIAgentsRunner(
        agent, run_config=run_config_for, tool_task_pollers={REPORT_TOOL: _ReportPoller(spec)}
    )
    options = AgentSessionOptions(
        tool_policies=policies,
        interrupt_deadline=spec.interrupt_deadline,
        built_in_tools=frozenset(BuiltInTool(name) for name in spec.built_in_tools),
        plan_mode_enabled=spec.plan_mode_enabled,
        model_spend_limit=spec.model_spend_limit,
    )
    return AgentSessionFlow(runner, flow_type=spec.flow_type, options=options)


def _scenario_model(spec: ScenarioAgentSpec, settings: Mapping[str, object]) -> ReplyFunctionModel:
    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        index = 1 + call.responses_since_user()
        answer = await scripted_reply(
            spec,
            call.last_user_text(),
            model_call_index=index,
            tool_outputs=call.tool_outputs_since_user(),
            session_settings=settings,
            user_texts=call.user_texts(),
        )
        if answer.tool_calls:
            return [
                function_call(
                    tool_call.tool, dict(tool_call.arguments), call_id=f"call_{index}_{n}"
                )
                for n, tool_call in enumerate(answer.tool_calls)
            ]
        return [assistant_message(answer.text or "")]

    return ReplyFunctionModel(reply, model="scenario-model")


def _scenario_tool(spec: ScenarioAgentSpec, tool: ScenarioTool) -> FunctionTool:
    async def run(gate: str) -> str:
        key = get_current_deferred_tool_execution().idempotency_key
        try:
            return await run_scenario_tool(spec, tool.name, gate, key)
        except ScenarioToolError as failure:
            raise ToolExecutionError(str(failure)) from failure

    return function_tool(run, name_override=tool.name, description_override=tool.description)


def _confirm_tool(spec: ScenarioAgentSpec) -> FunctionTool:
    async def confirm(gate: str) -> str | ToolInputRequested:
        call = get_current_deferred_tool_execution()
        answers = [answer.answer for answer in call.input_answers]
        result = run_confirm_tool(spec, answers, call.idempotency_key)
        return scenario_input_requested(result) if isinstance(result, ScenarioQuestion) else result

    return function_tool(
        confirm,
        name_override=CONFIRM_TOOL,
        description_override="Ask before shipping, then ship once.",
    )


def _report_tool(spec: ScenarioAgentSpec) -> FunctionTool:
    async def report(gate: str) -> ToolTaskStarted:
        return await start_report_task(spec, get_current_deferred_tool_execution(), gate)

    return function_tool(report, name_override=REPORT_TOOL, description_override="Start a report.")


class _ReportPoller:
    """Polls the ``report`` tool's job."""

    def __init__(self, spec: ScenarioAgentSpec) -> None:
        self._spec = spec

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return poll_report_task(self._spec, poll)


def build_context_window_flow(
    model: ContextWindowModel, options: AgentSessionOptions
) -> AgentSessionFlow:
    """The context window scenario's agent: ``model`` answers through the SDK ``Model``."""

    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        if call.system_instructions == CONTEXT_SUMMARY_INSTRUCTIONS:
            return [assistant_message(model.summarize([]))]
        results = call.tool_outputs_since_user()
        answer = model.respond(call.last_user_text(), results, call.estimated_tokens())
        if answer.tool_argument is not None:
            return [
                function_call(
                    _CONTEXT_WINDOW_TOOL,
                    {"topic": answer.tool_argument},
                    call_id=f"call_{len(results) + 1}",
                )
            ]
        return [assistant_message(answer.text or "")]

    async def lookup_note(topic: str) -> str:
        return ContextWindowModel.run_tool(topic)

    agent: Agent[Any] = Agent(
        name="context-window",
        instructions="You answer questions about topics; look up notes when asked.",
        model=ReplyFunctionModel(reply, model="context-window-model"),
        tools=[
            function_tool(
                lookup_note,
                name_override=_CONTEXT_WINDOW_TOOL,
                description_override="Look up a short note.",
            )
        ],
    )
    runner = OpenAIAgentsRunner(agent, run_config=RunConfig(tracing_disabled=True))
    return AgentSessionFlow(runner, flow_type=_CONTEXT_WINDOW_FLOW_TYPE, options=options)


SCENARIO_RUNNER = ScenarioRunner(
    "openai-agents",
    build_flow=build_scenario_flow,
    features=frozenset(
        {ScenarioFeature.TOOL_QUESTIONS, ScenarioFeature.TOOL_TASKS, ScenarioFeature.PLAN_MODE}
        | ({ScenarioFeature.MCP_TOOLS} if mcp_extra_installed() else set())
    ),
    build_context_window_flow=build_context_window_flow,
)
"""The OpenAI Agents SDK under the shared suite: every optional feature (MCP tools with the mcp
extra), and the context window."""
