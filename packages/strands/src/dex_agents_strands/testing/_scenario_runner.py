"""The Strands runner of the shared scenario suite: the scenario agent as a ``strands.Agent``.

The entry point ``strands`` in the group ``dex_agents.scenario_runners`` points here. The scripted
model answers through a Strands ``Model`` (``ScriptedModel``, streamed like a provider); the
scenario tools are ``@tool`` functions whose effects come from the session's tool policies;
``confirm`` asks with a Strands interrupt (``tool_context.interrupt``), whose response is the
person's answer, and ``report`` starts a task that the runner's poller for it polls. The MCP agent
lists the scenario MCP server when it is built and offers its tools as ``mcp_tool``s. What every
runner builds alike comes from ``ScenarioRunnerBase``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
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
    ScenarioAgentSpec,
    ScenarioMcpTools,
    ScenarioModelInput,
    ScenarioQuestion,
    ScenarioRunnerBase,
    ScenarioTool,
    confirm_by_asking,
    run_scenario_tool_call,
    scripted_reply,
    start_report_task,
)
from strands import ToolContext, tool
from strands.types.content import Message
from strands.types.tools import AgentTool, ToolResult

from dex_agents_strands._flow import strands_session_flow
from dex_agents_strands._mcp_tools import mcp_tool
from dex_agents_strands._runner import StrandsRunner
from dex_agents_strands._tool_step import dex_tool_result
from dex_agents_strands.testing._reference_agent import reference_agent
from dex_agents_strands.testing._scripted_model import (
    ModelCall,
    ReplyFunction,
    ScriptedModel,
    text_reply,
    tool_use_reply,
)

__all__ = ["SCENARIO_RUNNER", "StrandsScenarioRunner"]

_SCENARIO_MODEL_ID: Final = "scenario-script"
_RESULT_PREFIX: Final = "Result of "


class StrandsScenarioRunner(ScenarioRunnerBase[AgentTool]):
    """The scenario agent as a Strands agent answered by a ``ScriptedModel``."""

    name = "strands"

    def scenario_tool(self, spec: ScenarioAgentSpec, scenario_tool: ScenarioTool) -> AgentTool:
        async def run(gate: str) -> str:
            """Run the scenario tool.

            Args:
                gate: A gate name, or empty.
            """
            key = require_deferred_tool_execution().idempotency_key
            return await run_scenario_tool_call(spec, scenario_tool, gate, key)

        return tool(name=scenario_tool.name, description=scenario_tool.description)(run)

    def confirm_tool(self, spec: ScenarioAgentSpec) -> AgentTool:
        async def confirm(gate: str, tool_context: ToolContext) -> str:
            """Ask before shipping, then ship once.

            Args:
                gate: Unused.
            """
            key = require_deferred_tool_execution().idempotency_key

            def ask(question: ScenarioQuestion, number: int) -> str | None:
                # Strands' own question: the first run stops here, the next gets the answer back.
                return str(tool_context.interrupt(f"{CONFIRM_TOOL}-{number}", question.payload()))

            return confirm_by_asking(spec, key, ask)

        return tool(name=CONFIRM_TOOL, context=True)(confirm)

    def report_tool(self, spec: ScenarioAgentSpec) -> AgentTool:
        async def report(gate: str = "") -> ToolResult:
            """Start a report job.

            Args:
                gate: A gate name, or empty.
            """
            started = await start_report_task(spec, require_deferred_tool_execution(), gate)
            return dex_tool_result(started)

        return tool(name=REPORT_TOOL)(report)

    def mcp_tool(self, mcp: ScenarioMcpTools, listed: ListedTool) -> AgentTool:
        return mcp_tool(mcp.source, listed)

    def build_runner(
        self, spec: ScenarioAgentSpec, tools: Sequence[AgentTool]
    ) -> AgentFrameworkRunner[Any]:
        agent = reference_agent(
            _scenario_reply(spec, {}),
            tools,
            system_prompt=spec.instructions,
            model_id=_SCENARIO_MODEL_ID,
            name="scenario",
        )
        return StrandsRunner(
            agent,
            # The turn's session settings reach the scripted model, as a real resolve_model would.
            resolve_model=lambda settings: ScriptedModel(
                _scenario_reply(spec, settings), model_id=_SCENARIO_MODEL_ID
            ),
            tool_task_pollers=self.tool_task_pollers(spec),
        )

    def build_context_window_flow(
        self, model: ContextWindowModel, options: AgentSessionOptions
    ) -> AgentSessionFlow:
        """The long-session scenario's agent on Strands, its ``ScriptedModel`` asking ``model``."""

        def reply(call: ModelCall) -> Message:
            if call.system_prompt == CONTEXT_SUMMARY_INSTRUCTIONS:
                return text_reply(model.summarize(_summarized_results(call)))
            answer = model.respond(call.last_user_text(), call.tool_outputs(), call.input_tokens())
            if answer.tool_argument is not None:
                return tool_use_reply(
                    f"note-{call.model_call_index()}",
                    ContextWindowModel.tool_name,
                    {"topic": answer.tool_argument},
                )
            return text_reply(answer.text or "")

        def lookup_note(topic: str) -> str:
            """Look up a note.

            Args:
                topic: The topic.
            """
            return ContextWindowModel.run_tool(topic)

        agent = reference_agent(
            reply,
            [
                tool(
                    name=ContextWindowModel.tool_name,
                    description=ContextWindowModel.tool_description,
                )(lookup_note)
            ],
            system_prompt=ContextWindowModel.instructions,
            model_id="context-window-script",
        )
        policies: dict[str, Any] = {
            **options.tool_policies,
            ContextWindowModel.tool_name: ToolPolicy(ToolEffect.READ),
        }
        return strands_session_flow(
            agent,
            ContextWindowModel.flow_type,
            dataclasses.replace(options, tool_policies=policies),
        )


def _scenario_reply(spec: ScenarioAgentSpec, settings: Mapping[str, object]) -> ReplyFunction:
    async def reply(call: ModelCall) -> Message:
        index = call.model_call_index()
        turn = ScenarioModelInput(call.user_texts(), index, call.tool_outputs())
        answer = await scripted_reply(spec, turn, settings)
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


def _summarized_results(call: ModelCall) -> list[str]:
    """The tool results the summary prompt shows (the core renders ``Result of ...: <output>``)."""
    return [
        line.split(": ", 1)[1]
        for text in call.user_texts()
        for line in text.splitlines()
        if line.startswith(_RESULT_PREFIX) and ": " in line
    ]


SCENARIO_RUNNER = StrandsScenarioRunner().scenario_runner()
"""Strands under the shared suite: every optional feature (MCP tools with the mcp extra), and the
context window scenario."""
