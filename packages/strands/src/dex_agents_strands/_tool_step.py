"""One tool Step: the call runs as Strands' tool executor would run it, nothing else.

The Step looks the tool up in the agent's registry, checks the arguments against its input
schema (the kit's error policy), fires the agent's ``BeforeToolCallEvent`` hooks, streams the tool
(a ``@tool`` function gets its ``ToolContext``), and fires the ``AfterToolCallEvent`` hooks, which
may replace the result. Strands' human-in-the-loop idioms keep working in a durable session:

- an interrupt (``event.interrupt(...)`` in a ``BeforeToolCallEvent`` hook, for an approval, or
  ``tool_context.interrupt(...)`` in a tool, for a question) becomes a session question
  (``ToolInputRequested``); the person's answer is the interrupt's response when the Step runs the
  call again, so the hook or tool reads it where Strands would hand it back;
- ``event.cancel_tool`` fails the call with its message, as Strands sends it to the model.

A tool that starts remote work returns ``dex_tool_result(ToolTaskStarted(...))``, which the
runner's task poller for that tool polls.
"""

from __future__ import annotations

import copy
import json
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from dex_agents import (
    ConfigurationTypeError,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
)
from dex_agents.adapters import checked_tool_call, tool_question_answers, unknown_tool_error
from dex_agents.exceptions import StoredStateError
from strands import Agent
from strands.hooks import AfterToolCallEvent, BeforeToolCallEvent
from strands.interrupt import Interrupt
from strands.types._events import ToolInterruptEvent, ToolResultEvent
from strands.types.tools import AgentTool, ToolResult, ToolUse

from dex_agents_strands._transcript import tool_result_text

__all__ = ["IDEMPOTENCY_KEY_STATE", "dex_tool_result", "run_tool_step"]

IDEMPOTENCY_KEY_STATE: Final = "dex_idempotency_key"
"""The ``invocation_state`` key (``tool_context.invocation_state``) of the call's idempotency key,
``<flow_id>/<turn_id>/<tool_call_id>``."""

_OUTCOME_KEY: Final = "dex_agents_outcome"
_INTERRUPTS_CONTINUATION: Final = "strands:interrupts:"


def dex_tool_result(outcome: DeferredToolOutcome) -> ToolResult:
    """The ``ToolResult`` a Strands tool returns to hand the session a runner outcome: most often
    ``ToolTaskStarted`` for remote work the runner's task poller polls.

    Raises:
        ConfigurationTypeError: When ``outcome`` is not one of the three outcomes.

    Example:
        >>> @tool
        ... async def report(period: str) -> ToolResult:
        ...     return dex_tool_result(ToolTaskStarted(await start_job(period), 5))
    """
    if not isinstance(outcome, DeferredToolOutcome):
        raise ConfigurationTypeError(
            f"dex_tool_result takes ToolTaskStarted, ToolInputRequested or ToolExecutionResult, "
            f"got {type(outcome).__name__}"
        )
    result: dict[str, Any] = {
        "toolUseId": "",
        "status": "success",
        "content": [{"text": repr(outcome)}],
        _OUTCOME_KEY: outcome,
    }
    return cast(ToolResult, result)


async def run_tool_step(agent: Agent, call: DeferredToolExecution) -> DeferredToolOutcome:
    """Run the real tool of ``call`` once, with the agent's tool hooks.

    Raises:
        ToolExecutionError: For an unknown tool, invalid arguments, a tool that raised
            ``ToolExecutionError`` or returned an ``error`` result, or a call a hook cancelled.
        Exception: Whatever else the tool raises (a Step failure, handled by the call's effect).
    """
    record = call.tool_call
    name = record.tool_name
    tool, arguments = checked_tool_call(_tools(agent), name, record.arguments, _input_schema)
    asked = _asked_interrupts(call)
    step_agent = _step_agent(agent, asked, call)
    tool_use: ToolUse = {"toolUseId": record.tool_call_id, "name": name, "input": arguments}
    state: dict[str, Any] = {"agent": step_agent, IDEMPOTENCY_KEY_STATE: call.idempotency_key}
    before, interrupts = await agent.hooks.invoke_callbacks_async(
        BeforeToolCallEvent(
            agent=step_agent, selected_tool=tool, tool_use=tool_use, invocation_state=state
        )
    )
    if interrupts:
        return _question(name, asked, interrupts[0])
    if before.cancel_tool:
        message = before.cancel_tool
        raise ToolExecutionError(
            message if isinstance(message, str) else f"tool {name} was cancelled by a hook"
        )
    selected = before.selected_tool
    if selected is None:
        raise unknown_tool_error(name)
    result: ToolResultEvent | None = None
    async for event in selected.stream(before.tool_use, state):
        if isinstance(event, ToolInterruptEvent):
            return _question(name, asked, event.interrupts[0])
        if isinstance(event, ToolResultEvent):
            result = event
    if result is None:
        raise ToolExecutionError(f"tool {name} returned no result")
    after, _ = await agent.hooks.invoke_callbacks_async(
        AfterToolCallEvent(
            agent=step_agent,
            selected_tool=selected,
            tool_use=before.tool_use,
            invocation_state=state,
            result=result.tool_result,
            exception=result.exception,
        )
    )
    return _outcome(after.result, after.exception)


