"""StepwiseAgentRunner: dex-agents' own agent loop, one model call per RunModel."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dex_agents._built_in_tools import BuiltInTool, built_in_tool_definitions
from dex_agents._compaction import build_context_summary_note
from dex_agents._model_call_count import ModelCallCountState
from dex_agents._plans import build_plan_note
from dex_agents._runner_contract import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentTurnContext,
    AgentTurnOutcome,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ModelCallMetadata,
    ToolExecutionError,
    ToolTaskStarted,
)
from dex_agents._tool_policy import ResolvedToolPolicy, ToolEffect
from dex_agents._tool_source_routes import ToolSourceRoutes
from dex_agents._values import (
    FrameworkMessage,
    InteractionMode,
    PlanStatus,
)
from dex_agents.adapters._adapter_runner import AdapterRunner
from dex_agents.adapters._agent_type import agent_type_error
from dex_agents.adapters._recorded_results import recorded_tool_result
from dex_agents.exceptions import (
    ConfigurationError,
    ConfigurationTypeError,
)
from dex_agents.stepwise._agent_definition import (
    AgentDefinition,
    InstructionContext,
    built_in_tool_name_conflict_message,
    check_built_in_tool_names,
)
from dex_agents.stepwise._compaction import (
    build_summary_model_request,
    select_response_boundary_cutoff,
)
from dex_agents.stepwise._function_tool import FunctionTool, ToolCallContext
from dex_agents.stepwise._input_items import (
    model_output_message,
    read_transcript,
    tool_result_message,
    user_text_message,
)
from dex_agents.stepwise._model_client import (
    DiscardingModelOutputWriter,
    ModelInputItem,
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ModelToolChoice,
    ModelToolDefinition,
    ModelToolResult,
    ModelUserText,
)
from dex_agents.stepwise._tool_sources import (
    ListedTool,
    ToolSource,
    list_source_tools,
    listed_tool_definition,
)

__all__ = ["StepwiseAgentRunner", "model_call_limit_tool_result", "unknown_tool_message"]

_RUN_STATE = ModelCallCountState("stepwise_model_calls", "Stepwise")


def model_call_limit_tool_result(limit: int) -> str:
    """The result of a tool call made after the turn's model call limit; the call never runs."""
    return f"The tool call was not run: this turn reached its limit of {limit} model calls."


def unknown_tool_message(tool_name: str) -> str:
    """The error of a call of a tool this agent does not have."""
    return f"unknown tool {tool_name}"


@dataclass(frozen=True)
class _SourceTool:
    source: ToolSource
    listed: ListedTool


@dataclass(frozen=True)
class _Offer:
    """What one model call offers: definitions in order, and each source tool by name."""

    definitions: tuple[ModelToolDefinition, ...]
    source_tools: Mapping[str, _SourceTool]


_NOTHING_OFFERED = _Offer((), {})


