"""Pure decisions of built-in tools, tool questions, tool tasks, and plans in the session.

The Steps (``RunModel``, ``AwaitQuestionAnswer``, ``AwaitTimer``, the tool Steps,
``PollToolTask``) read committed values, ask these functions what changes, and write the answer,
so every rule is testable without an engine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Final

from dex_agents._built_in_tools import (
    WRITE_TODOS_CALLED_MORE_THAN_ONCE_ERROR,
    AskUserArguments,
    BuiltInTool,
    BuiltInToolArgumentsError,
    DurableWaitArguments,
    WriteTodosArguments,
    ask_user_result,
    durable_wait_result,
    enabled_built_in_tool,
    is_allowed_question_answer,
    parse_built_in_tool_arguments,
    parse_durable_wait_arguments,
    repeated_write_todos_call_ids,
)
from dex_agents._plans import (
    PLANNING_TURN_TOOL_REJECTION,
    planning_turn_allows_tool,
    write_todos_plan,
    write_todos_result,
)
from dex_agents._runner_contract import ToolInputRequested
from dex_agents._session.transitions import (
    InterruptResolutionDecision,
    finalize_tool_call,
    find_pending_interrupt,
    remove_interrupt,
)
from dex_agents._tool_policy import ResolvedToolPolicy, ToolEffect
from dex_agents._values import (
    AgentInterrupt,
    AgentInterruptResolution,
    AgentPlan,
    AgentToolCall,
    AgentToolCallStatus,
    AnswerQuestionRequest,
    InteractionMode,
    InterruptKind,
    QuestionAnswer,
    QuestionResolution,
    tool_input_interrupt_id,
)

__all__ = [
    "BUILT_IN_TOOL_POLICY",
    "MAX_TASK_POLL_INTERVAL_SECONDS",
    "QUESTION_INTERRUPT_ID_IN_USE_ERROR",
    "RequestedCallSettlement",
    "apply_question_resolution",
    "ask_user_interrupt",
    "decide_question_answer",
    "finish_durable_wait",
    "interrupt_id_of_question",
    "is_ask_user_record",
    "is_question_raised",
    "next_question_interrupt_id",
    "question_resolution_of",
    "raise_tool_question",
    "record_tool_question",
    "record_tool_task",
    "settle_requested_calls",
    "task_poll_interval_seconds",
]

BUILT_IN_TOOL_POLICY: Final = ResolvedToolPolicy(ToolEffect.READ, False)
"""Policy of every enabled built-in call: the read effect, no approval."""
MAX_TASK_POLL_INTERVAL_SECONDS: Final = 24 * 60 * 60
"""Longest wait between two polls of a tool task: a day."""
QUESTION_INTERRUPT_ID_IN_USE_ERROR: Final = (
    "the tool asked a question whose interrupt ID {interrupt_id} another call of this turn "
    "already uses"
)
"""Error of a tool call whose next question ID is already used by another call of its turn."""


def task_poll_interval_seconds(seconds: float) -> int:
    """Return a task poll interval as a Timer takes it: rounded up, from 1 second to a day.

    Example:
        >>> task_poll_interval_seconds(0.2), task_poll_interval_seconds(5.5)
        (1, 6)
    """
    return min(MAX_TASK_POLL_INTERVAL_SECONDS, max(1, math.ceil(seconds)))


@dataclass(frozen=True)
class RequestedCallSettlement:
    """What ``RunModel`` commits for one requested call beside storing its record.

    Attributes:
        record: The record to store; final when the call settled in ``RunModel``.
        interrupt: A question interrupt to add to ``PendingInterrupts`` (``ask_user``).
        plan: The plan a successful ``write_todos`` wrote.
    """

    record: AgentToolCall
    interrupt: AgentInterrupt | None = None
    plan: AgentPlan | None = None


def settle_requested_calls(
    records: Sequence[AgentToolCall],
    *,
    enabled_built_in_tools: Iterable[str],
    interaction_mode: InteractionMode,
    plan: AgentPlan | None,
    max_durable_wait: timedelta,
    interrupt_deadline: timedelta | None,
    now: datetime,
) -> list[RequestedCallSettlement]:
    """Decide the built-in and planning-turn rules for one model response's new records.

    Every enabled built-in call gets the read effect with no approval. A planning turn rejects
    every call but ``write_todos``. Invalid built-in arguments fail at once with the pure
    module's text. ``write_todos`` settles here (more than one in a response fails each);
    ``ask_user`` waits for an answer with an interrupt; ``durable_wait`` waits for its Timer.

    Example:
        >>> [s.record.status.value for s in settle_requested_calls([record], enabled_built_in_tools=(),
        ...     interaction_mode=InteractionMode.CHAT, plan=None, max_durable_wait=timedelta(days=1),
        ...     interrupt_deadline=None, now=now)]
        ['approved']
    """
    enabled = frozenset(str(name) for name in enabled_built_in_tools)
    repeated = repeated_write_todos_call_ids(
        (record.tool_call_id, record.tool_name)
        for record in records
        if enabled_built_in_tool(record.tool_name, enabled) is BuiltInTool.WRITE_TODOS
    )
    settlements: list[RequestedCallSettlement] = []
    current_plan = plan
    for record in records:
        settlement = _settle_one(
            record,
            enabled_built_in_tool(record.tool_name, enabled),
            is_repeated=record.tool_call_id in repeated,
            interaction_mode=interaction_mode,
            plan=current_plan,
            max_durable_wait=max_durable_wait,
            interrupt_deadline=interrupt_deadline,
            now=now,
        )
        current_plan = settlement.plan or current_plan
        settlements.append(settlement)
    return settlements


def _settle_one(
    record: AgentToolCall,
    tool: BuiltInTool | None,
    *,
    is_repeated: bool,
    interaction_mode: InteractionMode,
    plan: AgentPlan | None,
    max_durable_wait: timedelta,
    interrupt_deadline: timedelta | None,
    now: datetime,
) -> RequestedCallSettlement:
    if tool is not None:
        record = replace(
            record,
            effect=BUILT_IN_TOOL_POLICY.effect,
            requires_approval=False,
            status=AgentToolCallStatus.APPROVED,
        )
    if interaction_mode is InteractionMode.PLANNING and not (
        tool is BuiltInTool.WRITE_TODOS and planning_turn_allows_tool(record.tool_name)
    ):
        rejected = finalize_tool_call(
            record, AgentToolCallStatus.REJECTED, error=PLANNING_TURN_TOOL_REJECTION
        )
        return RequestedCallSettlement(rejected)
    if tool is None:
        return RequestedCallSettlement(record)
    if is_repeated:
        return _failed(record, WRITE_TODOS_CALLED_MORE_THAN_ONCE_ERROR)
    try:
        arguments = parse_built_in_tool_arguments(
            tool, record.arguments, max_durable_wait=max_durable_wait
        )
    except BuiltInToolArgumentsError as error:
        return _failed(record, str(error))
    return _settle_built_in(record, arguments, plan, interaction_mode, interrupt_deadline, now)


def _failed(record: AgentToolCall, error: str) -> RequestedCallSettlement:
    return RequestedCallSettlement(
        finalize_tool_call(record, AgentToolCallStatus.FAILED, error=error)
    )


def _settle_built_in(
    record: AgentToolCall,
    arguments: AskUserArguments | DurableWaitArguments | WriteTodosArguments,
    plan: AgentPlan | None,
    interaction_mode: InteractionMode,
    interrupt_deadline: timedelta | None,
    now: datetime,
) -> RequestedCallSettlement:
    if isinstance(arguments, WriteTodosArguments):
        written = write_todos_plan(plan, arguments.todos, interaction_mode, updated_at=now)
        final = finalize_tool_call(
            record, AgentToolCallStatus.SUCCEEDED, output=write_todos_result(written)
        )
        return RequestedCallSettlement(final, plan=written)
    if isinstance(arguments, DurableWaitArguments):
        return RequestedCallSettlement(
            replace(
                record,
                status=AgentToolCallStatus.WAITING_FOR_TIMER,
                wait_until=arguments.wait_until(now),
                wait_reason=arguments.reason,
            )
        )
    asking = replace(
        record,
        status=AgentToolCallStatus.AWAITING_ANSWER,
        question=arguments.question,
        choices=arguments.choices,
        allows_free_text=arguments.allows_free_text,
        question_count=1,
    )
    return RequestedCallSettlement(
        asking, interrupt=ask_user_interrupt(asking, now=now, deadline_after=interrupt_deadline)
    )


def ask_user_interrupt(
    record: AgentToolCall, *, now: datetime, deadline_after: timedelta | None
) -> AgentInterrupt:
    """Return the question interrupt of a record that asks (``ask_user`` or a tool's question).

    Its ID is the tool call ID, as ``ask_user`` asks; :func:`raise_tool_question` renames it.
    """
    return AgentInterrupt(
        interrupt_id=record.tool_call_id,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        kind=InterruptKind.QUESTION,
        turn_id=record.turn_id,
        arguments=record.arguments,
        deadline=now + deadline_after if deadline_after is not None else None,
        question=record.question,
        choices=record.choices,
        allows_free_text=record.allows_free_text,
        created_at=now,
    )


def is_ask_user_record(record: AgentToolCall, enabled_built_in_tools: Iterable[str]) -> bool:
    """Return whether ``record`` is a call of the enabled ``ask_user`` built-in."""
    return (
        enabled_built_in_tool(record.tool_name, enabled_built_in_tools) is BuiltInTool.ASK_USER
        and record.task_id is None
    )


def interrupt_id_of_question(record: AgentToolCall, *, is_ask_user: bool) -> str:
    """Return the interrupt ID of the record's current (raised) question.

    ``ask_user`` asks under the tool call ID; a tool or task asks its n-th question as
    ``<tool_call_id>-input-<n>``, where n is ``question_count`` once raised.

    Example:
        >>> interrupt_id_of_question(replace(record, question_count=2), is_ask_user=False)
        'call-1-input-2'
    """
    if is_ask_user:
        return record.tool_call_id
    return tool_input_interrupt_id(record.tool_call_id, max(record.question_count, 1))


def next_question_interrupt_id(record: AgentToolCall) -> str:
    """Return the ID the record's not-yet-raised tool question will get: ``-input-<n+1>``."""
    return tool_input_interrupt_id(record.tool_call_id, record.question_count + 1)


def is_question_raised(record: AgentToolCall) -> bool:
    """Return whether the record's current question has an interrupt (pending or resolved).

    A tool Step stores a question without raising it; ``AwaitQuestionAnswer`` raises it and counts
    it in ``question_count``, so a raised question is counted but not answered yet.
    """
    return record.question_count > len(record.input_answers)


def record_tool_question(record: AgentToolCall, request: ToolInputRequested) -> AgentToolCall:
    """Return the record after its tool or task asked ``request``: ``awaiting_answer``, not raised.

    Example:
        >>> record_tool_question(record, ToolInputRequested("Ship?")).status.value
        'awaiting_answer'
    """
    return replace(
        record,
        status=AgentToolCallStatus.AWAITING_ANSWER,
        question=request.question,
        choices=tuple(request.choices),
        allows_free_text=request.allows_free_text or not request.choices,
        input_continuation=request.continuation,
        task_answer_pending=False,
    )


def raise_tool_question(
    record: AgentToolCall,
    interrupts: Sequence[AgentInterrupt],
    ids_in_use: Iterable[str],
    *,
    now: datetime,
    deadline_after: timedelta | None,
) -> tuple[AgentToolCall, AgentInterrupt | None]:
    """Raise a stored tool question: the counted record and its interrupt.

    When another call of the turn already uses the ID, for its record or a pending interrupt, the
    record is ``failed`` instead and no interrupt is returned.
    """
    interrupt_id = next_question_interrupt_id(record)
    if interrupt_id in set(ids_in_use) or find_pending_interrupt(interrupts, interrupt_id):
        failed = finalize_tool_call(
            record,
            AgentToolCallStatus.FAILED,
            error=QUESTION_INTERRUPT_ID_IN_USE_ERROR.format(interrupt_id=interrupt_id),
        )
        return failed, None
    raised = replace(record, question_count=record.question_count + 1)
    interrupt = replace(
        ask_user_interrupt(raised, now=now, deadline_after=deadline_after),
        interrupt_id=interrupt_id,
    )
    return raised, interrupt


def record_tool_task(record: AgentToolCall, task_id: str, poll_interval: float) -> AgentToolCall:
    """Return the record of a call whose tool started a task: ``waiting_for_task``."""
    return replace(
        record,
        status=AgentToolCallStatus.WAITING_FOR_TASK,
        task_id=task_id,
        task_poll_interval_seconds=task_poll_interval_seconds(poll_interval),
        task_answer_pending=False,
    )


def apply_question_resolution(
    record: AgentToolCall,
    interrupt_id: str,
    resolution: QuestionResolution,
    answer: str | None,
    *,
    is_ask_user: bool,
) -> AgentToolCall:
    """Return the record after its question was answered, declined, or passed its deadline.

    ``ask_user`` becomes final with the model-visible result. A task's question goes back to the
    task (``waiting_for_task`` with the answer pending). A tool's answered question returns the
    call to ``approved`` so its tool Step runs again; a declined or expired one is ``rejected``.
    """
    answered = QuestionAnswer(
        interrupt_id=interrupt_id,
        question=record.question or "",
        resolution=resolution,
        answer=answer if resolution is QuestionResolution.ANSWERED else None,
    )
    resolved = replace(
        record,
        input_answers=(*record.input_answers, answered),
        question=None,
        choices=(),
        allows_free_text=True,
    )
    if record.task_id is not None:
        return replace(
            resolved, status=AgentToolCallStatus.WAITING_FOR_TASK, task_answer_pending=True
        )
    if resolution is QuestionResolution.ANSWERED:
        if is_ask_user:
            return finalize_tool_call(
                resolved, AgentToolCallStatus.SUCCEEDED, output=ask_user_result(resolution, answer)
            )
        return replace(resolved, status=AgentToolCallStatus.APPROVED)
    # No person rejected the call itself, so the model sees the session's text verbatim.
    return finalize_tool_call(
        resolved, AgentToolCallStatus.REJECTED, error=ask_user_result(resolution)
    )


def question_resolution_of(resolution: AgentInterruptResolution) -> QuestionResolution:
    """Return how a published resolution resolves a question: answered or declined."""
    if resolution.approved and resolution.answer is not None:
        return QuestionResolution.ANSWERED
    return QuestionResolution.DECLINED


def decide_question_answer(
    interrupts: Sequence[AgentInterrupt], request: AnswerQuestionRequest, now: datetime
) -> InterruptResolutionDecision:
    """Decide an ``answer_question`` call.

    Nothing is answered when the interrupt is not a pending question, is past its deadline, or the
    answer is blank or not an allowed choice.

    Example:
        >>> decide_question_answer([], AnswerQuestionRequest("c1", "yes"), now).resolution is None
        True
    """
    unchanged = InterruptResolutionDecision(None, tuple(interrupts))
    pending = find_pending_interrupt(interrupts, request.interrupt_id)
    if pending is None or pending.kind is not InterruptKind.QUESTION:
        return unchanged
    if pending.deadline is not None and now >= pending.deadline:
        return unchanged
    if not is_allowed_question_answer(
        request.answer, choices=pending.choices, allows_free_text=pending.allows_free_text
    ):
        return unchanged
    resolution = AgentInterruptResolution(
        interrupt_id=request.interrupt_id, approved=True, answer=request.answer
    )
    return InterruptResolutionDecision(
        resolution, tuple(remove_interrupt(interrupts, request.interrupt_id))
    )


def finish_durable_wait(record: AgentToolCall, max_durable_wait: timedelta) -> str:
    """Return the model-visible result of a ``durable_wait`` record whose Timer fired.

    ``RunModel`` checked the arguments against the same ``max_durable_wait``, so they parse.
    """
    parsed = parse_durable_wait_arguments(record.arguments, max_durable_wait=max_durable_wait)
    return durable_wait_result(parsed.duration_seconds, parsed.reason)
