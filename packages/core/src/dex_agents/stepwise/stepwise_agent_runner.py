"""StepwiseAgentRunner: dex-agents' own agent loop, one model call per RunModel."""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence

from dex_agents._json_values import dump_json_text
from dex_agents.agent_framework_runner import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ModelCallMetadata,
    ToolCallsRequested,
    ToolExecutionError,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.agent_session_values import FrameworkMessage
from dex_agents.stepwise._built_in_tools import built_in_tool_definitions
from dex_agents.stepwise.agent_definition import (
    AgentDefinition,
    InstructionContext,
    check_built_in_tool_names,
)
from dex_agents.stepwise.function_tool import ToolCallContext
from dex_agents.stepwise.model_client import (
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    ModelToolDefinition,
    ModelToolResult,
)
from dex_agents.stepwise.stepwise_input_items import (
    model_output_message,
    read_transcript,
    tool_result_message,
    user_text_message,
)
from dex_agents.tool_policy import ResolvedToolPolicy, ToolEffect

__all__ = ["StepwiseAgentRunner", "model_call_limit_tool_result", "unknown_tool_message"]

_RUN_STATE_KEY = "stepwise_model_calls"


def model_call_limit_tool_result(limit: int) -> str:
    """The result of a tool call made after the turn's model call limit; the call never runs."""
    return f"The tool call was not run: this turn reached its limit of {limit} model calls."


def unknown_tool_message(tool_name: str) -> str:
    """The error of a call of a tool this agent does not have."""
    return f"unknown tool {tool_name}"


def _encode_run_state(model_calls: int) -> str:
    return dump_json_text({_RUN_STATE_KEY: model_calls})


def _decode_run_state(run_state: str | None) -> int:
    """The turn's model call count so far; the stored messages hold everything else."""
    if run_state is None:
        return 0
    try:
        decoded = json.loads(run_state)
    except ValueError:
        decoded = None
    count = decoded.get(_RUN_STATE_KEY) if isinstance(decoded, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"framework run state {run_state[:80]!r} is not a Stepwise run state")
    return count


class StepwiseAgentRunner:
    """The runner of a Stepwise agent: builds each model input from committed state only.

    Each ``run_model_step`` makes exactly one model call through the definition's ModelClient.
    The model input is the instructions, every stored item, and the results of the previous model
    response from the turn's final records; every stored tool call is paired with a result, and a
    missing one reads as the outcome-unknown text. The turn's items are stored as they appear
    (``ToolCallsRequested.new_messages``), so the framework run state holds only the turn's model
    call count. Every function tool call runs later in its own tool Step.

    Example:
        >>> runner = StepwiseAgentRunner(support_agent)
        >>> flow = AgentSessionFlow(runner, flow_type="SupportAgent",
        ...                         options=stepwise_agent_session_options(support_agent))
    """

    def __init__(self, definition: AgentDefinition) -> None:
        if not isinstance(definition, AgentDefinition):
            raise TypeError(
                f"StepwiseAgentRunner needs an AgentDefinition, got {type(definition).__name__}"
            )
        self._definition = definition
        self._tools = dict(definition.tools_by_name)

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
            ValueError: When a function tool uses the name of a built-in tool the session enables,
                before any model request, or when the run state is not Stepwise's.
            Exception: Whatever the model client or the instructions function raises.
        """
        model_calls = _decode_run_state(turn.framework_run_state)
        check_built_in_tool_names(set(self._tools), turn.enabled_built_in_tools)
        transcript = read_transcript(turn.messages, lambda call: OUTCOME_UNKNOWN_TOOL_RESULT)
        previous_results = [
            self._recorded_result(turn, call) for call in transcript.unanswered_calls
        ]
        at_limit = model_calls >= self._definition.max_model_calls_per_turn
        request = ModelRequest(
            instructions=await self._instructions(turn),
            input=(*transcript.input, *previous_results),
            tools=() if at_limit else self._offered_tools(turn),
            settings=self._definition.model_settings,
        )
        model = self._definition.model_for(turn.session_settings)
        response = await model.call_model(request, turn.events)
        model_calls += 1
        response_key = f"{turn.turn_id}/{model_calls}"
        new_messages = [tool_result_message(result) for result in previous_results]
        new_messages.extend(model_output_message(item, response_key) for item in response.items)
        calls = response.tool_calls
        metadata = _metadata(response)
        if calls and not at_limit:
            return ToolCallsRequested(
                framework_run_state=_encode_run_state(model_calls),
                tool_calls=tuple(self._deferred(turn, call) for call in calls),
                usage=response.usage,
                new_messages=tuple(new_messages),
                model_call_metadata=metadata,
            )
        limit_text = model_call_limit_tool_result(self._definition.max_model_calls_per_turn)
        new_messages.extend(
            tool_result_message(ModelToolResult(call.tool_call_id, call.tool_name, limit_text))
            for call in calls
        )
        return TurnCompleted(
            new_messages=tuple(new_messages), usage=response.usage, model_call_metadata=metadata
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Runs one function tool call with a ToolCallContext.

        Raises:
            ToolExecutionError: For an unknown tool, invalid arguments, or when the tool raises it.
            Exception: Whatever else the tool raises, handled by the call's effect.
        """
        record = call.tool_call
        tool = self._tools.get(record.tool_name)
        if tool is None:
            raise ToolExecutionError(unknown_tool_message(record.tool_name))
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
        return await tool.invoke(record.arguments, context)

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
            raise TypeError(f"the instructions function returned {type(text).__name__}, not a str")
        return text

    def _offered_tools(self, turn: AgentTurnContext) -> tuple[ModelToolDefinition, ...]:
        function_tools = tuple(tool.definition() for tool in self._tools.values())
        return function_tools + built_in_tool_definitions(turn.enabled_built_in_tools)

    def _deferred(self, turn: AgentTurnContext, call: ModelToolCall) -> DeferredToolCall:
        return DeferredToolCall(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            arguments=call.arguments,
            policy=self._policy(turn, call.tool_name),
        )

    def _policy(self, turn: AgentTurnContext, tool_name: str) -> ResolvedToolPolicy:
        if tool_name in turn.enabled_built_in_tools:
            # The session routes built-in calls to their own Steps, read and without approval.
            return turn.resolve_tool_policy(tool_name, ToolEffect.READ)
        tool = self._tools.get(tool_name)
        if tool is None:
            # Fails at once as an unknown tool in its tool Step; nothing to approve.
            return ResolvedToolPolicy(ToolEffect.UNCLASSIFIED, requires_approval=False)
        policy = turn.resolve_tool_policy(tool_name, tool.effect)
        if tool_name in turn.tool_policies or tool.requires_approval is None:
            return policy
        return ResolvedToolPolicy(policy.effect, tool.requires_approval)

    @staticmethod
    def _recorded_result(turn: AgentTurnContext, call: ModelToolCall) -> ModelToolResult:
        record = turn.recorded_tool_call(call.tool_call_id)
        if record is None or not record.status.is_final:
            output = OUTCOME_UNKNOWN_TOOL_RESULT
        else:
            output = describe_tool_call_outcome(record)
        return ModelToolResult(call.tool_call_id, call.tool_name, output)


def _metadata(response: ModelResponse) -> ModelCallMetadata:
    return ModelCallMetadata(
        request_model=response.request_model,
        response_model=response.response_model,
        provider_name=response.provider_name,
        response_id=response.response_id,
        finish_reasons=response.finish_reasons,
    )