class StepwiseAgentRunner(AdapterRunner):
    """The runner of a Stepwise agent: builds each model input from committed state only.

    Each ``run_model_step`` makes exactly one model call through the definition's ModelClient.
    The model input is the instructions, every stored item, and the results of the previous model
    response from the turn's final records; every stored tool call is paired with a result, and a
    missing one reads as the outcome-unknown text. The turn's items are stored as they appear
    (``ToolCallsRequested.new_messages``), so the framework run state holds only the turn's model
    call count. Every function tool call runs later in its own tool Step.

    Example:
        >>> from dex_agents import AgentSessionFlow
        >>> from dex_agents.stepwise import stepwise_agent_session_options
        >>> runner = StepwiseAgentRunner(support_agent)
        >>> flow = AgentSessionFlow(runner, flow_type="SupportAgent",
        ...                         options=stepwise_agent_session_options(support_agent))
    """

    supports_plan_mode = True
    """Stepwise honors plan mode: a planning turn offers only write_todos and sees the plan note."""

    def __init__(self, definition: AgentDefinition) -> None:
        if not isinstance(definition, AgentDefinition):
            raise agent_type_error("StepwiseAgentRunner", "an AgentDefinition", definition)
        self._definition = definition
        self._tools = dict(definition.tools_by_name)
        self._sources = ToolSourceRoutes(
            definition.tool_sources_by_name,
            key="stepwise_tool_source",
            owner=f"agent {definition.name}",
        )
        self.tool_source_routes = self._sources
        # Each source's last listing, for the synchronous estimate of a source without
        # cached_tools(); only an estimate reads it, so a Worker restart loses nothing.
        self._last_listings: dict[str, tuple[ListedTool, ...]] = {}

    @property
    def definition(self) -> AgentDefinition:
        """The agent this runner runs."""
        return self._definition

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Stores user text provider-neutral."""
        return user_text_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Makes the turn's next model call.

        Raises:
            ConfigurationError: When a function tool uses the name of a built-in tool the session enables,
                before any model request.
            StoredStateError: When the run state is not Stepwise's.
            Exception: Whatever the model client or the instructions function raises.
        """
        model_calls = _RUN_STATE.decode(turn.framework_run_state)
        check_built_in_tool_names(set(self._tools), turn.enabled_built_in_tools)
        transcript = read_transcript(
            turn.messages, lambda call: OUTCOME_UNKNOWN_TOOL_RESULT, turn.turn_id
        )
        previous_results = tuple(
            self._recorded_result(turn, call) for call in transcript.unanswered_calls
        )
        at_limit = model_calls >= self._definition.max_model_calls_per_turn
        offer = _NOTHING_OFFERED if at_limit else await self._offer(turn)
        request = ModelRequest(
            instructions=await self._instructions(turn),
            input=(
                *_summary_note(turn),
                *_with_plan_note(turn, transcript.input, transcript.turn_start),
                *previous_results,
            ),
            tools=offer.definitions,
            settings=self._definition.model_settings,
            tool_choice=self._tool_choice(turn, offer),
        )
        model = self._definition.model_for(turn.session_settings)
        response = await model.call_model(request, turn.events)
        model_calls += 1
        new_messages = [tool_result_message(result) for result in previous_results]
        new_messages.extend(
            model_output_message(item, f"{turn.turn_id}/{model_calls}") for item in response.items
        )
        calls: tuple[DeferredToolCall, ...] = ()
        if at_limit:
            # Past the limit the turn ends; a call the model made anyway gets a result, never a
            # Step.
            limit_text = model_call_limit_tool_result(self._definition.max_model_calls_per_turn)
            new_messages.extend(
                tool_result_message(ModelToolResult(call.tool_call_id, call.tool_name, limit_text))
                for call in response.tool_calls
            )
        else:
            calls = tuple(self._deferred(turn, offer, call) for call in response.tool_calls)
        return _RUN_STATE.outcome(
            model_calls,
            tool_calls=calls,
            new_messages=tuple(new_messages),
            usage=response.usage,
            model_call_metadata=_metadata(response),
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Runs one function tool call with a ToolCallContext.

        Raises:
            ToolExecutionError: For an unknown tool, invalid arguments, or when the tool raises it.
            Exception: Whatever else the tool raises, handled by the call's effect.
        """
        source_outcome = await self._sources.execute(call)
        if source_outcome is not None:
            return source_outcome
        tool = self._tools.get(call.tool_call.tool_name)
        if tool is None:
            raise ToolExecutionError(unknown_tool_message(call.tool_call.tool_name))
        return await self._run_function_tool(tool, call)

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Estimates the next model call's input with the model client's own estimate.

        Counts the instructions (a function's result only when it returns text synchronously),
        the summary note, every stored item, the pending tool results, and the function and
        built-in tool definitions; a tool source counts through its ``cached_tools()``, else
        through this runner's last listing of it.
        """
        transcript = read_transcript(
            turn.messages, lambda call: OUTCOME_UNKNOWN_TOOL_RESULT, turn.turn_id
        )
        previous_results = tuple(
            self._recorded_result(turn, call) for call in transcript.unanswered_calls
        )
        request = ModelRequest(
            instructions=self._instructions_now(turn),
            input=(
                *_summary_note(turn),
                *_with_plan_note(turn, transcript.input, transcript.turn_start),
                *previous_results,
            ),
            tools=self._estimated_tool_definitions(turn),
            settings=self._definition.model_settings,
        )
        return self._definition.model_for(turn.session_settings).estimate_input_tokens(request)

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None:
        """Cuts between model responses whose tool calls all have stored results, so a turn with
        many tool calls compacts mid-turn without separating a call from its result."""
        return select_response_boundary_cutoff(turn.messages, retained_token_budget)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Makes one summary call with CONTEXT_SUMMARY_INSTRUCTIONS and no tools.

        The request fits ``input_token_budget`` with the definition's ``max_output_tokens``; the
        oldest whole responses are left out first, with the omission note.
        """
        model = self._definition.model_for(request.session_settings)
        model_request = build_summary_model_request(
            request,
            estimate_input_tokens=model.estimate_input_tokens,
            max_output_tokens=self._definition.max_output_tokens,
        )
        response = await model.call_model(model_request, DiscardingModelOutputWriter())
        return ContextSummaryResult(
            text=response.text, usage=response.usage, model_call_metadata=_metadata(response)
        )

    def _instructions_now(self, turn: AgentTurnContext) -> str:
        instructions = self._definition.instructions
        if isinstance(instructions, str):
            return instructions
        text = instructions(
            InstructionContext(
                flow_id=turn.flow_id,
                turn_id=turn.turn_id,
                session_settings=turn.session_settings,
                interaction_mode=str(turn.interaction_mode),
            )
        )
        if inspect.isawaitable(text):
            # An async instructions function cannot run in the synchronous estimate.
            close = getattr(text, "close", None)
            if callable(close):
                close()
            return ""
        return text if isinstance(text, str) else ""

    def _estimated_tool_definitions(
        self, turn: AgentTurnContext
    ) -> tuple[ModelToolDefinition, ...]:
        if turn.interaction_mode is InteractionMode.PLANNING:
            return _built_in_definitions(turn, only=BuiltInTool.WRITE_TODOS)
        definitions = [tool.definition() for tool in self._tools.values()]
        for source in self._definition.tool_sources:
            cached = getattr(source, "cached_tools", None)
            listed = cached() if callable(cached) else self._last_listings.get(source.source_name)
            definitions.extend(listed_tool_definition(tool) for tool in listed or ())
        definitions.extend(_built_in_definitions(turn))
        return tuple(definitions)

    def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """The results of the stored calls that have none yet, from the turn's final records."""
        transcript = read_transcript(turn.messages, lambda call: OUTCOME_UNKNOWN_TOOL_RESULT)
        return [
            tool_result_message(self._recorded_result(turn, call))
            for call in transcript.unanswered_calls
        ]

    async def _instructions(self, turn: AgentTurnContext) -> str:
        instructions = self._definition.instructions
        if isinstance(instructions, str):
            return instructions
        context = InstructionContext(
            flow_id=turn.flow_id,
            turn_id=turn.turn_id,
            session_settings=turn.session_settings,
            interaction_mode=str(turn.interaction_mode),
        )
        text = instructions(context)
        if inspect.isawaitable(text):
            text = await text
        if not isinstance(text, str):
            raise ConfigurationTypeError(
                f"the instructions function returned {type(text).__name__}, not a str"
            )
        return text

    async def _run_function_tool(
        self, tool: FunctionTool, call: DeferredToolExecution
    ) -> DeferredToolOutcome:
        record = call.tool_call
        context = ToolCallContext(
            idempotency_key=call.idempotency_key,
            attempt=call.attempt,
            flow_id=call.flow_id,
            turn_id=call.turn_id,
            tool_call_id=record.tool_call_id,
            events=call.events,
            heartbeat=call.heartbeat,
            input_answers=call.input_answers,
            input_continuation=record.input_continuation,
            heartbeat_checkpoint=call.heartbeat_checkpoint,
            save_heartbeat_checkpoint=call.save_heartbeat_checkpoint,
        )
        outcome = await tool.invoke(record.arguments, context)
        if isinstance(outcome, ToolTaskStarted):
            # Only a tool source can poll a task; a function tool runs its work to the end.
            raise ConfigurationTypeError(
                f"function tool {tool.name} returned ToolTaskStarted; it cannot be polled"
            )
        return outcome

    async def _offer(self, turn: AgentTurnContext) -> _Offer:
        if turn.interaction_mode is InteractionMode.PLANNING:
            # A planning turn writes the plan and nothing else.
            return _Offer(_built_in_definitions(turn, only=BuiltInTool.WRITE_TODOS), {})
        definitions = [tool.definition() for tool in self._tools.values()]
        source_tools: dict[str, _SourceTool] = {}
        if self._definition.tool_sources:
            listings = await list_source_tools(
                self._definition.tool_sources, self._definition.tool_source_listing_timeout
            )
            for source, listed_tools in listings:
                self._last_listings[source.source_name] = tuple(listed_tools)
                for listed in listed_tools:
                    self._check_source_tool_name(turn, listed.name, source_tools)
                    source_tools[listed.name] = _SourceTool(source, listed)
                    definitions.append(listed_tool_definition(listed))
        definitions.extend(_built_in_definitions(turn))
        return _Offer(tuple(definitions), source_tools)

    def _tool_choice(self, turn: AgentTurnContext, offer: _Offer) -> ModelToolChoice:
        """Forces write_todos on a planning turn's first call while no draft exists, if asked."""
        draft_exists = turn.plan is not None and turn.plan.status is PlanStatus.DRAFT
        if (
            self._definition.planning_tool_choice == "required"
            and turn.interaction_mode is InteractionMode.PLANNING
            and not turn.is_resuming
            and not draft_exists
            and offer.definitions
        ):
            return ModelToolChoice.REQUIRED
        return ModelToolChoice.AUTO

    def _check_source_tool_name(
        self, turn: AgentTurnContext, name: str, listed: Mapping[str, _SourceTool]
    ) -> None:
        if name in turn.enabled_built_in_tools:
            raise ConfigurationError(built_in_tool_name_conflict_message(name))
        if name in self._tools:
            raise ConfigurationError(
                f"tool {name} of a tool source uses the name of a function tool"
            )
        if name in listed:
            raise ConfigurationError(f"two tool sources list a tool named {name}")

    def _deferred(
        self, turn: AgentTurnContext, offer: _Offer, call: ModelToolCall
    ) -> DeferredToolCall:
        source_tool = offer.source_tools.get(call.tool_name)
        if source_tool is None:
            return DeferredToolCall(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                arguments=call.arguments,
                policy=self._policy(turn, call.tool_name),
            )
        source = source_tool.source
        deferred = source.deferred_tool_call(
            turn, call.tool_call_id, call.arguments, source_tool.listed
        )
        if not isinstance(deferred, DeferredToolCall):
            raise ConfigurationTypeError(
                f"tool source {source.source_name} built {type(deferred).__name__}, "
                "not a DeferredToolCall"
            )
        named = dataclasses.replace(
            deferred,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            arguments=call.arguments,
        )
        return self._sources.wrap(source.source_name, named)

    def _policy(self, turn: AgentTurnContext, tool_name: str) -> ResolvedToolPolicy:
        if tool_name in turn.enabled_built_in_tools:
            # The session routes built-in calls to their own Steps, read and without approval.
            return turn.resolve_tool_policy(tool_name, ToolEffect.READ)
        tool = self._tools.get(tool_name)
        if tool is None:
            # No tool of this name was offered: it fails at once as an unknown tool in its tool
            # Step and never reaches a source, so there is nothing to approve.
            return ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, requires_approval=False)
        policy = turn.resolve_tool_policy(tool_name, tool.effect)
        if tool_name in turn.tool_policies or tool.requires_approval is None:
            return policy
        return ResolvedToolPolicy(policy.effect, tool.requires_approval)

    @staticmethod
    def _recorded_result(turn: AgentTurnContext, call: ModelToolCall) -> ModelToolResult:
        output = recorded_tool_result(turn.recorded_tool_call(call.tool_call_id))
        return ModelToolResult(call.tool_call_id, call.tool_name, output)


