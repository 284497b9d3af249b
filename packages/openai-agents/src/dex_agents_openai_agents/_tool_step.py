"""One deferred ``FunctionTool`` call inside its tool Step, the way the SDK would run it.

The tool's input guardrails run first, then the tool through the SDK's ``invoke_function_tool``
(its timeout included), then its output guardrails; the output becomes the text of the SDK's
``function_call_output``. A tool may also return ``ToolInputRequested`` or ``ToolTaskStarted``,
which go to the session unchanged.

Failures follow the session's rules, not the SDK's default message ("An error occurred while
running the tool. Please try again."), which would invite the model to repeat a write that may
have taken effect:

- a ``ToolExecutionError`` the tool raised, and arguments that are not valid for the tool's schema,
  are recorded ``failed`` with their message, which the model sees;
- any other exception fails the Step, so the call's effect decides: ``CallTool`` retries a read
  or an idempotent write, and a call that still fails records ``failed`` (a read) or
  ``outcome_unknown`` (a write), as does a single-attempt call at once;
- a ``failure_error_function`` the tool sets itself is the application's choice and is honored:
  its message becomes the call's result.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Final

from agents import (
    Agent,
    FunctionTool,
    ItemHelpers,
    ModelBehaviorError,
    RunConfig,
    RunContextWrapper,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
)
from agents.tool import (
    default_tool_error_function,
    invoke_function_tool,
    resolve_function_tool_failure_error_function,
    set_function_tool_failure_error_function,
)
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolGuardrailFunctionOutput
from dex_agents import (
    DeferredToolExecution,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskStarted,
)
from dex_agents.adapters import invalid_arguments_error, tool_arguments_object
from openai.types.responses import ResponseFunctionToolCall

from dex_agents_openai_agents._transcript import output_text

__all__ = ["ToolStepOutcome", "run_function_tool"]

ToolStepOutcome = ToolExecutionResult | ToolInputRequested | ToolTaskStarted

# The SDK's own message start for arguments that fail JSON parsing or the tool's schema.
_SDK_INVALID_ARGUMENTS_PREFIX: Final = "Invalid JSON input for tool"


async def run_function_tool(
    tool: FunctionTool,
    agent: Agent[Any],
    call: DeferredToolExecution,
    *,
    context: object,
    run_config: RunConfig,
) -> ToolStepOutcome:
    """Run one call of ``tool`` of ``agent``.

    Raises:
        ToolExecutionError: For invalid arguments, a ``ToolExecutionError`` of the tool, or a
            tool guardrail that rejected the call or its output with an exception.
        Exception: Whatever else the tool raises when its failure policy lets it.
    """
    record = call.tool_call
    _check_arguments(record.tool_name, record.arguments)
    raw_call = ResponseFunctionToolCall(
        type="function_call",
        call_id=record.tool_call_id,
        name=record.tool_name,
        arguments=record.arguments,
    )
    tool_context: ToolContext[Any] = ToolContext(
        context,
        tool_name=record.tool_name,
        tool_call_id=record.tool_call_id,
        tool_arguments=record.arguments,
        tool_call=raw_call,
        agent=agent,
        run_config=run_config,
    )
    rejected = await _input_guardrail_rejection(tool, agent, tool_context)
    if rejected is not None:
        return ToolExecutionResult(rejected)
    output = await invoke_function_tool(
        function_tool=_with_dex_failures(tool),
        context=tool_context,
        arguments=record.arguments,
    )
    if isinstance(output, ToolInputRequested | ToolTaskStarted):
        return output
    output = await _output_guardrail_result(tool, agent, tool_context, output)
    converted = ItemHelpers.tool_call_output_item(
        raw_call, output, output_json_schema=tool.output_json_schema
    )
    return ToolExecutionResult(output_text(converted["output"]))  # type: ignore[arg-type]


def _check_arguments(tool_name: str, arguments: str) -> None:
    tool_arguments_object(tool_name, arguments)


def _with_dex_failures(tool: FunctionTool) -> FunctionTool:
    """A copy of ``tool`` whose failure policy follows the session's rules (module docstring)."""
    original = resolve_function_tool_failure_error_function(tool)

    async def on_failure(context: RunContextWrapper[Any], error: Exception) -> str:
        if isinstance(error, ToolExecutionError):
            raise error
        if isinstance(error, ModelBehaviorError) and str(error).startswith(
            _SDK_INVALID_ARGUMENTS_PREFIX
        ):
            raise invalid_arguments_error(tool.name, str(error)) from error
        if original is None or original is default_tool_error_function:
            raise error
        message = original(context, error)
        return str(await message) if inspect.isawaitable(message) else str(message)

    guarded = copy.copy(tool)
    set_function_tool_failure_error_function(guarded, on_failure)
    return guarded


async def _input_guardrail_rejection(
    tool: FunctionTool, agent: Agent[Any], context: ToolContext[Any]
) -> str | None:
    data = ToolInputGuardrailData(context=context, agent=agent)
    checks = [(g.get_name(), partial(g.run, data)) for g in tool.tool_input_guardrails or ()]
    return await _first_rejection(checks, f"the call of {tool.name}")


async def _output_guardrail_result(
    tool: FunctionTool, agent: Agent[Any], context: ToolContext[Any], output: Any
) -> Any:
    data = ToolOutputGuardrailData(context=context, agent=agent, output=output)
    checks = [(g.get_name(), partial(g.run, data)) for g in tool.tool_output_guardrails or ()]
    rejection = await _first_rejection(checks, f"the result of {tool.name}")
    return output if rejection is None else rejection


async def _first_rejection(
    checks: Sequence[tuple[str, Callable[[], Awaitable[ToolGuardrailFunctionOutput]]]],
    subject: str,
) -> str | None:
    """Run the guardrails in order; the first rejection's message, or ``None`` when all allow.

    A guardrail that raises stops the call with a failed result, where the SDK would fail its run.
    """
    for name, check in checks:
        behavior = (await check()).behavior
        if behavior["type"] == "raise_exception":
            raise ToolExecutionError(f"tool guardrail {name} stopped {subject}")
        if behavior["type"] == "reject_content":
            return str(behavior["message"])
    return None
