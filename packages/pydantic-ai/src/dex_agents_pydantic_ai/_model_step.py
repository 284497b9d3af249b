"""One ``RunModel`` Step: the agent's graph driven node by node, stopped after one model request.

The Step starts a Pydantic AI run over the stored history. Without run state it resumes the turn's
user request; with run state it passes the tool results as ``DeferredToolResults``, so Pydantic
AI's ``CallToolsNode`` records them exactly as it records deferred results. The node loop then
runs one ``ModelRequestNode`` (the Step's one model call) and looks at the response before its
``CallToolsNode`` runs: every call of a function tool, an MCP tool, a built-in tool or an unknown
name becomes a ``DeferredToolCall`` and the Step returns; only output tool calls and text go on to
the ``CallToolsNode``, which ends the run with the agent's output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    CONTEXT_SUMMARY_NOTE_HEADER,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DexAgentsError,
    InteractionMode,
    ToolCallsRequested,
    TurnCompleted,
    build_plan_note,
    estimate_text_tokens,
)
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.capabilities import ReinjectSystemPrompt
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.run import AgentRun
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset
from pydantic_core import to_json
from pydantic_graph import End

from dex_agents_pydantic_ai._model_calls import agent_usage, model_call_metadata
from dex_agents_pydantic_ai._run_state import PydanticAIRunState, deferred_tool_results
from dex_agents_pydantic_ai._runner_config import DepsRequest, RunnerConfig
from dex_agents_pydantic_ai._step_capability import StepCapability
from dex_agents_pydantic_ai._tool_policies import tool_call_policy
from dex_agents_pydantic_ai._transcript import decode_history, encode_messages, user_request

__all__ = ["ModelOutputRetryError", "StepObservation", "model_input", "run_model_step"]

_BUILT_IN_TOOLSET_ID: Final = "dex_agents_built_in_tools"


class ModelOutputRetryError(DexAgentsError):
    """The model's answer failed the agent's output validation.

    Pydantic AI would send a retry prompt, a second model request; a ``RunModel`` Step makes one,
    so the attempt fails instead and ``RunModel`` retries the call (then the turn fails).
    """


class StepObservation:
    """What the last model request of this runner offered, for estimates without a model call."""

    def __init__(self) -> None:
        self.fixed_input_tokens = 0


def model_input(turn: AgentTurnContext) -> list[ModelMessage]:
    """The history a model call of ``turn`` sends: the summary note, the stored messages, and the
    plan note before the turn's messages."""
    messages = turn.messages
    start = next(
        (index for index, message in enumerate(messages) if message.turn_id == turn.turn_id),
        len(messages),
    )
    history: list[ModelMessage] = []
    if turn.context_summary is not None:
        history.append(user_request(f"{CONTEXT_SUMMARY_NOTE_HEADER}\n{turn.context_summary.text}"))
    history.extend(decode_history(messages[:start]))
    plan_note = build_plan_note(turn.plan, turn.interaction_mode)
    if plan_note is not None:
        history.append(user_request(plan_note))
    history.extend(decode_history(messages[start:]))
    return history


async def run_model_step(
    config: RunnerConfig[Any], turn: AgentTurnContext, observation: StepObservation
) -> AgentTurnOutcome:
    """Make the turn's next model call through the agent's own graph.

    Raises:
        ValueError: When the run state or a stored message is not this runner's.
        ModelOutputRetryError: When the answer fails output validation.
        Exception: Whatever Pydantic AI or the model raises (the attempt fails and retries).
    """
    run_state = turn.framework_run_state
    state = PydanticAIRunState.decode(run_state) if run_state is not None else None
    capability = StepCapability(planning=turn.interaction_mode is InteractionMode.PLANNING)
    deps = await config.deps_for(DepsRequest(turn.flow_id, turn.turn_id, turn.session_settings))
    async with config.agent.iter(
        None,
        message_history=model_input(turn),
        deferred_tool_results=(
            deferred_tool_results(state.requests, turn.tool_calls) if state else None
        ),
        model=config.model_for(turn.session_settings),
        deps=deps,
        usage=state.usage if state else None,
        usage_limits=config.usage_limits,
        toolsets=_built_in_toolsets(turn),
        capabilities=[ReinjectSystemPrompt(), capability],
        conversation_id=turn.flow_id,
    ) as run:
        outcome = await _drive(config, run, turn, capability)
    observation.fixed_input_tokens = _offered_tokens(capability)
    return outcome


