"""The LangGraph runner of the shared scenario suite: the scenario agent as a LangGraph graph.

The entry point ``langgraph`` in the group ``dex_agents.scenario_runners`` points to
``dex_agents_langgraph.testing:SCENARIO_RUNNER``. The agent is a hand-built ``StateGraph`` with a
model node and a ``ToolNode``, the shape every LangGraph agent has; its model is a LangChain chat
model (a ``ScriptedChatModel``) that answers with the suite's ``scripted_reply``, so LangGraph's
own loop, tool routing and ``ToolNode`` run for real. ``confirm`` asks with LangGraph's
``interrupt()``, and ``report`` returns its task as the ``ToolMessage`` artifact, classified by its
own metadata. The MCP agent lists the scenario MCP server when it is built and offers its tools as
``mcp_structured_tool``s. What every runner builds alike comes from ``ScenarioRunnerBase``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentFrameworkRunner,
    AgentSessionFlow,
    AgentSessionOptions,
    ListedTool,
    ToolEffect,
    ToolTaskStarted,
    estimate_text_tokens,
    require_deferred_tool_execution,
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
    confirm_by_asking,
    run_scenario_tool_call,
    scripted_reply,
    start_report_task,
)
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.tools import tool as langchain_tool
from langgraph.types import interrupt

from dex_agents_langgraph._flow import langgraph_session_flow
from dex_agents_langgraph._graph_tools import TOOL_EFFECT_METADATA_KEY
from dex_agents_langgraph._mcp_tools import mcp_structured_tool
from dex_agents_langgraph._runner import LangGraphRunner
from dex_agents_langgraph._scripted_chat_model import ScriptedChatModel
from dex_agents_langgraph._tool_context import get_tool_call_idempotency_key
from dex_agents_langgraph.testing._reference_agent import reference_graph, turn_messages

__all__ = [
    "SCENARIO_RUNNER",
    "LangGraphScenarioRunner",
    "ScenarioContext",
    "context_window_chat_model",
    "scenario_chat_model",
]


@dataclass(frozen=True)
class ScenarioContext:
    """The LangGraph context of a scenario run: the turn's session settings."""

    session_settings: Mapping[str, object] = field(default_factory=dict)


def scenario_chat_model(
    spec: ScenarioAgentSpec, session_settings: Mapping[str, object]
) -> ScriptedChatModel:
    """A chat model that answers with the scenario suite's ``scripted_reply``.

    It reads the turn from its input as any chat model would: the last ``HumanMessage`` is the
    user's text, the AI messages after it count the turn's model calls, and the ``ToolMessage``
    contents after it are the turn's tool outputs.
    """

    async def respond(messages: list[BaseMessage]) -> AIMessage:
        turn = turn_messages(messages)
        call_index = 1 + sum(isinstance(m, AIMessage) for m in turn)
        model_input = ScenarioModelInput(
            [m.text for m in messages if isinstance(m, HumanMessage)],
            model_call_index=call_index,
            tool_outputs=[m.text for m in turn if isinstance(m, ToolMessage)],
        )
        reply = await scripted_reply(spec, model_input, session_settings)
        calls = [
            ToolCall(name=call.tool, args=dict(call.arguments), id=f"call-{call_index}-{n}")
            for n, call in enumerate(reply.tool_calls)
        ]
        return _reply(reply.text or "", calls, messages)

    return ScriptedChatModel(respond=respond, model_name="dex-scenario")


def _turn_of(messages: Sequence[BaseMessage]) -> tuple[str, list[BaseMessage]]:
    users = [message for message in messages if isinstance(message, HumanMessage)]
    return (users[-1].text if users else ""), turn_messages(messages)


def _reply(text: str, calls: list[ToolCall], messages: Sequence[BaseMessage]) -> AIMessage:
    """The answer as a provider would send it: usage measured, model name, finish reason."""
    input_tokens = _measured_tokens(messages)
    output_tokens = estimate_text_tokens(text + json.dumps([dict(call) for call in calls]))
    return AIMessage(
        content=text,
        tool_calls=calls,
        usage_metadata={
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        },
        response_metadata={
            "model_name": "dex-scenario",
            "finish_reason": "tool_calls" if calls else "stop",
        },
    )


def _measured_tokens(messages: Sequence[BaseMessage]) -> int:
    """The input as a provider would count it here: the shared estimate of the messages' JSON."""
    return estimate_text_tokens(json.dumps(messages_to_dict(list(messages))))