def _built_in_definitions(
    turn: AgentTurnContext, only: BuiltInTool | None = None
) -> tuple[ModelToolDefinition, ...]:
    enabled = turn.enabled_built_in_tools if only is None else turn.enabled_built_in_tools & {only}
    return tuple(
        ModelToolDefinition(definition.name.value, definition.description, definition.parameters)
        for definition in built_in_tool_definitions(enabled)
    )


def _summary_note(turn: AgentTurnContext) -> tuple[ModelInputItem, ...]:
    """The context summary note that starts the input once the session compacted."""
    if turn.context_summary is None:
        return ()
    return (ModelUserText(build_context_summary_note(turn.context_summary)),)


def _with_plan_note(
    turn: AgentTurnContext, items: Sequence[ModelInputItem], turn_start: int
) -> tuple[ModelInputItem, ...]:
    """Puts the plan note before the turn's items, so the model always sees the latest plan."""
    note = build_plan_note(turn.plan, turn.interaction_mode)
    if note is None:
        return tuple(items)
    return (*items[:turn_start], ModelUserText(note), *items[turn_start:])


def _metadata(response: ModelResponse) -> ModelCallMetadata:
    return ModelCallMetadata(
        request_model=response.request_model,
        response_model=response.response_model,
        provider_name=response.provider_name,
        response_id=response.response_id,
        finish_reasons=response.finish_reasons,
    )