def _tools(agent: Agent) -> Mapping[str, AgentTool]:
    registry = agent.tool_registry
    return ChainMap(registry.dynamic_tools, registry.registry)


def _input_schema(tool: AgentTool) -> dict[str, Any] | None:
    schema: dict[str, Any] | None = tool.tool_spec.get("inputSchema", {}).get("json")
    return schema


@dataclass
class _StepInterrupts:
    """The interrupt state a hook or tool reads in this Step: the interrupts the call raised in
    earlier runs, each with the person's answer as its response."""

    interrupts: dict[str, Interrupt] = field(default_factory=dict)


def _step_agent(agent: Agent, asked: list[tuple[str, str]], call: DeferredToolExecution) -> Agent:
    """A shallow copy of the agent whose interrupt state is this call's alone, so concurrent
    Steps of other sessions on this Worker never see each other's answers."""
    state = _StepInterrupts()
    for (interrupt_id, name), text in zip(asked, tool_question_answers(call), strict=False):
        state.interrupts[interrupt_id] = Interrupt(interrupt_id, name, None, text)
    step_agent = copy.copy(agent)
    # Strands' interrupt() reads agent._interrupt_state.interrupts; nothing else here uses it.
    setattr(step_agent, "_interrupt_state", state)  # noqa: B010
    return step_agent


def _asked_interrupts(call: DeferredToolExecution) -> list[tuple[str, str]]:
    """``(interrupt id, name)`` of every interrupt the call raised so far, oldest first."""
    continuation = call.tool_call.input_continuation or ""
    if not continuation.startswith(_INTERRUPTS_CONTINUATION):
        return []
    try:
        pairs = json.loads(continuation.removeprefix(_INTERRUPTS_CONTINUATION))
        return [(str(interrupt_id), str(name)) for interrupt_id, name in pairs]
    except (ValueError, TypeError) as error:
        raise StoredStateError(
            f"tool call {call.tool_call.tool_call_id} has a continuation {continuation[:80]!r} "
            "that is not a Strands runner's list of interrupts"
        ) from error


def _question(tool: str, asked: list[tuple[str, str]], interrupt: Interrupt) -> ToolInputRequested:
    reason = interrupt.reason
    continuation = _INTERRUPTS_CONTINUATION + json.dumps([*asked, (interrupt.id, interrupt.name)])
    if isinstance(reason, Mapping) and str(reason.get("question") or "").strip():
        choices = reason.get("choices")
        return ToolInputRequested(
            str(reason["question"]),
            choices=tuple(str(c) for c in choices) if isinstance(choices, list | tuple) else (),
            allows_free_text=bool(reason.get("allows_free_text", True)),
            continuation=continuation,
        )
    if isinstance(reason, str) and reason.strip():
        return ToolInputRequested(reason, continuation=continuation)
    detail = f": {json.dumps(reason, default=str)}" if reason is not None else ""
    return ToolInputRequested(
        f"{tool} asks for {interrupt.name}{detail}", continuation=continuation
    )


def _outcome(result: ToolResult, exception: Exception | None) -> DeferredToolOutcome:
    outcome = cast(Mapping[str, Any], result).get(_OUTCOME_KEY)
    if isinstance(outcome, DeferredToolOutcome):
        return outcome
    if isinstance(exception, ToolExecutionError):
        raise exception
    if exception is not None:
        # Strands would send the error to the model; in a session the call's effect decides.
        raise exception
    text = tool_result_text(result)
    if result.get("status") == "error":
        raise ToolExecutionError(text)
    return ToolExecutionResult(text)
