"""The OpenAI Agents SDK runner of the shared scenario suite (entry point ``openai-agents``).

The scenario agent is an ``agents.Agent`` whose tools are ``function_tool`` functions; every model
call is answered by ``scripted_reply`` through the SDK's ``Model`` interface
(``ReplyFunctionModel``), chosen per turn by a ``RunConfig`` built from the turn's session
settings, so the SDK's real run loop runs every scenario. The MCP agent lists the scenario MCP
server when it is built and offers its tools as ``mcp_function_tool``s. What every runner builds
alike comes from ``ScenarioRunnerBase``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agents import FunctionTool, RunConfig, function_tool
from agents.items import TResponseOutputItem
from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentFrameworkRunner,
    AgentSessionFlow,
    AgentSessionOptions,
    ListedTool,
    ToolInputRequested,
    ToolTaskStarted,
)
from dex_agents.testing import ContextWindowModel
from dex_agents.testing.scenarios import (
    CONFIRM_TOOL,
    REPORT_TOOL,
    ScenarioAgentSpec,
    ScenarioMcpTools,
    ScenarioModelInput,
    ScenarioRunnerBase,
    ScenarioTool,
    confirm_tool_outcome,
    run_scenario_tool_call,
    scripted_reply,
    start_report_task,
)

from dex_agents_openai_agents._deferred_tool_execution import get_current_deferred_tool_execution
from dex_agents_openai_agents._mcp_tools import mcp_function_tool
from dex_agents_openai_agents._runner import OpenAIAgentsRunner
from dex_agents_openai_agents.testing._reference_agent import reference_agent
from dex_agents_openai_agents.testing._scripted_model import (
    ModelCallInput,
    ReplyFunctionModel,
    assistant_message,
    function_call,
)

__all__ = ["SCENARIO_RUNNER", "OpenAIAgentsScenarioRunner"]


class OpenAIAgentsScenarioRunner(ScenarioRunnerBase[FunctionTool]):
    """The scenario agent as an OpenAI Agents SDK agent answered by a ``ReplyFunctionModel``."""

    name = "openai-agents"

    def scenario_tool(self, spec: ScenarioAgentSpec, tool: ScenarioTool) -> FunctionTool:
        async def run(gate: str) -> str:
            key = get_current_deferred_tool_execution().idempotency_key
            return await run_scenario_tool_call(spec, tool, gate, key)

        return function_tool(run, name_override=tool.name, description_override=tool.description)

    def confirm_tool(self, spec: ScenarioAgentSpec) -> FunctionTool:
        async def confirm(gate: str) -> str | ToolInputRequested:
            return confirm_tool_outcome(spec, get_current_deferred_tool_execution())

        return function_tool(
            confirm,
            name_override=CONFIRM_TOOL,
            description_override="Ask before shipping, then ship once.",
        )

    def report_tool(self, spec: ScenarioAgentSpec) -> FunctionTool:
        async def report(gate: str) -> ToolTaskStarted:
            return await start_report_task(spec, get_current_deferred_tool_execution(), gate)

        return function_tool(
            report, name_override=REPORT_TOOL, description_override="Start a report."
        )

    def mcp_tool(self, mcp: ScenarioMcpTools, listed: ListedTool) -> FunctionTool:
        return mcp_function_tool(mcp.source, listed)

    def build_runner(
        self, spec: ScenarioAgentSpec, tools: Sequence[FunctionTool]
    ) -> AgentFrameworkRunner[Any]:
        def run_config_for(settings: Mapping[str, object]) -> RunConfig:
            return RunConfig(model=_scenario_model(spec, settings), tracing_disabled=True)

        # No model of its own: the run config picks it from the turn's session settings.
        agent = reference_agent(None, tools, name="scenario", instructions=spec.instructions)
        return OpenAIAgentsRunner(
            agent,
            run_config=run_config_for,
            tool_task_pollers=self.tool_task_pollers(spec),
        )

    def build_context_window_flow(
        self, model: ContextWindowModel, options: AgentSessionOptions
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
                        ContextWindowModel.tool_name,
                        {"topic": answer.tool_argument},
                        call_id=f"call_{len(results) + 1}",
                    )
                ]
            return [assistant_message(answer.text or "")]

        async def lookup_note(topic: str) -> str:
            return ContextWindowModel.run_tool(topic)

        note_tool = function_tool(
            lookup_note,
            name_override=ContextWindowModel.tool_name,
            description_override=ContextWindowModel.tool_description,
        )
        agent = reference_agent(
            reply,
            [note_tool],
            name="context-window",
            instructions=ContextWindowModel.instructions,
            model_name="context-window-model",
        )
        runner = OpenAIAgentsRunner(agent, run_config=RunConfig(tracing_disabled=True))
        return AgentSessionFlow(runner, flow_type=ContextWindowModel.flow_type, options=options)


def _scenario_model(spec: ScenarioAgentSpec, settings: Mapping[str, object]) -> ReplyFunctionModel:
    async def reply(call: ModelCallInput) -> Sequence[TResponseOutputItem]:
        index = 1 + call.responses_since_user()
        turn = ScenarioModelInput(call.user_texts(), index, call.tool_outputs_since_user())
        answer = await scripted_reply(spec, turn, settings)
        if answer.tool_calls:
            return [
                function_call(
                    tool_call.tool, dict(tool_call.arguments), call_id=f"call_{index}_{n}"
                )
                for n, tool_call in enumerate(answer.tool_calls)
            ]
        return [assistant_message(answer.text or "")]

    return ReplyFunctionModel(reply, model="scenario-model")


SCENARIO_RUNNER = OpenAIAgentsScenarioRunner().scenario_runner()
"""The OpenAI Agents SDK under the shared suite: every optional feature (MCP tools with the mcp
extra), and the context window."""
