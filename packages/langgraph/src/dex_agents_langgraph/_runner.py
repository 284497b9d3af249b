"""LangGraphRunner: a compiled LangGraph graph as the runner of a durable agent session."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias

from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentTurnContext,
    AgentTurnOutcome,
    ConfigurationError,
    ConfigurationTypeError,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    InteractionMode,
    ResolvedToolPolicy,
    ToolEffect,
    ToolTaskPoller,
    build_context_summary_prompt,
    build_plan_note,
    dump_json_text,
    estimate_text_tokens,
)
from dex_agents.adapters import UNKNOWN_TOOL_POLICY, AdapterRunner, check_tool_task_pollers
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage

from dex_agents_langgraph._graph_tools import inspect_graph, tool_framework_effect
from dex_agents_langgraph._model_call_observer import ModelCallObserver, message_usage
from dex_agents_langgraph._model_step import GraphModelStep, recorded_results
from dex_agents_langgraph._tool_step import ToolStepRunner
from dex_agents_langgraph._transcript import (
    PendingToolCall,
    framework_message,
    system_message,
    user_message,
)

__all__ = ["ContextFactory", "LangGraphRunner", "SummaryModel"]

ContextFactory: TypeAlias = Callable[[Mapping[str, object]], object]
"""Builds a run's LangGraph ``context`` (``Runtime.context``) from the turn's session settings."""
SummaryModel: TypeAlias = BaseChatModel | Callable[[Mapping[str, object]], BaseChatModel]
"""The chat model of summary calls, or a function of the session settings that returns it."""

_DEFAULT_RECURSION_LIMIT = 25


class LangGraphRunner(AdapterRunner):
    """Runs a compiled LangGraph graph as a durable Dex agent session, one model call per Step.

    Every ``RunModel`` runs the graph until its model node answered and stops it before its tool
    node (LangGraph's ``interrupt_before``), so each tool call the model asks for runs in its own
    tool Step, through the ``ToolNode`` that holds the tool. The graph's messages are stored as
    LangChain message JSON, one session message each, as soon as the model returns them; the next
    ``RunModel`` rebuilds the graph's input from them and the tool calls' final records.

    Args:
        graph: The compiled graph: ``StateGraph(...).compile()``, ``create_react_agent(...)`` or
            ``langchain.agents.create_agent(...)``. Compile it without a checkpointer (one is
            ignored, with a warning) and without ``interrupt_before``/``interrupt_after``.
        messages_key: The state channel that holds the conversation (``"messages"``).
        tool_nodes: The names of the tool nodes; by default every node whose runnable is a
            ``langgraph.prebuilt.ToolNode``.
        summary_model: The chat model that writes context summaries when the session's options
            set a compaction policy, or a function of the session settings returning it.
        context: Builds each run's LangGraph context (``Runtime.context``) from the turn's session
            settings, such as which model a dynamic model node uses.
        tool_task_pollers: A ``ToolTaskPoller`` per tool whose ``ToolMessage.artifact`` is a
            ``ToolTaskStarted``; one that also has ``cancel_tool_task`` cancels abandoned tasks.
        recursion_limit: LangGraph's step limit of one run (one model call and the nodes
            around it).

    Raises:
        ConfigurationTypeError: When ``graph`` is not a compiled graph, a tool node is not a
            ``ToolNode``, or a poller has no ``poll_tool_task``.
        ConfigurationError: When the graph has no ``messages_key`` channel or was compiled with
            breakpoints, a tool name repeats, or a poller names a tool the graph does not have.

    Example:
        >>> graph = create_react_agent(model, [lookup_order, refund_order])
        >>> flow = AgentSessionFlow(LangGraphRunner(graph), flow_type="SupportAgent")
    """

    supports_plan_mode = True
    """A planning turn offers only ``write_todos`` through :func:`model_tools`."""

    def __init__(
        self,
        graph: object,
        *,
        messages_key: str = "messages",
        tool_nodes: Sequence[str] | None = None,
        summary_model: SummaryModel | None = None,
        context: ContextFactory | None = None,
        tool_task_pollers: Mapping[str, ToolTaskPoller] | None = None,
        recursion_limit: int = _DEFAULT_RECURSION_LIMIT,
    ) -> None:
        tools = inspect_graph(graph, messages_key=messages_key, tool_nodes=tool_nodes)
        pollers = check_tool_task_pollers(tool_task_pollers, tools.tools)
        if isinstance(recursion_limit, bool) or not isinstance(recursion_limit, int):
            raise ConfigurationTypeError(f"recursion_limit must be an int, got {recursion_limit!r}")
        if recursion_limit < 1:
            raise ConfigurationError(f"recursion_limit must be at least 1, got {recursion_limit}")
        self._graph = graph
        self._tools = tools
        self.tool_task_pollers = pollers
        self._summary_model = summary_model
        self._model_step = GraphModelStep(
            tools=tools,
            messages_key=messages_key,
            defer=self._defer,
            context=context,
            recursion_limit=recursion_limit,
        )
        self._tool_step = ToolStepRunner(tools, messages_key)

    @property
    def graph(self) -> object:
        """The compiled graph this runner runs."""
        return self._graph

    @property
    def tool_names(self) -> tuple[str, ...]:
        """Every tool of the graph's tool nodes."""
        return tuple(self._tools.tools)

    @property
    def has_summary_model(self) -> bool:
        """Whether the runner can write context summaries."""
        return self._summary_model is not None

    def build_user_message(self, text: str) -> FrameworkMessage:
        """The user's text as a LangChain ``HumanMessage``."""
        return framework_message(user_message(text))

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Run the graph for the turn's next model call.

        Raises:
            SecondModelCallError: When the graph starts a second model call before a tool node.
            RunnerContractError: When the graph stops elsewhere than before a tool node.
            ValueError: When the run state or a stored message is not this runner's.
            Exception: Whatever the graph's nodes or model raise.
        """
        return await self._model_step.run(turn)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one tool call through the ``ToolNode`` that holds the tool.

        Raises:
            ToolExecutionError: For an unknown tool, arguments that are not a JSON object, a
                ``ToolMessage`` with ``status="error"``, or a ``ToolException``.
            Exception: Whatever else the tool raises, handled by the call's effect.
        """
        return await self._tool_step.execute(call)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """``ToolMessage`` results of the stored calls that have none yet, from the final records."""
        return [framework_message(result) for result in recorded_results(turn)]

    def fixed_input_tokens(self, turn: AgentTurnContext) -> int:
        """The plan note, the pending results, and the offered built-in tool definitions; the
        graph's own system prompt is not visible here, so add it to
        ``CompactionPolicy.reserved_input_tokens``."""
        fixed = sum(
            estimate_text_tokens(dump_json_text(definition.to_json()))
            for definition in BUILT_IN_TOOL_DEFINITIONS
            if definition.name.value in turn.enabled_built_in_tools
        )
        plan_note = build_plan_note(turn.plan, turn.interaction_mode)
        if plan_note is not None:
            fixed += estimate_text_tokens(plan_note)
        if turn.is_resuming:
            fixed += sum(
                estimate_text_tokens(framework_message(result).framework_item)
                for result in recorded_results(turn)
            )
        return fixed

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One call of the summary model with ``CONTEXT_SUMMARY_INSTRUCTIONS`` and the shared
        transcript prompt.

        Raises:
            ConfigurationError: When the runner has no ``summary_model``.
        """
        model = self._summary_model_for(request.session_settings)
        observer = ModelCallObserver()
        response = await model.ainvoke(
            [
                system_message(CONTEXT_SUMMARY_INSTRUCTIONS),
                HumanMessage(content=build_context_summary_prompt(request)),
            ],
            config={"callbacks": [observer], "run_name": "dex-agents context summary"},
        )
        usage = message_usage(response) if isinstance(response, AIMessage) else observer.usage()
        return ContextSummaryResult(
            text=response.text, usage=usage, model_call_metadata=observer.metadata()
        )

    def _summary_model_for(self, settings: Mapping[str, object]) -> BaseChatModel:
        model = self._summary_model
        if model is None:
            raise ConfigurationError(
                "the session compacts its context, but LangGraphRunner has no summary_model; "
                "pass LangGraphRunner(graph, summary_model=<chat model>)"
            )
        if isinstance(model, BaseChatModel):
            return model
        resolved = model(settings)
        if not isinstance(resolved, BaseChatModel):
            raise ConfigurationTypeError(
                f"summary_model returned {type(resolved).__name__}, not a LangChain chat model"
            )
        return resolved

    def _defer(
        self, turn: AgentTurnContext, calls: Sequence[PendingToolCall]
    ) -> list[DeferredToolCall]:
        return [
            DeferredToolCall(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                arguments=call.arguments,
                policy=self._policy(turn, call),
            )
            for call in calls
        ]

    def _policy(self, turn: AgentTurnContext, call: PendingToolCall) -> ResolvedToolPolicy:
        if call.tool_name in turn.enabled_built_in_tools:
            # The session routes built-in calls to their own Steps, read and without approval.
            return turn.resolve_tool_policy(call.tool_name, ToolEffect.READ)
        tool = self._tools.tools.get(call.tool_name)
        if tool is None or not call.valid or turn.interaction_mode is InteractionMode.PLANNING:
            # It fails at once in its Step (unknown tool, arguments that are not JSON) or the
            # session rejects it (a planning turn): nothing to approve.
            return UNKNOWN_TOOL_POLICY
        return turn.resolve_tool_policy(call.tool_name, tool_framework_effect(tool))
