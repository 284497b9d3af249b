"""The Pydantic AI runner of the shared scenario suite: the scenario agent as a ``pydantic_ai.Agent``.

The entry point ``pydantic-ai`` in the group ``dex_agents.scenario_runners`` points to
``dex_agents_pydantic_ai.testing:SCENARIO_RUNNER``. The scripted model answers through Pydantic
AI's own ``FunctionModel`` (streamed), so the agent's real graph runs every call; the scenario
tools are Pydantic AI tools whose effects come from ``dex_tool_metadata`` (no policy names them);
``confirm`` asks with ``ToolInputRequested`` and ``report`` starts a task that the runner's
``tool_task_poller`` polls. The MCP agent lists the scenario MCP server when it is built and offers
its tools as ``mcp_tool``s. What every runner builds alike comes from ``ScenarioRunnerBase``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dex_agents import (
    AgentFrameworkRunner,
    AgentSessionFlow,
    AgentSessionOptions,
    ListedTool,
    ToolEffect,
    ToolPolicy,
    require_deferred_tool_execution,
)
from dex_agents.testing import ContextWindowModel
from dex_agents.testing.scenarios import (
    CONFIRM_TOOL,
    REPORT_TOOL,
    ReportTaskPoller,
    ScenarioAgentSpec,
    ScenarioMcpTools,
    ScenarioRunnerBase,
    ScenarioTool,
    confirm_tool_outcome,
    model_streams,
    run_scenario_tool_call,
    scenario_tool_policy,
    scripted_reply,
    start_report_task,
)
from pydantic_ai import RunContext, Tool, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dex_agents_pydantic_ai._idempotency import deferred_tool_idempotency_key
from dex_agents_pydantic_ai._mcp_tools import mcp_tool
from dex_agents_pydantic_ai._runner import PydanticAIRunner
from dex_agents_pydantic_ai._tool_policies import dex_tool_metadata
from dex_agents_pydantic_ai.testing._context_window_flow import (
    build_pydantic_ai_context_window_flow,
)
from dex_agents_pydantic_ai.testing._reference_agent import reference_agent
from dex_agents_pydantic_ai.testing._scripted_model import (
    Script,
    scripted_function_model,
    turn_view,
)

__all__ = ["SCENARIO_RUNNER", "PydanticAIScenarioRunner"]

_MODEL_NAME = "scenario-script"


class PydanticAIScenarioRunner(ScenarioRunnerBase[Tool[Any]]):
    """The scenario agent as a Pydantic AI agent answered by a scripted ``FunctionModel``."""

    name = "pydantic-ai"

    def scenario_tool(self, spec: ScenarioAgentSpec, tool: ScenarioTool) -> Tool[Any]:
        async def run(ctx: RunContext[Any], gate: str) -> str:
            """Run the scenario tool; ``gate`` is a gate name, or empty."""
            key = deferred_tool_idempotency_key(ctx)
            # Pydantic AI's own terminal failure; the tool Step records it as failed.
            return await run_scenario_tool_call(spec, tool, gate, key, failure=ToolFailed)

        metadata = dex_tool_metadata(tool.effect, requires_approval=tool.requires_approval)
        return Tool(run, name=tool.name, description=tool.description, metadata=metadata)

    def confirm_tool(self, spec: ScenarioAgentSpec) -> Tool[Any]:
        async def confirm(ctx: RunContext[Any], gate: str) -> Any:
            """Ask before shipping, then ship once; ``gate`` is unused."""
            deferred_tool_idempotency_key(ctx)  # checks that ctx is this Step's call
            return confirm_tool_outcome(spec, require_deferred_tool_execution())

        metadata = dex_tool_metadata(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
        return Tool(confirm, name=CONFIRM_TOOL, metadata=metadata)

    def report_tool(self, spec: ScenarioAgentSpec) -> Tool[Any]:
        async def report(ctx: RunContext[Any], gate: str = "") -> Any:
            """Start a report job."""
            deferred_tool_idempotency_key(ctx)  # checks that ctx is this Step's call
            return await start_report_task(spec, require_deferred_tool_execution(), gate)

        return Tool(report, name=REPORT_TOOL, metadata=dex_tool_metadata(ToolEffect.READ))

    def mcp_tool(self, mcp: ScenarioMcpTools, listed: ListedTool) -> Tool[Any]:
        return mcp_tool(mcp.source, listed)

    def tool_policies(self, spec: ScenarioAgentSpec) -> dict[str, ToolPolicy]:
        """Only the outcome checks: each tool's ``dex_tool_metadata`` gives its effect, and a
        check is declared in its ToolPolicy."""
        return {
            tool.name: scenario_tool_policy(spec, tool) for tool in spec.tools if tool.outcome_check
        }

    def build_runner(
        self, spec: ScenarioAgentSpec, tools: Sequence[Tool[Any]]
    ) -> AgentFrameworkRunner[Any]:
        agent = reference_agent(
            _scenario_script(spec, {}),
            tools,
            name="scenario",
            instructions=spec.instructions,
            model_name=_MODEL_NAME,
        )
        return PydanticAIRunner(
            agent,
            # The turn's session settings reach the scripted model, as a real resolve_model would.
            resolve_model=lambda settings: _scenario_model(spec, settings),
            tool_task_poller=ReportTaskPoller(spec),
        )

    def build_context_window_flow(
        self, model: ContextWindowModel, options: AgentSessionOptions
    ) -> AgentSessionFlow:
        return build_pydantic_ai_context_window_flow(model, options)


def _scenario_model(spec: ScenarioAgentSpec, settings: Mapping[str, object]) -> FunctionModel:
    script = _scenario_script(spec, settings)
    return scripted_function_model(script, model_name=_MODEL_NAME, stream=model_streams(settings))


def _scenario_script(spec: ScenarioAgentSpec, settings: Mapping[str, object]) -> Script:
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        view = turn_view(messages)
        reply = await scripted_reply(spec, view, settings)
        if not reply.tool_calls:
            return ModelResponse(parts=[TextPart(reply.text or "")])
        return ModelResponse(
            parts=[
                ToolCallPart(
                    call.tool,
                    dict(call.arguments),
                    tool_call_id=f"call-{view.model_call_index}-{index}",
                )
                for index, call in enumerate(reply.tool_calls)
            ]
        )

    return respond


SCENARIO_RUNNER = PydanticAIScenarioRunner().scenario_runner()
"""Pydantic AI under the shared suite: every optional feature (MCP tools with the mcp extra), and
the context window scenario."""
