"""The Claude Agent SDK runner of the shared scenario suite.

The scenario agent's tools are ``claude_agent_sdk.tool`` functions, ``report`` comes from a tool
source, the MCP agent lists the scenario MCP server when it is built and offers its tools as
``mcp_sdk_tool``s (its read runs inside the harness, its write in a tool Step), and the scripted
model answers through a :class:`FakeAnthropicServer` that the real Claude Code CLI reaches through
the relay, so the real agent loop runs. One fake server serves every scenario agent of a Worker
process (one route each), started on the first model call. What every runner builds alike comes
from ``ScenarioRunnerBase``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Final

from claude_agent_sdk import SdkMcpTool, tool
from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentFrameworkRunner,
    AgentSessionFlow,
    AgentSessionOptions,
    CompactionPolicy,
    ListedTool,
    current_deferred_tool_execution,
    require_deferred_tool_execution,
)
from dex_agents.testing import ContextWindowModel
from dex_agents.testing.scenarios import (
    CONFIRM_TOOL,
    ScenarioAgentSpec,
    ScenarioFeature,
    ScenarioMcpTools,
    ScenarioReportSource,
    ScenarioRunnerBase,
    ScenarioTool,
    confirm_tool_outcome,
    current_scenario_session,
    run_scenario_tool_call,
    scenario_session,
    scripted_reply,
)

from dex_agents_claude_agent_sdk._mcp_tools import mcp_sdk_tool
from dex_agents_claude_agent_sdk.testing._reference_agent import (
    reference_runner,
    shared_fake_server,
)
from dex_agents_claude_agent_sdk.testing._scripted_model import (
    FakeModelReply,
    FakeModelRequest,
    FakeModelResponder,
    FakeToolCall,
)

__all__ = ["SCENARIO_MODEL", "SCENARIO_RUNNER", "ClaudeAgentSdkScenarioRunner"]

SCENARIO_MODEL: Final = "claude-scenario-model"
"""The model name a turn without a ``model`` session setting asks for."""
_GATE_SCHEMA: Final = {
    "type": "object",
    "properties": {"gate": {"type": "string", "description": "A gate name, or empty"}},
    "required": ["gate"],
}


def _upstream(name: str, respond: FakeModelResponder) -> Any:
    async def base_url() -> str:
        # Called in RunModel: the fake server answers on a task of its own, so a route per
        # session carries the session the scripted model keeps its gates and log for.
        session = current_scenario_session()
        if session is None:
            return (await shared_fake_server()).route(name, respond)
        return (await shared_fake_server()).route(
            f"{name}@{session}", _in_session(session, respond)
        )

    return base_url


def _in_session(session: str, respond: FakeModelResponder) -> FakeModelResponder:
    async def respond_in_session(request: FakeModelRequest) -> FakeModelReply:
        with scenario_session(session):
            reply = respond(request)
            return await reply if inspect.isawaitable(reply) else reply

    return respond_in_session


def _model_setting(settings: Mapping[str, object]) -> str | None:
    model = settings.get("model")
    return str(model) if model is not None else None


class ClaudeAgentSdkScenarioRunner(ScenarioRunnerBase[SdkMcpTool[Any]]):
    """The scenario agent as a Claude Agent SDK agent whose model is the scripted one."""

    name = "claude-agent-sdk"
    # Listed one by one (a feature added later is not claimed). The MCP SDK is a dependency of
    # this package (claude-agent-sdk's own), so the MCP scenarios always run.
    features: ClassVar[frozenset[ScenarioFeature] | None] = frozenset(
        {
            ScenarioFeature.TOOL_QUESTIONS,
            ScenarioFeature.TOOL_TASKS,
            ScenarioFeature.PLAN_MODE,
            ScenarioFeature.MCP_TOOLS,
        }
    )
    reads_run_in_model_step = True
    report_classifies_itself = True  # its tool source does
    # Every RunModel starts the CLI (over a second on a loaded machine), so the default suite's
    # guard runs 18 turns, not 150: past its 2,000-token window the session makes a summary about
    # every 3 turns from turn 8 (4 in all, 3 needed), and retention (a short guard's limit 20 and
    # chunks of 4) starts at turn 12 and deletes a chunk about every 2 turns, so 18 turns show 4
    # deletions (3 needed) and state bounded across them. The 2,000-turn session
    # (DEX_AGENTS_LONG_TESTS=1) runs in full.
    context_window_guard_turns = 18

    def scenario_tool(self, spec: ScenarioAgentSpec, tool_spec: ScenarioTool) -> SdkMcpTool[Any]:
        async def run(arguments: dict[str, Any]) -> dict[str, Any]:
            call = current_deferred_tool_execution()
            # A read runs inside the harness, where no tool Step (and so no key) exists.
            key = call.idempotency_key if call is not None else "inline"
            output = await run_scenario_tool_call(spec, tool_spec, arguments["gate"], key)
            return {"content": [{"type": "text", "text": output}]}

        return tool(tool_spec.name, tool_spec.description, _GATE_SCHEMA)(run)

    def confirm_tool(self, spec: ScenarioAgentSpec) -> SdkMcpTool[Any]:
        async def confirm(arguments: dict[str, Any]) -> Any:  # content, or a question in its Step
            result = confirm_tool_outcome(spec, require_deferred_tool_execution())
            if isinstance(result, str):
                return {"content": [{"type": "text", "text": result}]}
            return result

        return tool(CONFIRM_TOOL, "Ask before shipping, then ship once.", _GATE_SCHEMA)(confirm)

    def report_tool(self, spec: ScenarioAgentSpec) -> None:
        """None: ``report`` comes from a ``ScenarioReportSource``, whose calls run in tool Steps."""
        return None

    def mcp_tool(self, mcp: ScenarioMcpTools, listed: ListedTool) -> SdkMcpTool[Any]:
        return mcp_sdk_tool(mcp.source, listed)

    def build_runner(
        self, spec: ScenarioAgentSpec, tools: Sequence[SdkMcpTool[Any]]
    ) -> AgentFrameworkRunner[Any]:
        async def respond(request: FakeModelRequest) -> FakeModelReply:
            settings = {} if request.model == SCENARIO_MODEL else {"model": request.model}
            reply = await scripted_reply(spec, request, settings)
            calls = [FakeToolCall(call.tool, call.arguments) for call in reply.tool_calls]
            return FakeModelReply(text=reply.text, tool_calls=calls)

        return reference_runner(
            tools=tools,
            instructions=spec.instructions,
            tool_sources=[ScenarioReportSource(spec)],
            model=SCENARIO_MODEL,
            resolve_model=_model_setting,
            upstream_base_url=_upstream(spec.flow_type, respond),
        )

    def build_context_window_flow(
        self, model: ContextWindowModel, options: AgentSessionOptions
    ) -> AgentSessionFlow:
        """The context window scenario's agent, its model answering through the fake server."""

        @tool(ContextWindowModel.tool_name, ContextWindowModel.tool_description, {"topic": str})
        async def lookup_note(arguments: dict[str, Any]) -> dict[str, Any]:
            return {
                "content": [
                    {"type": "text", "text": ContextWindowModel.run_tool(arguments["topic"])}
                ]
            }

        def respond(request: FakeModelRequest) -> FakeModelReply:
            if CONTEXT_SUMMARY_INSTRUCTIONS in request.system_text:
                return FakeModelReply(text=model.summarize(request.tool_outputs))
            reply = model.respond(
                request.last_user_text, request.tool_outputs, request.input_tokens
            )
            if reply.tool_argument is not None:
                call = FakeToolCall(ContextWindowModel.tool_name, {"topic": reply.tool_argument})
                return FakeModelReply(tool_calls=(call,))
            return FakeModelReply(text=reply.text)

        runner = reference_runner(
            tools=[lookup_note],
            instructions=ContextWindowModel.instructions,
            model=SCENARIO_MODEL,
            upstream_base_url=_upstream("context-window", respond),
        )
        assert options.compaction is not None
        policy: CompactionPolicy = options.compaction
        return AgentSessionFlow(
            runner,
            flow_type=ContextWindowModel.flow_type,
            options=replace(options, compaction=policy),
        )


SCENARIO_RUNNER = ClaudeAgentSdkScenarioRunner().scenario_runner()
"""The Claude Agent SDK under the shared suite: tool questions, tool tasks, plan mode, MCP tools,
and the long session."""
