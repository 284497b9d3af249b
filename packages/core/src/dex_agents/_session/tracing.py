"""The session's side of tracing: the ``AgentTraceContext`` Attribute and the activation roots.

An activation's first Step emits its ``invoke_agent`` root through :func:`begin_activation`,
which stores the root's traceparent in ``AgentTraceContext`` in the same commit as the Step (or
deletes the stored value when the root has no valid context, so the activation's later spans
start traces of their own instead of joining the previous activation's trace).
:func:`activation_root` reads it back for the ``chat`` spans and the tool call records.
"""

from __future__ import annotations

from collections.abc import Sequence

from dex import Context

from dex_agents._runner_contract import (
    AgentTurnContext,
    AgentTurnOutcome,
    ContextSummaryRequest,
    ContextSummaryResult,
    ToolCallsRequested,
)
from dex_agents._session.persistence import AGENT_TRACE_CONTEXT
from dex_agents._session.records import tool_calls_in_order
from dex_agents._session.runtime import SessionRuntime
from dex_agents._tracing.content import (
    input_messages_json,
    message_json,
    output_messages_json,
    summary_output_json,
    tool_request_output_json,
)
from dex_agents._tracing.session_tracing import (
    ActivationTrigger,
    ModelCallSpan,
    StepIdentity,
    ToolCallSpan,
)
from dex_agents._values import AgentMessage, AgentToolCall, message_sequence_key

__all__ = [
    "activation_root",
    "begin_activation",
    "begin_user_message_activation",
    "complete_model_call_span",
    "complete_summary_call_span",
    "model_call_span",
    "summary_call_span",
    "tool_call_span",
]


def activation_root(context: Context) -> str | None:
    """The traceparent of the current activation's root, or ``None`` when none is stored."""
    return AGENT_TRACE_CONTEXT.get(context) or None


def begin_activation(
    context: Context,
    runtime: SessionRuntime,
    step: StepIdentity,
    trigger: ActivationTrigger,
    *,
    user_messages: Sequence[AgentMessage] = (),
    interrupt_id: str | None = None,
    approved: bool | None = None,
) -> str | None:
    """Emit the activation's ``invoke_agent`` root and store its traceparent; return it.

    The root links to the previous activation's root. Without a valid root, a stored value is
    deleted; with tracing off and nothing stored, nothing is written.
    """
    previous = activation_root(context)
    root = runtime.tracing.emit_activation(
        step,
        trigger,
        previous_root=previous,
        user_message_key=(
            message_sequence_key(user_messages[0].sequence) if user_messages else None
        ),
        user_messages=(lambda: message_json(user_messages)) if user_messages else None,
        interrupt_id=interrupt_id,
        approved=approved,
    )
    if root is not None:
        AGENT_TRACE_CONTEXT.set(context, root)
    elif previous is not None:
        AGENT_TRACE_CONTEXT.delete(context)
    return root


def begin_user_message_activation(
    context: Context,
    runtime: SessionRuntime,
    step_type: str,
    turn_id: str,
    user_messages: Sequence[AgentMessage],
) -> None:
    """Begin the activation of a turn that a user message starts."""
    begin_activation(
        context,
        runtime,
        StepIdentity.of(context, step_type, turn_id),
        ActivationTrigger.USER_MESSAGE,
        user_messages=user_messages,
    )


def _last_key(messages: Sequence[AgentMessage]) -> str | None:
    return message_sequence_key(messages[-1].sequence) if messages else None


def model_call_span(
    context: Context, runtime: SessionRuntime, step_type: str, turn: AgentTurnContext
) -> ModelCallSpan:
    """The ``chat`` span of a ``RunModel`` attempt, under the activation's root."""
    return runtime.tracing.model_call(
        StepIdentity.of(context, step_type, turn.turn_id),
        parent=activation_root(context),
        input_last_key=_last_key(turn.messages),
        input_messages=lambda: input_messages_json(
            turn.messages, tool_calls_in_order(turn.tool_calls)
        ),
    )


def _produced(stored: Sequence[AgentMessage]) -> list[AgentMessage]:
    # What this call produced: the stored messages after the turn's last tool result.
    last_result = max(
        (index for index, message in enumerate(stored) if message.tool_output is not None),
        default=-1,
    )
    return list(stored[last_result + 1 :])


def complete_model_call_span(
    span: ModelCallSpan, outcome: AgentTurnOutcome, stored: Sequence[AgentMessage]
) -> None:
    """End a returned model call's span with what it produced, once the Step stored it."""
    produced = _produced(stored)
    metadata = outcome.model_call_metadata
    reasons = metadata.finish_reasons if metadata is not None else ()
    if isinstance(outcome, ToolCallsRequested):
        calls = outcome.tool_calls
        span.completed(
            outcome.usage,
            metadata,
            output_keys=[message_sequence_key(message.sequence) for message in produced],
            requested_tool_call_ids=[call.tool_call_id for call in calls],
            output_messages=lambda: tool_request_output_json(produced, calls, reasons),
        )
        return
    span.completed(
        outcome.usage,
        metadata,
        output_keys=[message_sequence_key(message.sequence) for message in produced],
        output_messages=lambda: output_messages_json(produced, reasons),
    )


def summary_call_span(
    context: Context, runtime: SessionRuntime, step_type: str, request: ContextSummaryRequest
) -> ModelCallSpan:
    """The ``chat`` span of a ``CompactContext`` attempt: its input is what it summarizes."""
    messages = request.messages
    return runtime.tracing.model_call(
        StepIdentity.of(context, step_type, request.turn_id),
        parent=activation_root(context),
        input_last_key=_last_key(messages),
        input_messages=lambda: message_json(messages),
    )


def complete_summary_call_span(span: ModelCallSpan, result: ContextSummaryResult) -> None:
    """End a returned summary call's span with the summary text."""
    metadata = result.model_call_metadata
    reasons = metadata.finish_reasons if metadata is not None else ()
    span.completed(
        result.usage,
        metadata,
        output_messages=lambda: summary_output_json(result.text, reasons),
    )


def tool_call_span(
    context: Context, runtime: SessionRuntime, step_type: str, record: AgentToolCall
) -> ToolCallSpan:
    """The ``execute_tool`` span of a tool attempt, under the root on ``record``."""
    return runtime.tracing.tool_call(StepIdentity.of(context, step_type, record.turn_id), record)