async def _drive(
    config: RunnerConfig[Any],
    run: AgentRun[Any, Any],
    turn: AgentTurnContext,
    capability: StepCapability,
) -> AgentTurnOutcome:
    node = run.next_node
    response: ModelResponse | None = None
    while not isinstance(node, End):
        if Agent.is_model_request_node(node):
            if response is not None:
                raise ModelOutputRetryError(_retry_feedback(node.request.parts))
            node = await _request(config, run, node, turn)
            assert Agent.is_call_tools_node(node)
            response = node.model_response
            continue
        if response is not None and Agent.is_call_tools_node(node):
            deferred = [
                call
                for call in response.tool_calls
                if call.tool_name not in capability.output_tools
            ]
            if deferred:
                return _tool_calls_requested(run, turn, capability, response, deferred)
        node = await run.next(node)
    return TurnCompleted(
        new_messages=encode_messages(
            run.new_messages(), output_tool_names=frozenset(capability.output_tools)
        ),
        usage=agent_usage(response),
        model_call_metadata=model_call_metadata(capability.model, response),
    )


async def _request(
    config: RunnerConfig[Any], run: AgentRun[Any, Any], node: Any, turn: AgentTurnContext
) -> Any:
    """Run the model request node, writing its text as it streams; the next node.

    A model that cannot stream (``FunctionModel`` without ``stream_function``, a model without
    ``request_stream``) gets a plain request, as ``agent.run`` would make."""
    if not config.stream or not model_streams(run.ctx.deps.model):
        next_node = await run.next(node)
        if Agent.is_call_tools_node(next_node) and next_node.model_response.text:
            turn.events.write_text_delta(next_node.model_response.text)
        return next_node
    async with node.stream(run.ctx) as events:
        async for event in events:
            _write_event(turn, event)
    return await run.next(node)


def model_streams(model: object) -> bool:
    """Whether ``model`` can answer a streamed request (wrappers such as instrumentation are
    looked through).

    Example:
        >>> model_streams(FunctionModel(lambda messages, info: reply))
        False
    """
    while isinstance(model, WrapperModel):
        model = model.wrapped
    if isinstance(model, FunctionModel):
        return model.stream_function is not None
    return isinstance(model, Model) and type(model).request_stream is not Model.request_stream


def _write_event(turn: AgentTurnContext, event: object) -> None:
    if isinstance(event, PartStartEvent):
        if isinstance(event.part, TextPart) and event.part.content:
            turn.events.write_text_delta(event.part.content)
        elif isinstance(event.part, ThinkingPart) and event.part.content:
            turn.events.write_reasoning_delta(event.part.content)
    elif isinstance(event, PartDeltaEvent):
        delta = event.delta
        if isinstance(delta, TextPartDelta) and delta.content_delta:
            turn.events.write_text_delta(delta.content_delta)
        elif isinstance(delta, ThinkingPartDelta) and delta.content_delta:
            turn.events.write_reasoning_delta(delta.content_delta)


def _tool_calls_requested(
    run: AgentRun[Any, Any],
    turn: AgentTurnContext,
    capability: StepCapability,
    response: ModelResponse,
    deferred: Sequence[Any],
) -> ToolCallsRequested:
    offered: dict[str, ToolDefinition] = capability.function_tools
    tool_calls = [
        DeferredToolCall(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            arguments=call.args_as_json_str(),
            policy=tool_call_policy(turn, call.tool_name, offered.get(call.tool_name)),
        )
        for call in deferred
    ]
    state = PydanticAIRunState(DeferredToolRequests(calls=list(deferred)), run.usage)
    return ToolCallsRequested(
        framework_run_state=state.encode(),
        tool_calls=tool_calls,
        usage=agent_usage(response),
        new_messages=encode_messages(
            run.new_messages(), output_tool_names=frozenset(capability.output_tools)
        ),
        model_call_metadata=model_call_metadata(capability.model, response),
    )


def _built_in_toolsets(turn: AgentTurnContext) -> list[AbstractToolset[Any]]:
    definitions = [
        ToolDefinition(
            name=definition.name.value,
            description=definition.description,
            parameters_json_schema=dict(definition.parameters),
        )
        for definition in BUILT_IN_TOOL_DEFINITIONS
        if definition.name.value in turn.enabled_built_in_tools
    ]
    if not definitions:
        return []
    # External tools: Pydantic AI never runs them; the session routes their calls.
    return [ExternalToolset(definitions, id=_BUILT_IN_TOOLSET_ID)]


def _retry_feedback(parts: Sequence[Any]) -> str:
    feedback = "; ".join(
        part.model_response() if hasattr(part, "model_response") else str(part) for part in parts
    )
    return (
        "the model's answer did not pass the agent's output validation, and a RunModel Step "
        f"makes one model call, so the call is retried instead of sending a retry prompt: {feedback}"
    )


def _offered_tokens(capability: StepCapability) -> int:
    tools = [*capability.function_tools.values(), *capability.output_tools.values()]
    schemas = to_json(
        [
            {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters_json_schema,
            }
            for tool in tools
        ]
    ).decode()
    return estimate_text_tokens(capability.instructions) + estimate_text_tokens(schemas)