class LangGraphScenarioRunner(ScenarioRunnerBase[BaseTool]):
    """The scenario agent as a ``StateGraph`` whose model node calls ``scenario_chat_model``."""

    name = "langgraph"
    # ``report``'s own metadata classifies it, as MCP annotations would.
    report_classifies_itself = True

    def scenario_tool(self, spec: ScenarioAgentSpec, tool: ScenarioTool) -> BaseTool:
        async def run(gate: str, config: RunnableConfig) -> str:
            key = get_tool_call_idempotency_key(config)
            return await run_scenario_tool_call(spec, tool, gate, key, failure=ToolException)

        return StructuredTool.from_function(
            coroutine=run, name=tool.name, description=tool.description
        )

    def confirm_tool(self, spec: ScenarioAgentSpec) -> BaseTool:
        @langchain_tool(CONFIRM_TOOL)
        def confirm(gate: str, config: RunnableConfig) -> str:
            """Ask before shipping, then ship once."""
            key = get_tool_call_idempotency_key(config)
            # LangGraph's own human-in-the-loop question; the runner makes it the session's.
            return confirm_by_asking(
                spec, key, lambda question, _: str(interrupt(question.payload()))
            )

        return confirm

    def report_tool(self, spec: ScenarioAgentSpec) -> BaseTool:
        @langchain_tool(REPORT_TOOL, response_format="content_and_artifact")
        async def report(gate: str, config: RunnableConfig) -> tuple[str, ToolTaskStarted]:
            """Start a report job."""
            get_tool_call_idempotency_key(config)  # checks that this runs in its tool Step
            started = await start_report_task(spec, require_deferred_tool_execution(), gate)
            return f"report {started.task_id} started", started

        # The tool's own metadata classifies it (``report_classifies_itself``).
        report.metadata = {TOOL_EFFECT_METADATA_KEY: ToolEffect.READ.value}
        return report

    def mcp_tool(self, mcp: ScenarioMcpTools, listed: ListedTool) -> BaseTool:
        return mcp_structured_tool(mcp.source, listed)

    def build_runner(
        self, spec: ScenarioAgentSpec, tools: Sequence[BaseTool]
    ) -> AgentFrameworkRunner[Any]:
        def model_for(context: ScenarioContext | None) -> ScriptedChatModel:
            return scenario_chat_model(spec, context.session_settings if context else {})

        graph = reference_graph(model_for, tools, context_schema=ScenarioContext).compile(
            name="scenario-agent"
        )
        return LangGraphRunner(
            graph,
            context=lambda settings: ScenarioContext(dict(settings)),
            tool_task_pollers=self.tool_task_pollers(spec),
        )

    def build_context_window_flow(
        self, model: ContextWindowModel, options: AgentSessionOptions
    ) -> AgentSessionFlow:
        """The context window scenario's agent as a ``StateGraph`` around its scripted model."""

        @langchain_tool(
            ContextWindowModel.tool_name, description=ContextWindowModel.tool_description
        )
        def lookup_note(topic: str) -> str:
            return ContextWindowModel.run_tool(topic)

        chat_model = context_window_chat_model(model, summarizes=False)
        return langgraph_session_flow(
            reference_graph(chat_model, [lookup_note]).compile(name="scenario-agent"),
            flow_type=ContextWindowModel.flow_type,
            options=options,
            summary_model=context_window_chat_model(model, summarizes=True),
        )


def context_window_chat_model(model: ContextWindowModel, *, summarizes: bool) -> ScriptedChatModel:
    """A chat model that answers with the context window scenario's model, or its summaries."""

    def respond(messages: list[BaseMessage]) -> AIMessage:
        if summarizes:
            prompt = "\n".join(message.text for message in messages)
            unknown = [OUTCOME_UNKNOWN_TOOL_RESULT] * prompt.count(OUTCOME_UNKNOWN_TOOL_RESULT)
            return _reply(model.summarize(unknown), [], messages)
        user_text, turn = _turn_of(messages)
        results = [m.text for m in turn if isinstance(m, ToolMessage)]
        reply = model.respond(user_text, results, _measured_tokens(messages))
        if reply.tool_argument is None:
            return _reply(reply.text or "", [], messages)
        call = ToolCall(
            name=ContextWindowModel.tool_name,
            args={"topic": reply.tool_argument},
            id=f"note-{len(results) + 1}",
        )
        return _reply("", [call], messages)

    return ScriptedChatModel(respond=respond, model_name="dex-context-window")


SCENARIO_RUNNER = LangGraphScenarioRunner().scenario_runner()
"""LangGraph under the shared suite: every optional feature (MCP tools with the mcp extra), and the
context window scenario."""
