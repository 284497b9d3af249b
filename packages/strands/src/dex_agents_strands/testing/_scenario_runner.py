"""The Strands runner of the shared scenario suite: the scenario agent as a ``strands.Agent``.

The entry point ``strands`` in the group ``dex_agents.scenario_runners`` points here. The scripted
model answers through a Strands ``Model`` (``ScriptedModel``, streamed like a provider); the
scenario tools are ``@tool`` functions whose effects come from the session's tool policies;
``confirm`` asks with a Strands interrupt (``tool_context.interrupt``), whose response is the
person's answer, and ``report`` starts a task that the runner's poller for it polls. The MCP agent
lists the scenario MCP server when it is built and offers its tools as ``mcp_tool``s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final

from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentSessionFlow,
    AgentSessionOptions,
    BuiltInTool,
    ToolEffect,
    ToolExecutionError,
    ToolPolicy,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    require_deferred_tool_execution,
)
from dex_agents.testing import ContextWindowModel
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
    scenario_tool_policies,
    scripted_reply,
    start_report,
    stop_at_report_gate,
)
from strands import ToolContext, tool
from strands.types.content import Message
from strands.types.tools import AgentTool, ToolResult

from dex_agents_strands._flow import strands_session_flow
from dex_agents_strands._mcp_tools import mcp_tool
from dex_agents_strands._tool_step import dex_tool_result
from dex_agents_strands.testing._reference_agent import reference_agent
from dex_agents_strands.testing._scripted_model import (
    ModelCall,
    ReplyFunction,
    ScriptedModel,
    text_reply,
    tool_use_reply,
)

__all__ = ["SCENARIO_RUNNER", "build_strands_context_window_flow", "build_strands_flow"]

_CONTEXT_WINDOW_TOOL: Final = "lookup_note"
_SCENARIO_MODEL_ID: Final = "scenario-script"
_RESULT_PREFIX: Final = "Result of "


def build_strands_flow(spec: ScenarioAgentSpec) -> AgentSessionFlow:
    """The scenario agent as a Strands agent answered by a ``ScriptedModel``."""
    mcp = list_scenario_mcp_tools(spec) if spec.mcp_tools else None
    tools: list[Any] = [
        *(_scenario_tool(spec, scenario_tool) for scenario_tool in spec.tools),
        _confirm_tool(spec),
        _report_tool(spec),
        *([mcp_tool(mcp.source, listed) for listed in mcp.tools] if mcp else []),
    ]
    agent = reference_agent(
        _scenario_reply(spec, {}),
        tools,
        system_prompt=spec.instructions,
        model_id=_SCENARIO_MODEL_ID,
        name="scenario",
    )
    policies = scenario_tool_policies(spec)
    policies[CONFIRM_TOOL] = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
    policies[REPORT_TOOL] = ToolPolicy(ToolEffect.READ)
    options = AgentSessionOptions(
        tool_policies={**policies, **(mcp.tool_policies if mcp else {})},
        built_in_tools=frozenset(BuiltInTool(name) for name in spec.built_in_tools),
        interrupt_deadline=spec.interrupt_deadline,
        plan_mode_enabled=spec.plan_mode_enabled,
        model_spend_limit=spec.model_spend_limit,
    )
    return strands_session_flow(
        agent,
        spec.flow_type,
        options,
        # The turn's session settings reach the scripted model, as a real resolve_model would.
        resolve_model=lambda settings: ScriptedModel(
            _scenario_reply(spec, settings), model_id=_SCENARIO_MODEL_ID
        ),
        tool_task_pollers={REPORT_TOOL: _ReportPoller(spec)},
    )


def _scenario_reply(spec: ScenarioAgentSpec, settings: Mapping[str, object]) -> ReplyFunction:
    async def reply(call: ModelCall) -> Message:
        index = call.model_call_index()
        answer = await scripted_reply(
            spec,
            call.last_user_text(),
            model_call_index=index,
            tool_outputs=call.tool_outputs(),
            session_settings=settings,
            user_texts=call.user_texts(),
        )
        if not answer.tool_calls:
            return text_reply(answer.text or "")
        return {
            "role": "assistant",
            "content": [
                block
                for position, scenario_call in enumerate(answer.tool_calls)
                for block in tool_use_reply(
                    f"call-{index}-{position}", scenario_call.tool, dict(scenario_call.arguments)
                )["content"]
            ],
        }

    return reply


def _scenario_tool(spec: ScenarioAgentSpec, scenario_tool: ScenarioTool) -> AgentTool:
    async def run(gate: str) -> str:
        """Run the scenario tool.

        Args:
            gate: A gate name, or empty.
        """
        key = require_deferred_tool_execution().idempotency_key
        try:
            return await run_scenario_tool(spec, scenario_tool.name, gate, key)
        except ScenarioToolError as failure:
            raise ToolExecutionError(str(failure)) from failure

    return tool(name=scenario_tool.name, description=scenario_tool.description)(run)


def _confirm_tool(spec: ScenarioAgentSpec) -> AgentTool:
    async def confirm(gate: str, tool_context: ToolContext) -> str:
        """Ask before shipping, then ship once.

        Args:
            gate: Unused.
        """
        key = require_deferred_tool_execution().idempotency_key
        answers: list[str | None] = []
        while isinstance(result := run_confirm_tool(spec, answers, key), ScenarioQuestion):
            # Strands' own question: the first run stops here, the next gets the answer back.
            answers.append(
                tool_context.interrupt(
                    f"{CONFIRM_TOOL}-{len(answers) + 1}",
                    reason={
                        "question": result.question,
                        "choices": list(result.choices),
                        "allows_free_text": result.allows_free_text,
                    },
                )
            )
        return result

    return tool(name=CONFIRM_TOOL, context=True)(confirm)


def _report_tool(spec: ScenarioAgentSpec) -> AgentTool:
    async def report(gate: str = "") -> ToolResult:
        """Start a report job.

        Args:
            gate: A gate name, or empty.
        """
        call = require_deferred_tool_execution()
        if call.heartbeat_checkpoint is not None:
            # An earlier attempt started the job and saved its handle.
            job_id = call.heartbeat_checkpoint
        else:
            job_id = start_report(spec, call.idempotency_key)
            await call.save_heartbeat_checkpoint(job_id)
            await stop_at_report_gate(spec, gate)
        return dex_tool_result(ToolTaskStarted(job_id, REPORT_POLL_INTERVAL_SECONDS))

    return tool(name=REPORT_TOOL)(report)


class _ReportPoller:
    """Polls the ``report`` tool's job."""

    def __init__(self, spec: ScenarioAgentSpec) -> None:
        self._spec = spec

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return poll_report_task(self._spec, poll)


