"""``OpenAIAgentsRunner``: an OpenAI Agents SDK agent as a durable dex-agents session."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, cast

from agents import (
    Agent,
    InputGuardrailTripwireTriggered,
    MaxTurnsExceeded,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    RunHooks,
    Runner,
)
from agents.run import DEFAULT_MAX_TURNS
from dex_agents import (
    CONTEXT_SUMMARY_INSTRUCTIONS,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    ConfigurationError,
    ConfigurationTypeError,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    JsonObject,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolTaskPoller,
    TurnCompleted,
    build_context_summary_prompt,
    select_turn_boundary_cutoff,
)
from dex_agents.adapters import AdapterRunner, check_tool_task_pollers, unknown_tool_error

from dex_agents_openai_agents._agent_graph import AgentGraph, check_run_config
from dex_agents_openai_agents._call_reference import CallReference
from dex_agents_openai_agents._compaction_cutoff import keep_active_agent_named
from dex_agents_openai_agents._deferred_calls import defer_calls, find_tool
from dex_agents_openai_agents._errors import GuardrailTripwireError
from dex_agents_openai_agents._model_input import (
    fixed_input_tokens,
    model_input,
    pending_results,
)
from dex_agents_openai_agents._model_report import agent_usage, model_call_metadata, model_of
from dex_agents_openai_agents._model_step import run_one_model_call
from dex_agents_openai_agents._prepared_agent import prepare_agent
from dex_agents_openai_agents._tool_step import run_function_tool
from dex_agents_openai_agents._tool_use_behavior import tool_results_end_turn
from dex_agents_openai_agents._transcript import (
    FUNCTION_CALL,
    read_transcript,
    stored_message,
    user_message_item,
)
from dex_agents_openai_agents._turn_run_state import TurnRunState

__all__ = ["ContextFactory", "OpenAIAgentsRunner", "RunConfigFactory"]

ContextFactory: TypeAlias = Callable[[str, str], object]
"""Builds the SDK run context (``RunContextWrapper.context``) from the session ID and turn ID."""
RunConfigFactory: TypeAlias = Callable[[Mapping[str, object]], RunConfig]
"""Builds the ``RunConfig`` of a turn from its session settings, such as its model."""


class OpenAIAgentsRunner(AdapterRunner):
    """Runs an ``agents.Agent`` with the SDK's own ``Runner``, one model call per ``RunModel``.

    Each ``run_model_step`` rebuilds the SDK input from the stored Responses items and runs the
    active agent for exactly one model call. Every ``FunctionTool`` is copied with
    ``needs_approval=True`` for that call, so the SDK stops before any tool body (its own
    interruption), and each call then runs in its own tool Step through
    ``execute_deferred_tool_call``, whose result reaches the next model call as its
    ``function_call_output``. A handoff switches the agent inside the session: the next model call
    of the turn runs the new agent, and so does the next turn. Input guardrails run on the turn's
    first model call, output guardrails on its final answer, as in one SDK run.

    Args:
        agent: The starting agent; every agent a handoff reaches is found through it.
        run_config: A ``RunConfig`` for every turn, or a function from the turn's session
            settings to one (such as ``RunConfig(model=...)`` per settings model).
        context_factory: Builds the SDK run context from ``(flow_id, turn_id)``; ``None`` runs
            without one.
        hooks: ``RunHooks`` of every model call.
        agents: Agents that a custom ``Handoff`` returns but the handoffs do not reference.
        tool_task_pollers: Pollers by tool name, for tools that return ``ToolTaskStarted``;
            a poller with ``cancel_tool_task`` also cancels its task.
        max_turns: Model calls one turn may make (the SDK's ``max_turns``); the next one fails
            the turn with ``MaxTurnsExceeded``. ``None`` sets no limit.

    Raises:
        ConfigurationError: When agents share a name, a handoff filters its input, an agent has a
            local tool other than a ``FunctionTool``, or an option is out of range.
        ConfigurationTypeError: When an argument has the wrong type.

    Example:
        >>> runner = OpenAIAgentsRunner(triage_agent, run_config=RunConfig(workflow_name="support"))
        >>> flow = AgentSessionFlow(runner, flow_type="SupportAgent", options=options)
    """

    supports_plan_mode = True
    """A planning turn offers only ``write_todos``, with the plan note before the turn."""

    def __init__(
        self,
        agent: Agent[Any],
        *,
        run_config: RunConfig | RunConfigFactory | None = None,
        context_factory: ContextFactory | None = None,
        hooks: RunHooks[Any] | None = None,
        agents: Iterable[Agent[Any]] = (),
        tool_task_pollers: Mapping[str, ToolTaskPoller] | None = None,
        max_turns: int | None = DEFAULT_MAX_TURNS,
    ) -> None:
        self._graph = AgentGraph.build(agent, agents)
        if isinstance(run_config, RunConfig):
            check_run_config(run_config)
        elif run_config is not None and not callable(run_config):
            raise ConfigurationTypeError(
                "run_config must be a RunConfig, a function from session settings to a RunConfig, "
                f"or None, got {type(run_config).__name__}"
            )
        if context_factory is not None and not callable(context_factory):
            raise ConfigurationTypeError("context_factory must be callable or None")
        if max_turns is not None and (isinstance(max_turns, bool) or max_turns < 1):
            raise ConfigurationError(f"max_turns must be a positive int or None, got {max_turns!r}")
        pollers = check_tool_task_pollers(tool_task_pollers)
        self._run_config = run_config
        self._context_factory = context_factory
        self._hooks = hooks
        self.tool_task_pollers = pollers
        self._max_turns = max_turns

    @property
    def starting_agent(self) -> Agent[Any]:
        """The agent every session starts with."""
        return self._graph.starting_agent

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Stores user text as the SDK's user input item."""
        return stored_message(user_message_item(text), None)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Makes the turn's next model call with the active agent, or ends the turn when the
        agent's ``tool_use_behavior`` stops at the tool results it just got.

        Raises:
            MaxTurnsExceeded: When the turn already made ``max_turns`` model calls.
            GuardrailTripwireError: When an input or output guardrail tripped.
            ConfigurationError: When the active agent is unknown here or a tool name clashes.
            Exception: Whatever else the SDK or the model raises.
        """
        run_state = TurnRunState.decode(turn.framework_run_state)
        transcript = read_transcript(turn.messages, turn.turn_id)
        agent_name = self._active_agent_name(run_state, transcript.active_agent)
        agent = self._graph.agent(agent_name)
        pending = pending_results(turn, transcript)
        stored_results = [result.message(agent_name) for result in pending]
        context = self._context(turn.flow_id, turn.turn_id)
        if run_state is not None and await tool_results_end_turn(agent, pending, context):
            return TurnCompleted(new_messages=stored_results, usage=AgentUsage(model_calls=0))
        model_calls = run_state.model_calls if run_state is not None else 0
        if self._max_turns is not None and model_calls >= self._max_turns:
            raise MaxTurnsExceeded(f"Max turns ({self._max_turns}) exceeded")
        run_config = self._turn_run_config(
            turn.flow_id, turn.session_settings, resuming=run_state is not None
        )
        prepared = prepare_agent(
            agent,
            enabled_built_in_tools=turn.enabled_built_in_tools,
            interaction_mode=turn.interaction_mode,
            resuming=run_state is not None,
            reset_tool_choice=agent_name in transcript.turn_agents_with_tool_calls,
        )
        try:
            result = await run_one_model_call(
                prepared,
                model_input(turn, transcript, pending),
                run_config=run_config,
                context=context,
                hooks=self._hooks,
                events=turn.events,
            )
        except (InputGuardrailTripwireTriggered, OutputGuardrailTripwireTriggered) as tripped:
            raise _tripwire_error(tripped, agent_name) from tripped
        output = [cast(JsonObject, item) for item in result.response.to_input_items()]
        new_messages = [*stored_results, *(stored_message(item, agent_name) for item in output)]
        usage = agent_usage(result.response.usage)
        metadata = model_call_metadata(
            model_of(agent, run_config), run_config, result.response, result.completed
        )
        calls = [item for item in output if item.get("type") == FUNCTION_CALL]
        if not calls:
            return TurnCompleted(
                new_messages=new_messages, usage=usage, model_call_metadata=metadata
            )
        deferred, next_agent = await defer_calls(self._graph, turn, agent, calls, result, context)
        return ToolCallsRequested(
            framework_run_state=TurnRunState(next_agent, model_calls + 1).encode(),
            tool_calls=deferred,
            usage=usage,
            new_messages=new_messages,
            model_call_metadata=metadata,
        )

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the turn's stored calls that have none yet, from their final records."""
        transcript = read_transcript(turn.messages, turn.turn_id)
        run_state = TurnRunState.decode(turn.framework_run_state)
        agent_name = self._active_agent_name(run_state, transcript.active_agent)
        return [result.message(agent_name) for result in pending_results(turn, transcript)]

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Runs one deferred call: the agent's ``FunctionTool`` (or MCP tool), or records the
        answer the SDK already gave inside ``RunModel``.

        Raises:
            ToolExecutionError: For an unknown tool, invalid arguments, a ``ToolExecutionError`` of
                the tool, or a tool guardrail that raised.
            Exception: Whatever else the tool raises when its failure policy lets it.
        """
        record = call.tool_call
        reference = CallReference.decode(record.tool_source_reference)
        if reference.unknown_tool_error is not None:
            raise ToolExecutionError(reference.unknown_tool_error)
        if reference.inline_output is not None:
            return ToolExecutionResult(reference.inline_output)
        agent = self._graph.agent(reference.agent)
        context = self._context(call.flow_id, call.turn_id)
        tool = await find_tool(agent, record.tool_name, context)
        if tool is None:
            raise unknown_tool_error(record.tool_name)
        return await run_function_tool(
            tool,
            agent,
            call,
            context=context,
            run_config=self._turn_run_config(call.flow_id, {}, resuming=True),
        )

    def fixed_input_tokens(self, turn: AgentTurnContext) -> int:
        """The active agent's text instructions, tool and handoff definitions, the notes, and the
        results not stored yet (the stored items count with the shared rule)."""
        transcript = read_transcript(turn.messages, turn.turn_id)
        run_state = TurnRunState.decode(turn.framework_run_state)
        agent = self._graph.agent(self._active_agent_name(run_state, transcript.active_agent))
        return fixed_input_tokens(agent, turn, pending_results(turn, transcript))

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """Cuts between turns (the shared rule), but never summarizes away the last message that
        names the active agent while no kept message names one, so a handoff outlives
        compaction."""
        cutoff = select_turn_boundary_cutoff(turn, retained_token_budget)
        if cutoff is None:
            return None
        return keep_active_agent_named(turn.messages, cutoff, self._graph.starting_agent.name)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """One model call of the active agent's model with ``CONTEXT_SUMMARY_INSTRUCTIONS``, no
        tools and no guardrails, on the shared summary prompt."""
        active = read_transcript(request.messages, None).active_agent
        agent = self._graph.agent(active or self._graph.starting_agent.name)
        settings = dataclasses.replace(agent.model_settings, tool_choice=None)
        summarizer: Agent[Any] = Agent(
            name=f"{agent.name} context summary",
            instructions=CONTEXT_SUMMARY_INSTRUCTIONS,
            model=agent.model,
            model_settings=settings,
        )
        run_config = dataclasses.replace(
            self._turn_run_config(request.flow_id, request.session_settings, resuming=True),
            output_guardrails=None,
        )
        prompt = build_context_summary_prompt(request, reserved_tokens=settings.max_tokens or 0)
        result = await Runner.run(
            summarizer,
            prompt,
            context=self._context(request.flow_id, request.turn_id),
            max_turns=1,
            run_config=run_config,
        )
        response = result.raw_responses[-1]
        return ContextSummaryResult(
            text=str(result.final_output),
            usage=agent_usage(response.usage),
            model_call_metadata=model_call_metadata(
                model_of(summarizer, run_config), run_config, response, None
            ),
        )

    def _active_agent_name(self, run_state: TurnRunState | None, stored: str | None) -> str:
        if run_state is not None:
            return run_state.agent
        if stored is not None and stored in self._graph.by_name:
            return stored
        return self._graph.starting_agent.name

    def _context(self, flow_id: str, turn_id: str) -> object:
        return None if self._context_factory is None else self._context_factory(flow_id, turn_id)

    def _turn_run_config(
        self, flow_id: str, settings: Mapping[str, object], *, resuming: bool
    ) -> RunConfig:
        configured = self._run_config
        run_config = configured(settings) if callable(configured) else configured or RunConfig()
        if not isinstance(run_config, RunConfig):
            raise ConfigurationTypeError(
                f"the run_config function returned {type(run_config).__name__}, not a RunConfig"
            )
        check_run_config(run_config)
        # A tool the model made up becomes a failed tool result instead of failing the turn.
        changes: dict[str, Any] = {"tool_not_found_behavior": "return_error_to_model"}
        if run_config.group_id is None:
            changes["group_id"] = flow_id  # every model call is one SDK trace; group the session
        if resuming:
            changes["input_guardrails"] = None  # they ran on the turn's first model call
        return dataclasses.replace(run_config, **changes)


def _tripwire_error(
    tripped: InputGuardrailTripwireTriggered | OutputGuardrailTripwireTriggered, agent: str
) -> GuardrailTripwireError:
    kind = "input" if isinstance(tripped, InputGuardrailTripwireTriggered) else "output"
    result = tripped.guardrail_result
    return GuardrailTripwireError(
        f"{kind} guardrail {result.guardrail.get_name()} of agent {agent} triggered its tripwire "
        f"(output_info: {result.output.output_info!r}); the turn ends without an answer"
    )
