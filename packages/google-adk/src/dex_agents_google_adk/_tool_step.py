"""What runs inside a tool Step: one deferred call through ADK's tool pipeline.

The call runs with a real ``ToolContext`` in an activation rebuilt from the session's stored
messages (``open_activation``), so ADK's tool callbacks and plugins run as they would without Dex.
ADK's ``request_confirmation`` becomes the session's question, and its answer the
``ToolConfirmation`` of the call's rerun.
"""

from __future__ import annotations

from typing import Any, Final

from dex_agents import (
    AgentToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    RunnerContractError,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
)
from dex_agents.adapters import checked_tool_call, tool_question_answers
from google.adk.events import Event
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from dex_agents_google_adk._tool_activation import AdkActivation
from dex_agents_google_adk._transcript import function_response_output

__all__ = ["run_tool_step"]

_CONFIRMED_ANSWER: Final = "yes"
_CONFIRMATION_CHOICES: Final = ("yes", "no")


async def run_tool_step(
    activation: AdkActivation, call: DeferredToolExecution
) -> DeferredToolOutcome:
    """Runs one tool call through ADK's tool pipeline in ``activation``.

    Raises:
        ToolExecutionError: When ADK answers with an error (unknown tool, missing arguments, a
            tool's own ``{"error": ...}``), the arguments are not a JSON object, the tool asks
            for end-user credentials, or the tool raises it.
        Exception: Whatever else the tool raises, handled by the call's effect.
    """
    record = call.tool_call
    # ADK hands the arguments to the function unchecked; check them as every runner does.
    _, arguments = checked_tool_call(
        activation.tools, record.tool_name, record.arguments, _declared_schema
    )
    function_call = types.FunctionCall(
        id=record.tool_call_id, name=record.tool_name, args=arguments
    )
    event = await activation.run_tool_call(
        function_call, _answered_confirmation(call), approved=record.requires_approval
    )
    return _tool_outcome(record, event)


def _declared_schema(tool: BaseTool) -> dict[str, Any] | None:
    declaration = tool._get_declaration()
    return None if declaration is None else declaration.parameters_json_schema


def _answered_confirmation(call: DeferredToolExecution) -> ToolConfirmation | None:
    """The ADK confirmation a rerun of the call carries: the user's last answer to the question
    the tool asked with ``request_confirmation``, with the hint and payload it asked with."""
    answers = tool_question_answers(call)
    if not answers:
        return None
    answer = answers[-1]
    requested = _requested_confirmation(call.tool_call.input_continuation)
    return ToolConfirmation(
        hint=requested.hint, payload=requested.payload, confirmed=answer == _CONFIRMED_ANSWER
    )


def _requested_confirmation(continuation: str | None) -> ToolConfirmation:
    if not continuation:
        return ToolConfirmation()
    try:
        return ToolConfirmation.model_validate_json(continuation)
    except ValueError:
        return ToolConfirmation()


def _tool_outcome(record: AgentToolCall, event: Event | None) -> DeferredToolOutcome:
    name = record.tool_name
    if event is None:
        raise ToolExecutionError(
            f"tool {name} returned nothing; a long-running ADK tool must return its result, or "
            "a ToolTaskStarted that its poll_tool_task polls"
        )
    if event.actions.requested_auth_configs:
        raise ToolExecutionError(
            f"tool {name} asked for end-user credentials, which this session cannot provide"
        )
    requested = event.actions.requested_tool_confirmations.get(record.tool_call_id)
    if requested is not None:
        return ToolInputRequested(
            requested.hint or f"Run {name} with {record.arguments}?",
            choices=_CONFIRMATION_CHOICES,
            allows_free_text=False,
            continuation=requested.model_dump_json(exclude_none=True),
        )
    response = _function_response(event, record.tool_call_id)
    result = response.get("result")
    # Every AdapterRunner polls tasks; the session records a task no poller polls.
    if len(response) == 1 and isinstance(result, DeferredToolOutcome):
        return result
    error = response.get("error")
    if len(response) == 1 and isinstance(error, str):
        raise ToolExecutionError(error)
    return ToolExecutionResult(function_response_output(response))


def _function_response(event: Event, call_id: str) -> dict[str, Any]:
    for response in event.get_function_responses():
        if response.id == call_id:
            return dict(response.response or {})
    raise RunnerContractError(f"ADK answered tool call {call_id} with no function response")
