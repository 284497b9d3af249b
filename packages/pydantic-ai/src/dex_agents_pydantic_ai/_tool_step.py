"""One tool Step: the call runs through the agent's own ``CallToolsNode``, nothing else.

The Step starts a Pydantic AI run whose history is one ``ModelResponse`` holding just this call,
so Pydantic AI resolves the tool, validates the arguments, builds the ``RunContext`` (with the deps
of the Step's deps factory), runs capability hooks and the tool (a function tool or an MCP
toolset's), and turns ``ModelRetry``, ``ToolFailed`` and invalid arguments into the tool return it
would send the model. The run stops before the next ``ModelRequestNode``; no model is called.

A tool that asks Pydantic AI for approval (``requires_approval=True`` or ``ApprovalRequired``)
without a session approval, or defers its call as a question (``CallDeferred(kind='question')``),
becomes a session question (``ToolInputRequested``); the answer approves the call or is its result.
"""

from __future__ import annotations

from typing import Any, Final

from dex_agents import (
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
)
from dex_agents.adapters import (
    invalid_arguments_error,
    tool_question_answers,
    unknown_tool_error,
)
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.run import AgentRun
from pydantic_graph import End

from dex_agents_pydantic_ai._runner_config import DepsRequest, RunnerConfig

__all__ = ["APPROVE_CHOICE", "REJECT_CHOICE", "run_tool_step"]

APPROVE_CHOICE: Final = "approve"
"""The answer that approves a call whose tool asked Pydantic AI for approval."""
REJECT_CHOICE: Final = "reject"
_APPROVAL_CONTINUATION: Final = "pydantic_ai:approval"
_QUESTION_CONTINUATION: Final = "pydantic_ai:question"


async def run_tool_step(
    config: RunnerConfig[Any], call: DeferredToolExecution
) -> DeferredToolOutcome:
    """Run the real tool of ``call`` once.

    Raises:
        ToolExecutionError: For an unknown tool, invalid arguments, ``ModelRetry``, ``ToolFailed``,
            a denied approval, or a tool that deferred its call to run elsewhere.
        Exception: Whatever else the tool raises (a Step failure, handled by the call's effect).
    """
    record = call.tool_call
    part = ToolCallPart(record.tool_name, record.arguments, tool_call_id=record.tool_call_id)
    deps = await config.deps_for(DepsRequest(call.flow_id, call.turn_id, {}, call))
    run: AgentRun[Any, Any]
    async with config.agent.iter(
        None,
        message_history=[ModelResponse(parts=[part])],
        output_type=[str, DeferredToolRequests],
        deferred_tool_results=_answers(call),
        model=config.model_for({}),
        deps=deps,
        conversation_id=call.flow_id,
    ) as run:
        return await _run_call(run, call)


async def _run_call(run: AgentRun[Any, Any], call: DeferredToolExecution) -> DeferredToolOutcome:
    """Drive the run through the call's ``CallToolsNode``, never into a model request."""
    record = call.tool_call
    node = run.next_node
    while not isinstance(node, End) and not Agent.is_model_request_node(node):
        node = await run.next(node)
    if isinstance(node, End):
        return _deferred_again(call, node.data.output)
    returned = [
        item
        for item in node.request.parts
        if isinstance(item, ToolReturnPart) and item.tool_call_id == record.tool_call_id
    ]
    if not returned:
        raise ToolExecutionError(f"tool {record.tool_name} returned no result")
    return _outcome(returned[0])


def _answers(call: DeferredToolExecution) -> DeferredToolResults | None:
    """The results that let the run go on: the session's approval, or the user's answer."""
    record = call.tool_call
    call_id = record.tool_call_id
    if record.input_continuation == _QUESTION_CONTINUATION and call.input_answers:
        return DeferredToolResults(calls={call_id: _answer_text(call)})
    if record.input_continuation == _APPROVAL_CONTINUATION and call.input_answers:
        approved = _answer_text(call) == APPROVE_CHOICE
        return DeferredToolResults(
            approvals={call_id: ToolApproved() if approved else ToolDenied()}
        )
    if record.requires_approval:
        # A person approved it in the session, so the tool sees ctx.tool_call_approved.
        return DeferredToolResults(approvals={call_id: ToolApproved()})
    return None


def _answer_text(call: DeferredToolExecution) -> str:
    return tool_question_answers(call)[-1]


def _deferred_again(call: DeferredToolExecution, output: object) -> ToolInputRequested:
    record = call.tool_call
    if not isinstance(output, DeferredToolRequests):
        raise ToolExecutionError(f"tool {record.tool_name} ended the run without a result")
    call_id = record.tool_call_id
    if any(item.tool_call_id == call_id for item in output.approvals):
        return ToolInputRequested(
            f"Approve the call of {record.tool_name} with {record.arguments}?",
            choices=(APPROVE_CHOICE, REJECT_CHOICE),
            allows_free_text=False,
            continuation=_APPROVAL_CONTINUATION,
        )
    if output.kind(call_id) == "question":
        metadata = output.metadata.get(call_id, {})
        choices = metadata.get("choices")
        return ToolInputRequested(
            str(metadata.get("question") or f"{record.tool_name} asks for an answer."),
            choices=tuple(str(choice) for choice in choices) if isinstance(choices, list) else (),
            allows_free_text=bool(metadata.get("allows_free_text", True)),
            continuation=_QUESTION_CONTINUATION,
        )
    raise ToolExecutionError(
        f"tool {record.tool_name} deferred its call with CallDeferred, but in a durable session "
        "every call already runs in its own tool Step: return the result, or return "
        "ToolTaskStarted for remote work the runner's task poller polls"
    )


def _outcome(returned: ToolReturnPart) -> DeferredToolOutcome:
    if returned.outcome == "success":
        content = returned.content
        if isinstance(content, DeferredToolOutcome):
            return content
        return ToolExecutionResult(returned.model_response_str())
    # failed (ToolFailed), retried (ModelRetry, invalid arguments, unknown tool), denied; the
    # kit's texts for an unknown tool and invalid arguments, as in every runner.
    cause = returned.retry.cause if returned.retry is not None else None
    if cause in ("unknown_tool", "unavailable_tool"):
        raise unknown_tool_error(returned.tool_name)
    text = returned.model_response_str(wrap_if_error=False)
    if cause == "validation_error":
        raise invalid_arguments_error(returned.tool_name, text)
    raise ToolExecutionError(text)