def build_strands_context_window_flow(
    model: ContextWindowModel, options: AgentSessionOptions
) -> AgentSessionFlow:
    """The long-session scenario's agent on Strands, its ``ScriptedModel`` asking ``model``."""

    def reply(call: ModelCall) -> Message:
        if call.system_prompt == CONTEXT_SUMMARY_INSTRUCTIONS:
            return text_reply(model.summarize(_summarized_results(call)))
        answer = model.respond(call.last_user_text(), call.tool_outputs(), call.input_tokens())
        if answer.tool_argument is not None:
            return tool_use_reply(
                f"note-{call.model_call_index()}",
                _CONTEXT_WINDOW_TOOL,
                {"topic": answer.tool_argument},
            )
        return text_reply(answer.text or "")

    def lookup_note(topic: str) -> str:
        """Look up a short note about a topic.

        Args:
            topic: The topic.
        """
        return ContextWindowModel.run_tool(topic)

    agent = reference_agent(
        reply,
        [tool(name=_CONTEXT_WINDOW_TOOL)(lookup_note)],
        system_prompt="You answer questions about topics; look up notes when asked.",
        model_id="context-window-script",
    )
    policies: dict[str, Any] = {
        **options.tool_policies,
        _CONTEXT_WINDOW_TOOL: ToolPolicy(ToolEffect.READ),
    }
    return strands_session_flow(
        agent, "ContextWindowAgent", dataclasses.replace(options, tool_policies=policies)
    )


def _summarized_results(call: ModelCall) -> list[str]:
    """The tool results the summary prompt shows (the core renders ``Result of ...: <output>``)."""
    return [
        line.split(": ", 1)[1]
        for text in call.user_texts()
        for line in text.splitlines()
        if line.startswith(_RESULT_PREFIX) and ": " in line
    ]


SCENARIO_RUNNER = ScenarioRunner(
    "strands",
    build_flow=build_strands_flow,
    features=frozenset(
        {ScenarioFeature.TOOL_QUESTIONS, ScenarioFeature.TOOL_TASKS, ScenarioFeature.PLAN_MODE}
        | ({ScenarioFeature.MCP_TOOLS} if mcp_extra_installed() else set())
    ),
    build_context_window_flow=build_strands_context_window_flow,
)
"""Strands under the shared suite: every optional feature (MCP tools with the mcp extra), and the
context window scenario."""
