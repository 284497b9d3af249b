"""The Pydantic AI runner of the shared scenario suite: the scenario agent as a ``pydantic_ai.Agent``.

The entry point ``pydantic-ai`` in the group ``dex_agents.scenario_runners`` points here. The
scripted model answers through Pydantic AI's own ``FunctionModel`` (streamed), so the agent's real
graph runs every call; the scenario tools are Pydantic AI tools whose effects come from
``dex_tool_metadata``; ``confirm`` asks with ``ToolInputRequested`` and ``report`` starts a task
that the runner's ``tool_task_poller`` polls. The MCP agent lists the scenario MCP server when it
is built and offers its tools as ``mcp_tool``s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    BuiltInTool,
    ToolEffect,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    require_deferred_tool_execution,
)
from dex_agents.testing.scenarios import (
    CONFIRM_TOOL,
    REPORT_POLL_INTERVAL_SECONDS,
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
    scenario_tool_policy,
    scripted_reply,
    start_report,
    stop_at_report_gate,
)
from pydantic_ai import Agent, RunContext, Tool, ToolFailed
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from dex_agents_pydantic_ai._context_window_flow import build_pydantic_ai_context_window_flow
from dex_agents_pydantic_ai._idempotency import deferred_tool_idempotency_key
from dex_agents_pydantic_ai._mcp_tools import mcp_tool
from dex_agents_pydantic_ai._runner import PydanticAIRunner
from dex_agents_pydantic_ai._scripted_model import scripted_function_model, turn_view
from dex_agents_pydantic_ai._tool_policies import dex_tool_metadata

__all__ = ["SCENARIO_RUNNER", "build_pydantic_ai_flow"]


def build_pydantic_ai_flow(spec: ScenarioAgentSpec) -> AgentSessionFlow:
    """The scenario agent as a Pydantic AI agent answered by a scripted ``FunctionModel``."""
    mcp = list_scenario_mcp_tools(spec) if spec.mcp_tools else None
    mcp_tools = [mcp_tool(mcp.source, tool) for tool in mcp.tools] if mcp else []
    agent: Agent[None, str] = Agent(
        name="scenario",
        instructions=spec.instructions,
        tools=[
            *(_scenario_tool(spec, tool) for tool in spec.tools),
            _confirm_tool(spec),
            _report_tool(spec),
            *mcp_tools,
        ],
    )
    runner = PydanticAIRunner(
        agent,
        # The turn's session settings reach the scripted model, as a real resolve_model would.
        resolve_model=lambda settings: _scenario_model(spec, settings),
        tool_task_poller=_ReportPoller(spec),
    )
    # Effects come from the tools' metadata; a tool's outcome check is declared in its ToolPolicy.
    checked = {
        tool.name: scenario_tool_policy(spec, tool) for tool in spec.tools if tool.outcome_check
    }
    options = AgentSessionOptions(
        tool_policies={**checked, **(mcp.tool_policies if mcp else {})},
        built_in_tools=frozenset(BuiltInTool(name) for name in spec.built_in_tools),
        interrupt_deadline=spec.interrupt_deadline,
        plan_mode_enabled=spec.plan_mode_enabled,
        model_spend_limit=spec.model_spend_limit,
    )
    return AgentSessionFlow(runner, flow_type=spec.flow_type, options=options)


def _scenario_model(spec: ScenarioAgentSpec, settings: Mapping[str, object]) -> FunctionModel:
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        view = turn_view(messages)
        reply = await scripted_reply(
            spec,
            view.user_text,
            model_call_index=view.model_call_index,
            tool_outputs=view.tool_outputs,
            session_settings=settings,
            user_texts=[
                part.content
                for message in messages
                if isinstance(message, ModelRequest)
                for part in message.parts
                if isinstance(part, UserPromptPart) and isinstance(part.content, str)
            ],
        )
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

    return scripted_function_model(respond, model_name="scenario-script")


def _scenario_tool(spec: ScenarioAgentSpec, tool: ScenarioTool) -> Tool[Any]:
    async def run(ctx: RunContext[Any], gate: str) -> str:
        """Run the scenario tool; ``gate`` is a gate name, or empty."""
        try:
            return await run_scenario_tool(
                spec, tool.name, gate, deferred_tool_idempotency_key(ctx)
            )
        except ScenarioToolError as failure:
            # Pydantic AI's own terminal failure; the tool Step records it as failed.
            raise ToolFailed(str(failure)) from failure

    return Tool(
        run,
        name=tool.name,
        description=tool.description,
        metadata=dex_tool_metadata(tool.effect, requires_approval=tool.requires_approval),
    )


def _confirm_tool(spec: ScenarioAgentSpec) -> Tool[Any]:
    async def confirm(ctx: RunContext[Any], gate: str) -> Any:
        """Ask before shipping, then ship once; ``gate`` is unused."""
        answers = [answer.answer for answer in require_deferred_tool_execution().input_answers]
        result = run_confirm_tool(spec, answers, deferred_tool_idempotency_key(ctx))
        if isinstance(result, ScenarioQuestion):
            return scenario_input_requested(result)
        return result

    return Tool(
        confirm,
        name=CONFIRM_TOOL,
        metadata=dex_tool_metadata(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
    )


def _report_tool(spec: ScenarioAgentSpec) -> Tool[Any]:
    async def report(ctx: RunContext[Any], gate: str = "") -> Any:
        """Start a report job."""
        call = require_deferred_tool_execution()
        if call.heartbeat_checkpoint is not None:
            # An earlier attempt started the job and saved its handle.
            return ToolTaskStarted(call.heartbeat_checkpoint, REPORT_POLL_INTERVAL_SECONDS)
        job_id = start_report(spec, deferred_tool_idempotency_key(ctx))
        await call.save_heartbeat_checkpoint(job_id)
        await stop_at_report_gate(spec, gate)
        return ToolTaskStarted(job_id, REPORT_POLL_INTERVAL_SECONDS)

    return Tool(report, name=REPORT_TOOL, metadata=dex_tool_metadata(ToolEffect.READ))


class _ReportPoller:
    """Polls the ``report`` tool's job."""

    def __init__(self, spec: ScenarioAgentSpec) -> None:
        self._spec = spec

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return poll_report_task(self._spec, poll)


SCENARIO_RUNNER = ScenarioRunner(
    "pydantic-ai",
    build_flow=build_pydantic_ai_flow,
    features=frozenset(
        {ScenarioFeature.TOOL_QUESTIONS, ScenarioFeature.TOOL_TASKS, ScenarioFeature.PLAN_MODE}
        | ({ScenarioFeature.MCP_TOOLS} if mcp_extra_installed() else set())
    ),
    build_context_window_flow=build_pydantic_ai_context_window_flow,
)
"""Pydantic AI under the shared suite: every optional feature (MCP tools with the mcp extra), and
the context window scenario."""
